//! [`LeaderLatch`]: the blocking leader latch, and [`LeadershipChanges`], the blocking iterator
//! of leadership changes both election recipes hand out.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::{Core, CuratorClient};
use crate::deadline::deadline_after;
use crate::error::{Error, Result};
use crate::leader::{CloseMode, LatchState, LeadershipState, Participant};
use crate::locks::{FencingToken, GuardedWrite, Hold};
use crate::OpResult;

/// A blocking [`LeaderLatch`](crate::leader::LeaderLatch): the same latch (wire-compatible with Curator's
/// `LeaderLatch`: a protected EPHEMERAL_SEQUENTIAL node `<path>/_c_<uuid>-latch-<seq>` holding the
/// participant id; the first node in line leads), waited for on the calling thread.
///
/// The promises are the async latch's: leadership is a [`Hold`] and is reported only while it is
/// [`HoldState::Held`](crate::locks::HoldState::Held) — connected, on the session that created the node,
/// the node not deleted; while the connection is suspended
/// [`has_leadership`](Self::has_leadership) is `false` (and under the client's
/// [`ConnectionStateErrorPolicy::Standard`](crate::framework::ConnectionStateErrorPolicy::Standard)
/// leadership is given up, as the async latch's); a lost leadership is never re-entered (a
/// started latch queues again with a new node); the [`FencingToken`] grows from leader to leader.
/// The background work (queueing, watching the node) runs on the client's runtime thread, so a
/// started latch needs no thread of the caller's.
///
/// Dropping a started latch — on any thread, also one with no runtime — stops it: its node is
/// deleted in the background. Prefer [`close`](Self::close), which waits for the delete.
///
/// # Examples
/// ```no_run
/// use std::time::Duration;
/// use zk_curator::blocking::{CuratorClient, LeaderLatch};
///
/// fn scheduler() -> zk_curator::Result<()> {
///     let client = CuratorClient::connect("127.0.0.1:2181")?;
///     let latch = LeaderLatch::new(&client, "/election/scheduler", "host-a")?;
///     latch.start()?;
///     loop {
///         if latch.await_leadership_timeout(Duration::from_secs(5))? {
///             // ... one step of the scheduler, passing latch.fencing_token() to the store ...
///         } else if let Some(leader) = latch.leader()? {
///             println!("{} leads", leader.id);
///         }
///         # break;
///     }
///     latch.close()
/// }
/// ```
///
/// A cheap [`Clone`] shares one participant, as the async [`LeaderLatch`](crate::leader::LeaderLatch)
/// does: closing through any clone closes it for all, and dropping the last clone stops it.
#[derive(Clone)]
pub struct LeaderLatch {
    // Dropped before `core`: its drop hands the node to the client's background deletes.
    inner: crate::leader::LeaderLatch,
    core: Arc<Core>,
}

