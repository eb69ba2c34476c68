//! [`PersistentNode`] (Curator's `PersistentNode`): one node kept present while started —
//! re-created after a session loss or a delete by someone else, with its latest data.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tracing::{debug, warn};
use zookeeper_client as zk;

use crate::deadline::deadline_after;
use crate::error::{Error, ErrorCode, ErrorKind, Result};
use crate::framework::guaranteed_delete::DeleteTarget;
use crate::framework::{backoff::Backoff, paths};
use crate::{CreateMode, CuratorClient, SessionIdentity};

/// How long the background task waits before creating again after a refused create (e.g. no
/// permission, or TTL nodes disabled on the server).
const RETRY_PAUSE: Duration = Duration::from_secs(1);

/// Where a [`PersistentNode`] (or a recipe built on one) is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NodeState {
    /// Created, not started.
    Latent,
    /// Keeping its node present.
    Started,
    /// Closed: its node deleted (or being deleted), never created again.
    Closed,
}

/// Our node as created: the path, the zxid that created it, the session that created it.
#[derive(Clone, Debug)]
pub(crate) struct OurNode {
    /// Without namespace.
    pub(crate) path: String,
    pub(crate) czxid: i64,
    pub(crate) session: SessionIdentity,
}

/// A node kept present while started, wire-compatible with Curator's `PersistentNode`.
///
/// [`start`](Self::start) creates the node in the background (parents as containers) and keeps
/// it there: after a session loss the client opens a new session and the node is created again on
/// it; after someone else deletes it, it is created again; each time with the latest data given to
/// [`set_data`](Self::set_data). Modes: any [`CreateMode`] but `Container`, protected or not —
/// protected names are Curator's `_c_<uuid>-<name>` (for a sequential mode, with the sequence
/// appended), which lets a create whose reply was lost find its node instead of making a second.
///
/// Promises:
/// * **never two of our nodes at once**: before creating on a new session, the previous session's
///   node is deleted if the server may still hold it (the client gave that session up while cut
///   off), so a sequential or protected node is never doubled;
/// * [`actual_path`](Self::actual_path) is the node now kept (sequence and protection included),
///   and [`close`](Self::close) deletes exactly that node (the node created then, never one
///   re-created at the path since by someone else);
/// * **nothing left behind**: a close (or drop) right after start deletes the node whose create
///   was in flight (Curator's CURATOR-297), in the background if need be.
///
/// An unprotected sequential node whose create reply is lost on a live session may be doubled
/// (the create cannot be told from another one): use protection for sequential modes, as Curator
/// advises. A non-sequential ephemeral node held by another session is left alone: the node waits
/// for it to go (see [`create_errors`](Self::create_errors)); a persistent one is adopted (its
/// data set to ours), as Curator does.
///
/// Dropping a started node stops it: its node is deleted in the background (on the client's
/// runtime). Prefer [`close`](Self::close), which waits for the delete.
pub struct PersistentNode {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) client: CuratorClient,
    /// The path asked for (without namespace).
    path: String,
    mode: CreateMode,
    protected: bool,
    /// False for the TTL node's container parent: Curator leaves it to the server.
    delete_on_close: bool,
    data: watch::Sender<Vec<u8>>,
    state: watch::Sender<NodeState>,
    /// The node now kept; `None` while it is being (re-)created.
    current: watch::Sender<Option<OurNode>>,
    /// Why the last create failed; `None` once one succeeded.
    create_error: watch::Sender<Option<Error>>,
    task: parking_lot::Mutex<Option<tokio::task::JoinHandle<Result<()>>>>,
    /// False while the background task runs.
    finished: watch::Sender<bool>,
}

impl std::fmt::Debug for PersistentNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PersistentNode")
            .field("path", &self.inner.path)
            .field("mode", &self.inner.mode)
            .field("protected", &self.inner.protected)
            .field("state", &self.state())
            .field("actual_path", &self.actual_path())
            .finish()
    }
}

