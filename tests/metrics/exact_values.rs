//! The `metrics` feature against a real ZooKeeper: a recorder installed once for this test binary
//! captures every value, and scripted scenarios check them exactly — acquire waits by outcome
//! (acquired, timed out, cancelled, error), hold times, holds lost by cause (session expired, given
//! up while suspended, node deleted, client closed), the waiter gauge back at zero, the connection
//! state changes of an expiry and of a partition, the label of each recipe, and the path label
//! mapped or left out. Each test uses its own lock paths, so tests that
//! share the recorder (one process under `cargo test`) do not see each other's series.

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use metrics::Unit;
use zk_curator::leader::{LeaderLatch, LeaderSelector};
use zk_curator::locks::{
    HoldState, InterProcessMutex, InterProcessReadWriteLock, InterProcessSemaphoreMutex, InterProcessSemaphoreV2,
};
use zk_curator::testing::{expire_session, FaultProxy, ProxyMode};
use zk_curator::{ConnectionState, CuratorClient};

const WITHIN: Duration = Duration::from_secs(10);

const WAIT: &str = "zk_curator_acquire_wait_seconds";
const HOLD: &str = "zk_curator_hold_seconds";
const LOST: &str = "zk_curator_holds_lost_total";
const WAITERS: &str = "zk_curator_waiters";
const STATES: &str = "zk_curator_connection_state_changes_total";

use crate::capture::*;

/// Asserts that every sample of `name` with these labels is a plausible duration in seconds.
fn assert_durations(name: &str, pairs: &[(&str, &str)]) {
    for value in samples(name, pairs) {
        assert!((0.0..120.0).contains(&value), "{name} {pairs:?}: {value}");
    }
}

// ---------------------------------------------------------------------------------------------
// scenarios
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutex_acquires_are_measured_by_outcome_with_waiters_and_hold_times() {
    install();
    let server = support::server().await;
    let connect = server.connect_string();
    let (a, b) = (support::client(&connect).await, support::client(&connect).await);
    let path = support::unique_path("metrics-mutex");
    let ours = InterProcessMutex::new(&a, &path).unwrap();
    let theirs = InterProcessMutex::new(&b, &path).unwrap();
    let of = |outcome: &'static str| [("recipe", "mutex"), ("path", path.as_str()), ("outcome", outcome)];
    let lock = [("recipe", "mutex"), ("path", path.as_str())];

    let held = ours.lock().await.unwrap();
    assert!(theirs.try_lock_for(Duration::from_millis(200)).await.unwrap().is_none());
    assert!(theirs.try_lock().await.unwrap().is_none(), "one attempt finds the lock taken");
    assert_eq!(count(WAIT, &of("acquired")), 1);
    assert_eq!(count(WAIT, &of("timed_out")), 2);
    assert_eq!(gauge(WAITERS, &lock), 0.0, "no acquire waits now");

    // A waiter is counted while it waits; aborting it is a cancelled acquire.
    let waiter = tokio::spawn({
        let theirs = theirs.clone();
        async move { theirs.lock().await.map(|guard| guard.node_path().to_string()) }
    });
    support::eventually(WITHIN, "the waiter is counted", || async { gauge(WAITERS, &lock) == 1.0 }).await;
    waiter.abort();
    assert!(waiter.await.unwrap_err().is_cancelled());
    assert_eq!(gauge(WAITERS, &lock), 0.0, "the gauge is down once the waiter is dropped");
    assert_eq!(count(WAIT, &of("cancelled")), 1);

    held.release().await.unwrap();
    assert_eq!(count(HOLD, &lock), 1, "a released hold records its hold time");
    let second = theirs.lock().await.unwrap();
    second.release().await.unwrap();

    // A closed client cannot acquire: an error.
    let closed = support::client(&connect).await;
    let refused = InterProcessMutex::new(&closed, &path).unwrap();
    closed.close().await;
    assert!(refused.lock().await.is_err());

    assert_eq!(count(WAIT, &of("acquired")), 2);
    assert_eq!(count(WAIT, &of("timed_out")), 2);
    assert_eq!(count(WAIT, &of("cancelled")), 1);
    assert_eq!(count(WAIT, &of("error")), 1);
    assert_eq!(count(HOLD, &lock), 2);
    assert_eq!(gauge(WAITERS, &lock), 0.0);
    for outcome in ["acquired", "timed_out", "cancelled", "error"] {
        assert_durations(WAIT, &of(outcome));
    }
    assert_durations(HOLD, &lock);
    // Nothing else was recorded for this path: no loss, no other recipe or label set.
    let expected = vec![
        (WAIT.to_string(), labels(&of("acquired")), 2.0),
        (WAIT.to_string(), labels(&of("cancelled")), 1.0),
        (WAIT.to_string(), labels(&of("error")), 1.0),
        (WAIT.to_string(), labels(&of("timed_out")), 2.0),
        (HOLD.to_string(), labels(&lock), 2.0),
        (WAITERS.to_string(), labels(&lock), 0.0),
    ];
    assert_eq!(series_of_path(&path), expected);
}

