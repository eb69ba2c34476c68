//! [`InterProcessSemaphoreV2`] with its [`Lease`]s, and [`InterProcessSemaphoreMutex`], blocking.

use std::sync::Arc;

use super::mutex::hold_state;
use super::{Core, CuratorClient};
use crate::error::Result;
use crate::locks::{FencingToken, Hold, HoldState};

/// A blocking [`InterProcessSemaphoreV2`](crate::locks::InterProcessSemaphoreV2): at most `max_leases`
/// [`Lease`]s at once across every process (and Curator) using the path.
///
/// # Examples
/// ```no_run
/// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
/// let jobs = zk_curator::blocking::InterProcessSemaphoreV2::new(&client, "/throttle/reports", 3)?;
/// let lease = jobs.acquire()?; // one of at most 3, across all processes
/// // ... run the job ...
/// lease.release()?;
/// # Ok::<(), zk_curator::Error>(())
/// ```
#[derive(Clone)]
pub struct InterProcessSemaphoreV2 {
    inner: crate::locks::InterProcessSemaphoreV2,
    core: Arc<Core>,
}

impl std::fmt::Debug for InterProcessSemaphoreV2 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InterProcessSemaphoreV2").field("path", &self.path()).finish()
    }
}

impl InterProcessSemaphoreV2 {
    /// A semaphore on `path` with at most `max_leases` leases.
    ///
    /// # Errors
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) naming `path`;
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for zero leases.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// let jobs = zk_curator::blocking::InterProcessSemaphoreV2::new(&client, "/throttle/reports", 3)?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn new(client: &CuratorClient, path: &str, max_leases: usize) -> Result<Self> {
        let inner = crate::locks::InterProcessSemaphoreV2::new(client.core().client(), path, max_leases)?;
        Ok(Self { inner, core: client.core().clone() })
    }

    /// Like [`new`](Self::new), writing `data` into every lease node.
    ///
    /// # Errors
    /// As [`new`](Self::new).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// let jobs = zk_curator::blocking::InterProcessSemaphoreV2::with_data(&client, "/throttle/reports", 3, "host-7")?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn with_data(client: &CuratorClient, path: &str, max_leases: usize, data: impl Into<Vec<u8>>) -> Result<Self> {
        let inner = crate::locks::InterProcessSemaphoreV2::with_data(client.core().client(), path, max_leases, data)?;
        Ok(Self { inner, core: client.core().clone() })
    }

    /// A semaphore whose maximum is the shared counter at `count_path` (Curator's `SharedCount`),
    /// created with `seed` if missing and followed as it changes; see
    /// [`InterProcessSemaphoreV2::with_shared_count`](crate::locks::InterProcessSemaphoreV2::with_shared_count).
    ///
    /// # Errors
    /// As [`new`](Self::new) (`seed` must be at least 1); server errors reading the counter;
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `runtime` when called
    /// inside a tokio runtime context.
    ///
    /// # Examples
    /// ```no_run
    /// use zk_curator::blocking::InterProcessSemaphoreV2;
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// let jobs = InterProcessSemaphoreV2::with_shared_count(&client, "/throttle/reports", "/throttle/max", 3)?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn with_shared_count(client: &CuratorClient, path: &str, count_path: &str, seed: i32) -> Result<Self> {
        let core = client.core();
        let inner = core.block_on(crate::locks::InterProcessSemaphoreV2::with_shared_count(
            core.client(),
            path,
            count_path,
            seed,
        ))??;
        Ok(Self { inner, core: core.clone() })
    }

    /// The semaphore's path.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let jobs = zk_curator::blocking::InterProcessSemaphoreV2::new(&client, "/throttle/reports", 3)?;
    /// assert_eq!(jobs.path(), "/throttle/reports");
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn path(&self) -> &str {
        self.inner.path()
    }

    /// The async semaphore inside (the same semaphore).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let jobs = zk_curator::blocking::InterProcessSemaphoreV2::new(&client, "/throttle/reports", 3)?;
    /// let same: zk_curator::locks::InterProcessSemaphoreV2 = jobs.as_async().clone();
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn as_async(&self) -> &crate::locks::InterProcessSemaphoreV2 {
        &self.inner
    }

    /// The current maximum number of leases.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let jobs = zk_curator::blocking::InterProcessSemaphoreV2::new(&client, "/throttle/reports", 3)?;
    /// assert_eq!(jobs.max_leases(), 3);
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn max_leases(&self) -> usize {
        self.inner.max_leases()
    }

    /// Waits for one lease.
    ///
    /// # Errors
    /// [`Error::Closed`](crate::Error::Closed); server errors after retries;
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `runtime` when called
    /// inside a tokio runtime context.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let jobs = zk_curator::blocking::InterProcessSemaphoreV2::new(&client, "/throttle/reports", 3)?;
    /// let lease = jobs.acquire()?;
    /// lease.release()?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn acquire(&self) -> Result<Lease> {
        let lease = self.core.block_on(self.inner.acquire())??;
        Ok(Lease::new(lease, &self.core))
    }

    /// One lease within `timeout`, or `Ok(None)`; returns within `timeout` (plus a few ms)
    /// whatever the connection does. Zero is one attempt.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let jobs = zk_curator::blocking::InterProcessSemaphoreV2::new(&client, "/throttle/reports", 3)?;
    /// if let Some(lease) = jobs.acquire_timeout(std::time::Duration::from_secs(5))? {
    ///     lease.release()?;
    /// }
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn acquire_timeout(&self, timeout: impl Into<crate::Deadline>) -> Result<Option<Lease>> {
        let timeout = timeout.into().remaining();
        let lease = self.core.block_on(self.inner.acquire_timeout(timeout))??;
        Ok(lease.map(|lease| Lease::new(lease, &self.core)))
    }

    /// Waits for `n` leases, taken one at a time as in Curator; on an error, those already taken
    /// are given back. Every lease handed out is [`HoldState::Held`](crate::locks::HoldState::Held), as
    /// with [`acquire_many`](crate::locks::InterProcessSemaphoreV2::acquire_many).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) at once for `n` = 0 or more than
    /// the maximum; otherwise as [`acquire`](Self::acquire).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let jobs = zk_curator::blocking::InterProcessSemaphoreV2::new(&client, "/throttle/reports", 3)?;
    /// let leases = jobs.acquire_many(2)?;
    /// zk_curator::blocking::return_all(leases)?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn acquire_many(&self, n: usize) -> Result<Vec<Lease>> {
        let leases = self.core.block_on(self.inner.acquire_many(n))??;
        Ok(leases.into_iter().map(|lease| Lease::new(lease, &self.core)).collect())
    }

    /// `n` leases within one `timeout` for all of them, or `Ok(None)` with those already taken
    /// given back.
    ///
    /// # Errors
    /// As [`acquire_many`](Self::acquire_many).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let jobs = zk_curator::blocking::InterProcessSemaphoreV2::new(&client, "/throttle/reports", 3)?;
    /// if let Some(leases) = jobs.acquire_many_timeout(2, std::time::Duration::from_secs(5))? {
    ///     zk_curator::blocking::return_all(leases)?;
    /// }
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn acquire_many_timeout(&self, n: usize, timeout: impl Into<crate::Deadline>) -> Result<Option<Vec<Lease>>> {
        let timeout = timeout.into().remaining();
        let leases = self.core.block_on(self.inner.acquire_many_timeout(n, timeout))??;
        Ok(leases.map(|leases| leases.into_iter().map(|lease| Lease::new(lease, &self.core)).collect()))
    }

    /// The lease nodes, full paths.
    ///
    /// # Errors
    /// Server errors after retries; [`Error::InvalidArgument`](crate::Error::InvalidArgument)
    /// naming `runtime` when called inside a tokio runtime context.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let jobs = zk_curator::blocking::InterProcessSemaphoreV2::new(&client, "/throttle/reports", 3)?;
    /// println!("{} leases out", jobs.participant_nodes()?.len());
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn participant_nodes(&self) -> Result<Vec<String>> {
        self.core.block_on(self.inner.participant_nodes())?
    }
}

