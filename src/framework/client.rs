//! [`CuratorClient`]: Curator's `CuratorFramework` in Rust terms — one logical client that survives
//! session expiry, retries what is worth retrying, and owns the background work (guaranteed deletes).
//!
//! The work is split by job: [`builder`](super::builder) makes the configuration,
//! [`session`](super::session) supervises and replaces sessions, [`retry`](super::retry) holds the
//! policies and the loop, [`guaranteed_delete`](super::guaranteed_delete) the background queue. This
//! file ties them together and offers the recipes a few narrow methods.

use std::future::Future;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tracing::{debug, info};
use zookeeper_client as zk;

use super::acl;
use super::config::{ClientConfig, SessionConfig};
use super::guaranteed_delete::{DeleteOnDrop, DeleteOutcome, DeleteQueue, DeleteTarget, OwnedMark};
use super::paths;
use super::retry_loop::{retry_loop, Retrying};
use super::session::{SessionIdentity, Sessions, Status};
use super::state::{ConnectionState, ConnectionStateStream};
use crate::error::{Error, ErrorCode, ErrorKind, Result};

struct Inner {
    config: ClientConfig,
    sessions: Arc<Sessions>,
    deletes: DeleteQueue,
    /// The local queues of this client's guard-style locks, one per lock (see
    /// [`local_queue`](CuratorClient::local_queue)).
    local_queues: parking_lot::Mutex<LocalQueues>,
    /// The runtime the client was started on: its session and its delete queue run there, and so
    /// do the local queues' tasks while it runs (see [`runtime`](CuratorClient::runtime)).
    runtime: tokio::runtime::Handle,
}

/// What identifies one local queue: the driver's type, the lock path, the lock name, the data its
/// nodes carry and whether they are revocable (waiters that would make different nodes never
/// share one).
pub(crate) type LocalQueueKey = (std::any::TypeId, String, String, Vec<u8>, bool);

#[derive(Default)]
struct LocalQueues {
    queues: std::collections::HashMap<LocalQueueKey, std::sync::Weak<dyn std::any::Any + Send + Sync>>,
    /// Dead entries are swept when the map reaches this size (then twice the live ones).
    sweep_at: usize,
}

/// A ZooKeeper client with Curator's framework behaviour; cheap to clone (all clones share one
/// logical client).
///
/// * **Session recovery**: when the session expires (or stays disconnected too long, see
///   [`ConnectionState::Lost`]) the client emits `Lost`, opens a new session by itself and emits
///   [`ConnectionState::Reconnected`]. [`session`](Self::session) tells recipes which session they
///   are on.
/// * **Retries**: every operation (and [`raw::with_retry`](crate::raw::with_retry)) retries connection loss, operation timeouts and
///   session moves (including the disconnects `zookeeper-client` reports as `Error::Custom`) under the
///   configured [`RetryPolicy`](crate::RetryPolicy); a caller's deadline always wins.
/// * **Namespace**: every recipe path is prefixed with the namespace on the way out and stripped on
///   the way back.
/// * **Background work**: guaranteed deletes and clean-up of protected creates; [`close`](Self::close)
///   lets them finish (bounded) before closing the session.
#[derive(Clone)]
pub struct CuratorClient {
    inner: Arc<Inner>,
    /// This view's namespace: the builder's, or another one of
    /// [`using_namespace`](Self::using_namespace) (same session, same background work).
    namespace: Arc<super::paths::Namespace>,
}

impl std::fmt::Debug for CuratorClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let status = self.inner.sessions.status_now();
        f.debug_struct("CuratorClient")
            .field("connect_string", &self.inner.sessions.connect_string())
            .field("namespace", &self.namespace.prefix())
            .field("state", &status.state)
            .field("session", &status.session)
            .finish()
    }
}

impl CuratorClient {
    pub(crate) async fn start(config: ClientConfig, session: SessionConfig) -> Result<CuratorClient> {
        let connect = session.connect_string.clone();
        #[allow(unused_mut)]
        let mut schemes: Vec<String> = session.credentials.iter().map(|c| c.scheme.clone()).collect();
        // SASL is named like an authorization scheme (the server's `sasl`), never its user.
        #[cfg(feature = "sasl")]
        if session.sasl.is_some() {
            schemes.push("sasl".to_string());
        }
        #[cfg(feature = "tls")]
        let tls = session.tls.is_some();
        #[cfg(not(feature = "tls"))]
        let tls = false;
        let sessions = Sessions::open(session).await.map_err(|source| Error::Connect {
            connect,
            schemes,
            tls,
            code: ErrorCode::of(&source),
            detail: crate::error::ErrorDetail::of(source),
        })?;
        Ok(Self::assemble(config, sessions))
    }

    /// The client of [`CuratorClientBuilder::start`](crate::CuratorClientBuilder::start): no session yet, one being opened.
    pub(crate) fn start_in_background(config: ClientConfig, session: SessionConfig) -> CuratorClient {
        Self::assemble(config, Sessions::open_in_background(session))
    }

    fn assemble(config: ClientConfig, sessions: Arc<Sessions>) -> CuratorClient {
        crate::metrics::describe();
        let (deletes, worker) = DeleteQueue::new();
        let runtime = tokio::runtime::Handle::current();
        let namespace = Arc::new(config.namespace.clone());
        let inner = Arc::new(Inner { config, sessions, deletes, local_queues: Default::default(), runtime });
        let weak = Arc::downgrade(&inner);
        let background_namespace = namespace.clone();
        tokio::spawn(worker.run(move |target| {
            let inner = weak.upgrade()?;
            let namespace = background_namespace.clone();
            Some(async move { CuratorClient { inner, namespace }.delete_target(target).await })
        }));
        CuratorClient { inner, namespace }
    }

