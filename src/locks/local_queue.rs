//! The local queue (lock cohorting): guard-style waiters of one client on one lock queue inside
//! the process behind one ZooKeeper node per *turn*, and hand the node on to each other without a
//! round trip.
//!
//! It sits above the three layers Curator's `InterProcessMutex` is made of: a turn's node is
//! acquired through [`LockInternals`] (and so through the driver) like any other contender's; what
//! is new is that the hold it grants is then shared, one local holder after the other (readers: all
//! at once), each with a [`Hold`] of its own.
//!
//! * **Turns.** Waiters gather in a *collecting* turn. The turn starts acquiring its node only when
//!   the process has no other open node of this lock in line — the previous turn's node was deleted
//!   (or, for readers, the previous read node was granted) — and from then on takes no newcomer:
//!   they gather in the next turn. So every waiter of a turn arrived before its node was created,
//!   and a contender of another process (ours or Curator's) is never overtaken by a local waiter
//!   that arrived after it queued: it waits for at most the one turn of this process that holds or
//!   is in line ahead of it (lock cohorting, Dice, Marathe and Shavit, PPoPP 2012, with the batch
//!   bound by arrival instead of a count).
//! * **Hand-off.** The releasing holder grants the next waiter of its turn under the queue's lock:
//!   no round trip. The last holder of a turn deletes the node, and the next turn starts.
//! * **Tokens.** The `handoff`-th holder of a node gets the fencing token `(czxid, handoff)`;
//!   the next node granted has a larger czxid, so tokens increase across every holder for free.
//! * **A node that is not `Held` is never handed on** (session suspended or ended, node deleted,
//!   a revocation requested, or its place in line backing a downgrade's read node): the turn is
//!   closed and its waiters move to the next turn, a node of its own. A watcher started for a turn
//!   with waiters moves them as soon as the node is lost, without waiting for the holder.
//! * **Cancellation.** A waiter that is dropped or times out leaves its turn; the last one out of
//!   a turn being acquired stops the acquisition, whose node is then deleted (cancel safety of
//!   [`LockInternals`]).

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
    /// Oldest first: granted turns, then at most one being acquired, then the collecting one.
    turns: VecDeque<Turn>,
    next_id: u64,
}

struct Turn {
    id: u64,
    /// Its node is being acquired (or was granted): it takes no newcomer.
    started: bool,
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
    /// A task closes the turn once its node is lost.
    watched: bool,
    /// Tells the acquirer to give up, once no waiter is left while the node is being acquired.
    cancel: Arc<Notify>,
}

struct Waiter {
    id: u64,
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
        let (id, rx, driving) = {
            let mut state = self.state.lock();
            // A turn whose node is lost (or closed) holds nothing: only ZooKeeper can tell.
            let busy =
                |turn: &Turn| !turn.waiters.is_empty() || (turn.started && turn.node.is_none()) || self.hands_on(turn);
            if one_attempt && !self.shared && state.turns.iter().any(busy) {
                // Held or waited for by another local task: not free, and no round trip needed.
                return Ok(None);
            }
            let id = state.next_id;
            state.next_id += 1;
            let (tx, rx) = oneshot::channel();
            let waiter = Waiter { id, tx };
            let free = one_attempt || !self.blocked(&state);
            let driving = match state.turns.back_mut().filter(|turn| !one_attempt && !turn.started) {
                Some(turn) => {
                    turn.waiters.push_back(waiter);
                    None
                }
                // One attempt always has a node of its own, at once.
                None if free => {
                    let at = self.new_turn(&mut state, VecDeque::from([waiter]));
                    let turn = &mut state.turns[at];
                    turn.started = true;
                    Some(turn.id)
                }
                None => {
                    self.new_turn(&mut state, VecDeque::from([waiter]));
                    self.watch_blocking_turn(&mut state);
                    None
                }
            };
            (id, rx, driving)
        };
        let mut pending = Pending { queue: self, id, rx: Some(rx), driving };
        if let Some(turn) = driving {
            // A turn started with this waiter alone takes nobody else: the waiter acquires its
            // node itself, with its own deadline (no task to spawn, and a timed-out attempt
            // deletes its node as a node of one's own does). A drop here stops the attempt.
            // Boxed: only a turn's first waiter runs it, and every waiter's future would be as large.
            let outcome = Box::pin(self.internals.attempt_shared_node(wait, &self.data)).await;
            pending.driving = None;
            self.acquired(turn, Some(outcome));
        }
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

    /// Appends a collecting turn for `waiters`; returns its index.
    fn new_turn(&self, state: &mut State, waiters: VecDeque<Waiter>) -> usize {
        let id = state.next_id;
        state.next_id += 1;
        state.turns.push_back(Turn {
            id,
            started: false,
            node: None,
            waiters,
            holders: 0,
            grants: 0,
            closed: false,
            watched: false,
            cancel: Arc::new(Notify::new()),
        });
        state.turns.len() - 1
    }

    /// Starts the first collecting turn if nothing of this process stands in line before it: no
    /// turn being acquired and — for an exclusive lock — no open granted turn (its node would be
    /// ahead; the next node is made once it is deleted, behind whoever queued meanwhile).
    fn pump(&self, state: &mut State) {
        if self.blocked(state) {
            return;
        }
        if let Some(turn) = state.turns.iter_mut().find(|turn| !turn.started) {
            self.start(turn, Wait::Forever);
        }
    }

