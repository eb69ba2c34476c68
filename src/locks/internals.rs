//! Layer 2: `LockInternals`, the loop every lock recipe shares (Curator's `LockInternals`).
//!
//! Create our node through the driver; list and sort the children; ask the driver whether we hold
//! the lock; if not, watch only the node the driver names and wait for its event, the deadline or a
//! session change. A vanished predecessor means look again; our own node missing means our session
//! died: start over with a new node (retry policy, within the deadline). On timeout, error or
//! cancellation our node is deleted.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::{debug, Instrument};
use zookeeper_client as zk;

use super::driver::{LockDriver, Predicate};
use super::hold::LockNode;
use crate::error::{Error, ErrorKind, Result};
use crate::framework::paths;
use crate::CuratorClient;

/// The engine behind a lock recipe: a base path, a driver, and a number of leases.
pub struct LockInternals<D: LockDriver> {
    client: CuratorClient,
    base: String,
    fixed_base: String,
    driver: D,
    max_leases: AtomicUsize,
}

impl<D: LockDriver> std::fmt::Debug for LockInternals<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockInternals").field("base", &self.base).field("lock_name", &self.driver.lock_name()).finish()
    }
}

/// Deletes a contender node in the background if the acquire is abandoned (timeout, error,
/// cancellation) before the node was handed to a holder.
struct ContenderCleanup<'a> {
    client: &'a CuratorClient,
    fixed: Option<String>,
}

impl ContenderCleanup<'_> {
    fn disarm(&mut self) {
        self.fixed = None;
    }

    /// Deletes the node now (awaited), so that a caller told "not acquired" sees no node of ours.
    async fn delete_now(&mut self) {
        if let Some(fixed) = self.fixed.clone() {
            // On failure the node is queued for background deletion by `delete_fixed_guaranteed`.
            let _ = self.client.delete_fixed_guaranteed(&fixed).await;
            self.fixed = None;
        }
    }
}

impl Drop for ContenderCleanup<'_> {
    fn drop(&mut self) {
        if let Some(fixed) = self.fixed.take() {
            drop(self.client.inner.deletes.delete(fixed));
        }
    }
}

enum WaitOutcome {
    /// Look at the children again.
    Relist,
    /// The watched node was the only one ahead and is gone.
    Acquired,
    /// Our session changed: our node is dead.
    SessionChanged,
    DeadlinePassed,
    Closed,
}

impl<D: LockDriver> LockInternals<D> {
    /// An engine for locks under `base` (validated), granting `max_leases` holders at once.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for a bad `base`; [`Error::InvalidArgument`] for zero leases or a bad lock name.
    pub fn new(client: &CuratorClient, base: &str, driver: D, max_leases: usize) -> Result<Self> {
        paths::validate_path(base)?;
        if base == "/" {
            return Err(Error::InvalidPath { path: base.to_string(), reason: "a lock cannot live at the root" });
        }
        paths::validate_node_name("lock name", driver.lock_name())?;
        if max_leases == 0 {
            return Err(Error::invalid_argument("max_leases", 0, "must be at least 1"));
        }
        Ok(Self {
            client: client.clone(),
            fixed_base: client.fix_path(base),
            base: base.to_string(),
            driver,
            max_leases: AtomicUsize::new(max_leases),
        })
    }

    /// The lock's base path.
    pub fn base_path(&self) -> &str {
        &self.base
    }

    /// The client.
    pub fn client(&self) -> &CuratorClient {
        &self.client
    }

    /// The driver.
    pub fn driver(&self) -> &D {
        &self.driver
    }

    /// Changes the number of leases (Curator's `setMaxLeases`); waiters see it at their next look.
    pub fn set_max_leases(&self, max_leases: usize) {
        self.max_leases.store(max_leases.max(1), Ordering::SeqCst);
    }

    /// The children of the base path, sorted by the driver, as full paths (Curator's
    /// `getParticipantNodes`). Empty if the base path does not exist.
    ///
    /// # Errors
    /// Server errors after retries, as [`Error::ZooKeeper`].
    ///
    /// # Cancel safety
    /// Cancel safe (read only).
    pub async fn participant_nodes(&self) -> Result<Vec<String>> {
        let mut children = self.sorted_children(None).await?;
        for child in children.iter_mut() {
            *child = paths::join(&self.base, child);
        }
        Ok(children)
    }

