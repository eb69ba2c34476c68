//! The crate's one error type and its classification.

use std::sync::Arc;
use std::time::Duration;

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
    /// The hold the call stands on was lost (its node is gone or its session ended) before the
    /// call could do anything: a guarded write, a re-entry, a downgrade. See [`Error::LockLost`].
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
///
/// `Display` describes this error only; what caused it (the ZooKeeper client's error and its own
/// causes) is its [`source`](std::error::Error::source), so a report that prints the error and then
/// walks `source()` (as `anyhow`'s and `eyre`'s do) says each thing once:
///
/// ```text
/// zookeeper error NoNode on /config/a
/// Caused by: node not exists
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Error {
    /// A ZooKeeper path failed Curator's validation rules.
    InvalidPath {
        /// The offending path, as given.
        path: String,
        /// Which rule it breaks.
        reason: &'static str,
    },

    /// An argument other than a path is out of range or malformed.
    InvalidArgument {
        /// The argument's name.
        name: &'static str,
        /// Its value, rendered for humans.
        value: String,
        /// Which rule it breaks.
        reason: &'static str,
    },

    /// The caller does not hold the lock it tried to release (Curator's `IllegalMonitorStateException`).
    NotOwner {
        /// The lock path.
        path: String,
        /// Why the ownership check failed.
        reason: &'static str,
    },

    /// A call that stands on a hold found it lost (its node gone, or its session ended), and did
    /// nothing: a guarded write (nothing written), re-entering a lost hold, downgrading a lost
    /// write hold, or a semaphore waiter whose turn on the internal lock was lost.
    LockLost {
        /// The lock node that was expected to exist.
        node: String,
        /// What was observed.
        reason: &'static str,
    },

    /// The call could never succeed as made: it would wait for the caller itself (e.g. the write
    /// lock wanted by a task that holds the read lock — no upgrade).
    WouldDeadlock {
        /// The lock path.
        path: String,
        /// Why.
        reason: &'static str,
    },

    /// Several operations failed (e.g. releasing a multi-lock, which attempts every lock).
    Multiple {
        /// Every failure, in the order they happened.
        errors: Vec<Error>,
    },

    /// The caller's deadline passed.
    DeadlineExceeded {
        /// The path the operation was about.
        path: String,
        /// What was going on.
        during: &'static str,
        /// How long the call waited, from its start.
        waited: Duration,
        /// The timeout the caller set (`.timeout(d)`, a `_for(d)` or `_timeout(d)` call); `None`
        /// for a deadline given as an instant ([`raw::with_retry`](crate::raw::with_retry)) or set
        /// by the crate itself (e.g. a release's wait for its delete).
        timeout: Option<Duration>,
    },

    /// The client was closed.
    Closed {
        /// The path the operation was about ("" when none).
        path: String,
    },

    /// ZooKeeper (or the connection to it) returned an error for an operation on `path`.
    ///
    /// Match on [`code`](ErrorCode) (also [`Error::code`]); `detail` is the client's wording,
    /// for humans, and the error's [`source`](std::error::Error::source) (none when the crate
    /// concluded the error itself and the detail would only repeat the code).
    ZooKeeper {
        /// The path the operation was about (as the caller sees it, without namespace).
        path: String,
        /// What went wrong, as ZooKeeper classifies it.
        code: ErrorCode,
        /// The underlying client's error (e.g. how long the connection was silent).
        detail: ErrorDetail,
    },

    /// One operation of a transaction (a [`Transaction`](crate::Transaction) or a guarded
    /// write) failed; nothing of the transaction was applied.
    TransactionFailed {
        /// The failed operation's position in the transaction, from 0 (its ops only; a guarded
        /// write's lock check is not counted).
        index: usize,
        /// Its path (as the caller gave it, without namespace).
        path: String,
        /// Why it failed.
        code: ErrorCode,
    },

    /// A node holds data that is not what the recipe reading it stores there (a counter of
    /// another size, bytes written by someone else). Nothing was written.
    CorruptedValue {
        /// The node's path.
        path: String,
        /// The length of the data found.
        len: usize,
        /// What the recipe expected (e.g. "8 bytes (a big-endian i64) or none").
        expected: &'static str,
    },

    /// A node holds data its reader cannot parse, written by someone else (e.g. a service
    /// instance whose JSON is not Curator's `ServiceInstance`). Nothing was written; a reader of
    /// many nodes reports it and goes on with the others.
    MalformedData {
        /// The node's path.
        path: String,
        /// What was expected there (e.g. "a service instance").
        expected: &'static str,
        /// Why it could not be read.
        reason: String,
    },

    /// A conditional write was sent, its reply was lost, and what the server holds now cannot
    /// tell whether it was applied: it was applied once or not at all, never twice. The caller
    /// decides (re-read, reconcile); retrying blindly could apply it twice.
    OutcomeUnknown {
        /// The node's path.
        path: String,
        /// What was being written.
        during: &'static str,
    },

    /// A bound the caller set was reached (e.g. a [`CuratorCache`](crate::cache::CuratorCache)'s
    /// `max_nodes`): the work stopped instead of growing past it.
    LimitExceeded {
        /// The path the bound is about.
        path: String,
        /// What was counted (e.g. "nodes").
        what: &'static str,
        /// The bound.
        limit: usize,
    },

    /// The queue had no item to return (Java's `NoSuchElementException` of Curator's
    /// `SimpleDistributedQueue.element()` / `remove()`).
    QueueEmpty {
        /// The queue's path.
        path: String,
    },

    /// The first connection could not be established.
    Connect {
        /// The connect string.
        connect: String,
        /// The schemes of the client's authorizations, and `sasl` when SASL is configured (never the
        /// credentials or the SASL user).
        schemes: Vec<String>,
        /// Whether the client connects over TLS.
        tls: bool,
        /// Why, as ZooKeeper classifies it (e.g. [`ErrorCode::AuthFailed`],
        /// [`ErrorCode::NoHosts`]).
        code: ErrorCode,
        /// The underlying client's error.
        detail: ErrorDetail,
    },
}

