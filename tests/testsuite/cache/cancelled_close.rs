//! A `close()` dropped at its first await still stops the cache: it ends (state `Closed`) and no
//! longer follows the server.

use std::time::Duration;

use zk_curator::cache::{CacheState, CuratorCache};

use super::{put, set};
use crate::support::{eventually, server_and_clients, unique_path};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_close_cancelled_at_its_first_await_still_stops_the_cache() {
    let (_server, clients) = server_and_clients(1).await;
    let c = &clients[0];
    let root = unique_path("cache-cancelled-close");
    put(c, &root, b"1").await;
    let cache = CuratorCache::start(c, &root).unwrap();
    assert!(cache.wait_initialized_timeout(Duration::from_secs(20)).await.unwrap());
    let mut events = cache.events();
    let _ = tokio::time::timeout(Duration::ZERO, cache.close()).await;
    eventually(Duration::from_secs(20), "the cache ends", || async { cache.state() == CacheState::Closed }).await;
    set(c, &root, b"2").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(cache.entry(&root).unwrap().data(), b"1", "a closed cache no longer follows");
    let ended = tokio::time::timeout(Duration::from_secs(20), async { while events.next().await.is_some() {} }).await;
    assert!(ended.is_ok(), "its streams end");
    cache.close().await;
}
