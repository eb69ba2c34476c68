//! [`LeaderLatch`]: Curator's leader latch — every participant queues a node under the latch path,
//! the first in line leads until it closes, its session ends or its node is deleted.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tracing::{debug, warn};

use super::leadership::{
    read_participants, CloseMode, LeadershipSignal, LeadershipState, LeadershipStream, Participant,
};
use crate::deadline::deadline_after;
use crate::error::{Error, ErrorKind, Result};
use crate::locks::driver::StandardLockDriver;
use crate::locks::hold::{FencingToken, GuardedWrite, Hold, HoldState};
use crate::locks::internals::{Basis, Wait};
use crate::locks::mutex::InterProcessMutex;
use crate::{CuratorClient, OpResult};

/// Curator's `LeaderLatch` lock name: nodes are `<path>/_c_<uuid>-latch-<seq>`.
pub const LATCH_LOCK_NAME: &str = "latch-";

/// How long the background task waits before queueing again after an error.
const RETRY_PAUSE: Duration = Duration::from_secs(1);

/// Where a latch is in its life (Curator's `LeaderLatch.State`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LatchState {
    /// Created, not started.
    Latent,
    /// Taking part (leading or queued).
    Started,
    /// Closed: no node, never again leader.
    Closed,
}

/// A leader latch, wire-compatible with Curator's `LeaderLatch`: a protected
/// EPHEMERAL_SEQUENTIAL node `<path>/_c_<uuid>-latch-<seq>` holding the participant id; the first
/// node in sort order leads, every other participant watches only its predecessor.
///
/// Leadership is a [`Hold`] of that node, and is reported only while the hold is
/// [`HoldState::Held`] — connected, on the session that created the node, the node not deleted.
/// While the connection is suspended, [`has_leadership`](Self::has_leadership) is `false`. When
/// the hold is lost (the session ended, or someone deleted the node) the latch reports no
/// leadership and, while started, queues again with a new node on the client's current session.
///
/// On a suspended connection, it follows the client's
/// [`ConnectionStateErrorPolicy`](crate::framework::ConnectionStateErrorPolicy): under
/// [`Session`](crate::framework::ConnectionStateErrorPolicy::Session) (zk-curator's default) leadership is
/// only suspended — [`LeadershipState::Suspended`], and the same node leads again if the session
/// survives; under [`Standard`](crate::framework::ConnectionStateErrorPolicy::Standard) (Curator's default)
/// leadership is given up at once, as Curator's latch does — [`LeadershipState::NotLeader`], our
/// node released (deleted once the connection is back) and a new one queued.
///
/// The leadership's [`FencingToken`] (the node's czxid) strictly increases across successive
/// leaders of one path.
///
/// A cheap [`Clone`] shares one participant: every clone sees the same leadership, and closing
/// through any clone closes it for all. Dropping the last clone of a started latch stops it: its
/// node is deleted in the background. Prefer [`close`](Self::close), which waits for the delete.
#[derive(Clone)]
pub struct LeaderLatch {
    inner: Arc<Inner>,
    /// Shared by the clones: dropping the last one stops the latch.
    _last: Arc<StopOnLastDrop>,
}

struct Inner {
    mutex: InterProcessMutex<StandardLockDriver>,
    id: String,
    /// The hold of the current leadership (granted; maybe suspended or lost by now). Every change
    /// of the hold's state is also sent here (so waiters look again).
    hold: watch::Sender<Option<Arc<Hold>>>,
    state: watch::Sender<LatchState>,
    /// The background task; it ends once closed, after deleting our node (its result is the
    /// delete's).
    task: parking_lot::Mutex<Option<tokio::task::JoinHandle<Result<()>>>>,
    /// False while the background task runs: a `close` that finds the task taken by another call
    /// (or by a cancelled one) waits for it.
    finished: watch::Sender<bool>,
    /// Leadership as listeners see it.
    signal: LeadershipSignal,
    /// Why the last attempt to queue failed; `None` once an attempt leads.
    queue_error: watch::Sender<Option<Error>>,
    /// What `close` and drop tell listeners (set by `with_close_mode`, also after `start`).
    close_mode: parking_lot::Mutex<CloseMode>,
}

