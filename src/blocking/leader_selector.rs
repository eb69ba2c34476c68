//! [`LeaderSelector`]: the blocking leader selector, whose leadership work runs on a plain thread
//! (Curator's `LeaderSelectorListener.takeLeadership` on an executor thread), and the
//! [`Leadership`] that work gets.

use std::sync::Arc;
use std::thread::ThreadId;
use std::time::Instant;

use tokio::sync::watch;
use tracing::warn;

use super::leader_latch::LeadershipChanges;
use super::{Core, CuratorClient, RuntimeThread};
use crate::deadline::deadline_after;
use crate::error::{Error, Result};
use crate::leader::{CloseMode, LatchState, LeadershipState, Participant};
use crate::locks::{FencingToken, GuardedWrite, Hold, HoldState};
use crate::OpResult;

type Work = dyn Fn(Leadership) + Send + Sync;

/// A blocking [`LeaderSelector`](crate::leader::LeaderSelector): the same election (wire-compatible
/// with Curator's `LeaderSelector`: an [`InterProcessMutex`](crate::locks::InterProcessMutex) on the
/// election path, nodes `_c_<uuid>-lock-<seq>` holding the participant id), whose leadership work
/// is a plain function run on a **thread of its own** for each term, as Curator runs
/// `takeLeadership` on an executor thread. Leadership lasts until the work returns — then the lock
/// is released and, with [`auto_requeue`](Self::auto_requeue), the participant queues again.
///
/// # Stopping the work
/// A thread cannot be cancelled from outside, so the work is **told**: its [`Leadership`] is
/// cancelled ([`is_cancelled`](Leadership::is_cancelled), [`cancelled`](Leadership::cancelled),
/// [`cancelled_timeout`](Leadership::cancelled_timeout) — Curator's thread interrupt) when
/// leadership is lost (the session ended or was given up before the server could expire it, or
/// someone deleted our node), on [`interrupt_leadership`](Self::interrupt_leadership), on
/// [`close`](Self::close) or drop, and on a suspended connection under the client's
/// [`ConnectionStateErrorPolicy::Standard`](crate::framework::ConnectionStateErrorPolicy::Standard)
/// (Curator's default) or with [`cancel_on_suspended`](Self::cancel_on_suspended). The work must
/// then return soon. The lock node is deleted — and, when we give it up, the next participant can
/// lead — only **after the work's thread has ended**. A lost session's hold is given up at 85% (by
/// default, see
/// [`simulated_session_expiration_percent`](crate::CuratorClientBuilder::simulated_session_expiration_percent))
/// of the session timeout after the last reply from the server, before the server can expire it
/// and elect someone else: work that returns within the rest of the session timeout ends before
/// the next leader's work starts. Under zk-curator's default policy,
/// [`Session`](crate::framework::ConnectionStateErrorPolicy::Session), the work is not cancelled while the
/// connection is only suspended: [`Leadership::is_held`] is `false` then, and guarded writes fail.
///
/// A panic in the work ends the term like a return (it is logged).
///
/// Each selector drives its election on a small runtime thread of its own (so that a term waiting
/// for its work to stop holds up nothing else of the client).
///
/// Dropping a selector — on any thread, also one with no runtime — closes it in the background:
/// the work is cancelled, then (after it returned) the node deleted; the client stays open until
/// then. Prefer [`close`](Self::close), which waits for both.
///
/// # Examples
/// ```no_run
/// use std::time::Duration;
/// use zk_curator::blocking::{CuratorClient, LeaderSelector, Leadership};
///
/// fn scheduler() -> zk_curator::Result<()> {
///     let client = CuratorClient::connect("127.0.0.1:2181")?;
///     let selector = LeaderSelector::new(&client, "/election/scheduler", "host-a", |leadership: Leadership| {
///         // Runs on a thread of its own while this participant leads.
///         while !leadership.cancelled_timeout(Duration::from_secs(1)) {
///             // ... one step of the scheduler, passing leadership.fencing_token() to the store ...
///         }
///         // Returning gives leadership up.
///     })?;
///     selector.auto_requeue();
///     selector.start()?;
///     // ...
///     selector.close()
/// }
/// ```
///
/// A cheap [`Clone`] shares one participant, as the async
/// [`LeaderSelector`](crate::leader::LeaderSelector) does: closing through any clone closes it for all,
/// and dropping the last clone closes it in the background.
#[derive(Clone)]
pub struct LeaderSelector {
    inner: Arc<crate::leader::LeaderSelector>,
    work: Arc<WorkThreads>,
    /// Drives the election (and runs nothing else); shared by the clones, it closes the selector
    /// when the last one is dropped.
    runtime: Arc<SelectorRuntime>,
    core: Arc<Core>,
}

