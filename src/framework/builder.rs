//! [`CuratorClientBuilder`] (Curator's `CuratorFrameworkFactory.builder()`) and the configuration
//! it produces.

use std::sync::Arc;
use std::time::Duration;

use super::acl::Acl;
use super::acl_provider::{AclProvider, DefaultAclProvider, FixedAcls};
use super::client::CuratorClient;
#[cfg(feature = "sasl")]
use super::config::Sasl;
#[cfg(feature = "tls")]
use super::config::Tls;
use super::config::{ClientConfig, Credential, SessionConfig};
use super::limits::{check_data_size, DEFAULT_MAX_DATA_SIZE};
use super::paths::Namespace;
use super::retry::{ExponentialBackoffRetry, RetryPolicy};
use super::state::ConnectionStateErrorPolicy;
use crate::error::{Error, Result};
#[cfg(feature = "sasl")]
use crate::framework::SaslOptions;
#[cfg(feature = "tls")]
use crate::framework::TlsOptions;

/// Curator's default session timeout (`curator-default-session-timeout`).
pub const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest session timeout ZooKeeper's protocol can carry (an `i32` of milliseconds).
const MAX_SESSION_TIMEOUT: Duration = Duration::from_millis(i32::MAX as u64);

/// Curator's default connection timeout (`curator-default-connection-timeout`).
pub const DEFAULT_CONNECTION_TIMEOUT: Duration = Duration::from_secs(15);
/// Curator's default `maxCloseWaitMs`.
pub const DEFAULT_MAX_CLOSE_WAIT: Duration = Duration::from_secs(1);

/// The default of [`CuratorClientBuilder::simulated_session_expiration_percent`]: a suspended
/// session is given up (LOST) at most 85% of the session timeout after the last reply from the
/// server, before the server can expire it (Curator's default is 100, counted from SUSPENDED).
pub const DEFAULT_SIMULATED_SESSION_EXPIRATION_PERCENT: f64 = 85.0;

/// Builds a [`CuratorClient`] (Curator's `CuratorFrameworkFactory.builder()`), from
/// [`CuratorClient::builder`]; finish with [`connect`](Self::connect) (connected first) or
/// [`start`](Self::start) (connects in the background).
///
/// Settings Curator has a default for have Curator's default, except where ours is named:
/// * [`retry_policy`](Self::retry_policy): Curator has no default (its builder requires one);
///   ours is `ExponentialBackoffRetry::new(100 ms, 3)`.
/// * [`simulated_session_expiration_percent`](Self::simulated_session_expiration_percent): 85,
///   counted from the last reply (Curator: 100, counted from SUSPENDED).
/// * [`connection_state_error_policy`](Self::connection_state_error_policy):
///   [`Session`](ConnectionStateErrorPolicy::Session) (Curator:
///   [`Standard`](ConnectionStateErrorPolicy::Standard)).
///
/// ```no_run
/// use std::time::Duration;
/// use zk_curator::{CuratorClient, ExponentialBackoffRetry};
///
/// # async fn demo() -> zk_curator::Result<()> {
/// let client = CuratorClient::builder("zk1:2181,zk2:2181,zk3:2181")
///     .namespace("billing") // every path below /billing
///     .session_timeout(Duration::from_secs(30))
///     .connection_timeout(Duration::from_secs(10))
///     .retry_policy(ExponentialBackoffRetry::new(Duration::from_millis(100), 5))
///     .authorization("digest", "billing:secret")
///     .connect()
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct CuratorClientBuilder {
    connect_string: String,
    session_timeout: Duration,
    connection_timeout: Duration,
    namespace: String,
    retry_policy: Arc<dyn RetryPolicy>,
    default_data: Option<Vec<u8>>,
    acl_provider: Option<Arc<dyn AclProvider>>,
    empty_acls: bool,
    use_containers: bool,
    compression: bool,
    can_be_read_only: bool,
    max_close_wait: Duration,
    max_data_size: usize,
    simulated_session_expiration_percent: f64,
    error_policy: ConnectionStateErrorPolicy,
    credentials: Vec<Credential>,
    #[cfg(feature = "tls")]
    tls: Option<Tls>,
    #[cfg(feature = "sasl")]
    sasl: Option<Sasl>,
    #[cfg(feature = "metrics")]
    metrics_path_label: crate::metrics::PathLabel,
}