/// Gives every lease back, attempting all of them.
///
/// # Errors
/// The first failure (every failed delete stays queued in the background);
/// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `runtime` when called inside a
/// tokio runtime context (the leases are then released in the background, as if dropped).
///
/// # Examples
/// ```no_run
/// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
/// # let jobs = zk_curator::blocking::InterProcessSemaphoreV2::new(&client, "/throttle/reports", 3)?;
/// let leases = jobs.acquire_many(2)?;
/// zk_curator::blocking::return_all(leases)?;
/// # Ok::<(), zk_curator::Error>(())
/// ```
pub fn return_all(leases: Vec<Lease>) -> Result<()> {
    let Some(core) = leases.first().map(|lease| lease.core.clone()) else {
        return Ok(());
    };
    let leases: Vec<crate::locks::Lease> = leases.into_iter().map(|lease| lease.inner).collect();
    core.block_on(crate::locks::return_all(leases))?
}

/// One lease of a blocking [`InterProcessSemaphoreV2`]: owned, `Send + 'static` (it may move to
/// another thread), released by [`release`](Self::release) or, when dropped on any thread, in the
/// background.
#[must_use = "dropping a lease releases it"]
pub struct Lease {
    inner: crate::locks::Lease,
    core: Arc<Core>,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease").field("node", &self.node_path()).finish()
    }
}

