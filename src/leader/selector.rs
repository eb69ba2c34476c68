//! [`LeaderSelector`]: Curator's leader selector — participants contend for a mutex on the
//! election path; the holder runs the caller's leadership work, and gives leadership up when the
//! work returns.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{debug, info_span, warn, Instrument};

use super::latch::LatchState;
use super::leadership::{
    held, read_participants, CloseMode, LeadershipSignal, LeadershipState, LeadershipStream, Participant,
};
use crate::deadline::deadline_after;
use crate::error::{Error, ErrorKind, Result};
use crate::locks::driver::StandardLockDriver;
use crate::locks::hold::{FencingToken, GuardedWrite, Hold, HoldState, HoldStateStream};
use crate::locks::internals::{Basis, Wait};
use crate::locks::mutex::InterProcessMutex;
use crate::{CuratorClient, OpResult};

/// Curator's `LeaderSelector` lock name: its mutex nodes are `<path>/_c_<uuid>-lock-<seq>`.
pub const SELECTOR_LOCK_NAME: &str = "lock-";

/// How long the background task waits before queueing again after an error.
const RETRY_PAUSE: Duration = Duration::from_secs(1);

type Work = dyn Fn(Leadership) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync;

/// A leader selector, wire-compatible with Curator's `LeaderSelector`: every participant queues
/// for an [`InterProcessMutex`] on the election path (nodes `_c_<uuid>-lock-<seq>`, data = the
/// participant id); the holder leads and runs the leadership work given to
/// [`new`](Self::new). Leadership lasts until the work returns — then the lock is released and,
/// with [`auto_requeue`](Self::auto_requeue), the participant queues again.
///
/// # When leadership may be lost
/// The work gets a [`Leadership`]: the [`Hold`] of the lock node, its [`FencingToken`] and its
/// state. Leadership is reported only while that hold is [`HoldState::Held`].
///
/// * **Lost** (the session ended or was given up before the server could expire it, or someone
///   deleted our node), [`interrupt_leadership`](Self::interrupt_leadership) and
///   [`close`](Self::close): the work is **cancelled** — its future is dropped at its next
///   `.await` (it runs as its own task, aborted). The lock node is deleted, and the next
///   participant can lead, only after the work has stopped. (Curator interrupts the thread.)
/// * **Suspended** (the connection is lost; the session may survive): it depends on the client's
///   [`ConnectionStateErrorPolicy`](crate::framework::ConnectionStateErrorPolicy).
///   - [`Session`](crate::framework::ConnectionStateErrorPolicy::Session) (zk-curator's default): the work
///     is **told**, not cancelled — [`Leadership::state`] is `Suspended`,
///     [`Leadership::state_changes`] reports it, and guarded writes fail — because a suspended
///     hold is given up (and the work cancelled) at
///     [`simulated_session_expiration_percent`](crate::CuratorClientBuilder::simulated_session_expiration_percent)
///     (85% by default) of the session timeout after the last reply from the server, before the
///     server can expire the session and elect someone else.
///   - [`Standard`](crate::framework::ConnectionStateErrorPolicy::Standard) (**Curator's default**, what its
///     `LeaderSelectorListenerAdapter` does): the work is **cancelled** and leadership given up
///     as soon as the connection is suspended.
///
///   [`cancel_on_suspended`](Self::cancel_on_suspended) gives one selector the `Standard`
///   behaviour whatever the client's policy.
///
/// Work that blocks a thread without awaiting cannot be cancelled: keep such work in
/// `spawn_blocking` and check [`Leadership::is_held`] between steps.
///
/// A panic in the work ends the term like a return (it is logged).
///
/// A cheap [`Clone`] shares one participant: every clone sees the same leadership, and closing
/// through any clone closes it for all. Dropping the last clone of a started selector closes it in
/// the background: the work is cancelled, then the node deleted. Prefer [`close`](Self::close),
/// which waits for both.
///
/// # Examples
/// ```no_run
/// # async fn run_scheduler(_token: zk_curator::locks::FencingToken) {}
/// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
/// use zk_curator::leader::{LeaderSelector, Leadership};
///
/// let selector = LeaderSelector::new(&client, "/election/scheduler", "host-a", |leadership: Leadership| async move {
///     // Runs while this participant leads; cancelled if leadership is lost.
///     run_scheduler(leadership.fencing_token()).await;
///     // Returning gives leadership up.
/// })?;
/// selector.auto_requeue();
/// selector.start()?;
/// // ...
/// selector.close().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct LeaderSelector {
    inner: Arc<Inner>,
    /// Shared by the clones: dropping the last one closes the selector.
    _last: Arc<CloseOnLastDrop>,
}

