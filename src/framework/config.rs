//! The configuration a [`CuratorClientBuilder`](crate::CuratorClientBuilder) produces: what the
//! client needs ([`ClientConfig`]) and what opening a session needs ([`SessionConfig`]). Plain
//! data, read by the builder, the client and the session supervisor; it depends on none of them.

use std::sync::Arc;
use std::time::Duration;

use super::acl_provider::AclProvider;
use super::paths::Namespace;
use super::retry::RetryPolicy;

/// What the client needs besides the session: namespace, retries, node defaults.
pub(crate) struct ClientConfig {
    pub namespace: Namespace,
    pub retry_policy: Arc<dyn RetryPolicy>,
    pub default_data: Vec<u8>,
    pub acl_provider: Arc<dyn AclProvider>,
    pub use_containers: bool,
    /// The data API compresses and decompresses by default (`enable_compression`).
    pub compression: bool,
    pub max_close_wait: Duration,
    pub max_data_size: usize,
    pub error_policy: super::state::ConnectionStateErrorPolicy,
    #[cfg(feature = "metrics")]
    pub metrics_path_label: crate::metrics::PathLabel,
}

/// One `authorization(scheme, auth)` of the builder. Its `Debug` shows the scheme only: the
/// credential never reaches a log.
#[derive(Clone)]
pub(crate) struct Credential {
    pub scheme: String,
    pub auth: Vec<u8>,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:<redacted>", self.scheme)
    }
}

/// The TLS options of a client (their `Debug` shows no key material).
#[cfg(feature = "tls")]
pub(crate) type Tls = super::security::TlsOptions;

/// The SASL options of a client (their `Debug` shows no user name or password).
#[cfg(feature = "sasl")]
pub(crate) type Sasl = super::security::SaslOptions;

/// What opening a session needs.
#[derive(Clone, Debug)]
pub(crate) struct SessionConfig {
    pub connect_string: String,
    pub session_timeout: Duration,
    pub connection_timeout: Duration,
    pub can_be_read_only: bool,
    /// The fraction of the negotiated session timeout after the last reply at which a suspended
    /// session is given up (LOST); in (0, 1].
    pub lost_fraction: f64,
    pub credentials: Vec<Credential>,
    #[cfg(feature = "tls")]
    pub tls: Option<Tls>,
    #[cfg(feature = "sasl")]
    pub sasl: Option<Sasl>,
}
