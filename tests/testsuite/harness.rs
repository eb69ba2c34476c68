//! Integration tests of the `zk_curator::testing` harness against real ZooKeeper JVMs.
//!
//! Run with `cargo nextest run --all-features --test testsuite harness::`. Needs Java and the ZooKeeper
//! jars (`apt-get install zookeeper`); with `ZK_CONNECT` set the tests that need to own the
//! server process are skipped.

use crate::support;

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use zk_curator::testing::{Direction, FaultProxy, Latency, ProxyMode, TestingCluster, TestingError, TestingServer};
use zookeeper_client::{Acls, Client, CreateMode, CreateOptions, SessionState, StateWatcher};

const PERSISTENT: CreateOptions<'static> = CreateMode::Persistent.with_acls(Acls::anyone_all());
const EPHEMERAL: CreateOptions<'static> = CreateMode::Ephemeral.with_acls(Acls::anyone_all());

async fn connect(connect: &str, session_timeout: Duration) -> Client {
    Client::connector()
        .with_session_timeout(session_timeout)
        .connect(connect)
        .await
        .unwrap_or_else(|err| panic!("connecting to {connect}: {err}"))
}

/// Waits until `watcher` reports `want` (or already has).
async fn wait_state(watcher: &mut StateWatcher, want: SessionState, timeout: Duration) {
    let result = tokio::time::timeout(timeout, async {
        loop {
            if watcher.peek_state() == want {
                return;
            }
            watcher.changed().await;
        }
    })
    .await;
    assert!(result.is_ok(), "state {want:?} not reached within {timeout:?}, state is {:?}", watcher.peek_state());
}

