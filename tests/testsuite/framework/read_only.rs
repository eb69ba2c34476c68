//! Sessions on a read-only server (`can_be_read_only(true)`; a ZooKeeper member cut off from its
//! quorum with `readonlymode.enabled=true`): reported `READ_ONLY`, never fully connected, no hold
//! `Held` there, the LOST timer running; and what follows when the quorum is back
//! (docs/failure-semantics.md, "Which sequences a subscriber sees").

use crate::support;

use std::time::{Duration, Instant};

use zk_curator::framework::ConnectionStateStream;
use zk_curator::locks::{HoldState, InterProcessMutex};
use zk_curator::testing::TestingCluster;
use zk_curator::{ConnectionState, CreateMode, CuratorClient};

use ConnectionState::{Connected, Latent, Lost, ReadOnly, Reconnected, Suspended};

/// Session timeout of the clients here: short, so the LOST timer fires within a few seconds.
const SESSION: Duration = Duration::from_secs(3);

/// A 3-node ensemble in read-only mode whose nodes 0 and 1 are down: node 2 serves read-only.
async fn read_only_member() -> TestingCluster {
    let mut cluster = TestingCluster::builder(3).read_only_mode(true).start().await.expect("cluster");
    cluster.kill(0).await.expect("kill node 0");
    cluster.kill(1).await.expect("kill node 1");
    cluster.wait_for_read_only(2, Duration::from_secs(30)).await.expect("node 2 read-only");
    cluster
}

/// Everything `states` yields until `want` (included) arrives; panics after `within`.
async fn states_until(
    states: &mut ConnectionStateStream,
    want: ConnectionState,
    within: Duration,
) -> Vec<ConnectionState> {
    let deadline = Instant::now() + within;
    let mut seen = Vec::new();
    loop {
        let got = tokio::time::timeout_at(deadline.into(), states.next())
            .await
            .unwrap_or_else(|_| panic!("no {want} within {within:?}; seen {seen:?}"))
            .expect("connection-state stream closed");
        seen.push(got);
        if got == want {
            return seen;
        }
    }
}

/// The client's session id is the session that owns what it creates now (not a session the
/// connection left behind), and a lock is `Held` on it.
async fn serves_read_write_on_its_session(client: &CuratorClient, what: &str) {
    let path = support::unique_path("read-only-owner");
    client
        .create(&path)
        .mode(CreateMode::Ephemeral)
        .creating_parent_containers_if_needed()
        .await
        .unwrap_or_else(|e| panic!("{what}: create: {e:?}"));
    let (_, stat) = client.get_data(&path).await.expect("get_data");
    assert_eq!(
        stat.ephemeral_owner,
        client.session_id(),
        "{what}: the node belongs to the session the client reports ({:#x} vs {:#x})",
        stat.ephemeral_owner,
        client.session_id()
    );
    let mutex = InterProcessMutex::new(client, &support::unique_path("read-only-lock")).expect("mutex");
    let guard = mutex.try_lock_for(Duration::from_secs(10)).await.expect("lock").expect("acquired");
    assert_eq!(guard.hold_state(), HoldState::Held, "{what}");
    guard.release().await.expect("release");
}

