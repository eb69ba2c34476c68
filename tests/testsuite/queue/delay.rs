//! DistributedDelayQueue (Curator's), against a real ZooKeeper and real Curator 5.4: an item is
//! never taken before its time (by the consumer's clock), due items earliest first, under
//! Curator's node names; times written by Curator are honoured by ours and the reverse. Times are
//! asserted from below only (never before); upper bounds are hang guards.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use zk_curator::queue::{DistributedDelayQueue, DistributedQueue};
use zk_curator::Error;

use super::interop::peer_got;
use super::next_item;
use crate::support;
use crate::support::curator_peer::CuratorPeer;

fn delay_queue(client: &zk_curator::CuratorClient, path: &str, lock: Option<&str>) -> DistributedDelayQueue<Vec<u8>> {
    let mut builder = DistributedQueue::builder(client, path).put_in_background(false);
    if let Some(lock) = lock {
        builder = builder.lock_path(lock);
    }
    builder.build_delay().expect("build the delay queue")
}

fn epoch_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

/// Takes `n` items, asserting each is taken no earlier than its time (`until` by item), and
/// acknowledges them; returns them in the order taken.
async fn take_not_before(
    items: &mut zk_curator::queue::QueueStream<Vec<u8>>,
    n: usize,
    until: &[(&str, SystemTime)],
) -> Vec<String> {
    let mut got = Vec::new();
    for _ in 0..n {
        let item = next_item(items).await;
        let taken = SystemTime::now();
        let name = String::from_utf8(item.value().clone()).unwrap();
        let due = until.iter().find(|(i, _)| *i == name).map(|(_, t)| *t).expect("a known item");
        // Whole milliseconds: the node name holds the time in ms.
        assert!(epoch_ms(taken) >= epoch_ms(due), "{name} taken {:?} before its time", due.duration_since(taken));
        item.ack().await.unwrap();
        got.push(name);
    }
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_item_is_never_taken_before_its_time_and_due_items_go_earliest_first() {
    let (server, clients) = support::server_and_clients(1).await;
    let path = support::unique_path("delay-order");
    let queue = delay_queue(&clients[0], &path, None);
    let now = SystemTime::now();
    let until = [
        ("late", now + Duration::from_millis(900)),
        ("soon", now + Duration::from_millis(400)),
        ("past", now - Duration::from_secs(1)),
        ("also-soon", now + Duration::from_millis(401)),
    ];
    for (item, at) in &until {
        queue.put(item.as_bytes().to_vec(), *at).await.unwrap();
    }
    // Curator's names: `queue-|<epoch ms, hex>|<sequence>`.
    let names = support::children(&server.connect_string(), &path).await;
    let late = format!("queue-|{:08X}|", epoch_ms(until[0].1));
    assert!(names.iter().any(|n| n.starts_with(&late)), "{late} in {names:?}");

    let mut items = queue.consume().unwrap();
    // The consumer has nothing due after `past` and waits for the time, no other change coming.
    assert_eq!(take_not_before(&mut items, 4, &until).await, ["past", "soon", "also-soon", "late"]);
    queue.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_lock_path_a_delayed_item_is_taken_when_due_and_an_unacknowledged_one_comes_back() {
    let (server, clients) = support::server_and_clients(1).await;
    let path = support::unique_path("delay-locked");
    let lock = format!("{path}-locks");
    let queue = delay_queue(&clients[0], &path, Some(&lock));
    // Long enough that a consumer ignoring the time would take the item well before it on a
    // loaded machine (it is taken at once otherwise): the test then fails.
    let until = [("job", SystemTime::now() + Duration::from_millis(2000))];
    queue.put(b"job".to_vec(), until[0].1).await.unwrap();
    let mut items = queue.consume().unwrap();
    let item = next_item(&mut items).await;
    assert!(epoch_ms(SystemTime::now()) >= epoch_ms(until[0].1), "taken before its time");
    drop(item);
    drop(items);
    super::locks_released(&server.connect_string(), &lock).await;
    let mut items = queue.consume().unwrap();
    assert_eq!(take_not_before(&mut items, 1, &until).await, ["job"]);
    drop(items);
    assert_eq!(queue.len().await.unwrap(), 0);
    queue.close().await;
    assert!(support::children(&server.connect_string(), &lock).await.is_empty(), "no lock node left");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_time_curator_refuses_is_a_typed_error_naming_it_and_nothing_is_put() {
    let (server, clients) = support::server_and_clients(1).await;
    let path = support::unique_path("delay-bad");
    let queue = delay_queue(&clients[0], &path, None);
    for bad in [UNIX_EPOCH, UNIX_EPOCH - Duration::from_secs(5)] {
        match queue.put(b"x".to_vec(), bad).await {
            Err(Error::InvalidArgument { name: "delay_until", value, .. }) => assert_eq!(value, format!("{bad:?}")),
            other => panic!("{bad:?}: {other:?}"),
        }
    }
    assert!(support::children(&server.connect_string(), &path).await.is_empty());
    queue.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn times_curator_puts_are_honoured_by_ours() {
    let (server, clients) = support::server_and_clients(1).await;
    let path = support::unique_path("delay-from-curator");
    let mut peer = CuratorPeer::start(&server.connect_string()).await;
    let now = SystemTime::now();
    // Seconds: the Curator puts take a while on a loaded machine, and an item taken early must
    // still be taken before its time for the test to catch it.
    let until = [("late", now + Duration::from_millis(3000)), ("soon", now + Duration::from_millis(2000))];
    for (item, at) in &until {
        peer.cmd(&format!("dqput {path} {} {item}", epoch_ms(*at))).await;
    }
    let queue = delay_queue(&clients[0], &path, None);
    let mut items = queue.consume().unwrap();
    assert_eq!(take_not_before(&mut items, 2, &until).await, ["soon", "late"]);
    queue.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn times_ours_puts_are_honoured_by_curator_with_a_lock_path() {
    let (server, clients) = support::server_and_clients(1).await;
    let path = support::unique_path("delay-to-curator");
    let lock = format!("{path}-locks");
    let mut peer = CuratorPeer::start(&server.connect_string()).await;
    let queue = delay_queue(&clients[0], &path, Some(&lock));
    let now = SystemTime::now();
    // Seconds, as above: Curator's consumer ignoring our times would take them well before.
    let until = [("late", now + Duration::from_millis(3000)), ("soon", now + Duration::from_millis(2000))];
    for (item, at) in &until {
        queue.put(item.as_bytes().to_vec(), *at).await.unwrap();
    }
    peer.cmd(&format!("dqconsume c {path} {lock}")).await;
    let got = peer_got(&mut peer, "c", 2).await;
    peer.cmd("kqclose c").await;
    let names: Vec<&str> = got.iter().map(|(i, _, _)| i.as_str()).collect();
    assert_eq!(names, ["soon", "late"]);
    for (item, start_us, _) in &got {
        let due = until.iter().find(|(i, _)| i == item).unwrap().1;
        assert!(start_us / 1000 >= epoch_ms(due), "Curator took {item} before its time");
    }
    assert_eq!(queue.len().await.unwrap(), 0);
    queue.close().await;
}
