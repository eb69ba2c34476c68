//! Framework-layer integration tests against a real ZooKeeper: builder validation and namespaces,
//! connection states across restarts / expiry / partitions, the retry loop, container parents,
//! protected creates under connection faults, guaranteed deletes and close.

use crate::support;

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use futures::FutureExt;
use zk_curator::framework::ConnectionStateStream;
use zk_curator::locks::InterProcessMutex;
use zk_curator::raw as zk;
use zk_curator::testing::{FaultProxy, ProxyMode, TestingServer};
use zk_curator::{ConnectionState, CuratorClient, Error, ErrorKind, RetryNTimes, RetryOneTime};

use ConnectionState::{Lost, Reconnected, Suspended};

// ---------------------------------------------------------------------------------------------
// helpers

/// Waits for the connection state `want`, allowing only the states in `allowed` before it.
/// Returns when it arrived.
async fn expect_state(
    states: &mut ConnectionStateStream,
    want: ConnectionState,
    allowed: &[ConnectionState],
    within: Duration,
) -> Instant {
    let deadline = Instant::now() + within;
    loop {
        let got = tokio::time::timeout_at(deadline.into(), states.next())
            .await
            .unwrap_or_else(|_| panic!("no {want} within {within:?}"))
            .expect("connection-state stream closed");
        if got == want {
            return Instant::now();
        }
        assert!(allowed.contains(&got), "expected {want}, got {got} first");
    }
}

/// A new subscription, whose first item must be the client's current state (so a subscriber made
/// after connecting still sees CONNECTED).
async fn subscribe(client: &CuratorClient) -> ConnectionStateStream {
    let mut states = client.connection_states();
    let first = tokio::time::timeout(Duration::from_secs(1), states.next()).await.expect("first state at once");
    assert_eq!(first, Some(client.connection_state()), "a new subscription starts with the current state");
    states
}

fn persistent() -> zk::CreateOptions<'static> {
    zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())
}

fn assert_bad_argument(err: &Error, value: &str) {
    assert_eq!(err.kind(), ErrorKind::BadArgument, "{err:?}");
    assert!(matches!(err, Error::InvalidArgument { .. } | Error::InvalidPath { .. }), "{err:?}");
    assert!(err.to_string().contains(value), "message {:?} does not name {value:?}", err.to_string());
}

fn assert_closed<T: std::fmt::Debug>(result: zk_curator::Result<T>, what: &str) {
    match result {
        Err(e @ Error::Closed { .. }) => assert_eq!(e.kind(), ErrorKind::Closed),
        other => panic!("{what} on a closed client: expected Error::Closed, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// 1

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn builder_and_namespace() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let client = support::namespaced_client(&connect, "app").await;
    assert_eq!(client.namespace(), "/app");
    let zk = support::observer(&connect).await;

    let created = client.create("/x/y").data(b"d").creating_parent_containers_if_needed().await.expect("create /x/y");
    assert_eq!(created, "/x/y", "the returned path is namespace-free");
    let (data, stat) = zk.get_data("/app/x/y").await.expect("/app/x/y exists on the server");
    assert_eq!(data, b"d");
    assert_eq!(stat.ephemeral_owner, 0);
    assert!(!support::exists(&zk, "/x").await, "nothing may be created outside the namespace");
    for parent in ["/app", "/app/x"] {
        let (data, stat) = zk.get_data(parent).await.unwrap_or_else(|e| panic!("{parent}: {e}"));
        assert!(data.is_empty(), "{parent} has data {data:?}");
        assert_eq!(stat.ephemeral_owner, 0, "{parent} is not ephemeral");
    }

    // Container parents vanish once empty (the server checks every 100 ms).
    client.delete_guaranteed("/x/y").await.expect("delete /x/y");
    assert!(!support::exists(&zk, "/app/x/y").await);
    let took = support::eventually(Duration::from_secs(2), "/app/x is reaped as an empty container", || async {
        !support::exists(&zk, "/app/x").await
    })
    .await;
    support::eventually(Duration::from_secs(2), "/app is reaped as an empty container", || async {
        !support::exists(&zk, "/app").await
    })
    .await;
    println!("container /app/x reaped {took:?} after its last child went");

    // Typed errors for bad builder inputs, naming the value; nothing is connected.
    let err = CuratorClient::builder("").connect().await.unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { name: "connect_string", .. }), "{err:?}");
    assert_bad_argument(&err, "connect_string");
    let err = CuratorClient::builder("  ").connect().await.unwrap_err();
    assert_bad_argument(&err, "connect_string");
    let err = CuratorClient::builder(&connect).session_timeout(Duration::ZERO).connect().await.unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { name: "session_timeout", .. }), "{err:?}");
    assert_bad_argument(&err, "session_timeout=0s");
    let err = CuratorClient::builder(&connect).namespace("a//b").connect().await.unwrap_err();
    assert!(matches!(&err, Error::InvalidPath { path, .. } if path == "/a//b"), "{err:?}");
    assert_bad_argument(&err, "a//b");

    // Invalid paths are refused before anything is sent.
    for bad in ["x/y", "/x/", "/x//y", "", "/x/./y"] {
        let err = client.create(bad).creating_parent_containers_if_needed().await.unwrap_err();
        assert!(matches!(&err, Error::InvalidPath { path, .. } if path == bad), "create {bad:?}: {err:?}");
        assert_bad_argument(&err, &format!("{bad:?}"));
        let err = client.delete_guaranteed(bad).await.unwrap_err();
        assert!(matches!(&err, Error::InvalidPath { path, .. } if path == bad), "delete {bad:?}: {err:?}");
        let err = client.delete_in_background(bad).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::BadArgument);
        let err = client.create(bad).with_protection().await.unwrap_err();
        assert!(matches!(&err, Error::InvalidPath { path, .. } if path == bad), "protected {bad:?}: {err:?}");
        let err = client.create(bad).mode(zk_curator::CreateMode::EphemeralSequential).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::BadArgument, "sequential {bad:?}: {err:?}");
    }
    assert!(
        support::sorted_children(&zk, "/").await.iter().all(|c| c == "zookeeper"),
        "a refused call left a node behind"
    );
    client.close().await;
}

