//! [`InterProcessReadWriteLock`] and its halves, blocking.

use std::sync::Arc;
use std::time::Duration;

use super::mutex::MutexGuard;
use super::{Core, CuratorClient};
use crate::error::Result;
use crate::locks::driver::{ReadLockDriver, WriteLockDriver};
use crate::locks::Hold;

/// A guard of the blocking read lock: a shared hold of its own (see [`MutexGuard`]).
pub type ReadLockGuard = MutexGuard<ReadLockDriver>;
/// A guard of the blocking write lock: an exclusive hold of its own (see [`MutexGuard`]).
pub type WriteLockGuard = MutexGuard<WriteLockDriver>;

/// A blocking [`InterProcessReadWriteLock`](crate::locks::InterProcessReadWriteLock): many readers or one
/// writer, FIFO, wire-compatible with Curator's.
///
/// Each half behaves as the blocking [`InterProcessMutex`](super::InterProcessMutex): guards, and
/// Curator-style holds that belong to the calling thread (re-entrant for it). A thread holding the
/// write lock Curator-style may take the read lock (a downgrade); one holding the read lock gets
/// [`Error::WouldDeadlock`](crate::Error::WouldDeadlock) asking for the write lock (no upgrade).
///
/// # Examples
/// ```no_run
/// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
/// let lock = zk_curator::blocking::InterProcessReadWriteLock::new(&client, "/locks/config")?;
/// let read = lock.read_lock().lock()?; // many readers at once
/// read.release()?;
/// let write = lock.write_lock().lock()?; // alone
/// write.release()?;
/// # Ok::<(), zk_curator::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct InterProcessReadWriteLock {
    read: ReadLock,
    write: WriteLock,
}

impl InterProcessReadWriteLock {
    /// A read-write lock on `path` writing the client's default data into its nodes.
    ///
    /// # Errors
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) naming `path`.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// let lock = zk_curator::blocking::InterProcessReadWriteLock::new(&client, "/locks/config")?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn new(client: &CuratorClient, path: &str) -> Result<Self> {
        Ok(Self::wrap(crate::locks::InterProcessReadWriteLock::new(client.core().client(), path)?, client.core()))
    }

    /// Like [`new`](Self::new), writing `data` into every node of this lock.
    ///
    /// # Errors
    /// As [`new`](Self::new).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// let lock = zk_curator::blocking::InterProcessReadWriteLock::with_data(&client, "/locks/config", "host-7")?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn with_data(client: &CuratorClient, path: &str, data: impl Into<Vec<u8>>) -> Result<Self> {
        let lock = crate::locks::InterProcessReadWriteLock::with_data(client.core().client(), path, data)?;
        Ok(Self::wrap(lock, client.core()))
    }

    fn wrap(lock: crate::locks::InterProcessReadWriteLock, core: &Arc<Core>) -> Self {
        Self {
            read: ReadLock { inner: lock.read_lock().clone(), core: core.clone() },
            write: WriteLock { inner: lock.write_lock().clone(), core: core.clone() },
        }
    }

    /// The lock path.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let lock = zk_curator::blocking::InterProcessReadWriteLock::new(&client, "/locks/config")?;
    /// assert_eq!(lock.path(), "/locks/config");
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn path(&self) -> &str {
        self.write.path()
    }

    /// The read half.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let lock = zk_curator::blocking::InterProcessReadWriteLock::new(&client, "/locks/config")?;
    /// let guard = lock.read_lock().lock()?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn read_lock(&self) -> &ReadLock {
        &self.read
    }

    /// The write half.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let lock = zk_curator::blocking::InterProcessReadWriteLock::new(&client, "/locks/config")?;
    /// let guard = lock.write_lock().lock()?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn write_lock(&self) -> &WriteLock {
        &self.write
    }
}

/// The read half of a blocking [`InterProcessReadWriteLock`].
#[derive(Clone)]
pub struct ReadLock {
    inner: crate::locks::ReadLock,
    core: Arc<Core>,
}

/// The write half of a blocking [`InterProcessReadWriteLock`].
#[derive(Clone)]
pub struct WriteLock {
    inner: crate::locks::WriteLock,
    core: Arc<Core>,
}

