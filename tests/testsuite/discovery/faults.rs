//! Registrations and caches through faults: an update made while cut off is written once the link
//! heals; after a provider's session expiry and a server restart, its instance is back and a
//! consumer's cache converges to the registry.

use std::time::Duration;

use zk_curator::discovery::ServiceDiscovery;
use zk_curator::testing::{FaultProxy, ProxyMode};

use super::registration::{instance, Details};
use super::WITHIN;
use crate::support;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_made_while_cut_off_is_written_once_the_link_heals() {
    let server = support::server().await;
    let proxy = FaultProxy::start(&server.connect_string()).await.unwrap();
    let client = support::riding_client(&proxy.connect_string()).await;
    let observer = support::client(&server.connect_string()).await;
    let base = support::unique_path("discovery-cut");
    let discovery = ServiceDiscovery::<Details>::builder(&client, &base).build().unwrap();
    let reader = ServiceDiscovery::<Details>::builder(&observer, &base).build().unwrap();
    let me = instance("api", "me", 1);
    discovery.register(&me).await.unwrap();

    support::cut_off(&proxy, &client).await;
    let moved = me.to_builder().port(2).build().unwrap();
    discovery.update(&moved).unwrap();
    // Within the cut (shorter than the session): the server still has the old data.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(reader.query_for_instance("api", "me").await.unwrap(), Some(me));
    proxy.set_mode(ProxyMode::Pass);
    support::eventually(WITHIN, "the update made while cut off is written", || async {
        reader.query_for_instance("api", "me").await.unwrap().as_ref() == Some(&moved)
    })
    .await;
    discovery.close().await.unwrap();
    assert!(reader.query_for_instances("api").await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_an_expiry_and_a_server_restart_the_instance_is_back_and_the_consumers_cache_converges() {
    // Owned: the test restarts its server.
    let mut server = support::owned_server().await;
    let connect = server.connect_string();
    let provider_client = support::client_with(&connect, Duration::from_secs(4)).await;
    let consumer_client = support::client_with(&connect, Duration::from_secs(4)).await;
    let base = support::unique_path("discovery-faults");
    let provider = ServiceDiscovery::<Details>::builder(&provider_client, &base).build().unwrap();
    let consumer = ServiceDiscovery::<Details>::builder(&consumer_client, &base).build().unwrap();
    let cache = consumer.service_cache("api").unwrap();
    assert!(cache.wait_initialized_timeout(WITHIN).await.unwrap());
    let (a, b) = (instance("api", "a", 1), instance("api", "b", 2));
    provider.register(&a).await.unwrap();
    provider.register(&b).await.unwrap();
    let holds = |ids: &'static [&'static str]| {
        let cache = cache.clone();
        move || {
            let cache = cache.clone();
            async move { cache.instances().iter().map(|i| i.id().to_string()).collect::<Vec<_>>() == ids }
        }
    };
    support::eventually(WITHIN, "the consumer sees both", holds(&["a", "b"])).await;

    zk_curator::testing::expire_session(&connect, &provider_client).await.unwrap();
    let moved = b.to_builder().port(22).build().unwrap();
    provider.update(&moved).unwrap();
    support::eventually(WITHIN, "both back after the provider's expiry, b updated", || async {
        let all = cache.instances();
        all.len() == 2 && all[1].port() == Some(22)
    })
    .await;

    server.restart().await.unwrap();
    provider.unregister(&a).await.unwrap();
    support::eventually(WITHIN, "the cache converges after the restart", holds(&["b"])).await;
    assert_eq!(consumer.query_for_instances("api").await.unwrap(), vec![moved]);
    provider.close().await.unwrap();
    support::eventually(WITHIN, "the cache empties once the provider closed", holds(&[])).await;
}
