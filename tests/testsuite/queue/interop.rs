//! Interop with real Curator 5.4's DistributedQueue (tests/java/CuratorPeer.java), both ways:
//! items put by Curator (single and multi) are consumed by ours and the reverse; with a lock path
//! a Curator consumer and ours never process one item at the same time; mixed producers and
//! consumers on one path deliver every item exactly once.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{bytes_queue, take_acked, WITHIN};
use crate::support;
use crate::support::curator_peer::CuratorPeer;

/// The items of a peer `GOT` answer, each with its processing interval (epoch microseconds).
pub(super) fn got(answer: &str) -> Vec<(String, u64, u64)> {
    let body = answer.strip_prefix("GOT").expect("a GOT answer").trim();
    body.split(';')
        .filter(|s| !s.is_empty())
        .map(|entry| {
            let mut parts = entry.rsplitn(3, ':');
            let end = parts.next().unwrap().parse().unwrap();
            let start = parts.next().unwrap().parse().unwrap();
            (parts.next().unwrap().to_string(), start, end)
        })
        .collect()
}

pub(super) async fn peer_got(peer: &mut CuratorPeer, name: &str, n: usize) -> Vec<(String, u64, u64)> {
    let deadline = tokio::time::Instant::now() + WITHIN;
    loop {
        let items = got(&peer.cmd(&format!("qgot {name}")).await);
        if items.len() >= n || tokio::time::Instant::now() > deadline {
            return items;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn epoch_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_micros() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_curator_puts_single_and_multi_are_consumed_by_ours_in_order() {
    let (server, clients) = support::server_and_clients(1).await;
    let path = support::unique_path("queue-from-curator");
    let mut peer = CuratorPeer::start(&server.connect_string()).await;
    for i in 0..5 {
        peer.cmd(&format!("qput {path} single-{i}")).await;
    }
    peer.cmd(&format!("qputmulti {path} multi-a,multi-b,multi-c")).await;
    peer.cmd(&format!("qput {path} last")).await;

    let queue = bytes_queue(&clients[0], &path, None);
    let mut items = queue.consume().unwrap();
    let got = take_acked(&mut items, 9).await;
    assert_eq!(
        got,
        ["single-0", "single-1", "single-2", "single-3", "single-4", "multi-a", "multi-b", "multi-c", "last"]
    );
    assert_eq!(queue.len().await.unwrap(), 0, "each node taken was deleted");
    queue.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_ours_puts_single_and_multi_are_consumed_by_curator_byte_for_byte() {
    let (server, clients) = support::server_and_clients(1).await;
    let path = support::unique_path("queue-to-curator");
    let queue = bytes_queue(&clients[0], &path, None);
    queue.put(b"one".to_vec()).await.unwrap();
    queue.put_multi(vec![b"two".to_vec(), b"three".to_vec()]).await.unwrap();
    queue.put("vier-ü".as_bytes().to_vec()).await.unwrap();

    let mut peer = CuratorPeer::start(&server.connect_string()).await;
    peer.cmd(&format!("qconsume c {path} - 0")).await;
    let items: Vec<String> = peer_got(&mut peer, "c", 4).await.into_iter().map(|(i, _, _)| i).collect();
    assert_eq!(items, ["one", "two", "three", "vier-ü"]);
    peer.cmd("qclose c").await;
    queue.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_lock_path_curators_consumer_and_ours_never_process_one_item_at_once() {
    let (server, clients) = support::server_and_clients(1).await;
    let path = support::unique_path("queue-locked-interop");
    let lock = format!("{path}-locks");
    const N: usize = 40;
    // Ours holds one node at a time, so that both consumers get a share.
    let queue = zk_curator::queue::DistributedQueue::builder(&clients[0], &path)
        .lock_path(&lock)
        .put_in_background(false)
        .max_in_flight(1)
        .build()
        .unwrap();
    for i in 0..N {
        queue.put(format!("item-{i}").into_bytes()).await.unwrap();
    }
    let mut peer = CuratorPeer::start(&server.connect_string()).await;
    peer.cmd(&format!("qconsume c {path} {lock} 30")).await;

    // Ours processes too, holding each item 30 ms, and records its intervals.
    let mut ours: Vec<(String, u64, u64)> = Vec::new();
    let mut items = queue.consume().unwrap();
    let deadline = tokio::time::Instant::now() + WITHIN;
    loop {
        let theirs = got(&peer.cmd("qgot c").await);
        if ours.len() + theirs.len() >= N || tokio::time::Instant::now() > deadline {
            break;
        }
        let Ok(Some(next)) = tokio::time::timeout(Duration::from_millis(100), items.next()).await else { continue };
        let item = next.unwrap();
        let start = epoch_us();
        tokio::time::sleep(Duration::from_millis(30)).await;
        ours.push((String::from_utf8(item.value().clone()).unwrap(), start, epoch_us()));
        item.ack().await.unwrap();
    }
    drop(items);
    let theirs = peer_got(&mut peer, "c", N - ours.len()).await;
    peer.cmd("qclose c").await;

    let mut by_item: BTreeMap<String, Vec<(u64, u64)>> = BTreeMap::new();
    for (item, start, end) in ours.iter().chain(&theirs) {
        by_item.entry(item.clone()).or_default().push((*start, *end));
    }
    let all: BTreeSet<String> = (0..N).map(|i| format!("item-{i}")).collect();
    assert_eq!(by_item.keys().cloned().collect::<BTreeSet<_>>(), all, "every item processed");
    assert!(
        !ours.is_empty() && !theirs.is_empty(),
        "both consumers took items: ours {} theirs {}",
        ours.len(),
        theirs.len()
    );
    for (item, spans) in &by_item {
        for (i, a) in spans.iter().enumerate() {
            for b in &spans[i + 1..] {
                assert!(a.1 <= b.0 || b.1 <= a.0, "{item} processed by two consumers at once: {spans:?}");
            }
        }
    }
    // No failure, no session lost: each item once.
    assert!(by_item.values().all(|s| s.len() == 1), "an item processed twice: {by_item:?}");
    assert_eq!(queue.len().await.unwrap(), 0);
    assert!(support::children(&server.connect_string(), &lock).await.is_empty(), "no lock node left");
    queue.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_producers_and_consumers_on_one_path_deliver_every_item_exactly_once() {
    let (server, clients) = support::server_and_clients(2).await;
    let path = support::unique_path("queue-mixed");
    let mut peer = CuratorPeer::start(&server.connect_string()).await;
    peer.cmd(&format!("qconsume c {path} - 0")).await;
    let producer = bytes_queue(&clients[0], &path, None);
    let consumer = bytes_queue(&clients[1], &path, None);
    let mut items = consumer.consume().unwrap();
    const EACH: usize = 30;
    for i in 0..EACH {
        producer.put(format!("rust-{i}").into_bytes()).await.unwrap();
        peer.cmd(&format!("qput {path} java-{i}")).await;
    }
    let mut ours = Vec::new();
    let deadline = tokio::time::Instant::now() + WITHIN;
    while tokio::time::Instant::now() < deadline {
        let theirs = got(&peer.cmd("qgot c").await).len();
        if ours.len() + theirs >= 2 * EACH {
            break;
        }
        if let Ok(Some(next)) = tokio::time::timeout(Duration::from_millis(100), items.next()).await {
            let item = next.unwrap();
            ours.push(String::from_utf8(item.value().clone()).unwrap());
            item.ack().await.unwrap();
        }
    }
    let theirs: Vec<String> = peer_got(&mut peer, "c", 0).await.into_iter().map(|(i, _, _)| i).collect();
    peer.cmd("qclose c").await;
    let mut all: Vec<String> = ours.iter().chain(&theirs).cloned().collect();
    all.sort();
    let mut expected: Vec<String> = (0..EACH).flat_map(|i| [format!("rust-{i}"), format!("java-{i}")]).collect();
    expected.sort();
    assert_eq!(all, expected, "every item exactly once (ours {}, theirs {})", ours.len(), theirs.len());
    consumer.close().await;
    producer.close().await;
}
