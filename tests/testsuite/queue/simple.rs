//! `SimpleDistributedQueue`: order, one taker per item across sessions, strict deadlines on a
//! silent link, cancelled takes that lose nothing, a queue path deleted under a waiting take, bad
//! input, and real Curator 5.4 on the same queue both ways.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use zk_curator::queue::SimpleDistributedQueue;
use zk_curator::testing::{FaultProxy, ProxyMode};
use zk_curator::Error;

use crate::support::{self, curator_peer::CuratorPeer};

/// Bounds a call whose failure would be a hang.
const HANG: Duration = Duration::from_secs(60);

fn item(k: usize) -> Vec<u8> {
    format!("item-{k}").into_bytes()
}

fn number(data: &[u8]) -> usize {
    std::str::from_utf8(data).unwrap().strip_prefix("item-").unwrap().parse().unwrap()
}

/// Every item taken, counted by number: each of `0..n` must be there exactly once.
fn assert_each_once(taken: &[usize], n: usize) {
    let mut counts = BTreeMap::new();
    for k in taken {
        *counts.entry(*k).or_insert(0) += 1;
    }
    let twice: Vec<_> = counts.iter().filter(|(_, c)| **c > 1).map(|(k, _)| *k).collect();
    let missing: Vec<_> = (0..n).filter(|k| !counts.contains_key(k)).collect();
    assert!(twice.is_empty(), "items taken more than once: {twice:?}");
    assert!(missing.is_empty(), "items never taken: {missing:?}");
    assert_eq!(taken.len(), n);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_are_taken_in_offer_order_and_an_empty_queue_says_so() {
    let (_server, clients) = support::server_and_clients(1).await;
    let path = support::unique_path("sq-order");
    let queue = SimpleDistributedQueue::new(&clients[0], &path).unwrap();
    assert_eq!(queue.peek().await.unwrap(), None);
    match queue.element().await {
        Err(Error::QueueEmpty { path: p }) => assert_eq!(p, path),
        other => panic!("element() of an empty queue: {other:?}"),
    }
    for k in 0..30 {
        let node = queue.offer(item(k)).await.unwrap();
        assert!(node.starts_with(&format!("{path}/qn-")), "{node}");
    }
    assert_eq!(queue.peek().await.unwrap(), Some(item(0)));
    assert_eq!(queue.element().await.unwrap(), item(0));
    // A second queue on the same path, taking alternately: together still in order.
    let other = SimpleDistributedQueue::new(&clients[0], &path).unwrap();
    let mut taken = Vec::new();
    for k in 0..30 {
        let data = match k % 3 {
            0 => queue.take().await.unwrap(),
            1 => other.remove().await.unwrap(),
            _ => queue.poll_timeout(HANG).await.unwrap().unwrap(),
        };
        taken.push(number(&data));
    }
    assert_eq!(taken, (0..30).collect::<Vec<_>>());
    assert_eq!(queue.try_take().await.unwrap(), None);
    match other.remove().await {
        Err(Error::QueueEmpty { path: p }) => assert_eq!(p, path),
        other => panic!("remove() of an empty queue: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_take_gets_an_item_offered_later() {
    let (_server, clients) = support::server_and_clients(2).await;
    let path = support::unique_path("sq-wait");
    let taker = SimpleDistributedQueue::new(&clients[0], &path).unwrap();
    let waiting = crate::support::spawn(async move { taker.take().await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiting.is_finished(), "take returned from an empty queue");
    SimpleDistributedQueue::new(&clients[1], &path).unwrap().offer(item(7)).await.unwrap();
    assert_eq!(support::join("the waiting take", HANG, waiting).await.unwrap(), item(7));
}

/// Four sessions, two takers each (one queue shared by two tasks, so the local view is shared
/// too), while items are still being offered: each item goes to exactly one taker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_takers_on_many_sessions_take_each_item_once() {
    const N: usize = 300;
    let (_server, clients) = support::server_and_clients(5).await;
    let path = support::unique_path("sq-many");
    let producer = SimpleDistributedQueue::new(&clients[4], &path).unwrap();
    for k in 0..N / 2 {
        producer.offer(item(k)).await.unwrap();
    }
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut takers = Vec::new();
    for client in &clients[..4] {
        let queue = SimpleDistributedQueue::new(client, &path).unwrap();
        for _ in 0..2 {
            let (queue, tx) = (queue.clone(), tx.clone());
            takers.push(crate::support::spawn(async move {
                while let Some(data) = queue.poll_timeout(Duration::from_secs(3)).await.unwrap() {
                    tx.send(number(&data)).unwrap();
                }
            }));
        }
    }
    drop(tx);
    for k in N / 2..N {
        producer.offer(item(k)).await.unwrap();
    }
    for taker in takers {
        support::join("a taker", HANG, taker).await;
    }
    let mut taken = Vec::new();
    while let Some(k) = rx.recv().await {
        taken.push(k);
    }
    assert_each_once(&taken, N);
}

/// Takes cancelled at random moments (before, while and after their read and delete are on the
/// wire), then the queue dropped with what its cancelled takes left in the hand-off: every item
/// is still taken exactly once, by the same queue's later calls or, written back, by another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_takes_lose_no_item() {
    support::init_tracing();
    const N: usize = 80;
    let (_server, clients) = support::server_and_clients(2).await;
    let path = support::unique_path("sq-cancel");
    let mut rng = rand::rngs::StdRng::seed_from_u64(support::seed("SQ_CANCEL_SEED"));
    let queue = SimpleDistributedQueue::new(&clients[0], &path).unwrap();
    for k in 0..N {
        queue.offer(item(k)).await.unwrap();
    }
    // Cut at random moments: after a random number of polls (the take yielding to the runtime
    // between them) within a window that follows what takes need on this machine (it grows while
    // takes are cut, and moves to twice a completed take's polls), so that about half are cut. A
    // timer cannot cut finer than its millisecond, longer than a take where the server is fast.
    let mut taken = Vec::new();
    let mut cancelled = 0;
    let mut window: u32 = 16;
    for _ in 0..N {
        let cut = rng.gen_range(0..window);
        let take = queue.take();
        tokio::pin!(take);
        let mut polls = 0;
        let done = loop {
            if let std::task::Poll::Ready(data) = futures::poll!(&mut take) {
                break Some(data);
            }
            if polls == cut {
                break None;
            }
            polls += 1;
            tokio::task::yield_now().await;
        };
        match done {
            Some(data) => {
                taken.push(number(&data.unwrap()));
                window = ((window + 2 * polls) / 2).max(2);
            }
            // Dropped mid-take: cancelled.
            None => {
                cancelled += 1;
                window = window.saturating_add(window / 4 + 1);
            }
        }
    }
    assert!(cancelled > N / 4, "too few takes were cancelled ({cancelled}, window {window} polls) to test anything");
    // Half of what is left through the same queue (the hand-off first), the rest after dropping it.
    for _ in 0..(N - taken.len()) / 2 {
        // Bounded: a lost item would make an untimed take wait for ever.
        match queue.poll_timeout(Duration::from_secs(10)).await.unwrap() {
            Some(data) => taken.push(number(&data)),
            None => break,
        }
    }
    for _ in 0..10 {
        if let Ok(data) = tokio::time::timeout(Duration::from_micros(rng.gen_range(0..1500)), queue.take()).await {
            taken.push(number(&data.unwrap()));
        }
    }
    drop(queue);
    let other = SimpleDistributedQueue::new(&clients[1], &path).unwrap();
    // An item written back after the drop arrives later: wait for each (bounded, the failure is a
    // loss, which would otherwise wait for ever).
    while taken.len() < N {
        match other.poll_timeout(Duration::from_secs(10)).await.unwrap() {
            Some(data) => taken.push(number(&data)),
            None => break,
        }
    }
    assert_each_once(&taken, N);
}

/// A poll on a connection that went silent (blackholed: no reply, no close) returns within its
/// timeout, with nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poll_returns_within_its_timeout_on_a_silent_connection() {
    let server = support::server().await;
    let proxy = FaultProxy::start(&server.connect_string()).await.expect("proxy");
    let client = support::client(&proxy.connect_string()).await;
    let path = support::unique_path("sq-silent");
    let queue = SimpleDistributedQueue::new(&client, &path).unwrap();
    queue.offer(item(0)).await.unwrap();
    assert_eq!(queue.poll_timeout(HANG).await.unwrap(), Some(item(0)));
    proxy.set_mode(ProxyMode::Blackhole);
    for timeout in [Duration::ZERO, Duration::from_millis(300), Duration::from_millis(1200)] {
        let started = Instant::now();
        let polled = tokio::time::timeout(timeout + HANG, queue.poll_timeout(timeout)).await.expect("poll hung");
        let took = started.elapsed();
        assert_eq!(polled.unwrap(), None);
        // Upper bound only: a deadline missed by more than scheduling noise is the failure.
        assert!(took < timeout + Duration::from_millis(250), "poll_timeout({timeout:?}) took {took:?}");
    }
    proxy.set_mode(ProxyMode::Pass);
}

/// The queue's node deleted (and re-made by no one) while a take waits on it: the take makes it
/// again, as Curator does, and still gets the next item.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_take_waiting_on_a_deleted_queue_path_recovers() {
    let (server, clients) = support::server_and_clients(2).await;
    let path = support::unique_path("sq-deleted");
    let taker = SimpleDistributedQueue::new(&clients[0], &path).unwrap();
    assert_eq!(taker.try_take().await.unwrap(), None, "the queue's node is made");
    let waiting = {
        let taker = taker.clone();
        crate::support::spawn(async move { taker.take().await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    clients[1].delete(&path).await.unwrap();
    let obs = support::observer(&server.connect_string()).await;
    support::eventually(HANG, "the waiting take makes the queue's node again", || async {
        support::exists(&obs, &path).await
    })
    .await;
    assert!(!waiting.is_finished(), "take returned with nothing offered");
    SimpleDistributedQueue::new(&clients[1], &path).unwrap().offer(item(1)).await.unwrap();
    assert_eq!(support::join("the waiting take", HANG, waiting).await.unwrap(), item(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_item_over_the_data_limit_is_refused_naming_the_path_and_nothing_is_left() {
    let (server, clients) = support::server_and_clients(1).await;
    let path = support::unique_path("sq-large");
    let queue = SimpleDistributedQueue::new(&clients[0], &path).unwrap();
    let too_large = vec![0u8; clients[0].max_data_size() + 1];
    match queue.offer(too_large).await {
        Err(Error::InvalidArgument { name: "data", value, .. }) => assert!(value.contains(&path), "{value}"),
        other => panic!("an item over the limit: {other:?}"),
    }
    let obs = support::observer(&server.connect_string()).await;
    assert!(!support::exists(&obs, &path).await, "nothing was created");
    assert!(matches!(SimpleDistributedQueue::new(&clients[0], "no-slash"), Err(Error::InvalidPath { .. })));
    // A foreign node in the queue's path is skipped, not taken or fatal.
    clients[0].create(&format!("{path}/foreign")).creating_parents_if_needed().await.unwrap();
    queue.offer(item(3)).await.unwrap();
    assert_eq!(queue.take().await.unwrap(), item(3));
    assert_eq!(queue.try_take().await.unwrap(), None);
    let left = clients[0].get_children(&path).await.unwrap();
    assert_eq!(left, vec!["foreign".to_string()]);
    assert!(matches!(queue.remove().await, Err(Error::QueueEmpty { .. })), "only a foreign node is left");
}

/// Items offered by Curator 5.4 are taken here in its order, and the other way round; a queue
/// both offer to keeps one order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_and_ours_take_each_others_items_in_order() {
    let (server, clients) = support::server_and_clients(1).await;
    let connect = server.connect_string();
    let mut peer = CuratorPeer::start(&connect).await;
    let path = support::unique_path("sq-interop");
    let ours = SimpleDistributedQueue::new(&clients[0], &path).unwrap();

    for k in 0..10 {
        assert_eq!(peer.cmd(&format!("sqoffer {path} item-{k}")).await, "OFFERED");
    }
    assert_eq!(ours.peek().await.unwrap(), Some(item(0)));
    for k in 0..10 {
        assert_eq!(ours.take().await.unwrap(), item(k));
    }

    for k in 10..20 {
        ours.offer(item(k)).await.unwrap();
    }
    assert_eq!(peer.cmd(&format!("sqpeek {path}")).await, "ITEM item-10");
    for k in 10..20 {
        assert_eq!(peer.cmd(&format!("sqpoll {path} 10000")).await, format!("ITEM item-{k}"));
    }
    assert_eq!(peer.cmd(&format!("sqpoll {path} 0")).await, "NONE");

    // Mixed offers, alternating takers.
    for k in 20..30 {
        if k % 2 == 0 {
            ours.offer(item(k)).await.unwrap();
        } else {
            assert_eq!(peer.cmd(&format!("sqoffer {path} item-{k}")).await, "OFFERED");
        }
    }
    for k in 20..30 {
        if k % 2 == 0 {
            assert_eq!(peer.cmd(&format!("sqpoll {path} 10000")).await, format!("ITEM item-{k}"));
        } else {
            assert_eq!(ours.take().await.unwrap(), item(k));
        }
    }
    assert_eq!(ours.try_take().await.unwrap(), None);
}
