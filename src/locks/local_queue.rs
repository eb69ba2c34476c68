//! The local queue (lock cohorting): guard-style waiters of one client on one lock queue inside
//! the process behind one ZooKeeper node per *turn*, and hand the node on to each other without a
//! round trip.
//!
//! It sits above the three layers Curator's `InterProcessMutex` is made of: a turn's node is
//! acquired through [`LockInternals`] (and so through the driver) like any other contender's; what
//! is new is that the hold it grants is then shared, one local holder after the other (readers: all
//! at once), each with a [`Hold`] of its own.
//!
//! * **Turns.** A waiter joins the newest turn while that turn's node is still being acquired; once
//!   the node is granted the turn is closed to newcomers, who start the next turn — a node of their
//!   own at the tail of the ZooKeeper queue, created at once. So a process passes the lock locally
//!   only to the waiters that were queued when it got its turn, and a contender of another process
//!   (ours or Curator's) waits at most one such batch per process ahead of it (lock cohorting,
//!   Dice, Marathe and Shavit, PPoPP 2012, with the batch bound by arrival instead of a count).
//! * **Hand-off.** The releasing holder grants the next waiter of its turn under the queue's lock:
//!   no round trip. The last holder of a turn deletes the node.
//! * **Tokens.** The `handoff`-th holder of a node gets the fencing token `(czxid, handoff)`;
//!   the next node granted has a larger czxid, so tokens increase across every holder for free.
//! * **A node that is not `Held` is never handed on** (session suspended or ended, node deleted,
//!   a revocation requested, or its place in line backing a downgrade's read node): the turn is
//!   closed and its waiters move to the next turn, a node of its own. A watcher started for a turn
//!   with waiters moves them as soon as the node is lost, without waiting for the holder.
//! * **Cancellation.** A waiter that is dropped or times out leaves its turn; the last one out of
//!   a turn still being acquired stops the acquisition, whose node is then deleted (cancel safety
//!   of [`LockInternals`]).

use std::collections::VecDeque;
use std::sync::{Arc, Weak};
use std::time::Instant;

use tokio::sync::{oneshot, Notify};
use tracing::debug;

use super::driver::LockDriver;
use super::hold::{Hold, HoldState, LocalLink, LocalTurns};
use super::internals::{LockInternals, Wait, CLEANUP_SLACK};
use super::revocation::REVOKE_MESSAGE;
use crate::error::{Error, Result};

/// What a waiter is told: its hold, "not acquired" (a single attempt that failed), or an error.
type Granted = Result<Option<Arc<Hold>>>;

/// The local queue of one lock of one client (see the module documentation).
pub(crate) struct LocalQueue<D: LockDriver> {
    internals: Arc<LockInternals<D>>,
    data: Vec<u8>,
    /// Readers: every waiter of a turn holds its node at once.
    shared: bool,
    /// Each local holder watches the node's data from its grant (Curator's revocable locks).
    revocable: bool,
    /// Where acquisitions and watchers run, also when a guard is dropped outside the runtime.
    runtime: tokio::runtime::Handle,
    me: Weak<LocalQueue<D>>,
    state: parking_lot::Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Oldest first. At most one turn is being acquired (the newest); the others are granted.
    turns: VecDeque<Turn>,
    next_id: u64,
}

struct Turn {
    id: u64,
    /// The turn's node, once granted.
    node: Option<Arc<Hold>>,
    /// In arrival order.
    waiters: VecDeque<Waiter>,
    /// Local holders now.
    holders: usize,
    /// Grants so far: the hand-off count of the next holder's token.
    grants: u32,
    /// No more local grants of this node; newcomers and the turn's waiters go to the next turn.
    closed: bool,
    /// Tells the acquirer to give up, once no waiter is left while the node is being acquired.
    cancel: Arc<Notify>,
}

struct Waiter {
    id: u64,
    /// A `try_lock`: one attempt, never carried over to another one.
    one_attempt: bool,
    tx: oneshot::Sender<Granted>,
}