impl Lease {
    fn new(inner: crate::locks::Lease, core: &Arc<Core>) -> Self {
        Self { inner, core: core.clone() }
    }

    /// The lease node's full path.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let lease = zk_curator::blocking::InterProcessSemaphoreV2::new(&client, "/throttle/reports", 3)?.acquire()?;
    /// println!("{}", lease.node_path());
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn node_path(&self) -> &str {
        self.inner.node_path()
    }

    /// The lease node's name.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let lease = zk_curator::blocking::InterProcessSemaphoreV2::new(&client, "/throttle/reports", 3)?.acquire()?;
    /// assert!(lease.node_name().contains("lease-"));
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn node_name(&self) -> &str {
        self.inner.node_name()
    }

    /// The data written into the lease node.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let lease = zk_curator::blocking::InterProcessSemaphoreV2::new(&client, "/throttle/reports", 3)?.acquire()?;
    /// let data: Vec<u8> = lease.data();
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn data(&self) -> Vec<u8> {
        self.inner.data()
    }

    /// The fencing token of this lease.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let lease = zk_curator::blocking::InterProcessSemaphoreV2::new(&client, "/throttle/reports", 3)?.acquire()?;
    /// let token = lease.fencing_token();
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn fencing_token(&self) -> FencingToken {
        self.inner.fencing_token()
    }

    /// The lease's state now; the first call starts watching the lease node, so that its
    /// deletion by someone else shows as [`HoldState::Lost`] too.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let lease = zk_curator::blocking::InterProcessSemaphoreV2::new(&client, "/throttle/reports", 3)?.acquire()?;
    /// assert_eq!(lease.hold_state(), zk_curator::locks::HoldState::Held);
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn hold_state(&self) -> HoldState {
        hold_state(&self.core, self.inner.hold())
    }

    /// The underlying hold (use it with [`CuratorClient::block_on`] for guarded writes).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let lease = zk_curator::blocking::InterProcessSemaphoreV2::new(&client, "/throttle/reports", 3)?.acquire()?;
    /// let session = lease.hold().session();
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn hold(&self) -> &Arc<Hold> {
        self.inner.hold()
    }

    /// Gives the lease back: deletes its node and waits (at most the connection timeout).
    ///
    /// # Errors
    /// The delete's error, or [`Error::DeadlineExceeded`](crate::Error::DeadlineExceeded); the
    /// node stays queued for deletion. Inside a tokio runtime context,
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `runtime`: the lease is then
    /// released in the background, as if dropped.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// let lease = zk_curator::blocking::InterProcessSemaphoreV2::new(&client, "/throttle/reports", 3)?.acquire()?;
    /// lease.release()?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn release(self) -> Result<()> {
        let Lease { inner, core } = self;
        core.block_on(inner.release())?
    }
}

