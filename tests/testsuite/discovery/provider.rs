//! `ServiceProvider`: the strategies, the enabled filter and filters of one's own, and the
//! down-instance policy.

use std::collections::HashSet;
use std::time::Duration;

use zk_curator::discovery::{
    Candidates, DownInstancePolicy, JsonInstanceSerializer, ProviderStrategy, RandomStrategy, RoundRobinStrategy,
    ServiceCacheEvent, ServiceDiscovery, StickyStrategy,
};

use super::registration::{instance, Details};
use super::WITHIN;
use crate::support;

async fn registry(
    n: usize,
) -> (zk_curator::testing::TestingServer, ServiceDiscovery<Details>, Vec<zk_curator::CuratorClient>) {
    let (server, clients) = support::server_and_clients(2).await;
    let base = support::unique_path("discovery-provider");
    let serializer = JsonInstanceSerializer::new().compatible(false);
    let discovery = ServiceDiscovery::<Details>::builder(&clients[0], &base).serializer(serializer).build().unwrap();
    for i in 0..n {
        discovery.register(&instance("api", &format!("i{i}"), i as u16 + 1)).await.unwrap();
    }
    (server, discovery, clients)
}

fn ids(
    picks: impl IntoIterator<Item = Option<std::sync::Arc<zk_curator::discovery::ServiceInstance<Details>>>>,
) -> Vec<String> {
    picks.into_iter().map(|i| i.expect("an instance").id().to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_robin_random_and_sticky_pick_as_curators() {
    let (_server, discovery, _clients) = registry(3).await;
    let provider = discovery.provider_builder("api").start().unwrap();
    assert!(provider.wait_initialized_timeout(WITHIN).await.unwrap());
    assert_eq!(provider.get_all_instances().len(), 3);
    let picks = ids((0..6).map(|_| provider.get_instance()));
    assert_eq!(picks, ["i0", "i1", "i2", "i0", "i1", "i2"], "round robin, in node order");

    let random = discovery.provider_builder("api").strategy(RandomStrategy::new()).start().unwrap();
    assert!(random.wait_initialized_timeout(WITHIN).await.unwrap());
    let seen: HashSet<String> = ids((0..200).map(|_| random.get_instance())).into_iter().collect();
    assert_eq!(seen.len(), 3, "random reaches every instance: {seen:?}");

    let sticky =
        discovery.provider_builder("api").strategy(StickyStrategy::new(RoundRobinStrategy::new())).start().unwrap();
    assert!(sticky.wait_initialized_timeout(WITHIN).await.unwrap());
    let first = sticky.get_instance().unwrap();
    assert!((0..10).all(|_| sticky.get_instance().unwrap().id() == first.id()), "sticky stays");
    discovery.unregister(&first).await.unwrap();
    support::eventually(WITHIN, "sticky moves on once its instance is gone", || async {
        sticky.get_instance().is_some_and(|i| i.id() != first.id())
    })
    .await;
    discovery.close().await.unwrap();
    support::eventually(WITHIN, "no instance once all are gone", || async { provider.get_instance().is_none() }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disabled_filtered_and_down_instances_are_skipped_until_their_window_passes() {
    let (_server, discovery, _clients) = registry(3).await;
    let disabled = instance("api", "i1", 2).to_builder().enabled(false).build().unwrap();
    discovery.update(&disabled).unwrap();
    let policy = DownInstancePolicy::new(Duration::from_millis(500), 2);
    let provider = discovery.provider_builder("api").down_instance_policy(policy).start().unwrap();
    assert!(provider.wait_initialized_timeout(WITHIN).await.unwrap());
    support::eventually(WITHIN, "the disabled instance is skipped", || async {
        provider.get_all_instances().iter().all(|i| i.id() != "i1")
    })
    .await;
    assert_eq!(provider.get_all_instances().len(), 2);

    let down = provider.get_all_instances()[0].clone();
    provider.note_error(&down);
    assert_eq!(provider.get_all_instances().len(), 2, "one error is under the threshold");
    provider.note_error(&down);
    let left = provider.get_all_instances();
    assert_eq!(left.len(), 1, "two errors make it down");
    assert_ne!(left[0].id(), down.id());
    assert!((0..10).all(|_| provider.get_instance().unwrap().id() != down.id()));
    support::eventually(WITHIN, "the down instance is back once its window passed", || async {
        provider.get_all_instances().iter().any(|i| i.id() == down.id())
    })
    .await;

    let own = discovery.provider_builder("api").filter(|i| i.port() == Some(3)).skip_disabled(false).start().unwrap();
    assert!(own.wait_initialized_timeout(WITHIN).await.unwrap());
    assert_eq!(ids(own.get_all_instances().iter().cloned().map(Some)), ["i2"]);
    let all = discovery.provider_builder("api").skip_disabled(false).start().unwrap();
    assert!(all.wait_initialized_timeout(WITHIN).await.unwrap());
    assert_eq!(all.get_all_instances().len(), 3, "disabled ones kept when asked");
    discovery.close().await.unwrap();
}

/// Always the last candidate.
struct Last;

impl<T> ProviderStrategy<T> for Last {
    fn choose(&self, candidates: &Candidates<'_, T>) -> Option<usize> {
        candidates.len().checked_sub(1)
    }
}

/// Out of range: a buggy strategy gives no instance, never a panic.
struct Beyond;

impl<T> ProviderStrategy<T> for Beyond {
    fn choose(&self, candidates: &Candidates<'_, T>) -> Option<usize> {
        Some(candidates.len() + 5)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_strategy_of_ones_own_is_used_and_a_buggy_one_cannot_panic() {
    let (_server, discovery, _clients) = registry(2).await;
    let last = discovery.provider_builder("api").strategy(Last).start().unwrap();
    assert!(last.wait_initialized_timeout(WITHIN).await.unwrap());
    assert_eq!(last.get_instance().unwrap().id(), "i1");
    let beyond = discovery.provider_builder("api").strategy(Beyond).start().unwrap();
    assert!(beyond.wait_initialized_timeout(WITHIN).await.unwrap());
    assert!(beyond.get_instance().is_none());
    let sticky = discovery.provider_builder("api").strategy(StickyStrategy::new(Beyond)).start().unwrap();
    assert!(sticky.wait_initialized_timeout(WITHIN).await.unwrap());
    assert!(sticky.get_instance().is_none());
    discovery.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_down_instance_policy_of_any_window_never_panics() {
    let (_server, discovery, _clients) = registry(2).await;
    let provider = discovery
        .provider_builder("api")
        .down_instance_policy(DownInstancePolicy::new(Duration::MAX, 1))
        .start()
        .unwrap();
    assert!(provider.wait_initialized_timeout(WITHIN).await.unwrap());
    let first = provider.get_instance().expect("an instance");
    provider.note_error(&first);
    // The window never ends: the instance noted down stays down, and picking must not overflow
    // computing when it comes back.
    let picks = ids((0..4).map(|_| provider.get_instance()));
    assert!(picks.iter().all(|id| id != first.id()), "{picks:?}");
    assert_eq!(provider.get_all_instances().len(), 1);
    discovery.close().await.unwrap();
}

/// A provider whose cache hands out `Added(x)` or `Removed(x)` picks accordingly at once, also while
/// other threads pick all along (a pick made as the view changed never leaves a stale list
/// behind).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_providers_picks_follow_its_caches_events_at_once_while_others_pick() {
    let (_server, discovery, clients) = registry(0).await;
    let consumer = ServiceDiscovery::<Details>::builder(&clients[1], discovery.base_path()).build().unwrap();
    // A large view takes longer to rebuild: the window in which a pick could see a half-made one.
    let held: Vec<_> = (0..1000).map(|k| instance("api", &format!("held-{k}"), 1)).collect();
    discovery.register_all(&held).await.unwrap();
    let provider = consumer.provider_builder("api").start().unwrap();
    assert!(provider.wait_initialized_timeout(WITHIN).await.unwrap());
    let mut events = provider.cache().events();
    while !matches!(tokio::time::timeout(WITHIN, events.next()).await.unwrap(), Some(ServiceCacheEvent::Initialized)) {}
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let picker = {
        let (provider, stop) = (provider.clone(), stop.clone());
        support::spawn(async move {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = provider.get_all_instances();
                tokio::task::yield_now().await;
            }
        })
    };
    let picks = |id: &str| provider.get_all_instances().iter().any(|i| i.id() == id);
    let mut stale = Vec::new();
    for k in 0..20 {
        let x = instance("api", &format!("churn-{k}"), 2);
        discovery.register(&x).await.unwrap();
        match tokio::time::timeout(WITHIN, events.next()).await.unwrap() {
            Some(ServiceCacheEvent::Added(i)) if i.id() == x.id() && !picks(x.id()) => {
                stale.push(format!("Added {} but not picked", x.id()))
            }
            Some(ServiceCacheEvent::Added(i)) if i.id() == x.id() => {}
            other => panic!("expected the Added of {}, got {other:?}", x.id()),
        }
        discovery.unregister(&x).await.unwrap();
        match tokio::time::timeout(WITHIN, events.next()).await.unwrap() {
            Some(ServiceCacheEvent::Removed { node, .. }) if node == x.id() && picks(x.id()) => {
                stale.push(format!("Removed {} but still picked", x.id()))
            }
            Some(ServiceCacheEvent::Removed { node, .. }) if node == x.id() => {}
            other => panic!("expected the Removed of {}, got {other:?}", x.id()),
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    support::join("the picker", WITHIN, picker).await;
    assert!(stale.is_empty(), "picks behind the cache's events: {stale:?}");
    provider.close().await;
    discovery.close().await.unwrap();
}
