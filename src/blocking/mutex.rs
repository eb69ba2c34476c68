//! [`InterProcessMutex`] and [`MutexGuard`]: the blocking mutex and its guard (also the guard of
//! both read-write halves).

use std::sync::Arc;
use std::time::Duration;

use super::{Core, CuratorClient};
use crate::error::Result;
use crate::locks::driver::{LockDriver, StandardLockDriver};
use crate::locks::{FencingToken, Hold, HoldState};

/// A blocking [`InterProcessMutex`](crate::locks::InterProcessMutex): the same lock (wire-compatible
/// with Curator's, fair, cancel safe), waited for on the calling thread.
///
/// Two ownership models, as in the async API (never mixed):
///
/// * **guards** ([`lock`](Self::lock), [`try_lock_for`](Self::try_lock_for),
///   [`try_lock`](Self::try_lock)): a [`MutexGuard`] owns its hold, may move to another thread,
///   and releases on [`release`](MutexGuard::release) or when dropped (on any thread); never
///   re-entered.
/// * **Curator style** ([`acquire`](Self::acquire), [`acquire_timeout`](Self::acquire_timeout),
///   [`release`](Self::release)): the hold belongs to the calling OS thread, as Curator's belongs
///   to its thread — re-entrant for that thread, released only by it (another thread gets
///   [`Error::NotOwner`](crate::Error::NotOwner)), as often as it acquired. A thread that ends
///   without its releases orphans the hold until the last clone of this mutex is dropped (then it
///   is deleted, with a warning) or the session ends. Prefer guards.
///
/// Clones share holders (as the async mutex's clones do); two mutexes made by
/// [`new`](Self::new) on one path are two contenders even in one thread.
#[derive(Clone)]
pub struct InterProcessMutex {
    inner: crate::locks::InterProcessMutex,
    core: Arc<Core>,
}

impl std::fmt::Debug for InterProcessMutex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InterProcessMutex").field("path", &self.path()).finish()
    }
}

