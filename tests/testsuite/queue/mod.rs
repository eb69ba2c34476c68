//! Distributed queues (`zk_curator::queue`, Curator's `DistributedQueue`), against a real
//! ZooKeeper and, for interop, real Curator 5.4.

mod consumer_faults;
mod delay;
mod delivery;
mod faults;
mod hold_state;
mod id;
mod interop;
mod lost_items;
mod priority;
mod serializers;
mod sharder;
mod simple;

use std::time::Duration;

use zk_curator::queue::{DistributedQueue, Item, QueueStream};

/// A hang guard, never a performance bound.
const WITHIN: Duration = Duration::from_secs(30);

/// The next item of `items` (a report fails the test).
async fn next_item(items: &mut QueueStream<Vec<u8>>) -> Item<Vec<u8>> {
    match tokio::time::timeout(WITHIN, items.next()).await {
        Ok(Some(Ok(item))) => item,
        Ok(Some(Err(e))) => panic!("the consumer reported {e}"),
        Ok(None) => panic!("the consumer ended"),
        Err(_) => panic!("no item within {WITHIN:?}"),
    }
}

/// Takes and acknowledges `n` items, returning them as strings in the order taken.
async fn take_acked(items: &mut QueueStream<Vec<u8>>, n: usize) -> Vec<String> {
    let mut got = Vec::new();
    for _ in 0..n {
        let item = next_item(items).await;
        got.push(String::from_utf8(item.value().clone()).unwrap());
        item.ack().await.expect("ack");
    }
    got
}

fn bytes_queue(client: &zk_curator::CuratorClient, path: &str, lock: Option<&str>) -> DistributedQueue<Vec<u8>> {
    let mut builder = DistributedQueue::builder(client, path).put_in_background(false);
    if let Some(lock) = lock {
        builder = builder.lock_path(lock);
    }
    builder.build().expect("build the queue")
}

/// Waits until the lock nodes under `lock` are gone (a dropped consumer releases its holds in the
/// background), so that the next consumer sees every item free. Hang-guarded.
async fn locks_released(connect: &str, lock: &str) {
    let deadline = tokio::time::Instant::now() + WITHIN;
    loop {
        let held = crate::support::children(connect, lock).await;
        if held.is_empty() {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "lock nodes still held after {WITHIN:?}: {held:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