/// The underlying client's error behind an [`Error::ZooKeeper`] or [`Error::Connect`]: its wording
/// (which this derefs to as a `str`) and, through [`source`](std::error::Error::source), whatever
/// caused it.
///
/// It is the error's [`source`](std::error::Error::source) (the error's own `Display` names the
/// path and the code, not this wording), so a walk down the `source()` chain (`anyhow` and `eyre`
/// reports print it) reaches the ZooKeeper client's error and its causes, each once, while no type
/// of the ZooKeeper client crate appears in this crate's API (only [`raw`](crate::raw) names it).
/// Errors the crate concludes itself (e.g. a session found expired) carry their code's wording and
/// no further cause; such an error has no `source()`, its code says it all.
///
/// ```
/// use std::error::Error as _;
/// # fn demo(err: zk_curator::Error) {
/// if let zk_curator::Error::ZooKeeper { detail, .. } = &err {
///     println!("the client said: {detail}");
/// }
/// // An error report: this error, then each cause once.
/// let mut report = err.to_string();
/// let mut cause = err.source();
/// while let Some(c) = cause {
///     report += &format!(": {c}");
///     cause = c.source();
/// }
/// # }
/// ```
#[derive(Clone)]
pub struct ErrorDetail(Arc<Detail>);

/// Behind one pointer, so that the detail keeps [`Error`](enum@Error) small.
struct Detail {
    message: String,
    cause: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl ErrorDetail {
    /// The detail of a client error: its wording, and its own causes.
    pub(crate) fn of(cause: impl std::error::Error + Send + Sync + 'static) -> ErrorDetail {
        ErrorDetail(Arc::new(Detail { message: cause.to_string(), cause: Some(Box::new(cause)) }))
    }

    /// The client's error itself, for [`raw::client_error`](crate::raw::client_error).
    pub(crate) fn cause(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        self.0.cause.as_deref()
    }

    /// The wording, as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0.message
    }
}

impl From<String> for ErrorDetail {
    /// A detail that is only a wording, with no cause underneath.
    fn from(message: String) -> ErrorDetail {
        ErrorDetail(Arc::new(Detail { message, cause: None }))
    }
}

