//! Session fault injection ([`expire_session`]) and the `ZK_CONNECT` override.
//!
//! # Why `expire_session` speaks a little raw protocol
//!
//! The textbook way (older Curator tests) is: connect a second client with the victim's session
//! id and password, then close it. With `zookeeper-client` that is unreliable: re-attaching the
//! session makes the server drop the *owner's* connection, the owner reconnects within a
//! millisecond and takes the session back, which in turn kills the second client's connection
//! before it has sent `CloseSession` (observed: several seconds of ping-pong). So the harness
//! still lets `zookeeper-client` build the session-reattaching `ConnectRequest` (its password is
//! not public), captures that frame on a local listener, and then sends it to the server
//! **together with** a `CloseSession` request in a single write: the close is queued on the
//! server before the owner can react. A final check re-sends the `ConnectRequest`, which the
//! server must now refuse (session id 0).

use std::io;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use zookeeper_client::{Client, SessionInfo};

use super::{TestingError, TestingResult};

/// Overall time [`expire_session`] may take.
const EXPIRE_TIMEOUT: Duration = Duration::from_secs(20);
/// Time one exchange with one server may take.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(5);
/// Time to wait for the closing client of the fallback path to finish its `CloseSession`.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);
/// Pause between rounds after a transient failure.
const RETRY_PAUSE: Duration = Duration::from_millis(50);
/// Largest frame accepted from a peer (ZooKeeper's `jute.maxbuffer` default is about 1 MiB).
const MAX_FRAME: usize = 1 << 20;
/// Request xid of the injected `CloseSession`.
const CLOSE_XID: i32 = 0x5a4b_0001;
/// `OpCode::CloseSession`.
const OP_CLOSE_SESSION: i32 = -11;

/// Ends `client`'s current session on the server side now, as if it had expired: the server
/// deletes the session's ephemeral nodes, and the client sees `SessionExpired` the next time it
/// reaches the server (and reports [`ConnectionState::Lost`](crate::ConnectionState::Lost), then
/// opens a new session). `connect` is the server or ensemble connect string (not a blackholed proxy).
///
/// This is the technique of older Curator tests: re-attach to the session with its id and
/// password, then close it (see the module source for how it is made race free). It returns
/// once the server refuses the session and a later request on that server has completed, so
/// the ephemeral deletions are visible to clients of that server; clients on other ensemble
/// members may need a `sync` first.
///
/// # Errors
/// * [`TestingError::ZooKeeper`] for a non-transient client error (e.g. a read-only session,
///   which cannot be re-attached);
/// * [`TestingError::InvalidArgument`] for a connect string without hosts;
/// * [`TestingError::NotReady`] when the session is still alive after 20 s (server unreachable).
///
/// # Cancel safety
/// Not cancel safe: a dropped call may or may not have closed the session.
///
/// # Examples
/// ```no_run
/// # use zk_curator::testing::{expire_session, TestingServer};
/// # use zk_curator::CuratorClient;
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let server = TestingServer::start().await?;
/// let client = CuratorClient::connect(&server.connect_string()).await?;
/// expire_session(&server.connect_string(), &client).await?;
/// // The client goes LOST, then opens a new session by itself.
/// # Ok(()) }
/// ```
pub async fn expire_session(connect: &str, client: &crate::CuratorClient) -> TestingResult<()> {
    let raw = client.raw_client().map_err(|source| TestingError::ZooKeeper {
        context: format!("finding the current session of {client:?}"),
        source,
    })?;
    expire_raw_session(connect, raw.session()).await
}

