//! The holes of Curator's caches, reproduced against ours: a namespaced client (Curator GitHub
//! #1259), more children than one 1 MiB listing holds (CURATOR-690), a missing path
//! (CURATOR-240/312), deleted parents re-created (CURATOR-319), a reaped container root
//! (CURATOR-388), a child gone during the load (CURATOR-476), and a node it may not read.

use std::time::Duration;

use zk_curator::cache::{CacheState, CuratorCache};
use zk_curator::testing::{Direction, FaultProxy, Latency, ProxyMode, TestingServer};
use zk_curator::{Acl, CreateMode, Id, Permissions};

use super::{assert_converges, del, put, set, Replay};
use crate::support::{
    client, client_with_timeouts, eventually, exists, init_tracing, namespaced_client, observer, server,
    server_and_clients, server_with, unique_path,
};

const WITHIN: Duration = Duration::from_secs(30);

#[tokio::test]
async fn a_namespaced_client_caches_its_own_paths_without_the_namespace() {
    init_tracing();
    let server = server().await;
    let ns = format!("cache-ns-{}", &unique_path("x")[14..]);
    let c = namespaced_client(&server.connect_string(), &ns).await;
    put(&c, "/cfg/a", b"1").await;
    let cache = CuratorCache::start(&c, "/cfg").unwrap();
    let mut events = cache.events();
    let mut replay = Replay::default();
    assert!(cache.wait_initialized_timeout(WITHIN).await.unwrap());
    assert_eq!(cache.entry("/cfg/a").unwrap().data(), b"1");
    put(&c, "/cfg/b", b"2").await;
    set(&c, "/cfg/a", b"3").await;
    // The server's tree under the namespace, seen through a chroot: the same paths.
    let chrooted = format!("{}/{ns}", server.connect_string());
    assert_converges(&cache, &mut events, &mut replay, &chrooted, WITHIN).await;
    assert_eq!(cache.children("/cfg"), vec!["a".to_string(), "b".to_string()]);

    // The namespace's root itself.
    let whole = CuratorCache::start(&c, "/").unwrap();
    assert!(whole.wait_initialized_timeout(WITHIN).await.unwrap());
    assert_eq!(whole.children("/"), vec!["cfg".to_string()]);
    assert_eq!(whole.entry("/cfg/b").unwrap().data(), b"2");
    whole.close().await;
    cache.close().await;
}

#[tokio::test]
async fn a_missing_root_is_never_created_fills_when_it_appears_and_empties_when_deleted() {
    let (server, clients) = server_and_clients(1).await;
    let c = &clients[0];
    let parent = unique_path("cache-missing");
    let root = format!("{parent}/root");
    let cache = CuratorCache::start(c, &root).unwrap();
    let mut events = cache.events();
    let mut replay = Replay::default();
    assert!(cache.wait_initialized_timeout(WITHIN).await.unwrap());
    assert_eq!(cache.size(), 0);
    assert_eq!(cache.state(), CacheState::Synced);
    let zk = observer(&server.connect_string()).await;
    assert!(!exists(&zk, &parent).await, "the cache created nothing (CURATOR-240/312)");

    put(c, &format!("{root}/a/b"), b"x").await;
    eventually(WITHIN, "the new tree is cached", || async { cache.entry(&format!("{root}/a/b")).is_some() }).await;
    del(c, &format!("{root}/a/b")).await;
    del(c, &format!("{root}/a")).await;
    del(c, &root).await;
    assert_converges(&cache, &mut events, &mut replay, &server.connect_string(), WITHIN).await;
    assert_eq!(cache.size(), 0);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!exists(&zk, &root).await, "deleted parents are not re-created (CURATOR-319)");
    cache.close().await;
    assert!(!exists(&zk, &root).await);
}

#[tokio::test]
async fn a_reaped_container_root_empties_the_cache_which_follows_its_successor() {
    init_tracing();
    let server: TestingServer =
        server_with(TestingServer::builder().owned().container_check_interval(Duration::from_millis(200))).await;
    let c = client(&server.connect_string()).await;
    let root = unique_path("cache-container");
    c.create(&root).mode(CreateMode::Container).creating_parents_if_needed().await.unwrap();
    put(&c, &format!("{root}/only"), b"1").await;
    let cache = CuratorCache::start(&c, &root).unwrap();
    let mut events = cache.events();
    let mut replay = Replay::default();
    assert!(cache.wait_initialized_timeout(WITHIN).await.unwrap());
    assert_eq!(cache.size(), 2);
    del(&c, &format!("{root}/only")).await;
    let zk = observer(&server.connect_string()).await;
    eventually(WITHIN, "the server reaps the empty container", || async { !exists(&zk, &root).await }).await;
    eventually(WITHIN, "the cache empties", || async { cache.size() == 0 }).await;
    assert_eq!(cache.state(), CacheState::Synced, "a reaped root does not stop the cache (CURATOR-388)");
    c.create(&root).mode(CreateMode::Container).await.unwrap();
    put(&c, &format!("{root}/next"), b"2").await;
    assert_converges(&cache, &mut events, &mut replay, &server.connect_string(), WITHIN).await;
    assert_eq!(cache.entry(&format!("{root}/next")).unwrap().data(), b"2");
    cache.close().await;
}

