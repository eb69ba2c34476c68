//! Delivery as promised (ours alone): with a lock path an unacknowledged item goes to the next
//! consumer and nothing of ours outlives close; without one a taken item is gone; back-pressure
//! and a full queue; bad input as typed errors.

use std::time::Duration;

use zk_curator::queue::DistributedQueue;
use zk_curator::{CreateMode, Error};

use super::{bytes_queue, next_item, take_acked, WITHIN};
use crate::support;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_item_dropped_unacknowledged_with_a_lock_path_goes_to_the_next_consumer() {
    let (_server, clients) = support::server_and_clients(2).await;
    let path = support::unique_path("queue-dropped");
    let lock = format!("{path}-locks");
    let first = bytes_queue(&clients[0], &path, Some(&lock));
    first.put(b"job".to_vec()).await.unwrap();
    let mut items = first.consume().unwrap();
    let item = next_item(&mut items).await;
    drop(item);
    drop(items);

    let second = bytes_queue(&clients[1], &path, Some(&lock));
    let mut items = second.consume().unwrap();
    assert_eq!(take_acked(&mut items, 1).await, ["job"]);
    assert_eq!(second.len().await.unwrap(), 0);
    first.close().await;
    second.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_lock_path_a_taken_item_is_gone_even_unacknowledged() {
    let (_server, clients) = support::server_and_clients(1).await;
    let path = support::unique_path("queue-at-most-once");
    let queue = bytes_queue(&clients[0], &path, None);
    queue.put(b"once".to_vec()).await.unwrap();
    let mut items = queue.consume().unwrap();
    let item = next_item(&mut items).await;
    assert_eq!(item.value(), b"once");
    assert_eq!(queue.len().await.unwrap(), 0, "deleted before it was handed out");
    drop(item);
    assert_eq!(queue.len().await.unwrap(), 0, "not put back once handed out");
    queue.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_holds_at_most_max_in_flight_nodes_until_it_acknowledges() {
    let (server, clients) = support::server_and_clients(1).await;
    let path = support::unique_path("queue-in-flight");
    let lock = format!("{path}-locks");
    let queue = DistributedQueue::builder(&clients[0], &path)
        .lock_path(&lock)
        .put_in_background(false)
        .max_in_flight(3)
        .build()
        .unwrap();
    for i in 0..10 {
        queue.put(format!("{i}").into_bytes()).await.unwrap();
    }
    let mut items = queue.consume().unwrap();
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(next_item(&mut items).await);
    }
    // A fourth would come at once if the bound did not hold (ten are waiting).
    assert!(tokio::time::timeout(Duration::from_millis(300), items.next()).await.is_err(), "a 4th node taken");
    assert_eq!(support::children(&server.connect_string(), &lock).await.len(), 3);
    held.pop().unwrap().ack().await.unwrap();
    let fourth = next_item(&mut items).await;
    assert_eq!(fourth.value(), b"3");
    queue.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_releases_every_lock_node_and_leaves_unacknowledged_items_queued() {
    let (server, clients) = support::server_and_clients(1).await;
    let path = support::unique_path("queue-close");
    let lock = format!("{path}-locks");
    let queue = bytes_queue(&clients[0], &path, Some(&lock));
    queue.put_multi(vec![b"a".to_vec(), b"b".to_vec()]).await.unwrap();
    queue.put(b"c".to_vec()).await.unwrap();
    let mut items = queue.consume().unwrap();
    let a = next_item(&mut items).await;
    assert_eq!(support::children(&server.connect_string(), &lock).await.len(), 2, "both nodes taken");
    queue.close().await;
    assert!(support::children(&server.connect_string(), &lock).await.is_empty(), "a lock node left behind");
    assert_eq!(queue.len().await.unwrap(), 2, "unacknowledged items stay queued");
    assert!(matches!(a.ack().await, Err(Error::LockLost { .. })), "an ack after close must fail");
    assert_eq!(queue.len().await.unwrap(), 2);
    assert!(matches!(queue.put(b"d".to_vec()).await, Err(Error::Closed { .. })));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_makes_a_put_wait_and_a_timed_put_give_up() {
    let (_server, clients) = support::server_and_clients(1).await;
    let path = support::unique_path("queue-full");
    let queue = DistributedQueue::builder(&clients[0], &path).put_in_background(false).max_items(2).build().unwrap();
    queue.put(b"1".to_vec()).await.unwrap();
    queue.put(b"2".to_vec()).await.unwrap();
    assert!(!queue.put_timeout(b"3".to_vec(), Duration::from_millis(200)).await.unwrap(), "put into a full queue");
    assert_eq!(queue.len().await.unwrap(), 2);
    let waiting = crate::support::spawn({
        let queue = queue.clone();
        async move { queue.put(b"3".to_vec()).await }
    });
    let mut items = queue.consume().unwrap();
    assert_eq!(take_acked(&mut items, 1).await, ["1"]);
    support::join("the waiting put", WITHIN, waiting).await.unwrap();
    assert_eq!(take_acked(&mut items, 2).await, ["2", "3"]);
    queue.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_item_node_is_reported_left_in_place_and_the_others_delivered() {
    let (_server, clients) = support::server_and_clients(1).await;
    let path = support::unique_path("queue-malformed");
    let queue = bytes_queue(&clients[0], &path, None);
    queue.put(b"before".to_vec()).await.unwrap();
    let bad = clients[0]
        .create(&format!("{path}/queue-"))
        .mode(CreateMode::PersistentSequential)
        .data(b"not curator's".to_vec())
        .await
        .unwrap();
    queue.put(b"after".to_vec()).await.unwrap();
    let mut items = queue.consume().unwrap();
    let mut good = Vec::new();
    let mut reported = Vec::new();
    while good.len() < 2 {
        match tokio::time::timeout(WITHIN, items.next()).await.unwrap().unwrap() {
            Ok(item) => {
                good.push(String::from_utf8(item.value().clone()).unwrap());
                item.ack().await.unwrap();
            }
            Err(Error::MalformedData { path, .. }) => reported.push(path),
            Err(e) => panic!("unexpected report {e}"),
        }
    }
    assert_eq!(good, ["before", "after"]);
    assert_eq!(reported, vec![bad], "reported once, naming the node");
    assert_eq!(queue.len().await.unwrap(), 1, "the malformed node is left in place");
    queue.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_arguments_and_an_item_over_the_data_limit_are_typed_errors_naming_the_path() {
    let (_server, clients) = support::server_and_clients(1).await;
    let path = support::unique_path("queue-bad-input");
    let c = &clients[0];
    assert!(matches!(DistributedQueue::builder(c, &path).max_in_flight(0).build(), Err(Error::InvalidArgument { .. })));
    assert!(matches!(DistributedQueue::builder(c, &path).max_items(0).build(), Err(Error::InvalidArgument { .. })));
    assert!(matches!(DistributedQueue::builder(c, "no-slash").build(), Err(Error::InvalidPath { .. })));
    let nested = format!("{path}/locks");
    assert!(matches!(DistributedQueue::builder(c, &path).lock_path(&nested).build(), Err(Error::InvalidPath { .. })));
    let queue = bytes_queue(c, &path, None);
    assert!(matches!(queue.put_multi(vec![]).await, Err(Error::InvalidArgument { .. })));
    let huge = vec![7u8; c.max_data_size() + 1];
    match queue.put(huge).await {
        Err(Error::InvalidArgument { value, .. }) => assert!(value.contains(&path), "{value}"),
        other => panic!("an item over the data limit: {other:?}"),
    }
    // Nothing was made, the client still works.
    assert_eq!(queue.len().await.unwrap(), 0);
    queue.put(b"fine".to_vec()).await.unwrap();
    assert_eq!(queue.len().await.unwrap(), 1);
    queue.close().await;
}

/// Consumers started before anything made the queue path (the benchmark's order) make it, as
/// Curator's consumer does, and report nothing: a missing path is only reported once it was seen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumers_started_before_the_queue_exists_report_nothing_and_take_what_is_put() {
    let (server, clients) = support::server_and_clients(2).await;
    let path = support::unique_path("queue-not-yet");
    let lock = format!("{path}-locks");
    let obs = support::observer(&server.connect_string()).await;
    let consumer = bytes_queue(&clients[0], &path, Some(&lock));
    let mut items = consumer.consume().unwrap();
    support::eventually(WITHIN, "the consumer makes the queue path", || async { support::exists(&obs, &path).await })
        .await;
    let producer = bytes_queue(&clients[1], &path, Some(&lock));
    producer.put(b"first".to_vec()).await.unwrap();
    // `next_item` fails the test on a report.
    assert_eq!(take_acked(&mut items, 1).await, ["first"]);
    consumer.close().await;
    producer.close().await;
}

/// Background puts go to the server in transactions of many creates and consumers take nodes in
/// transactions of many deletes: one producer's items still come in put order to one consumer,
/// and competing consumers (whose transactions fail when another took a node first) still take
/// every item exactly once, leaving nothing behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_puts_keep_put_order_and_competing_consumers_take_each_item_once() {
    const N: usize = 1500;
    let (server, clients) = support::server_and_clients(4).await;
    let path = support::unique_path("queue-batched");
    let producer = DistributedQueue::builder(&clients[0], &path).build().unwrap();
    for k in 0..N {
        producer.put(format!("{k:05}").into_bytes()).await.unwrap();
    }
    assert!(producer.flush_puts_timeout(WITHIN).await.unwrap(), "the puts finished");
    let mut one = producer.consume().unwrap();
    let first: Vec<String> = take_acked(&mut one, 300).await;
    let expected: Vec<String> = (0..300).map(|k| format!("{k:05}")).collect();
    assert_eq!(first, expected, "one consumer takes one producer's items in put order");

    let mut consumers = vec![(producer.clone(), one)];
    for client in &clients[1..] {
        let queue = DistributedQueue::builder(client, &path).build().unwrap();
        let items = queue.consume().unwrap();
        consumers.push((queue, items));
    }
    let got = std::sync::Arc::new(parking_lot::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for (queue, mut items) in consumers {
        let got = got.clone();
        tasks.push(support::spawn(async move {
            loop {
                match tokio::time::timeout(Duration::from_millis(1500), items.next()).await {
                    Ok(Some(Ok(item))) => got.lock().push(String::from_utf8(item.value().clone()).unwrap()),
                    Ok(Some(Err(e))) => panic!("the consumer reported {e}"),
                    Ok(None) => break,
                    // Idle: done once the queue is empty (a slow server only delays that).
                    Err(_) if queue.len().await.unwrap() == 0 => break,
                    Err(_) => {}
                }
            }
            queue.close().await;
        }));
    }
    for task in tasks {
        support::join("a consumer", WITHIN * 2, task).await;
    }
    let mut got = got.lock().clone();
    got.extend(first);
    got.sort();
    let all: Vec<String> = (0..N).map(|k| format!("{k:05}")).collect();
    assert_eq!(got, all, "every item exactly once");
    let obs = support::observer(&server.connect_string()).await;
    assert_eq!(obs.list_children(&path).await.unwrap(), Vec::<String>::new(), "nothing left");
    producer.close().await;
}
