//! `QueueSharder` (Curator's `QueueSharder`): shards `Q/queue-<uuid>` added by the leader at the
//! threshold, up to `max_queues`; instances adopt each other's shards and drop deleted ones;
//! `queue()` prefers shards under half the threshold; `close` (and drop) stop the loop and leave no
//! leader node; and interop both ways with real Curator 5.4's sharder.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use zk_curator::queue::{DistributedQueue, QueueSharder, QueueSharderPolicies, SHARD_PREFIX};
use zk_curator::{CuratorClient, Error};

use super::{take_acked, WITHIN};
use crate::support;
use crate::support::curator_peer::CuratorPeer;

/// Short, so that a test waits a few checks, not Curator's 30 s.
const CHECK: Duration = Duration::from_millis(50);
/// How long a test waits to see that something does NOT happen: 20 checks.
const QUIET: Duration = Duration::from_secs(1);

type Sharder = QueueSharder<DistributedQueue<Vec<u8>>>;

fn policies(threshold: usize, max_queues: usize) -> QueueSharderPolicies {
    QueueSharderPolicies::builder()
        .new_queue_threshold(threshold)
        .threshold_check(CHECK)
        .max_queues(max_queues)
        .build()
        .expect("valid policies")
}

fn sharder(client: &CuratorClient, base: &str, policies: QueueSharderPolicies) -> Sharder {
    sharder_counting(client, base, policies, Arc::new(AtomicUsize::new(0)))
}

/// A sharder of `base/shards` led at `base/leader` whose allocator counts its calls in `allocated`.
fn sharder_counting(
    client: &CuratorClient,
    base: &str,
    policies: QueueSharderPolicies,
    allocated: Arc<AtomicUsize>,
) -> Sharder {
    QueueSharder::new(
        client,
        move |client, shard| {
            allocated.fetch_add(1, Ordering::SeqCst);
            DistributedQueue::builder(client, shard).put_in_background(false).build()
        },
        &format!("{base}/shards"),
        &format!("{base}/leader"),
        policies,
    )
    .expect("a sharder")
}

async fn leading(sharder: &Sharder) {
    support::eventually(WITHIN, "the sharder leads", || async { sharder.is_leader() }).await;
}

/// The shard paths under `base/shards` on the server.
async fn shards_on_server(connect: &str, base: &str) -> Vec<String> {
    support::children(connect, &format!("{base}/shards"))
        .await
        .into_iter()
        .map(|name| format!("{base}/shards/{name}"))
        .collect()
}

/// A shard made behind the sharders' backs (as another instance would): its path.
async fn make_shard(connect: &str, base: &str) -> String {
    let shard = format!("{base}/shards/{SHARD_PREFIX}{}", uuid::Uuid::new_v4());
    support::client(connect).await.create(&shard).creating_parent_containers_if_needed().await.expect("make a shard");
    shard
}