/// CURATOR-476 and after: children deleted while the cache loads, 50 deletes in flight at a time,
/// neither keep it from initialising nor leave any of them cached; it converges on the 1,500 left,
/// its parent's stat included.
#[tokio::test]
async fn children_deleted_in_bursts_during_the_load_are_never_kept() {
    cache_loads_while_every_other_child_goes(50).await;
}

/// The same with one delete at a time: the cache initialises and converges on what is left, the
/// parent's stat (re-read after each event batch) equal to the server's once the deletes stop.
#[tokio::test]
async fn children_deleted_one_at_a_time_during_the_load_are_never_kept() {
    cache_loads_while_every_other_child_goes(1).await;
}

/// A cache starts on 3,000 children while every other one is deleted, `in_flight` deletes at a
/// time: it initialises (CURATOR-476) and converges on the 1,500 left.
async fn cache_loads_while_every_other_child_goes(in_flight: usize) {
    let (server, clients) = server_and_clients(1).await;
    let c = &clients[0];
    let root = unique_path("cache-load-race");
    let zk = observer(&server.connect_string()).await;
    let deleter = observer(&server.connect_string()).await;
    put(c, &root, b"").await;
    let options = zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    let paths: Vec<String> = (0..3000).map(|i| format!("{root}/c{i:05}")).collect();
    let creates: Vec<_> = paths.iter().map(|p| zk.create(p, b"d", &options)).collect();
    for create in creates {
        create.await.unwrap();
    }
    let doomed: Vec<String> = paths.iter().step_by(2).cloned().collect();
    let deletes = crate::support::spawn(async move {
        for batch in doomed.chunks(in_flight) {
            let sent: Vec<_> = batch.iter().map(|p| deleter.delete(p, None)).collect();
            for delete in sent {
                delete.await.unwrap();
            }
        }
    });
    let cache = CuratorCache::start(c, &root).unwrap();
    let mut events = cache.events();
    let mut replay = Replay::default();
    assert!(cache.wait_initialized_timeout(WITHIN).await.expect("initialised although children went (CURATOR-476)"));
    // A hang bound: one delete at a time, sharing this test's thread with the cache, the whole
    // test took up to 95 s in a full CI run (under nextest's 300 s limit).
    crate::support::join("the deletes", Duration::from_secs(240), deletes).await;
    assert_converges(&cache, &mut events, &mut replay, &server.connect_string(), WITHIN).await;
    assert_eq!(cache.size(), 1 + 1500);
    cache.close().await;
}