struct Inner {
    mutex: InterProcessMutex<StandardLockDriver>,
    id: String,
    work: Box<Work>,
    auto_requeue: AtomicBool,
    cancel_on_suspended: AtomicBool,
    close_mode: parking_lot::Mutex<CloseMode>,
    state: watch::Sender<LatchState>,
    /// Whether a turn is wanted: set by `start`/`requeue`, and after each term by auto-requeue.
    queued: watch::Sender<bool>,
    /// The hold of the current term (granted; maybe suspended or lost by now).
    hold: watch::Sender<Option<Arc<Hold>>>,
    /// Bumped by `interrupt_leadership`; a term watches it from its start.
    interrupts: watch::Sender<u64>,
    signal: LeadershipSignal,
    task: parking_lot::Mutex<Option<JoinHandle<Result<()>>>>,
    /// False while the background task runs (its work stopped and its node released once true):
    /// a `close` that finds the task taken by another call (or by a cancelled one) waits for it.
    finished: watch::Sender<bool>,
}

impl std::fmt::Debug for LeaderSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderSelector")
            .field("path", &self.path())
            .field("id", &self.inner.id)
            .field("state", &self.state())
            .field("leader", &self.has_leadership())
            .finish()
    }
}

impl LeaderSelector {
    /// A selector on `path` for participant `id` (written into its lock node, as Curator does;
    /// an empty id writes the client's default data instead), running `work` whenever it leads.
    /// Not started: see [`start`](Self::start).
    ///
    /// # Errors
    /// [`Error::InvalidPath`] naming `path` if it is not a valid ZooKeeper path (or is `/`);
    /// [`Error::InvalidArgument`] naming its size and `path` if `id` is larger than the client's
    /// [`max_data_size`](crate::CuratorClientBuilder::max_data_size) (by default 1 MiB - 4 KiB).
    pub fn new<F, Fut>(client: &CuratorClient, path: &str, id: impl Into<String>, work: F) -> Result<Self>
    where
        F: Fn(Leadership) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let id = id.into();
        client.check_data_size("id", path, id.len())?;
        let data = (!id.is_empty()).then(|| id.clone().into_bytes());
        let labels = client.lock_labels(crate::metrics::Recipe::Selector, path);
        let mutex = InterProcessMutex::build(
            client,
            path,
            StandardLockDriver::with_static_name(SELECTOR_LOCK_NAME),
            data,
            labels,
        )?;
        let work: Box<Work> = Box::new(move |leadership| Box::pin(work(leadership)));
        let inner = Inner {
            mutex,
            id,
            work,
            auto_requeue: AtomicBool::new(false),
            cancel_on_suspended: AtomicBool::new(false),
            close_mode: parking_lot::Mutex::new(CloseMode::Silent),
            state: watch::Sender::new(LatchState::Latent),
            queued: watch::Sender::new(false),
            hold: watch::Sender::new(None),
            interrupts: watch::Sender::new(0),
            signal: LeadershipSignal::new(),
            task: parking_lot::Mutex::new(None),
            finished: watch::Sender::new(true),
        };
        let inner = Arc::new(inner);
        Ok(Self { _last: Arc::new(CloseOnLastDrop(inner.clone())), inner })
    }

    /// The election path.
    pub fn path(&self) -> &str {
        self.inner.mutex.path()
    }

    /// This participant's id.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The selector's state: latent, started or closed.
    pub fn state(&self) -> LatchState {
        *self.inner.state.borrow()
    }

    /// Queue again automatically each time a term ends (Curator's `autoRequeue()`). Without it a
    /// participant leads at most once per [`start`](Self::start) / [`requeue`](Self::requeue).
    pub fn auto_requeue(&self) {
        self.inner.auto_requeue.store(true, Ordering::SeqCst);
    }

    /// Cancel the work as soon as the connection is lost ([`HoldState::Suspended`]), as Curator's
    /// default listener does, instead of when leadership is lost: this selector behaves as under
    /// [`ConnectionStateErrorPolicy::Standard`](crate::framework::ConnectionStateErrorPolicy::Standard)
    /// whatever the client's policy (see the type's documentation). A cancelled term gives
    /// leadership up.
    pub fn cancel_on_suspended(&self) {
        self.inner.cancel_on_suspended.store(true, Ordering::SeqCst);
    }

    /// The same selector, closing with `mode` (what [`close`](Self::close) and the last drop tell
    /// leadership listeners; default [`CloseMode::Silent`]), as
    /// [`LeaderLatch::with_close_mode`](crate::leader::LeaderLatch::with_close_mode). The mode is the
    /// participant's: every clone closes with it.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// use zk_curator::leader::{CloseMode, LeaderSelector};
    /// let selector = LeaderSelector::new(&client, "/election/a", "host-a", |_| async {})?
    ///     .with_close_mode(CloseMode::NotifyLeader);
    /// # Ok(()) }
    /// ```
    pub fn with_close_mode(self, mode: CloseMode) -> Self {
        *self.inner.close_mode.lock() = mode;
        self
    }

    /// What [`close`](Self::close) tells leadership listeners (default [`CloseMode::Silent`]).
    #[deprecated(note = "use the consuming `with_close_mode`, as on `LeaderLatch`")]
    pub fn set_close_mode(&self, mode: CloseMode) {
        *self.inner.close_mode.lock() = mode;
    }

    /// Starts taking part: queues for leadership in the background. Needs a tokio runtime.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the selector was already started or closed (it starts once,
    /// as in Curator), or when called outside a tokio runtime (naming `runtime`; the selector
    /// stays unstarted).
    pub fn start(&self) -> Result<()> {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return Err(Error::invalid_argument("runtime", "none", "LeaderSelector::start needs a tokio runtime"));
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
            return Err(Error::invalid_argument(
                "selector state",
                format!("{:?}", self.state()),
                "a selector starts once",
            ));
        }
        self.inner.queued.send_replace(true);
        self.inner.finished.send_replace(false);
        let span = info_span!("leader_selector", path = %self.path(), id = %self.inner.id);
        let inner = self.inner.clone();
        // Set when the task ends, however it ends (returned, panicked, aborted, or dropped with its
        // runtime — made here, so that also before it first ran).
        let finished = Finished(inner.clone());
        let task = runtime.spawn(
            async move {
                let _finished = finished;
                run(inner).await
            }
            .instrument(span),
        );
        *self.inner.task.lock() = Some(task);
        Ok(())
    }

    /// Queues for leadership again after a term ended (Curator's `requeue()`): `Ok(false)` if
    /// already queued or leading.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] (`selector state`) if the selector was never started;
    /// [`Error::Closed`] naming the path once it is closed.
    pub fn requeue(&self) -> Result<bool> {
        let state = *self.inner.state.borrow();
        match state {
            LatchState::Started => {}
            LatchState::Latent => {
                return Err(Error::invalid_argument("selector state", "Latent", "requeue needs a started selector"))
            }
            _ => return Err(Error::Closed { path: self.path().to_string() }),
        }
        Ok(!self.inner.queued.send_replace(true))
    }

    /// Ends the current term, if leading: the work is cancelled, then leadership given up (and,
    /// with auto-requeue, the participant queues again). Nothing happens when not leading.
    pub fn interrupt_leadership(&self) {
        self.inner.interrupts.send_modify(|n| *n += 1);
    }

    /// True while this participant leads: it holds the lock, its work runs, and the hold is
    /// [`HoldState::Held`].
    pub fn has_leadership(&self) -> bool {
        self.inner.leading_hold().is_some()
    }

    /// Where this participant stands now: [`LeadershipState::Leader`] exactly when
    /// [`has_leadership`](Self::has_leadership).
    pub fn leadership_state(&self) -> LeadershipState {
        match self.inner.hold.borrow().as_ref() {
            Some(hold) if self.inner.started() => LeadershipState::of_hold(hold.hold_state()),
            _ => LeadershipState::NotLeader,
        }
    }

    /// A receiver of the leadership state, as the background task last saw it.
    ///
    /// Gaining leadership, it never trails: a receiver woken by `Leader` finds
    /// [`has_leadership`](Self::has_leadership) true (unless lost since), and once that is true
    /// the receiver reads `Leader` (or a later state). Losing it, or suspended, the hold's own
    /// state changes first: [`leadership_state`](Self::leadership_state) may say so a moment
    /// before this does.
    pub fn watch_leadership(&self) -> watch::Receiver<LeadershipState> {
        self.inner.signal.watch()
    }

    /// Leadership changes as a stream: the state now, then each change in order. It ends when the
    /// selector is closed; see [`CloseMode`].
    pub fn leadership_changes(&self) -> LeadershipStream {
        self.inner.signal.stream()
    }

    /// The fencing token of the current term, while [`has_leadership`](Self::has_leadership).
    pub fn fencing_token(&self) -> Option<FencingToken> {
        self.inner.leading_hold().map(|hold| hold.fencing_token())
    }

    /// Stops taking part: cancels the work if leading, waits for it to stop, then deletes our
    /// node (waiting at most the connection timeout; a delete that takes longer goes on in the
    /// background, guaranteed). Closing a selector that is not started only marks it closed.
    ///
    /// Work that never reaches an `.await` (blocking the thread) holds `close` up until it does.
    ///
    /// # Errors
    /// The delete's error (the node stays queued for guaranteed deletion in the background).
    ///
    /// # Cancel safety
    /// Cancel safe: the selector is closed at the first poll; cancelling the work and deleting
    /// the node continue in the background. A later (or concurrent) `close` waits for them too
    /// (it returns `Ok` even if that delete failed: the node stays queued for deletion).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(selector: zk_curator::leader::LeaderSelector) -> zk_curator::Result<()> {
    /// selector.close().await?;
    /// assert!(!selector.has_leadership());
    /// # Ok(()) }
    /// ```
    pub async fn close(&self) -> Result<()> {
        let mode = *self.inner.close_mode.lock();
        self.inner.stop(mode);
        let task = self.inner.task.lock().take();
        let released = match task {
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
        };
        // A queued attempt, dropped by the task, left its node to the background deletes.
        let client = self.inner.mutex.client();
        client.wait_background_deletes(deadline_after(client.connection_timeout())).await;
        released
    }

    /// Every participant in line, the leader first (Curator's `getParticipants`).
    ///
    /// # Errors
    /// Server errors after retries.
    ///
    /// # Cancel safety
    /// Cancel safe (read only).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(selector: zk_curator::leader::LeaderSelector) -> zk_curator::Result<()> {
    /// for p in selector.participants().await? {
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
    /// # async fn demo(selector: zk_curator::leader::LeaderSelector) -> zk_curator::Result<()> {
    /// if let Some(leader) = selector.leader().await? {
    ///     println!("{} leads", leader.id);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn leader(&self) -> Result<Option<Participant>> {
        Ok(self.participants().await?.into_iter().next())
    }
}

