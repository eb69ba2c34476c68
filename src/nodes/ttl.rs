//! [`PersistentTtlNode`] (Curator's `PersistentTtlNode`): a container node kept present while
//! started, with a TTL child touched every half TTL; once nobody touches it, the server removes
//! the child and then the container.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tracing::{debug, warn};

use super::persistent::{self, NodeState, PersistentNode};
use crate::deadline::deadline_after;
use crate::error::{Error, ErrorCode, Result};
use crate::framework::paths;
use crate::{CreateMode, CuratorClient};

/// The name of the TTL child Curator's `PersistentTtlNode` touches
/// (`PersistentTtlNode.DEFAULT_CHILD_NODE_NAME`).
pub const TTL_TOUCH_NODE_NAME: &str = "touch";

/// A node that lives while some process keeps touching it, wire-compatible with Curator's
/// `PersistentTtlNode`: the node at the path is a CONTAINER (kept present with the data, like a
/// [`PersistentNode`]) and its child `touch` (`<path>/touch`) a PERSISTENT_WITH_TTL node whose
/// data is set every `ttl / 2` (Curator's default touch schedule factor, 2). Once no process
/// touches it (all closed or gone), the server deletes `touch` after the TTL and then the empty
/// container: the node outlives a crash by about the TTL, not for ever.
///
/// [`close`](Self::close) stops touching and leaves both nodes to expire (as Curator does).
///
/// Needs a server with TTL nodes enabled: `extendedTypesEnabled=true` in `zoo.cfg` (or the JVM
/// flag `-Dzookeeper.extendedTypesEnabled=true`; the [`testing`](crate::testing) server sets
/// both). Elsewhere [`wait_for_initial_create`](Self::wait_for_initial_create) fails with
/// [`Error::InvalidArgument`] naming `ttl`.
///
/// A cheap [`Clone`] shares one node: closing through any clone closes it for all; the last clone
/// dropped stops touching and stops the node.
#[derive(Clone)]
pub struct PersistentTtlNode {
    node: PersistentNode,
    ttl: Duration,
    /// The container's czxid under which `touch` was last touched (or created).
    touched: watch::Sender<Option<i64>>,
    /// Why the last touch failed; `None` once one succeeded.
    touch_error: watch::Sender<Option<Error>>,
    touch_task: Arc<super::HelperTask>,
}

impl std::fmt::Debug for PersistentTtlNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PersistentTtlNode")
            .field("path", &self.node.path())
            .field("ttl", &self.ttl)
            .field("state", &self.node.state())
            .finish()
    }
}

impl PersistentTtlNode {
    /// A TTL node at `path` holding `data`, touched every `ttl / 2`. Not started: see
    /// [`start`](Self::start).
    ///
    /// # Errors
    /// [`Error::InvalidPath`] naming `path`; [`Error::InvalidArgument`] naming `ttl` when it is
    /// under 2 ms (half of it is the touch period) or over ZooKeeper's maximum, or naming the
    /// data's size when over the client's max data size.
    pub fn new(client: &CuratorClient, path: &str, ttl: Duration, data: impl Into<Vec<u8>>) -> Result<Self> {
        CreateMode::PersistentWithTtl(ttl).validate()?;
        if ttl < Duration::from_millis(2) {
            return Err(Error::invalid_argument(
                "ttl",
                format!("{ttl:?}"),
                "must be at least 2 ms (touched every ttl/2)",
            ));
        }
        let node = PersistentNode::build(
            client,
            path,
            CreateMode::Container,
            false,
            data.into(),
            false,
            client.recipe_labels("persistent_ttl_node", path),
        )?;
        Ok(Self {
            node,
            ttl,
            touched: watch::Sender::new(None),
            touch_error: watch::Sender::new(None),
            touch_task: Arc::default(),
        })
    }

    /// The path of the node (the container).
    pub fn path(&self) -> &str {
        self.node.path()
    }

    /// The TTL of the `touch` child.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Where the node is in its life.
    pub fn state(&self) -> NodeState {
        self.node.state()
    }

    /// The data the node is (re-)created with.
    pub fn data(&self) -> Vec<u8> {
        self.node.data()
    }

    /// Sets the node's data (see [`PersistentNode::set_data`]).
    ///
    /// # Errors
    /// As [`PersistentNode::set_data`].
    pub fn set_data(&self, data: impl Into<Vec<u8>>) -> Result<()> {
        self.node.set_data(data)
    }

    /// Why the last touch failed (e.g. TTL nodes disabled on the server); `None` once one
    /// succeeded. Touching goes on every `ttl / 2`.
    pub fn touch_errors(&self) -> watch::Receiver<Option<Error>> {
        self.touch_error.subscribe()
    }

    /// Starts keeping the node and touching its `touch` child (on the client's runtime).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if already started or closed.
    pub fn start(&self) -> Result<()> {
        self.node.start()?;
        let inner = self.node.inner().clone();
        let task = touch_loop(inner, self.ttl, self.touched.clone(), self.touch_error.clone());
        *self.touch_task.lock() = Some(self.node.inner().client.runtime().spawn(task));
        Ok(())
    }