    async fn sorted_children(&self, deadline: Option<Instant>) -> Result<Vec<String>> {
        let mut children = self.children(deadline).await?;
        self.driver.sort(&mut children);
        Ok(children)
    }

    /// The children of the base path in server order; empty if it does not exist.
    async fn children(&self, deadline: Option<Instant>) -> Result<Vec<String>> {
        let fixed = self.fixed_base.as_str();
        let listed = self.client.with_retry(&self.base, deadline, |zk| async move { zk.list_children(fixed).await });
        match listed.await {
            Ok(children) => Ok(children),
            Err(Error::ZooKeeper { source: zk::Error::NoNode, .. }) => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    /// Tries to get a lease: `Ok(Some(node))` when held, `Ok(None)` when `deadline` passed first.
    ///
    /// The deadline bounds the waiting and the retries; the first create+listing round trip always
    /// runs (bounded by the connection timeout), so a deadline of "now" means "try once".
    ///
    /// # Errors
    /// [`Error::Closed`] once the client is closing; server errors after the retry policy gave up
    /// (including a lost session when the policy refuses to queue again). Our node is deleted first.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call's node (created, or with its create in flight) is deleted in the
    /// background.
    pub async fn attempt_lock(&self, deadline: Option<Instant>, data: &[u8]) -> Result<Option<Arc<LockNode>>> {
        let start = Instant::now();
        let span = tracing::debug_span!("acquire", path = %self.base, lock = self.driver.lock_name());
        let result = self.attempt_lock_inner(start, deadline, data).instrument(span.clone()).await;
        let _enter = span.enter();
        match &result {
            Ok(Some(node)) => debug!(node = %node.path(), waited_us = start.elapsed().as_micros() as u64, "acquired"),
            Ok(None) => debug!(waited_us = start.elapsed().as_micros() as u64, "not acquired before the deadline"),
            Err(e) => debug!(%e, waited_us = start.elapsed().as_micros() as u64, "acquire failed"),
        }
        result
    }

    async fn attempt_lock_inner(
        &self,
        start: Instant,
        deadline: Option<Instant>,
        data: &[u8],
    ) -> Result<Option<Arc<LockNode>>> {
        // Network round trips may use at least the connection timeout, so a short deadline still
        // gets one honest try.
        let op_deadline = deadline.map(|d| d.max(start + self.client.inner.config.connection_timeout));
        let mut retry_count = 0u32;
        loop {
            if self.client.is_closed() {
                return Err(Error::Closed { path: self.base.clone() });
            }
            let spec = self.driver.node_spec();
            let created =
                self.client.create_protected(&self.base, &spec.name, data, spec.mode, op_deadline, true).await;
            let (node, mut listing) = match created {
                Ok(created) => created,
                Err(Error::DeadlineExceeded { .. }) => return Ok(None),
                Err(e) => return Err(e),
            };
            let fixed_node = paths::join(&self.fixed_base, &node.name);
            let mut cleanup = ContenderCleanup { client: &self.client, fixed: Some(fixed_node.clone()) };
            loop {
                let children = match listing.take() {
                    Some(children) => children,
                    None => match self.children(op_deadline).await {
                        Ok(children) => children,
                        Err(Error::DeadlineExceeded { .. }) => {
                            cleanup.delete_now().await;
                            return Ok(None);
                        }
                        Err(e) => {
                            cleanup.delete_now().await;
                            return Err(e);
                        }
                    },
                };
                let max_leases = self.max_leases.load(Ordering::SeqCst);
                // The listing is consumed here: a long queue's names are not kept alive while we wait.
                let predicate = self.driver.evaluate(children, &node.name, max_leases);
                let (watch, acquired_when_deleted) = match predicate {
                    Predicate::Acquired => {
                        cleanup.disarm();
                        return Ok(Some(LockNode::new(&self.client, node, fixed_node)));
                    }
                    Predicate::NotInQueue => break,
                    Predicate::Watch { node, acquired_when_deleted } => (node, acquired_when_deleted),
                };
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    cleanup.delete_now().await;
                    return Ok(None);
                }
                match self.wait_for(&watch, acquired_when_deleted, node.session, deadline).await {
                    Ok(WaitOutcome::Relist) => continue,
                    Ok(WaitOutcome::Acquired) => {
                        cleanup.disarm();
                        return Ok(Some(LockNode::new(&self.client, node, fixed_node)));
                    }
                    Ok(WaitOutcome::SessionChanged) => break,
                    Ok(WaitOutcome::DeadlinePassed) => {
                        cleanup.delete_now().await;
                        return Ok(None);
                    }
                    Ok(WaitOutcome::Closed) => {
                        cleanup.delete_now().await;
                        return Err(Error::Closed { path: self.base.clone() });
                    }
                    Err(e) => {
                        cleanup.delete_now().await;
                        return Err(e);
                    }
                }
            }
            // Our node is gone (session expired, or deleted by someone else): queue again with a new
            // node, as Curator does, if the retry policy and the deadline allow. We lose our place.
            drop(cleanup); // background delete: harmless if it is already gone
            debug!(node = %node.path, "our lock node vanished; queueing again with a new node");
            // Classified as a session loss so the retry policy decides, as Curator's NoNode path does.
            let err = Error::ZooKeeper { path: node.path.clone(), source: zk::Error::SessionExpired };
            match self.client.backoff_or_fail(err, &mut retry_count, start, deadline, &self.base).await {
                Ok(()) => {}
                Err(Error::DeadlineExceeded { .. }) => return Ok(None),
                Err(e) => return Err(e),
            }
        }
    }

    /// Watches `node` (a child name) and waits for its event, the deadline, or a session change.
    async fn wait_for(
        &self,
        node: &str,
        acquired_when_deleted: bool,
        our_session: crate::SessionIdentity,
        deadline: Option<Instant>,
    ) -> Result<WaitOutcome> {
        let fixed = paths::join(&self.fixed_base, node);
        let path = paths::join(&self.base, node);
        let mut status = self.client.status();
        if status.borrow().session != our_session {
            return Ok(WaitOutcome::SessionChanged);
        }
        // A data watch, as Curator does (CURATOR-107): no watch is left behind on a missing node.
        let fixed_ref = fixed.as_str();
        let watched = self
            .client
            .with_retry(&path, deadline, |zk| async move {
                let result = zk.get_and_watch_data(fixed_ref).await;
                Ok((result, zk.session_id().0))
            })
            .await;
        let watcher = match watched {
            Ok((Ok((_, _, watcher)), session_id)) if session_id == our_session.id => watcher,
            Ok((Ok(_), _)) => return Ok(WaitOutcome::SessionChanged),
            // Gone before we could watch it: same as its deletion event.
            Ok((Err(zk::Error::NoNode), session_id)) if session_id == our_session.id && acquired_when_deleted => {
                return Ok(WaitOutcome::Acquired)
            }
            Ok((Err(zk::Error::NoNode), _)) => return Ok(WaitOutcome::Relist),
            Ok((Err(e), _)) => {
                return match crate::error::classify(&e) {
                    ErrorKind::Retryable | ErrorKind::SessionLost => Ok(WaitOutcome::Relist),
                    _ => Err(Error::zk(&path, e)),
                }
            }
            Err(Error::DeadlineExceeded { .. }) => return Ok(WaitOutcome::DeadlinePassed),
            Err(Error::Closed { .. }) => return Ok(WaitOutcome::Closed),
            Err(e) => return Err(e),
        };
        let session_changed = status.wait_for(|s| s.closed || s.session != our_session);
        tokio::select! {
            event = watcher.changed() => {
                if event.event_type == zk::EventType::NodeDeleted && acquired_when_deleted {
                    Ok(WaitOutcome::Acquired)
                } else {
                    Ok(WaitOutcome::Relist)
                }
            },
            changed = session_changed => match changed {
                Ok(s) if !s.closed => Ok(WaitOutcome::SessionChanged),
                _ => Ok(WaitOutcome::Closed),
            },
            _ = sleep_until_opt(deadline) => Ok(WaitOutcome::DeadlinePassed),
        }
    }
}

async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d.into()).await,
        None => std::future::pending::<()>().await,
    }
}

/// `Some(now + timeout)`, saturating.
pub(crate) fn deadline_after(timeout: Duration) -> Option<Instant> {
    Some(Instant::now().checked_add(timeout).unwrap_or_else(|| Instant::now() + Duration::from_secs(86400 * 365)))
}
