//! Guaranteed deletes: a background queue that keeps deleting a node until it is gone
//! (Curator's `FailedDeleteManager` + `delete().guaranteed()`), and the clean-up of protected
//! creates whose outcome was unknown (Curator's `FindAndDeleteProtectedNodeInBackground`).
//!
//! Enqueuing never needs a runtime and never blocks, so `Drop` impls can use it anywhere.

use std::sync::Weak;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot, watch};
use tracing::{debug, warn};
use zookeeper_client as zk;

use super::client::{CuratorClient, Inner};
use crate::error::{Error, ErrorKind, Result};

pub(crate) enum DeleteTarget {
    /// Delete this (namespace-fixed) path.
    Node(String),
    /// Delete every child of `parent` whose name starts with `prefix` (a protected create's
    /// `_c_<uuid>-`): the create's outcome is unknown.
    Protected { parent: String, prefix: String },
}

pub(crate) struct DeleteJob {
    target: DeleteTarget,
    done: oneshot::Sender<Result<()>>,
}

/// The sending side of the queue, owned by the client.
pub(crate) struct DeleteQueue {
    jobs: mpsc::UnboundedSender<DeleteJob>,
    pending: watch::Sender<usize>,
}

/// The result of a background delete. Await [`wait`](Self::wait) for it, or drop it: the delete
/// goes on either way.
#[derive(Debug)]
pub struct DeleteOutcome {
    rx: oneshot::Receiver<Result<()>>,
}

impl DeleteOutcome {
    /// Waits until the node is gone (`Ok`), a non-retryable error stopped the delete, or the
    /// client was closed and dropped first ([`Error::Closed`]).
    ///
    /// # Cancel safety
    /// Cancel safe: the delete goes on in the background.
    pub async fn wait(self) -> Result<()> {
        self.rx.await.unwrap_or_else(|_| Err(Error::Closed { path: String::new() }))
    }
}

impl DeleteQueue {
    pub(crate) fn new() -> (DeleteQueue, mpsc::UnboundedReceiver<DeleteJob>) {
        let (jobs, rx) = mpsc::unbounded_channel();
        let (pending, _) = watch::channel(0);
        (DeleteQueue { jobs, pending }, rx)
    }

    pub(crate) fn delete(&self, fixed_path: String) -> DeleteOutcome {
        self.enqueue(DeleteTarget::Node(fixed_path))
    }

    pub(crate) fn delete_protected(&self, fixed_parent: String, prefix: String) -> DeleteOutcome {
        self.enqueue(DeleteTarget::Protected { parent: fixed_parent, prefix })
    }

    fn enqueue(&self, target: DeleteTarget) -> DeleteOutcome {
        let (done, rx) = oneshot::channel();
        self.pending.send_modify(|n| *n += 1);
        if let Err(mpsc::error::SendError(job)) = self.jobs.send(DeleteJob { target, done }) {
            // The worker is gone (runtime shut down); the session's end removes ephemeral nodes.
            self.pending.send_modify(|n| *n = n.saturating_sub(1));
            let _ = job.done.send(Err(Error::Closed { path: String::new() }));
        }
        DeleteOutcome { rx }
    }

    pub(crate) fn pending(&self) -> usize {
        *self.pending.borrow()
    }

    pub(crate) async fn wait_idle(&self, deadline: Instant) {
        let mut rx = self.pending.subscribe();
        let _ = tokio::time::timeout_at(deadline.into(), rx.wait_for(|n| *n == 0)).await;
    }
}

/// The worker: runs every job in its own task so one slow path does not hold up the others.
pub(crate) async fn run(client: Weak<Inner>, mut jobs: mpsc::UnboundedReceiver<DeleteJob>) {
    while let Some(job) = jobs.recv().await {
        tokio::spawn(run_job(client.clone(), job));
    }
}

async fn run_job(client: Weak<Inner>, job: DeleteJob) {
    let mut backoff = Duration::from_millis(50);
    let result = loop {
        let Some(inner) = client.upgrade() else {
            break Err(Error::Closed { path: String::new() });
        };
        let client = CuratorClient { inner };
        let result = match &job.target {
            DeleteTarget::Node(path) => delete_node(&client, path).await,
            DeleteTarget::Protected { parent, prefix } => delete_protected(&client, parent, prefix).await,
        };
        match result {
            Ok(()) => break Ok(()),
            Err(e) if matches!(e.kind(), ErrorKind::Retryable | ErrorKind::SessionLost) => {
                debug!(%e, "background delete will retry");
                drop(client);
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(2));
            }
            Err(e) => {
                if e.kind() != ErrorKind::Closed {
                    warn!(%e, "background delete gave up");
                }
                break Err(e);
            }
        }
    };
    if let Some(inner) = client.upgrade() {
        inner.deletes.pending.send_modify(|n| *n = n.saturating_sub(1));
    }
    let _ = job.done.send(result);
}

async fn delete_node(client: &CuratorClient, fixed: &str) -> Result<()> {
    let path = client.unfix_path(fixed).to_string();
    match client.retry_loop(&path, None, |zk| async move { zk.delete(fixed, None).await }).await {
        Ok(()) | Err(Error::ZooKeeper { source: zk::Error::NoNode, .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

async fn delete_protected(client: &CuratorClient, parent: &str, prefix: &str) -> Result<()> {
    let path = client.unfix_path(parent).to_string();
    let children = match client.retry_loop(&path, None, |zk| async move { zk.list_children(parent).await }).await {
        Ok(children) => children,
        Err(Error::ZooKeeper { source: zk::Error::NoNode, .. }) => return Ok(()),
        Err(e) => return Err(e),
    };
    for child in children.iter().filter(|c| c.starts_with(prefix)) {
        debug!(parent = %path, %child, "deleting protected node whose create was abandoned");
        delete_node(client, &super::paths::join(parent, child)).await?;
    }
    Ok(())
}