    /// Waits until the client is connected (Curator's `blockUntilConnected`), at most `timeout` (a
    /// [`Duration`] or an instant, see [`Deadline`](crate::Deadline)): `Ok(true)` once it is,
    /// `Ok(false)` if the time ran out first — as Curator's `boolean`.
    ///
    /// # Errors
    /// [`Error::Closed`] once the client is closed (before or while waiting): it never connects
    /// again.
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn example() -> zk_curator::Result<()> {
    /// use std::time::Duration;
    /// use zk_curator::CuratorClient;
    ///
    /// // Starts even if ZooKeeper is down; connects when it comes up.
    /// let client = CuratorClient::builder("127.0.0.1:2181").start()?;
    /// if !client.block_until_connected(Duration::from_secs(5)).await? {
    ///     eprintln!("ZooKeeper not reachable yet; requests will wait for it");
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn block_until_connected(&self, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let deadline = timeout.into().instant_from(std::time::Instant::now());
        let mut status = self.inner.sessions.status();
        let waited = tokio::time::timeout_at(deadline.into(), async {
            // A dropped sender: the client is gone, as closed.
            status.wait_for(|s| s.connected || s.closed).await.map(|s| !s.closed).unwrap_or(false)
        })
        .await;
        match waited {
            Ok(true) => Ok(true),
            Ok(false) => Err(Error::Closed { path: String::new() }),
            Err(_) => Ok(false),
        }
    }

    /// Which connection states the recipes treat as errors (set by
    /// [`CuratorClientBuilder::connection_state_error_policy`](crate::CuratorClientBuilder::connection_state_error_policy)).
    pub fn connection_state_error_policy(&self) -> crate::framework::ConnectionStateErrorPolicy {
        self.inner.config.error_policy
    }

    /// The current connection state.
    pub fn connection_state(&self) -> ConnectionState {
        self.inner.sessions.status_now().state
    }

    /// True when requests are currently being served.
    pub fn is_connected(&self) -> bool {
        self.inner.sessions.status_now().connected
    }

    /// A new subscription to connection states: the current state first, then every change.
    /// Any number may exist; none can block another or the client (see
    /// [`ConnectionStateStream`] for what a subscriber that falls far behind sees).
    pub fn connection_states(&self) -> ConnectionStateStream {
        self.inner.sessions.subscribe()
    }

    /// The session this client is on now. Changes after [`ConnectionState::Lost`].
    pub fn session(&self) -> SessionIdentity {
        self.inner.sessions.session()
    }

    /// The earliest instant at which the server can expire `session` (e.g. a lock's
    /// [`Hold::session`](crate::locks::Hold::session)) and so let another process take its locks, as far
    /// as this client can tell: `Some` while that session's connection is suspended (or served by
    /// a read-only server, which cannot renew it), and after the client gave the session up for
    /// that (LOST), until another session is given up — counted from the latest moment the last
    /// reply can have arrived, so LOST comes (100 − [`simulated_session_expiration_percent`](crate::CuratorClientBuilder::simulated_session_expiration_percent))%
    /// of the session timeout before it (15% by default). `None` while
    /// connected, for other sessions, and once the server ended the session (it may already be
    /// expired). Assumes the server that expires the session heard from us no later than we
    /// heard from it; see [docs/failure-semantics.md](crate::guide::failure_semantics) for when that fails.
    pub fn earliest_expiry(&self, session: SessionIdentity) -> Option<Instant> {
        self.inner.sessions.earliest_expiry(session)
    }

    /// True when `other` is this client or a clone of it (one logical client, one session at a
    /// time).
    pub(crate) fn is_same_client(&self, other: &CuratorClient) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// ZooKeeper's id of the current session.
    pub fn session_id(&self) -> i64 {
        self.session().id
    }

    /// The session timeout the server granted for the current session.
    pub fn negotiated_session_timeout(&self) -> Duration {
        self.inner.sessions.negotiated_timeout()
    }

    /// The namespace prefix (`/ns`), or `""`.
    pub fn namespace(&self) -> &str {
        self.namespace.prefix()
    }

    /// A view of this client whose paths are under `namespace` (Curator's `usingNamespace`):
    /// the same session, connection states, retry policy and background work, another prefix.
    /// `""` is no namespace (the root). Recipes built on the view work within it. Its node is
    /// made (as a container) by the view's first create that finds it missing, as the builder's
    /// [`namespace`](crate::CuratorClientBuilder::namespace) is.
    ///
    /// The view is the client: [`close`](Self::close) of a view closes the client and all its
    /// views (Curator's facade refuses `close()`); a view is a handle as a clone is: dropping it
    /// ends nothing while another handle of the client lives.
    ///
    /// The namespace replaces this client's (it does not nest): `using_namespace("b")` of a client
    /// in `a` works under `/b`; say `"a/b"` for `/a/b`.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] naming the namespace as given when `/` + `namespace` is not a valid
    /// path (`"/a"`, `"a/"`, `"a//b"`, `"a/./b"`, a control character) — as Curator, which
    /// takes the namespace without its leading slash; also for `"zookeeper"` or below it
    /// (ZooKeeper's reserved subtree, which Curator would let the view write into).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// let billing = client.using_namespace("billing")?;
    /// // Creates /billing (lazily, as a container) and /billing/invoices.
    /// billing.create("/invoices").await?;
    /// assert!(client.exists("/billing/invoices").await?.is_some());
    /// # Ok(()) }
    /// ```
    pub fn using_namespace(&self, namespace: &str) -> Result<CuratorClient> {
        let namespace = super::paths::Namespace::strict(namespace)?;
        Ok(CuratorClient { inner: self.inner.clone(), namespace: Arc::new(namespace) })
    }

    /// Makes this view's namespace node (and its missing ancestors) as containers (Curator's
    /// `EnsureContainers`), for a create that failed with NoNode: true when the view has a
    /// namespace (the create is worth one more try). Asked on every such failure rather than
    /// once per client as Curator does: the server reaps an emptied container namespace, and a
    /// later create must not fail for it.
    pub(crate) async fn ensure_namespace(&self, deadline: Option<Instant>) -> Result<bool> {
        let prefix = self.namespace.prefix();
        if prefix.is_empty() {
            return Ok(false);
        }
        match self.create_parents_as(prefix, deadline, true).await {
            Ok(()) => Ok(true),
            Err(e) if e.is(ErrorCode::NoNode) => Ok(true),
            Err(e) => Err(e),
        }
    }

    /// True when the data API compresses and decompresses by default (set by
    /// [`CuratorClientBuilder::enable_compression`](crate::CuratorClientBuilder::enable_compression)).
    pub fn compression_enabled(&self) -> bool {
        self.inner.config.compression
    }

    /// The data written into lock nodes when a recipe is given none.
    pub fn default_data(&self) -> &[u8] {
        &self.inner.config.default_data
    }

    /// The largest node data this client sends, in bytes (see
    /// [`CuratorClientBuilder::max_data_size`](crate::CuratorClientBuilder::max_data_size)).
    pub fn max_data_size(&self) -> usize {
        self.inner.config.max_data_size
    }

    /// Refuses `len` bytes of node data (the argument `name`: `"data"`, a latch's `"id"`) for
    /// `path` when over [`max_data_size`](Self::max_data_size): the one check every entry point
    /// that sends data makes, before sending anything.
    /// The (namespace-fixed) path counts too: data and path together must fit in one request
    /// the server reads.
    pub(crate) fn check_data_size(&self, name: &'static str, path: &str, len: usize) -> Result<()> {
        let rest = self.namespace.fix(path).len().saturating_add(super::limits::OPERATION_OVERHEAD);
        super::limits::check_request_size(self.max_data_size(), name, path, len, rest)
    }

    /// Refuses a path that (namespace included) does not fit into one request the server reads
    /// (the client's max data size + 4 KiB): sent, it would make the server drop the connection.
    pub(crate) fn check_path_size(&self, path: &str, fixed: &str) -> Result<()> {
        let limit = self.max_data_size().saturating_add(super::limits::REST_OF_REQUEST);
        if fixed.len().saturating_add(super::limits::OPERATION_OVERHEAD) <= limit {
            return Ok(());
        }
        Err(Error::InvalidPath {
            path: path.to_string(),
            reason: "too long for one request (with the namespace, over the client's max data size + 4 KiB)",
        })
    }

    /// The underlying handle of the current session ([`raw::client`](crate::raw::client)).
    pub(crate) fn raw_client(&self) -> Result<zk::Client> {
        if self.is_closed() {
            return Err(Error::Closed { path: String::new() });
        }
        match self.inner.sessions.current() {
            Some((zk, _)) => Ok(zk),
            None => Err(Error::code_on("", ErrorCode::ConnectionLoss)),
        }
    }

    /// A share in keeping `session` open while a hold granted on it lives (see
    /// [`SessionKeep`](super::session::SessionKeep)); `None` once it is not the current session.
    pub(crate) fn session_keep(&self, session: SessionIdentity) -> Option<Arc<super::session::SessionKeep>> {
        self.inner.sessions.keep(session)
    }

    /// True once [`close`](Self::close) has begun.
    pub fn is_closed(&self) -> bool {
        self.inner.sessions.is_closing()
    }

    /// Runs `op` against the current session, retrying retryable failures under the client's
    /// retry policy (Curator's `RetryLoop.callWithRetry`); public as
    /// [`raw::with_retry`](crate::raw::with_retry).
    ///
    /// Before each attempt it waits for a connection. Connection loss (including `zookeeper-client`'s
    /// `Custom` disconnect errors), operation timeouts, session moves and session expiry (a new session
    /// is opened by the client) are retried; everything else is returned at once. When `deadline`
    /// passes, the call stops with [`Error::DeadlineExceeded`] whatever the policy says.
    ///
    /// Only give it operations that are safe to repeat: a retried sequential create may create
    /// a second node.
    ///
    /// # Errors
    /// The last error, with the `path` it was about; [`Error::DeadlineExceeded`]; [`Error::Closed`]
    /// (also as soon as [`close`](Self::close) has begun).
    ///
    /// # Cancel safety
    /// As cancel safe as `op`: a dropped attempt may still be applied by the server.
    pub(crate) async fn with_retry<T, F, Fut>(&self, path: &str, deadline: Option<Instant>, op: F) -> Result<T>
    where
        F: FnMut(zk::Client) -> Fut,
        Fut: Future<Output = std::result::Result<T, zk::Error>>,
    {
        // Once close() has begun, new foreground operations are refused; only the background
        // deletes close() waits for (which call `retry_loop` directly) may still run.
        if self.is_closed() {
            return Err(Error::Closed { path: path.to_string() });
        }
        retry_loop(&self.inner.sessions, self.retry_policy(), path, deadline, op).await
    }

    /// [`with_retry`](Self::with_retry) for the background queue: also runs once close() has
    /// begun, so that close() can let pending deletes finish.
    pub(crate) async fn with_retry_in_background<T, F, Fut>(
        &self,
        path: &str,
        deadline: Option<Instant>,
        op: F,
    ) -> Result<T>
    where
        F: FnMut(zk::Client) -> Fut,
        Fut: Future<Output = std::result::Result<T, zk::Error>>,
    {
        retry_loop(&self.inner.sessions, self.retry_policy(), path, deadline, op).await
    }

    /// Deletes `path` now, retrying under the policy; if that fails with a retryable or
    /// session error the delete is handed to the background queue, which keeps trying until it
    /// succeeds or the node is gone (Curator's `delete().guaranteed()`). `NoNode` counts as success.
    ///
    /// # Errors
    /// The foreground failure (the background delete goes on). Non-retryable errors such as
    /// `NoAuth` or `NotEmpty` are returned and not queued.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call is queued for background deletion.
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// client.delete_guaranteed("/jobs/nightly/marker").await?;
    /// # Ok(()) }
    /// ```
    pub async fn delete_guaranteed(&self, path: &str) -> Result<()> {
        paths::validate_path(path)?;
        self.delete_fixed_guaranteed(&self.fix_path(path), None).await
    }

    /// Queues a background delete of `path` that keeps trying until it succeeds or the node is gone.
    /// The returned [`DeleteOutcome`] can be awaited for the result, or dropped.
    ///
    /// # Errors
    /// [`Error::InvalidPath`].
    pub fn delete_in_background(&self, path: &str) -> Result<DeleteOutcome> {
        paths::validate_path(path)?;
        Ok(self.delete_fixed_in_background(self.fix_path(path)))
    }

    /// Number of background deletes not finished yet.
    pub fn pending_background_deletes(&self) -> usize {
        self.inner.deletes.pending()
    }

    /// The runtime the client was started on, where its session and delete queue run: while it
    /// runs the client works, whichever other runtimes come and go or stop being driven.
    pub(crate) fn runtime(&self) -> &tokio::runtime::Handle {
        &self.inner.runtime
    }

    /// The local queue for `key`, shared by every lock instance of this client with that key while
    /// any of them uses it; `make` builds it when there is none.
    pub(crate) fn local_queue<T: std::any::Any + Send + Sync>(
        &self,
        key: LocalQueueKey,
        make: impl FnOnce() -> Arc<T>,
    ) -> Arc<T> {
        // Views of other namespaces share the map: the same path there is another lock.
        let mut key = key;
        key.1 = self.fix_path(&key.1);
        let mut local = self.inner.local_queues.lock();
        if let Some(queue) = local.queues.get(&key).and_then(std::sync::Weak::upgrade) {
            if let Ok(queue) = queue.downcast::<T>() {
                return queue;
            }
        }
        if local.queues.len() >= local.sweep_at {
            local.queues.retain(|_, queue| queue.strong_count() > 0);
            local.sweep_at = (local.queues.len() * 2).max(64);
        }
        let queue = make();
        let erased: Arc<dyn std::any::Any + Send + Sync> = queue.clone();
        local.queues.insert(key, Arc::downgrade(&erased));
        queue
    }

    /// Waits (at most until `deadline`) until no background delete is pending: a recipe closing
    /// after a dropped attempt waits for the node the attempt left.
    pub(crate) async fn wait_background_deletes(&self, deadline: Instant) {
        self.inner.deletes.wait_idle(deadline).await;
    }

    /// Closes the client: waits (at most the configured `max_close_wait`) for pending background
    /// deletes, then closes the session. Every later operation fails with [`Error::Closed`]; waiting
    /// acquires stop with that error. A session replacement still in flight is closed too.
    ///
    /// # Cancel safety
    /// Cancel safe: the client is marked closed at the first poll, and a close dropped before it
    /// finished goes on in the background (on the runtime it was dropped on; without one, or once
    /// that runtime shuts down, the sessions end at once, without waiting for pending deletes).
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo() -> zk_curator::Result<()> {
    /// let client = zk_curator::CuratorClient::connect("127.0.0.1:2181").await?;
    /// // ... use it ...
    /// client.close().await;
    /// # Ok(()) }
    /// ```
    pub async fn close(&self) {
        if !self.inner.sessions.begin_close() {
            return;
        }
        let deadline = crate::deadline::deadline_after(self.inner.config.max_close_wait);
        let mut rest = CloseRest { client: Some(self.clone()), deadline, in_background: false };
        self.inner.deletes.wait_idle(deadline).await;
        // From here on the sessions end at the first poll of `finish_close`.
        rest.client = None;
        self.inner.sessions.finish_close().await;
        info!("zk-curator client closed");
    }

    // ---- narrow methods for the recipes -------------------------------------------------------

    pub(crate) fn fix_path(&self, path: &str) -> String {
        self.namespace.fix(path)
    }

    pub(crate) fn unfix_path<'a>(&self, path: &'a str) -> &'a str {
        self.namespace.unfix(path)
    }

