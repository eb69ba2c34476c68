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
//!   a turn being acquired stops the acquisition at once: the attempt (its node, or its create in
//!   flight) is dropped by the leaving waiter itself, so the node's delete is handed over before
//!   the waiter returns (cancel safety of [`LockInternals`]).
//! * **Runtimes.** The queue belongs to no waiter's runtime. Its tasks (a turn's acquisition, the
//!   watcher of a turn's node) run on the client's runtime — where its session and delete queue
//!   run, so it is driven while the client works, unlike a waiter's (a current-thread runtime
//!   whose `block_on` returned strands its tasks, and the waiter that left it strands nobody) —
//!   and are spawned after the queue's lock is released. A task dropped unfinished (its runtime
//!   shut down, before it ran or while it ran) reports it: an acquisition's attempt is dropped
//!   (its node deleted in the background) and the turn is acquired again, from then on on the
//!   runtime of a waiter that needs it (the first whose runtime is not known to be shut down); a
//!   watcher is started again. A turn none of whose waiters can run it waits for them to leave
//!   (their runtime drops them), then the next turn starts.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Poll, Waker};
use std::time::Instant;

use tokio::runtime::Handle;
use tokio::sync::{oneshot, Notify};
use tracing::debug;

use super::driver::LockDriver;
use super::hold::{Hold, HoldState, LocalLink, LocalTurns};
use super::internals::{LockInternals, Wait, CLEANUP_SLACK};
use super::revocation::REVOKE_MESSAGE;
use crate::error::{Error, Result};

/// What a waiter is told: its hold, "not acquired" (a single attempt that failed), or an error.
type Granted = Result<Option<Arc<Hold>>>;

/// A turn's attempt at its node, owned by its [`Acquisition`].
type Attempt = Pin<Box<dyn Future<Output = Result<Option<Arc<Hold>>>> + Send>>;

/// The local queue of one lock of one client (see the module documentation).
pub(crate) struct LocalQueue<D: LockDriver> {
    internals: Arc<LockInternals<D>>,
    data: Vec<u8>,
    /// Readers: every waiter of a turn holds its node at once.
    shared: bool,
    /// Each local holder watches the node's data from its grant (Curator's revocable locks).
    revocable: bool,
    me: Weak<LocalQueue<D>>,
    state: parking_lot::Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Oldest first: granted turns, then at most one being acquired, then the collecting one.
    turns: VecDeque<Turn>,
    next_id: u64,
    /// Tasks to spawn once the lock is released: spawning on a runtime that is shut down drops
    /// the task at once, and its drop reports back under this lock.
    spawns: VecDeque<Task>,
    /// A thread is spawning `spawns`: tasks queued meanwhile are left to it.
    spawning: bool,
    /// A task spawned on the client's runtime was dropped unfinished: it is shut down, and tasks
    /// go to the waiters' runtimes.
    client_runtime_down: bool,
}

/// A task of the queue, for the turn of this id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Task {
    /// Acquires the turn's node.
    Acquire(u64),
    /// Closes the turn once its node is lost.
    Watch(u64),
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
    /// The acquisition of its node by a spawned task, while it runs. (A turn started by its only
    /// waiter is acquired inside that waiter's future; one whose waiters' runtimes are all shut
    /// down has none.)
    acquisition: Option<Arc<Acquisition>>,
}

struct Waiter {
    id: u64,
    tx: oneshot::Sender<Granted>,
    /// The runtime the waiter runs on; `None` once a task spawned there was dropped unfinished.
    runtime: Option<Handle>,
}

impl<D: LockDriver> LocalQueue<D> {
    /// A queue making its nodes through `internals` with `data`.
    pub(crate) fn new(internals: Arc<LockInternals<D>>, data: Vec<u8>, shared: bool, revocable: bool) -> Arc<Self> {
        Arc::new_cyclic(|me| LocalQueue {
            internals,
            data,
            shared,
            revocable,
            me: me.clone(),
            state: parking_lot::Mutex::new(State::default()),
        })
    }

    fn path(&self) -> &str {
        self.internals.base_path()
    }

