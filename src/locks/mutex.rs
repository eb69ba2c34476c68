//! [`InterProcessMutex`]: Curator's re-entrant, fair, cross-process mutex.

use std::sync::Arc;
use std::time::Duration;

use tracing::{debug, Instrument};

use super::driver::{LockDriver, StandardLockDriver};
use super::hold::{FencingToken, GuardedWrite, HoldState, HoldStateStream, LockNode};
use super::internals::{deadline_after, LockInternals};
use super::reentrancy::{HolderId, ReentrancyMap, Released};
use crate::error::{Error, Result};
use crate::CuratorClient;

/// A re-entrant mutex shared across processes, wire-compatible with Curator's `InterProcessMutex`
/// (nodes `<path>/_c_<uuid>-lock-<seq>`, fair FIFO order, each waiter watches only its predecessor).
///
/// Two styles of use:
/// * **Curator style**: [`acquire`](Self::acquire) / [`acquire_timeout`](Self::acquire_timeout) /
///   [`release`](Self::release), owned by the calling tokio task (or thread outside a task).
///   Re-entrant: the owner may acquire again without a round trip, and must release as many times.
/// * **Guard style**: [`lock`](Self::lock) / [`try_lock_for`](Self::try_lock_for) return a
///   [`MutexGuard`] — `Send + 'static`, released by [`MutexGuard::release`] or, if dropped, in the
///   background.
///
/// Re-entrancy is per instance, as in Curator: two `InterProcessMutex` values on one path are two
/// contenders even in one task. Clones of one instance share its holders.
pub struct InterProcessMutex<D: LockDriver = StandardLockDriver> {
    shared: Arc<Shared<D>>,
}

impl<D: LockDriver> Clone for InterProcessMutex<D> {
    fn clone(&self) -> Self {
        Self { shared: self.shared.clone() }
    }
}

struct Shared<D: LockDriver> {
    internals: LockInternals<D>,
    holders: ReentrancyMap<HolderId, Arc<LockNode>>,
    data: Option<Vec<u8>>,
}

impl<D: LockDriver> std::fmt::Debug for InterProcessMutex<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InterProcessMutex").field("path", &self.path()).finish()
    }
}

impl InterProcessMutex {
    /// A mutex on `path`, with Curator's standard driver and the client's default node data.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] naming `path` if it is not a valid ZooKeeper path (or is `/`).
    pub fn new(client: &CuratorClient, path: &str) -> Result<Self> {
        Self::with_driver(client, path, StandardLockDriver::default())
    }

    /// Like [`new`](Self::new), writing `data` into the lock node instead of the default data.
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn with_data(client: &CuratorClient, path: &str, data: impl Into<Vec<u8>>) -> Result<Self> {
        let mut mutex = Self::new(client, path)?;
        if let Some(shared) = Arc::get_mut(&mut mutex.shared) {
            shared.data = Some(data.into());
        }
        Ok(mutex)
    }
}

impl<D: LockDriver> InterProcessMutex<D> {
    /// A mutex on `path` with a custom driver (Curator's `InterProcessMutex(client, path, driver)`).
    ///
    /// # Errors
    /// [`Error::InvalidPath`] / [`Error::InvalidArgument`] for a bad path or lock name.
    pub fn with_driver(client: &CuratorClient, path: &str, driver: D) -> Result<Self> {
        let internals = LockInternals::new(client, path, driver, 1)?;
        Ok(Self { shared: Arc::new(Shared { internals, holders: ReentrancyMap::default(), data: None }) })
    }

    /// The lock path.
    pub fn path(&self) -> &str {
        self.shared.internals.base_path()
    }

