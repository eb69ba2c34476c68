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
use crate::framework::SessionIdentity;
use crate::framework::{backoff::Backoff, paths};
use crate::{ConnectionState, CreateMode, CuratorClient};

/// How long the background task waits before creating again after a refused create (e.g. no
/// permission, or TTL nodes disabled on the server).
const RETRY_PAUSE: Duration = Duration::from_secs(1);

/// The name prefix of the EPHEMERAL child made in one transaction with an unprotected
/// persistent (or TTL) node, so that a create whose reply was lost can be told ours (see
/// [`PersistentNode`]); a UUID follows.
pub(crate) const CREATE_MARKER_PREFIX: &str = "_zkc-create-";

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

/// Whether a [`PersistentNode`]'s name is protected (Curator's `useProtection` constructor
/// argument).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Protection {
    /// The node is named as asked (for a sequential mode, with the sequence appended).
    #[default]
    Unprotected,
    /// Curator's protected name `_c_<uuid>-<name>`: a create whose reply was lost finds its node
    /// instead of making a second one. Advised for sequential modes.
    Protected,
}

/// Our node as created: the path, the zxid that created it, the session that created it.
#[derive(Clone, Debug)]
pub(crate) struct OurNode {
    /// Without namespace.
    pub(crate) path: String,
    pub(crate) czxid: i64,
    pub(crate) session: SessionIdentity,
    /// Ours to delete on close: made by our create (its reply read, or a lost reply told ours by
    /// its marker), or found at the path by a create with no earlier outcome unknown (adopted).
    /// False for a node found while a create of ours had an unknown outcome that cannot be told
    /// ours: kept while started, left by close.
    pub(crate) ours: bool,
    /// The namespace-fixed path of the create marker made with the node (deleted right after the
    /// create; deleted again, if need be, before the node on close).
    marker: Option<String>,
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
/// **Unprotected persistent and TTL modes, a create whose reply is lost** (connection cut): the
/// node is created in one transaction with an EPHEMERAL child `_zkc-create-<uuid>` (the create
/// marker, deleted as soon as the reply is read; while it is there, a plain delete of the node by
/// someone else fails with `NotEmpty`). When the reply is lost, the marker tells — at the next
/// create or on close — whether that create made the node now at the path (same czxid): then it
/// is ours and close deletes it. Otherwise the node there is someone else's, made meanwhile
/// (CURATOR-506): it is kept while started (our data set, as when adopted) but close leaves it.
/// If the session also ended before the outcome was read, the marker went with it and the node
/// cannot be told ours: close leaves it standing rather than risk deleting someone else's. The
/// marker needs CREATE and DELETE permission on the node (its ACL); where the ACL refuses it (or
/// has an entry granting CREATE without DELETE, so that a marker might never be deleted again),
/// creates go without a marker, and a node whose create reply was lost is treated as found
/// (adopted).
///
/// A cheap [`Clone`] shares one node: every clone sees the same node and data, and closing through
/// any clone closes it for all. Dropping the last clone of a started node stops it: its node is
/// deleted in the background (on the client's runtime). Prefer [`close`](Self::close), which
/// waits for the delete.
#[derive(Clone)]
pub struct PersistentNode {
    inner: Arc<Inner>,
    /// Shared by the clones: dropping the last one stops the node.
    _last: Arc<StopOnLastDrop>,
}

pub(crate) struct Inner {
    pub(crate) client: CuratorClient,
    /// The node's metrics (`recipe` as its public type: `persistent_node`, `group_member`,
    /// `persistent_ttl_node`).
    metrics: crate::metrics::RecipeLabels,
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
    /// The namespace-fixed marker path of a create (with a marker) whose outcome is unknown, until
    /// a create attempt ends with a node.
    unknown_create: parking_lot::Mutex<Option<String>>,
    /// A marked create was refused `NoAuth`: the node's ACL does not let us create the marker
    /// under it, so creates go without one from then on.
    marker_refused: std::sync::atomic::AtomicBool,
    /// The node's ACL lets whoever may create the marker under it delete it again: every entry
    /// granting CREATE grants DELETE. Otherwise a marker could outlive its create for as long as
    /// the session lives, and the node could not be deleted (`NotEmpty`), by close or anyone.
    marker_deletable: bool,
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
    /// A node at `path` of `mode` (with Curator's protected name when `protection` is
    /// [`Protection::Protected`]), holding `data`. Not started: see [`start`](Self::start).
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
        protection: Protection,
        data: impl Into<Vec<u8>>,
    ) -> Result<Self> {
        if mode == CreateMode::Container {
            return Err(Error::invalid_argument(
                "mode",
                "Container",
                "a persistent node is not a container (the server deletes those)",
            ));
        }
        Self::build(
            client,
            path,
            mode,
            protection == Protection::Protected,
            data.into(),
            true,
            client.recipe_labels("persistent_node", path),
        )
    }