/// A blocking [`InterProcessSemaphoreMutex`](crate::locks::InterProcessSemaphoreMutex): a semaphore with
/// one lease — a mutex that is not re-entrant (a second acquire, even by the same thread, waits)
/// and that any thread may release.
///
/// # Examples
/// ```no_run
/// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
/// let lock = zk_curator::blocking::InterProcessSemaphoreMutex::new(&client, "/locks/import")?;
/// lock.acquire()?;
/// std::thread::scope(|s| s.spawn(|| lock.release()).join().unwrap())?; // another thread may release
/// # Ok::<(), zk_curator::Error>(())
/// ```
#[derive(Clone)]
pub struct InterProcessSemaphoreMutex {
    inner: crate::locks::InterProcessSemaphoreMutex,
    core: Arc<Core>,
}

impl std::fmt::Debug for InterProcessSemaphoreMutex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InterProcessSemaphoreMutex").field("path", &self.path()).finish()
    }
}

impl InterProcessSemaphoreMutex {
    /// A semaphore mutex on `path` (Curator's layout: `<path>/locks`, `<path>/leases`).
    ///
    /// # Errors
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) naming `path`.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// let lock = zk_curator::blocking::InterProcessSemaphoreMutex::new(&client, "/locks/import")?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn new(client: &CuratorClient, path: &str) -> Result<Self> {
        let inner = crate::locks::InterProcessSemaphoreMutex::new(client.core().client(), path)?;
        Ok(Self { inner, core: client.core().clone() })
    }

    /// The path.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let lock = zk_curator::blocking::InterProcessSemaphoreMutex::new(&client, "/locks/import")?;
    /// assert_eq!(lock.path(), "/locks/import");
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn path(&self) -> &str {
        self.inner.path()
    }

    /// The async semaphore mutex inside (the same lock and lease), e.g. for
    /// [`InterProcessMultiLock::new`](super::InterProcessMultiLock::new).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let lock = zk_curator::blocking::InterProcessSemaphoreMutex::new(&client, "/locks/import")?;
    /// let boxed: Box<dyn zk_curator::locks::InterProcessLock> = Box::new(lock.as_async().clone());
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn as_async(&self) -> &crate::locks::InterProcessSemaphoreMutex {
        &self.inner
    }

    /// Waits for the lock. Not re-entrant: while this instance holds it, a second acquire waits.
    ///
    /// # Errors
    /// As [`InterProcessSemaphoreV2::acquire`].
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let lock = zk_curator::blocking::InterProcessSemaphoreMutex::new(&client, "/locks/import")?;
    /// lock.acquire()?;
    /// lock.release()?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn acquire(&self) -> Result<()> {
        self.core.block_on(self.inner.acquire())?
    }

    /// Like [`acquire`](Self::acquire) within `timeout` (`Ok(false)` if not acquired); returns
    /// within `timeout` (plus a few ms) whatever the connection does.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let lock = zk_curator::blocking::InterProcessSemaphoreMutex::new(&client, "/locks/import")?;
    /// if lock.acquire_timeout(std::time::Duration::from_secs(5))? {
    ///     lock.release()?;
    /// }
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn acquire_timeout(&self, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let timeout = timeout.into().remaining();
        self.core.block_on(self.inner.acquire_timeout(timeout))?
    }

    /// Releases the lock, from any thread.
    ///
    /// # Errors
    /// [`Error::NotOwner`](crate::Error::NotOwner) if this instance does not hold it; the
    /// delete's error otherwise; [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming
    /// `runtime` when called inside a tokio runtime context (nothing is released).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let lock = zk_curator::blocking::InterProcessSemaphoreMutex::new(&client, "/locks/import")?;
    /// lock.acquire()?;
    /// lock.release()?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn release(&self) -> Result<()> {
        self.core.block_on(self.inner.release())?
    }

    /// True while this instance holds the lock.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let lock = zk_curator::blocking::InterProcessSemaphoreMutex::new(&client, "/locks/import")?;
    /// lock.acquire()?;
    /// assert!(lock.is_acquired_in_this_process());
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn is_acquired_in_this_process(&self) -> bool {
        self.inner.is_acquired_in_this_process()
    }

    /// The current hold, if this instance holds the lock.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let lock = zk_curator::blocking::InterProcessSemaphoreMutex::new(&client, "/locks/import")?;
    /// lock.acquire()?;
    /// let token = lock.current_hold().unwrap().fencing_token();
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn current_hold(&self) -> Option<Arc<Hold>> {
        self.inner.current_hold()
    }
}