impl<D: LockDriver> LocalQueue<D> {
    /// A queue making its nodes through `internals` with `data`, running its tasks on `runtime`.
    pub(crate) fn new(
        internals: Arc<LockInternals<D>>,
        data: Vec<u8>,
        shared: bool,
        revocable: bool,
        runtime: tokio::runtime::Handle,
    ) -> Arc<Self> {
        Arc::new_cyclic(|me| LocalQueue {
            internals,
            data,
            shared,
            revocable,
            runtime,
            me: me.clone(),
            state: parking_lot::Mutex::new(State::default()),
        })
    }

    fn path(&self) -> &str {
        self.internals.base_path()
    }

    /// Waits for a hold through the local queue: `Ok(None)` when `wait` ended first (for one
    /// attempt: at once if another local task holds or waits, for an exclusive lock).
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped waiter leaves its turn, and a hold granted to it meanwhile is handed
    /// on; the last waiter of a turn being acquired stops the acquisition (its node is deleted).
    pub(crate) async fn acquire(&self, wait: Wait) -> Result<Option<Arc<Hold>>> {
        let one_attempt = wait == Wait::OneAttempt;
        let (id, rx) = {
            let mut state = self.state.lock();
            if one_attempt && !self.shared && !state.turns.is_empty() {
                // Held or waited for by another local task: not free, and no round trip needed.
                return Ok(None);
            }
            let id = state.next_id;
            state.next_id += 1;
            let (tx, rx) = oneshot::channel();
            let waiter = Waiter { id, one_attempt, tx };
            match state.turns.back_mut().filter(|turn| !one_attempt && turn.node.is_none() && !turn.closed) {
                Some(turn) => turn.waiters.push_back(waiter),
                None => self.start_turn(&mut state, VecDeque::from([waiter]), one_attempt),
            }
            (id, rx)
        };
        let mut pending = Pending { queue: self, id, rx: Some(rx) };
        let Some(rx) = pending.rx.as_mut() else {
            return Err(Error::Closed { path: self.path().to_string() });
        };
        let received = match wait.deadline() {
            Some(deadline) => match tokio::time::timeout_at(deadline.into(), rx).await {
                Ok(received) => received,
                Err(_) => {
                    let (granted, stopped_acquisition) = pending.leave();
                    if stopped_acquisition {
                        // As a timed-out attempt of one's own: the caller normally finds no node.
                        self.internals.client().wait_background_deletes(Instant::now() + CLEANUP_SLACK).await;
                    }
                    return granted.unwrap_or(Ok(None));
                }
            },
            None => rx.await,
        };
        pending.rx = None;
        // A dropped sender: the queue was torn down (cannot happen while we hold it).
        received.unwrap_or_else(|_| Err(Error::Closed { path: self.path().to_string() }))
    }

    /// Opens a turn for `waiters` and starts acquiring its node.
    fn start_turn(&self, state: &mut State, waiters: VecDeque<Waiter>, one_attempt: bool) {
        let id = state.next_id;
        state.next_id += 1;
        let cancel = Arc::new(Notify::new());
        state.turns.push_back(Turn {
            id,
            node: None,
            waiters,
            holders: 0,
            grants: 0,
            closed: false,
            cancel: cancel.clone(),
        });
        self.spawn_acquirer(id, if one_attempt { Wait::OneAttempt } else { Wait::Forever }, cancel);
    }

    fn spawn_acquirer(&self, turn: u64, wait: Wait, cancel: Arc<Notify>) {
        let Some(queue) = self.me.upgrade() else { return };
        self.runtime.spawn(async move {
            let outcome = tokio::select! {
                outcome = queue.internals.attempt_shared_node(wait, &queue.data) => Some(outcome),
                // The attempt is dropped: its node is deleted in the background.
                _ = cancel.notified() => None,
            };
            queue.acquired(turn, outcome);
        });
    }

