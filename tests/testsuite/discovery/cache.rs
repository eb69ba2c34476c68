//! `ServiceCache`: one service's instances held locally, following registrations, updates and
//! unregistrations, reporting nodes that are not instances.

use zk_curator::discovery::{ServiceCacheEvent, ServiceDiscovery, ServiceInstance};
use zk_curator::testing::TestingServer;
use zk_curator::{CreateMode, CuratorClient};

use super::registration::{instance, Details};
use super::WITHIN;
use crate::support;

async fn next_event(events: &mut zk_curator::discovery::ServiceCacheEvents<Details>) -> ServiceCacheEvent<Details> {
    tokio::time::timeout(WITHIN, events.next()).await.expect("an event within the hang guard").expect("not ended")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_follows_registrations_updates_and_unregistrations_and_reports_bad_nodes() {
    let (_server, clients) = support::server_and_clients(2).await;
    let base = support::unique_path("discovery-cache");
    let provider = ServiceDiscovery::<Details>::builder(&clients[0], &base).build().unwrap();
    let consumer = ServiceDiscovery::<Details>::builder(&clients[1], &base).build().unwrap();
    let before = instance("api", "before", 1);
    provider.register(&before).await.unwrap();

    let cache = consumer.service_cache("api").unwrap();
    let mut events = cache.events();
    assert!(cache.wait_initialized_timeout(WITHIN).await.unwrap());
    assert_eq!(cache.instances().iter().map(|i| (**i).clone()).collect::<Vec<_>>(), vec![before.clone()]);
    assert!(matches!(next_event(&mut events).await, ServiceCacheEvent::Added(i) if *i == before));
    assert!(matches!(next_event(&mut events).await, ServiceCacheEvent::Initialized));

    let after = instance("api", "after", 2);
    provider.register(&after).await.unwrap();
    assert!(matches!(next_event(&mut events).await, ServiceCacheEvent::Added(i) if *i == after));
    let moved = after.to_builder().port(22).build().unwrap();
    provider.update(&moved).unwrap();
    assert!(matches!(next_event(&mut events).await, ServiceCacheEvent::Updated(i) if *i == moved));
    provider.unregister(&before).await.unwrap();
    assert!(matches!(
        next_event(&mut events).await,
        ServiceCacheEvent::Removed { node, instance: Some(i) } if node == "before" && *i == before
    ));
    support::eventually(WITHIN, "the cache holds the moved instance only", || async {
        cache.instances().iter().map(|i| (**i).clone()).collect::<Vec<_>>() == vec![moved.clone()]
    })
    .await;

    let bad_path = format!("{base}/api/bad");
    clients[0].create(&bad_path).data(b"[1,".to_vec()).mode(CreateMode::Persistent).await.unwrap();
    assert!(matches!(next_event(&mut events).await, ServiceCacheEvent::Unparsable { path, .. } if path == bad_path));
    support::eventually(WITHIN, "the bad node is listed", || async { cache.unparsable().contains_key(&bad_path) })
        .await;
    assert_eq!(cache.len(), 1, "the bad node is skipped, the good one kept");
    clients[0].delete(&bad_path).await.unwrap();
    support::eventually(WITHIN, "a deleted bad node is no longer listed", || async { cache.unparsable().is_empty() })
        .await;
    provider.close().await.unwrap();
    support::eventually(WITHIN, "the cache empties once the provider closed", || async { cache.is_empty() }).await;
    cache.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_of_a_service_with_no_node_initializes_empty_and_creates_nothing() {
    let (server, clients) = support::server_and_clients(1).await;
    let base = support::unique_path("discovery-empty");
    let consumer = ServiceDiscovery::<Details>::builder(&clients[0], &base).build().unwrap();
    let cache = consumer.service_cache("api").unwrap();
    assert!(cache.wait_initialized_timeout(WITHIN).await.unwrap());
    assert!(cache.is_empty());
    let zk = support::observer(&server.connect_string()).await;
    assert!(!support::exists(&zk, &base).await);
    cache.close().await;
    assert!(cache.wait_initialized_timeout(WITHIN).await.unwrap(), "initialized stays true after close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_base_path_deleted_under_a_running_cache_empties_it_and_a_new_registration_is_seen() {
    let (_server, clients) = support::server_and_clients(2).await;
    let base = support::unique_path("discovery-deleted-base");
    let provider = ServiceDiscovery::<Details>::builder(&clients[0], &base).build().unwrap();
    let consumer = ServiceDiscovery::<Details>::builder(&clients[1], &base).build().unwrap();
    let fixed =
        instance("api", "s", 1).to_builder().service_type(zk_curator::discovery::ServiceType::Static).build().unwrap();
    provider.register(&fixed).await.unwrap();
    let cache = consumer.service_cache("api").unwrap();
    assert!(cache.wait_initialized_timeout(WITHIN).await.unwrap());
    assert_eq!(cache.len(), 1);
    // Someone deletes the whole registry: the cache empties, nothing fails.
    provider.unregister(&fixed).await.unwrap();
    for path in [format!("{base}/api"), base.clone()] {
        let _ = clients[1].delete(&path).await;
    }
    support::eventually(WITHIN, "the cache empties", || async { cache.is_empty() }).await;
    provider.register(&instance("api", "again", 2)).await.unwrap();
    support::eventually(WITHIN, "a new registration under a re-created base is seen", || async {
        cache.instances().iter().any(|i| i.id() == "again")
    })
    .await;
    assert!(cache.unparsable().is_empty());
    provider.close().await.unwrap();
    cache.close().await;
}

/// A server, two sessions, a discovery of each on a fresh base, and 1,000 instances of `api`
/// registered by the first: a large view takes longer to rebuild, the window in which an event
/// handed out early would show.
async fn a_large_service(
    base: &str,
) -> (
    TestingServer,
    Vec<CuratorClient>,
    ServiceDiscovery<Details>,
    ServiceDiscovery<Details>,
    Vec<ServiceInstance<Details>>,
) {
    let (server, clients) = support::server_and_clients(2).await;
    let base = support::unique_path(base);
    let provider = ServiceDiscovery::<Details>::builder(&clients[0], &base).build().unwrap();
    let consumer = ServiceDiscovery::<Details>::builder(&clients[1], &base).build().unwrap();
    let held: Vec<_> = (0..1000).map(|k| instance("api", &format!("held-{k}"), 1)).collect();
    provider.register_all(&held).await.unwrap();
    (server, clients, provider, consumer, held)
}

/// A subscriber handed a change finds it in `instances()` at once (a service reacting to `Added`
/// by picking from the cache finds the instance): the view is published before the event is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_handed_out_as_added_or_removed_is_already_so_in_the_view() {
    let (_server, _clients, provider, consumer, _) = a_large_service("discovery-event-order").await;
    let cache = consumer.service_cache("api").unwrap();
    assert!(cache.wait_initialized_timeout(WITHIN).await.unwrap());
    let mut events = cache.events();
    while !matches!(next_event(&mut events).await, ServiceCacheEvent::Initialized) {}

    let in_view = |id: &str| cache.instances().iter().any(|i| i.id() == id);
    let mut stale = Vec::new();
    for k in 0..20 {
        let x = instance("api", &format!("churn-{k}"), 2);
        provider.register(&x).await.unwrap();
        match next_event(&mut events).await {
            ServiceCacheEvent::Added(i) if i.id() == x.id() => {
                if !in_view(x.id()) {
                    stale.push(format!("Added {} before the view held it", x.id()));
                }
            }
            other => panic!("expected the Added of {}, got {other:?}", x.id()),
        }
        provider.unregister(&x).await.unwrap();
        match next_event(&mut events).await {
            ServiceCacheEvent::Removed { node, .. } if node == x.id() => {
                if in_view(x.id()) {
                    stale.push(format!("Removed {} while the view still held it", x.id()));
                }
            }
            other => panic!("expected the Removed of {}, got {other:?}", x.id()),
        }
    }
    assert!(stale.is_empty(), "events handed out ahead of the view: {stale:?}");
    provider.close().await.unwrap();
    cache.close().await;
}

/// A subscriber made before the first load is in finds each instance of the load in `instances()`
/// when handed its `Added`, and the cache initialized (with the whole load in view) when handed
/// `Initialized`: the load's view is published before its events are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_loads_instances_and_initialized_are_in_the_view_when_handed_out() {
    let (_server, _clients, provider, consumer, held) = a_large_service("discovery-load-order").await;
    for round in 0..3 {
        let cache = consumer.service_cache("api").unwrap();
        // Made at once: before the load (a thousand reads) is in.
        let mut events = cache.events();
        let mut stale = Vec::new();
        let mut added = 0;
        loop {
            match next_event(&mut events).await {
                ServiceCacheEvent::Added(i) => {
                    added += 1;
                    if !cache.instances().iter().any(|v| v.id() == i.id()) {
                        stale.push(format!("Added {} before the view held it", i.id()));
                    }
                }
                ServiceCacheEvent::Initialized => {
                    if !cache.is_initialized() || cache.len() != held.len() {
                        stale.push(format!(
                            "Initialized with is_initialized() {} and {} instances in view",
                            cache.is_initialized(),
                            cache.len()
                        ));
                    }
                    break;
                }
                other => panic!("round {round}: expected the load's events, got {other:?}"),
            }
        }
        assert_eq!(added, held.len(), "round {round}: every instance of the load handed out once");
        assert!(stale.is_empty(), "round {round}: events handed out ahead of the view: {stale:?}");
        cache.close().await;
    }
    provider.close().await.unwrap();
}