impl From<&str> for ErrorDetail {
    /// A detail that is only a wording, with no cause underneath.
    fn from(message: &str) -> ErrorDetail {
        ErrorDetail::from(message.to_string())
    }
}

impl std::ops::Deref for ErrorDetail {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0.message
    }
}

impl AsRef<str> for ErrorDetail {
    fn as_ref(&self) -> &str {
        &self.0.message
    }
}

impl PartialEq<str> for ErrorDetail {
    fn eq(&self, other: &str) -> bool {
        self.0.message == other
    }
}

impl PartialEq<&str> for ErrorDetail {
    fn eq(&self, other: &&str) -> bool {
        self.0.message == *other
    }
}

impl PartialEq<String> for ErrorDetail {
    fn eq(&self, other: &String) -> bool {
        self.0.message == *other
    }
}

impl std::fmt::Display for ErrorDetail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.message)
    }
}

impl std::fmt::Debug for ErrorDetail {
    /// As the wording (a `String`'s `Debug`): what `Debug` of an [`Error`](enum@Error) showed before the detail
    /// kept its cause.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&self.0.message, f)
    }
}

impl ErrorDetail {
    /// True when the detail says more than `code`'s own wording: a client's error, or words of
    /// the crate's own (a detail made from the code alone would only repeat it).
    fn adds_to(&self, code: ErrorCode) -> bool {
        self.0.cause.is_some() || self.0.message != code.to_string()
    }
}

impl std::error::Error for ErrorDetail {
    /// The cause of the client's error, if it has one (the detail stands for the client's error
    /// itself: same wording). Causes whose wording the client's error already printed (some of
    /// its errors print their source in their `Display`) are skipped, so a report says each once.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        let mut next = self.0.cause.as_deref()?.source();
        while let Some(cause) = next {
            if !self.0.message.contains(&cause.to_string()) {
                return Some(cause);
            }
            next = cause.source();
        }
        None
    }
}

impl std::fmt::Display for Error {
    /// This error only: the path or value it is about, and what went wrong at this layer. The
    /// cause, if any, is [`source`](std::error::Error::source).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::InvalidPath { path, reason } => write!(f, "invalid path {path:?}: {reason}"),
            Error::InvalidArgument { name, value, reason } => write!(f, "invalid argument {name}={value}: {reason}"),
            Error::NotOwner { path, reason } => write!(f, "not the owner of lock {path}: {reason}"),
            Error::LockLost { node, reason } => write!(f, "lock {node} was lost: {reason}"),
            Error::WouldDeadlock { path, reason } => write!(f, "would deadlock on lock {path}: {reason}"),
            Error::Multiple { errors } => {
                // No single source: each failure is told here with its causes.
                write!(f, "{} failures: ", errors.len())?;
                for (i, error) in errors.iter().enumerate() {
                    if i > 0 {
                        f.write_str("; ")?;
                    }
                    write!(f, "{error}")?;
                    let mut cause = std::error::Error::source(error);
                    while let Some(c) = cause {
                        write!(f, ": {c}")?;
                        cause = c.source();
                    }
                }
                Ok(())
            }
            Error::DeadlineExceeded { path, during, waited, timeout } => {
                f.write_str(&deadline_text(timeout, during, path, waited))
            }
            Error::Closed { path } => write!(f, "client closed (while working on {path})"),
            Error::ZooKeeper { path, code, .. } => write!(f, "zookeeper error on {path}: {code}"),
            Error::TransactionFailed { index, path, code } => {
                write!(f, "transaction failed at operation {index} on {path}: {code}")
            }
            Error::CorruptedValue { path, len, expected } => {
                write!(f, "corrupted value in {path}: {len} bytes, expected {expected}")
            }
            Error::MalformedData { path, expected, reason } => {
                write!(f, "malformed data in {path}: not {expected} ({reason})")
            }
            Error::OutcomeUnknown { path, during } => {
                write!(f, "outcome unknown for {during} {path}: the reply was lost and the node changed since")
            }
            Error::LimitExceeded { path, what, limit } => {
                write!(f, "limit exceeded under {path}: more than {limit} {what}")
            }
            Error::QueueEmpty { path } => write!(f, "queue {path} is empty"),
            Error::Connect { connect, schemes, tls, code, .. } => {
                write!(f, "could not connect to {connect}{}: {code}{}", auth_note(schemes), tls_note(*tls, *code))
            }
        }
    }
}

