//! DistributedPriorityQueue (Curator's), against a real ZooKeeper and real Curator 5.4: items are
//! taken lowest priority number first (equal ones in put order), under Curator's node names; an
//! item put back keeps its place; Curator's priorities are honoured by ours and the reverse.

use zk_curator::queue::{DistributedPriorityQueue, DistributedQueue};

use super::interop::peer_got;
use super::{next_item, take_acked};
use crate::support;
use crate::support::curator_peer::CuratorPeer;

fn priority_queue(
    client: &zk_curator::CuratorClient,
    path: &str,
    lock: Option<&str>,
) -> DistributedPriorityQueue<Vec<u8>> {
    let mut builder = DistributedQueue::builder(client, path).put_in_background(false);
    if let Some(lock) = lock {
        builder = builder.lock_path(lock);
    }
    builder.build_priority(0).expect("build the priority queue")
}

/// Priorities in put order, and the order they must be taken in.
const PUT: &[(&str, i32)] = &[
    ("p5-a", 5),
    ("m3-a", -3),
    ("zero", 0),
    ("p5-b", 5),
    ("min", i32::MIN),
    ("max", i32::MAX),
    ("m3-b", -3),
    ("p256", 256),
];
const TAKEN: &[&str] = &["min", "m3-a", "m3-b", "zero", "p5-a", "p5-b", "p256", "max"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_are_taken_lowest_priority_number_first_equal_ones_in_put_order() {
    let (server, clients) = support::server_and_clients(1).await;
    let path = support::unique_path("priority-order");
    let queue = priority_queue(&clients[0], &path, None);
    for (item, priority) in PUT {
        queue.put(item.as_bytes().to_vec(), *priority).await.unwrap();
    }
    // Curator's names: `queue-` then 1 (0 or more) / 0 (negative) and the 32 bits in hex.
    let names = support::children(&server.connect_string(), &path).await;
    for prefix in ["queue-100000005", "queue-0FFFFFFFD", "queue-100000000", "queue-080000000", "queue-17FFFFFFF"] {
        assert!(names.iter().any(|n| n.starts_with(prefix) && n.len() == prefix.len() + 10), "{prefix} in {names:?}");
    }
    let mut items = queue.consume().unwrap();
    assert_eq!(take_acked(&mut items, TAKEN.len()).await, TAKEN);
    queue.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_item_put_while_others_wait_is_taken_in_its_priority_place() {
    let (_server, clients) = support::server_and_clients(1).await;
    let path = support::unique_path("priority-late");
    let queue = DistributedQueue::builder(&clients[0], &path)
        .put_in_background(false)
        .max_in_flight(1)
        .build_priority(0)
        .unwrap();
    for i in 0..3 {
        queue.put(format!("low-{i}").into_bytes(), 10).await.unwrap();
    }
    let mut items = queue.consume().unwrap();
    let first = next_item(&mut items).await;
    assert_eq!(first.value(), b"low-0");
    queue.put(b"urgent".to_vec(), -1).await.unwrap();
    first.ack().await.unwrap();
    assert_eq!(take_acked(&mut items, 3).await, ["urgent", "low-1", "low-2"]);
    queue.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_lock_path_an_item_dropped_or_requeued_comes_back_in_its_priority_place() {
    let (server, clients) = support::server_and_clients(1).await;
    let path = support::unique_path("priority-locked");
    let lock = format!("{path}-locks");
    let queue = priority_queue(&clients[0], &path, Some(&lock));
    queue.put(b"second".to_vec(), 2).await.unwrap();
    queue.put(b"first".to_vec(), 1).await.unwrap();
    queue.put(b"third".to_vec(), 3).await.unwrap();

    let mut items = queue.consume().unwrap();
    let item = next_item(&mut items).await;
    assert_eq!(item.value(), b"first");
    item.requeue().await.unwrap();
    drop(items);
    super::locks_released(&server.connect_string(), &lock).await;
    let names = support::children(&server.connect_string(), &path).await;
    assert_eq!(names.len(), 3, "{names:?}");
    assert_eq!(
        names.iter().filter(|n| n.starts_with("queue-100000001")).count(),
        1,
        "requeued with its priority: {names:?}"
    );
    // Requeued with its priority (Curator's own requeue would put it last, without one).
    let mut items = queue.consume().unwrap();
    let item = next_item(&mut items).await;
    assert_eq!(item.value(), b"first");
    drop(item);
    drop(items);
    super::locks_released(&server.connect_string(), &lock).await;
    let mut items = queue.consume().unwrap();
    assert_eq!(take_acked(&mut items, 3).await, ["first", "second", "third"]);
    drop(items);
    assert_eq!(queue.len().await.unwrap(), 0);
    queue.close().await;
    assert!(support::children(&server.connect_string(), &lock).await.is_empty(), "no lock node left");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn priorities_curator_puts_are_taken_by_ours_in_curators_order() {
    let (server, clients) = support::server_and_clients(1).await;
    let path = support::unique_path("priority-from-curator");
    let mut peer = CuratorPeer::start(&server.connect_string()).await;
    for (item, priority) in PUT {
        peer.cmd(&format!("pqput {path} {priority} {item}")).await;
    }
    let queue = priority_queue(&clients[0], &path, None);
    let mut items = queue.consume().unwrap();
    assert_eq!(take_acked(&mut items, TAKEN.len()).await, TAKEN);
    queue.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn priorities_ours_puts_are_taken_by_curator_in_priority_order_with_a_lock_path() {
    let (server, clients) = support::server_and_clients(1).await;
    let path = support::unique_path("priority-to-curator");
    let lock = format!("{path}-locks");
    let queue = priority_queue(&clients[0], &path, Some(&lock));
    for (item, priority) in PUT {
        queue.put(item.as_bytes().to_vec(), *priority).await.unwrap();
    }
    let mut peer = CuratorPeer::start(&server.connect_string()).await;
    peer.cmd(&format!("pqconsume c {path} {lock} 0")).await;
    let got: Vec<String> = peer_got(&mut peer, "c", TAKEN.len()).await.into_iter().map(|(i, _, _)| i).collect();
    peer.cmd("kqclose c").await;
    assert_eq!(got, TAKEN);
    assert_eq!(queue.len().await.unwrap(), 0);
    queue.close().await;
}