    /// Waits until the lock is held by the calling task (or thread), however long it takes.
    ///
    /// Re-entrant: if the caller already holds it, this only counts one more hold.
    ///
    /// # Errors
    /// * [`Error::Closed`] if the client is closed (also while waiting).
    /// * Server errors after the retry policy gave up ([`Error::ZooKeeper`]; see [`Error::kind`]).
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future at any point leaves no node behind (it is deleted in the
    /// background) and takes no hold; the caller loses its place in the queue.
    pub async fn acquire(&self) -> Result<()> {
        self.acquire_node(None).await.map(|_| ())
    }

    /// Like [`acquire`](Self::acquire), giving up after `timeout`: `Ok(false)` if not acquired, with
    /// our node deleted. A zero timeout tries once (one create and one listing).
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    /// Cancel safe, as [`acquire`](Self::acquire).
    pub async fn acquire_timeout(&self, timeout: Duration) -> Result<bool> {
        self.acquire_node(deadline_after(timeout)).await.map(|node| node.is_some())
    }

    async fn acquire_node(&self, deadline: Option<std::time::Instant>) -> Result<Option<Arc<LockNode>>> {
        let holder = HolderId::current();
        if let Some(node) = self.shared.holders.reenter(holder) {
            return Ok(Some(node));
        }
        let data = self.shared.data.as_deref().unwrap_or(self.shared.internals.client().default_data());
        let Some(node) = self.shared.internals.attempt_lock(deadline, data).await? else {
            return Ok(None);
        };
        // No await between winning and recording: a cancelled caller cannot lose a won node.
        if !self.shared.holders.insert(holder, node.clone()) {
            // The same holder raced itself (two acquires polled concurrently in one task): keep the
            // first hold, count this one as a re-entry, give back the extra node.
            node.release_in_background();
            return Ok(self.shared.holders.reenter(holder));
        }
        Ok(Some(node))
    }

    /// Releases one hold of the calling task (or thread). The last release deletes the lock node.
    ///
    /// # Errors
    /// * [`Error::NotOwner`] if the caller holds nothing (Curator's `IllegalMonitorStateException`).
    /// * The delete's error if it failed: the hold is gone either way, and the node stays queued for
    ///   guaranteed deletion in the background (never forgotten, unlike CURATOR-678).
    ///
    /// # Cancel safety
    /// Cancel safe: the hold is released at the first poll and the delete continues in the background.
    pub async fn release(&self) -> Result<()> {
        let holder = HolderId::current();
        match self.shared.holders.release(holder) {
            None => {
                Err(Error::NotOwner { path: self.path().to_string(), reason: "the caller does not hold this lock" })
            }
            Some(Released::StillHeld(_)) => Ok(()),
            Some(Released::Last(node)) => release_node(&node).await,
        }
    }

    /// True if any task or thread of this instance holds the lock (Curator's
    /// `isAcquiredInThisProcess`, which is per instance despite its name).
    pub fn is_acquired_in_this_process(&self) -> bool {
        !self.shared.holders.is_empty()
    }

    /// True if the calling task (or thread) holds the lock.
    pub fn is_owned_by_current_task(&self) -> bool {
        self.shared.holders.get(HolderId::current()).is_some()
    }

    /// The calling holder's lock node path, if it holds the lock (Curator's `getLockPath`).
    pub fn lock_node_path(&self) -> Option<String> {
        self.shared.holders.get(HolderId::current()).map(|(node, _)| node.path().to_string())
    }

    /// The calling holder's hold (node, token, state, guarded writes), if it holds the lock.
    pub fn current_hold(&self) -> Option<Arc<LockNode>> {
        self.shared.holders.get(HolderId::current()).map(|(node, _)| node)
    }

    /// Every contender's node, full paths in lock order (the holder first). Includes foreign
    /// children, as Curator does.
    ///
    /// # Errors
    /// Server errors after retries.
    ///
    /// # Cancel safety
    /// Cancel safe (read only).
    pub async fn participant_nodes(&self) -> Result<Vec<String>> {
        self.shared.internals.participant_nodes().await
    }

    /// Waits for the lock and returns a guard that owns the hold.
    ///
    /// Counts as a hold of the calling task: if the task already holds the lock (through
    /// [`acquire`](Self::acquire) or another guard), this re-enters without a round trip.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    /// Cancel safe, as [`acquire`](Self::acquire).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// let mutex = zk_curator::InterProcessMutex::new(&client, "/locks/report")?;
    /// let guard = mutex.lock().await?;
    /// println!("holding {} with token {}", guard.node_path(), guard.fencing_token());
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn lock(&self) -> Result<MutexGuard<D>> {
        let node = self.acquire_node(None).await?;
        Ok(self.guard(node.ok_or_else(|| Error::Closed { path: self.path().to_string() })?))
    }

    /// Like [`lock`](Self::lock), giving up after `timeout` (`Ok(None)`, our node deleted).
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    /// Cancel safe, as [`acquire`](Self::acquire).
    pub async fn try_lock_for(&self, timeout: Duration) -> Result<Option<MutexGuard<D>>> {
        Ok(self.acquire_node(deadline_after(timeout)).await?.map(|node| self.guard(node)))
    }

    /// One attempt (a create and a listing): the guard if the lock was free, else `Ok(None)`.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    /// Cancel safe, as [`acquire`](Self::acquire).
    pub async fn try_lock(&self) -> Result<Option<MutexGuard<D>>> {
        self.try_lock_for(Duration::ZERO).await
    }

    fn guard(&self, node: Arc<LockNode>) -> MutexGuard<D> {
        MutexGuard { mutex: self.clone(), holder: HolderId::current(), node, released: false }
    }

    fn release_holder_in_background(&self, holder: HolderId) {
        if let Some(Released::Last(node)) = self.shared.holders.release(holder) {
            node.release_in_background();
        }
    }
}

async fn release_node(node: &LockNode) -> Result<()> {
    let start = std::time::Instant::now();
    let span = tracing::debug_span!("release", node = %node.path());
    let result = node.release().instrument(span.clone()).await;
    debug!(parent: &span, took_us = start.elapsed().as_micros() as u64, ok = result.is_ok(), "released");
    result
}

/// One hold of an [`InterProcessMutex`], owned: `Send + 'static`, movable between tasks.
///
/// Release it with [`release`](Self::release) to learn whether the delete worked; if dropped, it
/// is released in the background (never panics, with or without a runtime).
#[must_use = "dropping the guard releases the lock"]
pub struct MutexGuard<D: LockDriver = StandardLockDriver> {
    mutex: InterProcessMutex<D>,
    holder: HolderId,
    node: Arc<LockNode>,
    released: bool,
}

impl<D: LockDriver> std::fmt::Debug for MutexGuard<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MutexGuard")
            .field("node", &self.node.path())
            .field("token", &self.node.fencing_token())
            .finish()
    }
}

