//! [`InterProcessNonFairMutex`]: the blocking non-fair mutex (one raced node per lock path).

use std::sync::Arc;
use std::time::Duration;

use super::{Core, CuratorClient, MutexGuard};
use crate::error::Result;
use crate::locks::Hold;

/// A blocking [`InterProcessNonFairMutex`](crate::locks::InterProcessNonFairMutex): one EPHEMERAL node,
/// `<path>/nonfair-lock`, raced for; waited for on the calling thread. Guards and Curator-style
/// holds as [`InterProcessMutex`](super::InterProcessMutex) (the calling OS thread owns a
/// Curator-style hold); no order among waiters (see the async type for when to prefer it).
#[derive(Clone)]
pub struct InterProcessNonFairMutex {
    inner: crate::locks::InterProcessNonFairMutex,
    core: Arc<Core>,
}

impl std::fmt::Debug for InterProcessNonFairMutex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InterProcessNonFairMutex").field("path", &self.path()).finish()
    }
}

impl InterProcessNonFairMutex {
    /// A non-fair mutex on `path`.
    ///
    /// # Errors
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) naming `path` if it is not a valid
    /// ZooKeeper path (or is `/`).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// let lock = zk_curator::blocking::InterProcessNonFairMutex::new(&client, "/locks/order-42")?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn new(client: &CuratorClient, path: &str) -> Result<Self> {
        let inner = crate::locks::InterProcessNonFairMutex::new(client.core().client(), path)?;
        Ok(Self { inner, core: client.core().clone() })
    }

    /// The lock path.
    pub fn path(&self) -> &str {
        self.inner.path()
    }

    /// The async mutex behind this one.
    pub fn as_async(&self) -> &crate::locks::InterProcessNonFairMutex {
        &self.inner
    }

    /// Waits for the lock and returns a guard that owns the hold (never re-entrant).
    ///
    /// # Errors
    /// As [`InterProcessNonFairMutex::lock`](crate::locks::InterProcessNonFairMutex::lock);
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `runtime` when called
    /// inside a tokio runtime context.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let lock = zk_curator::blocking::InterProcessNonFairMutex::new(&client, "/locks/order-42")?;
    /// let guard = lock.lock()?;
    /// guard.release()?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn lock(&self) -> Result<MutexGuard> {
        let guard = self.core.block_on(self.inner.lock())??;
        Ok(MutexGuard::new(guard, &self.core))
    }

    /// Like [`lock`](Self::lock), giving up after `timeout` (`Ok(None)`, no node of ours left);
    /// returns within `timeout` whatever the connection does. Zero is one create.
    ///
    /// # Errors
    /// As [`lock`](Self::lock).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let lock = zk_curator::blocking::InterProcessNonFairMutex::new(&client, "/locks/order-42")?;
    /// if let Some(guard) = lock.try_lock_for(std::time::Duration::from_millis(200))? {
    ///     guard.release()?;
    /// }
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn try_lock_for(&self, timeout: impl Into<crate::Deadline>) -> Result<Option<MutexGuard>> {
        let timeout = timeout.into().remaining();
        let guard = self.core.block_on(self.inner.try_lock_for(timeout))??;
        Ok(guard.map(|guard| MutexGuard::new(guard, &self.core)))
    }

    /// One create: the guard if the lock was free, else `Ok(None)`.
    ///
    /// # Errors
    /// As [`lock`](Self::lock).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let lock = zk_curator::blocking::InterProcessNonFairMutex::new(&client, "/locks/order-42")?;
    /// if let Some(guard) = lock.try_lock()? {
    ///     guard.release()?;
    /// }
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn try_lock(&self) -> Result<Option<MutexGuard>> {
        self.try_lock_for(Duration::ZERO)
    }

    /// Waits until the calling thread holds the lock, Curator-style (re-entrant per thread).
    ///
    /// # Errors
    /// As [`InterProcessNonFairMutex::acquire`](crate::locks::InterProcessNonFairMutex::acquire);
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `runtime` inside a tokio
    /// runtime context.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let lock = zk_curator::blocking::InterProcessNonFairMutex::new(&client, "/locks/order-42")?;
    /// lock.acquire()?;
    /// lock.release()?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn acquire(&self) -> Result<()> {
        self.core.block_on(self.inner.acquire())?
    }

    /// Like [`acquire`](Self::acquire), giving up after `timeout` (`Ok(false)`).
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let lock = zk_curator::blocking::InterProcessNonFairMutex::new(&client, "/locks/order-42")?;
    /// if lock.acquire_timeout(std::time::Duration::from_secs(1))? {
    ///     lock.release()?;
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
    /// [`Error::NotOwner`](crate::Error::NotOwner) if the calling thread holds nothing; otherwise
    /// as [`InterProcessNonFairMutex::release`](crate::locks::InterProcessNonFairMutex::release).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let lock = zk_curator::blocking::InterProcessNonFairMutex::new(&client, "/locks/order-42")?;
    /// lock.acquire()?;
    /// lock.release()?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn release(&self) -> Result<()> {
        self.core.block_on(self.inner.release())?
    }

    /// True if this mutex is held (any thread's Curator-style hold or a live guard).
    pub fn is_acquired_in_this_process(&self) -> bool {
        self.inner.is_acquired_in_this_process()
    }

    /// The calling thread's Curator-style hold, if any.
    pub fn current_hold(&self) -> Option<Arc<Hold>> {
        self.core.enter(|| self.inner.current_hold())
    }
}
