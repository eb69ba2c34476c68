//! The blocking discovery, from plain threads: registered, found by a cache and a provider,
//! closed with nothing left.

use std::time::Duration;

use zk_curator::blocking;
use zk_curator::discovery::ServiceCacheEvent;

use super::registration::{instance, Details};
use super::WITHIN;
use crate::support;

#[test]
fn blocking_discovery_registers_caches_and_picks_from_plain_threads_and_leaves_nothing() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let server = rt.block_on(support::server());
    let connect = server.connect_string();
    let builder = zk_curator::CuratorClient::builder(&connect)
        .session_timeout(Duration::from_secs(10))
        .connection_timeout(Duration::from_secs(5));
    let client = blocking::CuratorClient::from_builder(builder).unwrap();
    let base = support::unique_path("discovery-blocking");
    let discovery = blocking::ServiceDiscovery::<Details>::new(&client, &base).unwrap();
    let cache = discovery.service_cache("api").unwrap();
    assert!(cache.wait_initialized_timeout(WITHIN).unwrap());
    let mut changes = cache.events();
    assert!(matches!(changes.next_timeout(WITHIN).unwrap(), Some(ServiceCacheEvent::Initialized)));

    let (a, b) = (instance("api", "a", 1), instance("api", "b", 2));
    let registering = discovery.clone();
    std::thread::spawn(move || {
        registering.register(&a).unwrap();
        registering.register(&b).unwrap();
    })
    .join()
    .unwrap();
    assert!(matches!(changes.next_timeout(WITHIN).unwrap(), Some(ServiceCacheEvent::Added(i)) if i.id() == "a"));
    assert_eq!(discovery.query_for_instances("api").unwrap().len(), 2);
    let provider = discovery.provider("api").unwrap();
    assert!(provider.wait_initialized_timeout(WITHIN).unwrap());
    let picks: Vec<String> = (0..4).map(|_| provider.get_instance().unwrap().id().to_string()).collect();
    assert_eq!(picks, ["a", "b", "a", "b"]);

    discovery.close().unwrap();
    assert!(discovery.query_for_instances("api").unwrap().is_empty(), "close leaves nothing");
    provider.close().unwrap();
    cache.close().unwrap();
    assert!(changes.any(|c| matches!(c, ServiceCacheEvent::Removed { .. })), "the removals were seen before the end");
}