impl PersistentNode {
    /// A node at `path` of `mode` (protected names when `protected`), holding `data`. Not started:
    /// see [`start`](Self::start).
    ///
    /// # Errors
    /// [`Error::InvalidPath`] naming `path` if it is not a valid ZooKeeper path (or is `/`);
    /// [`Error::InvalidArgument`] for [`CreateMode::Container`], a TTL of zero or over
    /// ZooKeeper's maximum, or data over the client's
    /// [`max_data_size`](crate::CuratorClientBuilder::max_data_size) (naming its size and `path`).
    pub fn new(
        client: &CuratorClient,
        path: &str,
        mode: CreateMode,
        protected: bool,
        data: impl Into<Vec<u8>>,
    ) -> Result<Self> {
        if mode == CreateMode::Container {
            return Err(Error::invalid_argument(
                "mode",
                "Container",
                "a persistent node is not a container (the server deletes those)",
            ));
        }
        Self::build(client, path, mode, protected, data.into(), true)
    }

    pub(crate) fn build(
        client: &CuratorClient,
        path: &str,
        mode: CreateMode,
        protected: bool,
        data: Vec<u8>,
        delete_on_close: bool,
    ) -> Result<Self> {
        paths::validate_path(path)?;
        if path == "/" {
            return Err(Error::InvalidPath { path: path.to_string(), reason: "the root is not a node of ours" });
        }
        if protected {
            paths::validate_node_name("node name", paths::node_name(path))?;
        }
        mode.validate()?;
        client.check_data_size("data", path, data.len())?;
        let inner = Inner {
            client: client.clone(),
            path: path.to_string(),
            mode,
            protected,
            delete_on_close,
            data: watch::Sender::new(data),
            state: watch::Sender::new(NodeState::Latent),
            current: watch::Sender::new(None),
            create_error: watch::Sender::new(None),
            task: parking_lot::Mutex::new(None),
            finished: watch::Sender::new(true),
        };
        Ok(Self { inner: Arc::new(inner) })
    }

    /// The path asked for (an [`actual_path`](Self::actual_path) may differ: protection,
    /// sequence).
    pub fn path(&self) -> &str {
        &self.inner.path
    }

    /// The create mode.
    pub fn mode(&self) -> CreateMode {
        self.inner.mode
    }

    /// Where the node is in its life.
    pub fn state(&self) -> NodeState {
        *self.inner.state.borrow()
    }

    /// The path of the node now kept (Curator's `getActualPath`), `None` while it is being
    /// (re-)created or once closed.
    pub fn actual_path(&self) -> Option<String> {
        self.inner.current.borrow().as_ref().map(|node| node.path.clone())
    }

    /// The data the node is (re-)created with: the latest given.
    pub fn data(&self) -> Vec<u8> {
        self.inner.data.borrow().clone()
    }

    /// Why the last create failed (e.g. [`ErrorKind::NotAuthorized`], or a non-sequential
    /// ephemeral node held by another session); `None` once a create succeeded. The node tries
    /// again in the background.
    pub fn create_errors(&self) -> watch::Receiver<Option<Error>> {
        self.inner.create_error.subscribe()
    }

    /// Starts keeping the node: creates it in the background, on the client's runtime (so no
    /// runtime is needed here).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if already started or closed (a node starts once, as in Curator).
    pub fn start(&self) -> Result<()> {
        let mut started = false;
        self.inner.state.send_if_modified(|state| {
            started = *state == NodeState::Latent;
            if started {
                *state = NodeState::Started;
            }
            started
        });
        if !started {
            return Err(Error::invalid_argument("node state", format!("{:?}", self.state()), "a node starts once"));
        }
        self.inner.finished.send_replace(false);
        // Made here, not in the task: a task dropped before it first ran still sets it.
        let finished = Finished(self.inner.clone());
        let task = self.inner.client.runtime().spawn(run(self.inner.clone(), finished));
        *self.inner.task.lock() = Some(task);
        Ok(())
    }

    /// Sets the node's data (Curator's `setData`): written to the node now kept, and used for
    /// every re-creation. Applied in the background; [`data`](Self::data) returns it at once.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming its size and the path when over the client's
    /// [`max_data_size`](crate::CuratorClientBuilder::max_data_size) (nothing changed).
    pub fn set_data(&self, data: impl Into<Vec<u8>>) -> Result<()> {
        let data = data.into();
        self.inner.client.check_data_size("data", &self.inner.path, data.len())?;
        self.inner.data.send_replace(data);
        Ok(())
    }