impl InterProcessMutex {
    /// A mutex on `path`, writing the client's default data into its nodes.
    ///
    /// # Errors
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) naming `path` if it is not a valid
    /// ZooKeeper path (or is `/`).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// let mutex = zk_curator::blocking::InterProcessMutex::new(&client, "/locks/report")?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn new(client: &CuratorClient, path: &str) -> Result<Self> {
        Ok(Self {
            inner: crate::locks::InterProcessMutex::new(client.core().client(), path)?,
            core: client.core().clone(),
        })
    }

    /// Like [`new`](Self::new), writing `data` into the lock nodes.
    ///
    /// # Errors
    /// As [`new`](Self::new).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// let mutex = zk_curator::blocking::InterProcessMutex::with_data(&client, "/locks/report", "host-7")?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn with_data(client: &CuratorClient, path: &str, data: impl Into<Vec<u8>>) -> Result<Self> {
        let inner = crate::locks::InterProcessMutex::with_data(client.core().client(), path, data)?;
        Ok(Self { inner, core: client.core().clone() })
    }

    /// The lock path.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let mutex = zk_curator::blocking::InterProcessMutex::new(&client, "/locks/report")?;
    /// assert_eq!(mutex.path(), "/locks/report");
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn path(&self) -> &str {
        self.inner.path()
    }

    /// The async mutex inside (the same lock and holders), e.g. for
    /// [`InterProcessMultiLock::new`](super::InterProcessMultiLock::new).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let mutex = zk_curator::blocking::InterProcessMutex::new(&client, "/locks/report")?;
    /// let boxed: Box<dyn zk_curator::locks::InterProcessLock> = Box::new(mutex.as_async().clone());
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn as_async(&self) -> &crate::locks::InterProcessMutex {
        &self.inner
    }

    /// Makes later acquisitions revocable; see
    /// [`InterProcessMutex::make_revocable`](crate::locks::InterProcessMutex::make_revocable).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let mutex = zk_curator::blocking::InterProcessMutex::new(&client, "/locks/report")?;
    /// mutex.make_revocable();
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn make_revocable(&self) {
        self.inner.make_revocable()
    }

    /// Waits for the lock and returns a guard that owns the hold. Never re-enters: if this
    /// mutex is already held (by a guard, or Curator-style by any thread), the call queues.
    ///
    /// # Errors
    /// As [`InterProcessMutex::lock`](crate::locks::InterProcessMutex::lock)
    /// ([`Error::Closed`](crate::Error::Closed), server errors after retries);
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `runtime` when called
    /// inside a tokio runtime context.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let mutex = zk_curator::blocking::InterProcessMutex::new(&client, "/locks/report")?;
    /// let guard = mutex.lock()?;
    /// // The guard may move to another thread; the hold goes with it.
    /// std::thread::spawn(move || guard.release()).join().unwrap()?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn lock(&self) -> Result<MutexGuard> {
        let guard = self.core.block_on(self.inner.lock())??;
        Ok(MutexGuard::new(guard, &self.core))
    }

    /// Like [`lock`](Self::lock), giving up after `timeout` (`Ok(None)`, our node deleted). Returns
    /// within `timeout` (plus a few ms) whatever the connection does, the server down included.
    ///
    /// # Errors
    /// As [`lock`](Self::lock).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let mutex = zk_curator::blocking::InterProcessMutex::new(&client, "/locks/report")?;
    /// match mutex.try_lock_for(std::time::Duration::from_secs(5))? {
    ///     Some(guard) => guard.release()?,
    ///     None => eprintln!("someone else holds it"),
    /// }
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn try_lock_for(&self, timeout: impl Into<crate::Deadline>) -> Result<Option<MutexGuard>> {
        let timeout = timeout.into().remaining();
        let guard = self.core.block_on(self.inner.try_lock_for(timeout))??;
        Ok(guard.map(|guard| MutexGuard::new(guard, &self.core)))
    }

    /// One attempt (a create and a listing): the guard if the lock was free, else `Ok(None)` —
    /// at once, sending nothing, without a connection.
    ///
    /// # Errors
    /// As [`lock`](Self::lock).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let mutex = zk_curator::blocking::InterProcessMutex::new(&client, "/locks/report")?;
    /// if let Some(guard) = mutex.try_lock()? {
    ///     guard.release()?;
    /// }
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn try_lock(&self) -> Result<Option<MutexGuard>> {
        self.try_lock_for(Duration::ZERO)
    }

    /// Waits until the calling thread holds the lock, Curator-style (re-entrant: a thread that
    /// holds it only counts one more hold).
    ///
    /// # Errors
    /// As [`InterProcessMutex::acquire`](crate::locks::InterProcessMutex::acquire)
    /// ([`Error::LockLost`](crate::Error::LockLost) re-entering a lost hold,
    /// [`Error::Closed`](crate::Error::Closed), server errors after retries);
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `runtime` when called
    /// inside a tokio runtime context.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let mutex = zk_curator::blocking::InterProcessMutex::new(&client, "/locks/report")?;
    /// mutex.acquire()?;
    /// mutex.acquire()?; // re-entered by this thread: no round trip
    /// mutex.release()?;
    /// mutex.release()?; // the last release deletes the node
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn acquire(&self) -> Result<()> {
        self.core.block_on(self.inner.acquire())?
    }

    /// Like [`acquire`](Self::acquire), giving up after `timeout`: `Ok(false)` if not acquired.
    /// Returns within `timeout` (plus a few ms) whatever the connection does; zero is one attempt.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let mutex = zk_curator::blocking::InterProcessMutex::new(&client, "/locks/report")?;
    /// if mutex.acquire_timeout(std::time::Duration::from_secs(5))? {
    ///     mutex.release()?;
    /// }
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn acquire_timeout(&self, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let timeout = timeout.into().remaining();
        self.core.block_on(self.inner.acquire_timeout(timeout))?
    }

    /// Releases one Curator-style hold of the calling thread; the last one deletes the node.
    ///
    /// # Errors
    /// [`Error::NotOwner`](crate::Error::NotOwner) if the calling thread holds nothing (another
    /// thread's hold is not its own; a guard is no thread's hold); otherwise as
    /// [`InterProcessMutex::release`](crate::locks::InterProcessMutex::release);
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `runtime` when called
    /// inside a tokio runtime context (nothing is released).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let mutex = zk_curator::blocking::InterProcessMutex::new(&client, "/locks/report")?;
    /// mutex.acquire()?;
    /// mutex.release()?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn release(&self) -> Result<()> {
        self.core.block_on(self.inner.release())?
    }

    /// True if this mutex is held — through any thread's Curator-style hold or a live guard
    /// (Curator's `isAcquiredInThisProcess`).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let mutex = zk_curator::blocking::InterProcessMutex::new(&client, "/locks/report")?;
    /// let guard = mutex.lock()?;
    /// assert!(mutex.is_acquired_in_this_process());
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn is_acquired_in_this_process(&self) -> bool {
        self.inner.is_acquired_in_this_process()
    }

    /// True if the calling thread holds the lock Curator-style (Curator's
    /// `isOwnedByCurrentThread`; guards do not count).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let mutex = zk_curator::blocking::InterProcessMutex::new(&client, "/locks/report")?;
    /// mutex.acquire()?;
    /// assert!(mutex.is_owned_by_current_thread());
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn is_owned_by_current_thread(&self) -> bool {
        self.core.enter(|| self.inner.is_owned_by_current_task())
    }

    /// The calling thread's lock node path, if it holds the lock Curator-style (Curator's
    /// `getLockPath`).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let mutex = zk_curator::blocking::InterProcessMutex::new(&client, "/locks/report")?;
    /// mutex.acquire()?;
    /// println!("holding {}", mutex.lock_node_path().unwrap());
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn lock_node_path(&self) -> Option<String> {
        self.core.enter(|| self.inner.lock_node_path())
    }

    /// The calling thread's Curator-style hold (node, fencing token, state), if any.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let mutex = zk_curator::blocking::InterProcessMutex::new(&client, "/locks/report")?;
    /// mutex.acquire()?;
    /// let token = mutex.current_hold().unwrap().fencing_token();
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn current_hold(&self) -> Option<Arc<Hold>> {
        self.core.enter(|| self.inner.current_hold())
    }

    /// Every contender's node, full paths in lock order (the holder first).
    ///
    /// # Errors
    /// Server errors after retries; [`Error::InvalidArgument`](crate::Error::InvalidArgument)
    /// naming `runtime` when called inside a tokio runtime context.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let mutex = zk_curator::blocking::InterProcessMutex::new(&client, "/locks/report")?;
    /// for node in mutex.participant_nodes()? {
    ///     println!("{node}");
    /// }
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn participant_nodes(&self) -> Result<Vec<String>> {
        self.core.block_on(self.inner.participant_nodes())?
    }

    /// [`participant_nodes`](Self::participant_nodes) within `timeout`, whatever the connection
    /// does.
    ///
    /// # Errors
    /// [`Error::DeadlineExceeded`](crate::Error::DeadlineExceeded) when `timeout` passed first;
    /// otherwise as [`participant_nodes`](Self::participant_nodes).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let mutex = zk_curator::blocking::InterProcessMutex::new(&client, "/locks/report")?;
    /// let nodes = mutex.participant_nodes_within(std::time::Duration::from_secs(1))?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn participant_nodes_within(&self, timeout: impl Into<crate::Deadline>) -> Result<Vec<String>> {
        let timeout = timeout.into();
        self.core.block_on(self.inner.participant_nodes_within(timeout))?
    }

    /// The old name of [`participant_nodes_within`](Self::participant_nodes_within).
    ///
    /// # Errors
    /// As [`participant_nodes_within`](Self::participant_nodes_within).
    #[deprecated(
        note = "use `participant_nodes_within`: a `_timeout` name is a wait that returns `Ok(false)`/`Ok(None)` on time-out; an operation that runs out of time fails, within a `_within` name"
    )]
    pub fn participant_nodes_timeout(&self, timeout: Duration) -> Result<Vec<String>> {
        self.participant_nodes_within(timeout)
    }
}