/// The selector's runtime thread, and what it closes when the last clone of the handle is dropped.
struct SelectorRuntime {
    thread: RuntimeThread,
    selector: Arc<crate::leader::LeaderSelector>,
    core: Arc<Core>,
}

impl std::fmt::Debug for LeaderSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderSelector")
            .field("path", &self.path())
            .field("id", &self.id())
            .field("state", &self.state())
            .field("leader", &self.has_leadership())
            .finish()
    }
}

/// The threads running a selector's work now (at most one, but a term's thread may still be
/// ending when the next starts to be recorded).
#[derive(Default)]
struct WorkThreads {
    running: parking_lot::Mutex<Vec<ThreadId>>,
}

impl WorkThreads {
    fn is_current(&self) -> bool {
        self.running.lock().contains(&std::thread::current().id())
    }
}

impl LeaderSelector {
    /// A selector on `path` for participant `id` (written into its lock node, as Curator does;
    /// an empty id writes the client's default data instead), running `work` on a thread of its
    /// own whenever it leads. Not started: see [`start`](Self::start).
    ///
    /// # Errors
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) naming `path` if it is not a valid
    /// ZooKeeper path (or is `/`); [`Error::InvalidArgument`] naming `id` if it is larger than a
    /// node can hold (1 MiB - 4 KiB), or naming `runtime` if the selector's runtime thread could
    /// not be started.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// use zk_curator::blocking::{LeaderSelector, Leadership};
    /// let selector = LeaderSelector::new(&client, "/election/compactor", "host-a", |leadership: Leadership| {
    ///     println!("leading with token {}", leadership.fencing_token());
    ///     leadership.cancelled(); // lead until told to stop
    /// })?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn new<F>(client: &CuratorClient, path: &str, id: impl Into<String>, work: F) -> Result<Self>
    where
        F: Fn(Leadership) + Send + Sync + 'static,
    {
        let core = client.core().clone();
        let threads = Arc::new(WorkThreads::default());
        let work: Arc<Work> = Arc::new(work);
        let term = {
            let (core, threads) = (core.clone(), threads.clone());
            move |leadership: crate::leader::Leadership| {
                term(work.clone(), Leadership::new(leadership, core.clone()), threads.clone())
            }
        };
        let inner = crate::leader::LeaderSelector::new(client.core().client(), path, id, term)?;
        let inner = Arc::new(inner);
        let thread = RuntimeThread::start("zk-curator-selector")?;
        let runtime = Arc::new(SelectorRuntime { thread, selector: inner.clone(), core: core.clone() });
        Ok(Self { inner, work: threads, runtime, core })
    }

    /// The election path.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let selector = zk_curator::blocking::LeaderSelector::new(&client, "/election/a", "host-a", |_| {})?;
    /// assert_eq!(selector.path(), "/election/a");
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn path(&self) -> &str {
        self.inner.path()
    }

    /// This participant's id.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let selector = zk_curator::blocking::LeaderSelector::new(&client, "/election/a", "host-a", |_| {})?;
    /// assert_eq!(selector.id(), "host-a");
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn id(&self) -> &str {
        self.inner.id()
    }

    /// The selector's state: latent, started or closed.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let selector = zk_curator::blocking::LeaderSelector::new(&client, "/election/a", "host-a", |_| {})?;
    /// assert_eq!(selector.state(), zk_curator::leader::LatchState::Latent);
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn state(&self) -> LatchState {
        self.inner.state()
    }

    /// Queue again automatically each time a term ends (Curator's `autoRequeue()`). Without it a
    /// participant leads at most once per [`start`](Self::start) / [`requeue`](Self::requeue).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let selector = zk_curator::blocking::LeaderSelector::new(&client, "/election/a", "host-a", |_| {})?;
    /// selector.auto_requeue();
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn auto_requeue(&self) {
        self.inner.auto_requeue()
    }

    /// Cancel the work as soon as the connection is lost ([`HoldState::Suspended`]), as Curator's
    /// default listener does, instead of when leadership is lost: this selector behaves as under
    /// [`ConnectionStateErrorPolicy::Standard`](crate::framework::ConnectionStateErrorPolicy::Standard)
    /// whatever the client's policy (see the type's documentation). A cancelled term gives
    /// leadership up once the work returned.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let selector = zk_curator::blocking::LeaderSelector::new(&client, "/election/a", "host-a", |_| {})?;
    /// selector.cancel_on_suspended();
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn cancel_on_suspended(&self) {
        self.inner.cancel_on_suspended()
    }

    /// The same selector, closing with `mode` (what [`close`](Self::close) and the last drop tell
    /// leadership listeners; default [`CloseMode::Silent`]), as
    /// [`LeaderLatch::with_close_mode`](super::LeaderLatch::with_close_mode).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// let selector = zk_curator::blocking::LeaderSelector::new(&client, "/election/a", "host-a", |_| {})?
    ///     .with_close_mode(zk_curator::leader::CloseMode::NotifyLeader);
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn with_close_mode(self, mode: CloseMode) -> Self {
        // The mode is the shared participant's: setting it through a clone sets it for all.
        drop(crate::leader::LeaderSelector::clone(&self.inner).with_close_mode(mode));
        self
    }

    /// What [`close`](Self::close) tells leadership listeners (default [`CloseMode::Silent`]).
    #[deprecated(note = "use the consuming `with_close_mode`, as on `LeaderLatch`")]
    pub fn set_close_mode(&self, mode: CloseMode) {
        drop(crate::leader::LeaderSelector::clone(&self.inner).with_close_mode(mode));
    }

    /// Starts taking part: queues for leadership in the background, on the selector's runtime
    /// thread. Does not wait; works from any thread.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the selector was already started or closed (it starts once,
    /// as in Curator).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let selector = zk_curator::blocking::LeaderSelector::new(&client, "/election/a", "host-a", |_| {})?;
    /// selector.start()?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn start(&self) -> Result<()> {
        let _entered = self.runtime.thread.handle.enter();
        self.inner.start()
    }

    /// Queues for leadership again after a term ended (Curator's `requeue()`): `Ok(false)` if
    /// already queued or leading.
    ///
    /// # Errors
    /// [`Error::Closed`] naming the path if the selector is not started, or closed.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let selector = zk_curator::blocking::LeaderSelector::new(&client, "/election/a", "host-a", |_| {})?;
    /// selector.start()?;
    /// // ... a term ended ...
    /// selector.requeue()?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn requeue(&self) -> Result<bool> {
        self.inner.requeue()
    }

    /// Ends the current term, if leading: the work is cancelled and, once it returned, leadership
    /// is given up (with auto-requeue, the participant queues again). Nothing happens when not
    /// leading. Does not wait.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let selector = zk_curator::blocking::LeaderSelector::new(&client, "/election/a", "host-a", |_| {})?;
    /// if selector.has_leadership() {
    ///     selector.interrupt_leadership(); // let someone else lead for a while
    /// }
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn interrupt_leadership(&self) {
        self.inner.interrupt_leadership()
    }

    /// True while this participant leads: it holds the lock, its work runs, and the hold is
    /// [`HoldState::Held`]. Computed when asked; never waits.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let selector = zk_curator::blocking::LeaderSelector::new(&client, "/election/a", "host-a", |_| {})?;
    /// println!("leading: {}", selector.has_leadership());
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn has_leadership(&self) -> bool {
        self.inner.has_leadership()
    }

    /// Where this participant stands now: [`LeadershipState::Leader`] exactly when
    /// [`has_leadership`](Self::has_leadership).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let selector = zk_curator::blocking::LeaderSelector::new(&client, "/election/a", "host-a", |_| {})?;
    /// println!("{:?}", selector.leadership_state());
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn leadership_state(&self) -> LeadershipState {
        self.inner.leadership_state()
    }

    /// A receiver of the leadership state, as the background task last saw it; `borrow()` works
    /// from any thread, waiting for a change through [`CuratorClient::block_on`].
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let selector = zk_curator::blocking::LeaderSelector::new(&client, "/election/a", "host-a", |_| {})?;
    /// println!("{:?}", *selector.watch_leadership().borrow());
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn watch_leadership(&self) -> watch::Receiver<LeadershipState> {
        self.inner.watch_leadership()
    }

    /// Leadership changes, waited for on the calling thread: the state now, then each change in
    /// order. It ends when the selector is closed; see [`CloseMode`].
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let selector = zk_curator::blocking::LeaderSelector::new(&client, "/election/a", "host-a", |_| {})?;
    /// let changes = selector.leadership_changes();
    /// std::thread::spawn(move || changes.for_each(|state| println!("{state:?}")));
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn leadership_changes(&self) -> LeadershipChanges {
        LeadershipChanges::new(self.inner.leadership_changes(), self.path(), &self.core)
    }

    /// The fencing token of the current term, while [`has_leadership`](Self::has_leadership).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let selector = zk_curator::blocking::LeaderSelector::new(&client, "/election/a", "host-a", |_| {})?;
    /// if let Some(token) = selector.fencing_token() {
    ///     println!("term {token}");
    /// }
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn fencing_token(&self) -> Option<FencingToken> {
        self.inner.fencing_token()
    }

    /// Stops taking part: cancels the work if leading, waits until its thread has returned, then
    /// deletes our node (waiting at most the connection timeout for the delete; one that takes
    /// longer goes on in the background, guaranteed). Closing a selector that is not started
    /// only marks it closed. There is no time limit on the work: a work that never looks at its
    /// [`Leadership`] holds `close` up until it returns.
    ///
    /// # Errors
    /// The delete's error (the node stays queued for guaranteed deletion in the background);
    /// [`Error::WouldDeadlock`] naming the path when called from the selector's own work thread
    /// (which `close` would wait for: return from the work instead, or drop the selector there);
    /// [`Error::InvalidArgument`] naming `runtime` when called inside a tokio runtime context. In
    /// both cases nothing is closed (dropping the selector closes it in the background).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let selector = zk_curator::blocking::LeaderSelector::new(&client, "/election/a", "host-a", |_| {})?;
    /// selector.close()?;
    /// assert!(!selector.has_leadership());
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn close(&self) -> Result<()> {
        if self.work.is_current() {
            return Err(Error::WouldDeadlock {
                path: self.path().to_string(),
                reason: "close() called from the selector's own work, which close() waits for",
            });
        }
        self.core.block_on(self.inner.close())?
    }

    /// Every participant in line, the leader first (Curator's `getParticipants`).
    ///
    /// # Errors
    /// Server errors after retries; [`Error::InvalidArgument`] naming `runtime` when called
    /// inside a tokio runtime context.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let selector = zk_curator::blocking::LeaderSelector::new(&client, "/election/a", "host-a", |_| {})?;
    /// for p in selector.participants()? {
    ///     println!("{}{}", p.id, if p.is_leader { " (leader)" } else { "" });
    /// }
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn participants(&self) -> Result<Vec<Participant>> {
        self.core.block_on(self.inner.participants())?
    }

    /// The leader as seen in ZooKeeper now (Curator's `getLeader`): `None` when nobody takes part.
    ///
    /// # Errors
    /// As [`participants`](Self::participants).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let selector = zk_curator::blocking::LeaderSelector::new(&client, "/election/a", "host-a", |_| {})?;
    /// if let Some(leader) = selector.leader()? {
    ///     println!("{} leads", leader.id);
    /// }
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn leader(&self) -> Result<Option<Participant>> {
        self.core.block_on(self.inner.leader())?
    }
}