    /// Waits until the node has been created at least once (Curator's `waitForInitialCreate`):
    /// `Ok(true)` once created, `Ok(false)` when `timeout` passed first. Returns within `timeout`
    /// whatever the connection does.
    ///
    /// # Errors
    /// [`Error::Closed`] naming the path if the node is not started or is closed meanwhile; a
    /// create error that retrying cannot cure (e.g. [`ErrorKind::NotAuthorized`], or
    /// [`Error::InvalidArgument`] naming `ttl` on a server with TTL nodes disabled) as soon as it
    /// happens (the node keeps trying in the background).
    ///
    /// # Cancel safety
    /// Cancel safe: it only watches.
    ///
    /// # Examples
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// use zk_curator::{CreateMode, PersistentNode};
    ///
    /// let node = PersistentNode::new(&client, "/services/api/host-a", CreateMode::Ephemeral, false, b"10.0.0.7:8080".to_vec())?;
    /// node.start()?;
    /// if !node.wait_for_initial_create(Duration::from_secs(5)).await? {
    ///     eprintln!("not registered yet; it will be when ZooKeeper answers");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn wait_for_initial_create(&self, timeout: Duration) -> Result<bool> {
        self.inner.wait_created(deadline_after(timeout), |_| true).await
    }

    /// Stops keeping the node and deletes it — exactly the node created, never one re-created at
    /// the path since — waiting for the delete (at most the client's connection timeout, and as
    /// long again for a create in flight, which is let finish first). A delete that does not finish in
    /// time goes on in the background, guaranteed. Closing a node that is not started (or already
    /// closed) only marks it closed.
    ///
    /// # Errors
    /// The delete's error (it goes on in the background when its outcome is unknown), or
    /// [`Error::DeadlineExceeded`].
    ///
    /// # Cancel safety
    /// Cancel safe: the node is closed at the first poll and its delete goes on in the background.
    /// A later (or concurrent) `close` waits for it too.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(node: zk_curator::PersistentNode) -> zk_curator::Result<()> {
    /// node.close().await?;
    /// assert_eq!(node.actual_path(), None);
    /// # Ok(()) }
    /// ```
    pub async fn close(&self) -> Result<()> {
        self.inner.close().await
    }

    pub(crate) fn inner(&self) -> &Arc<Inner> {
        &self.inner
    }
}

impl Inner {
    pub(crate) fn started(&self) -> bool {
        *self.state.borrow() == NodeState::Started
    }

    pub(crate) fn path(&self) -> &str {
        &self.path
    }

    pub(crate) fn current(&self) -> Option<OurNode> {
        self.current.borrow().clone()
    }

    pub(crate) fn watch_state(&self) -> watch::Receiver<NodeState> {
        self.state.subscribe()
    }

    pub(crate) fn watch_current(&self) -> watch::Receiver<Option<OurNode>> {
        self.current.subscribe()
    }

    /// Waits, until `deadline`, for a node (for which `also` holds) to be kept.
    pub(crate) async fn wait_created(&self, deadline: Instant, also: impl Fn(&OurNode) -> bool) -> Result<bool> {
        let mut current = self.current.subscribe();
        let mut state = self.state.subscribe();
        let mut errors = self.create_error.subscribe();
        let wait = async {
            loop {
                if *state.borrow_and_update() != NodeState::Started {
                    return Err(Error::Closed { path: self.path.clone() });
                }
                if current.borrow_and_update().as_ref().is_some_and(&also) {
                    return Ok(true);
                }
                if let Some(e) = errors.borrow_and_update().as_ref() {
                    if matches!(e.kind(), ErrorKind::BadArgument | ErrorKind::NotAuthorized) {
                        return Err(e.clone());
                    }
                }
                tokio::select! {
                    _ = current.changed() => {}
                    _ = state.changed() => {}
                    _ = errors.changed() => {}
                }
            }
        };
        match tokio::time::timeout_at(deadline.into(), wait).await {
            Ok(result) => result,
            Err(_) => Ok(false),
        }
    }