/// The client-wide max data size is the server's default jute.maxbuffer less 4 KiB unless set on
/// the builder; a lower one is applied by every entry point (one check), and the builder refuses
/// a default data over it, or a limit of zero.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_max_data_size_is_configurable_and_covers_the_default_data() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let default = support::client(&connect).await;
    assert_eq!(default.max_data_size(), zk_curator::framework::DEFAULT_MAX_DATA_SIZE);
    assert_eq!(zk_curator::framework::DEFAULT_MAX_DATA_SIZE, 0xfffff - 4095, "jute.maxbuffer's default less 4 KiB - 1");
    default.close().await;

    let client = CuratorClient::builder(&connect).max_data_size(100).connect().await.unwrap();
    assert_eq!(client.max_data_size(), 100);
    let path = support::unique_path("max-data");
    let err = client.create(&path).data(vec![0; 101]).creating_parents_if_needed().await.unwrap_err();
    assert!(
        matches!(&err, Error::InvalidArgument { name: "data", value, .. } if value.contains("101 bytes")),
        "{err:?}"
    );
    let err = InterProcessMutex::with_data(&client, &path, vec![0; 101]).unwrap_err();
    assert_bad_argument(&err, &path);
    let mutex = InterProcessMutex::with_data(&client, &path, vec![5; 100]).unwrap();
    let guard = mutex.lock().await.unwrap();
    let (data, _) = client.get_data(guard.node_path()).await.unwrap();
    assert_eq!(data, vec![5; 100], "data of exactly the limit is written");
    guard.release().await.unwrap();
    client.close().await;

    let err = CuratorClient::builder(&connect).max_data_size(10).default_data(vec![0; 11]).connect().await.unwrap_err();
    assert!(
        matches!(&err, Error::InvalidArgument { name: "default_data", value, .. } if value.contains("11 bytes")),
        "{err:?}"
    );
    let err = CuratorClient::builder(&connect).max_data_size(0).connect().await.unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { name: "max_data_size", .. }), "{err:?}");
}

// ---------------------------------------------------------------------------------------------
// 2

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_sequence_on_server_restart() {
    support::init_tracing();
    let mut server = support::owned_server().await;
    let connect = server.connect_string();
    // The client gives the session up 0.5 x timeout after SUSPENDED, and one reconnect attempt that
    // lands on the half-started JVM can hang for zookeeper-client's connect timeout (0.4 x timeout):
    // 30 s leaves room for that on a loaded machine.
    let client = support::client_with(&connect, Duration::from_secs(30)).await;
    let before = client.session();
    assert_eq!(before.epoch, 1);
    assert_eq!(client.connection_state(), ConnectionState::Connected);
    let mut states = subscribe(&client).await;

    server.stop().await.expect("stop");
    let suspended = expect_state(&mut states, Suspended, &[], Duration::from_secs(8)).await;
    assert!(!client.is_connected());
    assert_eq!(client.connection_state(), Suspended);
    server.restart().await.expect("restart");
    let reconnected = expect_state(&mut states, Reconnected, &[], Duration::from_secs(15)).await;
    println!("suspended for {:?} across a server restart", reconnected - suspended);
    assert!(client.is_connected());
    assert_eq!(client.connection_state(), Reconnected);
    assert_eq!(client.session(), before, "a restart within the session timeout keeps the session");

    let path = support::unique_path("restart");
    client
        .create(&path)
        .data(b"ok")
        .mode(zk_curator::CreateMode::Ephemeral)
        .creating_parent_containers_if_needed()
        .await
        .expect("create after reconnect");
    let (_, stat) = support::observer(&connect).await.get_data(&path).await.expect("node exists");
    assert_eq!(stat.ephemeral_owner, before.id);
    assert!(states.try_next().is_none(), "no further state change expected");
    client.close().await;
}

// ---------------------------------------------------------------------------------------------
// 3

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forced_expiry_gives_lost_then_new_session() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let client = support::client(&connect).await;
    let before = client.session();
    let eph = support::unique_path("eph");
    client
        .create(&eph)
        .mode(zk_curator::CreateMode::Ephemeral)
        .creating_parent_containers_if_needed()
        .await
        .expect("ephemeral create");
    let zk = support::observer(&connect).await;
    assert!(support::exists(&zk, &eph).await);

    let mut states = subscribe(&client).await;
    let info = zk_curator::raw::client(&client).unwrap().session().clone();
    assert_eq!(info.id().0, before.id);
    zk_curator::raw::expire_session(&connect, &info).await.expect("expire_session");
    // The re-attach used to expire the session cuts our connection (SUSPENDED); our client may get
    // back onto the session before the close is applied (RECONNECTED), which expire_session retries.
    expect_state(&mut states, Lost, &[Suspended, Reconnected], Duration::from_secs(10)).await;
    expect_state(&mut states, Reconnected, &[], Duration::from_secs(10)).await;

    let after = client.session();
    assert_eq!(after.epoch, 2, "a new session was opened: {after:?}");
    assert_ne!(after.id, before.id);
    assert!(client.is_connected());
    assert_eq!(zk_curator::raw::client(&client).unwrap().session_id().0, after.id);

    assert!(!support::exists(&zk, &eph).await, "the old session's ephemeral node must be gone");
    let eph2 = support::unique_path("eph2");
    client
        .create(&eph2)
        .mode(zk_curator::CreateMode::Ephemeral)
        .creating_parent_containers_if_needed()
        .await
        .expect("create on the new session");
    let (_, stat) = zk.get_data(&eph2).await.unwrap();
    assert_eq!(stat.ephemeral_owner, after.id, "created by the new session");
    client.close().await;
}

