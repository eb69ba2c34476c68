//! Guaranteed deletes: a background queue that keeps deleting a node (or a whole subtree) until
//! it is gone (Curator's `FailedDeleteManager` + `delete().guaranteed()`), and the clean-up of
//! protected creates whose outcome was unknown (Curator's `FindAndDeleteProtectedNodeInBackground`).
//!
//! Enqueuing never needs a runtime and never blocks, so `Drop` impls can use it anywhere
//! ([`DeleteOnDrop`] is the one guard that does). The queue knows nothing of the client: the worker
//! is handed a function that performs one attempt, so this module depends on no other.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicI64};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot, watch};
use tracing::{debug, warn};

use super::backoff::Backoff;
use crate::error::{Error, ErrorKind, Result};

/// What to delete (namespace-fixed paths).
#[derive(Clone, Debug)]
pub(crate) enum DeleteTarget {
    /// Delete this path.
    Node(String),
    /// Delete this path and every descendant, children first (a guaranteed
    /// `deleting_children_if_needed()` delete whose foreground attempt did not finish) — only
    /// while the node at the path is the one the delete was for: `czxid` is its creation zxid,
    /// as the call saw it or, when the call never reached the server, as the queue first finds
    /// it (0: not known yet; shared by the job's attempts). A node re-created at the path is
    /// someone else's and is left alone.
    Tree { path: String, czxid: Arc<AtomicI64> },
    /// Delete every child of `parent` whose name starts with `prefix` (a protected create's
    /// `_c_<uuid>-`): the create's outcome is unknown.
    Protected { parent: String, prefix: String },
    /// Delete this ephemeral node of a fixed name only while it is ours, and only through a handle
    /// of its `session` (ZooKeeper's session id): a node of ours whose session has ended went with
    /// it, and the node at the path, if any, is a later holder's. `mark` tells ours apart on the
    /// session (see [`OwnedMark`]).
    Owned { path: String, session: i64, mark: OwnedMark },
    /// Delete this path only while it is the node created at `czxid` (a recipe's own node, never
    /// one re-created at the path since); never its children.
    Created { path: String, czxid: i64 },
    /// Delete this path only while its ephemeral owner is `owner` (0: a persistent node): a
    /// recipe's create whose outcome is unknown.
    OwnedBy { path: String, owner: i64 },
    /// Delete the node at this path made in one transaction with its EPHEMERAL child `marker` (a
    /// unique name), the marker first, then the node — only while it is the node created at
    /// `czxid`. `czxid` 0: the create's outcome is unknown; the marker tells (it was made with
    /// the node, at the same zxid, and cannot outlive it). No marker then: the create did not
    /// happen, or its session ended and the node cannot be told from someone else's — left alone.
    Marked { path: String, marker: String, czxid: Arc<AtomicI64> },
}

/// How a [`DeleteTarget::Owned`] node is told apart from a node of the same name that its session
/// made since (a later acquisition on the same client).
#[derive(Clone, Debug)]
pub(crate) enum OwnedMark {
    /// A create whose outcome is unknown: ours is the node holding this unique data.
    Data(Vec<u8>),
    /// A node we hold, created at `czxid`. The first delete goes without a look (nothing of ours
    /// removes it before); once one was sent (`sent`, shared by the job's attempts) its outcome may
    /// be unknown, and the node may since have been re-created by our session, so any further
    /// attempt deletes only a node created at `czxid`.
    Held { czxid: i64, sent: Arc<AtomicBool> },
}

impl OwnedMark {
    /// The mark of a held node created at `czxid`, no delete of it sent yet.
    pub(crate) fn held(czxid: i64) -> OwnedMark {
        OwnedMark::Held { czxid, sent: Arc::new(AtomicBool::new(false)) }
    }
}

impl DeleteTarget {
    /// The node at `path` made with its marker child `marker`, created at `czxid` (None: the
    /// create's outcome is unknown).
    pub(crate) fn marked(path: String, marker: String, czxid: Option<i64>) -> DeleteTarget {
        DeleteTarget::Marked { path, marker, czxid: Arc::new(AtomicI64::new(czxid.unwrap_or(0))) }
    }

    /// The subtree at `path`, of the node created at `czxid` (None: the call never saw it).
    pub(crate) fn tree(path: String, czxid: Option<i64>) -> DeleteTarget {
        DeleteTarget::Tree { path, czxid: Arc::new(AtomicI64::new(czxid.unwrap_or(0))) }
    }
}

pub(crate) struct DeleteJob {
    target: DeleteTarget,
    done: oneshot::Sender<Result<()>>,
}