impl<D: LockDriver> MutexGuard<D> {
    /// The lock node's full path.
    pub fn node_path(&self) -> &str {
        self.node.path()
    }

    /// The fencing token of this hold (see [`FencingToken`]).
    pub fn fencing_token(&self) -> FencingToken {
        self.node.fencing_token()
    }

    /// The hold's state now.
    pub fn hold_state(&self) -> HoldState {
        self.node.hold_state()
    }

    /// A receiver of hold-state changes, for `select!`-ing work against losing the lock.
    pub fn watch_state(&self) -> tokio::sync::watch::Receiver<HoldState> {
        self.node.watch_state()
    }

    /// The hold's state changes as a stream, ending after [`HoldState::Lost`].
    pub fn state_changes(&self) -> HoldStateStream {
        self.node.state_changes()
    }

    /// Resolves once the lock is certainly lost.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn lost(&self) {
        self.node.lost().await
    }

    /// The underlying hold.
    pub fn hold(&self) -> &Arc<LockNode> {
        &self.node
    }

    /// A write that ZooKeeper applies only if our lock node still exists; see [`LockNode::guarded_write`].
    ///
    /// # Errors
    /// [`Error::LockLost`] if the lock is lost; see [`LockNode::guarded_write`].
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped commit may still be applied (only while the lock is held).
    pub async fn guarded_write(&self, write: GuardedWrite) -> Result<Vec<zookeeper_client::MultiWriteResult>> {
        self.node.guarded_write(write).await
    }

    /// Releases this hold and, if it was the last one, deletes the lock node and waits for it.
    ///
    /// # Errors
    /// The delete's error; the node stays queued for guaranteed deletion in the background.
    ///
    /// # Cancel safety
    /// Cancel safe: the hold is released at the first poll; the delete continues in the background.
    pub async fn release(mut self) -> Result<()> {
        self.released = true;
        match self.mutex.shared.holders.release(self.holder) {
            Some(Released::Last(node)) => release_node(&node).await,
            _ => Ok(()),
        }
    }
}

impl<D: LockDriver> Drop for MutexGuard<D> {
    fn drop(&mut self) {
        if !self.released {
            self.mutex.release_holder_in_background(self.holder);
        }
    }
}