/// Errors (a server going down, an election) count as "not there" rather than failing the test.
async fn node_exists(client: &Client, path: &str) -> bool {
    matches!(client.check_stat(path).await, Ok(Some(_)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_serves_stops_restarts_with_its_data_and_pauses() {
    let mut server =
        TestingServer::builder().owned().tick_time(Duration::from_millis(200)).start().await.expect("server starts");
    assert!(!server.is_external());
    let port = server.port();
    let connect_string = server.connect_string();
    assert_eq!(connect_string, format!("127.0.0.1:{port}"));
    assert!(server.data_dir().join("zoo.cfg").is_file());

    let client = connect(&connect_string, Duration::from_secs(10)).await;
    client.create("/persisted", b"hello", &PERSISTENT).await.expect("create");
    assert_eq!(client.get_data("/persisted").await.expect("get").0, b"hello");

    server.stop().await.expect("stop");
    let started = Instant::now();
    let attempt =
        Client::connector().with_fail_eagerly().with_session_timeout(Duration::from_secs(2)).connect(&connect_string);
    let result = tokio::time::timeout(Duration::from_secs(10), attempt).await;
    assert!(matches!(result, Ok(Err(_))), "connecting to a stopped server must fail: {result:?}");
    assert!(started.elapsed() < Duration::from_secs(5), "failing took {:?}", started.elapsed());
    assert!(matches!(server.pause(), Err(TestingError::NotRunning { .. })));

    server.restart().await.expect("restart");
    assert_eq!(server.port(), port, "restart keeps the port");
    let fresh = connect(&connect_string, Duration::from_secs(10)).await;
    assert_eq!(fresh.get_data("/persisted").await.expect("data survives restart").0, b"hello");
    // The old session was restored from the server's log and the old client resumes it.
    assert!(
        support::poll_until(Duration::from_secs(15), || async { client.get_data("/persisted").await.is_ok() }).await,
        "old client did not resume its session after the restart"
    );

    // SIGSTOP: requests hang; SIGCONT: they complete.
    server.pause().expect("pause");
    let frozen = tokio::time::timeout(Duration::from_millis(500), fresh.get_data("/persisted")).await;
    assert!(frozen.is_err(), "a paused server answered: {frozen:?}");
    server.resume().expect("resume");
    let thawed = tokio::time::timeout(Duration::from_secs(5), fresh.get_data("/persisted")).await;
    assert!(matches!(thawed, Ok(Ok(_))), "resumed server did not answer: {thawed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_cut_disconnects_and_pass_resumes_the_same_session() {
    let server = TestingServer::builder().owned().start().await.expect("server starts");
    let proxy = FaultProxy::start(&server.connect_string()).await.expect("proxy starts");
    assert_eq!(proxy.mode(), ProxyMode::Pass);
    let client = connect(&proxy.connect_string(), Duration::from_secs(6)).await;
    let session = client.session_id();
    client.create("/through-proxy", b"", &EPHEMERAL).await.expect("create through the proxy");
    assert_eq!(proxy.connections(), 1);

    let mut watcher = client.state_watcher();
    proxy.set_mode(ProxyMode::Cut);
    assert_eq!(proxy.mode(), ProxyMode::Cut);
    wait_state(&mut watcher, SessionState::Disconnected, Duration::from_secs(5)).await;
    assert!(
        support::poll_until(Duration::from_secs(2), || async { proxy.connections() == 0 }).await,
        "cut left connections"
    );

    proxy.set_mode(ProxyMode::Pass);
    wait_state(&mut watcher, SessionState::SyncConnected, Duration::from_secs(10)).await;
    let stat = client.check_stat("/through-proxy").await.expect("stat").expect("ephemeral survived a short cut");
    assert_eq!(stat.ephemeral_owner, session.0, "same session after reconnecting");
    assert_eq!(proxy.connections(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_blackhole_makes_the_server_expire_the_session() {
    let server =
        TestingServer::builder().owned().tick_time(Duration::from_millis(200)).start().await.expect("server starts");
    let proxy = FaultProxy::start(&server.connect_string()).await.expect("proxy starts");
    let client = connect(&proxy.connect_string(), Duration::from_secs(2)).await;
    assert_eq!(client.session_timeout(), Duration::from_secs(2));
    client.create("/blackholed", b"", &EPHEMERAL).await.expect("create through the proxy");
    let direct = connect(&server.connect_string(), Duration::from_secs(10)).await;
    assert!(node_exists(&direct, "/blackholed").await);
    let mut watcher = client.state_watcher();

    proxy.set_mode(ProxyMode::Blackhole);
    let started = Instant::now();
    assert!(
        support::poll_until(Duration::from_secs(10), || async { !node_exists(&direct, "/blackholed").await }).await,
        "the server did not expire the blackholed session"
    );
    let expired_after = started.elapsed();
    // Expiry, not a close: the server waited for (about) the session timeout.
    assert!(expired_after >= Duration::from_secs(1), "ephemeral vanished after only {expired_after:?}");

    proxy.set_mode(ProxyMode::Pass);
    wait_state(&mut watcher, SessionState::Expired, Duration::from_secs(10)).await;
}

/// A plain TCP upstream for the proxy's own byte-level tests: echoes what it receives and tells
/// `heard` each chunk as it arrives (the proxy forwards bytes; what they mean is not its business).
async fn echo_upstream() -> (String, tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the echo upstream");
    let address = listener.local_addr().expect("its address").to_string();
    let (heard_tx, heard) = tokio::sync::mpsc::unbounded_channel();
    crate::support::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let heard_tx = heard_tx.clone();
            crate::support::spawn(async move {
                let mut buffer = vec![0u8; 4096];
                while let Ok(n) = stream.read(&mut buffer).await {
                    if n == 0 || stream.write_all(&buffer[..n]).await.is_err() {
                        return;
                    }
                    let _ = heard_tx.send(buffer[..n].to_vec());
                }
            });
        }
    });
    (address, heard)
}

/// Reads exactly `n` bytes, failing the test after `within` (a hang).
async fn read_exactly(stream: &mut tokio::net::TcpStream, n: usize, within: Duration) -> Vec<u8> {
    let mut bytes = vec![0u8; n];
    tokio::time::timeout(within, stream.read_exact(&mut bytes))
        .await
        .unwrap_or_else(|_| panic!("{n} bytes not read within {within:?}"))
        .expect("read through the proxy");
    bytes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_latency_delays_each_direction_and_never_reorders_bytes() {
    let (upstream, mut heard) = echo_upstream().await;
    let proxy = FaultProxy::start(&upstream).await.expect("proxy starts");
    let mut stream = tokio::net::TcpStream::connect(proxy.connect_string()).await.expect("connect through the proxy");
    stream.set_nodelay(true).unwrap();

    // A fixed latency delays each way: a round trip takes at least twice the delay (the proxy
    // sleeps that long; a slow machine only makes it longer).
    let delay = Duration::from_millis(150);
    proxy.set_latency(Latency::fixed(delay));
    assert_eq!(proxy.latency(Direction::ToServer), Latency::fixed(delay));
    let sent = Instant::now();
    stream.write_all(b"ping").await.unwrap();
    assert_eq!(read_exactly(&mut stream, 4, Duration::from_secs(10)).await, b"ping");
    let round_trip = sent.elapsed();
    assert!(round_trip >= 2 * delay, "a round trip through {delay:?} each way took {round_trip:?}");
    while heard.try_recv().is_ok() {}

    // A random latency per chunk never reorders: 300 numbered writes come back in order.
    proxy.set_latency(Latency::uniform(Duration::from_millis(40), Duration::ZERO));
    assert_eq!(proxy.latency(Direction::ToClient).max(), Duration::from_millis(40), "bounds in either order");
    let count = 300u32;
    let writer = {
        let (_, mut write) = stream.into_split();
        crate::support::spawn(async move {
            for i in 0..count {
                write.write_all(&i.to_be_bytes()).await.unwrap();
                if i % 10 == 0 {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
            write
        })
    };
    let mut echoed = Vec::new();
    while echoed.len() < count as usize * 4 {
        let chunk = tokio::time::timeout(Duration::from_secs(10), heard.recv()).await.expect("the echo hears it");
        echoed.extend(chunk.expect("the echo runs"));
    }
    let numbers: Vec<u32> = echoed.chunks(4).map(|b| u32::from_be_bytes(b.try_into().unwrap())).collect();
    let in_order: Vec<u32> = (0..count).collect();
    assert_eq!(numbers, in_order, "the bytes reached the server out of order");
    writer.await.expect("the writer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_latency_of_one_direction_holds_bytes_back_until_it_is_cleared() {
    let (upstream, mut heard) = echo_upstream().await;
    let proxy = FaultProxy::start(&upstream).await.expect("proxy starts");
    let mut stream = tokio::net::TcpStream::connect(proxy.connect_string()).await.expect("connect through the proxy");

    // Replies an hour late, requests on time: the server hears at once, the client hears nothing.
    proxy.set_direction_latency(Direction::ToClient, Latency::fixed(Duration::from_secs(3600)));
    assert!(proxy.latency(Direction::ToServer).is_none());
    stream.write_all(b"late").await.unwrap();
    let at_server = tokio::time::timeout(Duration::from_secs(10), heard.recv()).await.expect("the server hears it");
    assert_eq!(at_server.as_deref(), Some(&b"late"[..]));
    let mut byte = [0u8; 1];
    let early = tokio::time::timeout(Duration::from_millis(300), stream.read(&mut byte)).await;
    assert!(early.is_err(), "a reply held back for an hour arrived: {early:?}");

    // Clearing the latency forwards what was held back at once, and new bytes without delay.
    proxy.set_latency(Latency::NONE);
    assert_eq!(read_exactly(&mut stream, 4, Duration::from_secs(10)).await, b"late");
    stream.write_all(b"more").await.unwrap();
    assert_eq!(read_exactly(&mut stream, 4, Duration::from_secs(10)).await, b"more");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expire_session_deletes_ephemerals_and_the_owner_sees_expired() {
    let server = TestingServer::start().await.expect("server starts");
    let owner = connect(&server.connect_string(), Duration::from_secs(10)).await;
    let path = format!("/expire-me-{}", owner.session_id());
    owner.create(&path, b"", &EPHEMERAL).await.expect("create");
    let mut watcher = owner.state_watcher();

    zk_curator::raw::expire_session(&server.connect_string(), owner.session()).await.expect("expire_session");

    let observer = connect(&server.connect_string(), Duration::from_secs(10)).await;
    assert!(!node_exists(&observer, &path).await, "ephemeral node survived expire_session");
    // Make the owner talk to the server; it learns that its session is gone.
    let _ = owner.get_data(&path).await;
    wait_state(&mut watcher, SessionState::Expired, Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_elects_a_new_leader_after_the_leader_is_killed() {
    let mut cluster = TestingCluster::start(3).await.expect("cluster starts");
    assert_eq!(cluster.len(), 3);
    assert_eq!(cluster.connect_string().split(',').count(), 3);
    let leader = cluster.leader().await.expect("a leader after start");
    let client = connect(&cluster.connect_string(), Duration::from_secs(10)).await;
    client.create("/before-failover", b"1", &PERSISTENT).await.expect("create");

    cluster.kill(leader).await.expect("kill the leader");
    cluster.wait_for_quorum(Duration::from_secs(20)).await.expect("quorum after killing the leader");
    let new_leader = cluster.leader().await.expect("a new leader");
    assert_ne!(new_leader, leader);
    assert!(
        support::poll_until(Duration::from_secs(15), || async {
            client.create("/after-failover", b"2", &PERSISTENT).await.is_ok()
                || node_exists(&client, "/after-failover").await
        })
        .await,
        "client with the full connect string does not work after the failover"
    );
    assert_eq!(client.get_data("/before-failover").await.expect("old data").0, b"1");

    cluster.restart(leader).await.expect("restart the old leader");
    cluster.wait_for_quorum(Duration::from_secs(20)).await.expect("quorum with all nodes");
    let rejoined = connect(&cluster.node_connect_string(leader), Duration::from_secs(10)).await;
    rejoined.sync("/").await.expect("sync");
    assert_eq!(rejoined.get_data("/after-failover").await.expect("replicated").0, b"2");

    // A graceful stop (SIGTERM) of one follower keeps a 2-of-3 quorum under the same leader.
    let current = cluster.leader().await.expect("a leader");
    let follower = (0..cluster.len()).find(|&i| i != current).expect("a follower");
    cluster.stop(follower).await.expect("stop a follower");
    cluster.wait_for_quorum(Duration::from_secs(10)).await.expect("quorum without one follower");
    assert_eq!(cluster.leader().await, Some(current));
    assert!(matches!(cluster.kill(7).await, Err(TestingError::NoSuchNode { index: 7, len: 3 })));

    // expire_session works through the full connect string (one host is down).
    let owner = connect(&cluster.connect_string(), Duration::from_secs(10)).await;
    owner.create("/cluster-ephemeral", b"", &EPHEMERAL).await.expect("create ephemeral");
    zk_curator::raw::expire_session(&cluster.connect_string(), owner.session())
        .await
        .expect("expire_session on the ensemble");
    client.sync("/").await.expect("sync");
    assert!(!node_exists(&client, "/cluster-ephemeral").await, "ephemeral survived expire_session");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_server_kills_its_jvm_and_removes_its_directory() {
    let server = TestingServer::builder().owned().start().await.expect("server starts");
    let port = server.port();
    let dir = server.data_dir().to_path_buf();
    let pgrep = |dir: &std::path::Path| {
        std::process::Command::new("pgrep")
            .arg("-f")
            .arg(dir)
            .stdout(std::process::Stdio::null())
            .status()
            .expect("pgrep runs")
            .success()
    };
    assert!(pgrep(&dir), "the JVM's command line should mention {}", dir.display());

    drop(server);

    let refused = std::net::TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(1));
    assert!(refused.is_err(), "port {port} still accepts connections after drop");
    assert!(!pgrep(&dir), "a process still mentions {}", dir.display());
    assert!(!dir.exists(), "{} was not removed", dir.display());
}

/// Handles on one shared server (as `ZK_CONNECT` gives them) each get a chroot of their own: one
/// cannot see another's nodes, and dropping a handle removes its tree.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handles_on_a_shared_server_are_isolated_and_remove_their_tree() {
    let server = TestingServer::builder().owned().start().await.expect("server starts");
    let root = connect(&server.connect_string(), Duration::from_secs(10)).await;
    let one = TestingServer::builder().shared(&server.connect_string()).start().await.expect("first handle");
    let other = TestingServer::builder().shared(&server.connect_string()).start().await.expect("second handle");
    assert!(one.is_external() && other.is_external());
    assert_ne!(one.connect_string(), other.connect_string());

    let in_one = connect(&one.connect_string(), Duration::from_secs(10)).await;
    let in_other = connect(&other.connect_string(), Duration::from_secs(10)).await;
    in_one.create("/mine", b"1", &PERSISTENT).await.expect("create in the first chroot");
    in_one.create("/mine/child", b"2", &PERSISTENT).await.expect("create below it");
    assert!(!node_exists(&in_other, "/mine").await, "the other handle sees the first one's node");
    assert_eq!(in_other.list_children("/").await.expect("list the other chroot"), Vec::<String>::new());
    in_other.create("/mine", b"3", &PERSISTENT).await.expect("the same path in the other chroot");

    let chroot_of = |handle: &TestingServer| support::split_chroot(&handle.connect_string()).1;
    let (one_root, other_root) = (chroot_of(&one), chroot_of(&other));
    assert!(node_exists(&root, &format!("{one_root}/mine/child")).await);
    drop(in_one);
    drop(one);
    assert!(!node_exists(&root, &one_root).await, "a dropped handle's tree is removed");
    assert!(node_exists(&root, &format!("{other_root}/mine")).await, "another handle's tree stays");
}

/// A shared server that is gone fails `start` at once with a message naming it, rather than
/// as a confusing failure later in the test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_server_that_is_gone_fails_start_naming_it() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let gone = format!("127.0.0.1:{port}");
    let started = Instant::now();
    let err = TestingServer::builder().shared(&gone).start().await.expect_err("no server there");
    assert!(started.elapsed() < Duration::from_secs(30), "hang bound: took {:?}", started.elapsed());
    let text = err.to_string();
    assert!(text.contains(&gone) && text.contains("does not answer"), "{text}");
}