    /// The acquisition of `turn`'s node ended: `None` if it was stopped for want of waiters.
    fn acquired(&self, turn_id: u64, outcome: Option<Result<Option<Arc<Hold>>>>) {
        let mut release = None;
        {
            let mut state = self.state.lock();
            let Some(at) = state.turns.iter().position(|turn| turn.id == turn_id) else {
                drop(state);
                if let Some(Ok(Some(node))) = outcome {
                    node.release_in_background();
                }
                return;
            };
            let turn = &mut state.turns[at];
            match outcome {
                Some(Ok(Some(node))) if !turn.waiters.is_empty() => {
                    debug!(path = %self.path(), node = %node.path(), waiters = turn.waiters.len(), "local turn granted");
                    turn.node = Some(node.clone());
                    if self.grant(turn) {
                        release = state.turns.remove(at).and_then(|turn| turn.node);
                    } else if !self.shared && !turn.waiters.is_empty() {
                        self.watch_turn(turn_id, node);
                    }
                }
                Some(Ok(Some(node))) => {
                    // Every waiter left while the node was granted.
                    state.turns.remove(at);
                    release = Some(node);
                }
                Some(Ok(None)) => {
                    // A single attempt that failed: its waiters are told; the others wait on.
                    let (tried, waiting): (VecDeque<_>, VecDeque<_>) =
                        turn.waiters.drain(..).partition(|waiter| waiter.one_attempt);
                    for waiter in tried {
                        let _ = waiter.tx.send(Ok(None));
                    }
                    turn.waiters = waiting;
                    self.restart_or_remove(&mut state, at);
                }
                Some(Err(error)) => {
                    for waiter in turn.waiters.drain(..) {
                        let _ = waiter.tx.send(Err(error.clone()));
                    }
                    state.turns.remove(at);
                }
                None => self.restart_or_remove(&mut state, at),
            }
        }
        if let Some(node) = release {
            node.release_in_background();
        }
    }

    /// A turn whose acquisition ended without a node: acquire again for the waiters it still has
    /// (a waiter may have come after a stop was asked for), else drop it.
    fn restart_or_remove(&self, state: &mut State, at: usize) {
        let turn = &mut state.turns[at];
        if turn.waiters.is_empty() {
            state.turns.remove(at);
            return;
        }
        let cancel = Arc::new(Notify::new());
        turn.cancel = cancel.clone();
        let id = turn.id;
        self.spawn_acquirer(id, Wait::Forever, cancel);
    }

    /// Grants `turn`'s node to its next waiter (readers: to all of them). True when the turn is
    /// over: no holder and no waiter left.
    fn grant(&self, turn: &mut Turn) -> bool {
        let (Some(node), Some(queue)) = (turn.node.clone(), self.me.upgrade()) else {
            return turn.holders == 0 && turn.waiters.is_empty();
        };
        while let Some(waiter) = turn.waiters.pop_front() {
            let link = LocalLink { queue: queue.clone(), turn: turn.id };
            let hold = Hold::local(&node, turn.grants, link, self.internals.labels().hold_meter());
            turn.grants = turn.grants.saturating_add(1);
            turn.holders += 1;
            if self.revocable {
                // A request made while the node was held before is seen at once.
                drop(hold.watch_data());
            }
            match waiter.tx.send(Ok(Some(hold))) {
                Ok(()) if self.shared => {}
                Ok(()) => break,
                Err(_) => {
                    // Its waiter is gone (it leaves under this lock, so this is only a safeguard).
                    turn.holders -= 1;
                }
            }
        }
        turn.holders == 0 && turn.waiters.is_empty()
    }

    /// Moves `turn`'s waiters on as soon as its node is lost, without waiting for its holder.
    fn watch_turn(&self, turn: u64, node: Arc<Hold>) {
        let queue = self.me.clone();
        self.runtime.spawn(async move {
            node.lost().await;
            if let Some(queue) = queue.upgrade() {
                queue.close_turn(turn);
            }
        });
    }

