//! The session's reconnect confirmation (`supervise()` in
//! src/framework/session.rs): RECONNECTED only once a request is answered on the new connection.

use crate::support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use zk_curator::leader::LeaderLatch;
use zk_curator::locks::HoldState;
use zk_curator::ConnectionState;

/// Hang guard of one wait.
const HANG: Duration = Duration::from_secs(20);

/// A proxy that, once `handshake_only` is set, closes the connections it has and lets through, on
/// new ones, only the server's first frame (the connect response), then drops every byte the
/// server sends (the connection stays open): zookeeper-client reports SyncConnected, and the
/// session is never re-established.
struct HandshakeOnlyProxy {
    port: u16,
    /// The upstream connect string's chroot (a shared test server gives each test one).
    chroot: String,
    handshake_only: Arc<AtomicBool>,
    connections: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
}

impl HandshakeOnlyProxy {
    async fn start(upstream: &str) -> HandshakeOnlyProxy {
        let (upstream, chroot) = support::split_chroot(upstream);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let handshake_only = Arc::new(AtomicBool::new(false));
        let connections: Arc<Mutex<Vec<tokio::task::AbortHandle>>> = Arc::default();
        let (only, conns) = (handshake_only.clone(), connections.clone());
        crate::support::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let only = only.load(Ordering::SeqCst);
                let upstream = upstream.clone();
                let task = crate::support::spawn(async move {
                    let Ok(server) = TcpStream::connect(&upstream).await else { return };
                    let (mut cr, mut cw) = client.into_split();
                    let (mut sr, mut sw) = server.into_split();
                    let up = async move {
                        let _ = tokio::io::copy(&mut cr, &mut sw).await;
                    };
                    let down = async move {
                        if only {
                            let mut len = [0u8; 4];
                            if sr.read_exact(&mut len).await.is_err() {
                                return;
                            }
                            let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
                            if sr.read_exact(&mut body).await.is_err() {
                                return;
                            }
                            let _ = cw.write_all(&len).await;
                            let _ = cw.write_all(&body).await;
                            // Then silence, the connection open.
                            let mut sink = [0u8; 4096];
                            while matches!(sr.read(&mut sink).await, Ok(n) if n > 0) {}
                            std::future::pending::<()>().await;
                        } else {
                            let _ = tokio::io::copy(&mut sr, &mut cw).await;
                        }
                    };
                    tokio::join!(up, down);
                });
                conns.lock().unwrap().push(task.abort_handle());
            }
        });
        HandshakeOnlyProxy { port, chroot, handshake_only, connections }
    }

    fn connect_string(&self) -> String {
        format!("127.0.0.1:{}{}", self.port, self.chroot)
    }

    fn set_handshake_only(&self, on: bool) {
        self.handshake_only.store(on, Ordering::SeqCst);
        for task in self.connections.lock().unwrap().drain(..) {
            task.abort();
        }
    }
}

/// Reconnects that get a connect response and nothing more (the session is never
/// re-established) must not end the suspension: the leadership is never `Held` again on that
/// session, and it is LOST before the server can expire the session (the LOST timer runs on
/// through the SyncConnected events); once the server answers again, a new term leads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnects_that_only_get_a_connect_response_do_not_end_the_suspension() {
    let server = support::server().await;
    let proxy = HandshakeOnlyProxy::start(&server.connect_string()).await;
    let client = support::client_with(&proxy.connect_string(), Duration::from_secs(4)).await;
    let path = support::unique_path("reconnect-review-handshake");
    let latch = LeaderLatch::new(&client, &path, "a").unwrap();
    latch.start().unwrap();
    assert!(latch.await_leadership_timeout(HANG).await.unwrap());
    let hold = latch.hold().expect("the leadership's hold");
    // Another participant, connected directly: it leads once the server expired a's session.
    let direct = support::client(&server.connect_string()).await;
    let other = LeaderLatch::new(&direct, &path, "b").unwrap();
    other.start().unwrap();
    let first_token = hold.fencing_token();
    let mut states = hold.watch_state();
    let mut connection = client.connection_states();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = {
        let seen = seen.clone();
        crate::support::spawn(async move {
            while let Some(state) = connection.next().await {
                seen.lock().unwrap().push(state);
                if state == ConnectionState::Lost {
                    return;
                }
            }
        })
    };
    proxy.set_handshake_only(true);
    let mut history = vec![HoldState::Held];
    let lost = tokio::time::timeout(HANG, async {
        loop {
            let state = *states.borrow_and_update();
            if history.last() != Some(&state) {
                history.push(state);
            }
            if state == HoldState::Lost {
                return;
            }
            if states.changed().await.is_err() {
                return;
            }
        }
    })
    .await;
    assert!(lost.is_ok(), "the leadership is not lost while no request is answered: {history:?}");
    assert_eq!(history, [HoldState::Held, HoldState::Suspended, HoldState::Lost], "held again on a dead session");
    let _ = tokio::time::timeout(HANG, record).await;
    let seen = seen.lock().unwrap().clone();
    assert!(!seen.contains(&ConnectionState::Reconnected), "RECONNECTED without an answer: {seen:?}");
    // Safety: when b leads, a has long known it does not.
    assert!(other.await_leadership_timeout(HANG).await.unwrap(), "b takes over once a's session expired");
    assert_eq!(hold.hold_state(), HoldState::Lost);
    assert!(!latch.has_leadership(), "a and b both lead");
    other.close().await.unwrap();
    direct.close().await;
    proxy.set_handshake_only(false);
    assert!(latch.await_leadership_timeout(HANG).await.unwrap(), "leads again once the server answers");
    assert!(latch.fencing_token().expect("a token") > first_token);
    latch.close().await.unwrap();
    client.close().await;
}