impl Drop for SelectorRuntime {
    /// Closes the selector in the background, on its runtime thread: the work is cancelled, its
    /// thread awaited, the node deleted; then the runtime thread stops. The client stays open
    /// until then. Never blocks, needs no runtime.
    fn drop(&mut self) {
        let selector = self.selector.clone();
        let core = self.core.clone();
        self.thread.stop(Some(Box::pin(async move {
            if let Err(e) = selector.close().await {
                warn!(path = %selector.path(), %e, "closing a dropped leader selector failed; its node is deleted in the background");
            }
            drop(selector);
            drop(core);
        })));
    }
}

/// One term on the async selector's work task: runs the work on a thread of its own and waits for
/// it to return. When the term is cancelled (the task is aborted, this future dropped), the
/// [`Running`] guard cancels the work's [`Leadership`] and waits for its thread before the async
/// selector may release the node — blocking the selector's own runtime thread, which then has
/// nothing else to do.
async fn term(work: Arc<Work>, leadership: Leadership, threads: Arc<WorkThreads>) {
    let cancel = leadership.cancel.clone();
    let path = leadership.path().to_string();
    let (done, finished) = tokio::sync::oneshot::channel::<()>();
    let registered = threads.clone();
    let spawned = std::thread::Builder::new().name("zk-curator-leader".to_string()).spawn(move || {
        // Dropped however the work ends (returned or panicked): the term ends.
        let _done = done;
        registered.running.lock().push(std::thread::current().id());
        let _unregister = Unregister(registered);
        work(leadership);
    });
    let thread = match spawned {
        Ok(thread) => thread,
        Err(e) => {
            warn!(path = %path, %e, "could not start a thread for the leadership work: leadership given up");
            return;
        }
    };
    let _running = Running { cancel, thread: Some(thread), path };
    let _ = finished.await;
}