impl CuratorClientBuilder {
    pub(crate) fn new(connect_string: &str) -> Self {
        Self {
            connect_string: connect_string.to_string(),
            session_timeout: DEFAULT_SESSION_TIMEOUT,
            connection_timeout: DEFAULT_CONNECTION_TIMEOUT,
            namespace: String::new(),
            retry_policy: Arc::new(ExponentialBackoffRetry::new(Duration::from_millis(100), 3)),
            default_data: None,
            acl_provider: None,
            empty_acls: false,
            use_containers: true,
            compression: false,
            can_be_read_only: false,
            max_close_wait: DEFAULT_MAX_CLOSE_WAIT,
            max_data_size: DEFAULT_MAX_DATA_SIZE,
            simulated_session_expiration_percent: DEFAULT_SIMULATED_SESSION_EXPIRATION_PERCENT,
            error_policy: ConnectionStateErrorPolicy::default(),
            credentials: Vec::new(),
            #[cfg(feature = "tls")]
            tls: None,
            #[cfg(feature = "sasl")]
            sasl: None,
            #[cfg(feature = "metrics")]
            metrics_path_label: crate::metrics::PathLabel::AsIs,
        }
    }

    /// Requested session timeout (the server negotiates it within its bounds). Default 60 s; at
    /// most 24 days (ZooKeeper's 32-bit milliseconds), checked when the client is built.
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

    /// The policy of [`raw::with_retry`](crate::raw::with_retry) and every operation of the
    /// client. Default: `ExponentialBackoffRetry::new(Duration::from_millis(100), 3)` — ours:
    /// Curator has none (its builder requires a retry policy).
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
    ///
    /// The same list for every node; see [`acl_provider`](Self::acl_provider) for a choice per path.
    pub fn acls(mut self, acls: Vec<Acl>) -> Self {
        self.empty_acls = acls.is_empty();
        self.acl_provider = Some(Arc::new(FixedAcls(acls)));
        self
    }

    /// Chooses the ACL of each node this client creates (Curator's `aclProvider`); replaces
    /// [`acls`](Self::acls). Default: [`DefaultAclProvider`] (open to everyone).
    pub fn acl_provider(mut self, provider: impl AclProvider) -> Self {
        self.empty_acls = false;
        self.acl_provider = Some(Arc::new(provider));
        self
    }

    /// Create missing parents as PERSISTENT nodes instead of CONTAINER nodes (Curator's
    /// `dontUseContainerParents`).
    pub fn dont_use_container_parents(mut self) -> Self {
        self.use_containers = false;
        self
    }

    /// Compresses the data of every create, set-data and transaction of the data API, and
    /// decompresses every get-data (Curator's `enableCompression` with its default
    /// `GzipCompressionProvider`); a call opts out with `uncompressed()` / `undecompressed()`.
    /// Recipes' own nodes are not affected: they stay in the format Curator's recipes use.
    /// Default: off (each call opts in with `compressed()` / `decompressed()`).
    pub fn enable_compression(mut self) -> Self {
        self.compression = true;
        self
    }

    /// Allow read-only connections to a partitioned server (reported as
    /// [`ConnectionState::ReadOnly`](crate::ConnectionState::ReadOnly)).
    pub fn can_be_read_only(mut self, allow: bool) -> Self {
        self.can_be_read_only = allow;
        self
    }