/// A read-only connection serves no write and no hold.
async fn no_lock_on_read_only(client: &CuratorClient, what: &str) {
    let mutex = InterProcessMutex::new(client, &support::unique_path("read-only-lock")).expect("mutex");
    let acquired = mutex.acquire_timeout(Duration::from_secs(1)).await;
    assert!(!matches!(acquired, Ok(true)), "{what}: a lock acquired on a read-only server: {acquired:?}");
    assert_ne!(mutex.current_hold().map(|h| h.hold_state()), Some(HoldState::Held), "{what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_session_on_a_read_only_server_is_read_only_until_the_quorum_is_back() {
    support::init_tracing();
    let mut cluster = read_only_member().await;
    let client = CuratorClient::builder(&cluster.node_connect_string(2))
        .can_be_read_only(true)
        .session_timeout(SESSION)
        .connection_timeout(Duration::from_secs(5))
        .start()
        .expect("start");
    let mut states = client.connection_states();

    let mut seen = states_until(&mut states, ReadOnly, Duration::from_secs(20)).await;
    assert_eq!(seen.first(), Some(&Latent), "{seen:?}");
    assert_eq!(client.connection_state(), ReadOnly);
    assert!(client.is_connected(), "READ_ONLY serves reads: connected, as Curator's isConnected()");
    client.get_data("/").await.expect("reads are served");
    no_lock_on_read_only(&client, "first session, read-only").await;

    // The quorum may expire a session it cannot renew: the LOST timer runs while read-only, and
    // the next session on the same member is read-only again.
    seen.extend(states_until(&mut states, Lost, SESSION * 3).await);
    seen.extend(states_until(&mut states, ReadOnly, Duration::from_secs(20)).await);
    assert!(!seen.iter().any(|s| matches!(s, Connected | Reconnected)), "never fully connected: {seen:?}");

    // The quorum is back: the first read-write connection is CONNECTED, on a session whose id
    // the client knows.
    cluster.restart(0).await.expect("restart node 0");
    seen.extend(states_until(&mut states, Connected, Duration::from_secs(40)).await);
    seen.extend(support::queued_states(&mut states));
    support::assert_documented_states(&seen);
    serves_read_write_on_its_session(&client, "after the quorum is back").await;
    seen.extend(support::queued_states(&mut states));
    support::assert_documented_states(&seen);
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replacement_session_on_a_read_only_server_is_read_only() {
    support::init_tracing();
    let mut cluster = TestingCluster::builder(3).read_only_mode(true).start().await.expect("cluster");
    let client = CuratorClient::builder(&cluster.node_connect_string(2))
        .can_be_read_only(true)
        .session_timeout(SESSION)
        .connection_timeout(Duration::from_secs(5))
        .connect()
        .await
        .expect("connect");
    let mut states = client.connection_states();
    let mutex = InterProcessMutex::new(&client, &support::unique_path("read-only-held")).expect("mutex");
    assert!(mutex.acquire_timeout(Duration::from_secs(10)).await.expect("acquire"));
    let first = client.session_id();

    // Node 2 loses the quorum: SUSPENDED, then LOST (given up, or expired), and the replacement
    // session lands on the read-only member.
    cluster.kill(0).await.expect("kill node 0");
    cluster.kill(1).await.expect("kill node 1");
    let mut seen = states_until(&mut states, Lost, Duration::from_secs(30)).await;
    let after_lost = tokio::time::timeout(Duration::from_secs(30), states.next())
        .await
        .expect("a replacement session within 30 s")
        .expect("stream");
    seen.push(after_lost);
    assert_eq!(after_lost, ReadOnly, "a replacement on a read-only server: {seen:?}");
    assert_eq!(client.connection_state(), ReadOnly, "{seen:?}");
    assert!(client.is_connected());
    assert_ne!(mutex.current_hold().map(|h| h.hold_state()), Some(HoldState::Held), "the old hold is lost");
    no_lock_on_read_only(&client, "replacement session, read-only").await;
    assert!(!seen[1..].iter().any(|s| matches!(s, Connected | Reconnected)), "never fully connected: {seen:?}");

    // The quorum is back: READ_ONLY → LOST → RECONNECTED (a new session, see the docs), on a
    // session id the client knows.
    cluster.restart(0).await.expect("restart node 0");
    seen.extend(states_until(&mut states, Reconnected, Duration::from_secs(40)).await);
    seen.extend(support::queued_states(&mut states));
    support::assert_documented_states(&seen);
    assert!(seen.contains(&Suspended), "{seen:?}");
    assert_ne!(client.session_id(), first);
    serves_read_write_on_its_session(&client, "after the quorum is back").await;
    seen.extend(support::queued_states(&mut states));
    support::assert_documented_states(&seen);
    client.close().await;
}