/// Takes the work's thread out of [`WorkThreads`] when it ends.
struct Unregister(Arc<WorkThreads>);

impl Drop for Unregister {
    fn drop(&mut self) {
        let me = std::thread::current().id();
        self.0.running.lock().retain(|id| *id != me);
    }
}

/// The work's thread while its term lasts; dropping it cancels the work and waits for the thread.
struct Running {
    cancel: Arc<Cancel>,
    thread: Option<std::thread::JoinHandle<()>>,
    path: String,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.cancel.cancel();
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                warn!(path = %self.path, "leadership work panicked: leadership given up");
            }
        }
    }
}

/// A term's cancellation: set once, waited for by the work's thread.
#[derive(Default)]
struct Cancel {
    cancelled: parking_lot::Mutex<bool>,
    changed: parking_lot::Condvar,
}

impl Cancel {
    fn cancel(&self) {
        *self.cancelled.lock() = true;
        self.changed.notify_all();
    }

    fn is_cancelled(&self) -> bool {
        *self.cancelled.lock()
    }

    /// Waits until cancelled or `deadline`; true if cancelled.
    fn wait(&self, deadline: Option<Instant>) -> bool {
        let mut cancelled = self.cancelled.lock();
        while !*cancelled {
            match deadline {
                Some(deadline) => {
                    if self.changed.wait_until(&mut cancelled, deadline).timed_out() {
                        return *cancelled;
                    }
                }
                None => self.changed.wait(&mut cancelled),
            }
        }
        true
    }
}