/// The cache's link is cut while it loads (replies are slowed so that the load spans the cut)
/// and children go meanwhile, 50 deletes at a time, before, during and after the cut: the load
/// fails or ends across the gap, the watch is armed again (zookeeper-client does not set a
/// persistent watch again when it reconnects a session), and the cache converges on what is left.
#[tokio::test]
async fn children_deleted_while_the_load_is_cut_off_are_never_kept() {
    init_tracing();
    let server = server().await;
    let proxy = FaultProxy::start(&server.connect_string()).await.unwrap();
    proxy.set_direction_latency(
        Direction::ToClient,
        Latency::uniform(Duration::from_millis(30), Duration::from_millis(90)),
    );
    let c = client_with_timeouts(&proxy.connect_string(), Duration::from_secs(10), Duration::from_secs(2)).await;
    let root = unique_path("cache-load-cut");
    let zk = observer(&server.connect_string()).await;
    let deleter = observer(&server.connect_string()).await;
    put(&client(&server.connect_string()).await, &root, b"").await;
    let options = zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    let paths: Vec<String> = (0..3000).map(|i| format!("{root}/c{i:05}")).collect();
    // The raw clients' calls are tried again after a connection error (a loaded machine): a
    // transaction that applied is then `NodeExists`, a delete that applied `NoNode`.
    for chunk in paths.chunks(1000) {
        loop {
            let mut creates = zk.new_multi_writer();
            for path in chunk {
                creates.add_create(path, b"d", &options).unwrap();
            }
            match creates.commit().await {
                Ok(_)
                | Err(zookeeper_client::MultiWriteError::OperationFailed {
                    source: zookeeper_client::Error::NodeExists,
                    ..
                }) => break,
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }
    let doomed: Vec<String> = paths.iter().step_by(2).cloned().collect();
    let cache = CuratorCache::start(&c, &root).unwrap();
    let mut events = cache.events();
    let mut replay = Replay::default();
    let deletes = crate::support::spawn(async move {
        for batch in doomed.chunks(50) {
            let sent: Vec<_> = batch.iter().map(|p| (p, deleter.delete(p, None))).collect();
            for (path, delete) in sent {
                let mut deleted = delete.await;
                while !matches!(deleted, Ok(()) | Err(zookeeper_client::Error::NoNode)) {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    deleted = deleter.delete(path, None).await;
                }
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(!cache.is_initialized(), "the cut comes while the cache loads");
    proxy.set_mode(ProxyMode::Cut);
    tokio::time::sleep(Duration::from_millis(300)).await;
    proxy.set_mode(ProxyMode::Pass);
    proxy.set_direction_latency(Direction::ToClient, Latency::NONE);
    assert!(cache.wait_initialized_timeout(WITHIN).await.expect("a cache after the cut"), "initialised after the cut");
    crate::support::join("the deletes", Duration::from_secs(120), deletes).await;
    assert_converges(&cache, &mut events, &mut replay, &server.connect_string(), WITHIN).await;
    assert_eq!(cache.size(), 1 + 1500);
    cache.close().await;
}

#[tokio::test]
async fn a_hundred_thousand_children_load_past_the_one_mib_listing_and_stay_current() {
    init_tracing();
    let (server, clients) = server_and_clients(1).await;
    let c = &clients[0];
    let root = unique_path("cache-wide");
    put(c, &root, b"").await;
    let zk = observer(&server.connect_string()).await;
    let options = zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    const N: usize = 100_000;
    // Names of 16 bytes: one listing of them is over 1.9 MiB (each name also carries a length).
    // Made (and removed) 2,000 to a transaction: the server's work per request, not the cache's,
    // is what would dominate this test otherwise.
    for chunk in (0..N).collect::<Vec<_>>().chunks(2000) {
        let mut creates = zk.new_multi_writer();
        for i in chunk {
            creates.add_create(&format!("{root}/child-{i:010}"), b"", &options).unwrap();
        }
        creates.commit().await.unwrap();
    }
    let cache = CuratorCache::start(c, &root).unwrap();
    let loading = std::time::Instant::now();
    assert!(cache
        .wait_initialized_timeout(Duration::from_secs(120))
        .await
        .expect("100,000 children load (CURATOR-690)"));
    println!("loaded {N} children in {:?}", loading.elapsed());
    assert_eq!(cache.size(), N + 1);
    assert_eq!(cache.children(&root).len(), N);
    let last = format!("{root}/child-{:010}", N - 1);
    set(c, &last, b"changed").await;
    eventually(WITHIN, "a change is seen", || async { cache.entry(&last).is_some_and(|e| e.data() == b"changed") })
        .await;
    cache.close().await;
    // A session of its own for the clean-up: on a loaded machine the first one can expire while
    // the load runs (it has nothing to do meanwhile but ping, with the test server's short
    // session timeout).
    let zk = observer(&server.connect_string()).await;
    for chunk in (0..N).collect::<Vec<_>>().chunks(2000) {
        let mut deletes = zk.new_multi_writer();
        for i in chunk {
            deletes.add_delete(&format!("{root}/child-{i:010}"), None).unwrap();
        }
        deletes.commit().await.unwrap();
    }
}

#[tokio::test]
async fn a_node_it_may_not_read_is_reported_and_the_rest_is_cached() {
    let (server, clients) = server_and_clients(1).await;
    let c = &clients[0];
    let root = unique_path("cache-acl");
    put(c, &format!("{root}/open"), b"1").await;
    let no_read = vec![Acl::new(Permissions::WRITE | Permissions::DELETE | Permissions::ADMIN, Id::anyone())];
    c.create(&format!("{root}/secret")).data(b"s".to_vec()).with_acl(no_read).await.unwrap();
    let cache = CuratorCache::start(c, &root).unwrap();
    assert!(cache.wait_initialized_timeout(WITHIN).await.unwrap());
    assert_eq!(cache.state(), CacheState::Synced);
    assert_eq!(cache.unreadable(), vec![format!("{root}/secret")]);
    assert!(cache.entry(&format!("{root}/open")).is_some());
    assert!(cache.entry(&format!("{root}/secret")).is_none());
    // Changes keep flowing.
    put(c, &format!("{root}/later"), b"2").await;
    eventually(WITHIN, "a later node is cached", || async { cache.entry(&format!("{root}/later")).is_some() }).await;
    let _ = server;
    cache.close().await;
}