impl std::fmt::Debug for LeaderLatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderLatch")
            .field("path", &self.path())
            .field("id", &self.id())
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
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) naming `path` if it is not a valid
    /// ZooKeeper path (or is `/`); [`Error::InvalidArgument`] naming `id` if it is larger than a
    /// node can hold (1 MiB - 4 KiB).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// let latch = zk_curator::blocking::LeaderLatch::new(&client, "/election/reports", "worker-1")?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn new(client: &CuratorClient, path: &str, id: impl Into<String>) -> Result<Self> {
        let inner = crate::leader::LeaderLatch::new(client.core().client(), path, id)?;
        Ok(Self { inner, core: client.core().clone() })
    }

    /// The same latch, closing with `mode` by default (Curator's constructor argument; the
    /// default is [`CloseMode::Silent`]). See [`close_with`](Self::close_with).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// use zk_curator::blocking::LeaderLatch;
    /// use zk_curator::leader::CloseMode;
    /// let latch = LeaderLatch::new(&client, "/election/reports", "worker-1")?.with_close_mode(CloseMode::NotifyLeader);
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn with_close_mode(self, mode: CloseMode) -> Self {
        let LeaderLatch { inner, core } = self;
        Self { inner: inner.with_close_mode(mode), core }
    }

    /// The latch path.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let latch = zk_curator::blocking::LeaderLatch::new(&client, "/election/reports", "worker-1")?;
    /// assert_eq!(latch.path(), "/election/reports");
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
    /// # let latch = zk_curator::blocking::LeaderLatch::new(&client, "/election/reports", "worker-1")?;
    /// assert_eq!(latch.id(), "worker-1");
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn id(&self) -> &str {
        self.inner.id()
    }

    /// The latch's state: latent, started or closed.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let latch = zk_curator::blocking::LeaderLatch::new(&client, "/election/reports", "worker-1")?;
    /// assert_eq!(latch.state(), zk_curator::leader::LatchState::Latent);
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn state(&self) -> LatchState {
        self.inner.state()
    }

    /// Starts taking part: creates our node and queues, in the background on the client's
    /// runtime thread (Curator's `start`). Does not wait; works from any thread.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the latch was already started or closed (a latch starts once,
    /// as in Curator).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// let latch = zk_curator::blocking::LeaderLatch::new(&client, "/election/reports", "worker-1")?;
    /// latch.start()?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn start(&self) -> Result<()> {
        self.core.enter(|| self.inner.start())
    }

    /// Stops taking part: deletes our node and waits for the delete (at most the connection
    /// timeout; a delete that takes longer goes on in the background, guaranteed). Leadership, if
    /// held, is lost. Closing a latch that is not started (or already closed) only marks it closed.
    ///
    /// # Errors
    /// As [`LeaderLatch::close`](crate::leader::LeaderLatch::close): the delete's error when leading (the
    /// node stays queued for guaranteed deletion in the background), or
    /// [`Error::DeadlineExceeded`] when it did not finish in time;
    /// [`Error::InvalidArgument`] naming `runtime` when called inside a tokio runtime context
    /// (nothing is closed; dropping the latch closes it in the background).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// let latch = zk_curator::blocking::LeaderLatch::new(&client, "/election/reports", "worker-1")?;
    /// latch.start()?;
    /// // ...
    /// latch.close()?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn close(&self) -> Result<()> {
        self.core.block_on(self.inner.close())?
    }

    /// [`close`](Self::close), telling leadership listeners as `mode` says: with
    /// [`CloseMode::NotifyLeader`] a leader's [`leadership_changes`](Self::leadership_changes)
    /// get [`LeadershipState::NotLeader`] before they end; with [`CloseMode::Silent`] they just
    /// end.
    ///
    /// # Errors
    /// As [`close`](Self::close).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let latch = zk_curator::blocking::LeaderLatch::new(&client, "/election/reports", "worker-1")?;
    /// latch.close_with(zk_curator::leader::CloseMode::NotifyLeader)?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn close_with(&self, mode: CloseMode) -> Result<()> {
        self.core.block_on(self.inner.close_with(mode))?
    }

    /// True while this participant leads: its node is first in line and its hold is
    /// [`HoldState::Held`](crate::locks::HoldState::Held) (connected, on the node's own session, the node
    /// not deleted). Computed when asked; never waits.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let latch = zk_curator::blocking::LeaderLatch::new(&client, "/election/reports", "worker-1")?;
    /// if latch.has_leadership() {
    ///     // ... do what only the leader may do ...
    /// }
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn has_leadership(&self) -> bool {
        self.inner.has_leadership()
    }

    /// The hold of the current (or last, not yet replaced) leadership: node, fencing token, state.
    /// `None` while queued.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let latch = zk_curator::blocking::LeaderLatch::new(&client, "/election/reports", "worker-1")?;
    /// if let Some(hold) = latch.hold() {
    ///     println!("our node {} is {:?}", hold.path(), hold.hold_state());
    /// }
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn hold(&self) -> Option<Arc<Hold>> {
        self.inner.hold()
    }

    /// The fencing token of the leadership, while [`has_leadership`](Self::has_leadership).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let latch = zk_curator::blocking::LeaderLatch::new(&client, "/election/reports", "worker-1")?;
    /// if let Some(token) = latch.fencing_token() {
    ///     println!("leading with token {token}");
    /// }
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn fencing_token(&self) -> Option<FencingToken> {
        self.inner.fencing_token()
    }

    /// Where this participant stands now: [`LeadershipState::Leader`] exactly when
    /// [`has_leadership`](Self::has_leadership).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let latch = zk_curator::blocking::LeaderLatch::new(&client, "/election/reports", "worker-1")?;
    /// println!("{:?}", latch.leadership_state());
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn leadership_state(&self) -> LeadershipState {
        self.inner.leadership_state()
    }

    /// A receiver of the latch's leadership state as the background task last saw it (it may
    /// trail [`leadership_state`](Self::leadership_state) by a moment); `borrow()` works from any
    /// thread, waiting for a change through [`CuratorClient::block_on`].
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let latch = zk_curator::blocking::LeaderLatch::new(&client, "/election/reports", "worker-1")?;
    /// let mut state = latch.watch_leadership();
    /// client.block_on(state.changed())?.ok();
    /// println!("now {:?}", *state.borrow());
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn watch_leadership(&self) -> watch::Receiver<LeadershipState> {
        self.inner.watch_leadership()
    }

    /// Leadership changes, waited for on the calling thread (Curator's `LeaderLatchListener`):
    /// the state now, then each change in order — `Leader`, `Suspended`, `Leader`, ..., `Lost`,
    /// `NotLeader` (queued again). It ends when the latch is closed; see [`CloseMode`].
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let latch = zk_curator::blocking::LeaderLatch::new(&client, "/election/reports", "worker-1")?;
    /// let changes = latch.leadership_changes();
    /// std::thread::spawn(move || {
    ///     for state in changes {
    ///         println!("leadership: {state:?}");
    ///     }
    /// });
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn leadership_changes(&self) -> LeadershipChanges {
        LeadershipChanges::new(self.inner.leadership_changes(), self.path(), &self.core)
    }

    /// Why the latch's last attempt to queue failed (e.g.
    /// [`ErrorKind::NotAuthorized`](crate::ErrorKind::NotAuthorized)): it tries again every second
    /// in the background; `None` until an attempt fails, and again once an attempt leads.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let latch = zk_curator::blocking::LeaderLatch::new(&client, "/election/reports", "worker-1")?;
    /// if let Some(e) = latch.queue_errors().borrow().as_ref() {
    ///     eprintln!("cannot queue: {e}");
    /// }
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn queue_errors(&self) -> watch::Receiver<Option<Error>> {
        self.inner.queue_errors()
    }

    /// A write guarded by leadership: applied atomically only if our latch node still exists
    /// (see [`Hold::guarded_write`]).
    ///
    /// # Errors
    /// As [`LeaderLatch::guarded_write`](crate::leader::LeaderLatch::guarded_write):
    /// [`Error::NotOwner`] naming the latch path when this participant does not lead now (nothing
    /// sent), [`Error::LockLost`] when the node is gone; [`Error::InvalidArgument`] naming
    /// `runtime` when called inside a tokio runtime context (nothing sent).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let latch = zk_curator::blocking::LeaderLatch::new(&client, "/election/reports", "worker-1")?;
    /// let write = zk_curator::locks::GuardedWrite::new().set_data("/config/active", b"worker-1", None);
    /// latch.guarded_write(write)?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn guarded_write(&self, write: GuardedWrite) -> Result<Vec<OpResult>> {
        self.core.block_on(self.inner.guarded_write(write))?
    }

    /// Waits until this participant leads (Curator's `await()`).
    ///
    /// # Errors
    /// [`Error::Closed`] naming the path if the latch is not started, or is closed while waiting;
    /// [`Error::InvalidArgument`] naming `runtime` when called inside a tokio runtime context.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// let latch = zk_curator::blocking::LeaderLatch::new(&client, "/election/reports", "worker-1")?;
    /// latch.start()?;
    /// latch.await_leadership()?;
    /// println!("leading with token {:?}", latch.fencing_token());
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn await_leadership(&self) -> Result<()> {
        self.core.block_on(self.inner.await_leadership())?
    }

    /// Like [`await_leadership`](Self::await_leadership), giving up after `timeout`: `Ok(false)`
    /// if not leading by then. Returns within `timeout` (plus a few ms) whatever the connection
    /// does.
    ///
    /// # Errors
    /// As [`await_leadership`](Self::await_leadership).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let latch = zk_curator::blocking::LeaderLatch::new(&client, "/election/reports", "worker-1")?;
    /// if latch.await_leadership_timeout(std::time::Duration::from_secs(5))? {
    ///     println!("{} leads", latch.id());
    /// }
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn await_leadership_timeout(&self, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let timeout = timeout.into().remaining();
        self.core.block_on(self.inner.await_leadership_timeout(timeout))?
    }

    /// Waits until the current leadership is lost; returns at once if not leading now.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `runtime` when called inside a tokio runtime context.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let latch = zk_curator::blocking::LeaderLatch::new(&client, "/election/reports", "worker-1")?;
    /// latch.await_leadership()?;
    /// latch.lost()?;
    /// eprintln!("leadership lost");
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn lost(&self) -> Result<()> {
        self.core.block_on(self.inner.lost())
    }

    /// Like [`lost`](Self::lost), giving up after `timeout`: `Ok(true)` once the leadership is
    /// lost (or if not leading now), `Ok(false)` if still leading after `timeout`. Returns within
    /// `timeout` (plus a few ms) whatever the connection does.
    ///
    /// # Errors
    /// As [`lost`](Self::lost).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let latch = zk_curator::blocking::LeaderLatch::new(&client, "/election/reports", "worker-1")?;
    /// while !latch.lost_timeout(std::time::Duration::from_secs(1))? {
    ///     // ... one step of the leader's work ...
    /// }
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn lost_timeout(&self, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let timeout = timeout.into().remaining();
        let deadline = deadline_after(timeout);
        // The timer is made inside the future: it needs the runtime entered by `block_on`.
        let lost = self.core.block_on(async { tokio::time::timeout_at(deadline.into(), self.inner.lost()).await })?;
        Ok(lost.is_ok())
    }

    /// Every participant in line, the leader first (Curator's `getParticipants`). Nodes that
    /// vanish while being read are left out; the first one read is flagged leader.
    ///
    /// # Errors
    /// Server errors after retries; [`Error::InvalidArgument`] naming `runtime` when called
    /// inside a tokio runtime context.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let latch = zk_curator::blocking::LeaderLatch::new(&client, "/election/reports", "worker-1")?;
    /// for p in latch.participants()? {
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
    /// # let latch = zk_curator::blocking::LeaderLatch::new(&client, "/election/reports", "worker-1")?;
    /// match latch.leader()? {
    ///     Some(leader) => println!("{} leads", leader.id),
    ///     None => println!("nobody takes part"),
    /// }
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn leader(&self) -> Result<Option<Participant>> {
        self.core.block_on(self.inner.leader())?
    }
}

