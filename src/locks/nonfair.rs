//! [`InterProcessNonFairMutex`]: a mutex of one fixed ephemeral node, raced for — the
//! database-unique-index / Redis `SET NX` lock done on ZooKeeper.

use std::sync::Arc;
use std::time::Duration;

use super::driver::StandardLockDriver;
use super::hold::Hold;
use super::internals::LockInternals;
use super::mutex::{InterProcessMutex, MutexGuard};
use crate::error::Result;
use crate::metrics::Recipe;
use crate::CuratorClient;

/// The name of the non-fair mutex's one node: `<path>/nonfair-lock`.
pub const NONFAIR_LOCK_NAME: &str = "nonfair-lock";

/// A non-fair mutex shared across processes: one EPHEMERAL node, `<path>/nonfair-lock`, that
/// whoever creates it holds.
///
/// * **A free lock costs one create** (one round trip); a release, one delete.
/// * **Contended**, an acquire watches the node (a data watch) and races again when it is deleted:
///   no queue, no order. Inside a process, waiters — guards and Curator-style first acquisitions
///   alike — go through the same
///   [local queue](crate::locks::InterProcessMutex#thousands-of-tasks-one-node-per-process) as the fair
///   mutex's guards: one racer per process and lock path, and the node handed from local holder to
///   local holder without a round trip. So a release wakes one racer per process, not one per task.
/// * **A create whose reply was lost** is resolved by the node itself: each attempt writes a fresh
///   unique mark into it, and a node whose `ephemeralOwner` is our session and whose data is our
///   mark is ours.
/// * **Its deletes touch only its own node**: every holder re-creates the same path, so a release
///   (also one queued in the background) deletes the node only through its own session — once that
///   session has ended, the node went with it and the one at the path is a later holder's — and the
///   clean-up of a create whose outcome is unknown first checks the owner session and the mark.
///
/// Everything else is the [hold contract](crate::locks::InterProcessMutex) of every lock here: guards
/// ([`lock`](Self::lock), movable, never re-entered) or Curator-style [`acquire`](Self::acquire)
/// / [`release`](Self::release), re-entrant per task; a [`Hold`] handed out only
/// [`HoldState::Held`](crate::locks::HoldState::Held) with `Suspended`/`Lost` and
/// [`lost`](MutexGuard::lost); guarded writes; strict deadlines; cancel safety (no node left
/// behind); [`FencingToken`](crate::locks::FencingToken)s that increase from holder to holder (each
/// holder's node is created after the last one was deleted, so its czxid is larger; local hand-offs
/// count on top).
///
/// # Fair or non-fair?
/// Prefer it for **short holds with little contention** (a lock per order id, per item, per
/// request): one round trip to take a free lock instead of a create and a listing. It gives up
/// **order**: a waiter may lose every race to newcomers (starvation), and a release wakes every
/// waiting process at once (a herd of one racer per process). Under steady contention use the fair
/// [`InterProcessMutex`](crate::locks::InterProcessMutex). Not Curator-compatible: Curator has no such
/// recipe, and neither mutex must be used on the other's path.
///
/// A node deleted by hand while it is held can let that holder's guarded writes — and its release —
/// act on the next holder's node of the same name before the holder learns of the deletion (both
/// act on the path): use the fencing token where that matters.
pub struct InterProcessNonFairMutex {
    inner: InterProcessMutex,
}

impl Clone for InterProcessNonFairMutex {
    fn clone(&self) -> Self {
        Self { inner: self.inner.clone() }
    }
}

impl std::fmt::Debug for InterProcessNonFairMutex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InterProcessNonFairMutex").field("path", &self.path()).finish()
    }
}