/// A hold of a blocking [`InterProcessMutex`] (or, as [`ReadLockGuard`](super::ReadLockGuard) /
/// [`WriteLockGuard`](super::WriteLockGuard), of a read-write half), owned: `Send + 'static`, it
/// may move to another thread and the hold goes with it; never shared, never re-entered.
///
/// [`release`](Self::release) waits for the delete and reports it; dropping the guard — on any
/// thread, also one with no runtime — releases it in the background (the client's delete queue
/// keeps trying until the node is gone).
#[must_use = "dropping the guard releases the lock"]
pub struct MutexGuard<D: LockDriver = StandardLockDriver> {
    inner: crate::locks::MutexGuard<D>,
    core: Arc<Core>,
}

impl<D: LockDriver> std::fmt::Debug for MutexGuard<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MutexGuard").field("node", &self.node_path()).field("token", &self.fencing_token()).finish()
    }
}

impl<D: LockDriver> MutexGuard<D> {
    pub(crate) fn new(inner: crate::locks::MutexGuard<D>, core: &Arc<Core>) -> Self {
        Self { inner, core: core.clone() }
    }

    pub(crate) fn as_async(&self) -> &crate::locks::MutexGuard<D> {
        &self.inner
    }

    /// The lock node's full path.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let guard = zk_curator::blocking::InterProcessMutex::new(&client, "/locks/report")?.lock()?;
    /// println!("holding {}", guard.node_path());
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn node_path(&self) -> &str {
        self.inner.node_path()
    }

