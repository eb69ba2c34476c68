//! [`InterProcessLock`]: what every lock recipe offers Curator-style (Curator's
//! `InterProcessLock`), so multi-locks and user code can be generic over the mutex and both halves
//! of the read-write lock.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use super::hold::Hold;
use super::reentrancy::HolderId;
use crate::error::Result;

/// A boxed future of an [`InterProcessLock`] call: `Send`, borrowing the lock.
pub type LockFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'a>>;

/// A Curator-style lock: acquired and released by the calling task (re-entrant), as Curator's
/// `InterProcessLock`. Object safe, so locks of different kinds fit in one `Vec<Box<dyn
/// InterProcessLock>>`.
///
/// Each method behaves as the recipe's own method of the same name (errors, cancel safety, strict
/// deadlines); see [`InterProcessMutex`](crate::locks::InterProcessMutex).
///
/// # Examples
/// ```
/// use std::future::Future;
/// use std::time::Duration;
/// use zk_curator::locks::InterProcessLock;
///
/// /// Runs `job` under any Curator-style lock: `Ok(false)` if the lock stayed busy for 5 s.
/// async fn exclusively(lock: &dyn InterProcessLock, job: impl Future<Output = ()>) -> zk_curator::Result<bool> {
///     if !lock.acquire_timeout(Duration::from_secs(5)).await? {
///         return Ok(false);
///     }
///     job.await;
///     lock.release().await?;
///     Ok(true)
/// }
/// ```
pub trait InterProcessLock: Send + Sync {
    /// The lock path.
    fn path(&self) -> &str;

    /// Waits until the calling task holds the lock (re-entrant).
    ///
    /// # Errors
    /// As the recipe's own `acquire`, e.g. [`InterProcessMutex::acquire`](crate::locks::InterProcessMutex::acquire).
    ///
    /// # Cancel safety
    /// Cancel safe for every lock of this crate: a dropped future leaves no node behind.
    fn acquire(&self) -> LockFuture<'_, ()>;

    /// Like [`acquire`](Self::acquire), giving up after `timeout` (`Ok(false)`).
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    /// As [`acquire`](Self::acquire).
    fn acquire_timeout(&self, timeout: Duration) -> LockFuture<'_, bool>;

    /// Releases one hold of the calling task.
    ///
    /// # Errors
    /// As the recipe's own `release`: [`Error::NotOwner`](crate::Error::NotOwner) if the caller
    /// holds nothing, or the delete's error (the node stays queued for deletion).
    ///
    /// # Cancel safety
    /// Cancel safe for every lock of this crate: the delete goes on in the background.
    fn release(&self) -> LockFuture<'_, ()>;

    /// True if any task of this instance holds the lock.
    fn is_acquired_in_this_process(&self) -> bool;

    /// Releases one hold of `holder` without waiting, deleting the node in the background — for a
    /// caller that cannot await (a cancelled multi-lock acquire giving back what it took). Must
    /// not block or panic. The default does nothing: implement it for locks used in a
    /// [`InterProcessMultiLock`](crate::locks::InterProcessMultiLock) that may be cancelled; every lock of
    /// this crate does.
    fn release_abandoned(&self, holder: HolderId) {
        let _ = holder;
    }

    /// The holds `holder` has of this lock (one, or one per part of a multi-lock; none if it
    /// holds nothing), so a [`InterProcessMultiLock`](crate::locks::InterProcessMultiLock) can check that
    /// every part it took is still [`HoldState::Held`](crate::locks::HoldState::Held) before it reports
    /// success. The default has none to show (nothing is checked): every lock of this crate
    /// shows its holds.
    fn holds_of(&self, holder: HolderId) -> Vec<Arc<Hold>> {
        let _ = holder;
        Vec::new()
    }
}