    pub(crate) fn build(
        client: &CuratorClient,
        path: &str,
        mode: CreateMode,
        protected: bool,
        data: Vec<u8>,
        delete_on_close: bool,
        metrics: crate::metrics::RecipeLabels,
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
        let marker_deletable = client.raw_acls_for(&client.fix_path(path)).iter().all(|acl| {
            let granted = acl.permission();
            !granted.has(zk::Permission::CREATE) || granted.has(zk::Permission::DELETE)
        });
        let inner = Inner {
            client: client.clone(),
            metrics,
            path: path.to_string(),
            mode,
            protected,
            delete_on_close,
            data: watch::Sender::new(data),
            state: watch::Sender::new(NodeState::Latent),
            current: watch::Sender::new(None),
            create_error: watch::Sender::new(None),
            task: parking_lot::Mutex::new(None),
            unknown_create: parking_lot::Mutex::new(None),
            marker_refused: std::sync::atomic::AtomicBool::new(false),
            marker_deletable,
            finished: watch::Sender::new(true),
        };
        let inner = Arc::new(inner);
        Ok(Self { _last: Arc::new(StopOnLastDrop(inner.clone())), inner })
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
    /// (re-)created — for an ephemeral node also from the moment the client gives its session up
    /// ([`ConnectionState::Lost`], before a new session is connected) — or once closed.
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
    /// use zk_curator::CreateMode;
    /// use zk_curator::nodes::{PersistentNode, Protection};
    ///
    /// let node = PersistentNode::new(&client, "/services/api/host-a", CreateMode::Ephemeral, Protection::Unprotected, b"10.0.0.7:8080".to_vec())?;
    /// node.start()?;
    /// if !node.wait_for_initial_create(Duration::from_secs(5)).await? {
    ///     eprintln!("not registered yet; it will be when ZooKeeper answers");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn wait_for_initial_create(&self, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let timeout = timeout.into().remaining();
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
    /// # async fn demo(node: zk_curator::nodes::PersistentNode) -> zk_curator::Result<()> {
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

    /// Whether creates go with a marker (see [`CREATE_MARKER_PREFIX`]): an unprotected,
    /// non-sequential, persistent (or TTL) node that close deletes.
    fn marked(&self) -> bool {
        self.delete_on_close
            && !self.protected
            && !self.mode.is_ephemeral()
            && !self.mode.is_sequential()
            && self.mode != CreateMode::Container
            && self.marker_deletable
            && !self.marker_refused.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The delete of `node` on close: only the node created then, only if it is ours to delete.
    fn delete_target(&self, node: &OurNode) -> Option<DeleteTarget> {
        if !self.delete_on_close || !node.ours {
            return None;
        }
        let fixed = self.client.fix_path(&node.path);
        Some(match &node.marker {
            Some(marker) => DeleteTarget::marked(fixed, marker.clone(), Some(node.czxid)),
            None => DeleteTarget::Created { path: fixed, czxid: node.czxid },
        })
    }

    /// The delete on close of the node a create with an unknown outcome may have made: its
    /// marker tells (see [`DeleteTarget::Marked`]).
    fn unknown_create_target(&self) -> Option<DeleteTarget> {
        let marker = self.unknown_create.lock().take()?;
        Some(DeleteTarget::marked(self.client.fix_path(&self.path), marker, None))
    }

    /// The queued delete of `node` (also without a runtime).
    fn delete_in_background(&self, node: &OurNode) {
        if let Some(target) = self.delete_target(node) {
            drop(self.client.delete_on_drop(target));
        }
    }
}

/// Stops the node when the last clone of the handle is dropped (the background task holds
/// `Inner` too, so `Inner`'s own drop would come too late).
struct StopOnLastDrop(Arc<Inner>);

impl Drop for StopOnLastDrop {
    fn drop(&mut self) {
        self.0.stop_in_background();
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
        if let Some(target) = self.0.unknown_create_target() {
            drop(self.0.client.delete_on_drop(target));
        }
        self.0.finished.send_replace(true);
    }
}

/// The background task: keeps the node until closed, then deletes it.
async fn run(inner: Arc<Inner>, finished: Finished) -> Result<()> {
    keep(&inner).await;
    let node = inner.current.send_replace(None);
    // Our node (only the one created then), else the node a create with an unknown outcome may
    // have made (only if its marker tells it ours).
    let target = match &node {
        Some(node) => inner.delete_target(node),
        None if inner.delete_on_close => inner.unknown_create_target(),
        None => None,
    };
    let result = match target {
        Some(target) => {
            let deadline = deadline_after(inner.client.connection_timeout());
            inner.client.delete_target_guaranteed(target, Some(deadline)).await
        }
        None => Ok(()),
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
    let mut created_before = false;
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
                    inner.metrics.node_created(if std::mem::replace(&mut created_before, true) {
                        "recreated"
                    } else {
                        "initial"
                    });
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
        if inner.mode.is_ephemeral() && (now.session != node.session || now.state == ConnectionState::Lost) {
            // A new session, or the old one given up (LOST, also before the new one connects):
            // the node is not kept any more. It went with the old session — or, if the client
            // gave that session up while cut off, the server may hold it a while longer: it is
            // deleted (on the new session) before the next one is made.
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
            Ok((node, _)) => Created::Node(OurNode {
                path: node.path,
                czxid: node.czxid,
                session: node.session,
                ours: true,
                marker: None,
            }),
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
    // A node found at the path is adopted as ours unless a create of ours with an unknown
    // outcome cannot be told to have made it: then it is someone else's, made in between.
    let mut adoptable = true;
    let pending = if inner.marked() { inner.unknown_create.lock().clone() } else { None };
    if let Some(marker) = pending {
        let told = tokio::time::timeout_at(until.into(), made_by(&zk, &fixed, &marker)).await;
        match told.unwrap_or(Err(zk::Error::Timeout)) {
            Ok(Some(czxid)) => {
                debug!(path = %inner.path, "a create whose reply was lost made the node: ours");
                inner.unknown_create.lock().take();
                forget_marker(client, &marker, deadline).await;
                let node = OurNode { path: inner.path.clone(), czxid, session, ours: true, marker: Some(marker) };
                return Created::Node(node);
            }
            Ok(None) => adoptable = false,
            Err(e) => return refused(Error::zk(&inner.path, e)),
        }
    }
    let mut parent_rounds = 0;
    loop {
        let marker =
            inner.marked().then(|| paths::join(&fixed, &format!("{CREATE_MARKER_PREFIX}{}", uuid::Uuid::new_v4())));
        let created = match &marker {
            None => tokio::time::timeout_at(until.into(), zk.create(&fixed, &bytes, &options))
                .await
                .unwrap_or(Err(zk::Error::Timeout))
                .map(|(stat, sequence)| (stat.czxid, Some(sequence))),
            Some(marker) => {
                let made = create_marked(client, &zk, &fixed, &bytes, &options, marker);
                let made = tokio::time::timeout_at(until.into(), made).await;
                match made.unwrap_or(Err(zk::Error::Timeout)) {
                    Ok(Some(czxid)) => Ok((czxid, None)),
                    // The node's ACL does not let us create the marker under it (a transaction
                    // is all or nothing: nothing was made). Without a marker, as before it: only
                    // a lost reply then leaves the node's ownership untold.
                    Ok(None) => {
                        debug!(path = %inner.path, "create marker refused by the node's ACL: creating without one");
                        inner.marker_refused.store(true, std::sync::atomic::Ordering::Relaxed);
                        continue;
                    }
                    Err(e) => Err(e),
                }
            }
        };
        match created {
            Ok((czxid, sequence)) => {
                let path = match sequence {
                    Some(sequence) if inner.mode.is_sequential() => format!("{}{sequence}", inner.path),
                    _ => inner.path.clone(),
                };
                if let Some(marker) = &marker {
                    inner.unknown_create.lock().take();
                    forget_marker(client, marker, deadline).await;
                }
                return Created::Node(OurNode { path, czxid, session, ours: true, marker });
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
                let found =
                    tokio::time::timeout_at(until.into(), existing(inner, &zk, session, &fixed, &bytes, adoptable));
                let found = found.await.unwrap_or(Created::Again { pause: false });
                if matches!(found, Created::Node(_)) {
                    inner.unknown_create.lock().take();
                }
                return found;
            }
            Err(e) => {
                let e = Error::zk(&inner.path, e);
                if !inner.mode.is_sequential() && matches!(e.kind(), ErrorKind::Retryable | ErrorKind::SessionLost) {
                    if let Some(marker) = marker {
                        // Unknown outcome: its marker tells, at the next create or on close,
                        // whether it made the node (the node at the path is someone else's
                        // otherwise).
                        *inner.unknown_create.lock() = Some(marker);
                    } else if inner.mode.is_ephemeral() && !inner.started() {
                        // Unknown outcome, closed meanwhile: a node of this session at the path
                        // is ours (else the next create's NodeExists finds it).
                        drop(client.delete_on_drop(DeleteTarget::OwnedBy { path: fixed.clone(), owner: session.id }));
                    }
                }
                return refused(e);
            }
        }
    }
}

/// Creates the node at `fixed` with its create marker `marker` (an EPHEMERAL child, one
/// transaction: the same zxid); the node's czxid, or `None` when only the marker was refused
/// `NoAuth` (the node's ACL: nothing made). A `NoAuth` refusing the node itself (its parent's
/// ACL) is an error, as for an unmarked create: it says nothing about markers.
async fn create_marked(
    client: &CuratorClient,
    zk: &zk::Client,
    fixed: &str,
    bytes: &[u8],
    options: &zk::CreateOptions<'_>,
    marker: &str,
) -> std::result::Result<Option<i64>, zk::Error> {
    let acls = client.raw_acls_for(marker);
    let marker_options = zk::CreateMode::Ephemeral.with_acls(zk::Acls::new(&acls));
    let mut writer = zk.new_multi_writer();
    writer.add_create(fixed, bytes, options)?;
    writer.add_create(marker, &[], &marker_options)?;
    let results = match writer.commit().await {
        Ok(results) => results,
        Err(zk::MultiWriteError::OperationFailed { index: 1, source: zk::Error::NoAuth }) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let stat = results.iter().find_map(|r| match r {
        zk::MultiWriteResult::Create { stat, .. } if !stat.is_invalid() => Some(stat.czxid),
        _ => None,
    });
    let czxid = match stat {
        Some(czxid) => czxid,
        // Servers that answer a multi's create without its stat: the marker's own stat.
        None => zk.check_stat(marker).await?.map(|s| s.czxid).ok_or(zk::Error::NoNode)?,
    };
    Ok(Some(czxid))
}

/// Whether a create with `marker` made the node now at `fixed`: its czxid if so. The marker
/// (an EPHEMERAL child made with the node) is there only if the create happened and its session
/// lives; a node at the path without it is not attributable to us.
async fn made_by(zk: &zk::Client, fixed: &str, marker: &str) -> std::result::Result<Option<i64>, zk::Error> {
    // One pipeline: the marker, then the node.
    let marker_stat = zk.check_stat(marker);
    let node_stat = zk.check_stat(fixed);
    let (marker_stat, node_stat) = (marker_stat.await?, node_stat.await?);
    Ok(match (marker_stat, node_stat) {
        (Some(m), Some(n)) if m.czxid == n.czxid => Some(n.czxid),
        _ => None,
    })
}

/// Deletes a create marker once the create's outcome is known (handed to the background queue
/// if that cannot be done now).
async fn forget_marker(client: &CuratorClient, marker: &str, deadline: Option<Instant>) {
    if let Err(e) = client.delete_fixed_guaranteed(marker, deadline).await {
        debug!(%e, %marker, "deleting the create marker: left to the background queue");
    }
}

/// The node exists at our (non-sequential) path: ours (a lost reply's create on this session,
/// or a persistent node, adopted with our data — ours to delete on close when `adoptable`), or
/// another session's ephemeral (waited for).
async fn existing(
    inner: &Inner,
    zk: &zk::Client,
    session: SessionIdentity,
    fixed: &str,
    bytes: &[u8],
    adoptable: bool,
) -> Created {
    let stat = match zk.check_stat(fixed).await {
        Ok(Some(stat)) => stat,
        // Gone meanwhile: create again.
        Ok(None) => return Created::Again { pause: false },
        Err(e) => {
            inner.create_error.send_replace(Some(Error::zk(&inner.path, e)));
            return Created::Again { pause: false };
        }
    };
    let node = OurNode { path: inner.path.clone(), czxid: stat.czxid, session, ours: true, marker: None };
    if !inner.mode.is_ephemeral() {
        if stat.ephemeral_owner != 0 {
            return foreign(inner, zk, fixed, stat.ephemeral_owner).await;
        }
        // Adopted (Curator's PersistentNode does so too): our data goes in. Found while a create
        // of ours had an unknown outcome that cannot be told to have made it: someone else's,
        // kept while started but never deleted by close.
        if let Err(e) = zk.set_data(fixed, bytes, None).await {
            inner.create_error.send_replace(Some(Error::zk(&inner.path, e)));
            return Created::Again { pause: false };
        }
        if !adoptable {
            debug!(path = %inner.path, "a node not told ours (made while a create's reply was lost): close leaves it");
        }
        return Created::Node(OurNode { ours: adoptable, ..node });
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