    /// The ACL of the node at `fixed_path` (namespace included), from the ACL provider, in
    /// zookeeper-client's type.
    pub(crate) fn raw_acls_for(&self, fixed_path: &str) -> Vec<zk::Acl> {
        let provider = &self.inner.config.acl_provider;
        let acls = provider.acl_for_path(fixed_path);
        if acls.is_empty() {
            acl::to_raw(&provider.default_acl())
        } else {
            acl::to_raw(&acls)
        }
    }

    /// A receiver of the connection status (state, session, closed) for waiting on changes.
    pub(crate) fn status(&self) -> watch::Receiver<Status> {
        self.inner.sessions.status()
    }

    /// The connection status now.
    pub(crate) fn status_now(&self) -> Status {
        self.inner.sessions.status_now()
    }

    /// True once `session` is no longer this client's: replaced, given up (`Lost` — also while the
    /// replacement is not connected yet) or the client closed. The one "is my session still
    /// mine" check for recipes: comparing session identities alone misses `Lost`, since the
    /// identity changes only once the new session connects.
    pub(crate) fn session_ended(&self, session: SessionIdentity) -> bool {
        self.inner.sessions.status_now().has_ended(session)
    }

    /// The metrics labels of a lock of `recipe` on `path`, its `path` label made as this client's
    /// builder said ([`CuratorClientBuilder::metrics_path_label`](crate::CuratorClientBuilder::metrics_path_label)).
    pub(crate) fn lock_labels(&self, recipe: crate::metrics::Recipe, path: &str) -> crate::metrics::LockLabels {
        #[cfg(feature = "metrics")]
        return crate::metrics::LockLabels::new(&self.inner.config.metrics_path_label, recipe, path);
        #[cfg(not(feature = "metrics"))]
        crate::metrics::LockLabels::new(recipe, path)
    }