    pub(crate) async fn close(&self) -> Result<()> {
        self.state.send_replace(NodeState::Closed);
        let task = self.task.lock().take();
        match task {
            // The task sees the state, finishes a create in flight, deletes the node and ends:
            // also when this call is dropped meanwhile.
            Some(task) => match task.await {
                Ok(result) => result,
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(_) => Ok(()),
            },
            None => {
                let mut finished = self.finished.subscribe();
                let _ = finished.wait_for(|finished| *finished).await;
                Ok(())
            }
        }
    }

    /// Stops the node from a drop: the task deletes its node in the background.
    pub(crate) fn stop_in_background(&self) {
        self.state.send_replace(NodeState::Closed);
        drop(self.task.lock().take());
    }

    /// The queued delete of `node` (also without a runtime).
    fn delete_in_background(&self, node: &OurNode) {
        if self.delete_on_close {
            let fixed = self.client.fix_path(&node.path);
            drop(self.client.delete_on_drop(DeleteTarget::Created { path: fixed, czxid: node.czxid }));
        }
    }
}

impl Drop for PersistentNode {
    fn drop(&mut self) {
        self.inner.stop_in_background();
    }
}

/// Marks the background task finished when dropped (returned, panicked, or dropped with its
/// runtime), queueing the delete of a node the task had no time to delete.
struct Finished(Arc<Inner>);

impl Drop for Finished {
    fn drop(&mut self) {
        if let Some(node) = self.0.current.send_replace(None) {
            self.0.delete_in_background(&node);
        }
        self.0.finished.send_replace(true);
    }
}

/// The background task: keeps the node until closed, then deletes it.
async fn run(inner: Arc<Inner>, finished: Finished) -> Result<()> {
    keep(&inner).await;
    let node = inner.current.send_replace(None);
    let result = match node {
        Some(node) if inner.delete_on_close => {
            let fixed = inner.client.fix_path(&node.path);
            let deadline = deadline_after(inner.client.connection_timeout());
            inner.client.delete_created_guaranteed(&fixed, node.czxid, Some(deadline)).await
        }
        _ => Ok(()),
    };
    drop(finished);
    result
}

/// What one create attempt left.
enum Created {
    Node(OurNode),
    /// Not created; try again (after a pause when `pause`).
    Again {
        pause: bool,
    },
}

