//! [`CuratorClient`]: Curator's `CuratorFramework` in Rust terms — one logical client that survives
//! session expiry, retries what is worth retrying, and owns the background work (guaranteed deletes).

use std::future::Future;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use tokio::sync::{broadcast, watch};
use tracing::{debug, info, warn};
use zookeeper_client as zk;

use super::guaranteed_delete::{DeleteOutcome, DeleteQueue};
use super::paths::{self, Namespace};
use super::retry::{ExponentialBackoffRetry, RetryPolicy};
use super::state::{ConnectionState, ConnectionStateStream};
use crate::error::{Error, ErrorKind, Result};

/// Curator's default session timeout (`curator-default-session-timeout`).
pub const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(60);
/// Curator's default connection timeout (`curator-default-connection-timeout`).
pub const DEFAULT_CONNECTION_TIMEOUT: Duration = Duration::from_secs(15);
/// Curator's default `maxCloseWaitMs`.
pub const DEFAULT_MAX_CLOSE_WAIT: Duration = Duration::from_secs(1);

/// A suspended session is declared LOST at the latest this fraction of the negotiated session
/// timeout after the last reply the client can have received; see [`lost_after_suspended`].
pub(crate) const LOST_BY_FRACTION_OF_SESSION: f64 = 0.85;

/// `zookeeper-client`'s connection (and idle) timeout we ask for, as a fraction of the requested
/// session timeout: short enough to notice silence early and to leave room for several reconnect
/// attempts before LOST.
const ZK_CONNECTION_TIMEOUT_DIVISOR: u32 = 5;

/// How long after SUSPENDED the client declares LOST (Curator ≥ 3 "simulated expiration").
///
/// `zookeeper-client` reports a disconnect once nothing was received for its idle timeout, checked
/// every tick (idle/8). Its idle timeout is the connection timeout we configure (requested session
/// timeout / 5) unless that exceeds 3/5 of the negotiated timeout, in which case it is 2/5 of it.
/// So SUSPENDED comes at most `idle + tick` after the last reply, and LOST at most
/// `LOST_BY_FRACTION_OF_SESSION × negotiated` after it: before the server, which counts from the
/// last request it received, can expire the session and hand our locks to someone else.
pub(crate) fn lost_after_suspended(requested: Duration, negotiated: Duration) -> Duration {
    let configured = requested / ZK_CONNECTION_TIMEOUT_DIVISOR;
    let idle = if configured > negotiated * 3 / 5 { negotiated * 2 / 5 } else { configured };
    let tick = idle / 8;
    negotiated.mul_f64(LOST_BY_FRACTION_OF_SESSION).saturating_sub(idle + tick)
}

/// Which ZooKeeper session a node or an operation belongs to.
///
/// `epoch` counts the sessions this client has opened (1 for the first); `id` is the server's
/// session id. A lock node created under one identity is dead once the client's current identity
/// differs: its session expired and the client replaced it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SessionIdentity {
    /// The number of the session within this client, starting at 1.
    pub epoch: u64,
    /// ZooKeeper's session id.
    pub id: i64,
}

#[derive(Clone, Debug)]
pub(crate) struct Status {
    pub state: ConnectionState,
    pub connected: bool,
    pub session: SessionIdentity,
    pub closed: bool,
}

struct SessionSlot {
    zk: Option<zk::Client>,
    session: SessionIdentity,
}

pub(crate) struct ClientConfig {
    pub connect_string: String,
    pub session_timeout: Duration,
    pub connection_timeout: Duration,
    pub namespace: Namespace,
    pub retry_policy: Arc<dyn RetryPolicy>,
    pub default_data: Vec<u8>,
    pub acls: Option<Vec<zk::Acl>>,
    pub use_containers: bool,
    pub can_be_read_only: bool,
    pub max_close_wait: Duration,
}

