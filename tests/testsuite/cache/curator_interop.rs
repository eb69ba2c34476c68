//! A real Curator process on the same tree: its writes (protected, sequential and TTL nodes
//! included) are seen like ours, and a Curator `CuratorCache` and ours end with the same state.

use std::collections::BTreeMap;
use std::time::Duration;

use zk_curator::cache::CuratorCache;
use zk_curator::CreateMode;

use super::{assert_converges, del, put, set, Replay};
use crate::support::curator_peer::CuratorPeer;
use crate::support::{init_tracing, server_and_clients, unique_path};

const WITHIN: Duration = Duration::from_secs(30);

fn created(answer: &str) -> String {
    answer.strip_prefix("WROTE ").unwrap_or_else(|| panic!("bad answer {answer}")).to_string()
}

#[tokio::test]
async fn curator_writes_protected_sequential_and_ttl_nodes_included_are_seen_like_ours() {
    init_tracing();
    let (server, clients) = server_and_clients(1).await;
    let c = &clients[0];
    let root = unique_path("cache-curator-writer");
    put(c, &root, b"").await;
    let cache = CuratorCache::start(c, &root).unwrap();
    let mut events = cache.events();
    let mut replay = Replay::default();
    assert!(cache.wait_initialized_timeout(WITHIN).await.unwrap());

    let mut peer = CuratorPeer::start(&server.connect_string()).await;
    let plain = created(&peer.cmd(&format!("cwrite persistent {root}/java/plain p")).await);
    let protected = created(&peer.cmd(&format!("cwrite protected {root}/java/lock- q")).await);
    let sequential = created(&peer.cmd(&format!("cwrite sequential {root}/java/seq- s")).await);
    let ttl = created(&peer.cmd(&format!("cwrite ttl {root}/java/ttl t")).await);
    assert!(zk_curator::framework::is_protected(protected.rsplit('/').next().unwrap()), "{protected}");
    peer.cmd(&format!("cset {plain} p2")).await;
    // Ours, of the same kinds.
    c.create(&format!("{root}/rust/seq-"))
        .mode(CreateMode::PersistentSequential)
        .creating_parents_if_needed()
        .await
        .unwrap();
    c.create(&format!("{root}/rust/lock-"))
        .mode(CreateMode::EphemeralSequential)
        .with_protection()
        .creating_parents_if_needed()
        .await
        .unwrap();
    c.create(&format!("{root}/rust/ttl")).mode(CreateMode::PersistentWithTtl(Duration::from_secs(60))).await.unwrap();
    assert_converges(&cache, &mut events, &mut replay, &server.connect_string(), WITHIN).await;
    for (path, data) in [(&plain, b"p2".as_slice()), (&protected, b"q"), (&sequential, b"s"), (&ttl, b"t")] {
        assert_eq!(cache.entry(path).unwrap_or_else(|| panic!("{path} cached")).data(), data, "{path}");
    }
    assert_eq!(cache.children(&format!("{root}/java")).len(), 4);
    assert_eq!(cache.children(&format!("{root}/rust")).len(), 3);
    // Curator's session ends: its protected ephemeral node goes, and the cache sees it go.
    peer.cmd(&format!("cdelete {plain}")).await;
    assert_eq!(peer.cmd("quit").await, "BYE");
    crate::support::eventually(WITHIN, "Curator's protected node leaves the cache", || async {
        cache.entry(&protected).is_none()
    })
    .await;
    assert_converges(&cache, &mut events, &mut replay, &server.connect_string(), WITHIN).await;
    assert!(cache.entry(&plain).is_none());
    cache.close().await;
}

#[tokio::test]
async fn a_curator_cache_and_ours_end_with_the_same_state() {
    init_tracing();
    let (server, clients) = server_and_clients(1).await;
    let c = &clients[0];
    let root = unique_path("cache-curator-cache");
    put(c, &format!("{root}/a"), b"1").await;
    let mut peer = CuratorPeer::start(&server.connect_string()).await;
    peer.cmd(&format!("cache theirs {root}")).await;
    let cache = CuratorCache::start(c, &root).unwrap();
    assert!(cache.wait_initialized_timeout(WITHIN).await.unwrap());
    for i in 0..20 {
        match i % 4 {
            0 => put(c, &format!("{root}/r{i}/x"), format!("{i}").as_bytes()).await,
            1 => drop(peer.cmd(&format!("cwrite persistent {root}/j{i}/y {i}")).await),
            2 => set(c, &format!("{root}/a"), format!("{i}").as_bytes()).await,
            _ => drop(peer.cmd(&format!("cset {root}/a j{i}")).await),
        }
    }
    del(c, &format!("{root}/r0/x")).await;
    peer.cmd(&format!("cdelete {root}/j1/y")).await;
    let ours = || {
        cache
            .snapshot()
            .into_iter()
            .map(|(p, e)| (p, e.data().iter().map(|b| format!("{b:02x}")).collect::<String>()))
            .collect::<BTreeMap<_, _>>()
    };
    let mut theirs = BTreeMap::new();
    let mut same = false;
    for _ in 0..100 {
        let dump = peer.cmd("cachedump theirs").await;
        theirs = dump
            .strip_prefix("CACHE ")
            .unwrap()
            .split(';')
            .filter(|s| !s.is_empty())
            .map(|kv| {
                let (k, v) = kv.split_once('=').unwrap();
                (k.to_string(), v.to_string())
            })
            .collect::<BTreeMap<_, _>>();
        if theirs == ours() {
            same = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(same, "Curator's cache {theirs:?}\n ours {:?}", ours());
    assert_eq!(cache.entry(&format!("{root}/a")).unwrap().data(), b"j19");
    cache.close().await;
}
