//! The crate's one error type and its classification.

use std::time::Duration;

use thiserror::Error;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// How a caller should react to an [`Error`](enum@Error); see [`Error::kind`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A transient condition (connection loss, operation timeout, session moved, throttling): the same
    /// call may succeed later. The retry loop already retried as far as the retry policy allowed.
    Retryable,
    /// The ZooKeeper session ended (expired or was replaced); every ephemeral node of it, lock nodes
    /// included, is gone or going. Locks held through it are lost.
    SessionLost,
    /// The caller passed something invalid (path, name, lease count, duration), or asked for
    /// something that could never succeed (an upgrade that would deadlock). Nothing was sent.
    BadArgument,
    /// The caller does not own the lock or lease it tried to release or use.
    NotOwner,
    /// The lock was lost (its node is gone) before the guarded operation ran.
    LockLost,
    /// The client was closed; nothing more can be done with it.
    Closed,
    /// The caller's deadline passed before the operation could finish.
    DeadlineExceeded,
    /// The server refused for lack of permission (`NoAuth`: the node's ACL does not grant it to
    /// this client's identities) or rejected the client's credentials (`AuthFailed`). Not
    /// retried: the same call fails again until the ACL or the credentials change.
    NotAuthorized,
    /// Anything else the server refused (bad version, not empty, ...).
    Other,
}

/// Every error this crate returns.
///
/// Each variant names the path or value it is about. Use [`Error::kind`] for a small, stable
/// classification instead of matching variants.
#[derive(Debug, Error, Clone)]
#[non_exhaustive]
pub enum Error {
    /// A ZooKeeper path failed Curator's validation rules.
    #[error("invalid path {path:?}: {reason}")]
    InvalidPath {
        /// The offending path, as given.
        path: String,
        /// Which rule it breaks.
        reason: &'static str,
    },

    /// An argument other than a path is out of range or malformed.
    #[error("invalid argument {name}={value}: {reason}")]
    InvalidArgument {
        /// The argument's name.
        name: &'static str,
        /// Its value, rendered for humans.
        value: String,
        /// Which rule it breaks.
        reason: &'static str,
    },

    /// The caller does not hold the lock it tried to release (Curator's `IllegalMonitorStateException`).
    #[error("not the owner of lock {path}: {reason}")]
    NotOwner {
        /// The lock path.
        path: String,
        /// Why the ownership check failed.
        reason: &'static str,
    },

    /// A write guarded by a lock failed because the lock node no longer exists.
    #[error("lock {node} was lost before the guarded write: {reason}")]
    LockLost {
        /// The lock node that was expected to exist.
        node: String,
        /// What was observed.
        reason: &'static str,
    },

    /// The call could never succeed as made: it would wait for the caller itself (e.g. the write
    /// lock wanted by a task that holds the read lock — no upgrade).
    #[error("would deadlock on lock {path}: {reason}")]
    WouldDeadlock {
        /// The lock path.
        path: String,
        /// Why.
        reason: &'static str,
    },

    /// Several operations failed (e.g. releasing a multi-lock, which attempts every lock).
    #[error("{} failures: {}", errors.len(), errors.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("; "))]
    Multiple {
        /// Every failure, in the order they happened.
        errors: Vec<Error>,
    },

    /// The caller's deadline passed.
    #[error("deadline of {waited:?} exceeded while {during} {path}")]
    DeadlineExceeded {
        /// The path the operation was about.
        path: String,
        /// What was going on.
        during: &'static str,
        /// How long was waited.
        waited: Duration,
    },

    /// The client was closed.
    #[error("client closed (while working on {path})")]
    Closed {
        /// The path the operation was about ("" when none).
        path: String,
    },

    /// ZooKeeper (or the `zookeeper-client` connection) returned an error for an operation on `path`.
    #[error("zookeeper error on {path}: {source}")]
    ZooKeeper {
        /// The path the operation was about (as the caller sees it, without namespace).
        path: String,
        /// The underlying error.
        #[source]
        source: zookeeper_client::Error,
    },

    /// The first connection could not be established.
    #[error("could not connect to {connect}{}: {source}{}", auth_note(schemes), tls_note(*tls, source))]
    Connect {
        /// The connect string.
        connect: String,
        /// The schemes of the client's authorizations, and `sasl` when SASL is configured (never the
        /// credentials or the SASL user).
        schemes: Vec<String>,
        /// Whether the client connects over TLS.
        tls: bool,
        /// The underlying error.
        #[source]
        source: zookeeper_client::Error,
    },
}