/// Closes the selector when the last clone of the handle is dropped (the background task holds
/// `Inner` too, so `Inner`'s own drop would come too late).
struct CloseOnLastDrop(Arc<Inner>);

impl Drop for CloseOnLastDrop {
    fn drop(&mut self) {
        // The task cancels the work and deletes the node once the work has stopped — also when a
        // cancelled `close` took it. Without a runtime it is gone already, and the `TermNode` of a
        // term it left behind deleted the node once the work was gone too.
        let mode = *self.0.close_mode.lock();
        self.0.stop(mode);
        drop(self.0.task.lock().take());
    }
}

impl Inner {
    fn started(&self) -> bool {
        *self.state.borrow() == LatchState::Started
    }

    /// True when a suspended hold ends the term: [`LeaderSelector::cancel_on_suspended`], or the
    /// client's policy says so.
    fn cancels_on_suspended(&self) -> bool {
        self.cancel_on_suspended.load(Ordering::SeqCst)
            || self.mutex.client().connection_state_error_policy().gives_up_when_suspended()
    }

    fn leading_hold(&self) -> Option<Arc<Hold>> {
        if !self.started() {
            return None;
        }
        held(&self.hold.borrow())
    }

    fn stop(&self, mode: CloseMode) {
        self.state.send_replace(LatchState::Closed);
        self.signal.end(mode == CloseMode::NotifyLeader);
    }
}