// ---------------------------------------------------------------------------------------------
// 4

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspended_past_session_timeout_becomes_lost() {
    support::init_tracing();
    let server = support::server_with(TestingServer::builder().tick_time(Duration::from_millis(200))).await;
    let proxy = FaultProxy::start(&server.connect_string()).await.expect("proxy");
    let client =
        support::client_with_timeouts(&proxy.connect_string(), Duration::from_secs(2), Duration::from_secs(2)).await;
    let timeout = client.negotiated_session_timeout();
    assert_eq!(timeout, Duration::from_secs(2), "negotiated session timeout");
    let before = client.session();
    let mut states = subscribe(&client).await;
    // Make sure the connection is alive right now: the client heard from the server just before
    // the partition starts.
    zk_curator::raw::with_retry(&client, "/", None, |zk| async move { zk.check_stat("/").await }).await.expect("stat");

    let blackholed = Instant::now();
    proxy.set_mode(ProxyMode::Blackhole);
    let suspended = expect_state(&mut states, Suspended, &[], timeout * 3).await;
    let lost = expect_state(&mut states, Lost, &[], timeout * 3).await;
    let to_suspended = suspended - blackholed;
    let suspended_to_lost = lost - suspended;
    let to_lost = lost - blackholed;
    println!(
        "session timeout {timeout:?}: SUSPENDED {to_suspended:?} after the partition, LOST {suspended_to_lost:?} \
         after SUSPENDED ({:.2} x timeout), {to_lost:?} after the partition ({:.2} x timeout)",
        suspended_to_lost.as_secs_f64() / timeout.as_secs_f64(),
        to_lost.as_secs_f64() / timeout.as_secs_f64(),
    );
    // The server may expire the session `timeout` after it last heard from us; the client must have
    // given the session up by then (small slack for scheduling).
    let slack = Duration::from_millis(400);
    assert!(
        to_lost <= timeout + slack,
        "LOST came {to_lost:?} after the partition, later than {timeout:?} + {slack:?}"
    );
    // ... but not so early that a live session is abandoned on a short hiccup (the client waits
    // 0.5 x timeout after SUSPENDED).
    assert!(
        suspended_to_lost >= timeout.mul_f64(0.4),
        "LOST came only {suspended_to_lost:?} after SUSPENDED (session timeout {timeout:?})"
    );
    assert!(!client.is_connected());

    proxy.set_mode(ProxyMode::Pass);
    expect_state(&mut states, Reconnected, &[], Duration::from_secs(10)).await;
    let after = client.session();
    assert_eq!(after.epoch, 2, "{after:?}");
    assert_ne!(after.id, before.id);
    let path = support::unique_path("after-lost");
    client
        .create(&path)
        .mode(zk_curator::CreateMode::Ephemeral)
        .creating_parent_containers_if_needed()
        .await
        .expect("create on the new session");
    let (_, stat) = support::observer(&server.connect_string()).await.get_data(&path).await.unwrap();
    assert_eq!(stat.ephemeral_owner, after.id);
    client.close().await;
}

/// docs/failure-semantics.md lists the sequences a subscriber can see. One subscription through
/// a cut and reconnect, a partition given up (LOST) and healed, and an expiry by the server: each
/// fault shows its states in the documented order, and the whole stream follows the rule (no
/// state twice in a row, SUSPENDED only while connected, every LOST followed by RECONNECTED).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_connection_state_change_follows_the_documented_rule() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let proxy = FaultProxy::start(&connect).await.expect("proxy");
    let client = support::client_with(&proxy.connect_string(), Duration::from_secs(4)).await;
    let mut states = subscribe(&client).await;
    let mut seen = vec![ConnectionState::Connected];
    let within = Duration::from_secs(20);

    // A cut within the session timeout: SUSPENDED, then RECONNECTED on the same session.
    let first = client.session();
    proxy.set_mode(ProxyMode::Cut);
    expect_state(&mut states, Suspended, &[], within).await;
    proxy.set_mode(ProxyMode::Pass);
    expect_state(&mut states, Reconnected, &[], within).await;
    assert_eq!(client.session(), first, "a short cut keeps the session");
    seen.extend([Suspended, Reconnected]);

    // A partition: SUSPENDED, LOST (given up), and nothing until the heal brings RECONNECTED.
    proxy.set_mode(ProxyMode::Blackhole);
    expect_state(&mut states, Suspended, &[], within).await;
    expect_state(&mut states, Lost, &[], within).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(support::queued_states(&mut states), [], "nothing after LOST while the partition lasts");
    proxy.set_mode(ProxyMode::Pass);
    expect_state(&mut states, Reconnected, &[], within).await;
    let second = client.session();
    assert_eq!(second.epoch, first.epoch + 1, "RECONNECTED after LOST is a new session");
    seen.extend([Suspended, Lost, Reconnected]);

    // An expiry by the server: LOST (after SUSPENDED/RECONNECTED pairs, as the connection is
    // dropped), then the new session's RECONNECTED.
    zk_curator::testing::expire_session(&connect, &client).await.expect("expire");
    loop {
        let state = tokio::time::timeout(within, states.next()).await.expect("LOST").expect("stream open");
        seen.push(state);
        if state == Lost {
            break;
        }
    }
    expect_state(&mut states, Reconnected, &[], within).await;
    seen.push(Reconnected);
    assert_eq!(client.session().epoch, second.epoch + 1);

    seen.extend(support::queued_states(&mut states));
    support::assert_documented_states(&seen);
    assert_eq!(states.missed(), 0);
    client.close().await;
    assert_eq!(support::queued_states(&mut states), [], "close publishes no state");
}