    /// The state, under the queue's lock; the tasks queued meanwhile are spawned once it is
    /// released.
    fn lock(&self) -> Locked<'_, D> {
        Locked { queue: self, state: Some(self.state.lock()) }
    }

    /// Spawns the queued tasks, one after the other, each outside the lock (see [`State::spawns`]).
    fn spawn_queued(&self) {
        let mut state = self.state.lock();
        if state.spawning {
            return;
        }
        state.spawning = true;
        while let Some(task) = state.spawns.pop_front() {
            let Some(spawn) = self.prepare(&mut state, task) else { continue };
            drop(state);
            spawn();
            state = self.state.lock();
        }
        state.spawning = false;
    }

    /// Readies `task` for a waiter's runtime: `None` if it is no longer needed, or no waiter that
    /// needs it has a runtime left.
    fn prepare(&self, state: &mut State, task: Task) -> Option<Box<dyn FnOnce()>> {
        let (Task::Acquire(turn_id) | Task::Watch(turn_id)) = task;
        let at = state.turns.iter().position(|turn| turn.id == turn_id)?;
        // Who needs it: the turn's waiters (an acquisition), or those of the turn and of the later
        // turns, which wait behind its node (a watcher).
        let needing = match task {
            Task::Acquire(_) => 1,
            Task::Watch(_) => state.turns.len() - at,
        };
        // The client's runtime first: it runs while the client works (its session and delete
        // queue are there), whereas a waiter's may stop being driven (a current-thread runtime
        // whose `block_on` returned) with the waiter gone and the task stranded there.
        let waiters = state.turns.iter().skip(at).take(needing).flat_map(|turn| turn.waiters.iter());
        let has_waiters = waiters.clone().next().is_some();
        let runtime = if state.client_runtime_down {
            waiters.clone().find_map(|waiter| waiter.runtime.clone().map(|runtime| (Some(waiter.id), runtime)))
        } else {
            has_waiters.then(|| (None, self.internals.client().runtime().clone()))
        };
        let turn = &mut state.turns[at];
        match task {
            Task::Acquire(_) => {
                if !turn.started || turn.node.is_some() || turn.acquisition.is_some() {
                    return None;
                }
                // None: the turn waits, started, for its waiters to leave (see `remove_waiter`).
                let (waiter, runtime) = runtime?;
                let queue = self.me.upgrade()?;
                let (internals, data) = (self.internals.clone(), self.data.clone());
                let attempt = Box::pin(async move { internals.attempt_shared_node(Wait::Forever, &data).await });
                let acquisition = Arc::new(Acquisition::new(attempt));
                turn.acquisition = Some(acquisition.clone());
                let report = TaskReport { queue: self.me.clone(), task, waiter, done: false };
                Some(Box::new(move || {
                    drop(runtime.spawn(acquire_turn(queue, turn_id, acquisition, report)));
                }))
            }
            Task::Watch(_) => {
                let node = turn.node.clone().filter(|_| turn.watched && !turn.closed)?;
                let Some((waiter, runtime)) = runtime else {
                    // Nobody left who can wait for it; the next waiter starts another.
                    turn.watched = false;
                    return None;
                };
                let (queue, report) =
                    (self.me.clone(), TaskReport { queue: self.me.clone(), task, waiter, done: false });
                Some(Box::new(move || {
                    drop(runtime.spawn(watch_turn(queue, turn_id, node, report)));
                }))
            }
        }
    }

    /// A task spawned on `waiter`'s runtime (`None`: the client's) was dropped unfinished: that
    /// runtime is shut down. The task is done again elsewhere if still needed.
    fn task_dropped(&self, task: Task, waiter: Option<u64>) {
        let acquisition = {
            let mut state = self.lock();
            match waiter {
                None => state.client_runtime_down = true,
                Some(waiter) => {
                    if let Some(waiter) =
                        state.turns.iter_mut().flat_map(|turn| turn.waiters.iter_mut()).find(|w| w.id == waiter)
                    {
                        waiter.runtime = None;
                    }
                }
            }
            let (Task::Acquire(turn_id) | Task::Watch(turn_id)) = task;
            let Some(turn) = state.turns.iter_mut().find(|turn| turn.id == turn_id) else { return };
            if let Task::Watch(_) = task {
                turn.watched = false;
                self.watch_turns(&mut state);
                return;
            }
            turn.acquisition.take()
        };
        if let Task::Acquire(turn_id) = task {
            debug!(path = %self.path(), "a local turn's acquisition was dropped with its runtime: acquiring it again");
            // Its attempt goes now (its node to the delete queue); its waiters get another.
            if let Some(acquisition) = acquisition {
                acquisition.stop();
            }
            self.acquired(turn_id, None);
        }
    }

    /// Waits for a hold through the local queue: `Ok(None)` when `wait` ended first (for one
    /// attempt: at once if another local task holds or waits, for an exclusive lock). The hold is
    /// `Held` on the client's current session when this returns.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped waiter leaves its turn, and a hold granted to it meanwhile is handed
    /// on; the last waiter of a turn being acquired stops the acquisition (its node is deleted).
    pub(crate) async fn acquire(&self, wait: Wait) -> Result<Option<Arc<Hold>>> {
        match self.wait_for_grant(wait).await? {
            // A grant is decided `Held`, under the queue's lock, by whoever makes it (a releasing
            // holder, or the turn's acquisition), but it reaches its waiter only when the waiter's
            // task runs again: the connection may have been suspended, or the session ended, in
            // between. Only a `Held` hold is handed out. (Boxed: the rare path.)
            Some(hold) if hold.hold_state() != HoldState::Held => Box::pin(self.settle(hold, wait)).await,
            granted => Ok(granted),
        }
    }

    /// A grant that was no longer `Held` when its waiter got it. `Suspended`: the waiter keeps it
    /// and waits until it is `Held` again — as a waiter of its own node waits out a suspension
    /// before its grant — or gives it back at the deadline; one attempt does not wait. `Lost`
    /// (its session ended, or its node was deleted): it is given back — a node that is not `Held`
    /// is never handed on, so its turn closes — and the waiter queues again, as a waiter of its
    /// own node queues again with a new node when its node dies, if the retry policy and the
    /// deadline allow.
    async fn settle(&self, hold: Arc<Hold>, wait: Wait) -> Result<Option<Arc<Hold>>> {
        let mut retrying = self.internals.client().retrying(self.path(), wait.deadline());
        let mut granted = Unclaimed(Some(hold));
        loop {
            let Some(hold) = granted.0.clone() else { return Ok(None) };
            let held = match wait {
                Wait::OneAttempt => return Ok(granted.claim_if_held()),
                Wait::Forever | Wait::Until(_) => hold.wait_held(wait.deadline()).await,
            };
            drop(hold);
            let lost = match held {
                Ok(true) => return Ok(granted.claim_if_held()),
                // The deadline passed while suspended: given back (on drop).
                Ok(false) => return Ok(None),
                Err(Error::LockLost { node, .. }) => node,
                Err(e) => return Err(e),
            };
            drop(granted);
            debug!(path = %self.path(), node = %lost, "a local grant was lost before its waiter got it: queueing again");
            match retrying.backoff_or_fail(Error::code_on(&lost, crate::ErrorCode::SessionExpired)).await {
                Ok(()) => {}
                Err(Error::DeadlineExceeded { .. }) => return Ok(None),
                Err(e) => return Err(e),
            }
            match self.wait_for_grant(wait).await? {
                Some(hold) if hold.hold_state() == HoldState::Held => return Ok(Some(hold)),
                Some(hold) => granted = Unclaimed(Some(hold)),
                None => return Ok(None),
            }
        }
    }

    /// Waits for the queue to grant a hold (see [`acquire`](Self::acquire)), as decided: `Held`
    /// when it was granted.
    async fn wait_for_grant(&self, wait: Wait) -> Result<Option<Arc<Hold>>> {
        let one_attempt = wait == Wait::OneAttempt;
        let runtime = Handle::try_current().ok();
        let (id, rx, driving) = {
            let mut state = self.lock();
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
            let waiter = Waiter { id, tx, runtime };
            let free = one_attempt || !self.blocked(&state);
            let driving = match state.turns.back_mut().filter(|turn| !one_attempt && !turn.started) {
                Some(turn) => {
                    turn.waiters.push_back(waiter);
                    self.pump(&mut state);
                    self.watch_turns(&mut state);
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
                    self.watch_turns(&mut state);
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
            // Boxed: a timer and the clean-up after it are several times the size of the rest, and
            // every waiter without a deadline (`lock()`) would carry them while it waits.
            Some(deadline) => match Box::pin(self.wait_until(deadline, &mut pending)).await {
                Some(received) => received,
                None => return Ok(None),
            },
            None => rx.await,
        };
        pending.rx = None;
        // A dropped sender: the queue was torn down (cannot happen while we hold it).
        received.unwrap_or_else(|_| Err(Error::Closed { path: self.path().to_string() }))
    }

    /// Waits for `pending`'s answer until `deadline`: `None` if none came in time and the waiter
    /// left (a grant that raced the leave is handed on), with its turn's node being deleted if it
    /// was the last waiter of a turn being acquired.
    async fn wait_until(
        &self,
        deadline: Instant,
        pending: &mut Pending<'_, D>,
    ) -> Option<std::result::Result<Granted, oneshot::error::RecvError>> {
        let rx = pending.rx.as_mut()?;
        if let Ok(received) = tokio::time::timeout_at(deadline.into(), rx).await {
            return Some(received);
        }
        let (granted, stopped) = pending.leave();
        if let Some(acquisition) = stopped {
            // Its attempt was dropped by `leave` (its node's delete is queued), or it has just
            // ended and its outcome is being handed to the queue. As a timed-out attempt of one's
            // own: the caller normally finds no node.
            let limit = Instant::now() + CLEANUP_SLACK;
            acquisition.delivered(limit).await;
            self.internals.client().wait_background_deletes(limit).await;
        }
        granted.map(Ok)
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
            acquisition: None,
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
            turn.started = true;
            state.spawns.push_back(Task::Acquire(turn.id));
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

    /// Makes sure every granted exclusive turn that someone waits for (its own waiters, or those
    /// of a later turn) is watched, so that its loss (session, deleted node) lets them go on at
    /// once, not when its holder lets go.
    fn watch_turns(&self, state: &mut State) {
        if self.shared {
            return;
        }
        let mut waited_for = false;
        for at in (0..state.turns.len()).rev() {
            let turn = &mut state.turns[at];
            waited_for |= !turn.waiters.is_empty();
            if waited_for && !turn.watched && !turn.closed && turn.node.is_some() {
                turn.watched = true;
                state.spawns.push_back(Task::Watch(turn.id));
            }
        }
    }

    /// The acquisition of `turn`'s node ended: `None` if it was stopped for want of waiters.
    fn acquired(&self, turn_id: u64, outcome: Option<Result<Option<Arc<Hold>>>>) {
        let mut release = None;
        {
            let mut state = self.lock();
            let Some(at) = state.turns.iter().position(|turn| turn.id == turn_id) else {
                drop(state);
                if let Some(Ok(Some(node))) = outcome {
                    node.release_in_background();
                }
                return;
            };
            let turn = &mut state.turns[at];
            turn.acquisition = None;
            match outcome {
                Some(Ok(Some(node))) if !turn.waiters.is_empty() => {
                    debug!(path = %self.path(), node = %node.path(), waiters = turn.waiters.len(), "local turn granted");
                    turn.node = Some(node.clone());
                    if self.grant(turn) {
                        release = state.turns.remove(at).and_then(|turn| turn.node);
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
                None if turn.node.is_some() => {}
                None if turn.waiters.is_empty() => {
                    state.turns.remove(at);
                }
                None => {
                    // Its acquisition was dropped with its runtime: acquire for its waiters on
                    // another one.
                    state.spawns.push_back(Task::Acquire(turn_id));
                }
            }
            self.pump(&mut state);
            // Waiters in or behind a granted turn must learn of its loss at once.
            self.watch_turns(&mut state);
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
                // on the waiter's runtime (this may run on a plain thread, where a guard was dropped).
                let _runtime = waiter.runtime.as_ref().map(Handle::enter);
                drop(hold.watch_data());
            }
            match waiter.tx.send(Ok(Some(hold))) {
                Ok(()) if self.shared => {}
                Ok(()) => break,
                Err(unsent) => {
                    // Its waiter is gone (it leaves under this lock, so this is only a safeguard).
                    if let Ok(Some(hold)) = unsent {
                        hold.discard_meter();
                    }
                    turn.holders -= 1;
                }
            }
        }
        turn.holders == 0 && turn.waiters.is_empty()
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

    /// Takes waiter `id` out of its turn: true if it was still waiting, and — if it was the last
    /// waiter of a turn being acquired by a task — that acquisition, stopped now: its attempt is
    /// dropped here, so its node's delete is queued before this returns.
    fn remove_waiter(&self, id: u64) -> (bool, Option<Arc<Acquisition>>) {
        let stopping = {
            let mut state = self.lock();
            let found = state.turns.iter().enumerate().find_map(|(at, turn)| {
                turn.waiters.iter().position(|waiter| waiter.id == id).map(|position| (at, position))
            });
            let Some((at, position)) = found else { return (false, None) };
            let turn = &mut state.turns[at];
            turn.waiters.remove(position);
            if !turn.waiters.is_empty() || turn.node.is_some() {
                return (true, None);
            }
            match turn.acquisition.clone() {
                // Its task then finds the attempt gone and tells `acquired`, which drops the turn.
                Some(acquisition) if turn.started => acquisition,
                _ => {
                    // Not started, or started with no task running (acquired inside this waiter's
                    // own future, which stops it; or not spawned yet, or by nobody).
                    state.turns.remove(at);
                    self.pump(&mut state);
                    return (true, None);
                }
            }
        };
        stopping.stop();
        (true, Some(stopping))
    }
}

impl<D: LockDriver> LocalTurns for LocalQueue<D> {
    fn leave(&self, turn_id: u64, data: &[u8]) -> Option<Arc<Hold>> {
        let mut state = self.lock();
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
        let mut state = self.lock();
        if let Some(at) = state.turns.iter().position(|turn| turn.id == turn_id) {
            self.close_at(&mut state, at);
        }
    }
}

/// A hold granted to a waiter that has not handed it out yet: given back — handed on, or its node
/// deleted by its turn's last holder — unless claimed.
struct Unclaimed(Option<Arc<Hold>>);

impl Unclaimed {
    /// The hold, if it is `Held` now; otherwise it is given back.
    fn claim_if_held(mut self) -> Option<Arc<Hold>> {
        let held = self.0.as_ref().is_some_and(|hold| hold.hold_state() == HoldState::Held);
        // Not held: `self` gives it back as it goes.
        held.then(|| self.0.take()).flatten()
    }
}

impl Drop for Unclaimed {
    fn drop(&mut self) {
        if let Some(hold) = self.0.take() {
            hold.give_back_unclaimed();
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
    /// the acquisition leaving stopped, if any.
    fn leave(&mut self) -> (Option<Granted>, Option<Arc<Acquisition>>) {
        let Some(mut rx) = self.rx.take() else { return (None, None) };
        let (waiting, stopped) = self.queue.remove_waiter(self.id);
        if waiting {
            return (None, stopped);
        }
        // Told under the queue's lock before we looked: the answer is in the channel.
        (rx.try_recv().ok(), None)
    }
}

impl<D: LockDriver> Drop for Pending<'_, D> {
    fn drop(&mut self) {
        if let (Some(Ok(Some(hold))), _) = self.leave() {
            // Granted to a waiter that is gone: hand it on.
            hold.give_back_unclaimed();
        }
        if let Some(turn) = self.driving.take() {
            // Its attempt was dropped (its node is deleted in the background): the turn, empty
            // now, goes, and the next one may start.
            self.queue.acquired(turn, None);
        }
    }
}

/// The state under the queue's lock (see [`LocalQueue::lock`]).
struct Locked<'a, D: LockDriver> {
    queue: &'a LocalQueue<D>,
    state: Option<parking_lot::MutexGuard<'a, State>>,
}

impl<D: LockDriver> std::ops::Deref for Locked<'_, D> {
    type Target = State;

    fn deref(&self) -> &State {
        self.state.as_ref().expect("held until dropped")
    }
}

impl<D: LockDriver> std::ops::DerefMut for Locked<'_, D> {
    fn deref_mut(&mut self) -> &mut State {
        self.state.as_mut().expect("held until dropped")
    }
}

impl<D: LockDriver> Drop for Locked<'_, D> {
    fn drop(&mut self) {
        let spawn = self.state.as_ref().is_some_and(|state| !state.spawns.is_empty() && !state.spawning);
        drop(self.state.take());
        if spawn {
            self.queue.spawn_queued();
        }
    }
}

/// A turn's attempt at its node: polled by the task that acquires it, and stopped — dropped, on
/// the spot — by the waiter that leaves it last, whatever runtime that task is on (or if it never
/// runs).
struct Acquisition {
    slot: parking_lot::Mutex<Slot>,
    /// Told once an outcome was handed to the queue.
    delivered: Notify,
}

enum Slot {
    /// Running; the waker of its task's last poll.
    Running(Attempt, Option<Waker>),
    /// Ended: its task is handing the outcome to the queue.
    Delivering,
    /// Stopped, or its outcome handed to the queue.
    Over,
}

impl Acquisition {
    fn new(attempt: Attempt) -> Self {
        Self { slot: parking_lot::Mutex::new(Slot::Running(attempt, None)), delivered: Notify::new() }
    }

    /// Polls the attempt to its end: `None` if it was stopped.
    async fn run(&self) -> Option<Granted> {
        std::future::poll_fn(|cx| {
            let mut slot = self.slot.lock();
            let Slot::Running(attempt, waker) = &mut *slot else { return Poll::Ready(None) };
            match attempt.as_mut().poll(cx) {
                Poll::Ready(outcome) => {
                    *slot = Slot::Delivering;
                    Poll::Ready(Some(outcome))
                }
                Poll::Pending => {
                    if !waker.as_ref().is_some_and(|waker| waker.will_wake(cx.waker())) {
                        *waker = Some(cx.waker().clone());
                    }
                    Poll::Pending
                }
            }
        })
        .await
    }

    /// Drops the attempt if it still runs — its node, or its create in flight, goes to the delete
    /// queue now — and wakes its task.
    fn stop(&self) {
        let stopped = {
            let mut slot = self.slot.lock();
            match std::mem::replace(&mut *slot, Slot::Over) {
                Slot::Running(attempt, waker) => Some((attempt, waker)),
                other => {
                    *slot = other;
                    None
                }
            }
        };
        if let Some((attempt, waker)) = stopped {
            drop(attempt);
            if let Some(waker) = waker {
                waker.wake();
            }
        }
    }

    /// Its task handed the outcome to the queue.
    fn finish(&self) {
        *self.slot.lock() = Slot::Over;
        self.delivered.notify_waiters();
    }

    /// Waits, at most until `limit`, while an outcome is being handed to the queue (a stop that
    /// came too late: the queue deletes a node nobody waits for).
    async fn delivered(&self, limit: Instant) {
        let notified = self.delivered.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if matches!(*self.slot.lock(), Slot::Delivering) {
            let _ = tokio::time::timeout_at(limit.into(), notified).await;
        }
    }
}

/// Reports a queue task dropped unfinished — its runtime was shut down — to the queue.
struct TaskReport<D: LockDriver> {
    queue: Weak<LocalQueue<D>>,
    task: Task,
    /// The waiter whose runtime it was spawned on (`None`: the client's).
    waiter: Option<u64>,
    done: bool,
}

impl<D: LockDriver> Drop for TaskReport<D> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if let Some(queue) = self.queue.upgrade() {
            queue.task_dropped(self.task, self.waiter);
        }
    }
}