    /// How far into the session timeout a suspended connection is given up: the client declares
    /// the session [`Lost`](crate::ConnectionState::Lost) (every hold on it `Lost`, a selector's
    /// work cancelled) and opens a new one, at most `percent`% of the negotiated session timeout
    /// after the last reply it received from the server, even if the server stays unreachable
    /// (Curator's `simulatedSessionExpirationPercent`). Default
    /// [`DEFAULT_SIMULATED_SESSION_EXPIRATION_PERCENT`] (85).
    ///
    /// | | Curator | zk-curator |
    /// |---|---|---|
    /// | unit | `int` percent, 1 to 100 | percent (`85`, `62.5`), above 0 and at most 100 |
    /// | counted from | SUSPENDED | the last reply from the server (SUSPENDED comes up to about 23% of the timeout after it) |
    /// | default | 100: LOST up to ~1.4 × the timeout after the last reply, after the server may have expired the session and another process taken its locks | 85: LOST before the server can expire the session, so a holder hears `Lost` before anyone else can hold |
    ///
    /// Ours differs because holds must be given up before the server can expire them: the server
    /// counts the timeout from the last request it heard, no earlier than our last reply, and the
    /// 15% left absorbs timers, scheduling and the reply's network hop ([docs/failure-semantics.md](crate::guide::failure_semantics)).
    /// A smaller percentage gives up sooner (a shorter outage costs the session); below the time
    /// SUSPENDED itself takes (about 23%), LOST comes with SUSPENDED. Above 85 the margin shrinks,
    /// and at 100 a holder may learn of the loss only after the server expired the session.
    ///
    /// An argument that is not above 0 and at most 100 (NaN included) fails
    /// [`connect`](Self::connect) / [`start`](Self::start) with [`Error::InvalidArgument`] naming it.
    ///
    /// ```no_run
    /// # async fn demo() -> zk_curator::Result<()> {
    /// let client = zk_curator::CuratorClient::builder("127.0.0.1:2181")
    ///     .simulated_session_expiration_percent(60) // give a cut-off session up sooner
    ///     .connect()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn simulated_session_expiration_percent(mut self, percent: impl Into<f64>) -> Self {
        self.simulated_session_expiration_percent = percent.into();
        self
    }

    /// Which connection states the recipes treat as errors (Curator's
    /// `connectionStateErrorPolicy`): with [`ConnectionStateErrorPolicy::Standard`] leaders give
    /// leadership up on `SUSPENDED`, as Curator's do by default; with
    /// [`ConnectionStateErrorPolicy::Session`] (**zk-curator's default**, Curator's
    /// `SessionConnectionStateErrorPolicy`) they wait a suspended connection out and give up only
    /// on `LOST`. See [`ConnectionStateErrorPolicy`] for what each recipe does and why the
    /// defaults differ.
    ///
    /// ```no_run
    /// # async fn demo() -> zk_curator::Result<()> {
    /// use zk_curator::framework::ConnectionStateErrorPolicy;
    ///
    /// // Curator's default: a leader stops leading as soon as the connection is suspended.
    /// let client = zk_curator::CuratorClient::builder("127.0.0.1:2181")
    ///     .connection_state_error_policy(ConnectionStateErrorPolicy::Standard)
    ///     .connect()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn connection_state_error_policy(mut self, policy: ConnectionStateErrorPolicy) -> Self {
        self.error_policy = policy;
        self
    }

    /// How long [`CuratorClient::close`] waits for pending background deletes. Default 1 s.
    pub fn max_close_wait(mut self, wait: Duration) -> Self {
        self.max_close_wait = wait;
        self
    }

    /// The largest node data this client sends, in bytes. Larger data is refused with
    /// [`Error::InvalidArgument`] naming its size and path before anything is sent — by
    /// `create().data(..)`, `set_data`, a [`Transaction`](crate::Transaction) (the sum of its
    /// operations' data), and the constructors of recipes that write data into their nodes (lock,
    /// read-write lock and semaphore `with_data`, latch and selector ids), and by
    /// [`connect`](Self::connect) / [`start`](Self::start) for a [`default_data`](Self::default_data)
    /// over it. Sent, such a request would make the server drop the connection: every hold of the
    /// client would go `Suspended`, and the caller would get a retryable error.
    ///
    /// The rest of a request — its paths (namespace included), headers, and in a transaction the
    /// other operations — gets 4 KiB − 1 byte besides the data, counting 256 bytes per operation
    /// for headers and a default ACL: data and paths together over `max_data_size` + 4 KiB − 1 are
    /// refused as well ([`Error::InvalidArgument`]), and so is a path alone over it
    /// ([`Error::InvalidPath`]), by every call of the data API.
    ///
    /// Default [`DEFAULT_MAX_DATA_SIZE`] (1 MiB − 4 KiB), for a server with the default
    /// `jute.maxbuffer`. For a server configured with a larger `jute.maxbuffer`, set it to that
    /// value less 4 KiB (more with large ACLs). Must be positive.
    pub fn max_data_size(mut self, bytes: usize) -> Self {
        self.max_data_size = bytes;
        self
    }

    /// Authenticates every session of the client with `scheme` and `auth` (Curator's
    /// `authorization(scheme, auth)`). The credential is sent in the session's handshake, before
    /// any request, on the first session, on every reconnection and on every replacement session.
    /// For the `digest` scheme `auth` is `b"user:password"`.
    ///
    /// **Replaces** the credentials set before, as Curator's builder does: a second call keeps only
    /// the second credential. For several, use [`authorizations`](Self::authorizations).
    ///
    /// The credential is kept for the client's life and never printed (`Debug` shows the scheme).
    pub fn authorization(self, scheme: &str, auth: impl Into<Vec<u8>>) -> Self {
        self.authorizations([(scheme, auth)])
    }

    /// Authenticates every session of the client with each of `credentials`, `(scheme, auth)`
    /// pairs sent in this order (Curator's `authorization(List<AuthInfo>)`); replaces the
    /// credentials set before, as [`authorization`](Self::authorization) does. An empty list
    /// leaves the client without credentials.
    ///
    /// ```no_run
    /// # async fn demo() -> zk_curator::Result<()> {
    /// let client = zk_curator::CuratorClient::builder("127.0.0.1:2181")
    ///     .authorizations([("digest", "billing:secret"), ("digest", "audit:other-secret")])
    ///     .connect()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn authorizations<S: AsRef<str>, A: Into<Vec<u8>>>(
        mut self,
        credentials: impl IntoIterator<Item = (S, A)>,
    ) -> Self {
        self.credentials = credentials
            .into_iter()
            .map(|(scheme, auth)| Credential { scheme: scheme.as_ref().to_string(), auth: auth.into() })
            .collect();
        self
    }

    /// Connects over TLS (feature `tls`; rustls through zookeeper-client), with `options`
    /// giving the CA to trust, and the client certificate and key if the server asks for one:
    /// `TlsOptions::new().with_pem_ca(ca)?.with_pem_identity(cert, key)?`. Every host of the
    /// connect string is then reached over TLS unless written `tcp://host:port`; the server's
    /// certificate must name the host as written in the connect string (a DNS name or an IP
    /// address), as ZooKeeper's `zookeeper.ssl.hostnameVerification` does.
    /// Curator: `zkClientConfig` with `zookeeper.client.secure=true` and the `zookeeper.ssl.*`
    /// properties.
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    #[cfg(feature = "tls")]
    pub fn tls(mut self, options: TlsOptions) -> Self {
        self.tls = Some(options);
        self
    }

    /// Authenticates every session of the client with SASL (feature `sasl`; zookeeper-client's
    /// SASL support): `SaslOptions::digest_md5(user, password)` for a server whose JAAS `Server`
    /// section uses `DigestLoginModule`. As with [`authorization`](Self::authorization), the SASL
    /// exchange runs in the handshake of every connection, before any request: on the first
    /// session, on every reconnection and on every replacement session, so the `sasl:<user>`
    /// identity (and the ACLs granted to it) outlive a session expiry. A refused exchange (wrong
    /// password, unknown user) fails [`connect`](Self::connect) with [`Error::Connect`]
    /// (`AuthFailed`, kind [`NotAuthorized`](crate::ErrorKind::NotAuthorized)), naming `sasl` but
    /// never the user or the password.
    ///
    /// The options are kept for the client's life and never printed (`Debug` shows
    /// `SaslOptions(<redacted>)`). GSSAPI (Kerberos): this crate's `sasl` feature enables only
    /// DIGEST-MD5; an application that also enables zookeeper-client's `sasl-gssapi` feature can
    /// build GSSAPI options there and pass them through [`raw::sasl_options`](crate::raw::sasl_options),
    /// forwarded unchanged (not tested by this crate; see [docs/security.md](crate::guide::security)). Curator: a JAAS `Client` section named by the
    /// `java.security.auth.login.config` system property.
    #[cfg(feature = "sasl")]
    #[cfg_attr(docsrs, doc(cfg(feature = "sasl")))]
    pub fn sasl(mut self, options: SaslOptions) -> Self {
        self.sasl = Some(options);
        self
    }

    /// Maps each lock path to the value of the `path` label of this client's metrics (feature
    /// `metrics`; see [docs/observability.md](crate::guide::observability)). Default: the lock path as is.
    ///
    /// Every distinct label value is a time series for the metrics backend to keep: lock paths
    /// with a per-job or per-customer part (`/locks/jobs/7f3a…`) make the series grow without
    /// bound. Map such paths to their template here, or leave the label out with
    /// [`metrics_without_path_label`](Self::metrics_without_path_label).
    ///
    /// The function runs once per lock object (when the recipe is constructed: `new`), not per
    /// acquire, with the path as given to the recipe (without the namespace). It is not caught: a panic in
    /// it comes out of the recipe's constructor, before any node is created. The last of this and
    /// [`metrics_without_path_label`](Self::metrics_without_path_label) wins.
    ///
    /// ```no_run
    /// # async fn demo() -> zk_curator::Result<()> {
    /// // "/locks/jobs/7f3a" and "/locks/jobs/91c2" are both recorded as "/locks/jobs/{id}".
    /// let client = zk_curator::CuratorClient::builder("127.0.0.1:2181")
    ///     .metrics_path_label(|path| match path.strip_prefix("/locks/jobs/") {
    ///         Some(_) => "/locks/jobs/{id}".to_string(),
    ///         None => path.to_string(),
    ///     })
    ///     .connect()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "metrics")]
    #[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
    pub fn metrics_path_label(mut self, label: impl Fn(&str) -> String + Send + Sync + 'static) -> Self {
        self.metrics_path_label = crate::metrics::PathLabel::Mapped(Arc::new(label));
        self
    }

    /// Leaves the `path` label out of this client's metrics (feature `metrics`): series per
    /// recipe only, whatever the number of lock paths. The last of this and
    /// [`metrics_path_label`](Self::metrics_path_label) wins.
    #[cfg(feature = "metrics")]
    #[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
    pub fn metrics_without_path_label(mut self) -> Self {
        self.metrics_path_label = crate::metrics::PathLabel::Omitted;
        self
    }

    /// Connects the first session and starts the client.
    ///
    /// Must be called inside a tokio runtime; the client's background tasks run on it.
    ///
    /// # Errors
    /// * [`Error::InvalidArgument`] / [`Error::InvalidPath`] for a bad connect string, timeout or namespace.
    /// * [`Error::Connect`] when no session could be established within the connection timeout,
    ///   or the server refused an [`authorization`](Self::authorization) or the SASL exchange
    ///   (`AuthFailed`; the error names the schemes and `sasl`, never the credentials).
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future drops the half-made session, which closes it.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo() -> zk_curator::Result<()> {
    /// let client = zk_curator::CuratorClient::builder("127.0.0.1:2181").namespace("app").connect().await?;
    /// println!("session {:#x}", client.session_id());
    /// # Ok(()) }
    /// ```
    pub async fn connect(self) -> Result<CuratorClient> {
        let (config, session) = self.validate()?;
        CuratorClient::start(config, session).await
    }

    /// Builds the client and returns it at once, connecting in the background (Curator's
    /// `build()` + `start()`): a ZooKeeper that is down now and comes up later is used without a
    /// restart. Until the first session exists the state is
    /// [`ConnectionState::Latent`](crate::ConnectionState::Latent); recipe calls wait for the
    /// session within their own deadlines (an untimed one, within the connection timeout, under
    /// the retry policy); [`CuratorClient::block_until_connected`] waits for it.
    ///
    /// # Errors
    /// The argument errors of [`connect`](Self::connect), and [`Error::InvalidArgument`] when
    /// called outside a tokio runtime (the client's background tasks need one). Connection
    /// failures are not errors here: the client keeps trying (with back-off, up to 1 s apart)
    /// until it is closed.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo() -> zk_curator::Result<()> {
    /// use std::time::Duration;
    ///
    /// let client = zk_curator::CuratorClient::builder("127.0.0.1:2181").start()?; // returns at once
    /// if !client.block_until_connected(Duration::from_secs(10)).await? {
    ///     eprintln!("ZooKeeper is not reachable yet; lock calls wait for it within their deadlines");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn start(self) -> Result<CuratorClient> {
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(Error::invalid_argument("runtime", "none", "start() must be called within a tokio runtime"));
        }
        let (config, session) = self.validate()?;
        Ok(CuratorClient::start_in_background(config, session))
    }

    fn validate(self) -> Result<(ClientConfig, SessionConfig)> {
        if self.connect_string.trim().is_empty() {
            return Err(Error::invalid_argument("connect_string", "\"\"", "must name at least one host"));
        }
        if self.session_timeout.is_zero() {
            return Err(Error::invalid_argument("session_timeout", "0s", "must be positive"));
        }
        if self.session_timeout > MAX_SESSION_TIMEOUT {
            return Err(Error::invalid_argument(
                "session_timeout",
                format!("{:?}", self.session_timeout),
                "must be at most 24 days (ZooKeeper counts it in 32-bit milliseconds)",
            ));
        }
        if self.connection_timeout.is_zero() {
            return Err(Error::invalid_argument("connection_timeout", "0s", "must be positive"));
        }
        if let Some(bad) = self.credentials.iter().find(|c| c.scheme.trim().is_empty()) {
            return Err(Error::invalid_argument(
                "authorization scheme",
                format!("{:?}", bad.scheme),
                "must not be empty",
            ));
        }
        if self.empty_acls {
            return Err(Error::invalid_argument("acls", "[]", "must not be empty"));
        }
        let percent = self.simulated_session_expiration_percent;
        // Written so that NaN fails too.
        if !(percent > 0.0 && percent <= 100.0) {
            return Err(Error::invalid_argument(
                "simulated_session_expiration_percent",
                percent,
                "must be above 0 and at most 100 (percent of the session timeout)",
            ));
        }
        if self.max_data_size == 0 {
            return Err(Error::invalid_argument("max_data_size", 0, "must be positive"));
        }
        let default_data = self.default_data.unwrap_or_else(local_address_data);
        check_data_size(self.max_data_size, "default_data", "every node of the client", default_data.len())?;
        let config = ClientConfig {
            namespace: Namespace::new(&self.namespace)?,
            retry_policy: self.retry_policy,
            default_data,
            acl_provider: self.acl_provider.unwrap_or_else(|| Arc::new(DefaultAclProvider)),
            use_containers: self.use_containers,
            compression: self.compression,
            max_close_wait: self.max_close_wait,
            max_data_size: self.max_data_size,
            error_policy: self.error_policy,
            #[cfg(feature = "metrics")]
            metrics_path_label: self.metrics_path_label,
        };
        let session = SessionConfig {
            connect_string: self.connect_string,
            session_timeout: self.session_timeout,
            connection_timeout: self.connection_timeout,
            can_be_read_only: self.can_be_read_only,
            lost_fraction: percent / 100.0,
            credentials: self.credentials,
            #[cfg(feature = "tls")]
            tls: self.tls,
            #[cfg(feature = "sasl")]
            sasl: self.sasl,
        };
        Ok((config, session))
    }
}

/// Curator's default node data: `InetAddress.getLocalHost().getHostAddress()` as ASCII.
fn local_address_data() -> Vec<u8> {
    use std::net::ToSocketAddrs;
    let host = gethostname::gethostname().to_string_lossy().into_owned();
    let host = if host.is_empty() { "localhost".to_string() } else { host };
    let addrs: Vec<_> = (host.as_str(), 0).to_socket_addrs().map(|a| a.collect()).unwrap_or_default();
    addrs.iter().find(|a| a.is_ipv4()).or(addrs.first()).map(|a| a.ip().to_string().into_bytes()).unwrap_or_default()
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
    ///
    /// ```no_run
    /// # async fn demo() -> zk_curator::Result<()> {
    /// let client = zk_curator::CuratorClient::connect("127.0.0.1:2181").await?;
    /// // ... recipes on `client` ...
    /// client.close().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn connect(connect_string: &str) -> Result<CuratorClient> {
        Self::builder(connect_string).connect().await
    }
}