pub(crate) struct Inner {
    pub(crate) config: ClientConfig,
    slot: RwLock<SessionSlot>,
    pub(crate) status: watch::Sender<Status>,
    events: broadcast::Sender<ConnectionState>,
    pub(crate) deletes: DeleteQueue,
    supervisor: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Set once `close()` begins: new foreground operations fail with `Closed`; background deletes
    /// may still finish.
    closing: std::sync::atomic::AtomicBool,
}

/// A ZooKeeper client with Curator's framework behaviour; cheap to clone (all clones share one
/// logical client).
///
/// * **Session recovery**: when the session expires (or stays disconnected past the negotiated
///   session timeout) the client emits [`ConnectionState::Lost`], opens a new session by itself and
///   emits [`ConnectionState::Reconnected`]. [`session`](Self::session) tells recipes which session
///   they are on.
/// * **Retries**: [`with_retry`](Self::with_retry) retries connection loss, operation timeouts and
///   session moves (including the disconnects `zookeeper-client` reports as `Error::Custom`) under the
///   configured [`RetryPolicy`]; a caller's deadline always wins.
/// * **Namespace**: every recipe path is prefixed with the namespace on the way out and stripped on
///   the way back.
/// * **Background work**: guaranteed deletes and clean-up of protected creates; [`close`](Self::close)
///   lets them finish (bounded) before closing the session.
#[derive(Clone)]
pub struct CuratorClient {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for CuratorClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let status = self.inner.status.borrow().clone();
        f.debug_struct("CuratorClient")
            .field("connect_string", &self.inner.config.connect_string)
            .field("namespace", &self.inner.config.namespace.prefix())
            .field("state", &status.state)
            .field("session", &status.session)
            .finish()
    }
}

/// Builds a [`CuratorClient`] (Curator's `CuratorFrameworkFactory.builder()`).
#[derive(Debug)]
pub struct CuratorClientBuilder {
    connect_string: String,
    session_timeout: Duration,
    connection_timeout: Duration,
    namespace: String,
    retry_policy: Arc<dyn RetryPolicy>,
    default_data: Option<Vec<u8>>,
    acls: Option<Vec<zk::Acl>>,
    use_containers: bool,
    can_be_read_only: bool,
    max_close_wait: Duration,
}

impl CuratorClientBuilder {
    fn new(connect_string: &str) -> Self {
        Self {
            connect_string: connect_string.to_string(),
            session_timeout: DEFAULT_SESSION_TIMEOUT,
            connection_timeout: DEFAULT_CONNECTION_TIMEOUT,
            namespace: String::new(),
            retry_policy: Arc::new(ExponentialBackoffRetry::new(Duration::from_millis(100), 3)),
            default_data: None,
            acls: None,
            use_containers: true,
            can_be_read_only: false,
            max_close_wait: DEFAULT_MAX_CLOSE_WAIT,
        }
    }

    /// Requested session timeout (the server negotiates it within its bounds). Default 60 s.
    pub fn session_timeout(mut self, timeout: Duration) -> Self {
        self.session_timeout = timeout;
        self
    }

    /// How long an operation waits for a connection before counting a failed attempt. Default 15 s.
    pub fn connection_timeout(mut self, timeout: Duration) -> Self {
        self.connection_timeout = timeout;
        self
    }

    /// Namespace prepended to every recipe path (`"app"` → `/app/...`); created lazily as a
    /// container node.
    pub fn namespace(mut self, namespace: &str) -> Self {
        self.namespace = namespace.to_string();
        self
    }

    /// The policy of [`CuratorClient::with_retry`]. Default: exponential back-off, 100 ms base, 3 retries.
    pub fn retry_policy(mut self, policy: impl RetryPolicy) -> Self {
        self.retry_policy = Arc::new(policy);
        self
    }

    /// Data written into lock nodes when a recipe is given none. Default, as in Curator: the local
    /// IP address as ASCII text.
    pub fn default_data(mut self, data: impl Into<Vec<u8>>) -> Self {
        self.default_data = Some(data.into());
        self
    }

