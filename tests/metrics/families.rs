//! The metrics of the recipe families beyond locks and leaders, against a real ZooKeeper: each
//! family's series with exact values after a scripted scenario — caches (nodes, events, resyncs),
//! node recipes (creates and re-creates), counters (operations by outcome, attempts), barriers
//! (waits by phase and outcome), work claims and idempotency keys (outcomes). Each test uses its
//! own paths, so the tests sharing the recorder do not see each other's series.

use crate::capture::*;
use crate::support;

use std::time::Duration;

use zk_curator::atomic::DistributedAtomicLong;
use zk_curator::barriers::{DistributedBarrier, DistributedDoubleBarrier};
use zk_curator::cache::CuratorCache;
use zk_curator::claims::WorkClaims;
use zk_curator::idempotency::{Begin, IdempotencyKeys, Retention};
use zk_curator::nodes::{GroupMember, PersistentNode, Protection};
use zk_curator::shared::SharedCount;
use zk_curator::CreateMode;

const WITHIN: Duration = Duration::from_secs(20);

const CACHE_NODES: &str = "zk_curator_cache_nodes";
const CACHE_EVENTS: &str = "zk_curator_cache_events_total";
const CACHE_RESYNCS: &str = "zk_curator_cache_resyncs_total";
const NODE_CREATES: &str = "zk_curator_node_creates_total";
const COUNTER_OPERATIONS: &str = "zk_curator_counter_operations_total";
const COUNTER_ATTEMPTS: &str = "zk_curator_counter_attempts_total";
const BARRIER_WAIT: &str = "zk_curator_barrier_wait_seconds";
const CLAIMS: &str = "zk_curator_claims_total";