// ---------------------------------------------------------------------------------------------
// 5

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_loop() {
    support::init_tracing();
    let mut server = support::owned_server().await;
    let connect = server.connect_string();
    let client = CuratorClient::builder(&connect)
        .session_timeout(Duration::from_secs(20))
        .connection_timeout(Duration::from_millis(500))
        .retry_policy(RetryNTimes::new(40, Duration::from_millis(100)))
        .connect()
        .await
        .expect("connect");

    // Retryable failures are retried under the policy; others are returned at once.
    let attempts = AtomicU32::new(0);
    let result = zk_curator::raw::with_retry(&client, "/", None, |zk| {
        let n = attempts.fetch_add(1, Ordering::SeqCst);
        async move {
            match n {
                0 => Err(zk::Error::ConnectionLoss),
                1 => Err(zk::Error::SessionExpired),
                _ => zk.check_stat("/").await.map(|s| s.is_some()),
            }
        }
    })
    .await;
    assert!(result.expect("succeeds on the third attempt"));
    assert_eq!(attempts.load(Ordering::SeqCst), 3);
    let attempts = AtomicU32::new(0);
    let err = zk_curator::raw::with_retry(&client, "/missing", None, |zk| {
        attempts.fetch_add(1, Ordering::SeqCst);
        async move { zk.get_data("/missing").await }
    })
    .await
    .unwrap_err();
    assert!(
        matches!(&err, Error::ZooKeeper { path, code: zk_curator::ErrorCode::NoNode, .. } if path == "/missing"),
        "{err:?}"
    );
    assert_eq!(attempts.load(Ordering::SeqCst), 1, "NoNode is not retried");
    let limited = CuratorClient::builder(&connect)
        .retry_policy(RetryOneTime::new(Duration::from_millis(10)))
        .connect()
        .await
        .expect("connect");
    let attempts = AtomicU32::new(0);
    let err = zk_curator::raw::with_retry(&limited, "/", None, |_zk| {
        attempts.fetch_add(1, Ordering::SeqCst);
        async { Err::<(), _>(zk::Error::ConnectionLoss) }
    })
    .await
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Retryable, "{err:?}");
    assert_eq!(attempts.load(Ordering::SeqCst), 2, "one try + one retry");
    limited.close().await;

    // Server down: the caller's deadline wins.
    let mut states = subscribe(&client).await;
    server.stop().await.expect("stop");
    expect_state(&mut states, Suspended, &[], Duration::from_secs(8)).await;
    let start = Instant::now();
    let err = zk_curator::raw::with_retry(
        &client,
        "/deadline",
        Some(Instant::now() + Duration::from_millis(500)),
        |zk| async move { zk.check_stat("/deadline").await },
    )
    .await
    .unwrap_err();
    let took = start.elapsed();
    println!("deadline of 500 ms gave up after {took:?}: {err}");
    assert!(matches!(&err, Error::DeadlineExceeded { path, .. } if path == "/deadline"), "{err:?}");
    assert_eq!(err.kind(), ErrorKind::DeadlineExceeded);
    assert!(took < Duration::from_secs(3), "took {took:?}");

    // Server restarted meanwhile: every wait for a connection (500 ms) fails with ConnectionLoss
    // while the JVM starts; the loop retries until it works.
    let path = support::unique_path("retried").replacen("/zkc-test/", "/zkc-test-", 1);
    let op_client = client.clone();
    let op_path = path.clone();
    let start = Instant::now();
    let op = crate::support::spawn(async move {
        let p = op_path.as_str();
        let options = persistent();
        let options = &options;
        zk_curator::raw::with_retry(&op_client, p, None, |zk| async move { zk.create(p, b"r", options).await })
            .await
            .map(|_| ())
    });
    server.restart().await.expect("restart");
    tokio::time::timeout(Duration::from_secs(15), op)
        .await
        .expect("with_retry finished")
        .unwrap()
        .expect("with_retry succeeded once the server was back");
    println!("with_retry across a restart took {:?}", start.elapsed());
    // The behaviour, not the machine's speed: the create happened, exactly once.
    let (data, _) = support::observer(&connect).await.get_data(&path).await.expect("created");
    assert_eq!(data, b"r");
    client.close().await;
}

// ---------------------------------------------------------------------------------------------
// 6

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn container_parents() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let client = support::client(&connect).await;
    let zk = support::observer(&connect).await;
    let base = support::unique_path("containers");
    let parent = format!("{base}/a/b/c");
    assert!(!support::exists(&zk, &format!("{base}/a")).await);

    let node = protected(&client, &parent, b"data").await.expect("protected create");
    let listing = client.get_children(&parent).await.expect("listing");
    assert!(node.path.starts_with(&format!("{parent}/_c_")), "{node:?}");
    assert_eq!(node.path, format!("{parent}/{}", node.name));
    assert!(zk_curator::framework::is_protected(&node.name), "{node:?}");
    assert!(node.name[40..].starts_with("lock-"), "{node:?}");
    assert!(node.sequence >= 0);
    assert_eq!(listing, vec![node.name.clone()]);
    let (data, stat) = zk.get_data(&node.path).await.expect("node exists");
    assert_eq!(data, b"data");
    assert_eq!(stat.ephemeral_owner, client.session_id());
    for dir in [format!("{base}/a"), format!("{base}/a/b"), parent.clone()] {
        let (_, stat) = zk.get_data(&dir).await.unwrap_or_else(|e| panic!("{dir}: {e}"));
        assert_eq!(stat.ephemeral_owner, 0, "{dir}");
    }

    client.delete_guaranteed(&node.path).await.expect("delete");
    let took = support::eventually(Duration::from_secs(5), "the container chain is reaped", || async {
        !support::exists(&zk, &format!("{base}/a")).await
    })
    .await;
    println!("/a/b/c, /a/b, /a reaped within {took:?}");
    client.close().await;
}

// ---------------------------------------------------------------------------------------------
// 7

/// A node made by a protected, ephemeral-sequential create of `parent/lock-`.
#[derive(Debug)]
struct Made {
    path: String,
    name: String,
    sequence: i64,
}

async fn protected(client: &CuratorClient, parent: &str, data: &[u8]) -> zk_curator::Result<Made> {
    let path = client
        .create(&format!("{parent}/lock-"))
        .data(data)
        .mode(zk_curator::CreateMode::EphemeralSequential)
        .with_protection()
        .await?;
    let name = path.rsplit('/').next().unwrap_or_default().to_string();
    Ok(Made { sequence: zk_curator::framework::parse_sequence(&name).unwrap_or(-1), path, name })
}

