//! A cached node's stat follows the server's, the counters its children move included, in every
//! mode; events announce writes only (a parent whose children changed gets none, nor does a node
//! nobody wrote during a gap), and a `Changed` event says whether the data changed.

use std::time::Duration;

use zk_curator::cache::{CacheEntry, CacheEvent, CacheMode, CacheState, CuratorCache};
use zk_curator::testing::{FaultProxy, ProxyMode};
use zk_curator::CuratorClient;

use super::{del, put, set, Node, Replay};
use crate::support::{client, client_with_timeouts, init_tracing, observer, server, unique_path};

const WITHIN: Duration = Duration::from_secs(20);

/// Waits until every node `cache` holds has the server's data and stat ([`Node`]) and the cache
/// holds `expected` nodes; panics showing both after [`WITHIN`].
async fn stats_converge(cache: &CuratorCache, connect: &str, expected: usize) {
    let zk = observer(connect).await;
    let deadline = std::time::Instant::now() + WITHIN;
    loop {
        let mut mismatches = Vec::new();
        for (path, entry) in cache.snapshot() {
            let server = match zk.get_data(&path).await {
                Ok((data, stat)) => Some(Node {
                    data,
                    mzxid: stat.mzxid,
                    version: stat.version,
                    cversion: stat.cversion,
                    num_children: stat.num_children,
                    pzxid: stat.pzxid,
                }),
                Err(zookeeper_client::Error::NoNode) => None,
                Err(e) => panic!("read {path}: {e}"),
            };
            let cached = Node::of(&entry);
            if server.as_ref() != Some(&cached) {
                mismatches.push(format!("{path}: cached {cached:?}, server {server:?}"));
            }
        }
        if mismatches.is_empty() && cache.size() == expected {
            return;
        }
        if std::time::Instant::now() >= deadline {
            panic!(
                "the {:?} cache of {} did not converge within {WITHIN:?} ({} nodes, {expected} expected):\n{}",
                cache.mode(),
                cache.path(),
                cache.size(),
                mismatches.join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The events buffered in `events` now.
fn buffered(events: &mut zk_curator::cache::CacheEventStream) -> Vec<CacheEvent> {
    std::iter::from_fn(|| events.try_next()).collect()
}

/// The paths of the `Changed` events among `events`.
fn changed_paths(events: &[CacheEvent]) -> Vec<&str> {
    events.iter().filter(|e| matches!(e, CacheEvent::Changed { .. })).filter_map(CacheEvent::path).collect()
}

#[tokio::test]
async fn a_cached_parents_stat_follows_its_children_in_every_mode_without_an_event() {
    init_tracing();
    let server = server().await;
    let connect = server.connect_string();
    let c = client(&connect).await;
    let root = unique_path("cache-parent-stat");
    put(&c, &format!("{root}/a"), b"a").await;
    // A client per cache: ZooKeeper 3.8 keeps one watch mode per path and session
    // (ZOOKEEPER-4466), and the Node mode's watch is not the others'.
    let mut caches = Vec::new();
    for mode in [CacheMode::Node, CacheMode::Children, CacheMode::Tree] {
        let own = client(&connect).await;
        caches.push(CuratorCache::builder(&own, &root).mode(mode).start().unwrap());
    }
    let mut streams = Vec::new();
    for cache in &caches {
        assert!(cache.wait_initialized_timeout(WITHIN).await.unwrap());
        let mut events = cache.events();
        buffered(&mut events);
        streams.push(events);
    }
    // Children of the root (cached below Node mode) and of `a` (cached in Tree mode only: in
    // Children mode `a` is a leaf whose children are not cached, but whose stat is).
    for i in 0..3 {
        put(&c, &format!("{root}/c{i}"), b"c").await;
        put(&c, &format!("{root}/a/x{i}"), b"x").await;
    }
    let sizes = [1, 5, 8];
    for (cache, size) in caches.iter().zip(sizes) {
        stats_converge(cache, &connect, size).await;
        assert_eq!(cache.entry(&root).unwrap().stat().num_children, 4, "{:?}", cache.mode());
    }
    del(&c, &format!("{root}/c0")).await;
    del(&c, &format!("{root}/a/x0")).await;
    for (cache, size) in caches.iter().zip([1, 4, 6]) {
        stats_converge(cache, &connect, size).await;
    }
    for (cache, mut events) in caches.iter().zip(streams) {
        let events = buffered(&mut events);
        assert_eq!(changed_paths(&events), Vec::<&str>::new(), "{:?}: no node was written: {events:?}", cache.mode());
        cache.close().await;
    }
}

#[tokio::test]
async fn a_reconnect_announces_only_the_nodes_written_meanwhile_and_whether_their_data_changed() {
    init_tracing();
    let server = server().await;
    let connect = server.connect_string();
    let proxy = FaultProxy::start(&connect).await.unwrap();
    let cache_client: CuratorClient =
        client_with_timeouts(&proxy.connect_string(), Duration::from_secs(10), Duration::from_secs(2)).await;
    let writer = client(&connect).await;
    let root = unique_path("cache-reconnect-events");
    put(&writer, &root, b"root").await;
    let cache = CuratorCache::start(&cache_client, &root).unwrap();
    let mut events = cache.events();
    let mut replay = Replay::default();
    assert!(cache.wait_initialized_timeout(WITHIN).await.unwrap());
    // Children created while the cache follows: the root's stat moves (3 children).
    for i in 0..3 {
        put(&writer, &format!("{root}/c{i}"), b"same").await;
    }
    stats_converge(&cache, &connect, 4).await;
    replay.drain(&mut events);

    // A blip nobody writes during: no event at all.
    let mut states = cache.states();
    proxy.set_mode(ProxyMode::Cut);
    tokio::time::timeout(WITHIN, states.wait_for(|s| *s != CacheState::Synced)).await.unwrap().unwrap();
    proxy.set_mode(ProxyMode::Pass);
    assert!(cache.wait_synced_timeout(WITHIN).await.unwrap());
    let after_blip = buffered(&mut events);
    assert!(after_blip.is_empty(), "nothing was written during the blip, yet: {after_blip:?}");

    // A gap during which c0 is set to the same bytes, c1 to others and c3 is created (the root's
    // children change, its data does not).
    proxy.set_mode(ProxyMode::Cut);
    tokio::time::timeout(WITHIN, states.wait_for(|s| *s != CacheState::Synced)).await.unwrap().unwrap();
    set(&writer, &format!("{root}/c0"), b"same").await;
    set(&writer, &format!("{root}/c1"), b"other").await;
    put(&writer, &format!("{root}/c3"), b"new").await;
    proxy.set_mode(ProxyMode::Pass);
    assert!(cache.wait_synced_timeout(WITHIN).await.unwrap());
    let after_gap = buffered(&mut events);
    let changes: Vec<(&str, bool)> = after_gap
        .iter()
        .filter_map(|e| match e {
            CacheEvent::Changed { new, data_changed, .. } => Some((&new.path()[root.len()..], *data_changed)),
            _ => None,
        })
        .collect();
    assert_eq!(changes, [("/c0", false), ("/c1", true)], "{after_gap:?}");
    let created: Vec<&str> = after_gap
        .iter()
        .filter_map(|e| match e {
            CacheEvent::Created(entry) => Some(entry.path()),
            _ => None,
        })
        .collect();
    assert_eq!(created, [format!("{root}/c3")], "{after_gap:?}");
    for event in after_gap {
        replay.apply(event);
    }
    stats_converge(&cache, &connect, 5).await;
    super::assert_converges(&cache, &mut events, &mut replay, &connect, WITHIN).await;
    cache.close().await;
}

/// The next event, which must be a `Changed`: its old and new entries and `data_changed`.
async fn next_change(events: &mut zk_curator::cache::CacheEventStream) -> (CacheEntry, CacheEntry, bool) {
    match tokio::time::timeout(WITHIN, events.next()).await.expect("an event").expect("the stream") {
        CacheEvent::Changed { old, new, data_changed, .. } => (old, new, data_changed),
        other => panic!("not a change: {other:?}"),
    }
}

#[tokio::test]
async fn a_changed_event_says_whether_the_data_changed() {
    let server = server().await;
    let c = client(&server.connect_string()).await;
    let root = unique_path("cache-data-changed");
    put(&c, &root, b"v1").await;
    let cache = CuratorCache::builder(&c, &root).mode(CacheMode::Node).start().unwrap();
    let mut events = cache.events();
    assert!(cache.wait_initialized_timeout(WITHIN).await.unwrap());
    buffered(&mut events);
    set(&c, &root, b"v1").await;
    let (old, new, data_changed) = next_change(&mut events).await;
    assert!(!data_changed, "the same bytes: {old:?} -> {new:?}");
    assert_eq!((old.stat().version, new.stat().version), (0, 1));
    set(&c, &root, b"v2").await;
    let (_, new, data_changed) = next_change(&mut events).await;
    assert!(data_changed, "other bytes: {new:?}");
    assert_eq!(new.data(), b"v2");
    cache.close().await;
}
