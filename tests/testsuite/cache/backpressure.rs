//! A subscriber that reads slowly: its queue is bounded (`max_buffered_events`), it is told how
//! many events it missed, and the replay after that notice puts it in step with the cache (and so
//! with the server) again. And the events as a `Stream`, drained with `StreamExt` combinators.

use std::future::ready;
use std::ops::Range;
use std::time::Duration;

use futures::StreamExt;
use zk_curator::cache::{CacheEvent, CuratorCache};

use super::{assert_converges, put, server_tree, set, written, Replay};
use crate::support::{eventually, observer, server_and_clients, unique_path};

/// A hang guard, never a performance bound.
const WITHIN: Duration = Duration::from_secs(20);

/// Creates `root/cNNNNN` for each number in `range`, in one transaction (one event each).
async fn create_children(connect: &str, root: &str, range: Range<usize>) {
    let zk = observer(connect).await;
    let options = zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    let mut creates = zk.new_multi_writer();
    for i in range {
        creates.add_create(&format!("{root}/c{i:05}"), b"d", &options).unwrap();
    }
    creates.commit().await.unwrap();
}

#[tokio::test]
async fn a_slow_subscriber_of_a_busy_tree_is_told_how_many_events_it_missed_then_replays_to_the_server_state() {
    const BOUND: usize = 16;
    const BURST: usize = 200;
    let (server, clients) = server_and_clients(1).await;
    let c = &clients[0];
    let connect = server.connect_string();
    let root = unique_path("cache-slow-subscriber");
    put(c, &root, b"r").await;
    let cache = CuratorCache::builder(c, &root).max_buffered_events(BOUND).start().unwrap();
    assert!(cache.wait_initialized_timeout(WITHIN).await.unwrap());
    let mut events = cache.events();
    let mut replay = Replay::default();

    // Up to the bound, a subscriber that reads late misses nothing.
    create_children(&connect, &root, 0..BOUND).await;
    eventually(WITHIN, "the first children cached", || async { cache.size() == 1 + BOUND }).await;
    replay.drain(&mut events);
    assert!(replay.lags.is_empty(), "no lag within the bound: {:?}", replay.lags);
    assert_eq!(written(&replay.nodes), written(&server_tree(&connect, &root).await));

    // Past it: each child's creation is one event, none of which is kept for the subscriber (the
    // cache has applied them all once its size says so: events go out under the same lock).
    create_children(&connect, &root, BOUND..BOUND + BURST).await;
    eventually(WITHIN, "the burst cached", || async { cache.size() == 1 + BOUND + BURST }).await;
    let notice = tokio::time::timeout(WITHIN, events.next()).await.expect("in time").expect("open");
    assert_eq!(notice, CacheEvent::Lagged { missed: BURST as u64 }, "told exactly how many events it missed");
    replay.apply(notice);
    // Then the cache's contents, as a new subscriber's stream begins, and nothing else.
    replay.drain(&mut events);
    assert!(replay.inconsistencies.is_empty(), "{:?}", replay.inconsistencies);
    assert_eq!(replay.initialized, 1, "the replay ends with Initialized");
    assert_eq!(replay.nodes.len(), 1 + BOUND + BURST);
    assert_eq!(written(&replay.nodes), written(&server_tree(&connect, &root).await), "in step with the server");

    // And it follows the cache from there.
    set(c, &format!("{root}/c00000"), b"after").await;
    assert_converges(&cache, &mut events, &mut replay, &connect, WITHIN).await;
    assert_eq!(replay.lags, [BURST as u64], "one lag");
    cache.close().await;
}

#[tokio::test]
async fn cache_events_drain_as_a_stream_with_stream_combinators() {
    let (_server, clients) = server_and_clients(1).await;
    let c = &clients[0];
    let root = unique_path("cache-stream");
    put(c, &format!("{root}/a"), b"1").await;
    put(c, &format!("{root}/b"), b"1").await;
    let cache = CuratorCache::start(c, &root).unwrap();
    assert!(cache.wait_initialized_timeout(WITHIN).await.unwrap());
    let mut events = cache.events();

    let primed = events
        .by_ref()
        .take_while(|e| ready(*e != CacheEvent::Initialized))
        .filter_map(|e| ready(e.path().map(str::to_string)))
        .collect::<Vec<_>>();
    let primed = tokio::time::timeout(WITHIN, primed).await.expect("the priming in time");
    assert_eq!(primed, [root.clone(), format!("{root}/a"), format!("{root}/b")]);

    set(c, &format!("{root}/b"), b"2").await;
    let changed = events.by_ref().filter_map(|e| {
        ready(match e {
            CacheEvent::Changed { new, data_changed: true, .. } => Some((new.path().to_string(), new.data().to_vec())),
            _ => None,
        })
    });
    let changed = tokio::time::timeout(WITHIN, std::pin::pin!(changed).next()).await.expect("the change in time");
    assert_eq!(changed, Some((format!("{root}/b"), b"2".to_vec())));

    cache.close().await;
    let rest = tokio::time::timeout(WITHIN, events.collect::<Vec<_>>()).await.expect("the stream ends with the cache");
    assert!(rest.is_empty(), "nothing after the change: {rest:?}");
}