/// Children of `parent` starting with the protection prefix of `name`.
fn with_prefix<'a>(children: &'a [String], name: &str) -> Vec<&'a String> {
    children.iter().filter(|c| c.starts_with(&name[..40])).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protected_create_after_cut_connection() {
    support::init_tracing();
    let server = support::owned_server().await;
    let connect = server.connect_string();
    let proxy = FaultProxy::start(&connect).await.expect("proxy");
    let client = CuratorClient::builder(&proxy.connect_string())
        .session_timeout(Duration::from_secs(10))
        .connection_timeout(Duration::from_secs(3))
        .retry_policy(RetryNTimes::new(20, Duration::from_millis(100)))
        .connect()
        .await
        .expect("connect");
    let zk = support::observer(&connect).await;
    let parent = support::unique_path("protected");
    client.create(&parent).creating_parent_containers_if_needed().await.expect("parent");
    let session = client.session();
    let mut created: Vec<String> = Vec::new();
    let wait_connected = || async {
        support::eventually(Duration::from_secs(10), "client reconnected", || async { client.is_connected() }).await;
    };
    let spawn_create = |client: &CuratorClient| {
        let client = client.clone();
        let parent = parent.clone();
        crate::support::spawn(async move { protected(&client, &parent, b"").await })
    };

    // (a) The create reaches the server, which applies it, but the reply is lost: freeze the server,
    // send the create, blackhole the proxy, let the server run (it creates the node, its reply is
    // dropped), then restore the network. The retry must find the node instead of making another.
    let before = support::sorted_children(&zk, &parent).await.len();
    server.pause().expect("pause");
    let task = spawn_create(&client);
    // Let the request travel client -> proxy -> the frozen server's socket buffer.
    tokio::time::sleep(Duration::from_millis(200)).await;
    proxy.set_mode(ProxyMode::Blackhole);
    server.resume().expect("resume");
    support::eventually(Duration::from_secs(5), "the server applied the create", || async {
        support::sorted_children(&zk, &parent).await.len() > before
    })
    .await;
    assert!(!task.is_finished(), "the reply should have been lost");
    proxy.set_mode(ProxyMode::Pass);
    let node = tokio::time::timeout(Duration::from_secs(15), task).await.expect("create finished").unwrap().unwrap();
    let children = support::sorted_children(&zk, &parent).await;
    assert_eq!(with_prefix(&children, &node.name), vec![&node.name], "lost reply: {children:?}");
    assert_eq!(children.len(), before + 1, "no second node: {children:?}");
    created.push(node.name.clone());
    wait_connected().await;

    // (b) Cut right after the create was issued, at varying moments.
    for delay_us in [0u64, 0, 200, 500, 1000, 2000, 5000] {
        let task = spawn_create(&client);
        if delay_us == 0 {
            tokio::task::yield_now().await;
        } else {
            tokio::time::sleep(Duration::from_micros(delay_us)).await;
        }
        proxy.set_mode(ProxyMode::Cut);
        tokio::time::sleep(Duration::from_millis(200)).await;
        proxy.set_mode(ProxyMode::Pass);
        let node = tokio::time::timeout(Duration::from_secs(15), task).await.expect("create finished").unwrap();
        let node = node.unwrap_or_else(|e| panic!("create with a cut after {delay_us} us: {e}"));
        let children = support::sorted_children(&zk, &parent).await;
        assert_eq!(with_prefix(&children, &node.name), vec![&node.name], "cut after {delay_us} us: {children:?}");
        created.push(node.name.clone());
        assert_eq!(children.len(), created.len(), "cut after {delay_us} us left an extra node: {children:?}");
        wait_connected().await;
    }

    // (c) Cut first: the create waits for the connection and goes out after it is back.
    proxy.set_mode(ProxyMode::Cut);
    support::eventually(Duration::from_secs(10), "client noticed the cut", || async { !client.is_connected() }).await;
    let task = spawn_create(&client);
    tokio::time::sleep(Duration::from_millis(200)).await;
    proxy.set_mode(ProxyMode::Pass);
    let node = tokio::time::timeout(Duration::from_secs(15), task).await.expect("create finished").unwrap().unwrap();
    let children = support::sorted_children(&zk, &parent).await;
    assert_eq!(with_prefix(&children, &node.name), vec![&node.name]);
    created.push(node.name.clone());
    created.sort();
    assert_eq!(children, created);
    assert_eq!(client.session(), session, "all of this happened on one session");
    for name in &created {
        let (_, stat) = zk.get_data(&format!("{parent}/{name}")).await.unwrap();
        assert_eq!(stat.ephemeral_owner, session.id, "{name}");
    }

    // Cancellation: a create_protected dropped mid-way leaves nothing behind.
    let clean = support::unique_path("cancelled");
    client.create(&clean).creating_parent_containers_if_needed().await.expect("parent");
    let cversion = |zk: zk::Client, path: String| async move { zk.get_data(&path).await.unwrap().1.cversion };
    // (d) Polled once — the create request is sent — then dropped.
    let mut attempts = 0;
    let cv0 = loop {
        attempts += 1;
        let cv0 = cversion(zk.clone(), clean.clone()).await;
        let once = protected(&client, &clean, b"").now_or_never();
        match once {
            None => break cv0,
            // On a busy machine the reply can arrive before the single poll looks for it: then the
            // node is the caller's. Remove it and try again.
            Some(Ok(node)) if attempts < 5 => {
                println!("(d) the create finished within one poll; again");
                client.delete_guaranteed(&node.path).await.expect("delete");
            }
            other => panic!("create_protected polled once: {other:?}"),
        }
    };
    support::eventually(Duration::from_secs(3), "the abandoned node is cleaned up", || async {
        support::sorted_children(&zk, &clean).await.is_empty() && cversion(zk.clone(), clean.clone()).await >= cv0 + 2
    })
    .await;
    // (e) Dropped while the server holds the request (it applies it after the drop).
    let cv0 = cversion(zk.clone(), clean.clone()).await;
    server.pause().expect("pause");
    let task = {
        let client = client.clone();
        let clean = clean.clone();
        crate::support::spawn(async move { protected(&client, &clean, b"").await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    task.abort();
    let result = task.await;
    assert!(
        matches!(&result, Err(e) if e.is_cancelled()),
        "the create cannot finish while the server is paused: {result:?}"
    );
    server.resume().expect("resume");
    support::eventually(Duration::from_secs(3), "the node created after the drop is cleaned up", || async {
        support::sorted_children(&zk, &clean).await.is_empty() && cversion(zk.clone(), clean.clone()).await >= cv0 + 2
    })
    .await;
    // (f) Dropped during a cut (in flight or retrying), network restored afterwards.
    for delay_us in [0u64, 500, 2000] {
        let task = {
            let client = client.clone();
            let clean = clean.clone();
            crate::support::spawn(async move { protected(&client, &clean, b"").await })
        };
        tokio::time::sleep(Duration::from_micros(delay_us)).await;
        proxy.set_mode(ProxyMode::Cut);
        tokio::time::sleep(Duration::from_millis(100)).await;
        task.abort();
        let outcome = task.await;
        proxy.set_mode(ProxyMode::Pass);
        wait_connected().await;
        match outcome {
            // Finished before the cut: the node is the caller's, not garbage.
            Ok(Ok(node)) => {
                println!("cut after {delay_us} us: the create had already finished");
                assert_eq!(support::sorted_children(&zk, &clean).await, vec![node.name.clone()]);
                client.delete_guaranteed(&node.path).await.expect("delete");
            }
            Ok(Err(e)) => panic!("create failed instead of retrying: {e}"),
            Err(e) => {
                assert!(e.is_cancelled());
                let left = support::eventually_no_children(&connect, &clean, Duration::from_secs(3)).await;
                assert!(left.is_empty(), "cancelled during a cut after {delay_us} us left {left:?}");
            }
        }
    }
    assert_eq!(client.session(), session);
    support::eventually(Duration::from_secs(3), "background clean-ups finished", || async {
        client.pending_background_deletes() == 0
    })
    .await;
    client.close().await;
}

// ---------------------------------------------------------------------------------------------
// 8

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guaranteed_delete_after_server_comes_back() {
    support::init_tracing();
    let mut server = support::owned_server().await;
    let connect = server.connect_string();
    let client = CuratorClient::builder(&connect)
        .session_timeout(Duration::from_secs(20))
        .connection_timeout(Duration::from_secs(1))
        .retry_policy(RetryOneTime::new(Duration::from_millis(100)))
        .connect()
        .await
        .expect("connect");
    let base = support::unique_path("gd");
    // Persistent (its own parent is a container), so it stays when its children go.
    client.create(&base).creating_parent_containers_if_needed().await.expect("create base");
    let (a, b) = (format!("{base}/a"), format!("{base}/b"));
    for p in [&a, &b] {
        client.create(p).creating_parent_containers_if_needed().await.expect("create");
    }
    // NoNode counts as success.
    client.delete_guaranteed(&format!("{base}/never")).await.expect("deleting a missing node is Ok");
    assert_eq!(client.pending_background_deletes(), 0);

    let mut states = subscribe(&client).await;
    server.stop().await.expect("stop");
    expect_state(&mut states, Suspended, &[], Duration::from_secs(8)).await;
    let start = Instant::now();
    match tokio::time::timeout(Duration::from_secs(5), client.delete_guaranteed(&a)).await {
        Ok(Err(e)) => {
            assert_eq!(e.kind(), ErrorKind::Retryable, "{e:?}");
            println!("foreground delete failed after {:?}: {e}", start.elapsed());
        }
        Ok(Ok(())) => panic!("delete cannot succeed while the server is down"),
        Err(_) => println!("foreground delete timed out (dropped; it is queued)"),
    }
    assert!(client.pending_background_deletes() >= 1, "the failed delete is queued");
    let outcome_b = client.delete_in_background(&b).expect("queue b");
    let outcome_missing = client.delete_in_background(&format!("{base}/missing")).expect("queue missing");
    assert!(client.pending_background_deletes() >= 3);

    server.restart().await.expect("restart");
    let took = support::eventually(Duration::from_secs(15), "pending background deletes drop to 0", || async {
        client.pending_background_deletes() == 0
    })
    .await;
    println!("background deletes finished {took:?} after the restart");
    let wait = Duration::from_secs(5);
    tokio::time::timeout(wait, outcome_b.wait()).await.expect("outcome b").expect("b deleted");
    tokio::time::timeout(wait, outcome_missing.wait()).await.expect("outcome missing").expect("NoNode is success");
    let zk = support::observer(&connect).await;
    assert!(!support::exists(&zk, &a).await, "{a} still exists");
    assert!(!support::exists(&zk, &b).await, "{b} still exists");
    assert!(support::exists(&zk, &base).await, "only the requested nodes are deleted");
    client.close().await;
}

// ---------------------------------------------------------------------------------------------
// 9

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let zk = support::observer(&connect).await;
    let proxy = FaultProxy::start(&connect).await.expect("proxy");
    let proxied = |max_close_wait: Duration| {
        CuratorClient::builder(&proxy.connect_string())
            .session_timeout(Duration::from_secs(10))
            .connection_timeout(Duration::from_secs(2))
            .retry_policy(RetryNTimes::new(3, Duration::from_millis(100)))
            .max_close_wait(max_close_wait)
            .connect()
    };

    // (a) close() lets a pending background delete finish.
    let client = proxied(Duration::from_secs(10)).await.expect("connect");
    let path = support::unique_path("close-pending");
    client.create(&path).creating_parent_containers_if_needed().await.expect("create");
    proxy.set_mode(ProxyMode::Cut);
    support::eventually(Duration::from_secs(5), "client noticed the cut", || async { !client.is_connected() }).await;
    let outcome = client.delete_in_background(&path).expect("queue");
    assert_eq!(client.pending_background_deletes(), 1);
    let closing = {
        let client = client.clone();
        crate::support::spawn(async move {
            let start = Instant::now();
            client.close().await;
            start.elapsed()
        })
    };
    support::eventually(Duration::from_secs(1), "close() has begun", || async { client.is_closed() }).await;
    assert_closed(client.create("/x").creating_parent_containers_if_needed().await, "create while closing");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!closing.is_finished(), "close() must wait for the pending delete");
    assert!(support::exists(&zk, &path).await);
    proxy.set_mode(ProxyMode::Pass);
    let took = tokio::time::timeout(Duration::from_secs(15), closing).await.expect("close finished").unwrap();
    println!("close with a pending delete took {took:?}");
    assert!(took < Duration::from_secs(10) + Duration::from_secs(3), "bounded by max_close_wait: {took:?}");
    tokio::time::timeout(Duration::from_secs(1), outcome.wait()).await.expect("outcome").expect("deleted");
    assert!(!support::exists(&zk, &path).await, "the pending delete finished before the session closed");
    assert_eq!(client.pending_background_deletes(), 0);

    // Everything afterwards fails with Closed.
    assert!(client.is_closed());
    assert!(!client.is_connected());
    assert_closed(client.create("/x").creating_parent_containers_if_needed().await, "create");
    assert_closed(protected(&client, "/p", b"").await, "create_protected");
    assert_closed(client.delete_guaranteed("/x").await, "delete_guaranteed");
    assert_closed(
        zk_curator::raw::with_retry(&client, "/", None, |zk| async move { zk.check_stat("/").await }).await,
        "with_retry",
    );
    assert_closed(zk_curator::raw::client(&client), "zookeeper()");
    let mutex = InterProcessMutex::new(&client, "/locks/closed").expect("mutex");
    assert_closed(tokio::time::timeout(Duration::from_secs(5), mutex.acquire()).await.expect("prompt"), "acquire");
    assert_closed(tokio::time::timeout(Duration::from_secs(5), mutex.lock()).await.expect("prompt"), "lock");
    assert_closed(
        tokio::time::timeout(Duration::from_secs(5), mutex.acquire_timeout(Duration::from_secs(1)))
            .await
            .expect("prompt"),
        "acquire_timeout",
    );
    client.close().await; // idempotent

    // (b) close() waits at most max_close_wait for a delete that cannot finish.
    let client = proxied(Duration::from_millis(800)).await.expect("connect");
    let path = support::unique_path("close-stuck");
    client.create(&path).creating_parent_containers_if_needed().await.expect("create");
    proxy.set_mode(ProxyMode::Cut);
    support::eventually(Duration::from_secs(5), "client noticed the cut", || async { !client.is_connected() }).await;
    let outcome = client.delete_in_background(&path).expect("queue");
    let start = Instant::now();
    client.close().await;
    let took = start.elapsed();
    println!("close with a stuck delete took {took:?}");
    assert!(took >= Duration::from_millis(700), "close gave up before max_close_wait: {took:?}");
    assert!(took < Duration::from_secs(4), "close is bounded: {took:?}");
    let result = tokio::time::timeout(Duration::from_secs(5), outcome.wait()).await.expect("outcome resolves");
    assert_closed(result, "the abandoned delete");
    proxy.set_mode(ProxyMode::Pass);
    assert!(support::exists(&zk, &path).await);

    // (c) Dropping guards, mutexes and clients without a runtime never panics.
    let client = support::client(&connect).await;
    let lock_path = support::unique_path("close-lock");
    let mutex = InterProcessMutex::new(&client, &lock_path).expect("mutex");
    let guard = mutex.lock().await.expect("lock");
    std::thread::spawn(move || drop(guard)).join().expect("dropping a guard on a plain thread");
    let left = support::eventually_no_children(&connect, &lock_path, Duration::from_secs(3)).await;
    assert!(left.is_empty(), "the guard dropped off-runtime was released in the background: {left:?}");
    client.close().await;

    let other_connect = connect.clone();
    let other_path = support::unique_path("close-runtime");
    let thread_path = other_path.clone();
    let joined = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let (client, mutex, guard, outcome) = rt.block_on(async {
            let client = support::client_with(&other_connect, Duration::from_secs(2)).await;
            let mutex = InterProcessMutex::new(&client, &thread_path).expect("mutex");
            let guard = mutex.lock().await.expect("lock");
            let outcome = client.delete_in_background(&format!("{thread_path}/missing")).expect("queue");
            (client, mutex, guard, outcome)
        });
        drop(rt);
        drop(guard);
        drop(outcome);
        drop(mutex);
        drop(client);
    })
    .join();
    assert!(joined.is_ok(), "dropping after the runtime finished panicked");
    // The session died with its runtime; the server removes its lock node after the timeout.
    let left = support::eventually_no_children(&connect, &other_path, Duration::from_secs(8)).await;
    assert!(left.is_empty(), "{left:?}");
}