    /// The metrics labels of a recipe instance of the other families (cache, nodes, counters,
    /// barriers, claims, queues) of `recipe` on `path`, the `path` label made as for locks.
    pub(crate) fn recipe_labels(&self, recipe: &'static str, path: &str) -> crate::metrics::RecipeLabels {
        #[cfg(feature = "metrics")]
        return crate::metrics::RecipeLabels::new(&self.inner.config.metrics_path_label, recipe, path);
        #[cfg(not(feature = "metrics"))]
        crate::metrics::RecipeLabels::new(recipe, path)
    }

    pub(crate) fn connection_timeout(&self) -> Duration {
        self.inner.sessions.connection_timeout()
    }

    pub(crate) fn retry_policy(&self) -> &dyn crate::RetryPolicy {
        &*self.inner.config.retry_policy
    }

    /// Retry bookkeeping for a recipe's own loop under the client's policy.
    pub(crate) fn retrying<'a>(&'a self, path: &'a str, deadline: Option<Instant>) -> Retrying<'a> {
        Retrying::new(self.retry_policy(), path, deadline)
    }

    /// Waits for a connection as one step of `retrying`'s operation (see
    /// [`Retrying::connected`]): a wait that ends without one is retried under the policy, so the
    /// operation rides out a cut as [`with_retry`](Self::with_retry) does. The wait for a
    /// foreground operation of a recipe's own loop.
    pub(crate) async fn connected_retrying(
        &self,
        retrying: &mut Retrying<'_>,
    ) -> Result<(zk::Client, SessionIdentity)> {
        retrying.connected(&self.inner.sessions).await
    }

