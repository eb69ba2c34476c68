//! The blocking cache from a plain thread: it loads, waits until synced, follows changes through
//! its event iterator,
//! and refuses to wait inside a tokio runtime with a typed error.

use std::time::Duration;

use zk_curator::blocking::{CuratorCache, CuratorClient};
use zk_curator::cache::{CacheEvent, CacheMode};
use zk_curator::testing::TestingServer;
use zk_curator::ErrorKind;

#[test]
fn the_blocking_cache_loads_and_follows_changes_from_a_plain_thread() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(TestingServer::start()).expect("a ZooKeeper");
    let client = CuratorClient::connect(&server.connect_string()).unwrap();
    let root = crate::support::unique_path("cache-blocking");
    client.create(&format!("{root}/a"), b"1".to_vec(), zk_curator::CreateMode::Persistent).unwrap();
    let cache = CuratorCache::start(&client, &root, CacheMode::Children).unwrap();
    assert!(cache.wait_initialized_timeout(Duration::from_secs(20)).unwrap());
    assert!(cache.wait_synced_timeout(Duration::from_secs(20)).unwrap());
    assert_eq!(cache.children(&root), vec!["a".to_string()]);
    let mut events = cache.events();
    let mut seen_initialized = false;
    while let Some(event) = events.try_next() {
        seen_initialized |= event == CacheEvent::Initialized;
    }
    assert!(seen_initialized);
    client.set_data(&format!("{root}/a"), b"2".to_vec(), None).unwrap();
    let event = events.next_timeout(Duration::from_secs(20)).unwrap().expect("a change");
    assert!(matches!(&event, CacheEvent::Changed { new, .. } if new.data() == b"2"), "{event:?}");

    // Inside a runtime a waiting call is a typed error, not a panic or a stalled runtime.
    let err = rt.block_on(async { cache.wait_initialized_timeout(Duration::from_secs(1)) }).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadArgument, "{err:?}");
    cache.close().unwrap();
    assert!(events.next().is_none(), "the iterator ends with the cache");
    let err = cache.wait_synced_timeout(Duration::from_secs(20)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Closed, "{err:?}");
    client.close().unwrap();
    drop(server);
}