/// Curator's `TestLockACLs`: the client's ACLs go on every node it creates — the lock node and the
/// container parents — instead of the open default.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acls_apply_to_lock_nodes_and_parents() {
    let server = support::server().await;
    let connect = server.connect_string();
    let ip_all = zk_curator::Acl::new(zk_curator::Permissions::ALL, zk_curator::Id::new("ip", "127.0.0.1"));
    let client = CuratorClient::builder(&connect)
        .namespace("ns")
        .acls(vec![ip_all.clone()])
        .session_timeout(Duration::from_secs(10))
        .connect()
        .await
        .expect("connect");
    let path = support::unique_path("acl");
    let mutex = zk_curator::locks::InterProcessMutex::new(&client, &path).unwrap();
    let guard = mutex.lock().await.unwrap();
    let observer = support::observer(&connect).await;
    for node in [format!("/ns{path}"), format!("/ns{}", guard.node_path()), "/ns".to_string()] {
        let (acls, _) = observer.get_acl(&node).await.unwrap_or_else(|e| panic!("acl of {node}: {e}"));
        assert_eq!(zk::acls_from_raw(&acls), vec![ip_all.clone()], "ACL of {node}");
    }
    guard.release().await.unwrap();

    let open = support::client(&connect).await;
    let other = support::unique_path("acl-open");
    open.create(&other).creating_parent_containers_if_needed().await.unwrap();
    let (acls, _) = observer.get_acl(&other).await.unwrap();
    assert_eq!(zk::acls_from_raw(&acls), zk_curator::Acl::open_unsafe(), "default stays open, like Curator");

    let empty = CuratorClient::builder(&connect).acls(Vec::new()).connect().await.unwrap_err();
    assert_eq!(empty.kind(), ErrorKind::BadArgument);
}