/// The task acquiring a turn's node.
async fn acquire_turn<D: LockDriver>(
    queue: Arc<LocalQueue<D>>,
    turn: u64,
    acquisition: Arc<Acquisition>,
    mut report: TaskReport<D>,
) {
    let outcome = acquisition.run().await;
    report.done = true;
    queue.acquired(turn, outcome);
    acquisition.finish();
}

/// The task that moves a turn's waiters on as soon as its node is lost, without waiting for its
/// holder.
async fn watch_turn<D: LockDriver>(queue: Weak<LocalQueue<D>>, turn: u64, node: Arc<Hold>, mut report: TaskReport<D>) {
    node.lost().await;
    report.done = true;
    if let Some(queue) = queue.upgrade() {
        queue.close_turn(turn);
    }
}

#[cfg(all(test, feature = "testing"))]
mod tests {
    use super::*;
    use crate::locks::internals::tests::mutex_internals;

    /// Every task waiting in a local queue keeps its waiter future for as long as it waits (10,000
    /// waiting tasks keep 10,000): one without a deadline must not carry room for a timer and the
    /// clean-up after a timeout it never reaches.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_waiter_without_a_deadline_carries_no_timer() {
        let (_server, client, internals, _) = mutex_internals("/locks/small-waiters").await;
        let queue = LocalQueue::new(Arc::new(internals), Vec::new(), false, false);
        let waiting = queue.acquire(Wait::Forever);
        let bytes = std::mem::size_of_val(&waiting);
        // A tokio timer alone is larger than this; the waiter itself needs a fraction of it.
        assert!(bytes <= 256, "a waiter without a deadline is a {bytes}-byte future");
        drop(waiting);
        client.close().await;
    }
}