/// What the blocking selector's work gets for one term: the hold of the lock node, its
/// [`FencingToken`], and the term's cancellation — Curator's thread interrupt. Clones share the
/// term (hand one to a helper thread).
///
/// The work should look at [`is_cancelled`](Self::is_cancelled) between steps, or wait with
/// [`cancelled_timeout`](Self::cancelled_timeout) instead of sleeping, and return once
/// cancelled: the node is deleted, and the next participant can lead, only after it returned.
/// Wait for the end of the term with these methods, not with `hold().lost()`: the hold's state
/// is watched on the selector's runtime thread, which waits for the work once the term is over.
///
/// # Examples
/// ```no_run
/// # fn step(_token: zk_curator::locks::FencingToken) {}
/// use std::time::Duration;
/// use zk_curator::blocking::Leadership;
///
/// fn take_leadership(leadership: Leadership) {
///     while !leadership.is_cancelled() {
///         step(leadership.fencing_token());
///         if leadership.cancelled_timeout(Duration::from_millis(500)) {
///             break;
///         }
///     }
/// }
/// ```
#[derive(Clone)]
pub struct Leadership {
    inner: crate::leader::Leadership,
    cancel: Arc<Cancel>,
    core: Arc<Core>,
}

impl std::fmt::Debug for Leadership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leadership")
            .field("path", &self.path())
            .field("id", &self.id())
            .field("token", &self.fencing_token())
            .field("state", &self.state())
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

impl Leadership {
    fn new(inner: crate::leader::Leadership, core: Arc<Core>) -> Self {
        Self { inner, cancel: Arc::new(Cancel::default()), core }
    }

    /// This participant's id.
    ///
    /// # Examples
    /// ```no_run
    /// # fn work(leadership: zk_curator::blocking::Leadership) {
    /// println!("{} leads", leadership.id());
    /// # }
    /// ```
    pub fn id(&self) -> &str {
        self.inner.id()
    }