async fn put_n(queue: &DistributedQueue<Vec<u8>>, prefix: &str, n: usize) {
    for i in 0..n {
        queue.put(format!("{prefix}-{i}").into_bytes()).await.expect("put");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_is_added_at_the_threshold_and_only_by_the_leader() {
    let (server, clients) = support::server_and_clients(2).await;
    let connect = server.connect_string();
    let base = support::unique_path("sharder-threshold");
    // The leader checks only once an hour: until it closes, only the follower's loop runs.
    let slow = QueueSharderPolicies::builder()
        .new_queue_threshold(4)
        .threshold_check(Duration::from_secs(3600))
        .build()
        .unwrap();
    let leader = sharder(&clients[0], &base, slow);
    leader.start().await.unwrap();
    leading(&leader).await;
    let follower = sharder(&clients[1], &base, policies(4, 10));
    follower.start().await.unwrap();
    assert_eq!(follower.queue_paths(), leader.queue_paths(), "the follower adopted the first shard");

    put_n(&follower.queue().unwrap(), "item", 4).await;
    tokio::time::sleep(QUIET).await; // ~20 checks of the follower's: it must not add a shard
    assert_eq!(shards_on_server(&connect, &base).await.len(), 1, "a follower added a shard");

    leader.close().await.unwrap();
    leading(&follower).await;
    support::eventually(WITHIN, "the new leader adds a shard at the threshold", || async {
        shards_on_server(&connect, &base).await.len() == 2
    })
    .await;
    // The shard's node exists a moment before the leader manages it.
    support::eventually(WITHIN, "the new leader manages both shards", || async {
        follower.queue_paths() == shards_on_server(&connect, &base).await
    })
    .await;
    follower.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_shard_is_added_below_the_threshold() {
    let (server, clients) = support::server_and_clients(1).await;
    let base = support::unique_path("sharder-below");
    let sharder = sharder(&clients[0], &base, policies(4, 10));
    sharder.start().await.unwrap();
    leading(&sharder).await;
    put_n(&sharder.queue().unwrap(), "item", 3).await;
    tokio::time::sleep(QUIET).await; // ~20 checks: none may add a shard
    assert_eq!(shards_on_server(&server.connect_string(), &base).await.len(), 1);
    sharder.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_adopt_shards_created_by_others() {
    let (server, clients) = support::server_and_clients(2).await;
    let connect = server.connect_string();
    let base = support::unique_path("sharder-adopt");
    let first = sharder(&clients[0], &base, policies(100, 10));
    first.start().await.unwrap();
    let second = sharder(&clients[1], &base, policies(100, 10));
    second.start().await.unwrap();
    assert_eq!(second.queue_paths(), first.queue_paths(), "started on the shard already there");

    // Another instance's shard, made behind their backs.
    let other = make_shard(&connect, &base).await;
    for sharder in [&first, &second] {
        support::eventually(WITHIN, "the other's shard is adopted", || async {
            sharder.queue_paths().contains(&other)
        })
        .await;
        assert_eq!(sharder.shard_count(), 2);
    }
    first.close().await.unwrap();
    second.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_more_than_max_queues_shards() {
    let (server, clients) = support::server_and_clients(1).await;
    let connect = server.connect_string();
    let base = support::unique_path("sharder-max");
    let sharder = sharder(&clients[0], &base, policies(2, 2));
    sharder.start().await.unwrap();
    leading(&sharder).await;
    put_n(&sharder.queue().unwrap(), "first", 2).await;
    support::eventually(WITHIN, "a second shard", || async { sharder.shard_count() == 2 }).await;
    for shard in sharder.queue_paths() {
        let queue = DistributedQueue::builder(&clients[0], &shard).put_in_background(false).build().unwrap();
        put_n(&queue, "fill", 2).await;
    }
    tokio::time::sleep(QUIET).await; // ~20 checks with every shard full: none may add a third
    assert_eq!(shards_on_server(&connect, &base).await.len(), 2);
    assert_eq!(sharder.shard_count(), 2);
    sharder.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_prefers_shards_under_half_the_threshold() {
    let (_server, clients) = support::server_and_clients(1).await;
    let base = support::unique_path("sharder-preferred");
    let sharder = sharder(&clients[0], &base, policies(4, 10));
    sharder.start().await.unwrap();
    leading(&sharder).await;
    let first = sharder.queue().unwrap();
    put_n(&first, "item", 4).await;
    support::eventually(WITHIN, "a second shard", || async { sharder.shard_count() == 2 }).await;
    // The check that added the second shard took the full first one out of the preferred set.
    for _ in 0..50 {
        assert_ne!(sharder.queue().unwrap().path(), first.path(), "queue() handed out the full shard");
    }

    // Down to half the threshold: preferred again.
    let mut items = first.consume().unwrap();
    take_acked(&mut items, 2).await;
    drop(items);
    support::eventually(WITHIN, "the emptied shard is handed out again", || async {
        sharder.queue().unwrap().path() == first.path()
    })
    .await;
    sharder.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_shard_is_dropped_without_error() {
    let (server, clients) = support::server_and_clients(1).await;
    let connect = server.connect_string();
    let base = support::unique_path("sharder-deleted");
    let sharder = sharder(&clients[0], &base, policies(2, 10));
    sharder.start().await.unwrap();
    leading(&sharder).await;
    let doomed = sharder.queue_paths()[0].clone();
    put_n(&sharder.queue().unwrap(), "item", 2).await;
    support::eventually(WITHIN, "a second shard", || async { sharder.shard_count() == 2 }).await;

    // The full shard (deleting the empty one would leave a full one, and a new shard).
    let other = support::client(&connect).await;
    other.delete(&doomed).deleting_children_if_needed().await.unwrap();
    support::eventually(WITHIN, "the deleted shard is dropped", || async { !sharder.queue_paths().contains(&doomed) })
        .await;
    // While the first was full each check added a shard (as Curator's): the rest are empty now.
    support::eventually(WITHIN, "the sharder manages the shards on the server", || async {
        shards_on_server(&connect, &base).await == sharder.queue_paths()
    })
    .await;

    // Every shard gone: the leader makes a new one.
    let old = sharder.queue_paths();
    for shard in &old {
        other.delete(shard).deleting_children_if_needed().await.unwrap();
    }
    support::eventually(WITHIN, "a new shard replaces the deleted ones", || async {
        let paths = sharder.queue_paths();
        paths.len() == 1 && !old.contains(&paths[0])
    })
    .await;
    assert_eq!(shards_on_server(&connect, &base).await, sharder.queue_paths());
    assert!(sharder.check_errors().borrow().is_none(), "a check failed: {:?}", sharder.check_errors().borrow());
    sharder.queue().unwrap().put(b"after".to_vec()).await.unwrap();
    sharder.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_leaves_no_leader_node_and_stops_the_loop() {
    let (server, clients) = support::server_and_clients(1).await;
    let connect = server.connect_string();
    let base = support::unique_path("sharder-close");
    let allocated = Arc::new(AtomicUsize::new(0));
    let sharder = sharder_counting(&clients[0], &base, policies(100, 10), allocated.clone());
    sharder.start().await.unwrap();
    leading(&sharder).await;
    sharder.queue().unwrap().put(b"stays".to_vec()).await.unwrap();
    let shards = sharder.queue_paths();

    sharder.close().await.unwrap();
    assert!(support::children(&connect, &format!("{base}/leader")).await.is_empty(), "the leader node stayed");
    assert_eq!(shards_on_server(&connect, &base).await, shards, "the shard with its item stays");
    assert!(sharder.queue().is_err());
    assert_eq!(sharder.shard_count(), 0);

    // A running loop would adopt this shard (calling the allocator).
    let before = allocated.load(Ordering::SeqCst);
    make_shard(&connect, &base).await;
    tokio::time::sleep(QUIET).await; // ~20 checks: a loop still running would adopt it
    assert_eq!(allocated.load(Ordering::SeqCst), before, "the check loop ran after close");
    sharder.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_sharder_outside_a_runtime_stops_the_loop_and_its_latch() {
    let (server, clients) = support::server_and_clients(1).await;
    let connect = server.connect_string();
    let base = support::unique_path("sharder-drop");
    let allocated = Arc::new(AtomicUsize::new(0));
    let sharder = sharder_counting(&clients[0], &base, policies(100, 10), allocated.clone());
    sharder.start().await.unwrap();
    leading(&sharder).await;
    // The loop has run (and holds nothing of the sharder's between checks).
    let adopted = make_shard(&connect, &base).await;
    support::eventually(WITHIN, "the loop adopts a shard", || async { sharder.queue_paths().contains(&adopted) }).await;
    std::thread::spawn(move || drop(sharder)).join().expect("the drop panicked");

    support::eventually(WITHIN, "the leader node is deleted", || async {
        support::children(&connect, &format!("{base}/leader")).await.is_empty()
    })
    .await;
    let before = allocated.load(Ordering::SeqCst);
    make_shard(&connect, &base).await;
    tokio::time::sleep(QUIET).await; // ~20 checks: a loop still running would adopt it
    assert_eq!(allocated.load(Ordering::SeqCst), before, "the check loop ran after the drop");
}

/// The consumers the allocator of [`sharder_consuming`] started, one task per shard queue.
type Consumers = Arc<std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>>;

/// A sharder of `base/shards` whose allocator calls `hook` with the call's number (from 1) — an
/// `Err` refuses the queue, `Ok(true)` starts a consumer on it (`consume_with`, ended only by
/// closing the queue, as Curator's users run one per shard), pushed to `consumers`.
fn sharder_consuming(
    client: &CuratorClient,
    base: &str,
    policies: QueueSharderPolicies,
    consumers: Consumers,
    hook: impl Fn(usize) -> zk_curator::Result<bool> + Send + Sync + 'static,
) -> Sharder {
    let calls = AtomicUsize::new(0);
    QueueSharder::new(
        client,
        move |client, shard| {
            let consume = hook(calls.fetch_add(1, Ordering::SeqCst) + 1)?;
            let queue = DistributedQueue::builder(client, shard).put_in_background(false).build()?;
            if consume {
                let consumer = queue.clone();
                let task = tokio::runtime::Handle::current().spawn(async move {
                    consumer.consume_with(|_item| async { Ok::<(), std::io::Error>(()) }).await.expect("consume");
                });
                consumers.lock().unwrap().push(task);
            }
            Ok(queue)
        },
        &format!("{base}/shards"),
        &format!("{base}/leader"),
        policies,
    )
    .expect("a sharder")
}

/// Every consumer started so far ends (its queue was closed); hang-guarded.
async fn consumers_end(consumers: &Consumers, expected: usize) {
    // A check still running (the sharder dropped during it) may start one a little later.
    support::eventually(WITHIN, "the consumers start", || async { consumers.lock().unwrap().len() >= expected }).await;
    let tasks = std::mem::take(&mut *consumers.lock().unwrap());
    assert_eq!(tasks.len(), expected, "consumers started");
    for task in tasks {
        match tokio::time::timeout(WITHIN, task).await {
            Ok(ended) => ended.expect("a consumer panicked"),
            Err(_) => panic!("a shard's consumer still runs {WITHIN:?} after the sharder stopped"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_sharder_ends_the_consumers_its_allocator_started() {
    let (server, clients) = support::server_and_clients(1).await;
    let connect = server.connect_string();
    let base = support::unique_path("sharder-drop-consumers");
    let consumers = Consumers::default();
    let sharder = sharder_consuming(&clients[0], &base, policies(100, 10), consumers.clone(), |_| Ok(true));
    sharder.start().await.unwrap();
    let adopted = make_shard(&connect, &base).await;
    support::eventually(WITHIN, "the loop adopts a shard", || async { sharder.queue_paths().contains(&adopted) }).await;
    // Dropped outside a runtime: the close goes on on the client's.
    std::thread::spawn(move || drop(sharder)).join().expect("the drop panicked");
    consumers_end(&consumers, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_start_ends_the_consumers_its_allocator_started() {
    let (server, clients) = support::server_and_clients(1).await;
    let connect = server.connect_string();
    let base = support::unique_path("sharder-failed-start");
    make_shard(&connect, &base).await;
    make_shard(&connect, &base).await;
    let consumers = Consumers::default();
    let refuse_second = |call: usize| match call {
        2 => Err(Error::InvalidArgument { name: "shard", value: call.to_string(), reason: "refused by the test" }),
        _ => Ok(true),
    };
    let sharder = sharder_consuming(&clients[0], &base, policies(100, 10), consumers.clone(), refuse_second);
    assert!(sharder.start().await.is_err(), "the allocator refused the second shard");
    assert_eq!(sharder.state(), zk_curator::queue::SharderState::Latent);
    consumers_end(&consumers, 1).await;
}

/// The leader's check is adding a shard (its allocator ran, its create not answered yet) when
/// the sharder is closed (`close`) or dropped: the new shard's consumer ends all the same.
async fn stopping_during_a_check_ends_the_new_shards_consumer(by_drop: bool) {
    let (_server, clients) = support::server_and_clients(1).await;
    let base = support::unique_path("sharder-stop-in-check");
    let consumers = Consumers::default();
    let (adding, mut added) = tokio::sync::mpsc::unbounded_channel();
    // Call 1 makes the first shard (no consumer: its item must stay to reach the threshold);
    // call 2 is the check adding a shard: it lets the test stop the sharder, then returns.
    let hook = move |call: usize| {
        if call == 2 {
            adding.send(()).unwrap();
            // A blocking pause inside the check, so the stop lands before its create: 300 ms is
            // far more than the test needs to call close/drop.
            std::thread::sleep(Duration::from_millis(300));
        }
        Ok(call >= 2)
    };
    let sharder = sharder_consuming(&clients[0], &base, policies(1, 10), consumers.clone(), hook);
    sharder.start().await.unwrap();
    leading(&sharder).await;
    sharder.queue().unwrap().put(b"fills the shard".to_vec()).await.unwrap();
    tokio::time::timeout(WITHIN, added.recv()).await.expect("the leader adds a shard").unwrap();
    if by_drop {
        drop(sharder);
    } else {
        sharder.close().await.unwrap();
    }
    consumers_end(&consumers, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_during_a_check_ends_the_consumer_of_the_shard_it_was_adding() {
    stopping_during_a_check_ends_the_new_shards_consumer(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_during_a_check_ends_the_consumer_of_the_shard_it_was_adding() {
    stopping_during_a_check_ends_the_new_shards_consumer(true).await;
}

/// A put through the sharder, tried again while the session is being replaced (a put whose
/// outcome is unknown is not retried: the test's items are then compared as a set).
async fn put_through(sharder: &Sharder, item: &str) {
    let deadline = tokio::time::Instant::now() + WITHIN;
    loop {
        match sharder.queue().unwrap().put(item.as_bytes().to_vec()).await {
            Ok(()) => return,
            Err(e) if e.is_retryable() || e.is_session_lost() => {
                assert!(tokio::time::Instant::now() < deadline, "put {item}: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("put {item}: {e}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharder_whose_session_expires_leads_again_and_loses_no_item() {
    let server = support::server().await;
    let connect = server.connect_string();
    let base = support::unique_path("sharder-expiry");
    let client = support::client_with(&connect, Duration::from_secs(2)).await;
    let got = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let lock = format!("{base}/locks");
    let recorded = got.clone();
    let sharder: Sharder = QueueSharder::new(
        &client,
        move |client, shard| {
            // Guaranteed delivery: an item whose consumer's session ended goes to the next take.
            let locks = format!("{lock}/{}", support::node_name(shard));
            let queue = DistributedQueue::builder(client, shard).lock_path(&locks).put_in_background(false).build()?;
            let (consumer, recorded) = (queue.clone(), recorded.clone());
            tokio::runtime::Handle::current().spawn(async move {
                let record = |item: Vec<u8>| {
                    recorded.lock().unwrap().push(String::from_utf8(item).unwrap());
                    async { Ok::<(), std::io::Error>(()) }
                };
                consumer.consume_with(record).await.expect("consume");
            });
            Ok(queue)
        },
        &format!("{base}/shards"),
        &format!("{base}/leader"),
        policies(100, 10),
    )
    .expect("a sharder");
    sharder.start().await.unwrap();
    leading(&sharder).await;
    let leader_node = support::children(&connect, &format!("{base}/leader")).await;
    for i in 0..3 {
        put_through(&sharder, &format!("before-{i}")).await;
    }
    support::eventually(WITHIN, "the items before are consumed", || async { got.lock().unwrap().len() == 3 }).await;

    let old = client.session_id();
    zk_curator::testing::expire_session(&connect, &client).await.unwrap();
    support::session_replaced(&client, old).await;
    // The latch's node of the expired session is gone; the new session's leads.
    support::eventually(WITHIN, "the sharder leads again on its new session", || async {
        let now = support::children(&connect, &format!("{base}/leader")).await;
        sharder.is_leader() && now.len() == 1 && now != leader_node
    })
    .await;
    for i in 0..3 {
        put_through(&sharder, &format!("after-{i}")).await;
    }
    // The check loop goes on: a shard made meanwhile is adopted (and consumed).
    let adopted = make_shard(&connect, &base).await;
    support::eventually(WITHIN, "the loop adopts a shard after the expiry", || async {
        sharder.queue_paths().contains(&adopted)
    })
    .await;
    DistributedQueue::builder(&support::client(&connect).await, &adopted)
        .put_in_background(false)
        .build()
        .unwrap()
        .put(b"adopted-0".to_vec())
        .await
        .unwrap();
    let expected: BTreeSet<String> = ["before-0", "before-1", "before-2", "after-0", "after-1", "after-2", "adopted-0"]
        .into_iter()
        .map(str::to_string)
        .collect();
    support::eventually(WITHIN, "every item is consumed", || async {
        got.lock().unwrap().iter().cloned().collect::<BTreeSet<_>>() == expected
    })
    .await;
    sharder.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absurd_policies_and_paths_are_refused_naming_the_value() {
    let refused = |builder: zk_curator::queue::QueueSharderPoliciesBuilder, name: &str| match builder.build() {
        Err(Error::InvalidArgument { name: got, .. }) => assert_eq!(got, name),
        other => panic!("{name}: expected InvalidArgument, got {other:?}"),
    };
    let b = QueueSharderPolicies::builder;
    refused(b().new_queue_threshold(0), "new_queue_threshold");
    refused(b().new_queue_threshold(2_000_000), "new_queue_threshold");
    refused(b().threshold_check(Duration::ZERO), "threshold_check");
    refused(b().threshold_check(Duration::from_secs(2 * 24 * 3600)), "threshold_check");
    refused(b().max_queues(0), "max_queues");
    refused(b().max_queues(20_000), "max_queues");
    let defaults = QueueSharderPolicies::default();
    assert_eq!(
        (defaults.new_queue_threshold(), defaults.threshold_check(), defaults.max_queues()),
        (10_000, Duration::from_secs(30), 10),
        "Curator's defaults"
    );

    let (_server, clients) = support::server_and_clients(1).await;
    let allocate = |client: &CuratorClient, shard: &str| DistributedQueue::builder(client, shard).build();
    for (queue, leader) in [("/a/q", "/a/q"), ("/a/q", "/a/q/leader"), ("/a", "/a/q/leader"), ("/", "/l")] {
        match QueueSharder::new(&clients[0], allocate, queue, leader, defaults) {
            Err(Error::InvalidPath { .. }) => {}
            other => panic!("{queue} led at {leader}: expected InvalidPath, got {other:?}"),
        }
    }
    let unstarted = QueueSharder::new(&clients[0], allocate, "/a/q", "/a/l", defaults).unwrap();
    assert!(matches!(unstarted.queue(), Err(Error::InvalidArgument { .. })));
}

// ---- interop with Curator 5.4's QueueSharder ----

/// Our consumers on every shard of `sharder`, until `n` items came: the items.
async fn consume_all(client: &CuratorClient, paths: &[String], n: usize) -> BTreeSet<String> {
    let mut got = BTreeSet::new();
    let deadline = tokio::time::Instant::now() + WITHIN;
    while got.len() < n {
        assert!(tokio::time::Instant::now() < deadline, "only {got:?} consumed");
        for shard in paths {
            let queue = DistributedQueue::builder(client, shard).build().unwrap();
            let mut items = queue.consume().unwrap();
            while let Ok(Some(item)) = tokio::time::timeout(Duration::from_millis(200), items.next()).await {
                let item = item.expect("an item");
                got.insert(String::from_utf8(item.value().clone()).unwrap());
                item.ack().await.unwrap();
            }
            drop(items);
            queue.close().await;
        }
    }
    got
}

fn shards_answer(answer: &str) -> Vec<String> {
    let body = answer.strip_prefix("SHARDS").expect("a SHARDS answer").trim();
    body.split(',').filter(|s| !s.is_empty()).map(str::to_string).collect()
}

async fn curator_shards(peer: &mut CuratorPeer, name: &str) -> Vec<String> {
    shards_answer(&peer.cmd(&format!("sshards {name}")).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curators_sharder_adopts_our_shards_and_our_consumers_take_its_items() {
    let (server, clients) = support::server_and_clients(1).await;
    let connect = server.connect_string();
    let base = support::unique_path("sharder-curator-puts");
    let ours = sharder(&clients[0], &base, policies(3, 10));
    ours.start().await.unwrap();
    leading(&ours).await;
    let mut peer = CuratorPeer::start(&connect).await;
    peer.cmd(&format!("sstart curator {base}/shards {base}/leader 3 50 10 0")).await;
    assert_eq!(curator_shards(&mut peer, "curator").await, ours.queue_paths(), "Curator adopted our shard");

    for i in 0..3 {
        peer.cmd(&format!("sput curator early-{i}")).await;
    }
    support::eventually(WITHIN, "our leader adds a shard", || async { ours.shard_count() == 2 }).await;
    let deadline = tokio::time::Instant::now() + WITHIN;
    while curator_shards(&mut peer, "curator").await != ours.queue_paths() {
        assert!(tokio::time::Instant::now() < deadline, "Curator did not adopt our new shard");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for i in 0..4 {
        peer.cmd(&format!("sput curator late-{i}")).await;
    }
    peer.cmd("sclose curator").await;

    let got = consume_all(&clients[0], &ours.queue_paths(), 7).await;
    let expected: BTreeSet<String> =
        (0..3).map(|i| format!("early-{i}")).chain((0..4).map(|i| format!("late-{i}"))).collect();
    assert_eq!(got, expected);
    ours.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_sharder_adopts_curators_shards_and_curators_consumers_take_our_items() {
    let (server, clients) = support::server_and_clients(1).await;
    let connect = server.connect_string();
    let base = support::unique_path("sharder-ours-puts");
    let mut peer = CuratorPeer::start(&connect).await;
    peer.cmd(&format!("sstart curator {base}/shards {base}/leader 3 50 10 0")).await;
    let deadline = tokio::time::Instant::now() + WITHIN;
    while peer.cmd("sleader curator").await != "LEADER true" {
        assert!(tokio::time::Instant::now() < deadline, "Curator's sharder never led");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let ours = sharder(&clients[0], &base, policies(3, 10));
    ours.start().await.unwrap();
    assert_eq!(ours.queue_paths(), curator_shards(&mut peer, "curator").await, "we adopted Curator's shard");
    assert!(!ours.is_leader());
    let first = ours.queue_paths()[0].clone();

    put_n(&ours.queue().unwrap(), "early", 3).await;
    let deadline = tokio::time::Instant::now() + WITHIN;
    while curator_shards(&mut peer, "curator").await.len() != 2 {
        assert!(tokio::time::Instant::now() < deadline, "Curator's leader added no shard");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let curators = curator_shards(&mut peer, "curator").await;
    support::eventually(WITHIN, "we adopt Curator's new shard", || async { ours.queue_paths() == curators }).await;
    // Our check after the adoption takes the full first shard out of the preferred set.
    support::eventually(WITHIN, "the full shard is no longer handed out", || async {
        (0..20).all(|_| ours.queue().unwrap().path() != first)
    })
    .await;
    put_n(&ours.queue().unwrap(), "late", 4).await;
    ours.close().await.unwrap();

    for (i, shard) in curators.iter().enumerate() {
        peer.cmd(&format!("qconsume c{i} {shard} - 0")).await;
    }
    let deadline = tokio::time::Instant::now() + WITHIN;
    let expected: BTreeSet<String> =
        (0..3).map(|i| format!("early-{i}")).chain((0..4).map(|i| format!("late-{i}"))).collect();
    loop {
        let mut got = BTreeSet::new();
        for i in 0..curators.len() {
            for (item, _, _) in super::interop::got(&peer.cmd(&format!("qgot c{i}")).await) {
                got.insert(item);
            }
        }
        if got == expected {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "Curator consumed {got:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    peer.cmd("sclose curator").await;
}