/// The sending side of the queue, owned by the client.
pub(crate) struct DeleteQueue {
    jobs: mpsc::UnboundedSender<DeleteJob>,
    pending: Arc<watch::Sender<usize>>,
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
    /// # Errors
    /// The error that stopped the delete (`NoAuth`, `NotEmpty`, ...), or [`Error::Closed`].
    ///
    /// # Cancel safety
    /// Cancel safe: the delete goes on in the background.
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// client.delete_in_background("/jobs/nightly/marker")?.wait().await?;
    /// # Ok(()) }
    /// ```
    pub async fn wait(self) -> Result<()> {
        self.rx.await.unwrap_or_else(|_| Err(Error::Closed { path: String::new() }))
    }
}

impl DeleteQueue {
    /// The queue and its worker; spawn the worker with [`DeleteWorker::run`].
    pub(crate) fn new() -> (DeleteQueue, DeleteWorker) {
        let (jobs, rx) = mpsc::unbounded_channel();
        let (pending, _) = watch::channel(0);
        let pending = Arc::new(pending);
        (DeleteQueue { jobs, pending: pending.clone() }, DeleteWorker { jobs: rx, pending })
    }

    pub(crate) fn enqueue(&self, target: DeleteTarget) -> DeleteOutcome {
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

    /// A guard that queues `target` for deletion when dropped, unless disarmed.
    pub(crate) fn on_drop(&self, target: DeleteTarget) -> DeleteOnDrop<'_> {
        DeleteOnDrop { queue: self, target: Some(target) }
    }
}

/// Queues its target for background deletion when dropped (an abandoned create, a cancelled
/// acquire, a delete whose future was dropped), unless [`disarm`](Self::disarm)ed first. Dropping
/// never blocks and needs no runtime.
pub(crate) struct DeleteOnDrop<'a> {
    queue: &'a DeleteQueue,
    target: Option<DeleteTarget>,
}

impl DeleteOnDrop<'_> {
    /// The node is in good hands (handed to a holder, or known not to exist).
    pub(crate) fn disarm(&mut self) {
        self.target = None;
    }

    /// Replaces the target queued on drop (re-arming a disarmed guard).
    pub(crate) fn retarget(&mut self, target: DeleteTarget) {
        self.target = Some(target);
    }

    /// Queues the delete now, and returns its outcome (None when disarmed).
    pub(crate) fn queue_now(&mut self) -> Option<DeleteOutcome> {
        self.target.take().map(|target| self.queue.enqueue(target))
    }
}

impl Drop for DeleteOnDrop<'_> {
    fn drop(&mut self) {
        if let Some(target) = self.target.take() {
            debug!(?target, "abandoned node: deleting in the background");
            drop(self.queue.enqueue(target));
        }
    }
}

/// The receiving side: runs every job in its own task so one slow path does not hold up the others.
pub(crate) struct DeleteWorker {
    jobs: mpsc::UnboundedReceiver<DeleteJob>,
    pending: Arc<watch::Sender<usize>>,
}

impl DeleteWorker {
    /// Runs until the queue is dropped. `attempt` makes one attempt at a target (with its own
    /// retries); it returns `None` once the client is gone, which ends the job with `Closed`.
    pub(crate) async fn run<A, Fut>(mut self, attempt: A)
    where
        A: Fn(DeleteTarget) -> Option<Fut> + Clone + Send + 'static,
        Fut: Future<Output = Result<()>> + Send + 'static,
    {
        while let Some(job) = self.jobs.recv().await {
            tokio::spawn(run_job(job, attempt.clone(), self.pending.clone()));
        }
    }
}

async fn run_job<A, Fut>(job: DeleteJob, attempt: A, pending: Arc<watch::Sender<usize>>)
where
    A: Fn(DeleteTarget) -> Option<Fut>,
    Fut: Future<Output = Result<()>>,
{
    let mut backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(2));
    let result = loop {
        let Some(attempt) = attempt(job.target.clone()) else {
            break Err(Error::Closed { path: String::new() });
        };
        match attempt.await {
            Ok(()) => break Ok(()),
            Err(e) if matches!(e.kind(), ErrorKind::Retryable | ErrorKind::SessionLost) => {
                debug!(%e, "background delete will retry");
                backoff.wait().await;
            }
            Err(e) => {
                if e.kind() != ErrorKind::Closed {
                    warn!(%e, "background delete gave up");
                }
                break Err(e);
            }
        }
    };
    pending.send_modify(|n| *n = n.saturating_sub(1));
    let _ = job.done.send(result);
}
