//! The escape hatch: the `zookeeper-client` crate this one is built on, and the few bridges
//! between it and a [`CuratorClient`].
//!
//! **Outside this crate's semver promise.** `zookeeper-client` is 0.x; a release of zk-curator
//! may move to a new version of it, and everything reachable from this module changes with it.
//! Nothing else in zk-curator's public API mentions `zookeeper-client`, so code that does not
//! use this module is not affected. Reach for it only for what the crate does not wrap (ACL
//! reads and writes, `sync`, reconfiguration, multi-reads, dynamic TLS certificates, GSSAPI).
//!
//! Paths given to the raw client are **not** namespaced (prefix [`CuratorClient::namespace`]
//! yourself).
//!
//! ```no_run
//! # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
//! use zk_curator::raw;
//!
//! // zookeeper-client's `get_acl`, which zk-curator does not wrap, under the client's retry policy.
//! let (acls, _stat) = raw::with_retry(&client, "/config", None, |zk| async move { zk.get_acl("/config").await }).await?;
//! println!("{acls:?}");
//! # Ok(()) }
//! ```

use std::future::Future;
use std::time::Instant;

pub use zookeeper_client::*;

use crate::CuratorClient;

/// The raw handle of `client`'s current session. It belongs to that session: after
/// [`ConnectionState::Lost`](crate::ConnectionState::Lost) the client moves to a new session and
/// this handle fails with `SessionExpired`; ask again.
///
/// # Errors
/// [`Error::Closed`](crate::Error::Closed) after [`CuratorClient::close`]; a retryable
/// `ConnectionLoss` while a lost session is being replaced.
pub fn client(client: &CuratorClient) -> crate::Result<Client> {
    client.raw_client()
}

/// Runs `op` against `client`'s current session, retrying retryable failures under the client's
/// retry policy (Curator's `RetryLoop.callWithRetry`).
///
/// Before each attempt it waits for a connection. Connection loss (including the disconnects
/// `zookeeper-client` reports as `Error::Custom`), operation timeouts, session moves and session
/// expiry (the client opens a new session) are retried; everything else is returned at once.
/// When `deadline` passes, the call stops with
/// [`Error::DeadlineExceeded`](crate::Error::DeadlineExceeded) whatever the policy says. Only
/// give it operations that are safe to repeat: a retried sequential create may create a second
/// node.
///
/// # Errors
/// The last error as [`crate::Error`] (its [`code`](crate::Error::code) is ZooKeeper's),
/// naming `path`; [`Error::DeadlineExceeded`](crate::Error::DeadlineExceeded);
/// [`Error::Closed`](crate::Error::Closed).
///
/// # Cancel safety
/// As cancel safe as `op`: a dropped attempt may still be applied by the server.
pub async fn with_retry<T, F, Fut>(
    client: &CuratorClient,
    path: &str,
    deadline: Option<Instant>,
    op: F,
) -> crate::Result<T>
where
    F: FnMut(Client) -> Fut,
    Fut: Future<Output = std::result::Result<T, Error>>,
{
    client.with_retry(path, deadline, op).await
}

/// zk-curator's ACL entries of raw ones (e.g. what a raw `get_acl` returned).
pub fn acls_from_raw(acls: &[Acl]) -> Vec<crate::Acl> {
    acls.iter().map(crate::Acl::of_raw).collect()
}

/// Raw ACL entries of zk-curator's (e.g. for a raw `set_acl`).
pub fn acls_to_raw(acls: &[crate::Acl]) -> Vec<Acl> {
    crate::framework::acl::to_raw(acls)
}

/// zk-curator's error for a raw error on `path`.
pub fn error(path: &str, source: Error) -> crate::Error {
    crate::Error::zk(path, source)
}

/// The raw error behind `err`, where it came from the client underneath (an
/// [`Error::ZooKeeper`](crate::Error::ZooKeeper) or [`Error::Connect`](crate::Error::Connect) it
/// reported; `None` for errors zk-curator concluded itself).
pub fn client_error(err: &crate::Error) -> Option<&Error> {
    match err {
        crate::Error::ZooKeeper { detail, .. } | crate::Error::Connect { detail, .. } => {
            detail.cause()?.downcast_ref::<Error>()
        }
        _ => None,
    }
}

/// zk-curator's TLS options made of raw ones (e.g. with dynamic certificates).
#[cfg(feature = "tls")]
#[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
pub fn tls_options(options: TlsOptions) -> crate::framework::TlsOptions {
    crate::framework::TlsOptions(options)
}

/// zk-curator's SASL options made of raw ones (e.g. GSSAPI, with zookeeper-client's
/// `sasl-gssapi` feature enabled by the application).
#[cfg(feature = "sasl")]
#[cfg_attr(docsrs, doc(cfg(feature = "sasl")))]
pub fn sasl_options(options: impl Into<SaslOptions>) -> crate::framework::SaslOptions {
    crate::framework::SaslOptions(options.into())
}

/// Ends a raw `session` on the server as if it expired (see
/// [`testing::expire_session`](crate::testing::expire_session) for a [`CuratorClient`]'s).
///
/// # Errors
/// As [`testing::expire_session`](crate::testing::expire_session).
///
/// # Cancel safety
/// Not cancel safe: a dropped call may or may not have closed the session.
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub async fn expire_session(connect: &str, session: &SessionInfo) -> crate::testing::TestingResult<()> {
    crate::testing::expire_raw_session(connect, session).await
}
