//! Waiting for a synced cache: at once while it follows the server; after a gap it noticed, only
//! once it has re-read the tree (it then holds what was written during the gap), and within its
//! timeout whatever the connection does; a typed error once the cache has ended.

use std::time::{Duration, Instant};

use zk_curator::cache::{CacheState, CuratorCache};
use zk_curator::testing::{FaultProxy, ProxyMode};
use zk_curator::ErrorKind;

use super::{put, set};
use crate::support::{client, client_with_timeouts, init_tracing, server, unique_path};

const WITHIN: Duration = Duration::from_secs(20);

#[tokio::test]
async fn wait_synced_returns_only_once_the_cache_has_re_read_the_tree_after_a_cut() {
    init_tracing();
    let server = server().await;
    let proxy = FaultProxy::start(&server.connect_string()).await.unwrap();
    let cache_client =
        client_with_timeouts(&proxy.connect_string(), Duration::from_secs(10), Duration::from_secs(2)).await;
    let writer = client(&server.connect_string()).await;
    let root = unique_path("cache-wait-synced");
    put(&writer, &root, b"before").await;
    let cache = CuratorCache::start(&cache_client, &root).unwrap();
    assert!(cache.wait_initialized_timeout(WITHIN).await.unwrap());
    assert!(cache.wait_synced_timeout(WITHIN).await.expect("synced after the first load"));

    let mut states = cache.states();
    proxy.set_mode(ProxyMode::Cut);
    tokio::time::timeout(WITHIN, states.wait_for(|s| *s != CacheState::Synced)).await.unwrap().unwrap();
    set(&writer, &root, b"during the cut").await;
    // The link stays down: the wait ends at its timeout (the upper bound is a hang bound).
    let timeout = Duration::from_millis(300);
    let start = Instant::now();
    let synced = cache.wait_synced_timeout(timeout).await.expect("a time-out is not an error");
    assert!(!synced, "not synced while the link is down");
    assert!(start.elapsed() < timeout + Duration::from_secs(1), "returned after {:?}", start.elapsed());

    proxy.set_mode(ProxyMode::Pass);
    assert!(cache.wait_synced_timeout(WITHIN).await.expect("synced again after the cut"));
    // Synced again means re-read: the write made during the cut is in.
    assert_eq!(cache.entry(&root).expect("cached").data(), b"during the cut");

    cache.close().await;
    let err = cache.wait_synced_timeout(WITHIN).await.expect_err("a closed cache is never synced again");
    assert_eq!(err.kind(), ErrorKind::Closed, "{err:?}");
}