/// A sequential create whose reply is lost is not retried: a retry would create a second node.
/// The caller gets a retryable error and exactly one node exists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequential_create_is_not_duplicated_by_a_retry() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let proxy = FaultProxy::start(&connect).await.unwrap();
    let client =
        support::client_with_timeouts(&proxy.connect_string(), Duration::from_secs(20), Duration::from_secs(5)).await;
    let parent = support::unique_path("seq");
    client.create(&parent).creating_parent_containers_if_needed().await.unwrap();

    proxy.set_mode(ProxyMode::DropReplies);
    let creating = {
        let (client, parent) = (client.clone(), parent.clone());
        crate::support::spawn(async move {
            client
                .create(&format!("{parent}/job-"))
                .data(b"once")
                .mode(zk_curator::CreateMode::PersistentSequential)
                .creating_parent_containers_if_needed()
                .await
        })
    };
    // The server applied the create; its reply is lost.
    let applied =
        support::children_become(&obs, &parent, &["job-0000000000".to_string()], Duration::from_secs(10)).await;
    assert_eq!(applied, ["job-0000000000"], "the create reached the server");
    proxy.set_mode(ProxyMode::Pass);
    let result = support::join("sequential create", Duration::from_secs(20), creating).await;
    match result {
        // The outcome is unknown: reported as retryable, never retried.
        Err(err) => assert_eq!(err.kind(), ErrorKind::Retryable, "{err}"),
        // Unless the reply, already on its way through the proxy, arrived after `Pass`.
        Ok(created) => assert_eq!(created, format!("{parent}/job-0000000000"), "the one node"),
    }
    support::eventually(Duration::from_secs(10), "reconnected", || async { client.is_connected() }).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(support::sorted_children(&obs, &parent).await, ["job-0000000000"], "no second node");
    // A non-sequential create is safe to retry and still is.
    client.create(&format!("{parent}/plain")).creating_parent_containers_if_needed().await.unwrap();
}

