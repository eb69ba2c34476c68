//! What a cache holds and reports on a quiet network: reads, events per subscriber, modes, bounds,
//! the latest value, deadlines, close and drop.

use std::time::{Duration, Instant};

use zk_curator::cache::{CacheEvent, CacheMode, CacheState, CuratorCache};
use zk_curator::testing::{FaultProxy, ProxyMode};
use zk_curator::{Error, ErrorKind};

use super::{assert_converges, del, put, set, Replay};
use crate::support::{client, client_with_timeouts, eventually, server_and_clients, unique_path};

const WITHIN: Duration = Duration::from_secs(20);

async fn next_event(events: &mut zk_curator::cache::CacheEventStream) -> CacheEvent {
    tokio::time::timeout(WITHIN, events.next()).await.expect("an event in time").expect("the stream goes on")
}

#[tokio::test]
async fn a_tree_cache_reads_the_tree_and_reports_each_change_in_order() {
    let (server, clients) = server_and_clients(1).await;
    let c = &clients[0];
    let root = unique_path("cache-tree");
    put(c, &root, b"r").await;
    put(c, &format!("{root}/a"), b"1").await;
    put(c, &format!("{root}/a/x"), b"2").await;
    put(c, &format!("{root}/b"), b"3").await;

    let cache = CuratorCache::start(c, &root).unwrap();
    let mut events = cache.events();
    assert!(cache.wait_initialized_timeout(WITHIN).await.unwrap());
    assert_eq!(cache.size(), 4);
    assert_eq!(cache.children(&root), vec!["a".to_string(), "b".to_string()]);
    assert_eq!(cache.children(&format!("{root}/a")), vec!["x".to_string()]);
    assert_eq!(cache.entry(&format!("{root}/a/x")).unwrap().data(), b"2");
    assert_eq!(cache.state(), CacheState::Synced);
    let mut replay = Replay::default();
    let mut initial = Vec::new();
    loop {
        let event = next_event(&mut events).await;
        match &event {
            CacheEvent::Initialized => {}
            CacheEvent::Created(e) => initial.push(e.path().to_string()),
            other => panic!("before Initialized: {other:?}"),
        }
        replay.apply(event.clone());
        if event == CacheEvent::Initialized {
            break;
        }
    }
    initial.sort();
    assert_eq!(initial, vec![root.clone(), format!("{root}/a"), format!("{root}/a/x"), format!("{root}/b")]);

    let x = format!("{root}/a/x");
    set(c, &x, b"v1").await;
    set(c, &x, b"v2").await;
    del(c, &x).await;
    put(c, &x, b"again").await;
    // Whatever the cache coalesced, each event follows from the one before (the replay checks) and
    // the last state is the re-created node.
    assert_converges(&cache, &mut events, &mut replay, &server.connect_string(), WITHIN).await;
    assert_eq!(cache.entry(&x).unwrap().data(), b"again");
    cache.close().await;
}

#[tokio::test]
async fn every_subscriber_replays_to_the_cache_also_one_that_joins_late() {
    let (server, clients) = server_and_clients(1).await;
    let c = &clients[0];
    let root = unique_path("cache-subscribers");
    put(c, &format!("{root}/a"), b"1").await;
    let cache = CuratorCache::start(c, &root).unwrap();
    let mut early = cache.events();
    assert!(cache.wait_initialized_timeout(WITHIN).await.unwrap());
    put(c, &format!("{root}/b"), b"2").await;
    eventually(WITHIN, "b cached", || async { cache.entry(&format!("{root}/b")).is_some() }).await;
    let mut late = cache.events();
    set(c, &format!("{root}/a"), b"changed").await;
    del(c, &format!("{root}/b")).await;
    for events in [&mut early, &mut late] {
        let mut replay = Replay::default();
        assert_converges(&cache, events, &mut replay, &server.connect_string(), WITHIN).await;
    }
    cache.close().await;
    assert!(early.next().await.is_none(), "close ends the streams");
}