/// What the leadership work gets: the hold of the lock node while this participant leads.
#[derive(Clone, Debug)]
pub struct Leadership {
    hold: Arc<Hold>,
    id: Arc<str>,
    election: Arc<str>,
}

impl Leadership {
    /// This participant's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The election path.
    pub fn path(&self) -> &str {
        &self.election
    }

    /// The fencing token of this term: it strictly increases from term to term.
    pub fn fencing_token(&self) -> FencingToken {
        self.hold.fencing_token()
    }

    /// The hold of the lock node.
    pub fn hold(&self) -> &Arc<Hold> {
        &self.hold
    }

    /// The hold's state now.
    pub fn state(&self) -> HoldState {
        self.hold.hold_state()
    }

    /// True while the hold is [`HoldState::Held`].
    pub fn is_held(&self) -> bool {
        self.state() == HoldState::Held
    }

    /// The hold's state changes as a stream (`Suspended`, `Held`, ..., `Lost`).
    pub fn state_changes(&self) -> HoldStateStream {
        self.hold.state_changes()
    }

    /// Resolves once the leadership is lost — for tasks the work spawned (the work itself is
    /// cancelled then).
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(leadership: zk_curator::leader::Leadership) {
    /// let watcher = leadership.clone();
    /// tokio::spawn(async move {
    ///     watcher.lost().await;
    ///     eprintln!("leadership of {} lost", watcher.path());
    /// });
    /// # }
    /// ```
    pub async fn lost(&self) {
        self.hold.lost().await
    }

    /// A write applied only while our lock node exists (see [`Hold::guarded_write`]).
    ///
    /// # Errors
    /// As [`Hold::guarded_write`]: [`Error::LockLost`] when the node is gone (nothing written).
    ///
    /// # Cancel safety
    /// A dropped call may or may not have committed.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(leadership: zk_curator::leader::Leadership) -> zk_curator::Result<()> {
    /// let write = zk_curator::Transaction::new().set_data("/config/active", leadership.id(), None);
    /// leadership.guarded_write(write).await?;
    /// # Ok(()) }
    /// ```
    pub async fn guarded_write(&self, write: GuardedWrite) -> Result<Vec<OpResult>> {
        self.hold.guarded_write(write).await
    }
}

/// Marks the background task finished when dropped. (A term's node the task had no time to
/// delete — it was dropped with its runtime — is deleted by its [`TermNode`].)
struct Finished(Arc<Inner>);

impl Drop for Finished {
    fn drop(&mut self) {
        self.0.finished.send_replace(true);
    }
}

/// A term's node, shared by the selector's task and the work's: deleted in the background when the
/// last of them is dropped while still armed — both dropped before the term ended, e.g. with
/// their runtime — so never before the work is gone. Disarmed once the task saw the work stop
/// (it releases the node itself then).
struct TermNode {
    hold: Arc<Hold>,
    armed: AtomicBool,
}

impl Drop for TermNode {
    fn drop(&mut self) {
        if self.armed.load(Ordering::SeqCst) {
            debug!(node = %self.hold.path(), "the term's tasks were dropped: deleting its node in the background");
            self.hold.release_in_background();
        }
    }
}

/// The work's future with its share of the term's node: dropped, the work goes first.
struct WithNode {
    work: Pin<Box<dyn Future<Output = ()> + Send>>,
    _node: Arc<TermNode>,
}

impl Future for WithNode {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        self.work.as_mut().poll(cx)
    }
}