impl std::error::Error for Error {
    /// The underlying client's error of [`Error::ZooKeeper`] and [`Error::Connect`] (their
    /// `detail`), unless it would only repeat the code; `None` for every other variant.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::ZooKeeper { code, detail, .. } | Error::Connect { code, detail, .. } if detail.adds_to(*code) => {
                Some(detail)
            }
            _ => None,
        }
    }
}

fn tls_note(tls: bool, code: ErrorCode) -> &'static str {
    // zookeeper-client reports a failed TLS handshake only as "no hosts" or a timeout.
    let unreachable = matches!(code, ErrorCode::OperationTimeout | ErrorCode::NoHosts);
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

/// [`Error::DeadlineExceeded`]'s text: the caller's timeout when known, and how long the call
/// waited.
fn deadline_text(timeout: &Option<Duration>, during: &str, path: &str, waited: &Duration) -> String {
    match timeout {
        Some(timeout) => format!("deadline of {timeout:?} exceeded while {during} {path} (after {waited:?})"),
        None => format!("deadline exceeded while {during} {path} (after {waited:?})"),
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
            Error::ZooKeeper { code, .. } | Error::Connect { code, .. } | Error::TransactionFailed { code, .. } => {
                code.kind()
            }
            Error::Multiple { errors } => errors.first().map_or(ErrorKind::Other, Error::kind),
            Error::CorruptedValue { .. }
            | Error::MalformedData { .. }
            | Error::OutcomeUnknown { .. }
            | Error::LimitExceeded { .. }
            | Error::QueueEmpty { .. } => ErrorKind::Other,
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

    /// The ZooKeeper error code behind this error, if it came from ZooKeeper or the connection
    /// to it (for [`Error::Multiple`], the first error's).
    ///
    /// ```
    /// use zk_curator::{Error, ErrorCode};
    ///
    /// fn already_there(err: &Error) -> bool {
    ///     err.code() == Some(ErrorCode::NodeExists)
    /// }
    /// ```
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            Error::ZooKeeper { code, .. } | Error::Connect { code, .. } | Error::TransactionFailed { code, .. } => {
                Some(*code)
            }
            Error::Multiple { errors } => errors.first().and_then(Error::code),
            _ => None,
        }
    }

    pub(crate) fn zk(path: &str, source: zookeeper_client::Error) -> Error {
        match source {
            zookeeper_client::Error::ClientClosed => Error::Closed { path: path.to_string() },
            source => Error::ZooKeeper {
                path: path.to_string(),
                code: ErrorCode::of(&source),
                detail: ErrorDetail::of(source),
            },
        }
    }

    /// A deadline error of a step of a call whose caller's timeout is not known there; the call's
    /// entry point names it ([`Error::naming_timeout`]).
    pub(crate) fn deadline_exceeded(path: &str, during: &'static str, waited: Duration) -> Error {
        Error::DeadlineExceeded { path: path.to_string(), during, waited, timeout: None }
    }

    /// This error as the caller of a call with `timeout` that began `waited` ago sees it: a
    /// deadline error (also one among several) names that timeout and the whole wait, not the
    /// remainder an inner step had left.
    pub(crate) fn naming_timeout(self, timeout: Duration, waited: Duration) -> Error {
        match self {
            Error::DeadlineExceeded { path, during, .. } => {
                Error::DeadlineExceeded { path, during, waited, timeout: Some(timeout) }
            }
            Error::Multiple { errors } => {
                Error::Multiple { errors: errors.into_iter().map(|e| e.naming_timeout(timeout, waited)).collect() }
            }
            other => other,
        }
    }

    /// An error with `code` on `path`, worded as the code.
    pub(crate) fn code_on(path: &str, code: ErrorCode) -> Error {
        Error::ZooKeeper { path: path.to_string(), code, detail: code.to_string().into() }
    }

    /// True when this is [`Error::ZooKeeper`] with `code`.
    pub(crate) fn is(&self, wanted: ErrorCode) -> bool {
        matches!(self, Error::ZooKeeper { code, .. } if *code == wanted)
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

/// ZooKeeper's error codes (`KeeperException.Code`), and the few conditions the client itself
/// reports; see [`Error::code`]. [`kind`](Self::kind) gives the same classification as
/// [`Error::kind`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// The connection to the server was lost; the outcome of a request in flight is unknown, the
    /// session may still be alive. Also a connection the client gave up because the server
    /// stopped answering.
    ConnectionLoss,
    /// The operation (or connecting) did not complete in time.
    OperationTimeout,
    /// No server of the connect string could be reached.
    NoHosts,
    /// The session moved to another server.
    SessionMoved,
    /// The server throttled the request.
    Throttled,
    /// The session expired (or was closed); its ephemeral nodes are gone.
    SessionExpired,
    /// The node does not exist.
    NoNode,
    /// The node already exists.
    NodeExists,
    /// The node's version is not the expected one.
    BadVersion,
    /// The node has children.
    NotEmpty,
    /// Ephemeral nodes cannot have children.
    NoChildrenForEphemerals,
    /// The node's ACL does not grant the operation to this client's identities.
    NoAuth,
    /// The server rejected the client's credentials.
    AuthFailed,
    /// The ACL is invalid (e.g. empty, or `auth` without an authenticated identity).
    InvalidAcl,
    /// The server or client refused an argument (e.g. a TTL node on a server without
    /// `zookeeper.extendedTypesEnabled`).
    BadArguments,
    /// A write was sent to a read-only server.
    NotReadOnly,
    /// The watch to remove does not exist.
    NoWatcher,
    /// A quota was exceeded.
    QuotaExceeded,
    /// The server does not implement the operation.
    Unimplemented,
    /// Dynamic reconfiguration is disabled.
    ReconfigDisabled,
    /// The request or reply could not be (un)marshalled.
    MarshallingError,
    /// A condition of a multi-operation failed in a way the client could not attribute
    /// (`RuntimeInconsistency`).
    RuntimeInconsistency,
    /// A code this crate does not know (the number ZooKeeper sent).
    Unknown(i32),
    /// Another client-side failure; the error's detail says what.
    Other,
}

