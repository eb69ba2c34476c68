//! The rest of the framework layer (Curator's `CuratorFramework`, `framework.api` and
//! `framework.state` packages): what a program rarely names itself.
//!
//! The client and what most programs start from are at the crate root: [`CuratorClient`] and its
//! [`CuratorClientBuilder`](crate::CuratorClientBuilder), the errors, [`Deadline`](crate::Deadline),
//! [`ConnectionState`], the retry policies and the data API's everyday types
//! ([`CreateMode`](crate::CreateMode), [`Stat`], [`Acl`](crate::Acl),
//! [`Transaction`](crate::Transaction), …). Here are the others:
//!
//! * the data-API request builders the client's methods return ([`CreateBuilder`],
//!   [`GetDataBuilder`], [`SetDataBuilder`], …: awaited, never named in most programs), watches
//!   ([`Watch`], [`WatchStream`]) and results ([`CreatedNode`], [`DeleteOutcome`]);
//! * connection details: [`ConnectionStateStream`], [`ConnectionStateErrorPolicy`],
//!   [`SessionIdentity`], and the TLS and SASL options (features `tls`, `sasl`);
//! * ACL providers ([`AclProvider`], [`DefaultAclProvider`]);
//! * path helpers ([`validate_path`], Curator's protected names: [`is_protected`],
//!   [`strip_protection`], [`parse_sequence`]) and the builder's defaults (`DEFAULT_*`).
//!
//! ```no_run
//! use zk_curator::framework::{ConnectionStateErrorPolicy, DEFAULT_SESSION_TIMEOUT};
//! use zk_curator::{CuratorClient, RetryNTimes};
//! use std::time::Duration;
//!
//! # async fn demo() -> zk_curator::Result<()> {
//! let client = CuratorClient::builder("127.0.0.1:2181")
//!     .session_timeout(DEFAULT_SESSION_TIMEOUT / 2)
//!     .retry_policy(RetryNTimes::new(3, Duration::from_millis(100)))
//!     .connection_state_error_policy(ConnectionStateErrorPolicy::Session)
//!     .connect()
//!     .await?;
//! # Ok(()) }
//! ```
//!
//! Inside the crate: the configuration a builder produces lives in `config`, read by the
//! builder, the client and the session supervisor alike.

pub(crate) mod acl;
pub(crate) mod acl_provider;
pub(crate) mod backoff;
pub(crate) mod builder;
pub(crate) mod client;
pub(crate) mod compression;
pub(crate) mod config;
pub(crate) mod guaranteed_delete;
pub(crate) mod limits;
pub(crate) mod node;
pub(crate) mod operations;
pub(crate) mod paths;
pub(crate) mod protected;
pub(crate) mod retry;
pub(crate) mod retry_loop;
pub(crate) mod security;
pub(crate) mod session;
pub(crate) mod state;

// Of the crate root's share of the layer (re-exported there), what the crate names by this path.
pub(crate) use client::CuratorClient;
pub(crate) use node::Stat;
pub(crate) use state::ConnectionState;

pub use acl_provider::{AclProvider, DefaultAclProvider};
pub use builder::{
    DEFAULT_CONNECTION_TIMEOUT, DEFAULT_MAX_CLOSE_WAIT, DEFAULT_SESSION_TIMEOUT,
    DEFAULT_SIMULATED_SESSION_EXPIRATION_PERCENT,
};
pub use guaranteed_delete::DeleteOutcome;
pub use limits::DEFAULT_MAX_DATA_SIZE;
pub use operations::{
    CommitBuilder, CreateBuilder, DeleteBuilder, ExistsBuilder, ExistsWatchBuilder, GetAclBuilder, GetChildrenBuilder,
    GetChildrenWatchBuilder, GetDataBuilder, GetDataWatchBuilder, PersistentWatchBuilder, SetAclBuilder,
    SetDataBuilder, SyncBuilder, Watch, WatchStream,
};
pub use paths::validate_path;
pub use protected::{is_protected, parse_sequence, strip_protection, CreatedNode};
#[cfg(feature = "sasl")]
pub use security::SaslOptions;
#[cfg(feature = "tls")]
pub use security::TlsOptions;
pub use session::SessionIdentity;
pub use state::{ConnectionStateErrorPolicy, ConnectionStateStream};