/// Aborts the work's task when dropped (the selector's task was dropped with its runtime, or
/// aborted).
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Why a term ended.
#[derive(Debug, PartialEq, Eq)]
enum TermEnd {
    Returned,
    Cancelled(&'static str),
    Closed,
}

/// The participant: wait until queued, contend, lead (run the work) while the hold lasts, give it
/// up; again while auto-requeue or requeue asks; until closed. Returns the last release's result.
async fn run(inner: Arc<Inner>) -> Result<()> {
    let state = inner.state.subscribe();
    let stopped = || {
        let mut state = state.clone();
        async move {
            let _ = state.wait_for(|s| *s != LatchState::Started).await;
        }
    };
    let mut queued = inner.queued.subscribe();
    loop {
        tokio::select! {
            biased;
            _ = stopped() => return Ok(()),
            wanted = queued.wait_for(|q| *q) => if wanted.is_err() { return Ok(()) },
        }
        let granted = tokio::select! {
            biased;
            _ = stopped() => return Ok(()),
            granted = inner.mutex.attempt(Wait::Forever, Basis::None) => granted,
        };
        let hold = match granted {
            Ok(Some(hold)) => hold,
            Ok(None) => continue,
            Err(e) if e.kind() == ErrorKind::Closed => {
                debug!("client closed: the selector stops");
                return Ok(());
            }
            Err(e) => {
                warn!(%e, "leader selector could not queue; trying again");
                tokio::select! {
                    _ = stopped() => return Ok(()),
                    _ = tokio::time::sleep(RETRY_PAUSE) => continue,
                }
            }
        };
        // Shared by this task and the work's: should both be dropped before the term ended (with
        // their runtime), the last one deletes the node in the background — after the work is gone.
        let node = Arc::new(TermNode { hold: hold.clone(), armed: AtomicBool::new(true) });
        let end = lead(&inner, &hold, node.clone(), &stopped).await;
        // The work has stopped (`lead` waited for it): the node is released below.
        node.armed.store(false, Ordering::SeqCst);
        drop(node);
        debug!(node = %hold.path(), ?end, "leadership term ended");
        inner.hold.send_if_modified(|current| match current {
            Some(h) if Arc::ptr_eq(h, &hold) => {
                *current = None;
                true
            }
            _ => false,
        });
        let lost = hold.hold_state() == HoldState::Lost && !matches!(end, TermEnd::Returned | TermEnd::Closed);
        // The term is over: neither leading nor queued now, so a `requeue` made while the node is
        // released below queues again (the next attempt starts after the release).
        inner.queued.send_replace(false);
        // Listeners are told before the node can go (as the latch does): none of them still reads
        // `Leader` once another participant may lead.
        if inner.started() {
            if lost {
                inner.signal.set(LeadershipState::Lost);
            }
            inner.signal.set(LeadershipState::NotLeader);
        }
        let released = hold.release().await;
        if end == TermEnd::Closed {
            return released;
        }
        if let Err(e) = released {
            warn!(node = %hold.path(), %e, "giving leadership up failed; the node is deleted in the background");
        }
        if inner.auto_requeue.load(Ordering::SeqCst) {
            inner.queued.send_replace(true);
        }
    }
}

/// One term: runs the work as its own task until it returns, or leadership is lost (or
/// suspended, if so configured), interrupted or closed — then cancels it and waits for it to stop.
async fn lead<S, F>(inner: &Arc<Inner>, hold: &Arc<Hold>, node: Arc<TermNode>, stopped: &S) -> TermEnd
where
    S: Fn() -> F,
    F: Future<Output = ()>,
{
    let mut interrupts = inner.interrupts.subscribe();
    interrupts.borrow_and_update();
    let mut hold_state = hold.watch_state();
    let leadership =
        Leadership { hold: hold.clone(), id: inner.id.as_str().into(), election: inner.mutex.path().into() };
    let runtime = tokio::runtime::Handle::current();
    // The work function is called inside the work's task too: a panic while making the future is
    // a panicking work (the term ends), not a panic of the selector's task.
    let call = inner.clone();
    let mut work =
        AbortOnDrop(runtime.spawn(async move { WithNode { work: (call.work)(leadership), _node: node }.await }));
    // Granted and announced at once (see `set_with`): a listener told `Leader` finds the hold,
    // and a stream made once `has_leadership` says so, or a NotifyLeader close then, never
    // trails it.
    let grant = || {
        inner.hold.send_replace(Some(hold.clone()));
    };
    if inner.started() {
        inner.signal.set_with(LeadershipState::of_hold(*hold_state.borrow()), grant);
    } else {
        grant();
    }
    debug!(node = %hold.path(), token = %hold.fencing_token(), "leadership granted: work started");
    let end = loop {
        let now = *hold_state.borrow_and_update();
        if inner.started() {
            inner.signal.set(LeadershipState::of_hold(now));
        }
        match now {
            HoldState::Lost => break TermEnd::Cancelled("leadership lost"),
            HoldState::Suspended if inner.cancels_on_suspended() => break TermEnd::Cancelled("connection suspended"),
            _ => {}
        }
        tokio::select! {
            biased;
            _ = stopped() => break TermEnd::Closed,
            _ = interrupts.changed() => break TermEnd::Cancelled("interrupted"),
            finished = &mut work.0 => {
                if let Err(e) = finished {
                    if e.is_panic() {
                        warn!(node = %hold.path(), "leadership work panicked: leadership given up");
                    }
                }
                return TermEnd::Returned;
            }
            changed = hold_state.changed() => {
                inner.hold.send_modify(|_| {});
                if changed.is_err() {
                    break TermEnd::Cancelled("hold dropped");
                }
            }
        }
    };
    if let TermEnd::Cancelled(why) = end {
        debug!(node = %hold.path(), why, "cancelling the leadership work");
    }
    // Leadership is no longer reported from here on: the work is being cancelled.
    inner.hold.send_replace(None);
    work.0.abort();
    // Wait until it has really stopped, so that the next leader never overlaps it.
    let _ = (&mut work.0).await;
    end
}