impl ErrorCode {
    /// The classification of an error with this code (as [`Error::kind`]).
    pub fn kind(self) -> ErrorKind {
        use ErrorCode::*;
        match self {
            ConnectionLoss | OperationTimeout | SessionMoved | Throttled | NoHosts => ErrorKind::Retryable,
            SessionExpired => ErrorKind::SessionLost,
            NoAuth | AuthFailed => ErrorKind::NotAuthorized,
            BadArguments | InvalidAcl => ErrorKind::BadArgument,
            RuntimeInconsistency => ErrorKind::LockLost,
            _ => ErrorKind::Other,
        }
    }

    /// ZooKeeper's number for this code (`KeeperException.Code.intValue()`), where it has one.
    pub fn as_i32(self) -> Option<i32> {
        use ErrorCode::*;
        Some(match self {
            RuntimeInconsistency => -2,
            ConnectionLoss => -4,
            MarshallingError => -5,
            Unimplemented => -6,
            OperationTimeout => -7,
            BadArguments => -8,
            ReconfigDisabled => -123,
            NoNode => -101,
            NoAuth => -102,
            BadVersion => -103,
            NoChildrenForEphemerals => -108,
            NodeExists => -110,
            NotEmpty => -111,
            SessionExpired => -112,
            InvalidAcl => -114,
            AuthFailed => -115,
            SessionMoved => -118,
            NotReadOnly => -119,
            NoWatcher => -121,
            QuotaExceeded => -125,
            Throttled => -127,
            Unknown(code) => code,
            NoHosts | Other => return None,
        })
    }