    /// Waits until the node exists and its `touch` child was touched once: `Ok(true)`, or
    /// `Ok(false)` when `timeout` passed first. Returns within `timeout` whatever the connection
    /// does.
    ///
    /// # Errors
    /// [`Error::Closed`] naming the path if not started or closed meanwhile;
    /// [`Error::InvalidArgument`] naming `ttl` when the server has TTL nodes disabled; other
    /// errors retrying cannot cure (e.g. no permission) as soon as they happen.
    ///
    /// # Cancel safety
    /// Cancel safe: it only watches.
    ///
    /// # Examples
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// let node = zk_curator::nodes::PersistentTtlNode::new(&client, "/workers/w1", Duration::from_secs(30), b"busy".to_vec())?;
    /// node.start()?;
    /// assert!(node.wait_for_initial_create(Duration::from_secs(5)).await?);
    /// # Ok(()) }
    /// ```
    pub async fn wait_for_initial_create(&self, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let timeout = timeout.into().remaining();
        let deadline = deadline_after(timeout);
        let mut touched = self.touched.subscribe();
        let mut errors = self.touch_error.subscribe();
        let inner = self.node.inner();
        let mut current = inner.watch_current();
        let mut state = inner.watch_state();
        let wait = async {
            loop {
                let at = *touched.borrow_and_update();
                if at.is_some() && current.borrow_and_update().as_ref().map(|node| node.czxid) == at {
                    return Ok(true);
                }
                if let Some(e) = errors.borrow_and_update().as_ref() {
                    if matches!(e.kind(), crate::ErrorKind::BadArgument | crate::ErrorKind::NotAuthorized) {
                        return Err(e.clone());
                    }
                }
                if *state.borrow_and_update() != NodeState::Started {
                    return Err(Error::Closed { path: inner.path().to_string() });
                }
                tokio::select! {
                    _ = touched.changed() => {}
                    _ = errors.changed() => {}
                    _ = current.changed() => {}
                    _ = state.changed() => {}
                }
            }
        };
        match tokio::time::timeout_at(deadline.into(), wait).await {
            Ok(result) => result,
            Err(_) => Ok(false),
        }
    }

    /// Stops touching and stops keeping the node, leaving it (and `touch`) to expire after the
    /// TTL, as Curator does.
    ///
    /// # Errors
    /// None in practice (the node is not deleted); kept for symmetry with
    /// [`PersistentNode::close`].
    ///
    /// # Cancel safety
    /// Cancel safe: closed at the first poll.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(node: zk_curator::nodes::PersistentTtlNode) -> zk_curator::Result<()> {
    /// node.close().await?;
    /// # Ok(()) }
    /// ```
    pub async fn close(&self) -> Result<()> {
        if let Some(task) = self.touch_task.lock().take() {
            task.abort();
        }
        self.node.close().await
    }
}

/// Touches `<path>/touch` every `ttl / 2` while the container exists (the first time as soon as it
/// does).
async fn touch_loop(
    inner: Arc<persistent::Inner>,
    ttl: Duration,
    touched: watch::Sender<Option<i64>>,
    touch_error: watch::Sender<Option<Error>>,
) {
    let client = inner.client.clone();
    let period = ttl / 2;
    let child = paths::join(inner.path(), TTL_TOUCH_NODE_NAME);
    let fixed = client.fix_path(&child);
    let mut current = inner.watch_current();
    let mut state = inner.watch_state();
    let data = client.default_data().to_vec();
    loop {
        // Wait for the container.
        let node = tokio::select! {
            node = current.wait_for(Option::is_some) => match node {
                Ok(node) => node.clone().expect("some"),
                Err(_) => return,
            },
            _ = state.wait_for(|s| *s != NodeState::Started) => return,
        };
        let touch = touch(&client, &child, &fixed, ttl, &data);
        let result = tokio::select! {
            result = touch => result,
            _ = state.wait_for(|s| *s != NodeState::Started) => return,
        };
        match result {
            Ok(()) => {
                touch_error.send_if_modified(|e| e.take().is_some());
                touched.send_replace(Some(node.czxid));
            }
            Err(Error::Closed { .. }) => return,
            Err(e) => {
                let e = persistent::ttl_refused(CreateMode::PersistentWithTtl(ttl), e);
                warn!(%e, path = %child, "touching the TTL node failed; again in ttl/2");
                touch_error.send_replace(Some(e));
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(period) => {}
            _ = state.wait_for(|s| *s != NodeState::Started) => return,
        }
    }
}

/// One touch (Curator's): set the child's data, or create it with the TTL when missing.
async fn touch(client: &CuratorClient, child: &str, fixed: &str, ttl: Duration, data: &[u8]) -> Result<()> {
    let deadline = Some(deadline_after(client.connection_timeout()));
    let set = client.with_retry(child, deadline, |zk| async move { zk.set_data(fixed, data, None).await }).await;
    match set {
        Ok(_) => return Ok(()),
        Err(e) if e.is(ErrorCode::NoNode) => {}
        Err(e) => return Err(e),
    }
    debug!(path = %child, "creating the TTL touch node");
    let acls = client.raw_acls_for(fixed);
    let options = CreateMode::PersistentWithTtl(ttl).options(&acls);
    let options = &options;
    let created = client.with_retry(child, deadline, |zk| async move { zk.create(fixed, data, options).await }).await;
    match created {
        Ok(_) => Ok(()),
        // Made by another process (or our lost reply): touch it.
        Err(e) if e.is(ErrorCode::NodeExists) => client
            .with_retry(child, deadline, |zk| async move { zk.set_data(fixed, data, None).await })
            .await
            .map(|_| ()),
        Err(e) => Err(e),
    }
}
