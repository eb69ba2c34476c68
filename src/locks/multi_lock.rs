//! [`InterProcessMultiLock`]: several locks taken as one (Curator's `InterProcessMultiLock`), in
//! order, all or none, under one deadline.

use std::time::{Duration, Instant};

use super::interprocess_lock::{InterProcessLock, LockFuture};
use super::mutex::InterProcessMutex;
use super::reentrancy::HolderId;
use crate::error::{Error, Result};
use crate::CuratorClient;

/// A set of locks acquired in order, all or none, and released together (Curator's
/// `InterProcessMultiLock`). Curator-style (re-entrant per task, like its parts).
///
/// Unlike Curator, one deadline covers the whole set (Curator gives every lock the full timeout),
/// and a cancelled acquire gives back the locks it had already taken.
pub struct InterProcessMultiLock {
    locks: Vec<Box<dyn InterProcessLock>>,
    path: String,
}

impl std::fmt::Debug for InterProcessMultiLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InterProcessMultiLock").field("paths", &self.path).finish()
    }
}

/// Gives back, in reverse order and in the background, the locks a dropped acquire had taken.
struct Taken<'a> {
    locks: &'a [Box<dyn InterProcessLock>],
    holder: HolderId,
    count: usize,
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        for lock in self.locks[..self.count].iter().rev() {
            lock.release_abandoned(self.holder);
        }
    }
}

impl InterProcessMultiLock {
    /// A multi-lock over `locks`, acquired in the given order.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an empty list.
    pub fn new(locks: Vec<Box<dyn InterProcessLock>>) -> Result<Self> {
        if locks.is_empty() {
            return Err(Error::invalid_argument("locks", "[]", "must name at least one lock"));
        }
        let path = locks.iter().map(|lock| lock.path()).collect::<Vec<_>>().join(",");
        Ok(Self { locks, path })
    }

    /// A multi-lock of one [`InterProcessMutex`] per path (Curator's `InterProcessMultiLock(client, paths)`).
    ///
    /// # Errors
    /// [`Error::InvalidPath`] naming a bad path; [`Error::InvalidArgument`] for no paths.
    pub fn from_paths(client: &CuratorClient, paths: &[&str]) -> Result<Self> {
        let mut locks: Vec<Box<dyn InterProcessLock>> = Vec::with_capacity(paths.len());
        for path in paths {
            locks.push(Box::new(InterProcessMutex::new(client, path)?));
        }
        Self::new(locks)
    }

    /// The paths, comma-separated.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Waits until every lock is held by the calling task.
    ///
    /// # Errors
    /// The first lock's error; the locks taken before it are released first.
    ///
    /// # Cancel safety
    /// Cancel safe: locks already taken are given back (in the background).
    pub async fn acquire(&self) -> Result<()> {
        self.acquire_until(None).await.map(|_| ())
    }

    /// Every lock within one `timeout` for the whole set, strictly, or `Ok(false)` with the locks
    /// already taken given back (in reverse order).
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    /// As [`acquire`](Self::acquire).
    pub async fn acquire_timeout(&self, timeout: Duration) -> Result<bool> {
        self.acquire_until(Some(Instant::now().checked_add(timeout).unwrap_or_else(far_future))).await
    }

    async fn acquire_until(&self, deadline: Option<Instant>) -> Result<bool> {
        let mut taken = Taken { locks: &self.locks, holder: HolderId::current(), count: 0 };
        for lock in &self.locks {
            let acquired = match deadline {
                None => lock.acquire().await.map(|()| true),
                Some(d) => lock.acquire_timeout(d.saturating_duration_since(Instant::now())).await,
            };
            match acquired {
                Ok(true) => taken.count += 1,
                Ok(false) => {
                    self.give_back(&mut taken).await;
                    return Ok(false);
                }
                Err(e) => {
                    self.give_back(&mut taken).await;
                    return Err(e);
                }
            }
        }
        taken.count = 0;
        Ok(true)
    }

    async fn give_back(&self, taken: &mut Taken<'_>) {
        while taken.count > 0 {
            taken.count -= 1;
            // Best effort: a failed delete stays queued in the background.
            let _ = self.locks[taken.count].release().await;
        }
    }

    /// Releases every lock, in reverse order, attempting all of them.
    ///
    /// # Errors
    /// The one failure, or [`Error::Multiple`] listing every failure.
    ///
    /// # Cancel safety
    /// Not cancel safe: locks not yet released when the future is dropped stay held.
    pub async fn release(&self) -> Result<()> {
        let mut errors = Vec::new();
        for lock in self.locks.iter().rev() {
            if let Err(e) = lock.release().await {
                errors.push(e);
            }
        }
        Error::from_many(errors)
    }

    /// True if every lock is held by this process (Curator's rule for a multi-lock).
    pub fn is_acquired_in_this_process(&self) -> bool {
        self.locks.iter().all(|lock| lock.is_acquired_in_this_process())
    }
}

fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(86_400 * 365)
}

impl InterProcessLock for InterProcessMultiLock {
    fn path(&self) -> &str {
        InterProcessMultiLock::path(self)
    }
    fn acquire(&self) -> LockFuture<'_, ()> {
        Box::pin(InterProcessMultiLock::acquire(self))
    }
    fn acquire_timeout(&self, timeout: Duration) -> LockFuture<'_, bool> {
        Box::pin(InterProcessMultiLock::acquire_timeout(self, timeout))
    }
    fn release(&self) -> LockFuture<'_, ()> {
        Box::pin(InterProcessMultiLock::release(self))
    }
    fn is_acquired_in_this_process(&self) -> bool {
        InterProcessMultiLock::is_acquired_in_this_process(self)
    }
    fn release_abandoned(&self, holder: HolderId) {
        for lock in self.locks.iter().rev() {
            lock.release_abandoned(holder);
        }
    }
}