    /// ACLs for every node this client creates. Default: open (`world:anyone`, all permissions).
    pub fn acls(mut self, acls: Vec<zk::Acl>) -> Self {
        self.acls = Some(acls);
        self
    }

    /// Create missing parents as PERSISTENT nodes instead of CONTAINER nodes (Curator's
    /// `dontUseContainerParents`).
    pub fn dont_use_container_parents(mut self) -> Self {
        self.use_containers = false;
        self
    }

    /// Allow read-only connections to a partitioned server (reported as [`ConnectionState::ReadOnly`]).
    pub fn can_be_read_only(mut self, allow: bool) -> Self {
        self.can_be_read_only = allow;
        self
    }

    /// How long [`CuratorClient::close`] waits for pending background deletes. Default 1 s.
    pub fn max_close_wait(mut self, wait: Duration) -> Self {
        self.max_close_wait = wait;
        self
    }

    /// Connects the first session and starts the client.
    ///
    /// Must be called inside a tokio runtime; the client's background tasks run on it.
    ///
    /// # Errors
    /// * [`Error::InvalidArgument`] / [`Error::InvalidPath`] for a bad connect string, timeout or namespace.
    /// * [`Error::Connect`] when no session could be established within the connection timeout.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future drops the half-made session, which closes it.
    pub async fn connect(self) -> Result<CuratorClient> {
        if self.connect_string.trim().is_empty() {
            return Err(Error::invalid_argument("connect_string", "\"\"", "must name at least one host"));
        }
        if self.session_timeout.is_zero() {
            return Err(Error::invalid_argument("session_timeout", "0s", "must be positive"));
        }
        if self.connection_timeout.is_zero() {
            return Err(Error::invalid_argument("connection_timeout", "0s", "must be positive"));
        }
        if let Some(acls) = &self.acls {
            if acls.is_empty() {
                return Err(Error::invalid_argument("acls", "[]", "must not be empty"));
            }
        }
        let namespace = Namespace::new(&self.namespace)?;
        let config = ClientConfig {
            connect_string: self.connect_string,
            session_timeout: self.session_timeout,
            connection_timeout: self.connection_timeout,
            namespace,
            retry_policy: self.retry_policy,
            default_data: self.default_data.unwrap_or_else(local_address_data),
            acls: self.acls,
            use_containers: self.use_containers,
            can_be_read_only: self.can_be_read_only,
            max_close_wait: self.max_close_wait,
        };
        let zk = open_session(&config)
            .await
            .map_err(|source| Error::Connect { connect: config.connect_string.clone(), source })?;
        let session = SessionIdentity { epoch: 1, id: zk.session_id().0 };
        let state = if zk.state() == zk::SessionState::ConnectedReadOnly {
            ConnectionState::ReadOnly
        } else {
            ConnectionState::Connected
        };
        let (status, _) = watch::channel(Status { state, connected: true, session, closed: false });
        let (events, _) = broadcast::channel(64);
        let (deletes, delete_jobs) = DeleteQueue::new();
        let inner = Arc::new(Inner {
            config,
            slot: RwLock::new(SessionSlot { zk: Some(zk.clone()), session }),
            status,
            events,
            deletes,
            supervisor: Mutex::new(None),
            closing: std::sync::atomic::AtomicBool::new(false),
        });
        info!(connect = %inner.config.connect_string, session = %zk.session_id(), "zk-curator client connected");
        let weak = Arc::downgrade(&inner);
        let supervisor = tokio::spawn(supervise(weak.clone(), zk.state_watcher()));
        *inner.supervisor.lock() = Some(supervisor);
        tokio::spawn(super::guaranteed_delete::run(weak, delete_jobs));
        Ok(CuratorClient { inner })
    }
}