/// Keeps the node present until the state leaves `Started` (the node is left in `current`).
async fn keep(inner: &Arc<Inner>) {
    let client = &inner.client;
    let mut status = client.status();
    let mut data = inner.data.subscribe();
    let mut state = inner.state.subscribe();
    let mut backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(2));
    // Sessions of ours whose node may outlive them (given up while cut off).
    let mut stale: Option<OurNode> = None;
    while inner.started() {
        status.borrow_and_update();
        let Some(node) = inner.current() else {
            if let Some(old) = stale.take() {
                // Never two of ours at once: the old session's node goes before the new one comes.
                let fixed = client.fix_path(&old.path);
                let deleted = tokio::select! {
                    deleted = client.delete_fixed_if(&fixed, None, |stat| stat.czxid == old.czxid) => deleted,
                    _ = state.wait_for(|s| *s != NodeState::Started) => {
                        inner.delete_in_background(&old);
                        return;
                    }
                };
                if let Err(e) = deleted {
                    debug!(%e, node = %old.path, "deleting the previous session's node failed; again");
                    stale = Some(old);
                    backoff.wait().await;
                    continue;
                }
            }
            // Not interrupted by a close: a create in flight finishes (bounded), then `run`
            // deletes its node — nothing is left behind (CURATOR-297).
            let attempt = create(inner, &mut data).await;
            match attempt {
                Created::Node(node) => {
                    debug!(node = %node.path, session = node.session.id, "persistent node created");
                    inner.create_error.send_if_modified(|e| e.take().is_some());
                    inner.current.send_replace(Some(node));
                    backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(2));
                }
                Created::Again { pause } => {
                    if client.is_closed() {
                        return;
                    }
                    let wait = async {
                        if pause {
                            tokio::time::sleep(RETRY_PAUSE).await
                        } else {
                            backoff.wait().await
                        }
                    };
                    tokio::select! {
                        _ = wait => {}
                        _ = state.wait_for(|s| *s != NodeState::Started) => return,
                    }
                }
            }
            continue;
        };
        let now = client.status_now();
        if inner.mode.is_ephemeral() && now.session != node.session {
            // A new session: the node went with the old one — or, if the client gave that
            // session up while cut off, the server may hold it a while longer: delete it first.
            if now.expiry_bounds.given_up(node.session) {
                stale = Some(node);
            }
            inner.current.send_replace(None);
            continue;
        }
        // Watch our node (and apply new data).
        let fixed = client.fix_path(&node.path);
        let f = fixed.as_str();
        let watched = tokio::select! {
            watched = client.with_retry(&node.path, None, |zk| async move { zk.check_and_watch_stat(f).await }) => watched,
            _ = status.changed() => continue,
            _ = state.wait_for(|s| *s != NodeState::Started) => return,
        };
        let (stat, watcher) = match watched {
            Ok(watched) => watched,
            Err(Error::Closed { .. }) => return,
            Err(e) => {
                debug!(%e, node = %node.path, "watching the persistent node failed; again");
                backoff.wait().await;
                continue;
            }
        };
        let gone = match &stat {
            None => true,
            // Re-created at the path by someone else: not ours (an ephemeral of another
            // session) — or, persistent, adopted on the next create.
            Some(stat) => stat.czxid != node.czxid,
        };
        if gone {
            debug!(node = %node.path, "persistent node deleted by someone else; creating it again");
            inner.current.send_replace(None);
            continue;
        }
        if data.has_changed().unwrap_or(false) {
            let bytes = data.borrow_and_update().clone();
            let written = client
                .with_retry(&node.path, None, |zk| {
                    let bytes = &bytes;
                    async move { zk.set_data(f, bytes, None).await }
                })
                .await;
            match written {
                Ok(_) => {}
                Err(e) if e.is(ErrorCode::NoNode) => {
                    inner.current.send_replace(None);
                }
                Err(e) => {
                    warn!(%e, node = %node.path, "setting the persistent node's data failed; again");
                    data.mark_changed();
                    backoff.wait().await;
                }
            }
            continue;
        }
        tokio::select! {
            _ = watcher.changed() => {}
            _ = status.changed() => {}
            _ = data.changed() => {
                // Looked at by the next round.
                data.mark_changed();
            }
            _ = state.wait_for(|s| *s != NodeState::Started) => return,
        }
    }
}

/// One create of the node with the latest data, bounded by the connection timeout.
async fn create(inner: &Inner, data: &mut watch::Receiver<Vec<u8>>) -> Created {
    let client = &inner.client;
    let bytes = data.borrow_and_update().clone();
    let until = deadline_after(client.connection_timeout());
    let deadline = Some(until);
    let refused = |e: Error| {
        let e = ttl_refused(inner.mode, e);
        let pause = !matches!(e.kind(), ErrorKind::Retryable | ErrorKind::SessionLost | ErrorKind::DeadlineExceeded);
        if pause {
            warn!(%e, path = %inner.path, "persistent node cannot be created; trying again");
        } else {
            debug!(%e, path = %inner.path, "persistent node create failed; trying again");
        }
        inner.create_error.send_replace(Some(e));
        Created::Again { pause }
    };
    if inner.protected {
        let parent = paths::parent(&inner.path);
        let name = paths::node_name(&inner.path);
        return match client.create_protected(parent, name, &bytes, inner.mode, deadline, false, None).await {
            Ok((node, _)) => Created::Node(OurNode { path: node.path, czxid: node.czxid, session: node.session }),
            Err(e) => refused(e),
        };
    }
    let fixed = client.fix_path(&inner.path);
    let (zk, session) = match client.connected(&inner.path, deadline).await {
        Ok(connected) => connected,
        Err(e) => return refused(e),
    };
    let acls = client.raw_acls_for(&fixed);
    let options = inner.mode.options(&acls);
    let mut parent_rounds = 0;
    loop {
        let created = tokio::time::timeout_at(until.into(), zk.create(&fixed, &bytes, &options))
            .await
            .unwrap_or(Err(zk::Error::Timeout));
        match created {
            Ok((stat, sequence)) => {
                let path =
                    if inner.mode.is_sequential() { format!("{}{sequence}", inner.path) } else { inner.path.clone() };
                return Created::Node(OurNode { path, czxid: stat.czxid, session });
            }
            Err(zk::Error::NoNode) if parent_rounds < 5 => {
                parent_rounds += 1;
                match client.create_parents(paths::parent(&fixed), deadline).await {
                    Ok(()) | Err(Error::ZooKeeper { code: ErrorCode::NoNode, .. }) => {}
                    Err(e) => return refused(e),
                }
            }
            Err(zk::Error::NodeExists) if !inner.mode.is_sequential() => {
                // Within the same bound: a close waits for this create.
                let found = tokio::time::timeout_at(until.into(), existing(inner, &zk, session, &fixed, &bytes));
                return found.await.unwrap_or(Created::Again { pause: false });
            }
            Err(e) => {
                let e = Error::zk(&inner.path, e);
                if !inner.mode.is_sequential() && matches!(e.kind(), ErrorKind::Retryable | ErrorKind::SessionLost) {
                    // Unknown outcome: a node it may have made is ours (our session's, or a
                    // persistent one), found by the next create's NodeExists — or, if the node
                    // was closed meanwhile, deleted in the background.
                    if !inner.started() {
                        let owner = if inner.mode.is_ephemeral() { session.id } else { 0 };
                        drop(client.delete_on_drop(DeleteTarget::OwnedBy { path: fixed.clone(), owner }));
                    }
                }
                return refused(e);
            }
        }
    }
}