/// Leadership changes of one blocking [`LeaderLatch`] or [`LeaderSelector`](super::LeaderSelector),
/// from `leadership_changes()`, waited for on the calling thread: the state when it was made, then
/// every change once, in order. It ends when the participant is closed (or dropped).
///
/// It is a notification: the authority is `has_leadership()`, computed when asked. As an
/// [`Iterator`] it ends (with a `tracing` warning) if used inside a tokio runtime context, where
/// it cannot wait; [`next_timeout`](Self::next_timeout) says so with a typed error instead.
/// Bounded as [`LeadershipStream`](crate::leader::LeadershipStream) is.
///
/// # Examples
/// ```no_run
/// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
/// # let latch = zk_curator::blocking::LeaderLatch::new(&client, "/election/reports", "worker-1")?;
/// use zk_curator::leader::LeadershipState;
/// for state in latch.leadership_changes() {
///     match state {
///         LeadershipState::Leader => println!("leading: start the scheduler"),
///         _ => println!("{state:?}: pause the scheduler"),
///     }
/// }
/// # Ok::<(), zk_curator::Error>(())
/// ```
#[derive(Debug)]
pub struct LeadershipChanges {
    inner: crate::leader::LeadershipStream,
    path: String,
    core: Arc<Core>,
}

impl LeadershipChanges {
    pub(crate) fn new(inner: crate::leader::LeadershipStream, path: &str, core: &Arc<Core>) -> Self {
        Self { inner, path: path.to_string(), core: core.clone() }
    }