impl std::fmt::Debug for LeaderLatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderLatch")
            .field("path", &self.path())
            .field("id", &self.inner.id)
            .field("state", &self.state())
            .field("leader", &self.has_leadership())
            .finish()
    }
}

impl LeaderLatch {
    /// A latch on `path` for the participant `id` (written into its node, as Curator does). Not
    /// started: see [`start`](Self::start).
    ///
    /// # Errors
    /// [`Error::InvalidPath`] naming `path` if it is not a valid ZooKeeper path (or is `/`);
    /// [`Error::InvalidArgument`] naming its size and `path` if `id` is larger than the client's
    /// [`max_data_size`](crate::CuratorClientBuilder::max_data_size) (by default 1 MiB - 4 KiB).
    pub fn new(client: &CuratorClient, path: &str, id: impl Into<String>) -> Result<Self> {
        let id = id.into();
        client.check_data_size("id", path, id.len())?;
        let driver = StandardLockDriver::with_static_name(LATCH_LOCK_NAME);
        let labels = client.lock_labels(crate::metrics::Recipe::Latch, path);
        let mutex = InterProcessMutex::build(client, path, driver, Some(id.clone().into_bytes()), labels)?;
        let inner = Inner {
            mutex,
            id,
            hold: watch::Sender::new(None),
            state: watch::Sender::new(LatchState::Latent),
            task: parking_lot::Mutex::new(None),
            finished: watch::Sender::new(true),
            signal: LeadershipSignal::new(),
            queue_error: watch::Sender::new(None),
            close_mode: parking_lot::Mutex::new(CloseMode::Silent),
        };
        let inner = Arc::new(inner);
        Ok(Self { _last: Arc::new(StopOnLastDrop(inner.clone())), inner })
    }

    /// The same latch, closing with `mode` by default (Curator's constructor argument; the
    /// default is [`CloseMode::Silent`]). See [`close_with`](Self::close_with). The mode is the
    /// participant's: every clone closes with it.
    pub fn with_close_mode(self, mode: CloseMode) -> Self {
        // Started or not: the background task shares the inner part.
        *self.inner.close_mode.lock() = mode;
        self
    }

    /// The latch path.
    pub fn path(&self) -> &str {
        self.inner.mutex.path()
    }

    /// This participant's id.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The latch's state.
    pub fn state(&self) -> LatchState {
        *self.inner.state.borrow()
    }

