//! [`InterProcessMultiLock`]: several locks taken as one (Curator's `InterProcessMultiLock`), in
//! order, all or none, under one deadline.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::debug;

use super::hold::{Hold, Settled};
use super::internals::CLEANUP_SLACK;
use super::interprocess_lock::{InterProcessLock, LockFuture};
use super::mutex::InterProcessMutex;
use super::reentrancy::HolderId;
use crate::deadline::deadline_after;
use crate::error::{Error, Result};
use crate::CuratorClient;

/// A set of locks acquired in order, all or none, and released together (Curator's
/// `InterProcessMultiLock`). Curator-style (re-entrant per task, like its parts).
///
/// Unlike Curator, one deadline covers the whole set (Curator gives every lock the full timeout),
/// and a cancelled acquire gives back the locks it had already taken.
///
/// ```no_run
/// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
/// use zk_curator::locks::{InterProcessMultiLock, InterProcessMutex, InterProcessReadWriteLock};
///
/// // A transfer between two accounts, while the ledger is not being rewritten.
/// let ledger = InterProcessReadWriteLock::new(&client, "/locks/ledger")?;
/// let both = InterProcessMultiLock::new(vec![
///     Box::new(ledger.read_lock().clone()),
///     Box::new(InterProcessMutex::new(&client, "/locks/accounts/17")?),
///     Box::new(InterProcessMutex::new(&client, "/locks/accounts/42")?),
/// ])?;
/// both.acquire().await?;
/// // ... move the money ...
/// both.release().await?;
/// # Ok(()) }
/// ```
///
/// Not `Clone`: it owns its component locks (boxed trait objects). Clone the component locks
/// (cheap, sharing one instance each) to build another multi-lock over the same paths.
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
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// use zk_curator::locks::{InterProcessLock, InterProcessMultiLock, InterProcessMutex, InterProcessSemaphoreMutex};
    ///
    /// let locks: Vec<Box<dyn InterProcessLock>> = vec![
    ///     Box::new(InterProcessMutex::new(&client, "/locks/a")?),
    ///     Box::new(InterProcessSemaphoreMutex::new(&client, "/locks/b")?),
    /// ];
    /// let both = InterProcessMultiLock::new(locks)?;
    /// # Ok(()) }
    /// ```
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
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// let both = zk_curator::locks::InterProcessMultiLock::from_paths(&client, &["/locks/a", "/locks/b"])?;
    /// assert_eq!(both.path(), "/locks/a,/locks/b");
    /// # Ok(()) }
    /// ```
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

    /// Waits until every lock is held by the calling task, each [`HoldState::Held`](crate::locks::HoldState::Held) on the
    /// current session when it returns.
    ///
    /// The locks are taken one after another, so an earlier one may become suspended or lost
    /// while a later one is awaited. Once all are taken, each is checked: a suspended one is
    /// waited for until it is `Held` again; if one is lost, every lock is given back and the set
    /// is taken again from the first.
    ///
    /// # Errors
    /// The first lock's error; the locks taken before it are released first. [`Error::Closed`]
    /// if the client closes while a taken lock is suspended (every lock is given back).
    ///
    /// # Cancel safety
    /// Cancel safe: locks already taken are given back (in the background), also while waiting
    /// for a suspended one.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(locks: zk_curator::locks::InterProcessMultiLock) -> zk_curator::Result<()> {
    /// locks.acquire().await?; // every lock, in order
    /// // ... work ...
    /// locks.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire(&self) -> Result<()> {
        self.acquire_until(Deadline::Never).await.map(|_| ())
    }

    /// Every lock within one `timeout` for the whole set, strictly, or `Ok(false)` with the locks
    /// already taken given back (in reverse order).
    ///
    /// `Ok(true)` only if every lock is [`HoldState::Held`](crate::locks::HoldState::Held) on the current session when the call
    /// returns: a lock suspended after it was taken is waited for until the deadline (then
    /// `Ok(false)`, everything given back); if one is lost, everything is given back and the set
    /// is taken again while time is left. A zero timeout is one attempt at each lock, which
    /// succeeds only if every lock is `Held` at the end of it (no waiting, no second attempt).
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    /// As [`acquire`](Self::acquire).
    ///
    /// # Examples
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(locks: zk_curator::locks::InterProcessMultiLock) -> zk_curator::Result<()> {
    /// // 5 s for the whole set, giving back included.
    /// if locks.acquire_timeout(Duration::from_secs(5)).await? {
    ///     // ... work ...
    ///     locks.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn acquire_timeout(&self, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let timeout = timeout.into().remaining();
        if timeout.is_zero() {
            // One attempt at each lock, as each part's own zero timeout means.
            return self.acquire_until(Deadline::OneAttempt).await;
        }
        self.acquire_until(Deadline::At(deadline_after(timeout))).await
    }

    async fn acquire_until(&self, deadline: Deadline) -> Result<bool> {
        loop {
            let mut taken = Taken { locks: &self.locks, holder: HolderId::current(), count: 0 };
            for lock in &self.locks {
                let acquired = match deadline {
                    Deadline::Never => lock.acquire().await.map(|()| true),
                    Deadline::OneAttempt => lock.acquire_timeout(Duration::ZERO).await,
                    Deadline::At(d) => match time_left(d) {
                        Some(left) => lock.acquire_timeout(left).await,
                        // A used-up deadline means "not acquired", never a fresh one-attempt call
                        // (a zero timeout) that could acquire after the deadline.
                        None => Ok(false),
                    },
                };
                match acquired {
                    Ok(true) => taken.count += 1,
                    Ok(false) => {
                        self.give_back(&mut taken, deadline).await;
                        return Ok(false);
                    }
                    Err(e) => {
                        self.give_back(&mut taken, deadline).await;
                        return Err(e);
                    }
                }
            }
            // An earlier part may have been suspended or lost while a later one was taken: the
            // set is handed out only when every part is Held on the current session.
            match self.settle(taken.holder, deadline).await {
                Ok(Settled::Held) => {
                    taken.count = 0;
                    return Ok(true);
                }
                Ok(Settled::NotHeld) => {
                    self.give_back(&mut taken, deadline).await;
                    return Ok(false);
                }
                Ok(Settled::Lost(node)) => {
                    self.give_back(&mut taken, deadline).await;
                    let retry = match deadline {
                        Deadline::Never => true,
                        Deadline::OneAttempt => false,
                        Deadline::At(d) => time_left(d).is_some(),
                    };
                    if !retry {
                        return Ok(false);
                    }
                    debug!(paths = %self.path, node = %node, "a part was lost while the others were taken: taking the set again");
                }
                Err(e) => {
                    self.give_back(&mut taken, deadline).await;
                    return Err(e);
                }
            }
        }
    }

    /// Waits, within `deadline`, until every hold `holder` took is Held; one attempt waits for
    /// nothing. Stops at the first lost hold.
    async fn settle(&self, holder: HolderId, deadline: Deadline) -> Result<Settled> {
        let holds: Vec<Arc<Hold>> = self.locks.iter().flat_map(|lock| lock.holds_of(holder)).collect();
        let (wait, until) = match deadline {
            Deadline::OneAttempt => (false, None),
            Deadline::Never => (true, None),
            Deadline::At(d) => (true, Some(d)),
        };
        Hold::settle_all(holds, wait, until).await
    }

    /// Releases what was taken, in reverse order; a timed call waits for the deletes until its
    /// deadline at most (a few ms of slack), then leaves them to the background queue.
    async fn give_back(&self, taken: &mut Taken<'_>, deadline: Deadline) {
        let limit = match deadline {
            Deadline::Never => None,
            Deadline::OneAttempt => Some(Instant::now() + CLEANUP_SLACK),
            Deadline::At(d) => Some(d.max(Instant::now()) + CLEANUP_SLACK),
        };
        while taken.count > 0 {
            taken.count -= 1;
            let lock = &self.locks[taken.count];
            match limit {
                // Every part's release is cancel safe: cut short, its delete goes on in the
                // background. Best effort: a failed delete stays queued too.
                Some(limit) => {
                    let _ = tokio::time::timeout_at(limit.into(), lock.release()).await;
                }
                None => {
                    let _ = lock.release().await;
                }
            }
        }
    }

    /// Releases every lock, in reverse order, attempting all of them.
    ///
    /// # Errors
    /// The one failure, or [`Error::Multiple`] listing every failure.
    ///
    /// # Cancel safety
    /// Cancel safe: locks not yet released when the future is dropped are released in the
    /// background.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(locks: zk_curator::locks::InterProcessMultiLock) -> zk_curator::Result<()> {
    /// locks.acquire().await?;
    /// // ... work ...
    /// if let Err(e) = locks.release().await {
    ///     eprintln!("releasing {}: {e}", locks.path()); // every lock was attempted
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn release(&self) -> Result<()> {
        let mut errors = Vec::new();
        // Until the loop is done, a dropped call gives back the locks it had not reached yet.
        let mut pending = Taken { locks: &self.locks, holder: HolderId::current(), count: self.locks.len() };
        while pending.count > 0 {
            pending.count -= 1;
            if let Err(e) = self.locks[pending.count].release().await {
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

/// The time left before `deadline`, if any.
fn time_left(deadline: Instant) -> Option<Duration> {
    deadline.checked_duration_since(Instant::now()).filter(|left| !left.is_zero())
}

/// The deadline of one multi-lock acquire.
#[derive(Clone, Copy, Debug)]
enum Deadline {
    Never,
    /// A zero timeout: one attempt at each lock.
    OneAttempt,
    At(Instant),
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
    fn holds_of(&self, holder: HolderId) -> Vec<Arc<Hold>> {
        self.locks.iter().flat_map(|lock| lock.holds_of(holder)).collect()
    }
}
