//! Session fault injection ([`expire_session`]) and the `ZK_CONNECT` override.

use std::time::{Duration, Instant};

use zookeeper_client::{Client, SessionInfo};

use super::{TestingError, TestingResult};

/// Overall time [`expire_session`] may take.
const EXPIRE_TIMEOUT: Duration = Duration::from_secs(20);
/// Time one connection attempt of [`expire_session`] may take.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(5);
/// Time to wait for the closing client to finish its `CloseSession` exchange.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);
/// Pause between attempts after a transient failure.
const RETRY_PAUSE: Duration = Duration::from_millis(50);

/// Ends `session` on the server side now, as if it had expired: the server deletes the
/// session's ephemeral nodes, and the client owning it gets `SessionExpired` (its state watcher
/// reports [`Expired`](zookeeper_client::SessionState::Expired)) the next time it reaches the
/// server. `connect` is the server or ensemble connect string (not a blackholed proxy).
///
/// This is the technique of older Curator tests: it opens a second connection with the same
/// session id and password (`Connector::with_session`), which also makes the server drop the
/// original client's connection, and then drops that client so it sends `CloseSession`. It
/// returns once connecting with the session is refused with `SessionExpired`, i.e. the close
/// has been applied (retrying if the original client re-attached in between).
///
/// # Errors
/// * [`TestingError::ZooKeeper`] for a non-transient client error (e.g. a read-only session);
/// * [`TestingError::NotReady`] when the session is still alive after 20 s (server unreachable).
pub async fn expire_session(connect: &str, session: &SessionInfo) -> TestingResult<()> {
    let started = Instant::now();
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
                    source,
                })
            }
            Ok(Ok(client)) => {
                // Dropping the last handle makes the client send CloseSession; its state turns
                // terminal (Closed, or Expired if it had to reconnect) once that is done. The
                // next loop iteration verifies that the server has forgotten the session.
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