/// The methods both halves share, delegating to their async half `$async`; `$guard` is the half's
/// guard, `$half` names the half in the examples (`read_lock` / `write_lock`).
macro_rules! half_methods {
    ($async:ident, $guard:ty, $half:literal) => {
        /// The lock path.
        ///
        /// # Examples
        /// ```no_run
        /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
        /// # let lock = zk_curator::blocking::InterProcessReadWriteLock::new(&client, "/locks/config")?;
        #[doc = concat!("assert_eq!(lock.", $half, "().path(), \"/locks/config\");")]
        /// # Ok::<(), zk_curator::Error>(())
        /// ```
        pub fn path(&self) -> &str {
            self.inner.path()
        }

        /// The async half inside (the same lock and holders), e.g. for
        /// [`InterProcessMultiLock::new`](super::InterProcessMultiLock::new).
        ///
        /// # Examples
        /// ```no_run
        /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
        /// # let lock = zk_curator::blocking::InterProcessReadWriteLock::new(&client, "/locks/config")?;
        #[doc = concat!("let boxed: Box<dyn zk_curator::locks::InterProcessLock> = Box::new(lock.", $half, "().as_async().clone());")]
        /// # Ok::<(), zk_curator::Error>(())
        /// ```
        pub fn as_async(&self) -> &crate::locks::$async {
            &self.inner
        }

        /// Releases one Curator-style hold of the calling thread; the last one deletes the node.
        ///
        /// # Errors
        /// [`Error::NotOwner`](crate::Error::NotOwner) if the calling thread holds nothing;
        /// otherwise as [`InterProcessMutex::release`](crate::locks::InterProcessMutex::release);
        /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `runtime` when called
        /// inside a tokio runtime context.
        ///
        /// # Examples
        /// ```no_run
        /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
        /// # let lock = zk_curator::blocking::InterProcessReadWriteLock::new(&client, "/locks/config")?;
        #[doc = concat!("lock.", $half, "().acquire()?;")]
        #[doc = concat!("lock.", $half, "().release()?;")]
        /// # Ok::<(), zk_curator::Error>(())
        /// ```
        pub fn release(&self) -> Result<()> {
            self.core.block_on(self.inner.release())?
        }

        /// Like `acquire`, giving up after `timeout` (`Ok(false)`); returns within `timeout`
        /// (plus a few ms) whatever the connection does.
        ///
        /// # Errors
        /// As `acquire`.
        ///
        /// # Examples
        /// ```no_run
        /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
        /// # let lock = zk_curator::blocking::InterProcessReadWriteLock::new(&client, "/locks/config")?;
        #[doc = concat!("if lock.", $half, "().acquire_timeout(std::time::Duration::from_secs(5))? {")]
        #[doc = concat!("    lock.", $half, "().release()?;")]
        /// }
        /// # Ok::<(), zk_curator::Error>(())
        /// ```
        pub fn acquire_timeout(&self, timeout: impl Into<crate::Deadline>) -> Result<bool> {
            let timeout = timeout.into().remaining();
            self.core.block_on(self.inner.acquire_timeout(timeout))?
        }

        /// Waits for this half and returns a guard that owns the hold (never re-entered).
        ///
        /// # Errors
        /// As [`InterProcessMutex::lock`](super::InterProcessMutex::lock); for the write half also
        /// [`Error::WouldDeadlock`](crate::Error::WouldDeadlock) at once if the calling thread
        /// holds the read lock Curator-style.
        ///
        /// # Examples
        /// ```no_run
        /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
        /// # let lock = zk_curator::blocking::InterProcessReadWriteLock::new(&client, "/locks/config")?;
        #[doc = concat!("let guard = lock.", $half, "().lock()?;")]
        /// guard.release()?;
        /// # Ok::<(), zk_curator::Error>(())
        /// ```
        pub fn lock(&self) -> Result<$guard> {
            let guard = self.core.block_on(self.inner.lock())??;
            Ok(MutexGuard::new(guard, &self.core))
        }

        /// Like [`lock`](Self::lock), giving up after `timeout` (`Ok(None)`); returns within
        /// `timeout` (plus a few ms) whatever the connection does.
        ///
        /// # Errors
        /// As [`lock`](Self::lock).
        ///
        /// # Examples
        /// ```no_run
        /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
        /// # let lock = zk_curator::blocking::InterProcessReadWriteLock::new(&client, "/locks/config")?;
        #[doc = concat!("if let Some(guard) = lock.", $half, "().try_lock_for(std::time::Duration::from_secs(5))? {")]
        ///     guard.release()?;
        /// }
        /// # Ok::<(), zk_curator::Error>(())
        /// ```
        pub fn try_lock_for(&self, timeout: impl Into<crate::Deadline>) -> Result<Option<$guard>> {
            let timeout = timeout.into().remaining();
            let guard = self.core.block_on(self.inner.try_lock_for(timeout))??;
            Ok(guard.map(|guard| MutexGuard::new(guard, &self.core)))
        }

        /// One attempt; `Ok(None)` at once without a connection.
        ///
        /// # Errors
        /// As [`lock`](Self::lock).
        ///
        /// # Examples
        /// ```no_run
        /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
        /// # let lock = zk_curator::blocking::InterProcessReadWriteLock::new(&client, "/locks/config")?;
        #[doc = concat!("if let Some(guard) = lock.", $half, "().try_lock()? {")]
        ///     guard.release()?;
        /// }
        /// # Ok::<(), zk_curator::Error>(())
        /// ```
        pub fn try_lock(&self) -> Result<Option<$guard>> {
            self.try_lock_for(Duration::ZERO)
        }

        /// True if this half is held in this process (Curator-style by any thread, or by a live
        /// guard).
        ///
        /// # Examples
        /// ```no_run
        /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
        /// # let lock = zk_curator::blocking::InterProcessReadWriteLock::new(&client, "/locks/config")?;
        #[doc = concat!("let guard = lock.", $half, "().lock()?;")]
        #[doc = concat!("assert!(lock.", $half, "().is_acquired_in_this_process());")]
        /// # Ok::<(), zk_curator::Error>(())
        /// ```
        pub fn is_acquired_in_this_process(&self) -> bool {
            self.inner.is_acquired_in_this_process()
        }

        /// True if the calling thread holds this half Curator-style.
        ///
        /// # Examples
        /// ```no_run
        /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
        /// # let lock = zk_curator::blocking::InterProcessReadWriteLock::new(&client, "/locks/config")?;
        #[doc = concat!("lock.", $half, "().acquire()?;")]
        #[doc = concat!("assert!(lock.", $half, "().is_owned_by_current_thread());")]
        /// # Ok::<(), zk_curator::Error>(())
        /// ```
        pub fn is_owned_by_current_thread(&self) -> bool {
            self.core.enter(|| self.inner.is_owned_by_current_task())
        }

        /// The calling thread's Curator-style hold of this half, if any.
        ///
        /// # Examples
        /// ```no_run
        /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
        /// # let lock = zk_curator::blocking::InterProcessReadWriteLock::new(&client, "/locks/config")?;
        #[doc = concat!("lock.", $half, "().acquire()?;")]
        #[doc = concat!("let node = lock.", $half, "().current_hold().unwrap().path().to_string();")]
        /// # Ok::<(), zk_curator::Error>(())
        /// ```
        pub fn current_hold(&self) -> Option<Arc<Hold>> {
            self.core.enter(|| self.inner.current_hold())
        }

        /// The nodes of this half's kind under the lock path, full paths in lock order.
        ///
        /// # Errors
        /// Server errors after retries; [`Error::InvalidArgument`](crate::Error::InvalidArgument)
        /// naming `runtime` when called inside a tokio runtime context.
        ///
        /// # Examples
        /// ```no_run
        /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
        /// # let lock = zk_curator::blocking::InterProcessReadWriteLock::new(&client, "/locks/config")?;
        #[doc = concat!("let nodes = lock.", $half, "().participant_nodes()?;")]
        /// # Ok::<(), zk_curator::Error>(())
        /// ```
        pub fn participant_nodes(&self) -> Result<Vec<String>> {
            self.core.block_on(self.inner.participant_nodes())?
        }
    };
}