/// The connection state counters, by state.
fn state_counts() -> BTreeMap<String, u64> {
    ["CONNECTED", "SUSPENDED", "LOST", "RECONNECTED", "READ_ONLY"]
        .into_iter()
        .map(|state| (state.to_string(), counter(STATES, &[("state", state)])))
        .collect()
}

/// Asserts that the process-wide counters gained at least one count per change in `changes`
/// since `before`. At least, not exactly: the counter has no client label, and any other client
/// of this process may change state meanwhile — e.g. the client of another test whose server was
/// stopped while a recipe's task still held the client, which is SUSPENDED, rightly (the extra
/// SUSPENDED of a flaky run of `a_hold_given_up_while_suspended_...` was exactly that).
#[track_caller]
fn assert_counted(before: &BTreeMap<String, u64>, changes: &[ConnectionState]) {
    let now = state_counts();
    for state in changes {
        let name = state.to_string();
        let published = changes.iter().filter(|s| *s == state).count() as u64;
        let gained = now[&name] - before[&name];
        assert!(gained >= published, "{name}: counted {gained}, this client alone published {published}: {changes:?}");
    }
}

/// Taken by the tests that count connection state changes (a counter of the whole process, with
/// no client label): under `cargo test` they would otherwise count each other's.
static COUNTING_STATES: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The changes `stream` has delivered so far, in order (after its first item, the state when it
/// was made, which the caller has read), checked against the documented rule.
#[track_caller]
fn delivered(
    stream: &mut zk_curator::framework::ConnectionStateStream,
    first: ConnectionState,
) -> Vec<ConnectionState> {
    let changes = support::queued_states(stream);
    assert_eq!(stream.missed(), 0);
    support::assert_documented_states(&[&[first][..], &changes].concat());
    changes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_lost_to_session_expiry_counts_its_cause_and_the_connection_states() {
    install();
    let _counting = COUNTING_STATES.lock().await;
    let server = support::server().await;
    let connect = server.connect_string();
    let client = support::client(&connect).await;
    let path = support::unique_path("metrics-expiry");
    let mutex = InterProcessMutex::new(&client, &path).unwrap();
    let lock = [("recipe", "mutex"), ("path", path.as_str())];
    let expired = [("recipe", "mutex"), ("path", path.as_str()), ("cause", "session_expired")];

    let held = mutex.lock().await.unwrap();
    let mut states = client.connection_states();
    assert_eq!(states.try_next(), Some(ConnectionState::Connected));
    let before = state_counts();
    let old = client.session_id();
    expire_session(&connect, &client).await.unwrap();
    support::session_replaced(&client, old).await;
    // Nobody watched the hold: its end is seen now, and its cause is the session's end.
    tokio::time::timeout(WITHIN, held.lost()).await.expect("the hold is lost");
    assert_eq!(held.hold_state(), HoldState::Lost);
    assert_eq!(counter(LOST, &expired), 1);
    assert_eq!(count(HOLD, &lock), 1);
    // Releasing a lost hold ends nothing twice.
    let _ = held.release().await;
    assert_eq!(count(HOLD, &lock), 1);
    assert_eq!(counter(LOST, &expired), 1);

    // The changes the client published follow the documented rule: one LOST, then the
    // RECONNECTED of the new session (with, depending on how the owner's connection is dropped,
    // SUSPENDED/RECONNECTED pairs before the server says "expired"); every one is counted.
    let seen = delivered(&mut states, ConnectionState::Connected);
    assert_eq!(seen.iter().filter(|s| **s == ConnectionState::Lost).count(), 1, "{seen:?}");
    assert_counted(&before, &seen);
    assert!(counter(STATES, &[("state", "CONNECTED")]) >= 1, "the first connection counts");
}

/// A partition: the client gives the session up while suspended (LOST before the server could
/// expire it). The hold's cause says so; SUSPENDED, LOST and RECONNECTED are counted once each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_given_up_while_suspended_counts_its_cause_and_the_connection_states() {
    install();
    let _counting = COUNTING_STATES.lock().await;
    let server = support::server().await;
    let connect = server.connect_string();
    let proxy = FaultProxy::start(&connect).await.unwrap();
    let client = support::client_with(&proxy.connect_string(), Duration::from_secs(4)).await;
    let path = support::unique_path("metrics-given-up");
    let mutex = InterProcessMutex::new(&client, &path).unwrap();
    let lost = |cause| counter(LOST, &[("recipe", "mutex"), ("path", &path), ("cause", cause)]);

    let held = mutex.lock().await.unwrap();
    let mut hold_state = held.watch_state();
    let mut states = client.connection_states();
    assert_eq!(states.try_next(), Some(ConnectionState::Connected));
    let before = state_counts();
    let old = client.session_id();
    proxy.set_mode(ProxyMode::Blackhole);
    tokio::time::timeout(Duration::from_secs(30), hold_state.wait_for(|s| *s == HoldState::Lost))
        .await
        .expect("the hold is given up")
        .unwrap();
    assert_eq!(lost("session_given_up"), 1);
    proxy.set_mode(ProxyMode::Pass);
    support::session_replaced(&client, old).await;
    let _ = held.release().await;

    assert_eq!(lost("session_given_up"), 1);
    assert_eq!(lost("session_expired") + lost("node_deleted") + lost("client_closed"), 0);
    assert_eq!(count(HOLD, &[("recipe", "mutex"), ("path", &path)]), 1);
    // The client's own changes: SUSPENDED, LOST, RECONNECTED (the blackhole allows no reconnect
    // before LOST), then — the documented rule, not one interleaving — SUSPENDED/RECONNECTED
    // pairs if the new session's connection drops (e.g. a ping answered late on a loaded
    // machine), never another LOST. Each is counted.
    let seen = delivered(&mut states, ConnectionState::Connected);
    use ConnectionState::{Lost, Reconnected, Suspended};
    assert_eq!(seen.get(..3), Some(&[Suspended, Lost, Reconnected][..]), "{seen:?}");
    assert_eq!(seen.iter().filter(|s| **s == Lost).count(), 1, "{seen:?}");
    assert_counted(&before, &seen);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_whose_node_is_deleted_is_lost_by_node_deleted() {
    install();
    let server = support::server().await;
    let connect = server.connect_string();
    let client = support::client(&connect).await;
    let path = support::unique_path("metrics-deleted");
    let mutex = InterProcessMutex::new(&client, &path).unwrap();

    let held = mutex.lock().await.unwrap();
    let _watching = held.watch_state();
    let operator = support::observer(&connect).await;
    operator.delete(held.node_path(), None).await.unwrap();
    tokio::time::timeout(WITHIN, held.lost()).await.expect("the hold is lost");
    let lost = |cause| counter(LOST, &[("recipe", "mutex"), ("path", &path), ("cause", cause)]);
    assert_eq!(lost("node_deleted"), 1, "counted as soon as the hold is seen lost");
    let _ = held.release().await;

    assert_eq!(lost("node_deleted"), 1);
    assert_eq!(lost("session_expired") + lost("session_given_up") + lost("client_closed"), 0);
    assert_eq!(count(HOLD, &[("recipe", "mutex"), ("path", &path)]), 1);
}

/// Closing the client under a held lock ends the hold: lost, by `client_closed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_of_a_closed_client_is_lost_by_client_closed() {
    install();
    let server = support::server().await;
    let connect = server.connect_string();
    let client = support::client(&connect).await;
    let path = support::unique_path("metrics-closed");
    let mutex = InterProcessMutex::new(&client, &path).unwrap();

    let held = mutex.lock().await.unwrap();
    let _watching = held.watch_state();
    client.close().await;
    tokio::time::timeout(WITHIN, held.lost()).await.expect("the hold is lost");
    let lost = |cause| counter(LOST, &[("recipe", "mutex"), ("path", &path), ("cause", cause)]);
    assert_eq!(lost("client_closed"), 1);
    assert_eq!(lost("session_expired") + lost("session_given_up") + lost("node_deleted"), 0);
    drop(held);
    assert_eq!(count(HOLD, &[("recipe", "mutex"), ("path", &path)]), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_recipe_is_measured_under_its_own_name() {
    install();
    let server = support::server().await;
    let connect = server.connect_string();
    let (a, b) = (support::client(&connect).await, support::client(&connect).await);
    let wait = |recipe: &'static str, path: &str, outcome: &'static str| {
        count(WAIT, &[("recipe", recipe), ("path", path), ("outcome", outcome)])
    };
    let hold = |recipe: &'static str, path: &str| count(HOLD, &[("recipe", recipe), ("path", path)]);

    // Semaphore: one sample per lease, its internal mutex not measured apart.
    let semaphore_path = support::unique_path("metrics-semaphore");
    let semaphore = InterProcessSemaphoreV2::new(&a, &semaphore_path, 2).unwrap();
    let leases = vec![semaphore.acquire().await.unwrap(), semaphore.acquire().await.unwrap()];
    let other = InterProcessSemaphoreV2::new(&b, &semaphore_path, 2).unwrap();
    assert!(other.acquire_timeout(Duration::from_millis(200)).await.unwrap().is_none());
    zk_curator::locks::return_all(leases).await.unwrap();
    assert_eq!(wait("semaphore", &semaphore_path, "acquired"), 2);
    assert_eq!(wait("semaphore", &semaphore_path, "timed_out"), 1);
    assert_eq!(hold("semaphore", &semaphore_path), 2);
    let recorded = series_of_path(&semaphore_path);
    assert!(recorded.iter().all(|(_, labels, _)| labels["recipe"] == "semaphore"), "{recorded:?}");
    assert_eq!(recorded.len(), 4, "waits (acquired, timed out), holds, waiters: {recorded:?}");

    // Semaphore mutex.
    let semaphore_mutex_path = support::unique_path("metrics-semaphore-mutex");
    let semaphore_mutex = InterProcessSemaphoreMutex::new(&a, &semaphore_mutex_path).unwrap();
    semaphore_mutex.acquire().await.unwrap();
    semaphore_mutex.release().await.unwrap();
    assert_eq!(wait("semaphore_mutex", &semaphore_mutex_path, "acquired"), 1);
    assert_eq!(hold("semaphore_mutex", &semaphore_mutex_path), 1);

    // Read-write lock: each half under its own name.
    let rw_path = support::unique_path("metrics-rw");
    let ours = InterProcessReadWriteLock::new(&a, &rw_path).unwrap();
    let theirs = InterProcessReadWriteLock::new(&b, &rw_path).unwrap();
    let read = ours.read_lock().lock().await.unwrap();
    assert!(theirs.write_lock().try_lock_for(Duration::from_millis(200)).await.unwrap().is_none());
    read.release().await.unwrap();
    assert_eq!(wait("read", &rw_path, "acquired"), 1);
    assert_eq!(wait("write", &rw_path, "timed_out"), 1);
    assert_eq!(hold("read", &rw_path), 1);
    assert_eq!(wait("write", &rw_path, "acquired") + wait("read", &rw_path, "timed_out"), 0);

    // Leader latch: the leader's term is a hold; a waiting participant closed is a cancelled wait.
    let latch_path = support::unique_path("metrics-latch");
    let leader = LeaderLatch::new(&a, &latch_path, "leader").unwrap();
    leader.start().unwrap();
    assert!(leader.await_leadership_timeout(WITHIN).await.unwrap());
    let follower = LeaderLatch::new(&b, &latch_path, "follower").unwrap();
    follower.start().unwrap();
    let waiting = [("recipe", "latch"), ("path", latch_path.as_str())];
    support::eventually(WITHIN, "the follower waits", || async { gauge(WAITERS, &waiting) == 1.0 }).await;
    follower.close().await.unwrap();
    leader.close().await.unwrap();
    support::eventually(WITHIN, "the term is recorded", || async { hold("latch", &latch_path) == 1 }).await;
    assert_eq!(wait("latch", &latch_path, "acquired"), 1);
    assert_eq!(wait("latch", &latch_path, "cancelled"), 1);
    assert_eq!(gauge(WAITERS, &waiting), 0.0);

    // Leader selector: one term of work.
    let selector_path = support::unique_path("metrics-selector");
    let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel();
    let selector = LeaderSelector::new(&a, &selector_path, "worker", move |_| {
        let done = done_tx.clone();
        async move {
            let _ = done.send(());
        }
    })
    .unwrap();
    selector.start().unwrap();
    tokio::time::timeout(WITHIN, done_rx.recv()).await.expect("the work ran");
    support::eventually(WITHIN, "the term is recorded", || async { hold("selector", &selector_path) == 1 }).await;
    selector.close().await.unwrap();
    assert_eq!(wait("selector", &selector_path, "acquired"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_path_label_can_be_mapped_or_left_out() {
    install();
    let server = support::server().await;
    let connect = server.connect_string();
    let root = support::unique_path("metrics-label");
    let template = format!("{root}/jobs/{{id}}");

    let prefix = format!("{root}/jobs/");
    let to_template = template.clone();
    let mapped = CuratorClient::builder(&connect)
        .metrics_path_label(move |path| if path.starts_with(&prefix) { to_template.clone() } else { path.to_string() })
        .connect()
        .await
        .unwrap();
    for job in ["7f3a", "91c2"] {
        let mutex = InterProcessMutex::new(&mapped, &format!("{root}/jobs/{job}")).unwrap();
        mutex.lock().await.unwrap().release().await.unwrap();
        assert!(series_of_path(&format!("{root}/jobs/{job}")).is_empty(), "the raw path is never a label");
    }
    assert_eq!(count(WAIT, &[("recipe", "mutex"), ("path", &template), ("outcome", "acquired")]), 2);
    assert_eq!(count(HOLD, &[("recipe", "mutex"), ("path", &template)]), 2);

    // Without the label: series per recipe only (no other test of this binary leaves it out).
    let unlabelled = CuratorClient::builder(&connect).metrics_without_path_label().connect().await.unwrap();
    let semaphore = InterProcessSemaphoreMutex::new(&unlabelled, &format!("{root}/plain")).unwrap();
    semaphore.acquire().await.unwrap();
    semaphore.release().await.unwrap();
    assert!(series_of_path(&format!("{root}/plain")).is_empty());
    assert_eq!(count(WAIT, &[("recipe", "semaphore_mutex"), ("outcome", "acquired")]), 1);
    assert_eq!(count(HOLD, &[("recipe", "semaphore_mutex")]), 1);
    assert_eq!(gauge(WAITERS, &[("recipe", "semaphore_mutex")]), 0.0);

    // Every metric is described to the recorder, with its unit.
    let described = described_units();
    assert_eq!(described.get(WAIT), Some(&Some(Unit::Seconds)));
    assert_eq!(described.get(HOLD), Some(&Some(Unit::Seconds)));
    assert_eq!(described.get(LOST), Some(&Some(Unit::Count)));
    assert_eq!(described.get(WAITERS), Some(&Some(Unit::Count)));
    assert_eq!(described.get(STATES), Some(&Some(Unit::Count)));
}

/// Service discovery: a registration counts once (an update of a registered id does not), the
/// cache's size follows its instances, and every pick is counted by outcome.
#[cfg(feature = "discovery")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_counts_registrations_cache_size_and_lookups() {
    use zk_curator::discovery::{ServiceDiscovery, ServiceInstance};
    const REGISTRATIONS: &str = "zk_curator_discovery_registrations_total";
    const CACHE: &str = "zk_curator_discovery_cache_instances";
    const LOOKUPS: &str = "zk_curator_discovery_lookups_total";
    install();
    let server = support::server().await;
    let client = support::client(&server.connect_string()).await;
    let base = support::unique_path("metrics-discovery");
    // The `service` label is the name alone: unique per test, as the paths are.
    let service = base.rsplit('/').next().unwrap().to_string();
    let discovery = ServiceDiscovery::<()>::builder(&client, &base).build().unwrap();
    let provider = discovery.provider_builder(&service).start().unwrap();
    assert!(provider.wait_initialized_timeout(WITHIN).await.unwrap());
    assert!(provider.get_instance().is_none());
    let instances: Vec<ServiceInstance<()>> = (0..3)
        .map(|i| ServiceInstance::builder(service.clone()).id(format!("i{i}")).port(1).build().unwrap())
        .collect();
    discovery.register(&instances[0]).await.unwrap();
    discovery.register_all(&instances[1..]).await.unwrap();
    discovery.register(&instances[0]).await.unwrap();
    let by_service = [("service", service.as_str())];
    assert_eq!(counter(REGISTRATIONS, &by_service), 3, "an update is not a registration");
    support::eventually(WITHIN, "the cache holds the three", || async { provider.cache().len() == 3 }).await;
    assert_eq!(gauge(CACHE, &by_service), 3.0);
    for _ in 0..5 {
        assert!(provider.get_instance().is_some());
    }
    assert_eq!(counter(LOOKUPS, &[("service", service.as_str()), ("outcome", "found")]), 5);
    assert_eq!(counter(LOOKUPS, &[("service", service.as_str()), ("outcome", "none")]), 1);
    discovery.unregister(&instances[2]).await.unwrap();
    support::eventually(WITHIN, "the gauge follows an unregister", || async { gauge(CACHE, &by_service) == 2.0 }).await;
    discovery.close().await.unwrap();
}