    /// Starts taking part: creates our node in the background and queues (Curator's `start`).
    /// Needs a tokio runtime.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the latch was already started or closed (a latch starts once,
    /// as in Curator), or when called outside a tokio runtime (naming `runtime`; the latch stays
    /// unstarted).
    pub fn start(&self) -> Result<()> {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return Err(Error::invalid_argument("runtime", "none", "LeaderLatch::start needs a tokio runtime"));
        };
        let mut started = false;
        self.inner.state.send_if_modified(|state| {
            if *state == LatchState::Latent {
                *state = LatchState::Started;
                started = true;
            }
            started
        });
        if !started {
            return Err(Error::invalid_argument("latch state", format!("{:?}", self.state()), "a latch starts once"));
        }
        self.inner.finished.send_replace(false);
        // Made here, not in the task: a task dropped before it first ran still sets it.
        let finished = Finished(self.inner.clone());
        let task = runtime.spawn(run(self.inner.clone(), finished));
        *self.inner.task.lock() = Some(task);
        Ok(())
    }

    /// Stops taking part: deletes our node and waits for the delete (at most the connection
    /// timeout; a delete that takes longer goes on in the background, guaranteed). Leadership, if
    /// held, is lost. Closing a latch that is not started (or already closed) only marks it closed.
    ///
    /// # Errors
    /// The delete's error when leading (the node stays queued for guaranteed deletion in the
    /// background), or [`Error::DeadlineExceeded`] when it did not finish in time.
    ///
    /// # Cancel safety
    /// Cancel safe: the latch is closed at the first poll and the delete continues in the
    /// background (the node goes while the latch object still lives). A later (or concurrent)
    /// `close` waits for it too (and returns `Ok` even if that delete failed: the node stays
    /// queued for deletion).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// let latch = zk_curator::leader::LeaderLatch::new(&client, "/election/reports", "worker-1")?;
    /// latch.start()?;
    /// // ...
    /// latch.close().await?;
    /// # Ok(()) }
    /// ```
    pub async fn close(&self) -> Result<()> {
        let mode = *self.inner.close_mode.lock();
        self.close_with(mode).await
    }

    /// [`close`](Self::close), telling leadership listeners as `mode` says: with
    /// [`CloseMode::NotifyLeader`] a leader's [`leadership_changes`](Self::leadership_changes)
    /// streams get [`LeadershipState::NotLeader`] before they end; with [`CloseMode::Silent`] they
    /// just end.
    ///
    /// # Errors
    /// As [`close`](Self::close).
    ///
    /// # Cancel safety
    /// As [`close`](Self::close).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(latch: zk_curator::leader::LeaderLatch) -> zk_curator::Result<()> {
    /// latch.close_with(zk_curator::leader::CloseMode::NotifyLeader).await?;
    /// # Ok(()) }
    /// ```
    pub async fn close_with(&self, mode: CloseMode) -> Result<()> {
        self.inner.state.send_replace(LatchState::Closed);
        self.inner.signal.end(mode == CloseMode::NotifyLeader);
        // Wake waiters: they see the latch closed.
        self.inner.hold.send_modify(|_| {});
        let task = self.inner.task.lock().take();
        match task {
            // The task sees the state, drops its queued attempt or deletes its leadership's node,
            // and ends: also when this call is dropped meanwhile.
            Some(task) => match task.await {
                Ok(result) => result,
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(_) => Ok(()),
            },
            None => {
                // Another close (maybe a cancelled one) took the task: wait until it has ended.
                let mut finished = self.inner.finished.subscribe();
                let _ = finished.wait_for(|finished| *finished).await;
                Ok(())
            }
        }
    }

    /// True while this participant leads: its node is first in line and its hold is
    /// [`HoldState::Held`] (connected, on the node's own session, the node not deleted).
    pub fn has_leadership(&self) -> bool {
        self.inner.has_leadership()
    }

    /// The hold of the current (or last, not yet replaced) leadership: node, fencing token, state,
    /// guarded writes. `None` while queued.
    pub fn hold(&self) -> Option<Arc<Hold>> {
        self.inner.hold.borrow().clone().filter(|hold| hold.hold_state() != HoldState::Lost)
    }

    /// The fencing token of the leadership, while [`has_leadership`](Self::has_leadership).
    pub fn fencing_token(&self) -> Option<FencingToken> {
        self.inner.leading_hold().map(|hold| hold.fencing_token())
    }

    /// Where this participant stands now: [`LeadershipState::Leader`] exactly when
    /// [`has_leadership`](Self::has_leadership).
    pub fn leadership_state(&self) -> LeadershipState {
        match self.inner.hold.borrow().as_ref() {
            Some(hold) if self.inner.started() => LeadershipState::of_hold(hold.hold_state()),
            _ => LeadershipState::NotLeader,
        }
    }

    /// A receiver of the latch's leadership state, as the background task last saw it.
    ///
    /// Gaining leadership, it never trails: a receiver woken by `Leader` finds
    /// [`has_leadership`](Self::has_leadership) true (unless lost since), and once that is true
    /// the receiver reads `Leader` (or a later state). Losing it, or suspended, the hold's own
    /// state changes first: [`leadership_state`](Self::leadership_state) may say so a moment
    /// before this does.
    pub fn watch_leadership(&self) -> watch::Receiver<LeadershipState> {
        self.inner.signal.watch()
    }

    /// Leadership changes as a stream (Curator's `LeaderLatchListener`): the state now, then each
    /// change in order — `Leader`, `Suspended`, `Leader`, ..., `Lost`, `NotLeader` (queued again).
    /// It ends when the latch is closed; see [`CloseMode`].
    pub fn leadership_changes(&self) -> LeadershipStream {
        self.inner.signal.stream()
    }

    /// Why the latch's last attempt to queue failed (e.g. [`ErrorKind::NotAuthorized`]: the
    /// server refuses our node) — it tries again every second in the background; `None` until an
    /// attempt fails, and again once an attempt leads. A latch that cannot queue never leads, and
    /// only this (and a `tracing` warning) tells why.
    pub fn queue_errors(&self) -> watch::Receiver<Option<Error>> {
        self.inner.queue_error.subscribe()
    }

    /// A write guarded by leadership: applied atomically only if our latch node still exists
    /// (see [`Hold::guarded_write`]).
    ///
    /// # Errors
    /// [`Error::NotOwner`] naming the latch path when this participant does not lead now (nothing
    /// sent); otherwise as [`Hold::guarded_write`] ([`Error::LockLost`] when the node is gone).
    ///
    /// # Cancel safety
    /// As [`Hold::guarded_write`]: a dropped call may or may not have committed.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(latch: zk_curator::leader::LeaderLatch) -> zk_curator::Result<()> {
    /// let write = zk_curator::Transaction::new().set_data("/config/active", b"worker-1", None);
    /// latch.guarded_write(write).await?;
    /// # Ok(()) }
    /// ```
    pub async fn guarded_write(&self, write: GuardedWrite) -> Result<Vec<OpResult>> {
        match self.inner.leading_hold() {
            Some(hold) => hold.guarded_write(write).await,
            None => Err(Error::NotOwner { path: self.path().to_string(), reason: "not the leader" }),
        }
    }

    /// Waits until this participant leads (Curator's `await()`).
    ///
    /// # Errors
    /// [`Error::Closed`] naming the path if the latch is not started, or is closed while waiting.
    ///
    /// # Cancel safety
    /// Cancel safe: it only watches; dropping it leaves the latch as it was (started, queued).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// let latch = zk_curator::leader::LeaderLatch::new(&client, "/election/reports", "worker-1")?;
    /// latch.start()?;
    /// latch.await_leadership().await?;
    /// println!("leading with token {:?}", latch.fencing_token());
    /// # Ok(()) }
    /// ```
    pub async fn await_leadership(&self) -> Result<()> {
        self.wait(None).await.map(|_| ())
    }

    /// Like [`await_leadership`](Self::await_leadership), giving up after `timeout`: `Ok(false)`
    /// if not leading by then. Returns within `timeout` (plus scheduling slack) whatever the
    /// connection does.
    ///
    /// # Errors
    /// As [`await_leadership`](Self::await_leadership).
    ///
    /// # Cancel safety
    /// Cancel safe, as [`await_leadership`](Self::await_leadership).
    ///
    /// # Examples
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(latch: zk_curator::leader::LeaderLatch) -> zk_curator::Result<()> {
    /// if latch.await_leadership_timeout(Duration::from_secs(5)).await? {
    ///     println!("{} leads", latch.id());
    /// } else {
    ///     println!("someone else leads: {:?}", latch.leader().await?);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn await_leadership_timeout(&self, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let timeout = timeout.into().remaining();
        self.wait(Some(deadline_after(timeout))).await
    }

    async fn wait(&self, deadline: Option<std::time::Instant>) -> Result<bool> {
        let mut hold = self.inner.hold.subscribe();
        let mut status = self.inner.mutex.client().status();
        let mut state = self.inner.state.subscribe();
        loop {
            hold.borrow_and_update();
            status.borrow_and_update();
            if *state.borrow_and_update() != LatchState::Started {
                return Err(Error::Closed { path: self.path().to_string() });
            }
            if self.has_leadership() {
                return Ok(true);
            }
            let changed = async {
                tokio::select! {
                    _ = hold.changed() => {}
                    _ = status.changed() => {}
                    _ = state.changed() => {}
                }
            };
            match deadline {
                Some(d) => {
                    if tokio::time::timeout_at(d.into(), changed).await.is_err() {
                        return Ok(self.has_leadership());
                    }
                }
                None => changed.await,
            }
        }
    }

    /// Resolves once the current leadership is lost; at once if not leading now.
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn work() {}
    /// # async fn demo(latch: zk_curator::leader::LeaderLatch) -> zk_curator::Result<()> {
    /// latch.await_leadership().await?;
    /// tokio::select! {
    ///     _ = work() => {}
    ///     _ = latch.lost() => eprintln!("leadership lost: stop"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn lost(&self) {
        if let Some(hold) = self.inner.leading_hold() {
            hold.lost().await;
        }
    }

    /// Every participant in line, the leader first (Curator's `getParticipants`). Nodes that
    /// vanish while being read are left out; the first one read is flagged leader.
    ///
    /// # Errors
    /// Server errors after retries.
    ///
    /// # Cancel safety
    /// Cancel safe (read only).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(latch: zk_curator::leader::LeaderLatch) -> zk_curator::Result<()> {
    /// for p in latch.participants().await? {
    ///     println!("{}{}", p.id, if p.is_leader { " (leader)" } else { "" });
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn participants(&self) -> Result<Vec<Participant>> {
        read_participants(&self.inner.mutex).await
    }

    /// The leader as seen in ZooKeeper now (Curator's `getLeader`): `None` when nobody takes part.
    ///
    /// # Errors
    /// As [`participants`](Self::participants).
    ///
    /// # Cancel safety
    /// Cancel safe (read only).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(latch: zk_curator::leader::LeaderLatch) -> zk_curator::Result<()> {
    /// match latch.leader().await? {
    ///     Some(leader) => println!("{} leads", leader.id),
    ///     None => println!("nobody takes part"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn leader(&self) -> Result<Option<Participant>> {
        Ok(self.participants().await?.into_iter().next())
    }
}