impl ReadLock {
    half_methods!(ReadLock, ReadLockGuard, "read_lock");

    /// Waits until the calling thread holds the read lock Curator-style (re-entrant). A thread
    /// that holds the write lock Curator-style gets it at once, at its writer's place (downgrade).
    ///
    /// # Errors
    /// As [`ReadLock::acquire`](crate::locks::ReadLock::acquire);
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `runtime` when called
    /// inside a tokio runtime context.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let lock = zk_curator::blocking::InterProcessReadWriteLock::new(&client, "/locks/config")?;
    /// lock.write_lock().acquire()?;
    /// lock.read_lock().acquire()?; // downgrade
    /// lock.write_lock().release()?;
    /// lock.read_lock().release()?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn acquire(&self) -> Result<()> {
        self.core.block_on(self.inner.acquire())?
    }

    /// Downgrade with guards: takes the read lock at once, at `writer`'s place in line, while
    /// `writer` is still held; release `writer` afterwards.
    ///
    /// # Errors
    /// As [`ReadLock::lock_while_writing`](crate::locks::ReadLock::lock_while_writing);
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `runtime` when called
    /// inside a tokio runtime context.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let lock = zk_curator::blocking::InterProcessReadWriteLock::new(&client, "/locks/config")?;
    /// let write = lock.write_lock().lock()?;
    /// let read = lock.read_lock().lock_while_writing(&write)?;
    /// write.release()?; // a writer queued behind stays behind
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn lock_while_writing(&self, writer: &WriteLockGuard) -> Result<ReadLockGuard> {
        let guard = self.core.block_on(self.inner.lock_while_writing(writer.as_async()))??;
        Ok(MutexGuard::new(guard, &self.core))
    }
}

impl WriteLock {
    half_methods!(WriteLock, WriteLockGuard, "write_lock");

    /// Waits until the calling thread holds the write lock Curator-style (re-entrant).
    ///
    /// # Errors
    /// [`Error::WouldDeadlock`](crate::Error::WouldDeadlock) at once if the calling thread holds
    /// the read lock Curator-style (no upgrade); otherwise as
    /// [`InterProcessMutex::acquire`](super::InterProcessMutex::acquire).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let lock = zk_curator::blocking::InterProcessReadWriteLock::new(&client, "/locks/config")?;
    /// lock.write_lock().acquire()?;
    /// lock.write_lock().release()?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn acquire(&self) -> Result<()> {
        self.core.block_on(self.inner.acquire())?
    }
}

impl std::fmt::Debug for ReadLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadLock").field("path", &self.path()).finish()
    }
}

impl std::fmt::Debug for WriteLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteLock").field("path", &self.path()).finish()
    }
}