    /// [`connected_retrying`](Self::connected_retrying) for work that stands on `session` (a
    /// hold's, a claim's): the handle while that session is the current one, `Ok(None)` as soon
    /// as it has ended for the client (given up, or replaced) — at once, not once the next session
    /// connects or the policy gives up. A closed client is [`Error::Closed`].
    pub(crate) async fn connected_retrying_on(
        &self,
        retrying: &mut Retrying<'_>,
        session: SessionIdentity,
    ) -> Result<Option<zk::Client>> {
        let mut status = self.status();
        let ended = async {
            if status.wait_for(|s| !s.closed && s.has_ended(session)).await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            biased;
            () = ended => Ok(None),
            connected = self.connected_retrying(retrying) => {
                let (zk, now) = connected?;
                Ok((now == session).then_some(zk))
            }
        }
    }

    /// Waits for a connection (at most the connection timeout, never past `deadline`) and returns
    /// the handle together with the identity of the session it belongs to; past the connection
    /// timeout, a retryable `ConnectionLoss`. A foreground operation waits with
    /// [`connected_retrying`](Self::connected_retrying) instead, or it gives up after one
    /// connection timeout, outside the retry policy; this single wait is for loops with their own
    /// bound (a single attempt, a background task that retries for ever).
    pub(crate) async fn connected(
        &self,
        path: &str,
        deadline: Option<Instant>,
    ) -> Result<(zk::Client, SessionIdentity)> {
        self.inner.sessions.connected(path, deadline).await
    }

