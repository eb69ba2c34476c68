//! The latest-value receiver of a cache that ends (closed, or its client closed): a waiter on it
//! wakes with an error instead of waiting forever for a change that can no longer come, and the
//! last entry stays readable.

use std::time::Duration;

use zk_curator::cache::{CacheMode, CuratorCache};

use super::put;
use crate::support::{server_and_clients, unique_path};

/// Hang guard, never a performance bound.
const HANG: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_on_the_latest_value_wakes_when_the_cache_closes() {
    let (_server, clients) = server_and_clients(1).await;
    let c = &clients[0];
    let root = unique_path("cache-latest-close");
    put(c, &root, b"v1").await;
    let cache = CuratorCache::builder(c, &root).mode(CacheMode::Node).start().unwrap();
    assert!(cache.wait_initialized_timeout(HANG).await.unwrap());
    let mut latest = cache.latest();
    let waiter = crate::support::spawn(async move {
        let woke = latest.wait_for(|e| e.as_ref().is_some_and(|e| e.data() != b"v1")).await.map(|_| ());
        (woke, latest)
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    cache.close().await;
    let (woke, latest) = tokio::time::timeout(HANG, waiter)
        .await
        .expect("a waiter on the latest value of a closed cache must wake")
        .unwrap();
    assert!(woke.is_err(), "no new value came, so the wait ends with the sender's end: {woke:?}");
    assert_eq!(latest.borrow().as_ref().map(|e| e.data().to_vec()), Some(b"v1".to_vec()));

    let mut after = cache.latest();
    assert_eq!(after.borrow().as_ref().map(|e| e.data().to_vec()), Some(b"v1".to_vec()), "the last entry stays");
    let changed = tokio::time::timeout(HANG, after.changed()).await.expect("no wait on a closed cache");
    assert!(changed.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_on_the_latest_value_wakes_when_the_client_closes() {
    let (_server, clients) = server_and_clients(1).await;
    let c = &clients[0];
    let root = unique_path("cache-latest-client-close");
    put(c, &root, b"v1").await;
    let cache = CuratorCache::builder(c, &root).mode(CacheMode::Node).start().unwrap();
    assert!(cache.wait_initialized_timeout(HANG).await.unwrap());
    let mut latest = cache.latest();
    let waiter = crate::support::spawn(async move { latest.changed().await });
    c.close().await;
    let woke = tokio::time::timeout(HANG, waiter)
        .await
        .expect("a waiter on the latest value must wake once the cache's client closed")
        .unwrap();
    assert!(woke.is_err());
    assert!(cache.state().is_terminal(), "{:?}", cache.state());
}