    /// Whether something of this process stands in line for the lock (see [`pump`](Self::pump)).
    fn blocked(&self, state: &State) -> bool {
        state.turns.iter().any(|turn| (turn.started && turn.node.is_none()) || self.hands_on(turn))
    }

    /// An exclusive turn whose node is granted and still handed on: its node stands in line
    /// ahead of any other of ours. A lost node holds nothing (its turn is closed once seen lost).
    fn hands_on(&self, turn: &Turn) -> bool {
        !self.shared && !turn.closed && turn.node.as_ref().is_some_and(|node| node.hold_state() != HoldState::Lost)
    }

    /// Makes sure the turn that keeps the collecting turn waiting is watched, so that its loss
    /// (session, deleted node) lets the waiters go on at once, not when its holder lets go.
    fn watch_blocking_turn(&self, state: &mut State) {
        let me = self.me.clone();
        for turn in state.turns.iter_mut().filter(|turn| !turn.watched) {
            if let Some(node) = turn.node.clone().filter(|_| !self.shared && !turn.closed) {
                turn.watched = true;
                Self::watch_turn(&self.runtime, me.clone(), turn.id, node);
            }
        }
    }

    /// Starts acquiring `turn`'s node: it takes no newcomer from now on.
    fn start(&self, turn: &mut Turn, wait: Wait) {
        turn.started = true;
        let cancel = Arc::new(Notify::new());
        turn.cancel = cancel.clone();
        self.spawn_acquirer(turn.id, wait, cancel);
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
                        turn.watched = true;
                        Self::watch_turn(&self.runtime, self.me.clone(), turn_id, node);
                    }
                }
                Some(Ok(Some(node))) => {
                    // Every waiter left while the node was granted.
                    state.turns.remove(at);
                    release = Some(node);
                }
                Some(Ok(None)) => {
                    // A single attempt that failed: its waiter is told.
                    for waiter in turn.waiters.drain(..) {
                        let _ = waiter.tx.send(Ok(None));
                    }
                    state.turns.remove(at);
                }
                Some(Err(error)) => {
                    for waiter in turn.waiters.drain(..) {
                        let _ = waiter.tx.send(Err(error.clone()));
                    }
                    state.turns.remove(at);
                }
                None if turn.waiters.is_empty() => {
                    state.turns.remove(at);
                }
                None => {
                    // Cannot happen (a started turn takes no waiter); acquire for them all the same.
                    self.start(turn, Wait::Forever);
                }
            }
            self.pump(&mut state);
            if !self.shared && state.turns.iter().any(|turn| !turn.started) {
                // Waiters gather behind a granted turn: they must learn of its loss at once.
                self.watch_blocking_turn(&mut state);
            }
        }
        if let Some(node) = release {
            node.release_in_background();
        }
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
                // A request made while the node was held before is seen at once. The monitor runs
                // on the queue's runtime: a guard dropped on a plain thread hands the node on here.
                let _runtime = self.runtime.enter();
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
    fn watch_turn(runtime: &tokio::runtime::Handle, queue: Weak<Self>, turn: u64, node: Arc<Hold>) {
        runtime.spawn(async move {
            node.lost().await;
            if let Some(queue) = queue.upgrade() {
                queue.close_turn(turn);
            }
        });
    }

    /// Closes the turn at `at` to further local grants: its waiters go ahead of the collecting
    /// turn's (they came earlier), which starts at once if nothing else of ours is in line.
    fn close_at(&self, state: &mut State, at: usize) {
        let turn = &mut state.turns[at];
        if turn.closed || turn.node.is_none() {
            return;
        }
        turn.closed = true;
        let mut moving = std::mem::take(&mut turn.waiters);
        debug!(path = %self.path(), moving = moving.len(), "local turn closed: its waiters move to the next turn");
        if !moving.is_empty() {
            match state.turns.iter_mut().skip(at + 1).find(|turn| !turn.started) {
                Some(next) => {
                    moving.append(&mut next.waiters);
                    next.waiters = moving;
                }
                None => {
                    self.new_turn(state, moving);
                }
            }
        }
        self.pump(state);
    }

    /// Takes waiter `id` out of its turn: true if it was still waiting, and whether it was the last
    /// waiter of a turn being acquired (whose acquisition is then stopped).
    fn remove_waiter(&self, id: u64) -> (bool, bool) {
        let mut state = self.state.lock();
        let found = state.turns.iter().enumerate().find_map(|(at, turn)| {
            turn.waiters.iter().position(|waiter| waiter.id == id).map(|position| (at, position))
        });
        let Some((at, position)) = found else { return (false, false) };
        let turn = &mut state.turns[at];
        turn.waiters.remove(position);
        if !turn.waiters.is_empty() || turn.node.is_some() {
            return (true, false);
        }
        if turn.started {
            // The acquirer gives up and deletes its node; `acquired` then drops the turn.
            turn.cancel.notify_one();
            return (true, true);
        }
        state.turns.remove(at);
        (true, false)
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
        let over =
            if self.shared || turn.closed { turn.holders == 0 && turn.waiters.is_empty() } else { self.grant(turn) };
        if !over {
            return None;
        }
        let node = state.turns.remove(at).and_then(|turn| turn.node);
        self.pump(&mut state);
        node
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
    /// The turn whose node this waiter is acquiring itself, while it does.
    driving: Option<u64>,
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
        if let Some(turn) = self.driving.take() {
            // Its attempt was dropped (its node is deleted in the background): the turn, empty
            // now, goes, and the next one may start.
            self.queue.acquired(turn, None);
        }
    }
}