    /// A guard that deletes `target` in the background unless disarmed.
    pub(crate) fn delete_on_drop(&self, target: DeleteTarget) -> DeleteOnDrop<'_> {
        self.inner.deletes.on_drop(target)
    }

    pub(crate) fn delete_fixed_in_background(&self, fixed: String) -> DeleteOutcome {
        self.delete_target_in_background(DeleteTarget::Node(fixed))
    }

    /// Queues the delete of `target` in the background.
    pub(crate) fn delete_target_in_background(&self, target: DeleteTarget) -> DeleteOutcome {
        self.inner.deletes.enqueue(target)
    }

    /// Deletes a namespace-fixed path now (until `deadline`), handing it to the background queue
    /// when the outcome is unknown (connection trouble, deadline, closing, cancellation).
    pub(crate) async fn delete_fixed_guaranteed(&self, fixed: &str, deadline: Option<Instant>) -> Result<()> {
        self.delete_target_guaranteed(DeleteTarget::Node(fixed.to_string()), deadline).await
    }

    /// [`delete_fixed_guaranteed`](Self::delete_fixed_guaranteed) of a [`DeleteTarget::Node`] or
    /// [`DeleteTarget::Owned`] (a node of a fixed name, deleted only while it is ours).
    pub(crate) async fn delete_target_guaranteed(&self, target: DeleteTarget, deadline: Option<Instant>) -> Result<()> {
        let (fixed, owner) = match &target {
            DeleteTarget::Owned { path, session, mark } => (path.clone(), Some((*session, mark.clone()))),
            DeleteTarget::Node(path) | DeleteTarget::Tree { path, .. } => (path.clone(), None),
            DeleteTarget::Protected { parent, .. } => (parent.clone(), None),
            // Conditional deletes of their own: never a plain delete of the path.
            DeleteTarget::Created { path, czxid } => {
                return self.delete_created_guaranteed(path, *czxid, deadline).await;
            }
            DeleteTarget::Marked { path, marker, czxid } => {
                let mut fallback = self.delete_on_drop(target.clone());
                let result = self.delete_marked(path, marker, czxid, deadline).await;
                if !matches!(&result, Err(e) if matches!(
                    e.kind(),
                    ErrorKind::Retryable | ErrorKind::SessionLost | ErrorKind::Closed | ErrorKind::DeadlineExceeded
                )) {
                    fallback.disarm();
                }
                return result;
            }
            DeleteTarget::OwnedBy { .. } => {
                let mut fallback = self.delete_on_drop(target.clone());
                let DeleteTarget::OwnedBy { path, owner } = &target else { return Ok(()) };
                let result = self.delete_fixed_if(path, deadline, |stat| stat.ephemeral_owner == *owner).await;
                if !matches!(&result, Err(e) if matches!(
                    e.kind(),
                    ErrorKind::Retryable | ErrorKind::SessionLost | ErrorKind::Closed | ErrorKind::DeadlineExceeded
                )) {
                    fallback.disarm();
                }
                return result;
            }
        };
        let path = self.unfix_path(&fixed).to_string();
        // If this future is dropped mid-way, the queue takes over.
        let mut fallback = self.delete_on_drop(target);
        let (f, owner) = (fixed.as_str(), owner.as_ref());
        let result = self
            .with_retry(&path, deadline, |zk| async move {
                match owner {
                    Some((session, mark)) => delete_if_owned(&zk, f, *session, mark).await,
                    None => zk.delete(f, None).await,
                }
            })
            .await;
        match result {
            Ok(()) | Err(Error::ZooKeeper { code: ErrorCode::NoNode, .. }) => {
                fallback.disarm();
                Ok(())
            }
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::Retryable | ErrorKind::SessionLost | ErrorKind::Closed | ErrorKind::DeadlineExceeded
                ) =>
            {
                Err(e)
            }
            Err(e) => {
                fallback.disarm();
                Err(e)
            }
        }
    }

    /// Deletes the node at the namespace-fixed path `fixed` while `ours` says its stat is ours
    /// (the node a recipe created; one re-created at the path since, by anyone, is left alone):
    /// reads its stat and deletes that very version, again if it changed meanwhile. `Ok` when the
    /// node is gone or not ours. Runs also once close() has begun (the background queue uses it).
    pub(crate) async fn delete_fixed_if(
        &self,
        fixed: &str,
        deadline: Option<Instant>,
        ours: impl Fn(&zk::Stat) -> bool,
    ) -> Result<()> {
        let path = self.unfix_path(fixed).to_string();
        let sessions = &self.inner.sessions;
        let policy = self.retry_policy();
        loop {
            let stat =
                retry_loop(sessions, policy, &path, deadline, |zk| async move { zk.check_stat(fixed).await }).await?;
            let Some(stat) = stat.filter(|stat| ours(stat)) else { return Ok(()) };
            let version = stat.version;
            let deleted =
                retry_loop(
                    sessions,
                    policy,
                    &path,
                    deadline,
                    |zk| async move { zk.delete(fixed, Some(version)).await },
                )
                .await;
            match deleted {
                Ok(()) | Err(Error::ZooKeeper { code: ErrorCode::NoNode, .. }) => return Ok(()),
                // Its data changed since the read (or a lost reply's retry): look again.
                Err(Error::ZooKeeper { code: ErrorCode::BadVersion, .. }) => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Deletes a [`DeleteTarget::Marked`] node: when `czxid` is 0 (the create's outcome unknown)
    /// its marker child tells whether the create happened and at which zxid (kept in `czxid`
    /// for later attempts); then the marker goes and the node, only while it is the one created
    /// at that zxid. `Ok` when it is gone or not ours (no marker: not ours to tell).
    pub(crate) async fn delete_marked(
        &self,
        fixed: &str,
        marker: &str,
        czxid: &AtomicI64,
        deadline: Option<Instant>,
    ) -> Result<()> {
        let path = self.unfix_path(fixed).to_string();
        let sessions = &self.inner.sessions;
        let policy = self.retry_policy();
        if czxid.load(Ordering::SeqCst) == 0 {
            let found =
                retry_loop(sessions, policy, &path, deadline, |zk| async move { zk.check_stat(marker).await }).await?;
            let Some(found) = found else {
                debug!(%path, "no create marker: the create did not happen, or cannot be told ours; left alone");
                return Ok(());
            };
            let _ = czxid.compare_exchange(0, found.czxid, Ordering::SeqCst, Ordering::SeqCst);
        }
        let ours = czxid.load(Ordering::SeqCst);
        match retry_loop(sessions, policy, &path, deadline, |zk| async move { zk.delete(marker, None).await }).await {
            Ok(()) | Err(Error::ZooKeeper { code: ErrorCode::NoNode, .. }) => {}
            Err(e) => return Err(e),
        }
        self.delete_fixed_if(fixed, deadline, |stat| stat.czxid == ours).await
    }

    /// [`delete_fixed_if`](Self::delete_fixed_if) for a recipe's own node, the node created at
    /// `czxid`, until `deadline`; when its outcome is unknown (connection trouble, deadline,
    /// cancellation) the delete is handed to the background queue, which keeps trying.
    pub(crate) async fn delete_created_guaranteed(
        &self,
        fixed: &str,
        czxid: i64,
        deadline: Option<Instant>,
    ) -> Result<()> {
        let mut fallback = self.delete_on_drop(DeleteTarget::Created { path: fixed.to_string(), czxid });
        let result = self.delete_fixed_if(fixed, deadline, |stat| stat.czxid == czxid).await;
        if !matches!(&result, Err(e) if matches!(
            e.kind(),
            ErrorKind::Retryable | ErrorKind::SessionLost | ErrorKind::Closed | ErrorKind::DeadlineExceeded
        )) {
            fallback.disarm();
        }
        result
    }

    /// Creates every missing ancestor of (and including) the *fixed* path `dir`, as CONTAINER nodes
    /// with empty data unless containers are disabled (Curator's `ZKPaths.mkdirs(.., asContainers)`).
    /// Walks up with `exists` first so no READ permission is needed above the deepest existing node.
    pub(crate) async fn create_parents(&self, dir: &str, deadline: Option<Instant>) -> Result<()> {
        self.create_parents_as(dir, deadline, true).await
    }

    /// The mode of the parents [`create_parents`](Self::create_parents) makes: CONTAINER unless
    /// the client was built without containers.
    pub(crate) fn parent_mode(&self) -> zk::CreateMode {
        if self.inner.config.use_containers {
            zk::CreateMode::Container
        } else {
            zk::CreateMode::Persistent
        }
    }

    /// [`create_parents`](Self::create_parents), as PERSISTENT nodes unless `containers` (and
    /// the client uses containers).
    pub(crate) async fn create_parents_as(&self, dir: &str, deadline: Option<Instant>, containers: bool) -> Result<()> {
        // An empty container ancestor may be reaped by the server between the walk and the
        // creates (its child gone, e.g. with an expired session): walk again, a bounded number of
        // times.
        const REAPED_RETRIES: usize = 8;
        let mut reaped = 0;
        'walk: loop {
            let mut missing = Vec::new();
            let mut cur = dir.to_string();
            while cur != "/" && !cur.is_empty() {
                let c = cur.as_str();
                if self.with_retry(c, deadline, |zk| async move { zk.check_stat(c).await }).await?.is_some() {
                    break;
                }
                let up = paths::parent(&cur).to_string();
                missing.push(std::mem::replace(&mut cur, up));
            }
            let mode = if containers { self.parent_mode() } else { zk::CreateMode::Persistent };
            for dir in missing.iter().rev() {
                let acls = self.raw_acls_for(dir);
                let options = &mode.with_acls(zk::Acls::new(&acls));
                let made = self.with_retry(dir, deadline, |zk| async move { zk.create(dir, &[], options).await }).await;
                match made {
                    Ok(_) | Err(Error::ZooKeeper { code: ErrorCode::NodeExists, .. }) => {}
                    Err(Error::ZooKeeper { code: ErrorCode::NoNode, .. }) if reaped < REAPED_RETRIES => {
                        reaped += 1;
                        continue 'walk;
                    }
                    Err(e) => return Err(e),
                }
            }
            return Ok(());
        }
    }

    /// One attempt of the background queue at `target` (retrying under the policy, ignoring
    /// `closing` so that close() can let pending deletes finish).
    async fn delete_target(&self, target: DeleteTarget) -> Result<()> {
        let sessions = &self.inner.sessions;
        let policy = self.retry_policy();
        let delete = |fixed: String| async move {
            let path = self.unfix_path(&fixed).to_string();
            let f = fixed.as_str();
            match retry_loop(sessions, policy, &path, None, |zk| async move { zk.delete(f, None).await }).await {
                Ok(()) | Err(Error::ZooKeeper { code: ErrorCode::NoNode, .. }) => Ok(()),
                Err(e) => Err(e),
            }
        };
        match target {
            DeleteTarget::Node(fixed) => delete(fixed).await,
            DeleteTarget::Owned { path: fixed, session, mark } => {
                let path = self.unfix_path(&fixed).to_string();
                let (f, mark) = (fixed.as_str(), &mark);
                let deleted = retry_loop(sessions, policy, &path, None, |zk| async move {
                    delete_if_owned(&zk, f, session, mark).await
                });
                match deleted.await {
                    Ok(()) | Err(Error::ZooKeeper { code: ErrorCode::NoNode, .. }) => Ok(()),
                    Err(e) => Err(e),
                }
            }
            DeleteTarget::Tree { path: fixed, czxid } => {
                let path = self.unfix_path(&fixed).to_string();
                // Only the node the delete was for: one re-created at the path since (by
                // anyone) is not ours to delete, nor is anything under it.
                let f = fixed.as_str();
                let stat =
                    retry_loop(sessions, policy, &path, None, |zk| async move { zk.check_stat(f).await }).await?;
                let Some(stat) = stat else { return Ok(()) };
                match czxid.compare_exchange(0, stat.czxid, Ordering::SeqCst, Ordering::SeqCst) {
                    Ok(_) => {}
                    Err(ours) if ours == stat.czxid => {}
                    Err(ours) => {
                        debug!(%path, ours, theirs = stat.czxid, "re-created since the delete was queued: left alone");
                        return Ok(());
                    }
                }
                let mut rounds = 0;
                loop {
                    self.delete_children(&path, &fixed, None, true).await?;
                    match delete(fixed.clone()).await {
                        // A child appeared after the walk: empty the node again.
                        Err(e) if e.is(ErrorCode::NotEmpty) && rounds < super::operations::DELETE_CHILDREN_ROUNDS => {
                            rounds += 1;
                        }
                        done => return done,
                    }
                }
            }
            DeleteTarget::Created { path: fixed, czxid } => {
                self.delete_fixed_if(&fixed, None, |stat| stat.czxid == czxid).await
            }
            DeleteTarget::OwnedBy { path: fixed, owner } => {
                self.delete_fixed_if(&fixed, None, |stat| stat.ephemeral_owner == owner).await
            }
            DeleteTarget::Marked { path: fixed, marker, czxid } => {
                self.delete_marked(&fixed, &marker, &czxid, None).await
            }
            DeleteTarget::Protected { parent, prefix } => {
                let path = self.unfix_path(&parent).to_string();
                let p = parent.as_str();
                let children = match retry_loop(
                    sessions,
                    policy,
                    &path,
                    None,
                    |zk| async move { zk.list_children(p).await },
                )
                .await
                {
                    Ok(children) => children,
                    Err(Error::ZooKeeper { code: ErrorCode::NoNode, .. }) => return Ok(()),
                    Err(e) => return Err(e),
                };
                for child in children.iter().filter(|c| c.starts_with(&prefix)) {
                    debug!(parent = %path, %child, "deleting protected node whose create was abandoned");
                    delete(paths::join(&parent, child)).await?;
                }
                Ok(())
            }
        }
    }
}

/// Deletes the node at `fixed` through a handle of `session` only, and only if it is the ephemeral
/// node of `session` that `mark` names (see [`DeleteTarget::Owned`]); a node of someone else, one
/// our session made since, or one whose session is not the handle's (it goes with its session),
/// is left alone.
async fn delete_if_owned(
    zk: &zk::Client,
    fixed: &str,
    session: i64,
    mark: &OwnedMark,
) -> std::result::Result<(), zk::Error> {
    if zk.session_id().0 != session {
        return Ok(());
    }
    let (data, stat) = match mark {
        OwnedMark::Held { sent, .. } if !sent.swap(true, Ordering::SeqCst) => {
            // A node we hold, on its own session, no delete of it sent yet: ours unless an
            // operator deleted it.
            return zk.delete(fixed, None).await;
        }
        _ => zk.get_data(fixed).await?,
    };
    let ours = stat.ephemeral_owner == session
        && match mark {
            OwnedMark::Data(token) => data == *token,
            // An earlier delete may have removed ours and our session re-created the path since.
            OwnedMark::Held { czxid, .. } => stat.czxid == *czxid,
        };
    if !ours {
        debug!(path = %fixed, "a node of the same name that is not ours: left alone");
        return Ok(());
    }
    // Only our session's end (which fails this request) or a delete by someone else can remove
    // it before this runs.
    zk.delete(fixed, Some(stat.version)).await
}

/// The rest of a [`CuratorClient::close`] dropped before it ended the sessions: when dropped
/// still armed, it goes on in the background on the current runtime — or, without one (or when
/// that background task is itself dropped, e.g. with its runtime), ends the sessions at once.
struct CloseRest {
    client: Option<CuratorClient>,
    deadline: Instant,
    /// Set for the background task's own guard: it never spawns again.
    in_background: bool,
}

impl Drop for CloseRest {
    fn drop(&mut self) {
        let Some(client) = self.client.take() else { return };
        let deadline = self.deadline;
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) if !self.in_background => {
                drop(runtime.spawn(async move {
                    let mut rest = CloseRest { client: Some(client.clone()), deadline, in_background: true };
                    client.inner.deletes.wait_idle(deadline).await;
                    rest.client = None;
                    client.inner.sessions.finish_close().await;
                    info!("zk-curator client closed (in the background)");
                }));
            }
            _ => {
                drop(client.inner.sessions.end_now());
            }
        }
    }
}