/// The node exists at our (non-sequential) path: ours (a lost reply's create on this session,
/// or a persistent node, adopted with our data), or another session's ephemeral (waited for).
async fn existing(inner: &Inner, zk: &zk::Client, session: SessionIdentity, fixed: &str, bytes: &[u8]) -> Created {
    let stat = match zk.check_stat(fixed).await {
        Ok(Some(stat)) => stat,
        // Gone meanwhile: create again.
        Ok(None) => return Created::Again { pause: false },
        Err(e) => {
            inner.create_error.send_replace(Some(Error::zk(&inner.path, e)));
            return Created::Again { pause: false };
        }
    };
    let node = OurNode { path: inner.path.clone(), czxid: stat.czxid, session };
    if !inner.mode.is_ephemeral() {
        if stat.ephemeral_owner != 0 {
            return foreign(inner, zk, fixed, stat.ephemeral_owner).await;
        }
        // Adopted (Curator's PersistentNode does so too): our data goes in.
        if let Err(e) = zk.set_data(fixed, bytes, None).await {
            inner.create_error.send_replace(Some(Error::zk(&inner.path, e)));
            return Created::Again { pause: false };
        }
        return Created::Node(node);
    }
    if stat.ephemeral_owner == session.id {
        return Created::Node(node);
    }
    foreign(inner, zk, fixed, stat.ephemeral_owner).await
}

/// Another session holds our path: wait (bounded) for its node to go, then create again.
async fn foreign(inner: &Inner, zk: &zk::Client, fixed: &str, owner: i64) -> Created {
    let e = Error::ZooKeeper {
        path: inner.path.clone(),
        code: ErrorCode::NodeExists,
        detail: crate::error::ErrorDetail::from(format!("held by another session (0x{owner:x})")),
    };
    debug!(%e, "persistent node's path is taken; waiting for it to go");
    inner.create_error.send_replace(Some(e));
    let mut state = inner.state.subscribe();
    if let Ok((Some(_), watcher)) = zk.check_and_watch_stat(fixed).await {
        tokio::select! {
            _ = watcher.changed() => {}
            _ = state.wait_for(|s| *s != NodeState::Started) => {}
            _ = tokio::time::sleep(inner.client.negotiated_session_timeout()) => {}
        }
    }
    Created::Again { pause: false }
}

/// A TTL create refused because the server has TTL nodes disabled, as a typed error naming the
/// TTL (ZooKeeper answers `Unimplemented`).
pub(crate) fn ttl_refused(mode: CreateMode, e: Error) -> Error {
    match mode.ttl() {
        Some(ttl) if e.is(ErrorCode::Unimplemented) => Error::invalid_argument(
            "ttl",
            format!("{ttl:?}"),
            "the server has TTL nodes disabled (start it with -Dzookeeper.extendedTypesEnabled=true)",
        ),
        _ => e,
    }
}