/// close() while the client is replacing a lost session: the replacement must not outlive close()
/// with a session of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_during_a_session_replacement_leaves_no_session() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let proxy = FaultProxy::start(&connect).await.unwrap();
    let client =
        support::client_with_timeouts(&proxy.connect_string(), Duration::from_secs(2), Duration::from_secs(2)).await;
    let mut states = subscribe(&client).await;
    proxy.set_mode(ProxyMode::Blackhole);
    expect_state(&mut states, Lost, &[Suspended], Duration::from_secs(10)).await;
    // The replacement is now trying to open a session through the blackhole; let it succeed the
    // moment close() runs.
    proxy.set_mode(ProxyMode::Pass);
    client.close().await;
    assert!(client.is_closed());
    assert_eq!(
        zk_curator::raw::client(&client).map(|_| ()).map_err(|e| e.kind()),
        Err(ErrorKind::Closed),
        "no live handle"
    );
    // A session that outlived close() would keep its TCP connection through the proxy.
    support::eventually(Duration::from_secs(10), "every connection of the closed client is gone", || async {
        proxy.connections() == 0
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(proxy.connections(), 0, "a replacement opened a session after close()");
    assert!(!client.is_connected(), "a closed client reports no connection");
}

/// `earliest_expiry`: published at SUSPENDED for the suspended session, kept after the client
/// gives that session up (the server may hold it until then), still known for the given-up
/// session after the new session is suspended in turn, and gone for a session once it reconnects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn earliest_expiry_is_kept_for_a_given_up_session() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let proxy = FaultProxy::start(&connect).await.unwrap();
    let client =
        support::client_with_timeouts(&proxy.connect_string(), Duration::from_secs(2), Duration::from_secs(2)).await;
    let first = client.session();
    assert_eq!(client.earliest_expiry(first), None, "connected: no bound");
    let mut states = subscribe(&client).await;
    proxy.set_mode(ProxyMode::Blackhole);
    expect_state(&mut states, Suspended, &[], Duration::from_secs(10)).await;
    let bound = client.earliest_expiry(first).expect("a bound while suspended");
    expect_state(&mut states, Lost, &[], Duration::from_secs(10)).await;
    assert_eq!(client.earliest_expiry(first), Some(bound), "kept once the session is given up");
    proxy.set_mode(ProxyMode::Pass);
    support::eventually(Duration::from_secs(20), "a new session", || async {
        client.is_connected() && client.session() != first
    })
    .await;
    let second = client.session();
    assert_eq!(client.earliest_expiry(second), None);
    proxy.set_mode(ProxyMode::Blackhole);
    support::eventually(Duration::from_secs(10), "the new session is suspended", || async {
        client.earliest_expiry(second).is_some()
    })
    .await;
    assert_eq!(client.earliest_expiry(first), Some(bound), "the given-up session's bound survives");
    proxy.set_mode(ProxyMode::Pass);
    support::eventually(Duration::from_secs(20), "reconnected", || async { client.is_connected() }).await;
    if client.session() == second {
        assert_eq!(client.earliest_expiry(second), None, "reconnected: no bound");
    }
}

/// `close()` polled once (while a background delete is pending, so that it cannot finish at once)
/// and dropped: the client is closed at that poll, and the rest of the close goes on in the
/// background — the session ends, and with it the node of a guard that still lives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_close_still_ends_the_session() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let client = support::client(&connect).await;
    let path = support::unique_path("cancelled-close");
    let guard = InterProcessMutex::new(&client, &path).unwrap().lock().await.unwrap();
    let node = guard.node_path().to_string();
    let _pending = client.delete_in_background(&format!("{path}-missing")).unwrap();
    assert!(client.close().now_or_never().is_none(), "close finished at its first poll");
    assert!(client.is_closed());
    support::eventually(Duration::from_secs(10), "the cancelled close ended the session", || async {
        !support::exists(&obs, &node).await
    })
    .await;
    assert!(!client.is_connected());
    drop(guard);
}