    /// The election path.
    ///
    /// # Examples
    /// ```no_run
    /// # fn work(leadership: zk_curator::blocking::Leadership) {
    /// println!("leading {}", leadership.path());
    /// # }
    /// ```
    pub fn path(&self) -> &str {
        self.inner.path()
    }

    /// The fencing token of this term: it strictly increases from term to term.
    ///
    /// # Examples
    /// ```no_run
    /// # fn work(leadership: zk_curator::blocking::Leadership) {
    /// let token: i64 = leadership.fencing_token().value(); // pass it to the store you write to
    /// # }
    /// ```
    pub fn fencing_token(&self) -> FencingToken {
        self.inner.fencing_token()
    }

    /// The hold of the lock node.
    ///
    /// # Examples
    /// ```no_run
    /// # fn work(leadership: zk_curator::blocking::Leadership) {
    /// println!("our node: {}", leadership.hold().path());
    /// # }
    /// ```
    pub fn hold(&self) -> &Arc<Hold> {
        self.inner.hold()
    }

    /// The hold's state now (`Held`, `Suspended` while the connection is lost, `Lost`).
    ///
    /// # Examples
    /// ```no_run
    /// # fn work(leadership: zk_curator::blocking::Leadership) {
    /// if leadership.state() == zk_curator::locks::HoldState::Suspended {
    ///     // pause what two leaders must not do at once
    /// }
    /// # }
    /// ```
    pub fn state(&self) -> HoldState {
        self.inner.state()
    }

    /// True while the hold is [`HoldState::Held`] and the term is not cancelled.
    ///
    /// # Examples
    /// ```no_run
    /// # fn work(leadership: zk_curator::blocking::Leadership) {
    /// while leadership.is_held() {
    ///     // ... one step ...
    /// }
    /// # }
    /// ```
    pub fn is_held(&self) -> bool {
        !self.is_cancelled() && self.inner.is_held()
    }

    /// True once the term is over — leadership lost, interrupted, the selector closed (or
    /// suspended, with `cancel_on_suspended`): the work should return now.
    ///
    /// # Examples
    /// ```no_run
    /// # fn work(leadership: zk_curator::blocking::Leadership) {
    /// for job in 0..1000 {
    ///     if leadership.is_cancelled() {
    ///         return;
    ///     }
    ///     // ... run job ...
    /// }
    /// # }
    /// ```
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Waits until the term is cancelled (see [`is_cancelled`](Self::is_cancelled)): lead until
    /// told to stop. Needs no runtime; may be called from any thread.
    ///
    /// # Examples
    /// ```no_run
    /// # fn work(leadership: zk_curator::blocking::Leadership) {
    /// // Start a service that runs on threads of its own, and stop it when leadership ends.
    /// leadership.cancelled();
    /// # }
    /// ```
    pub fn cancelled(&self) {
        self.cancel.wait(None);
    }

    /// Waits until the term is cancelled or `timeout` passed — an interruptible sleep: `true` if
    /// cancelled. Returns within `timeout` (plus scheduling slack); needs no runtime.
    ///
    /// # Examples
    /// ```no_run
    /// # fn work(leadership: zk_curator::blocking::Leadership) {
    /// while !leadership.cancelled_timeout(std::time::Duration::from_secs(10)) {
    ///     // ... every 10 s while leading ...
    /// }
    /// # }
    /// ```
    pub fn cancelled_timeout(&self, timeout: impl Into<crate::Deadline>) -> bool {
        let timeout = timeout.into().remaining();
        self.cancel.wait(Some(deadline_after(timeout)))
    }

    /// A write applied only while our lock node exists (see [`Hold::guarded_write`]), waited for
    /// on the calling thread.
    ///
    /// # Errors
    /// As [`Hold::guarded_write`]: [`Error::LockLost`] when the node is gone (nothing written);
    /// [`Error::InvalidArgument`] naming `runtime` when called inside a tokio runtime context
    /// (nothing sent).
    ///
    /// # Examples
    /// ```no_run
    /// # fn work(leadership: zk_curator::blocking::Leadership) -> zk_curator::Result<()> {
    /// let write = zk_curator::locks::GuardedWrite::new().set_data("/config/active", leadership.id(), None);
    /// leadership.guarded_write(write)?;
    /// # Ok(()) }
    /// ```
    pub fn guarded_write(&self, write: GuardedWrite) -> Result<Vec<OpResult>> {
        self.core.block_on(self.inner.guarded_write(write))?
    }
}
