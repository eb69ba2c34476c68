//! [`InterProcessMultiLock`], blocking.

use std::sync::Arc;

use super::{Core, CuratorClient};
use crate::error::Result;
use crate::locks::InterProcessLock;

/// A blocking [`InterProcessMultiLock`](crate::locks::InterProcessMultiLock): several locks acquired in
/// order, all or none, under one deadline, and released together. Curator-style: the holds belong
/// to the calling thread (re-entrant for it, like its parts).
///
/// # Examples
/// ```no_run
/// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
/// let both = zk_curator::blocking::InterProcessMultiLock::from_paths(&client, &["/locks/a", "/locks/b"])?;
/// both.acquire()?;
/// both.release()?;
/// # Ok::<(), zk_curator::Error>(())
/// ```
pub struct InterProcessMultiLock {
    inner: crate::locks::InterProcessMultiLock,
    core: Arc<Core>,
}

impl std::fmt::Debug for InterProcessMultiLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InterProcessMultiLock").field("paths", &self.path()).finish()
    }
}

impl InterProcessMultiLock {
    /// A multi-lock over `locks` (async locks; the blocking recipes hand theirs out with
    /// `as_async()`), acquired in the given order; waited for on `client`'s runtime.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an empty list.
    ///
    /// # Examples
    /// ```no_run
    /// use zk_curator::blocking::{InterProcessMultiLock, InterProcessMutex, InterProcessSemaphoreMutex};
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// let a = InterProcessMutex::new(&client, "/locks/a")?;
    /// let b = InterProcessSemaphoreMutex::new(&client, "/locks/b")?;
    /// let both = InterProcessMultiLock::new(&client, vec![Box::new(a.as_async().clone()), Box::new(b.as_async().clone())])?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn new(client: &CuratorClient, locks: Vec<Box<dyn InterProcessLock>>) -> Result<Self> {
        Ok(Self { inner: crate::locks::InterProcessMultiLock::new(locks)?, core: client.core().clone() })
    }

    /// A multi-lock of one mutex per path.
    ///
    /// # Errors
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) naming a bad path;
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for no paths.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// let both = zk_curator::blocking::InterProcessMultiLock::from_paths(&client, &["/locks/a", "/locks/b"])?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn from_paths(client: &CuratorClient, paths: &[&str]) -> Result<Self> {
        let inner = crate::locks::InterProcessMultiLock::from_paths(client.core().client(), paths)?;
        Ok(Self { inner, core: client.core().clone() })
    }

    /// The paths, comma-separated.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let both = zk_curator::blocking::InterProcessMultiLock::from_paths(&client, &["/locks/a", "/locks/b"])?;
    /// assert_eq!(both.path(), "/locks/a,/locks/b");
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn path(&self) -> &str {
        self.inner.path()
    }

    /// Waits until the calling thread holds every lock, each
    /// [`HoldState::Held`](crate::locks::HoldState::Held) when it returns (as
    /// [`acquire`](crate::locks::InterProcessMultiLock::acquire): a part suspended or lost while a later
    /// one was awaited is waited for, or the set is taken again).
    ///
    /// # Errors
    /// The first lock's error (the locks taken before it are given back);
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `runtime` when called
    /// inside a tokio runtime context.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let both = zk_curator::blocking::InterProcessMultiLock::from_paths(&client, &["/locks/a", "/locks/b"])?;
    /// both.acquire()?;
    /// both.release()?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn acquire(&self) -> Result<()> {
        self.core.block_on(self.inner.acquire())?
    }

    /// Every lock within one `timeout` for the whole set, or `Ok(false)` with those already taken
    /// given back; returns within `timeout` (plus a few ms) whatever the connection does.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let both = zk_curator::blocking::InterProcessMultiLock::from_paths(&client, &["/locks/a", "/locks/b"])?;
    /// if both.acquire_timeout(std::time::Duration::from_secs(5))? {
    ///     both.release()?;
    /// }
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn acquire_timeout(&self, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let timeout = timeout.into().remaining();
        self.core.block_on(self.inner.acquire_timeout(timeout))?
    }

    /// Releases every lock of the calling thread, in reverse order, attempting all of them.
    ///
    /// # Errors
    /// The one failure, or [`Error::Multiple`](crate::Error::Multiple) listing every failure
    /// ([`Error::NotOwner`](crate::Error::NotOwner) for locks the thread does not hold);
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `runtime` when called
    /// inside a tokio runtime context (nothing is released).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let both = zk_curator::blocking::InterProcessMultiLock::from_paths(&client, &["/locks/a", "/locks/b"])?;
    /// both.acquire()?;
    /// both.release()?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn release(&self) -> Result<()> {
        self.core.block_on(self.inner.release())?
    }

    /// True if every lock is held in this process.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let both = zk_curator::blocking::InterProcessMultiLock::from_paths(&client, &["/locks/a", "/locks/b"])?;
    /// both.acquire()?;
    /// assert!(both.is_acquired_in_this_process());
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn is_acquired_in_this_process(&self) -> bool {
        self.inner.is_acquired_in_this_process()
    }
}