/// A server restarted under a suspended session: the client reconnects on the same session,
/// RECONNECTED (never LOST), and the same leadership is held again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_restarted_while_suspended_reconnects_the_same_session() {
    let mut server = support::owned_server().await;
    // A session long enough to outlast a JVM restart on a loaded machine: it must not be LOST.
    let client = support::client_with(&server.connect_string(), Duration::from_secs(30)).await;
    let path = support::unique_path("reconnect-review-restart");
    let latch = LeaderLatch::new(&client, &path, "a").unwrap();
    latch.start().unwrap();
    assert!(latch.await_leadership_timeout(HANG).await.unwrap());
    let token = latch.fencing_token().unwrap();
    let session = client.session();
    let mut connection = client.connection_states();
    tokio::time::timeout(HANG, server.restart()).await.expect("restart hung").expect("restart");
    let mut seen = Vec::new();
    tokio::time::timeout(HANG, async {
        while let Some(state) = connection.next().await {
            seen.push(state);
            if state == ConnectionState::Reconnected || state == ConnectionState::Lost {
                return;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no RECONNECTED after the restart: {seen:?}"));
    assert_eq!(seen.last(), Some(&ConnectionState::Reconnected), "{seen:?}");
    assert!(seen.contains(&ConnectionState::Suspended), "{seen:?}");
    assert_eq!(client.session(), session);
    // RECONNECTED is published once a request was answered: a hold is Held at once.
    assert!(latch.has_leadership(), "RECONNECTED but the leadership is not held");
    assert_eq!(latch.fencing_token(), Some(token));
    latch.close().await.unwrap();
    client.close().await;
}

/// A chroot that does not exist: `check_stat("/")` is answered "no node", which confirms the
/// reconnect like any answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_chroot_does_not_keep_a_reconnect_unconfirmed() {
    let server = support::server().await;
    let proxy = zk_curator::testing::FaultProxy::start(&server.connect_string()).await.unwrap();
    let chroot = support::unique_path("reconnect-review-no-such-chroot");
    let client = support::client_with(&format!("{}{chroot}", proxy.connect_string()), Duration::from_secs(10)).await;
    let mut connection = client.connection_states();
    proxy.set_mode(zk_curator::testing::ProxyMode::Cut);
    let mut seen = Vec::new();
    tokio::time::timeout(HANG, async {
        while let Some(state) = connection.next().await {
            seen.push(state);
            if state == ConnectionState::Suspended {
                return;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no SUSPENDED: {seen:?}"));
    proxy.set_mode(zk_curator::testing::ProxyMode::Pass);
    tokio::time::timeout(HANG, async {
        while let Some(state) = connection.next().await {
            seen.push(state);
            if state == ConnectionState::Reconnected || state == ConnectionState::Lost {
                return;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no RECONNECTED: {seen:?}"));
    assert_eq!(seen.last(), Some(&ConnectionState::Reconnected), "{seen:?}");
    client.close().await;
}