    /// The next state within `timeout`: `Ok(None)` once the participant is closed. Returns
    /// within `timeout` (plus a few ms); a state not returned stays for the next call.
    ///
    /// # Errors
    /// [`Error::DeadlineExceeded`] naming the election path when no change came within
    /// `timeout`; [`Error::InvalidArgument`] naming `runtime` when called inside a tokio runtime
    /// context (nothing is taken from the stream).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let latch = zk_curator::blocking::LeaderLatch::new(&client, "/election/reports", "worker-1")?;
    /// let mut changes = latch.leadership_changes();
    /// match changes.next_timeout(std::time::Duration::from_secs(1)) {
    ///     Ok(Some(state)) => println!("{state:?}"),
    ///     Ok(None) => println!("closed"),
    ///     Err(e) if e.kind() == zk_curator::ErrorKind::DeadlineExceeded => println!("no change"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn next_timeout(&mut self, timeout: impl Into<crate::Deadline>) -> Result<Option<LeadershipState>> {
        let timeout = timeout.into().remaining();
        self.core.feed_next_timeout(self.inner.next(), timeout, &self.path, "waiting for a leadership change of")
    }

    /// How many changes this reader skipped because it fell behind (see
    /// [`LeadershipStream::missed`](crate::leader::LeadershipStream::missed)).
    pub fn missed(&self) -> u64 {
        self.inner.missed()
    }

    /// Waits for the next state: `Ok(None)` once the participant is closed.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `runtime` when called inside a tokio runtime context
    /// (nothing is taken from the stream).
    #[deprecated(note = "use `Iterator::next` (`for state in changes`), or `next_timeout`")]
    pub fn recv(&mut self) -> Result<Option<LeadershipState>> {
        self.core.block_on(self.inner.next())
    }

    /// Like [`recv`](Self::recv), giving up after `timeout`.
    ///
    /// # Errors
    /// As [`next_timeout`](Self::next_timeout).
    #[deprecated(note = "use `next_timeout`")]
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<Option<LeadershipState>> {
        self.next_timeout(timeout)
    }
}

impl Iterator for LeadershipChanges {
    type Item = LeadershipState;

    /// Waits for the next state; `None` once the participant is closed (or when called inside a
    /// tokio runtime context: logged).
    fn next(&mut self) -> Option<LeadershipState> {
        self.core.feed_next(self.inner.next(), &self.path)
    }
}