fn tls_note(tls: bool, source: &zookeeper_client::Error) -> &'static str {
    // zookeeper-client reports a failed TLS handshake only as "no hosts" or a timeout.
    let unreachable = matches!(source, zookeeper_client::Error::Timeout | zookeeper_client::Error::NoHosts);
    if tls && unreachable {
        " (no TLS session could be established: is the server's certificate signed by a CA given to \
         `tls()`, does it name the host as written in the connect string, and does the server accept \
         the client certificate?)"
    } else {
        ""
    }
}

fn auth_note(schemes: &[String]) -> String {
    if schemes.is_empty() {
        String::new()
    } else {
        format!(" (authorizations: {})", schemes.join(", "))
    }
}

impl Error {
    /// The classification that tells the caller what to do next.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidPath { .. } | Error::InvalidArgument { .. } | Error::WouldDeadlock { .. } => {
                ErrorKind::BadArgument
            }
            Error::NotOwner { .. } => ErrorKind::NotOwner,
            Error::LockLost { .. } => ErrorKind::LockLost,
            Error::DeadlineExceeded { .. } => ErrorKind::DeadlineExceeded,
            Error::Closed { .. } => ErrorKind::Closed,
            Error::ZooKeeper { source, .. } | Error::Connect { source, .. } => classify(source),
            Error::Multiple { errors } => errors.first().map_or(ErrorKind::Other, Error::kind),
        }
    }

    /// True when the same call may succeed if tried again later.
    pub fn is_retryable(&self) -> bool {
        self.kind() == ErrorKind::Retryable
    }

    /// True when the ZooKeeper session behind the operation ended.
    pub fn is_session_lost(&self) -> bool {
        self.kind() == ErrorKind::SessionLost
    }

    /// The underlying `zookeeper-client` error, if any.
    pub fn zookeeper_error(&self) -> Option<&zookeeper_client::Error> {
        match self {
            Error::ZooKeeper { source, .. } | Error::Connect { source, .. } => Some(source),
            _ => None,
        }
    }

    pub(crate) fn zk(path: &str, source: zookeeper_client::Error) -> Error {
        match source {
            zookeeper_client::Error::ClientClosed => Error::Closed { path: path.to_string() },
            source => Error::ZooKeeper { path: path.to_string(), source },
        }
    }

    /// `Ok` for no errors, the error itself for one, [`Error::Multiple`] for several.
    pub(crate) fn from_many(mut errors: Vec<Error>) -> Result<()> {
        match errors.len() {
            0 => Ok(()),
            1 => Err(errors.remove(0)),
            _ => Err(Error::Multiple { errors }),
        }
    }

    pub(crate) fn invalid_argument(name: &'static str, value: impl ToString, reason: &'static str) -> Error {
        Error::InvalidArgument { name, value: value.to_string(), reason }
    }
}

/// Classifies a raw `zookeeper-client` error.
///
/// `zookeeper-client` reports a disconnect noticed through an I/O error or an idle timeout as
/// `Error::Custom` ("no response from connection in …ms"; see `src/session/mod.rs` of
/// `zookeeper-client` 0.11), not `ConnectionLoss`; both mean "the request's outcome is unknown,
/// the session may still be alive", so both are retryable.
pub(crate) fn classify(err: &zookeeper_client::Error) -> ErrorKind {
    use zookeeper_client::Error as Zk;
    match err {
        Zk::ConnectionLoss | Zk::Timeout | Zk::SessionMoved | Zk::Throttled | Zk::NoHosts | Zk::Custom(_) => {
            ErrorKind::Retryable
        }
        Zk::SessionExpired => ErrorKind::SessionLost,
        Zk::NoAuth | Zk::AuthFailed => ErrorKind::NotAuthorized,
        Zk::ClientClosed => ErrorKind::Closed,
        Zk::BadArguments(_) | Zk::InvalidAcl => ErrorKind::BadArgument,
        Zk::RuntimeInconsistent => ErrorKind::LockLost,
        _ => ErrorKind::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification_is_honest() {
        use zookeeper_client::Error as Zk;
        assert_eq!(classify(&Zk::ConnectionLoss), ErrorKind::Retryable);
        assert_eq!(classify(&Zk::SessionMoved), ErrorKind::Retryable);
        assert_eq!(classify(&Zk::SessionExpired), ErrorKind::SessionLost);
        assert_eq!(classify(&Zk::NoNode), ErrorKind::Other);
        assert_eq!(classify(&Zk::NoAuth), ErrorKind::NotAuthorized);
        assert_eq!(classify(&Zk::AuthFailed), ErrorKind::NotAuthorized);
        assert_eq!(Error::zk("/a", Zk::ClientClosed).kind(), ErrorKind::Closed);
        let e = Error::InvalidPath { path: "a".into(), reason: "must start with '/'" };
        assert_eq!(e.kind(), ErrorKind::BadArgument);
        assert!(e.to_string().contains("\"a\""));
    }
}