/// [`expire_session`] of a raw session (public as [`raw::expire_session`](crate::raw::expire_session)).
pub(crate) async fn expire_raw_session(connect: &str, session: &SessionInfo) -> TestingResult<()> {
    let started = Instant::now();
    let hosts = parse_hosts(connect);
    if hosts.is_empty() {
        return Err(TestingError::InvalidArgument { message: format!("no hosts in connect string {connect:?}") });
    }
    let request = match capture_connect_request(session).await {
        Ok(request) => request,
        Err(CaptureError::Client(source)) => {
            return Err(TestingError::ZooKeeper {
                context: format!("re-attaching to session {} to close it", session.id()),
                source: crate::Error::zk("", source),
            })
        }
        Err(CaptureError::Protocol(err)) => {
            tracing::debug!(%err, "cannot capture the ConnectRequest; closing through a second client");
            return expire_via_client(connect, session, started).await;
        }
    };
    let not_ready = |started: Instant| TestingError::NotReady {
        what: format!("expiry of ZooKeeper session {} via {connect}", session.id()),
        waited: started.elapsed(),
    };
    loop {
        let mut progressed = false;
        for host in &hosts {
            let remaining = EXPIRE_TIMEOUT.saturating_sub(started.elapsed());
            if remaining.is_zero() {
                return Err(not_ready(started));
            }
            match tokio::time::timeout(remaining.min(ATTEMPT_TIMEOUT), close_raw(host, &request)).await {
                Ok(Ok(Outcome::Gone)) => {
                    barrier(host, EXPIRE_TIMEOUT.saturating_sub(started.elapsed())).await;
                    return Ok(());
                }
                Ok(Ok(Outcome::CloseSent)) => {
                    // Verify with the next round (on the same host first).
                    progressed = true;
                    break;
                }
                Ok(Err(err)) => tracing::debug!(%err, host, "expire_session exchange failed"),
                Err(_elapsed) => tracing::debug!(host, "expire_session exchange timed out"),
            }
        }
        if !progressed {
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }
}

/// `host` with `:2181` appended unless it has a port (`[v6]:port` literals included).
fn with_default_port(host: &str) -> String {
    let has_port = match host.strip_prefix('[') {
        Some(rest) => rest.split_once(']').is_some_and(|(_, tail)| tail.len() > 1 && tail.starts_with(':')),
        None => {
            host.rsplit_once(':').is_some_and(|(_, port)| !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()))
        }
    };
    if has_port {
        host.to_owned()
    } else {
        format!("{host}:2181")
    }
}

/// Hosts (`host:port`) of a connect string such as `tcp://a:1,b:2/chroot`; TLS hosts skipped.
fn parse_hosts(connect: &str) -> Vec<String> {
    connect
        .split(',')
        .filter_map(|host| {
            let host = host.trim();
            let host = host.strip_prefix("tcp://").unwrap_or(host);
            if host.contains("://") {
                return None;
            }
            let host = host.split('/').next().unwrap_or_default();
            if host.is_empty() {
                return None;
            }
            Some(with_default_port(host))
        })
        .collect()
}

enum CaptureError {
    /// The client refused before connecting (e.g. read-only session).
    Client(zookeeper_client::Error),
    /// The capture itself did not work; use the fallback.
    Protocol(io::Error),
}

/// Lets `zookeeper-client` connect with `session` to a local listener and returns its
/// `ConnectRequest` frame (length prefix included), which carries the session password.
async fn capture_connect_request(session: &SessionInfo) -> Result<Vec<u8>, CaptureError> {
    let listener = TcpListener::bind("127.0.0.1:0").await.map_err(CaptureError::Protocol)?;
    let addr = listener.local_addr().map_err(CaptureError::Protocol)?.to_string();
    let connect = Client::connector().with_session(session.clone()).with_fail_eagerly().connect(&addr);
    let capture = async {
        let (mut stream, _) = listener.accept().await?;
        read_frame(&mut stream).await
    };
    let raced = async {
        tokio::select! {
            frame = capture => frame.map_err(CaptureError::Protocol),
            result = connect => Err(match result {
                Err(err) => CaptureError::Client(err),
                Ok(_) => CaptureError::Protocol(io::Error::other("client connected to the capture listener")),
            }),
        }
    };
    match tokio::time::timeout(ATTEMPT_TIMEOUT, raced).await {
        Ok(result) => result,
        Err(_) => Err(CaptureError::Protocol(io::Error::new(io::ErrorKind::TimedOut, "no ConnectRequest captured"))),
    }
}

/// Result of one raw exchange.
enum Outcome {
    /// The server refused the session: it is closed (or closing) already.
    Gone,
    /// The server accepted the session and the `CloseSession` was sent (and maybe answered).
    CloseSent,
}

/// Sends `request` (a session-reattaching `ConnectRequest`) followed by `CloseSession`.
async fn close_raw(host: &str, request: &[u8]) -> io::Result<Outcome> {
    let mut stream = TcpStream::connect(host).await?;
    let _ = stream.set_nodelay(true);
    let mut out = Vec::with_capacity(request.len() + 12);
    out.extend_from_slice(request);
    out.extend_from_slice(&8i32.to_be_bytes());
    out.extend_from_slice(&CLOSE_XID.to_be_bytes());
    out.extend_from_slice(&OP_CLOSE_SESSION.to_be_bytes());
    stream.write_all(&out).await?;
    // ConnectResponse: i32 length, i32 protocolVersion, i32 timeOut, i64 sessionId, ...
    let response = read_frame(&mut stream).await?;
    let session_id = response
        .get(12..20)
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map(i64::from_be_bytes)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "short ConnectResponse"))?;
    if session_id == 0 {
        return Ok(Outcome::Gone);
    }
    // Wait for the close's reply (i32 length, i32 xid, ...); the server closes afterwards.
    // Either way the next round verifies.
    while let Ok(frame) = read_frame(&mut stream).await {
        if frame.get(4..8) == Some(&CLOSE_XID.to_be_bytes()[..]) {
            break;
        }
    }
    Ok(Outcome::CloseSent)
}