    /// The code of a `zookeeper-client` error.
    ///
    /// `zookeeper-client` reports a disconnect noticed through an I/O error or an idle timeout as
    /// `Error::Custom` ("no response from connection in …ms"; see `src/session/mod.rs` of
    /// `zookeeper-client` 0.11), not `ConnectionLoss`; both mean "the request's outcome is
    /// unknown, the session may still be alive", so both are `ConnectionLoss`.
    pub(crate) fn of(err: &zookeeper_client::Error) -> ErrorCode {
        use zookeeper_client::Error as Zk;
        match err {
            Zk::ConnectionLoss | Zk::Custom(_) => ErrorCode::ConnectionLoss,
            Zk::Timeout => ErrorCode::OperationTimeout,
            Zk::NoHosts => ErrorCode::NoHosts,
            Zk::SessionMoved => ErrorCode::SessionMoved,
            Zk::Throttled => ErrorCode::Throttled,
            Zk::SessionExpired | Zk::ClientClosed => ErrorCode::SessionExpired,
            Zk::NoNode => ErrorCode::NoNode,
            Zk::NodeExists => ErrorCode::NodeExists,
            Zk::BadVersion => ErrorCode::BadVersion,
            Zk::NotEmpty => ErrorCode::NotEmpty,
            Zk::NoChildrenForEphemerals => ErrorCode::NoChildrenForEphemerals,
            Zk::NoAuth => ErrorCode::NoAuth,
            Zk::AuthFailed => ErrorCode::AuthFailed,
            Zk::InvalidAcl => ErrorCode::InvalidAcl,
            Zk::BadArguments(_) => ErrorCode::BadArguments,
            Zk::NotReadOnly => ErrorCode::NotReadOnly,
            Zk::NoWatcher => ErrorCode::NoWatcher,
            Zk::QuotaExceeded => ErrorCode::QuotaExceeded,
            Zk::Unimplemented => ErrorCode::Unimplemented,
            Zk::ReconfigDisabled => ErrorCode::ReconfigDisabled,
            Zk::MarshallingError | Zk::UnmarshalError { .. } => ErrorCode::MarshallingError,
            Zk::RuntimeInconsistent => ErrorCode::RuntimeInconsistency,
            Zk::UnexpectedErrorCode(code) => ErrorCode::Unknown(*code),
            _ => ErrorCode::Other,
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ErrorCode::Unknown(code) => write!(f, "unknown error code {code}"),
            other => std::fmt::Debug::fmt(other, f),
        }
    }
}

/// Classifies a raw `zookeeper-client` error.
pub(crate) fn classify(err: &zookeeper_client::Error) -> ErrorKind {
    match err {
        zookeeper_client::Error::ClientClosed => ErrorKind::Closed,
        other => ErrorCode::of(other).kind(),
    }
}