    /// The fencing token of this hold (see [`FencingToken`]).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let guard = zk_curator::blocking::InterProcessMutex::new(&client, "/locks/report")?.lock()?;
    /// let token: i64 = guard.fencing_token().value(); // pass it to the store you write to
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn fencing_token(&self) -> FencingToken {
        self.inner.fencing_token()
    }

    /// The hold's state now. The first call starts watching the lock node, so that its deletion
    /// by someone else shows as [`HoldState::Lost`] too (not only a lost session).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let guard = zk_curator::blocking::InterProcessMutex::new(&client, "/locks/report")?.lock()?;
    /// if guard.hold_state() != zk_curator::locks::HoldState::Held {
    ///     // stop doing what only the holder may do
    /// }
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn hold_state(&self) -> HoldState {
        hold_state(&self.core, self.inner.hold())
    }

    /// The underlying hold: data, session, and through
    /// [`CuratorClient::block_on`](super::CuratorClient::block_on) guarded writes and `lost()`.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let guard = zk_curator::blocking::InterProcessMutex::new(&client, "/locks/report")?.lock()?;
    /// let write = zk_curator::locks::GuardedWrite::new().set_data("/reports/latest", b"done", None);
    /// client.block_on(guard.hold().guarded_write(write))??;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn hold(&self) -> &Arc<Hold> {
        self.inner.hold()
    }

    /// Releases the hold: deletes the lock node and waits for it (at most the connection
    /// timeout).
    ///
    /// # Errors
    /// As [`MutexGuard::release`](crate::locks::MutexGuard::release): the delete's error, or
    /// [`Error::DeadlineExceeded`](crate::Error::DeadlineExceeded); the node stays queued for
    /// deletion in the background either way. Inside a tokio runtime context,
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `runtime`: the guard is
    /// then released in the background, as if dropped.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// let guard = zk_curator::blocking::InterProcessMutex::new(&client, "/locks/report")?.lock()?;
    /// guard.release()?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn release(self) -> Result<()> {
        let MutexGuard { inner, core } = self;
        core.block_on(inner.release())?
    }
}

/// A hold's state, its monitor started on the client's runtime (a hold made without a runtime
/// context around cannot start it itself).
pub(crate) fn hold_state(core: &Core, hold: &Arc<Hold>) -> HoldState {
    core.enter(|| drop(hold.watch_state()));
    hold.hold_state()
}