/// Reads one length-prefixed jute frame, returning it with its prefix.
async fn read_frame(stream: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).await?;
    let n = usize::try_from(i32::from_be_bytes(len))
        .ok()
        .filter(|&n| n <= MAX_FRAME)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad frame length"))?;
    let mut frame = vec![0u8; 4 + n];
    frame[..4].copy_from_slice(&len);
    stream.read_exact(&mut frame[4..]).await?;
    Ok(frame)
}

/// Creates (and drops) a fresh session on `host`. The server orders session creation after the
/// earlier close, so once this returns the close has been applied there, ephemeral deletions
/// included. Best effort.
async fn barrier(host: &str, timeout: Duration) {
    let connect = Client::connector().with_fail_eagerly().connect(host);
    if let Ok(Ok(client)) = tokio::time::timeout(timeout.min(ATTEMPT_TIMEOUT), connect).await {
        drop(client);
    }
}

/// Fallback: re-attach a second client and drop it so it sends `CloseSession`; repeat until
/// re-attaching fails with `SessionExpired`.
async fn expire_via_client(connect: &str, session: &SessionInfo, started: Instant) -> TestingResult<()> {
    loop {
        let remaining = EXPIRE_TIMEOUT.saturating_sub(started.elapsed());
        if remaining.is_zero() {
            return Err(TestingError::NotReady {
                what: format!("expiry of ZooKeeper session {} via {connect}", session.id()),
                waited: started.elapsed(),
            });
        }
        let attempt = Client::connector().with_session(session.clone()).with_fail_eagerly().connect(connect);
        match tokio::time::timeout(remaining.min(ATTEMPT_TIMEOUT), attempt).await {
            Err(_elapsed) => continue,
            Ok(Err(zookeeper_client::Error::SessionExpired)) => return Ok(()),
            Ok(Err(
                zookeeper_client::Error::ConnectionLoss
                | zookeeper_client::Error::NoHosts
                | zookeeper_client::Error::Timeout
                | zookeeper_client::Error::SessionMoved,
            )) => tokio::time::sleep(RETRY_PAUSE).await,
            Ok(Err(source)) => {
                return Err(TestingError::ZooKeeper {
                    context: format!("re-attaching to session {} to close it", session.id()),
                    source: crate::Error::zk("", source),
                })
            }
            Ok(Ok(client)) => {
                // Dropping the last handle makes the client send CloseSession; its state turns
                // terminal once that is done. The next round verifies.
                let mut watcher = client.state_watcher();
                drop(client);
                let closed = async {
                    while !watcher.peek_state().is_terminated() {
                        watcher.changed().await;
                    }
                };
                let _ = tokio::time::timeout(CLOSE_TIMEOUT, closed).await;
            }
        }
    }
}

/// The connect string in the environment variable `ZK_CONNECT`, if set and not empty.
///
/// When set, [`TestingServer::start`](super::TestingServer::start) uses that server instead of
/// starting one, so a suite can run against an existing ZooKeeper (e.g. in CI without Java).
pub fn zk_connect_override() -> Option<String> {
    let value = std::env::var("ZK_CONNECT").ok()?;
    let value = value.trim();
    (!value.is_empty()).then(|| value.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_of_connect_strings() {
        assert_eq!(parse_hosts("127.0.0.1:2181"), ["127.0.0.1:2181"]);
        assert_eq!(parse_hosts("tcp://a:1,b:2/chroot/x"), ["a:1", "b:2"]);
        assert_eq!(parse_hosts("a,b:3"), ["a:2181", "b:3"]);
        assert_eq!(parse_hosts("[::1]:2190,[::1]"), ["[::1]:2190", "[::1]:2181"]);
        assert_eq!(parse_hosts("tcp+tls://a:1,b:2"), ["b:2"]);
        assert!(parse_hosts("").is_empty());
    }
}