/// Whether a request that failed with `err` may have been applied by the server: no answer came
/// (connection lost or idle, timed out, or the session ended — or the client closed — while it
/// was in flight). A request the server refused (`Throttled`, `SessionMoved`, any result code) or
/// that was never sent (`NoHosts`) is known not applied. Used where a write's outcome decides
/// between sending it again and reporting it unknown.
pub(crate) fn outcome_unknown(err: &zookeeper_client::Error) -> bool {
    matches!(ErrorCode::of(err), ErrorCode::ConnectionLoss | ErrorCode::OperationTimeout | ErrorCode::SessionExpired)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_unanswered_requests_have_an_unknown_outcome() {
        use zookeeper_client::Error as Zk;
        for unknown in [Zk::ConnectionLoss, Zk::Timeout, Zk::SessionExpired, Zk::ClientClosed] {
            assert!(outcome_unknown(&unknown), "{unknown:?} may have been applied");
        }
        for refused in [Zk::Throttled, Zk::SessionMoved, Zk::NoHosts, Zk::NoNode, Zk::NodeExists, Zk::NoAuth] {
            assert!(!outcome_unknown(&refused), "{refused:?} is known not applied");
        }
    }

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

    #[test]
    fn codes_are_ours_and_keep_the_detail() {
        use zookeeper_client::Error as Zk;
        let e = Error::zk("/a", Zk::NoNode);
        assert_eq!(e.code(), Some(ErrorCode::NoNode));
        assert_eq!(ErrorCode::NoNode.as_i32(), Some(-101));
        assert!(e.to_string().contains("/a"), "{e}");
        let bad = Error::zk("/b", Zk::BadArguments(&"ttl is zero"));
        assert_eq!(bad.code(), Some(ErrorCode::BadArguments));
        let cause = std::error::Error::source(&bad).map(|c| c.to_string()).unwrap_or_default();
        assert!(cause.contains("ttl is zero"), "the detail is kept: {bad} / {cause}");
        assert_eq!(Error::zk("/c", Zk::UnexpectedErrorCode(-999)).code(), Some(ErrorCode::Unknown(-999)));
        assert!(matches!(crate::raw::client_error(&bad), Some(Zk::BadArguments(_))), "the raw error is kept");
        assert!(crate::raw::client_error(&Error::code_on("/d", ErrorCode::NoNode)).is_none());
        assert_eq!(Error::InvalidPath { path: "a".into(), reason: "r" }.code(), None);
    }

    /// What an `anyhow` report prints: the error, then each `source()` in turn.
    fn report(error: &dyn std::error::Error) -> Vec<String> {
        let mut links = vec![error.to_string()];
        let mut cause = error.source();
        while let Some(c) = cause {
            links.push(c.to_string());
            cause = c.source();
        }
        links
    }

    fn assert_each_cause_once(error: &dyn std::error::Error) {
        let links = report(error);
        for (i, outer) in links.iter().enumerate() {
            for inner in &links[i + 1..] {
                assert!(!outer.contains(inner.as_str()), "{inner:?} is printed twice in {links:?}");
            }
        }
    }

    /// A client error that prints its cause in its `Display` too, as `zookeeper-client`'s custom
    /// errors do ("{message}: {source}").
    #[derive(Debug)]
    struct Wrapping(std::io::Error);

    impl std::fmt::Display for Wrapping {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "reading from the connection: {}", self.0)
        }
    }

    impl std::error::Error for Wrapping {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn every_variant_prints_each_cause_once() {
        use zookeeper_client::Error as Zk;
        let wrapped = || ErrorDetail::of(Wrapping(std::io::Error::other("broken pipe")));
        let errors = [
            Error::zk("/a", Zk::NoNode),
            Error::zk("/a", Zk::BadArguments(&"ttl is zero")),
            Error::code_on("/a", ErrorCode::SessionExpired),
            Error::ZooKeeper { path: "/a".into(), code: ErrorCode::ConnectionLoss, detail: wrapped() },
            Error::Connect {
                connect: "h:1".into(),
                schemes: vec!["digest".into()],
                tls: true,
                code: ErrorCode::NoHosts,
                detail: ErrorDetail::of(Zk::NoHosts),
            },
            Error::Connect {
                connect: "h:1".into(),
                schemes: vec![],
                tls: false,
                code: ErrorCode::Other,
                detail: wrapped(),
            },
            Error::Multiple { errors: vec![Error::zk("/a", Zk::NoNode), Error::zk("/b", Zk::NotEmpty)] },
            Error::TransactionFailed { index: 1, path: "/a".into(), code: ErrorCode::BadVersion },
            Error::deadline_exceeded("/a", "acquiring", Duration::from_millis(5)),
            Error::Closed { path: "/a".into() },
        ];
        for error in &errors {
            assert_each_cause_once(error);
        }
        // Each layer still says its part once: the path and code here, the client's words below.
        let links = report(&errors[0]);
        assert_eq!(links, ["zookeeper error on /a: NoNode", "node not exists"]);
        assert_eq!(report(&errors[2]), ["zookeeper error on /a: SessionExpired"], "no cause repeating the code");
        assert_eq!(
            report(&errors[3]),
            ["zookeeper error on /a: ConnectionLoss", "reading from the connection: broken pipe"]
        );
        let multiple = errors[6].to_string();
        assert!(multiple.contains("node not exists") && multiple.contains("/b"), "{multiple}");
    }
}