    /// Closes the turn at `at` to further local grants: its waiters join the turn being acquired
    /// (ahead of that turn's own waiters, who came later), or a new one.
    fn close_at(&self, state: &mut State, at: usize) {
        let turn = &mut state.turns[at];
        if turn.closed || turn.node.is_none() {
            return;
        }
        turn.closed = true;
        let moving = std::mem::take(&mut turn.waiters);
        debug!(path = %self.path(), moving = moving.len(), "local turn closed: its waiters move to the next turn");
        if moving.is_empty() {
            return;
        }
        match state.turns.iter_mut().skip(at + 1).find(|turn| turn.node.is_none() && !turn.closed) {
            Some(next) => {
                let mut waiters = moving;
                waiters.append(&mut next.waiters);
                next.waiters = waiters;
            }
            None => self.start_turn(state, moving, false),
        }
    }

    /// Takes waiter `id` out of its turn: true if it was still waiting, and whether it was the last
    /// waiter of a turn being acquired (whose acquisition is then stopped).
    fn remove_waiter(&self, id: u64) -> (bool, bool) {
        let mut state = self.state.lock();
        for turn in state.turns.iter_mut() {
            if let Some(at) = turn.waiters.iter().position(|waiter| waiter.id == id) {
                turn.waiters.remove(at);
                let stop = turn.node.is_none() && turn.waiters.is_empty();
                if stop {
                    turn.cancel.notify_one();
                }
                return (true, stop);
            }
        }
        (false, false)
    }
}

impl<D: LockDriver> LocalTurns for LocalQueue<D> {
    fn leave(&self, turn_id: u64, data: &[u8]) -> Option<Arc<Hold>> {
        let mut state = self.state.lock();
        let at = state.turns.iter().position(|turn| turn.id == turn_id)?;
        let turn = &mut state.turns[at];
        turn.holders = turn.holders.saturating_sub(1);
        let node_held = turn.node.as_ref().is_some_and(|node| node.hold_state() == HoldState::Held);
        if !node_held || data == REVOKE_MESSAGE {
            // Never hand on a node that is not certainly ours, nor one someone asked for.
            self.close_at(&mut state, at);
        }
        let turn = &mut state.turns[at];
        let over = if self.shared || turn.closed {
            turn.holders == 0 && turn.waiters.is_empty()
        } else {
            self.grant(turn)
        };
        if over {
            return state.turns.remove(at).and_then(|turn| turn.node);
        }
        None
    }

    fn close_turn(&self, turn_id: u64) {
        let mut state = self.state.lock();
        if let Some(at) = state.turns.iter().position(|turn| turn.id == turn_id) {
            self.close_at(&mut state, at);
        }
    }
}

/// A waiter in a local queue: leaves it when dropped before it was told.
struct Pending<'a, D: LockDriver> {
    queue: &'a LocalQueue<D>,
    id: u64,
    rx: Option<oneshot::Receiver<Granted>>,
}

impl<D: LockDriver> Pending<'_, D> {
    /// Leaves the queue now: what it was told already, if anything (a grant racing the leave), and
    /// whether leaving stopped an acquisition.
    fn leave(&mut self) -> (Option<Granted>, bool) {
        let Some(mut rx) = self.rx.take() else { return (None, false) };
        let (waiting, stopped) = self.queue.remove_waiter(self.id);
        if waiting {
            return (None, stopped);
        }
        // Told under the queue's lock before we looked: the answer is in the channel.
        (rx.try_recv().ok(), false)
    }
}

impl<D: LockDriver> Drop for Pending<'_, D> {
    fn drop(&mut self) {
        if let (Some(Ok(Some(hold))), _) = self.leave() {
            // Granted to a waiter that is gone: hand it on.
            hold.release_in_background();
        }
    }
}
