//! The framework layer (Curator's `CuratorFramework`): the client and its builder, session
//! supervision and connection states, ACL providers, retry policies and the retry loop, paths and namespaces,
//! protected create, guaranteed delete.
//!
//! The configuration a builder produces lives in [`config`], read by the builder, the client and
//! the session supervisor alike. This door re-exports every public item; the crate root re-exports
//! them from here.

pub(crate) mod acl;
pub(crate) mod acl_provider;
pub(crate) mod backoff;
pub(crate) mod builder;
pub(crate) mod client;
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

pub use acl::{Acl, Id, Permissions};
pub use acl_provider::{AclProvider, DefaultAclProvider};
pub use builder::{
    CuratorClientBuilder, DEFAULT_CONNECTION_TIMEOUT, DEFAULT_MAX_CLOSE_WAIT, DEFAULT_SESSION_TIMEOUT,
    DEFAULT_SIMULATED_SESSION_EXPIRATION_PERCENT,
};
pub use client::CuratorClient;
pub use guaranteed_delete::DeleteOutcome;
pub use limits::DEFAULT_MAX_DATA_SIZE;
pub use node::{CreateMode, EventType, Stat, WatchedEvent};
pub use operations::{
    CommitBuilder, CreateBuilder, DeleteBuilder, ExistsBuilder, ExistsWatchBuilder, GetChildrenBuilder,
    GetChildrenWatchBuilder, GetDataBuilder, GetDataWatchBuilder, OpResult, PersistentWatchBuilder, SetDataBuilder,
    Transaction, Watch, WatchStream,
};
pub use paths::validate_path;
pub use protected::{is_protected, parse_sequence, strip_protection, CreatedNode};
pub use retry::{
    BoundedExponentialBackoffRetry, ExponentialBackoffRetry, RetryForever, RetryNTimes, RetryOneTime, RetryPolicy,
    RetryUntilElapsed,
};
#[cfg(feature = "sasl")]
pub use security::SaslOptions;
#[cfg(feature = "tls")]
pub use security::TlsOptions;
pub use session::SessionIdentity;
pub use state::{ConnectionState, ConnectionStateErrorPolicy, ConnectionStateStream};