impl InterProcessNonFairMutex {
    /// A non-fair mutex on `path` (its node: `<path>/nonfair-lock`).
    ///
    /// # Errors
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) naming `path` if it is not a valid
    /// ZooKeeper path (or is `/`).
    ///
    /// # Examples
    /// ```no_run
    /// # fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// let lock = zk_curator::locks::InterProcessNonFairMutex::new(&client, "/locks/order-42")?;
    /// # Ok(()) }
    /// ```
    pub fn new(client: &CuratorClient, path: &str) -> Result<Self> {
        let labels = client.lock_labels(Recipe::NonFairMutex, path);
        let internals =
            LockInternals::new(client, path, StandardLockDriver::with_static_name(NONFAIR_LOCK_NAME), 1, labels)?
                .racing();
        Ok(Self { inner: InterProcessMutex::from_internals(client, path, internals, None)? })
    }

    /// The lock path.
    pub fn path(&self) -> &str {
        self.inner.path()
    }

    /// The lock node's path, `<path>/nonfair-lock`, whoever holds it.
    pub fn node_path(&self) -> String {
        crate::framework::paths::join(self.path(), NONFAIR_LOCK_NAME)
    }

    /// Waits for the lock and returns a guard that owns the hold (never re-entrant, like
    /// `tokio::sync::Mutex::lock`).
    ///
    /// # Errors
    /// [`Error::Closed`](crate::Error::Closed) if the client is closed (also while waiting);
    /// server errors after the retry policy gave up.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call leaves no node behind and takes no hold.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(lock: zk_curator::locks::InterProcessNonFairMutex) -> zk_curator::Result<()> {
    /// let guard = lock.lock().await?;
    /// println!("holding with token {}", guard.fencing_token());
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn lock(&self) -> Result<MutexGuard> {
        self.inner.lock().await
    }

    /// Like [`lock`](Self::lock), giving up after `timeout` (`Ok(None)`, no node of ours left).
    /// Returns within `timeout` (plus a few ms) whatever the connection does; a zero timeout is
    /// [`try_lock`](Self::try_lock).
    ///
    /// # Errors
    /// As [`lock`](Self::lock).
    ///
    /// # Cancel safety
    /// Cancel safe, as [`lock`](Self::lock).
    ///
    /// # Examples
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(lock: zk_curator::locks::InterProcessNonFairMutex) -> zk_curator::Result<()> {
    /// match lock.try_lock_for(Duration::from_millis(200)).await? {
    ///     Some(guard) => guard.release().await?,
    ///     None => println!("{} is busy", lock.path()),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_lock_for(&self, timeout: impl Into<crate::Deadline>) -> Result<Option<MutexGuard>> {
        let timeout = timeout.into().remaining();
        self.inner.try_lock_for(timeout).await
    }

    /// One create: the guard if the lock was free, else `Ok(None)` (at once, sending nothing, when
    /// the client has no connection or another task of this process holds or waits for it).
    ///
    /// # Errors
    /// As [`lock`](Self::lock).
    ///
    /// # Cancel safety
    /// Cancel safe, as [`lock`](Self::lock).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(lock: zk_curator::locks::InterProcessNonFairMutex) -> zk_curator::Result<()> {
    /// let Some(guard) = lock.try_lock().await? else {
    ///     return Ok(()); // a duplicate submission: someone else is on it
    /// };
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn try_lock(&self) -> Result<Option<MutexGuard>> {
        self.inner.try_lock().await
    }

    /// Waits until the calling task (or thread) holds the lock, Curator-style: re-entrant per task,
    /// released by as many [`release`](Self::release) calls.
    ///
    /// # Errors
    /// [`Error::LockLost`](crate::Error::LockLost) when re-entering a lost hold;
    /// [`Error::Closed`](crate::Error::Closed); server errors after the retry policy gave up.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call leaves no node behind and takes no hold.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(lock: zk_curator::locks::InterProcessNonFairMutex) -> zk_curator::Result<()> {
    /// lock.acquire().await?;
    /// lock.acquire().await?; // re-entered: no round trip
    /// lock.release().await?;
    /// lock.release().await?; // deletes the node
    /// # Ok(()) }
    /// ```
    pub async fn acquire(&self) -> Result<()> {
        self.inner.acquire().await
    }

    /// Like [`acquire`](Self::acquire), giving up after `timeout` (`Ok(false)`); returns within
    /// `timeout` whatever the connection does.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    /// Cancel safe, as [`acquire`](Self::acquire).
    ///
    /// # Examples
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(lock: zk_curator::locks::InterProcessNonFairMutex) -> zk_curator::Result<()> {
    /// if lock.acquire_timeout(Duration::from_secs(1)).await? {
    ///     lock.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn acquire_timeout(&self, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let timeout = timeout.into().remaining();
        self.inner.acquire_timeout(timeout).await
    }

    /// Releases one Curator-style hold of the calling task; the last one deletes the node.
    ///
    /// # Errors
    /// [`Error::NotOwner`](crate::Error::NotOwner) if the caller holds nothing; the delete's error
    /// (the node stays queued for deletion, only while it is ours).
    ///
    /// # Cancel safety
    /// Cancel safe: the hold is released at the first poll; the delete goes on in the background.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(lock: zk_curator::locks::InterProcessNonFairMutex) -> zk_curator::Result<()> {
    /// lock.acquire().await?;
    /// lock.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn release(&self) -> Result<()> {
        self.inner.release().await
    }

    /// True if this instance holds the lock (any task's Curator-style hold or any live guard).
    pub fn is_acquired_in_this_process(&self) -> bool {
        self.inner.is_acquired_in_this_process()
    }

    /// True if the calling task holds the lock Curator-style (guards do not count).
    pub fn is_owned_by_current_task(&self) -> bool {
        self.inner.is_owned_by_current_task()
    }

    /// The calling task's Curator-style hold (node, token, state, guarded writes), if any.
    pub fn current_hold(&self) -> Option<Arc<Hold>> {
        self.inner.current_hold()
    }
}

impl super::interprocess_lock::InterProcessLock for InterProcessNonFairMutex {
    fn path(&self) -> &str {
        self.inner.path()
    }
    fn acquire(&self) -> super::interprocess_lock::LockFuture<'_, ()> {
        Box::pin(self.inner.acquire())
    }
    fn acquire_timeout(&self, timeout: Duration) -> super::interprocess_lock::LockFuture<'_, bool> {
        Box::pin(self.inner.acquire_timeout(timeout))
    }
    fn release(&self) -> super::interprocess_lock::LockFuture<'_, ()> {
        Box::pin(self.inner.release())
    }
    fn is_acquired_in_this_process(&self) -> bool {
        self.inner.is_acquired_in_this_process()
    }
    fn release_abandoned(&self, holder: super::reentrancy::HolderId) {
        super::interprocess_lock::InterProcessLock::release_abandoned(&self.inner, holder)
    }
    fn holds_of(&self, holder: super::reentrancy::HolderId) -> Vec<Arc<Hold>> {
        super::interprocess_lock::InterProcessLock::holds_of(&self.inner, holder)
    }
}
