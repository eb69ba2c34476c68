//! [`DistributedBarrier`] (Curator's `DistributedBarrier`): while the barrier node exists,
//! waiters wait; removing it lets them all through.

use std::time::Instant;

use super::{wake_up, Woken};
use crate::deadline::deadline_after;
use crate::error::{Error, ErrorCode, Result};
use crate::framework::paths;
use crate::CuratorClient;

/// A barrier that holds processes back while its node exists (Curator's `DistributedBarrier`):
/// [`set_barrier`](Self::set_barrier) creates the node (persistent; parents as containers),
/// [`remove_barrier`](Self::remove_barrier) deletes it, and
/// [`wait_on_barrier`](Self::wait_on_barrier) returns once it is absent. Wire-compatible with
/// Curator: a barrier set by Curator is waited on and removed by this one, and the other way round.
///
/// Every wake-up of a waiter (a watch event, a reconnection, a new session) is followed by a
/// fresh `exists` on the node: a waiter returns only after it saw the node absent itself. A
/// session lost while waiting is no error: the waiter looks again on the new session.
#[derive(Clone, Debug)]
pub struct DistributedBarrier {
    client: CuratorClient,
    path: String,
    fixed: String,
    /// `recipe="barrier"`.
    metrics: crate::metrics::RecipeLabels,
}

impl DistributedBarrier {
    /// The barrier at `path`.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] naming the path.
    ///
    /// # Examples
    /// ```no_run
    /// # fn demo(client: &zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// let barrier = zk_curator::barriers::DistributedBarrier::new(client, "/barriers/deploy")?;
    /// # Ok(()) }
    /// ```
    pub fn new(client: &CuratorClient, path: &str) -> Result<Self> {
        paths::validate_path(path)?;
        let fixed = client.fix_path(path);
        client.check_path_size(path, &fixed)?;
        let metrics = client.recipe_labels("barrier", path);
        Ok(Self { client: client.clone(), path: path.to_string(), fixed, metrics })
    }

    /// The barrier's path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Sets the barrier: creates its node (the client's default data; missing parents as
    /// containers). Setting a barrier already set is no error.
    ///
    /// # Errors
    /// Server errors after the retry policy gave up; [`Error::Closed`].
    ///
    /// # Cancel safety
    /// Cancel safe: at most the node is created, which a later `set_barrier` accepts.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(barrier: zk_curator::barriers::DistributedBarrier) -> zk_curator::Result<()> {
    /// barrier.set_barrier().await?;
    /// # Ok(()) }
    /// ```
    pub async fn set_barrier(&self) -> Result<()> {
        match self.client.create(&self.path).uncompressed().creating_parent_containers_if_needed().await {
            Ok(_) => Ok(()),
            Err(e) if e.is(ErrorCode::NodeExists) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Removes the barrier: deletes its node, letting every waiter through. Removing a barrier
    /// that is not set is no error.
    ///
    /// # Errors
    /// Server errors after the retry policy gave up; [`Error::Closed`].
    ///
    /// # Cancel safety
    /// Cancel safe: the node is deleted once or not at all.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(barrier: zk_curator::barriers::DistributedBarrier) -> zk_curator::Result<()> {
    /// barrier.remove_barrier().await?;
    /// # Ok(()) }
    /// ```
    pub async fn remove_barrier(&self) -> Result<()> {
        match self.client.delete(&self.path).await {
            Ok(()) => Ok(()),
            Err(e) if e.is(ErrorCode::NoNode) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// True when the barrier is set now (its node exists).
    ///
    /// # Errors
    /// Server errors after the retry policy gave up; [`Error::Closed`].
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(barrier: zk_curator::barriers::DistributedBarrier) -> zk_curator::Result<()> {
    /// if barrier.is_set().await? {
    ///     println!("{} still holds everyone back", barrier.path());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn is_set(&self) -> Result<bool> {
        let f = self.fixed.as_str();
        Ok(self.client.with_retry(&self.path, None, |zk| async move { zk.check_stat(f).await }).await?.is_some())
    }

    /// Waits until the barrier is not set (Curator's `waitOnBarrier()`); returns at once when it
    /// is not.
    ///
    /// # Errors
    /// Server errors after the retry policy gave up; [`Error::Closed`].
    ///
    /// # Cancel safety
    /// Cancel safe: waiting creates nothing.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(barrier: zk_curator::barriers::DistributedBarrier) -> zk_curator::Result<()> {
    /// barrier.wait_on_barrier().await?;
    /// // ... the barrier was removed: start ...
    /// # Ok(()) }
    /// ```
    pub async fn wait_on_barrier(&self) -> Result<()> {
        let timer = crate::metrics::BarrierTimer::start(&self.metrics, "wait");
        let waited = self.wait_until(None).await;
        timer.finish(&waited);
        waited.map(|_| ())
    }

    /// [`wait_on_barrier`](Self::wait_on_barrier) for at most `timeout` (Curator's
    /// `waitOnBarrier(maxWait, unit)`): `Ok(true)` once the barrier is not set, `Ok(false)` when
    /// `timeout` passed first. The call returns within `timeout` whatever the connection does; a
    /// timeout too long for the clock (`Duration::MAX`) means "forever".
    ///
    /// # Errors
    /// As [`wait_on_barrier`](Self::wait_on_barrier).
    ///
    /// # Cancel safety
    /// Cancel safe: waiting creates nothing.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(barrier: zk_curator::barriers::DistributedBarrier) -> zk_curator::Result<()> {
    /// use std::time::Duration;
    /// if !barrier.wait_on_barrier_timeout(Duration::from_secs(30)).await? {
    ///     println!("still blocked after 30 s");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn wait_on_barrier_timeout(&self, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let timeout = timeout.into().remaining();
        let deadline = deadline_after(timeout);
        let timer = crate::metrics::BarrierTimer::start(&self.metrics, "wait");
        let waited = match tokio::time::timeout_at(deadline.into(), self.wait_until(Some(deadline))).await {
            Ok(Err(Error::DeadlineExceeded { .. })) | Err(_) => Ok(false),
            Ok(result) => result,
        };
        timer.finish(&waited);
        waited
    }

    async fn wait_until(&self, deadline: Option<Instant>) -> Result<bool> {
        let f = self.fixed.as_str();
        loop {
            let mut status = self.client.status();
            let (stat, watcher) = self
                .client
                .with_retry(&self.path, deadline, |zk| async move { zk.check_and_watch_stat(f).await })
                .await?;
            if stat.is_none() {
                return Ok(true);
            }
            // Whatever woke us (the delete, a data change, a reconnection, a new session), the
            // next pass looks at the node again.
            if let Woken::Deadline = wake_up(&mut status, watcher, deadline).await {
                return Ok(false);
            }
        }
    }
}