impl Inner {
    fn leading_hold(&self) -> Option<Arc<Hold>> {
        if *self.state.borrow() != LatchState::Started {
            return None;
        }
        self.hold.borrow().clone().filter(|hold| hold.hold_state() == HoldState::Held)
    }

    fn has_leadership(&self) -> bool {
        self.leading_hold().is_some()
    }

    fn started(&self) -> bool {
        *self.state.borrow() == LatchState::Started
    }
}

/// Stops the latch when the last clone of the handle is dropped (the background task holds
/// `Inner` too, so `Inner`'s own drop would come too late).
struct StopOnLastDrop(Arc<Inner>);

impl Drop for StopOnLastDrop {
    fn drop(&mut self) {
        self.0.state.send_replace(LatchState::Closed);
        let mode = *self.0.close_mode.lock();
        self.0.signal.end(mode == CloseMode::NotifyLeader);
        // The task sees the state and deletes our node in the background (a grant it was making
        // meanwhile included); without a runtime the task is gone already, and `Finished` did it.
        drop(self.0.task.lock().take());
    }
}

/// Marks the background task finished when dropped (returned, panicked, aborted, or dropped with
/// its runtime), deleting in the background a leadership's node the task had no time to delete.
struct Finished(Arc<Inner>);

impl Drop for Finished {
    fn drop(&mut self) {
        if let Some(hold) = self.0.hold.send_replace(None) {
            hold.release_in_background();
        }
        self.0.finished.send_replace(true);
    }
}

