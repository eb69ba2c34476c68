//! A cache whose runtime shuts down under it: nothing follows the server any more, so it must not
//! go on saying `Synced`, and its subscribers' streams end instead of waiting forever.

use std::time::Duration;

use zk_curator::cache::{CacheState, CuratorCache};
use zk_curator::CuratorClient;

use super::put;
use crate::support;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("a runtime")
}

#[test]
fn a_cache_whose_runtime_shut_down_is_closed_and_its_streams_end() {
    let host = runtime();
    let server = host.block_on(support::server());
    let connect = server.connect_string();
    let root = support::unique_path("cache-runtime-gone");

    let app = runtime();
    let (client, cache): (CuratorClient, CuratorCache) = app.block_on(async {
        let client = support::client(&connect).await;
        put(&client, &root, b"1").await;
        let cache = CuratorCache::start(&client, &root).unwrap();
        assert!(cache.wait_initialized_timeout(Duration::from_secs(30)).await.unwrap());
        (client, cache)
    });
    assert_eq!(cache.state(), CacheState::Synced);
    let mut events = cache.events();
    let states = cache.states();
    drop(app);

    assert!(
        cache.state().is_terminal(),
        "the task that followed the server is gone, yet the state is {:?}",
        cache.state()
    );
    assert!(states.borrow().is_terminal(), "a state receiver sees the end too");
    // The timer is made inside the host runtime.
    let drained = host.block_on(async {
        tokio::time::timeout(Duration::from_secs(10), async { while events.next().await.is_some() {} }).await
    });
    assert!(drained.is_ok(), "the event stream ends once nothing can feed it");
    assert!(!cache.is_initialized() || cache.entry(&root).is_some(), "the last contents stay readable");
    std::thread::spawn(move || {
        drop(cache);
        drop(client);
    })
    .join()
    .expect("dropping the cache and client of a shut-down runtime does not panic");
    drop(server);
}