async fn open_session(config: &ClientConfig) -> std::result::Result<zk::Client, zk::Error> {
    // zookeeper-client's connection timeout is also its idle timeout, which bounds how late a
    // disconnect is noticed; `lost_after_suspended` relies on that bound.
    let connector = zk::Client::connector()
        .with_session_timeout(config.session_timeout)
        .with_connection_timeout(config.session_timeout / ZK_CONNECTION_TIMEOUT_DIVISOR)
        .with_readonly(config.can_be_read_only);
    match tokio::time::timeout(config.connection_timeout, connector.connect(&config.connect_string)).await {
        Ok(result) => result,
        Err(_) => Err(zk::Error::Timeout),
    }
}

/// Curator's default node data: `InetAddress.getLocalHost().getHostAddress()` as ASCII.
fn local_address_data() -> Vec<u8> {
    use std::net::ToSocketAddrs;
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".to_string());
    let addrs: Vec<_> = (host.as_str(), 0).to_socket_addrs().map(|a| a.collect()).unwrap_or_default();
    addrs.iter().find(|a| a.is_ipv4()).or(addrs.first()).map(|a| a.ip().to_string().into_bytes()).unwrap_or_default()
}

/// Watches the current session and turns its events into Curator's connection states; replaces
/// the session when it is lost.
async fn supervise(client: Weak<Inner>, mut watcher: zk::StateWatcher) {
    let mut suspended_since: Option<Instant> = None;
    loop {
        let Some(inner) = client.upgrade() else { return };
        let session_timeout = inner.current_zk().map(|z| z.session_timeout()).unwrap_or(inner.config.session_timeout);
        let inner_config_timeout = inner.config.session_timeout;
        let mut status_rx = inner.status.subscribe();
        drop(inner);
        // Curator ≥ 3: a connection suspended for (about) the session timeout is LOST, even if the
        // server is unreachable and never says "expired"; we fire early enough that the holder of
        // a lock learns before the server can expire the session (see `lost_after_suspended`).
        let lost_delay = lost_after_suspended(inner_config_timeout, session_timeout);
        let lost_at = suspended_since.map(|since| since + lost_delay);
        let event = tokio::select! {
            state = watcher.changed() => Some(state),
            _ = sleep_until_opt(lost_at) => None,
            _ = status_rx.wait_for(|s| s.closed) => return,
        };
        let Some(inner) = client.upgrade() else { return };
        match event {
            Some(zk::SessionState::Disconnected) => {
                if suspended_since.is_none() {
                    suspended_since = Some(Instant::now());
                    inner.publish(ConnectionState::Suspended, false);
                }
            }
            Some(zk::SessionState::SyncConnected) => {
                if suspended_since.take().is_some() || inner.status.borrow().state == ConnectionState::ReadOnly {
                    inner.publish(ConnectionState::Reconnected, true);
                }
            }
            Some(zk::SessionState::ConnectedReadOnly) => {
                suspended_since = None;
                inner.publish(ConnectionState::ReadOnly, true);
            }
            Some(zk::SessionState::Closed) if inner.closing.load(std::sync::atomic::Ordering::SeqCst) => return,
            Some(state) => {
                warn!(?state, "zookeeper session ended; opening a new one");
                inner.publish(ConnectionState::Lost, false);
                suspended_since = None;
                match replace_session(&client).await {
                    Some(w) => watcher = w,
                    None => return,
                }
            }
            None => {
                warn!(?session_timeout, "connection suspended for the whole session timeout: session LOST");
                inner.publish(ConnectionState::Lost, false);
                suspended_since = None;
                match replace_session(&client).await {
                    Some(w) => watcher = w,
                    None => return,
                }
            }
        }
    }
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// Abandons the current session and opens a new one, retrying until it works or the client closes.
async fn replace_session(client: &Weak<Inner>) -> Option<zk::StateWatcher> {
    let mut backoff = Duration::from_millis(50);
    loop {
        let inner = client.upgrade()?;
        if inner.is_closing() {
            return None;
        }
        // Drop our handle on the old session first: the session closes once in-flight users let go.
        let old = inner.slot.write().zk.take();
        drop(old);
        match open_session(&inner.config).await {
            Ok(zk) => {
                let watcher = zk.state_watcher();
                let session = {
                    let mut slot = inner.slot.write();
                    let session = SessionIdentity { epoch: slot.session.epoch + 1, id: zk.session_id().0 };
                    slot.session = session;
                    slot.zk = Some(zk);
                    session
                };
                if inner.is_closing() {
                    return None;
                }
                info!(epoch = session.epoch, session = format!("{:#x}", session.id), "new zookeeper session");
                inner.status.send_modify(|s| s.session = session);
                inner.publish(ConnectionState::Reconnected, true);
                return Some(watcher);
            }
            Err(err) => {
                debug!(%err, "could not open a new session yet");
                drop(inner);
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
            }
        }
    }
}

impl Inner {
    fn publish(&self, state: ConnectionState, connected: bool) {
        info!(%state, "connection state");
        self.status.send_modify(|s| {
            s.state = state;
            s.connected = connected;
        });
        let _ = self.events.send(state);
    }

    pub(crate) fn current_zk(&self) -> Option<zk::Client> {
        self.slot.read().zk.clone()
    }

    pub(crate) fn is_closing(&self) -> bool {
        self.closing.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl CuratorClient {
    /// Starts building a client for `connect_string` (`host:port[,host:port...][/chroot]`).
    pub fn builder(connect_string: &str) -> CuratorClientBuilder {
        CuratorClientBuilder::new(connect_string)
    }

    /// Connects with every default (Curator's `CuratorFrameworkFactory.newClient`).
    ///
    /// # Errors
    /// See [`CuratorClientBuilder::connect`].
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn connect(connect_string: &str) -> Result<CuratorClient> {
        Self::builder(connect_string).connect().await
    }

    /// The current connection state.
    pub fn connection_state(&self) -> ConnectionState {
        self.inner.status.borrow().state
    }

    /// True when requests are currently being served.
    pub fn is_connected(&self) -> bool {
        self.inner.status.borrow().connected
    }

    /// A new subscription to connection-state changes from now on. Any number may exist; none can
    /// block another or the client.
    pub fn connection_states(&self) -> ConnectionStateStream {
        ConnectionStateStream { rx: self.inner.events.subscribe() }
    }

    /// The session this client is on now. Changes after [`ConnectionState::Lost`].
    pub fn session(&self) -> SessionIdentity {
        self.inner.slot.read().session
    }

    /// ZooKeeper's id of the current session.
    pub fn session_id(&self) -> i64 {
        self.session().id
    }

    /// The session timeout the server granted for the current session.
    pub fn negotiated_session_timeout(&self) -> Duration {
        self.inner.current_zk().map(|z| z.session_timeout()).unwrap_or(self.inner.config.session_timeout)
    }

    /// The namespace prefix (`/ns`), or `""`.
    pub fn namespace(&self) -> &str {
        self.inner.config.namespace.prefix()
    }

    /// The data written into lock nodes when a recipe is given none.
    pub fn default_data(&self) -> &[u8] {
        &self.inner.config.default_data
    }

    /// The underlying `zookeeper-client` handle of the current session, for operations this crate
    /// does not wrap. Paths given to it are NOT namespaced.
    ///
    /// # Errors
    /// [`Error::Closed`] after [`close`](Self::close); a retryable `ConnectionLoss` while a lost
    /// session is being replaced.
    pub fn zookeeper(&self) -> Result<zk::Client> {
        match self.inner.current_zk() {
            Some(zk) => Ok(zk),
            None if self.is_closed() => Err(Error::Closed { path: String::new() }),
            None => Err(Error::zk("", zk::Error::ConnectionLoss)),
        }
    }

    /// True once [`close`](Self::close) has begun.
    pub fn is_closed(&self) -> bool {
        self.inner.is_closing()
    }

    pub(crate) fn fix_path(&self, path: &str) -> String {
        self.inner.config.namespace.fix(path)
    }

    pub(crate) fn unfix_path<'a>(&self, path: &'a str) -> &'a str {
        self.inner.config.namespace.unfix(path)
    }

    pub(crate) fn acls(&self) -> zk::Acls<'_> {
        match &self.inner.config.acls {
            Some(acls) => zk::Acls::new(acls),
            None => zk::Acls::anyone_all(),
        }
    }

    pub(crate) fn status(&self) -> watch::Receiver<Status> {
        self.inner.status.subscribe()
    }

    pub(crate) fn retry_policy(&self) -> &dyn RetryPolicy {
        &*self.inner.config.retry_policy
    }

    /// Waits until the client is connected, then returns the current session's handle.
    ///
    /// Waits at most the connection timeout (and never past `deadline`); then fails with a
    /// retryable `ConnectionLoss`, as Curator's `blockUntilConnected` does.
    pub(crate) async fn connected_zk(&self, path: &str, deadline: Option<Instant>) -> Result<zk::Client> {
        let mut status = self.status();
        let limit = Instant::now() + self.inner.config.connection_timeout;
        let limit = deadline.map_or(limit, |d| d.min(limit));
        loop {
            if status.borrow().closed {
                return Err(Error::Closed { path: path.to_string() });
            }
            if status.borrow_and_update().connected {
                if let Some(zk) = self.inner.current_zk() {
                    return Ok(zk);
                }
            }
            match tokio::time::timeout_at(limit.into(), status.changed()).await {
                Ok(Ok(())) => continue,
                Ok(Err(_)) => return Err(Error::Closed { path: path.to_string() }),
                Err(_) => return Err(Error::zk(path, zk::Error::ConnectionLoss)),
            }
        }
    }

    /// Runs `op` against the current session, retrying retryable failures under the client's
    /// retry policy (Curator's `RetryLoop.callWithRetry`).
    ///
    /// Before each attempt it waits for a connection. Connection loss (including `zookeeper-client`'s
    /// `Custom` disconnect errors), operation timeouts, session moves and session expiry (a new session
    /// is opened by the client) are retried; everything else is returned at once. When `deadline`
    /// passes, the call stops with [`Error::DeadlineExceeded`] whatever the policy says.
    ///
    /// # Errors
    /// The last error, with the `path` it was about; [`Error::DeadlineExceeded`]; [`Error::Closed`]
    /// (also as soon as [`close`](Self::close) has begun).
    ///
    /// # Cancel safety
    /// As cancel safe as `op`: a dropped attempt may still be applied by the server.
    pub async fn with_retry<T, F, Fut>(&self, path: &str, deadline: Option<Instant>, op: F) -> Result<T>
    where
        F: FnMut(zk::Client) -> Fut,
        Fut: Future<Output = std::result::Result<T, zk::Error>>,
    {
        // Once close() has begun, new foreground operations are refused; only the background
        // deletes close() waits for (which call `retry_loop` directly) may still run.
        if self.inner.is_closing() {
            return Err(Error::Closed { path: path.to_string() });
        }
        self.retry_loop(path, deadline, op).await
    }

    /// [`with_retry`](Self::with_retry) without the closing check, for background work.
    pub(crate) async fn retry_loop<T, F, Fut>(&self, path: &str, deadline: Option<Instant>, mut op: F) -> Result<T>
    where
        F: FnMut(zk::Client) -> Fut,
        Fut: Future<Output = std::result::Result<T, zk::Error>>,
    {
        let start = Instant::now();
        let mut retry_count = 0u32;
        loop {
            let attempt = async {
                let zk = self.connected_zk(path, deadline).await?;
                op(zk).await.map_err(|e| Error::zk(path, e))
            };
            let result = match deadline {
                Some(d) => match tokio::time::timeout_at(d.into(), attempt).await {
                    Ok(r) => r,
                    Err(_) => return Err(deadline_exceeded(path, "waiting for", start)),
                },
                None => attempt.await,
            };
            match result {
                Ok(v) => return Ok(v),
                Err(err) => self.backoff_or_fail(err, &mut retry_count, start, deadline, path).await?,
            }
        }
    }

    /// Sleeps as the retry policy says, or returns `err` (or a deadline error).
    pub(crate) async fn backoff_or_fail(
        &self,
        err: Error,
        retry_count: &mut u32,
        start: Instant,
        deadline: Option<Instant>,
        path: &str,
    ) -> Result<()> {
        if !matches!(err.kind(), ErrorKind::Retryable | ErrorKind::SessionLost) {
            return Err(err);
        }
        let Some(sleep) = self.retry_policy().allow_retry(*retry_count, start.elapsed()) else {
            return Err(err);
        };
        *retry_count += 1;
        debug!(%err, retry_count = *retry_count, ?sleep, "retrying");
        if let Some(d) = deadline {
            if Instant::now() + sleep >= d {
                return Err(deadline_exceeded(path, "retrying", start));
            }
        }
        tokio::time::sleep(sleep).await;
        Ok(())
    }

    /// Creates `path` (and any missing parent, as a CONTAINER node unless disabled) with `data`.
    ///
    /// # Errors
    /// [`Error::InvalidPath`]; `NodeExists` and other server errors as [`Error::ZooKeeper`].
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped call may still create the node.
    pub async fn create(&self, path: &str, data: &[u8], mode: zk::CreateMode) -> Result<String> {
        paths::validate_path(path)?;
        let fixed = self.fix_path(path);
        let acls = self.acls();
        let options = &mode.with_acls(acls);
        let fixed = fixed.as_str();
        // Parents are containers the server may reap again before our create: a few rounds.
        let mut parent_rounds = 0;
        loop {
            let result = self.with_retry(path, None, |zk| async move { zk.create(fixed, data, options).await }).await;
            match result {
                Err(Error::ZooKeeper { source: zk::Error::NoNode, .. }) if parent_rounds < 5 => {
                    parent_rounds += 1;
                    match self.create_parents(paths::parent(fixed), None).await {
                        Ok(()) | Err(Error::ZooKeeper { source: zk::Error::NoNode, .. }) => {}
                        Err(e) => return Err(e),
                    }
                }
                Err(e) => return Err(e),
                Ok((_, seq)) => {
                    let created = if seq.into_i64() >= 0 { format!("{path}{seq}") } else { path.to_string() };
                    return Ok(created);
                }
            }
        }
    }

    /// Creates every missing ancestor of (and including) the *fixed* path `dir`, as CONTAINER nodes
    /// with empty data unless containers are disabled (Curator's `ZKPaths.mkdirs(.., asContainers)`).
    /// Walks up with `exists` first so no READ permission is needed above the deepest existing node.
    pub(crate) async fn create_parents(&self, dir: &str, deadline: Option<Instant>) -> Result<()> {
        let mut missing = Vec::new();
        let mut cur = dir.to_string();
        while cur != "/" && !cur.is_empty() {
            let c = cur.clone();
            let exists = self.with_retry(&cur, deadline, |zk| {
                let c = c.clone();
                async move { zk.check_stat(&c).await }
            });
            if exists.await?.is_some() {
                break;
            }
            let up = paths::parent(&cur).to_string();
            missing.push(std::mem::replace(&mut cur, up));
        }
        let mode =
            if self.inner.config.use_containers { zk::CreateMode::Container } else { zk::CreateMode::Persistent };
        let acls = self.acls();
        let options = mode.with_acls(acls);
        for dir in missing.iter().rev() {
            let options = &options;
            let made = self.with_retry(dir, deadline, |zk| async move { zk.create(dir, &[], options).await }).await;
            match made {
                Ok(_) | Err(Error::ZooKeeper { source: zk::Error::NodeExists, .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
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
    pub async fn delete_guaranteed(&self, path: &str) -> Result<()> {
        paths::validate_path(path)?;
        let fixed = self.fix_path(path);
        self.delete_fixed_guaranteed(&fixed).await
    }

    pub(crate) async fn delete_fixed_guaranteed(&self, fixed: &str) -> Result<()> {
        let path = self.unfix_path(fixed).to_string();
        // If this future is dropped mid-way, the queue takes over.
        let mut fallback = QueueOnDrop { client: self, fixed: Some(fixed) };
        let result = self.with_retry(&path, None, |zk| async move { zk.delete(fixed, None).await }).await;
        match result {
            Ok(()) | Err(Error::ZooKeeper { source: zk::Error::NoNode, .. }) => {
                fallback.fixed = None;
                Ok(())
            }
            Err(e) if matches!(e.kind(), ErrorKind::Retryable | ErrorKind::SessionLost | ErrorKind::Closed) => Err(e),
            Err(e) => {
                fallback.fixed = None;
                Err(e)
            }
        }
    }

    /// Queues a background delete of `path` that keeps trying until it succeeds or the node is gone.
    /// The returned [`DeleteOutcome`] can be awaited for the result, or dropped.
    ///
    /// # Errors
    /// [`Error::InvalidPath`].
    pub fn delete_in_background(&self, path: &str) -> Result<DeleteOutcome> {
        paths::validate_path(path)?;
        Ok(self.inner.deletes.delete(self.fix_path(path)))
    }

    /// Number of background deletes not finished yet.
    pub fn pending_background_deletes(&self) -> usize {
        self.inner.deletes.pending()
    }

    /// Closes the client: waits (at most the configured `max_close_wait`) for pending background
    /// deletes, then closes the session. Every later operation fails with [`Error::Closed`]; waiting
    /// acquires stop with that error.
    ///
    /// # Cancel safety
    /// Cancel safe: the client is marked closed at the first poll.
    pub async fn close(&self) {
        if self.inner.closing.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let deadline = Instant::now() + self.inner.config.max_close_wait;
        self.inner.deletes.wait_idle(deadline).await;
        self.inner.status.send_modify(|s| {
            s.closed = true;
            s.connected = false;
        });
        let zk = self.inner.slot.write().zk.take();
        if let Some(zk) = zk {
            let mut watcher = zk.state_watcher();
            drop(zk);
            // The session task sends CloseSession once the last handle is gone.
            let _ = tokio::time::timeout(Duration::from_secs(2), async {
                while !watcher.changed().await.is_terminated() {}
            })
            .await;
        }
        if let Some(supervisor) = self.inner.supervisor.lock().take() {
            supervisor.abort();
        }
        info!("zk-curator client closed");
    }
}

struct QueueOnDrop<'a> {
    client: &'a CuratorClient,
    fixed: Option<&'a str>,
}

impl Drop for QueueOnDrop<'_> {
    fn drop(&mut self) {
        if let Some(fixed) = self.fixed.take() {
            drop(self.client.inner.deletes.delete(fixed.to_string()));
        }
    }
}

pub(crate) fn deadline_exceeded(path: &str, during: &'static str, start: Instant) -> Error {
    Error::DeadlineExceeded { path: path.to_string(), during, waited: start.elapsed() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lost_fires_before_the_server_can_expire_the_session() {
        let s = Duration::from_secs;
        for (requested, negotiated) in [(s(60), s(60)), (s(2), s(2)), (s(60), s(40)), (s(10), s(4)), (s(4), s(20))] {
            let lost = lost_after_suspended(requested, negotiated);
            // SUSPENDED at most idle + tick after the last reply:
            let configured = requested / 5;
            let idle = if configured > negotiated * 3 / 5 { negotiated * 2 / 5 } else { configured };
            let latest_suspended = idle + idle / 8;
            assert!(latest_suspended + lost <= negotiated.mul_f64(0.85) + Duration::from_millis(1));
            // ... and LOST is not declared absurdly early either (a blip is not a lost session).
            assert!(lost >= negotiated / 4, "{requested:?}/{negotiated:?}: {lost:?}");
        }
        assert_eq!(lost_after_suspended(s(60), s(60)), s(60).mul_f64(0.85) - s(12) - Duration::from_millis(1500));
    }
}
