//! The convergence checker: writers create, change and delete across a tree while the cache's link
//! is cut or blackholed, its session expired, its server restarted or an ensemble member killed;
//! after quiescence the cache equals a fresh listing of the server and the replay of its events
//! equals the cache.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use zk_curator::cache::{CacheState, CuratorCache};
use zk_curator::testing::{expire_session, FaultProxy, ProxyMode, TestingCluster};
use zk_curator::{CreateMode, CuratorClient};

use super::{assert_converges, put, Replay};
use crate::support::{self, client, client_with_timeouts, init_tracing, join, owned_server, seed, server, unique_path};

const CONVERGE_WITHIN: Duration = Duration::from_secs(40);

/// Writes at random across `root/{a..d}/{0..3}` until `stop`: creates what is missing (data of a
/// few bytes), changes or deletes what is there, and adds sequential nodes under `root/s`. Errors (the node changed meanwhile, the connection
/// is down) are part of the game.
async fn write_at_random(writer: CuratorClient, root: String, rng_seed: u64, stop: Arc<AtomicBool>) -> usize {
    let mut rng = StdRng::seed_from_u64(rng_seed);
    let mut writes = 0;
    while !stop.load(Ordering::SeqCst) {
        let dir = format!("{root}/{}", ["a", "b", "c", "d"][rng.gen_range(0..4)]);
        let path = if rng.gen_bool(0.2) { dir.clone() } else { format!("{dir}/{}", rng.gen_range(0..4)) };
        let data = format!("{}", rng.r#gen::<u32>()).into_bytes();
        let result = match rng.gen_range(0..4) {
            // A node nobody touches again: a change the cache misses is never healed by a later one.
            3 => writer
                .create(&format!("{root}/s/n-"))
                .mode(CreateMode::PersistentSequential)
                .creating_parents_if_needed()
                .timeout(Duration::from_secs(2))
                .await
                .map(drop),
            0 => writer
                .create(&path)
                .data(data)
                .creating_parents_if_needed()
                .timeout(Duration::from_secs(2))
                .await
                .map(drop),
            1 => writer.set_data(&path, data).timeout(Duration::from_secs(2)).await.map(drop),
            _ => writer.delete(&path).timeout(Duration::from_secs(2)).await.map(drop),
        };
        writes += usize::from(result.is_ok());
        tokio::time::sleep(Duration::from_millis(rng.gen_range(0..5))).await;
    }
    writes
}

/// Starts a cache of a fresh root through `cache_client`, runs writers through `writer` while
/// `fault` runs (and a little after), then checks convergence against the server at `observe`.
async fn converges_after<F, Fut>(cache_client: &CuratorClient, writer: &CuratorClient, observe: &str, fault: F)
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let root = unique_path("cache-converge");
    put(writer, &root, b"root").await;
    let cache = CuratorCache::start(cache_client, &root).unwrap();
    let mut events = cache.events();
    let mut replay = Replay::default();
    assert!(cache.wait_initialized_timeout(CONVERGE_WITHIN).await.unwrap());
    let mut states = cache.states();
    let mut recorder = cache.states();
    let seen = crate::support::spawn(async move {
        let mut seen = Vec::new();
        while recorder.changed().await.is_ok() {
            let state = *recorder.borrow_and_update();
            seen.push(state);
            if state.is_terminal() {
                break;
            }
        }
        seen
    });

    let stop = Arc::new(AtomicBool::new(false));
    let rng_seed = seed("CACHE_CONVERGE_SEED");
    let writers: Vec<_> = (0..2)
        .map(|i| crate::support::spawn(write_at_random(writer.clone(), root.clone(), rng_seed + i, stop.clone())))
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    fault().await;
    // Writes go on while the cache re-syncs.
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::SeqCst);
    let mut writes = 0;
    for w in writers {
        writes += join("a writer", Duration::from_secs(30), w).await;
    }
    assert!(writes > 0, "the writers wrote");
    assert_ne!(*states.borrow_and_update(), CacheState::Failed, "{:?}", cache.error());
    assert_converges(&cache, &mut events, &mut replay, observe, CONVERGE_WITHIN).await;
    cache.close().await;
    let seen = join("the state recorder", Duration::from_secs(5), seen).await;
    assert!(seen.contains(&CacheState::Resyncing), "the fault reached the cache, which re-synced: {seen:?}");
}

#[tokio::test]
async fn the_cache_converges_after_its_link_is_cut() {
    init_tracing();
    let server = server().await;
    let proxy = FaultProxy::start(&server.connect_string()).await.unwrap();
    let cache_client =
        client_with_timeouts(&proxy.connect_string(), Duration::from_secs(10), Duration::from_secs(2)).await;
    let writer = client(&server.connect_string()).await;
    converges_after(&cache_client, &writer, &server.connect_string(), || async {
        // Latency, one more fault: the link is slow each way before the cut and from then on,
        // while the cache re-syncs and until it has converged (events and reads arrive late, in
        // order).
        let set = support::latency::set_random(&proxy, &mut rand::thread_rng(), 300);
        println!("latency {}", support::latency::describe(&set));
        tokio::time::sleep(Duration::from_millis(300)).await;
        proxy.set_mode(ProxyMode::Cut);
        tokio::time::sleep(Duration::from_millis(1200)).await;
        proxy.set_mode(ProxyMode::Pass);
    })
    .await;
}

#[tokio::test]
async fn the_cache_converges_after_a_blackhole_longer_than_its_session() {
    init_tracing();
    let server = server().await;
    let proxy = FaultProxy::start(&server.connect_string()).await.unwrap();
    let cache_client =
        client_with_timeouts(&proxy.connect_string(), Duration::from_secs(2), Duration::from_secs(1)).await;
    let writer = client(&server.connect_string()).await;
    let old = cache_client.session_id();
    converges_after(&cache_client, &writer, &server.connect_string(), || async {
        proxy.set_mode(ProxyMode::Blackhole);
        tokio::time::sleep(Duration::from_secs(4)).await;
        proxy.set_mode(ProxyMode::Pass);
        crate::support::session_replaced(&cache_client, old).await;
    })
    .await;
}

#[tokio::test]
async fn the_cache_converges_after_its_session_is_expired() {
    init_tracing();
    let server = server().await;
    let cache_client = client(&server.connect_string()).await;
    let writer = client(&server.connect_string()).await;
    let old = cache_client.session_id();
    converges_after(&cache_client, &writer, &server.connect_string(), || async {
        expire_session(&server.connect_string(), &cache_client).await.unwrap();
        crate::support::session_replaced(&cache_client, old).await;
    })
    .await;
}

#[tokio::test]
async fn the_cache_converges_after_its_server_restarts() {
    init_tracing();
    let mut server = owned_server().await;
    let connect = server.connect_string();
    let cache_client = client(&connect).await;
    let writer = client(&connect).await;
    let server_ref = &mut server;
    converges_after(&cache_client, &writer, &connect, || async move {
        server_ref.restart().await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn the_cache_converges_after_its_ensemble_leader_is_killed() {
    init_tracing();
    let mut cluster = TestingCluster::start(3).await.unwrap();
    // Killing the leader sends every member into an election: every connection, the cache's
    // included, drops and fails over.
    let connect = cluster.connect_string();
    let cache_client = client(&connect).await;
    let writer = client(&connect).await;
    let cluster_ref = &mut cluster;
    converges_after(&cache_client, &writer, &connect, || async move {
        let leader = cluster_ref.leader().await.expect("a leader");
        cluster_ref.kill(leader).await.unwrap();
        cluster_ref.wait_for_quorum(Duration::from_secs(30)).await.unwrap();
    })
    .await;
}