#[tokio::test]
async fn the_node_mode_caches_only_the_node_and_its_latest_value_follows_it() {
    let (_server, clients) = server_and_clients(1).await;
    let c = &clients[0];
    let root = unique_path("cache-node");
    let cache = CuratorCache::builder(c, &root).mode(CacheMode::Node).start().unwrap();
    let mut latest = cache.latest();
    assert!(cache.wait_initialized_timeout(WITHIN).await.unwrap());
    assert!(latest.borrow_and_update().is_none(), "no node yet");
    put(c, &root, b"v1").await;
    put(c, &format!("{root}/child"), b"c").await;
    tokio::time::timeout(WITHIN, latest.wait_for(|v| v.as_ref().is_some_and(|e| e.data() == b"v1")))
        .await
        .unwrap()
        .unwrap();
    set(c, &root, b"v2").await;
    tokio::time::timeout(WITHIN, latest.wait_for(|v| v.as_ref().is_some_and(|e| e.data() == b"v2")))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(cache.size(), 1, "only the node: {:?}", cache.snapshot().keys().collect::<Vec<_>>());
    del(c, &format!("{root}/child")).await;
    del(c, &root).await;
    tokio::time::timeout(WITHIN, latest.wait_for(Option::is_none)).await.unwrap().unwrap();
    assert_eq!(cache.size(), 0);
    cache.close().await;
}

#[tokio::test]
async fn the_children_mode_and_max_depth_leave_deeper_nodes_out() {
    let (_server, clients) = server_and_clients(1).await;
    let c = &clients[0];
    let root = unique_path("cache-depth");
    put(c, &format!("{root}/a/b/c"), &[]).await;
    let children = CuratorCache::builder(c, &root).mode(CacheMode::Children).start().unwrap();
    let depth2 = CuratorCache::builder(c, &root).max_depth(2).start().unwrap();
    assert!(children.wait_initialized_timeout(WITHIN).await.unwrap());
    assert!(depth2.wait_initialized_timeout(WITHIN).await.unwrap());
    put(c, &format!("{root}/d"), &[]).await;
    put(c, &format!("{root}/d/e"), &[]).await;
    put(c, &format!("{root}/d/e/f"), &[]).await;
    eventually(WITHIN, "d/e cached at depth 2", || async { depth2.entry(&format!("{root}/d/e")).is_some() }).await;
    eventually(WITHIN, "d cached as a child", || async { children.entry(&format!("{root}/d")).is_some() }).await;
    let keys =
        |cache: &CuratorCache| cache.snapshot().into_keys().map(|k| k[root.len()..].to_string()).collect::<Vec<_>>();
    assert_eq!(keys(&children), vec!["", "/a", "/d"]);
    assert_eq!(keys(&depth2), vec!["", "/a", "/a/b", "/d", "/d/e"]);
    children.close().await;
    depth2.close().await;
}

#[tokio::test]
async fn more_nodes_than_max_nodes_fail_the_cache_with_a_typed_error_naming_the_path() {
    let (_server, clients) = server_and_clients(1).await;
    let c = &clients[0];
    let root = unique_path("cache-max-nodes");
    for i in 0..5 {
        put(c, &format!("{root}/n{i}"), &[]).await;
    }
    let too_small = CuratorCache::builder(c, &root).max_nodes(3).start().unwrap();
    let err = too_small.wait_initialized_timeout(WITHIN).await.unwrap_err();
    assert!(matches!(&err, Error::LimitExceeded { path, limit: 3, .. } if *path == root), "{err:?}");
    assert_eq!(too_small.state(), CacheState::Failed);
    assert!(too_small.error().is_some());

    // Growing past the bound later fails it too.
    let fits = CuratorCache::builder(c, &root).max_nodes(7).start().unwrap();
    assert!(fits.wait_initialized_timeout(WITHIN).await.unwrap());
    put(c, &format!("{root}/n5"), &[]).await;
    put(c, &format!("{root}/n6"), &[]).await;
    let mut states = fits.states();
    tokio::time::timeout(WITHIN, states.wait_for(|s| *s == CacheState::Failed)).await.unwrap().unwrap();
    assert!(matches!(fits.error(), Some(Error::LimitExceeded { limit: 7, .. })), "{:?}", fits.error());
    assert!(fits.size() <= 7);
}