/// The background task: takes part until closed, then deletes our leadership's node (a queued
/// attempt's node is deleted by the attempt's drop, in the background).
async fn run(inner: Arc<Inner>, finished: Finished) -> Result<()> {
    participate(&inner).await;
    let hold = inner.hold.send_replace(None);
    let released = match hold {
        Some(hold) => hold.release().await,
        None => {
            // A queued attempt, dropped by the task, left its node to the background deletes.
            let client = inner.mutex.client();
            client.wait_background_deletes(deadline_after(client.connection_timeout())).await;
            Ok(())
        }
    };
    drop(finished);
    released
}

/// The participant: queue (a mutex attempt without deadline), lead while the hold lasts, queue
/// again after losing it, until closed (a leadership's hold is left in `inner.hold` then).
async fn participate(inner: &Arc<Inner>) {
    let mut state = inner.state.subscribe();
    let stopped = |state: &mut watch::Receiver<LatchState>| {
        let mut state = state.clone();
        async move {
            let _ = state.wait_for(|s| *s != LatchState::Started).await;
        }
    };
    while inner.started() {
        let attempt = inner.mutex.attempt(Wait::Forever, Basis::None);
        let granted = tokio::select! {
            biased;
            _ = stopped(&mut state) => return,
            granted = attempt => granted,
        };
        let hold = match granted {
            Ok(Some(hold)) => {
                inner.queue_error.send_if_modified(|e| e.take().is_some());
                hold
            }
            Ok(None) => continue,
            Err(e) if e.kind() == ErrorKind::Closed => {
                debug!(path = %inner.mutex.path(), "client closed: the latch stops");
                return;
            }
            Err(e) => {
                warn!(path = %inner.mutex.path(), %e, "leader latch could not queue; trying again");
                inner.queue_error.send_replace(Some(e));
                tokio::select! {
                    _ = stopped(&mut state) => return,
                    _ = tokio::time::sleep(RETRY_PAUSE) => continue,
                }
            }
        };
        let mut hold_state = hold.watch_state();
        // Granted and announced at once (see `set_with`): a listener told `Leader` finds the hold,
        // and a stream made once the hold shows (await_leadership, has_leadership), or a
        // NotifyLeader close then, never trails it.
        let grant = || {
            inner.hold.send_replace(Some(hold.clone()));
        };
        if inner.started() {
            inner.signal.set_with(LeadershipState::of_hold(*hold_state.borrow()), grant);
        } else {
            grant();
        }
        debug!(node = %hold.path(), "leadership granted");
        let gives_up_when_suspended = inner.mutex.client().connection_state_error_policy().gives_up_when_suspended();
        let mut given_up = false;
        loop {
            let now = *hold_state.borrow_and_update();
            if now == HoldState::Suspended && gives_up_when_suspended {
                // The Standard policy (Curator's latch): leadership ends with the connection; our
                // node is released (deleted once the connection is back) and we queue again.
                given_up = true;
                break;
            }
            if inner.started() {
                inner.signal.set(LeadershipState::of_hold(now));
            }
            if now == HoldState::Lost {
                break;
            }
            tokio::select! {
                // `run` takes the hold and deletes its node.
                _ = stopped(&mut state) => return,
                changed = hold_state.changed() => {
                    // Waiters look again at every change.
                    inner.hold.send_modify(|_| {});
                    if changed.is_err() {
                        break;
                    }
                }
            }
        }
        debug!(node = %hold.path(), given_up, "leadership lost; queueing again");
        inner.hold.send_if_modified(|current| match current {
            Some(h) if Arc::ptr_eq(h, &hold) => {
                *current = None;
                true
            }
            _ => false,
        });
        if given_up {
            // Listeners are told before the node can go (as for a lost hold).
            if inner.started() {
                inner.signal.set(LeadershipState::NotLeader);
            }
            // Ours to delete: the session may survive the suspension. Before queueing again, so
            // that the old node goes first once the connection is back.
            hold.release_in_background();
        }
        // Lost: deleted by someone, or its session ended. Not deleted here: the node (ephemeral)
        // goes with its session, which nothing of ours ends before the last holder of the hold
        // (e.g. `elect` until its command's group is gone) lets go of it — or the server could
        // have expired the session anyway (see `Hold`'s session keep).
        drop(hold);
        if inner.started() {
            inner.signal.set(LeadershipState::NotLeader);
        }
    }
}