/// Waits (bounded: a hang guard) until `cond` holds.
async fn eventually(what: &str, cond: impl Fn() -> bool + Sync) {
    assert!(support::poll_until(WITHIN, || std::future::ready(cond())).await, "{what}: not within {WITHIN:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_records_its_size_its_events_and_its_resyncs() {
    install();
    let (server, clients) = support::server_and_clients(1).await;
    let client = &clients[0];
    let path = support::unique_path("metrics-cache");
    client.create(&format!("{path}/a")).creating_parents_if_needed().await.unwrap();
    client.create(&format!("{path}/b")).await.unwrap();
    let cache = CuratorCache::start(client, &path).unwrap();
    assert!(cache.wait_initialized_timeout(WITHIN).await.unwrap());
    let of = |event: &'static str| [("recipe", "cache"), ("path", path.as_str()), ("event", event)];
    let cache_labels = [("recipe", "cache"), ("path", path.as_str())];
    assert_eq!(gauge(CACHE_NODES, &cache_labels), 3.0, "{:?}", series_of_path(&path));
    assert_eq!(counter(CACHE_EVENTS, &of("created")), 3);

    client.set_data(&format!("{path}/a"), b"x".to_vec()).await.unwrap();
    eventually("a changed event", || counter(CACHE_EVENTS, &of("changed")) == 1).await;
    client.delete(&format!("{path}/b")).await.unwrap();
    eventually("a deleted event", || counter(CACHE_EVENTS, &of("deleted")) == 1).await;
    assert_eq!(gauge(CACHE_NODES, &cache_labels), 2.0);
    assert_eq!(counter(CACHE_RESYNCS, &cache_labels), 0, "the first load is no resync");

    // A new session: the cache loads everything again.
    let old = client.session_id();
    zk_curator::testing::expire_session(&server.connect_string(), client).await.unwrap();
    support::session_replaced(client, old).await;
    eventually("a resync after the session expired", || counter(CACHE_RESYNCS, &cache_labels) >= 1).await;
    assert_eq!(gauge(CACHE_NODES, &cache_labels), 2.0);
    cache.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_cache_no_longer_counts_in_the_nodes_gauge_and_two_caches_of_a_path_add_up() {
    install();
    let (_server, clients) = support::server_and_clients(1).await;
    let client = &clients[0];
    let path = support::unique_path("metrics-cache-close");
    client.create(&format!("{path}/a")).creating_parents_if_needed().await.unwrap();
    let cache_labels = [("recipe", "cache"), ("path", path.as_str())];
    // Two caches of the same path (the same label values): the gauge holds both.
    let first = CuratorCache::start(client, &path).unwrap();
    assert!(first.wait_initialized_timeout(WITHIN).await.unwrap());
    let second = CuratorCache::start(client, &path).unwrap();
    assert!(second.wait_initialized_timeout(WITHIN).await.unwrap());
    assert_eq!(gauge(CACHE_NODES, &cache_labels), 4.0, "two caches of two nodes each");
    // A closed cache follows nothing any more: its nodes leave the gauge, the other's stay.
    first.close().await;
    assert_eq!(gauge(CACHE_NODES, &cache_labels), 2.0, "the open cache's nodes only");
    client.create(&format!("{path}/b")).await.unwrap();
    eventually("the open cache's third node", || gauge(CACHE_NODES, &cache_labels) == 3.0).await;
    // Dropped without close: the same.
    drop(second);
    assert_eq!(gauge(CACHE_NODES, &cache_labels), 0.0, "no cache of the path is open");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_members_series_is_labelled_by_its_group_not_by_its_member_id() {
    install();
    let (_server, clients) = support::server_and_clients(1).await;
    let client = &clients[0];
    let group = support::unique_path("metrics-group");
    // Member ids are often per process or per start (a host name, a UUID): one series per
    // group, not one per id ever used.
    let of_group = [("recipe", "group_member"), ("path", group.as_str()), ("kind", "initial")];
    for (created, id) in [(1, "member-1"), (2, "member-2")] {
        let member = GroupMember::new(client, &group, id, b"m".to_vec()).unwrap();
        member.start().unwrap();
        let of_member = format!("{group}/{id}");
        eventually("the member's node", || {
            counter(NODE_CREATES, &of_group) >= created || !series_of_path(&of_member).is_empty()
        })
        .await;
        assert!(series_of_path(&of_member).is_empty(), "a series per member id: {:?}", series_of_path(&of_member));
        member.close().await.unwrap();
    }
    assert_eq!(counter(NODE_CREATES, &of_group), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persistent_node_counts_its_first_create_and_each_re_creation() {
    install();
    let (_server, clients) = support::server_and_clients(2).await;
    let (client, other) = (&clients[0], &clients[1]);
    let path = support::unique_path("metrics-node");
    let node =
        PersistentNode::new(client, &path, CreateMode::Ephemeral, Protection::Unprotected, b"n".to_vec()).unwrap();
    node.start().unwrap();
    assert!(node.wait_for_initial_create(WITHIN).await.unwrap());
    let of = |kind: &'static str| [("recipe", "persistent_node"), ("path", path.as_str()), ("kind", kind)];
    // Counted by the node's task once the create's reply is handled, which can come just after
    // the waiter was woken (seen once in a CI run: 0 right after the wait).
    eventually("the initial create counted", || counter(NODE_CREATES, &of("initial")) >= 1).await;
    assert_eq!(counter(NODE_CREATES, &of("initial")), 1);
    assert_eq!(counter(NODE_CREATES, &of("recreated")), 0);
    other.delete(&path).await.unwrap();
    eventually("a re-creation after a delete", || counter(NODE_CREATES, &of("recreated")) == 1).await;
    assert_eq!(counter(NODE_CREATES, &of("initial")), 1);
    node.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counters_record_operations_by_outcome_and_their_attempts() {
    install();
    let (_server, clients) = support::server_and_clients(1).await;
    let client = &clients[0];
    let path = support::unique_path("metrics-atomic");
    let long = DistributedAtomicLong::new(client, &path).unwrap();
    assert!(long.increment().await.unwrap().succeeded());
    assert!(long.increment().await.unwrap().succeeded());
    let atomic = |key: &'static str, value: &'static str| [("recipe", "atomic"), ("path", path.as_str()), (key, value)];
    assert_eq!(counter(COUNTER_OPERATIONS, &atomic("outcome", "succeeded")), 2);
    assert_eq!(counter(COUNTER_OPERATIONS, &atomic("outcome", "failed")), 0);
    assert_eq!(counter(COUNTER_ATTEMPTS, &atomic("kind", "optimistic")), 2, "one write each, uncontended");

    let shared_path = support::unique_path("metrics-shared");
    let count = SharedCount::start(client, &shared_path, 0).await.unwrap();
    let stale = count.versioned_value();
    count.set_count(5).await.unwrap();
    assert!(!count.try_set(6, &stale).await.unwrap(), "a stale version loses");
    let shared =
        |outcome: &'static str| [("recipe", "shared_count"), ("path", shared_path.as_str()), ("outcome", outcome)];
    assert_eq!(counter(COUNTER_OPERATIONS, &shared("succeeded")), 1);
    assert_eq!(counter(COUNTER_OPERATIONS, &shared("failed")), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn barrier_waits_are_recorded_by_phase_and_outcome() {
    install();
    let (_server, clients) = support::server_and_clients(1).await;
    let client = &clients[0];
    let path = support::unique_path("metrics-barrier");
    let barrier = DistributedBarrier::new(client, &path).unwrap();
    barrier.set_barrier().await.unwrap();
    assert!(!barrier.wait_on_barrier_timeout(Duration::from_millis(100)).await.unwrap());
    barrier.remove_barrier().await.unwrap();
    barrier.wait_on_barrier().await.unwrap();
    // A wait dropped before it ended is recorded as cancelled.
    barrier.set_barrier().await.unwrap();
    assert!(tokio::time::timeout(Duration::from_millis(100), barrier.wait_on_barrier()).await.is_err());
    let of = |outcome: &'static str| {
        [("recipe", "barrier"), ("path", path.as_str()), ("phase", "wait"), ("outcome", outcome)]
    };
    assert_eq!(count(BARRIER_WAIT, &of("timed_out")), 1);
    assert_eq!(count(BARRIER_WAIT, &of("passed")), 1);
    assert_eq!(count(BARRIER_WAIT, &of("cancelled")), 1);
    barrier.remove_barrier().await.unwrap();

    let double_path = support::unique_path("metrics-double-barrier");
    let mut double = DistributedDoubleBarrier::new(client, &double_path, 1).unwrap();
    double.enter().await.unwrap();
    double.leave().await.unwrap();
    for phase in ["enter", "leave"] {
        let labels =
            [("recipe", "double_barrier"), ("path", double_path.as_str()), ("phase", phase), ("outcome", "passed")];
        assert_eq!(count(BARRIER_WAIT, &labels), 1, "{phase}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_claims_and_idempotency_keys_record_their_outcomes() {
    install();
    let (_server, clients) = support::server_and_clients(1).await;
    let client = &clients[0];
    let path = support::unique_path("metrics-claims");
    let work = WorkClaims::new(client, &path, "worker").unwrap();
    for item in ["a", "b"] {
        work.add(item, b"").await.unwrap();
    }
    let claimed = work.claim(2).await.unwrap();
    assert_eq!(claimed.len(), 2);
    work.complete("a").await.unwrap();
    work.release("b").await.unwrap();
    let of = |outcome: &'static str| [("recipe", "work_claims"), ("path", path.as_str()), ("outcome", outcome)];
    assert_eq!(counter(CLAIMS, &of("claimed")), 2);
    assert_eq!(counter(CLAIMS, &of("completed")), 1);
    assert_eq!(counter(CLAIMS, &of("released")), 1);
    drop(claimed);

    let base = support::unique_path("metrics-idempotency");
    let keys = IdempotencyKeys::new(client, &base, Retention::Sweep(Duration::from_secs(3600))).unwrap();
    match keys.begin("order-1").await.unwrap() {
        Begin::Started(claim) => claim.complete(b"ok".to_vec()).await.unwrap(),
        other => panic!("a fresh key: {other:?}"),
    }
    assert!(matches!(keys.begin("order-1").await.unwrap(), Begin::Done { .. }));
    let of = |outcome: &'static str| [("recipe", "idempotency"), ("path", base.as_str()), ("outcome", outcome)];
    assert_eq!(counter(CLAIMS, &of("started")), 1);
    assert_eq!(counter(CLAIMS, &of("done")), 1);
}

/// Both queues count the items offered (a multi-item node counts each item; an item a consumer
/// puts back is not offered again) and the items taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queues_count_items_offered_and_taken() {
    use zk_curator::queue::{DistributedQueue, SimpleDistributedQueue};
    const OFFERS: &str = "zk_curator_queue_offers_total";
    const TAKES: &str = "zk_curator_queue_takes_total";
    install();
    let (_server, clients) = support::server_and_clients(1).await;
    let client = &clients[0];

    let path = support::unique_path("metrics-queue");
    let labels = [("recipe", "distributed_queue"), ("path", path.as_str())];
    let queue = DistributedQueue::builder(client, &path).put_in_background(false).build().unwrap();
    queue.put(b"one".to_vec()).await.unwrap();
    queue.put_multi(vec![b"two".to_vec(), b"three".to_vec()]).await.unwrap();
    assert_eq!(counter(OFFERS, &labels), 3, "{:?}", series_of_path(&path));
    let mut items = queue.consume().unwrap();
    for _ in 0..3 {
        let item = tokio::time::timeout(WITHIN, items.next()).await.unwrap().unwrap().unwrap();
        item.ack().await.unwrap();
    }
    assert_eq!(counter(TAKES, &labels), 3);
    drop(items);
    queue.close().await;

    let path = support::unique_path("metrics-simple-queue");
    let labels = [("recipe", "simple_queue"), ("path", path.as_str())];
    let simple = SimpleDistributedQueue::new(client, &path).unwrap();
    simple.offer(b"a".to_vec()).await.unwrap();
    simple.offer(b"b".to_vec()).await.unwrap();
    assert_eq!(simple.take().await.unwrap(), b"a");
    assert_eq!(counter(OFFERS, &labels), 2, "{:?}", series_of_path(&path));
    assert_eq!(counter(TAKES, &labels), 1);
}