#[tokio::test]
async fn bad_input_is_a_typed_error() {
    let (_server, clients) = server_and_clients(1).await;
    let c = &clients[0];
    let err = CuratorCache::start(c, "no-slash").unwrap_err();
    assert!(matches!(&err, Error::InvalidPath { path, .. } if path == "no-slash"), "{err:?}");
    // The builder is infallible (as the client's): its `start` names the bad path.
    let err = CuratorCache::builder(c, "no-slash").max_depth(1).start().unwrap_err();
    assert!(matches!(&err, Error::InvalidPath { path, .. } if path == "no-slash"), "{err:?}");
    let err = CuratorCache::builder(c, "/x").max_nodes(0).start().unwrap_err();
    assert!(matches!(&err, Error::InvalidArgument { name: "max_nodes", .. }), "{err:?}");
    c.close().await;
    let err = CuratorCache::start(c, "/x").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Closed);
}

#[tokio::test]
async fn wait_initialized_returns_within_its_timeout_while_the_server_is_unreachable() {
    let (server, _clients) = server_and_clients(0).await;
    let proxy = FaultProxy::start(&server.connect_string()).await.unwrap();
    let c = client_with_timeouts(&proxy.connect_string(), Duration::from_secs(4), Duration::from_secs(2)).await;
    proxy.set_mode(ProxyMode::Blackhole);
    let root = unique_path("cache-deadline");
    let cache = CuratorCache::start(&c, &root).unwrap();
    let timeout = Duration::from_millis(300);
    let start = Instant::now();
    let initialized = cache.wait_initialized_timeout(timeout).await.expect("a time-out is not an error");
    let took = start.elapsed();
    assert!(!initialized, "initialized with the server unreachable");
    assert!(took < timeout + Duration::from_millis(200), "returned after {took:?}");
    assert!(matches!(cache.state(), CacheState::Loading), "{:?}", cache.state());
    proxy.set_mode(ProxyMode::Pass);
    assert!(cache.wait_initialized_timeout(WITHIN).await.unwrap());
    cache.close().await;
}

#[tokio::test]
async fn close_stops_following_the_server_and_drop_outside_a_runtime_never_panics() {
    let (server, clients) = server_and_clients(1).await;
    let c = &clients[0];
    let root = unique_path("cache-close");
    put(c, &root, b"1").await;
    let cache = CuratorCache::start(c, &root).unwrap();
    assert!(cache.wait_initialized_timeout(WITHIN).await.unwrap());
    cache.close().await;
    assert_eq!(cache.state(), CacheState::Closed);
    set(c, &root, b"2").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(cache.entry(&root).unwrap().data(), b"1", "a closed cache keeps its last contents");

    let other = client(&server.connect_string()).await;
    let dropped = CuratorCache::start(&other, &root).unwrap();
    assert!(dropped.wait_initialized_timeout(WITHIN).await.unwrap());
    std::thread::spawn(move || drop(dropped)).join().expect("dropping off the runtime does not panic");
}

/// Clones share one cache: a change made after one clone is dropped still reaches the others;
/// closing through a clone closes it for all.
#[tokio::test]
async fn a_cache_clone_shares_one_cache_until_the_last_drop() {
    let (_server, clients) = server_and_clients(1).await;
    let c = &clients[0];
    let root = unique_path("cache-clones");
    put(c, &root, b"r").await;
    let cache = CuratorCache::start(c, &root).unwrap();
    let clone = cache.clone();
    let third = cache.clone();
    assert!(clone.wait_initialized_timeout(WITHIN).await.unwrap());
    let mut events = clone.events();

    drop(cache);
    assert_ne!(clone.state(), CacheState::Closed, "dropping one clone leaves the cache running");
    put(c, &format!("{root}/a"), b"1").await;
    // A new subscriber first gets the cache's contents (the root, `Initialized`).
    loop {
        match next_event(&mut events).await {
            CacheEvent::Created(entry) if entry.path() == format!("{root}/a") => break,
            CacheEvent::Created(_) | CacheEvent::Initialized => {}
            other => panic!("expected the creation of {root}/a, got {other:?}"),
        }
    }
    assert_eq!(third.entry(&format!("{root}/a")).map(|e| e.data().to_vec()), Some(b"1".to_vec()), "one tree");

    third.close().await;
    assert_eq!(clone.state(), CacheState::Closed, "closing through one clone closes it for all");
}
