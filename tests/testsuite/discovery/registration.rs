//! `ServiceDiscovery`: registering, updating, unregistering and querying instances; node modes
//! per service type; registrations that come back after a delete and an expiry; bad input.

use serde::{Deserialize, Serialize};
use zk_curator::discovery::{
    InstanceSerializer, JsonInstanceSerializer, ServiceDiscovery, ServiceInstance, ServiceType,
};
use zk_curator::{CreateMode, Error};

use super::WITHIN;
use crate::support;

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub(super) struct Details {
    pub(super) region: String,
}

pub(super) fn instance(name: &str, id: &str, port: u16) -> ServiceInstance<Details> {
    ServiceInstance::builder(name)
        .id(id)
        .address("127.0.0.1")
        .port(port)
        .payload(Details { region: "eu".into() })
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registered_instances_are_found_by_name_and_id_and_gone_once_unregistered() {
    let (server, clients) = support::server_and_clients(2).await;
    let base = support::unique_path("discovery");
    let discovery = ServiceDiscovery::<Details>::builder(&clients[0], &base).build().unwrap();
    let reader = ServiceDiscovery::<Details>::builder(&clients[1], &base).build().unwrap();
    assert!(reader.query_for_names().await.unwrap().is_empty(), "no base path: no services");
    let (a, b, db) = (instance("api", "a", 1), instance("api", "b", 2), instance("db", "d", 3));
    for i in [&a, &b, &db] {
        discovery.register(i).await.unwrap();
    }
    assert_eq!(reader.query_for_names().await.unwrap(), vec!["api", "db"]);
    assert_eq!(reader.query_for_instances("api").await.unwrap(), vec![a.clone(), b.clone()]);
    assert_eq!(reader.query_for_instance("db", "d").await.unwrap(), Some(db.clone()));
    assert_eq!(reader.query_for_instance("db", "nope").await.unwrap(), None);

    let moved = a.to_builder().port(11).build().unwrap();
    discovery.update(&moved).unwrap();
    support::eventually(WITHIN, "the update is written", || async {
        reader.query_for_instance("api", "a").await.unwrap().as_ref() == Some(&moved)
    })
    .await;
    let unknown = instance("api", "unknown", 9);
    assert!(matches!(discovery.update(&unknown), Err(Error::InvalidArgument { .. })));

    discovery.unregister(&b).await.unwrap();
    assert_eq!(reader.query_for_instances("api").await.unwrap(), vec![moved]);
    discovery.close().await.unwrap();
    let zk = support::observer(&server.connect_string()).await;
    assert!(support::sorted_children(&zk, &format!("{base}/api")).await.is_empty());
    assert!(support::sorted_children(&zk, &format!("{base}/db")).await.is_empty());
    assert!(matches!(discovery.register(&a).await, Err(Error::Closed { .. })), "a closed discovery registers nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_modes_follow_the_service_type_and_close_deletes_every_kind() {
    let (server, clients) = support::server_and_clients(1).await;
    let base = support::unique_path("discovery-modes");
    let discovery = ServiceDiscovery::<Details>::builder(&clients[0], &base).build().unwrap();
    let typed = |id: &str, t: ServiceType| instance("api", id, 1).to_builder().service_type(t).build().unwrap();
    let (dynamic, fixed, permanent, sequential) = (
        typed("dyn", ServiceType::Dynamic),
        typed("static", ServiceType::Static),
        typed("perm", ServiceType::Permanent),
        typed("seq", ServiceType::DynamicSequential),
    );
    for i in [&dynamic, &fixed, &permanent, &sequential] {
        discovery.register(i).await.unwrap();
    }
    let zk = support::observer(&server.connect_string()).await;
    let owner = |stat: Option<zookeeper_client::Stat>| stat.expect("registered node").ephemeral_owner;
    assert_ne!(owner(support::stat(&zk, &format!("{base}/api/dyn")).await), 0, "Dynamic: ephemeral");
    assert_eq!(owner(support::stat(&zk, &format!("{base}/api/static")).await), 0, "Static: persistent");
    assert_eq!(owner(support::stat(&zk, &format!("{base}/api/perm")).await), 0, "Permanent: persistent");
    let seq_path = discovery.registered_path("seq").unwrap();
    let suffix = seq_path.strip_prefix(&format!("{base}/api/seq")).expect("id then sequence");
    assert!(suffix.len() == 10 && suffix.chars().all(|c| c.is_ascii_digit()), "{seq_path}");
    assert_ne!(owner(support::stat(&zk, &seq_path).await), 0, "DynamicSequential: ephemeral");
    let read = ServiceDiscovery::<Details>::builder(&clients[0], &base).build().unwrap();
    assert_eq!(read.query_for_instances("api").await.unwrap().len(), 4);

    discovery.close().await.unwrap();
    assert!(support::sorted_children(&zk, &format!("{base}/api")).await.is_empty(), "close leaves nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dynamic_registration_comes_back_after_its_node_is_deleted_and_after_an_expiry() {
    let (server, clients) = support::server_and_clients(2).await;
    let connect = server.connect_string();
    let base = support::unique_path("discovery-back");
    let discovery = ServiceDiscovery::<Details>::builder(&clients[0], &base).build().unwrap();
    let me = instance("api", "me", 1);
    discovery.register(&me).await.unwrap();
    let path = format!("{base}/api/me");
    let reader = ServiceDiscovery::<Details>::builder(&clients[1], &base).build().unwrap();

    clients[1].delete(&path).await.unwrap();
    support::eventually(WITHIN, "re-created after a delete", || async {
        reader.query_for_instance("api", "me").await.unwrap().as_ref() == Some(&me)
    })
    .await;

    let zk = support::observer(&connect).await;
    let before = support::stat(&zk, &path).await.unwrap().ephemeral_owner;
    zk_curator::testing::expire_session(&connect, &clients[0]).await.unwrap();
    support::eventually(WITHIN, "re-created on the new session after an expiry", || async {
        support::stat(&zk, &path).await.is_some_and(|s| s.ephemeral_owner != before && s.ephemeral_owner != 0)
    })
    .await;
    assert_eq!(reader.query_for_instance("api", "me").await.unwrap(), Some(me));
    discovery.close().await.unwrap();
    assert!(!support::exists(&zk, &path).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_discovery_leaves_nothing_behind() {
    let (server, clients) = support::server_and_clients(1).await;
    let base = support::unique_path("discovery-drop");
    let discovery = ServiceDiscovery::<Details>::builder(&clients[0], &base).build().unwrap();
    let fixed = instance("api", "static", 1).to_builder().service_type(ServiceType::Static).build().unwrap();
    discovery.register(&fixed).await.unwrap();
    drop(discovery);
    let zk = support::observer(&server.connect_string()).await;
    support::eventually(WITHIN, "the dropped discovery's static node is deleted", || async {
        support::sorted_children(&zk, &format!("{base}/api")).await.is_empty()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_a_typed_error_naming_it_and_registers_nothing() {
    let (server, clients) = support::server_and_clients(1).await;
    let base = support::unique_path("discovery-bad");
    let discovery = ServiceDiscovery::<String>::builder(&clients[0], &base).build().unwrap();
    // A name with a slash, as another writer's JSON may hold it.
    let slashed: ServiceInstance<String> =
        JsonInstanceSerializer::new().deserialize(br#"{"name":"a/b","id":"x","payload":null}"#).unwrap();
    match discovery.register(&slashed).await {
        Err(Error::InvalidArgument { name, value, .. }) => assert_eq!((name, value.as_str()), ("service name", "a/b")),
        other => panic!("{other:?}"),
    }
    let huge = ServiceInstance::builder("api").id("big").payload("x".repeat(2 << 20)).build().unwrap();
    match discovery.register(&huge).await {
        Err(e @ Error::InvalidArgument { .. }) => assert!(e.to_string().contains(&format!("{base}/api/big")), "{e}"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(discovery.query_for_instances("a/b").await, Err(Error::InvalidArgument { .. })));
    assert!(matches!(
        ServiceDiscovery::<String>::builder(&clients[0], "no-slash").build(),
        Err(Error::InvalidPath { .. })
    ));
    let zk = support::observer(&server.connect_string()).await;
    assert!(!support::exists(&zk, &base).await, "nothing was created");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_json_from_another_writer_is_skipped_and_reported() {
    let (_server, clients) = support::server_and_clients(1).await;
    let base = support::unique_path("discovery-malformed");
    let discovery = ServiceDiscovery::<Details>::builder(&clients[0], &base).build().unwrap();
    let good = instance("api", "good", 1);
    discovery.register(&good).await.unwrap();
    let bad_path = format!("{base}/api/bad");
    clients[0].create(&bad_path).data(b"{not json".to_vec()).mode(CreateMode::Persistent).await.unwrap();
    assert_eq!(discovery.query_for_instances("api").await.unwrap(), vec![good]);
    match discovery.query_for_instance("api", "bad").await {
        Err(Error::MalformedData { path, .. }) => assert_eq!(path, bad_path),
        other => panic!("{other:?}"),
    }
    clients[0].delete(&bad_path).await.unwrap();
    discovery.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_watch_instances_a_change_by_someone_else_is_taken_and_kept_through_a_re_creation() {
    let (_server, clients) = support::server_and_clients(2).await;
    let base = support::unique_path("discovery-watch");
    let discovery = ServiceDiscovery::<Details>::builder(&clients[0], &base).watch_instances(true).build().unwrap();
    let reader = ServiceDiscovery::<Details>::builder(&clients[1], &base).build().unwrap();
    let me = instance("api", "me", 1);
    discovery.register(&me).await.unwrap();
    let path = format!("{base}/api/me");
    let changed = me.to_builder().port(99).build().unwrap();
    let bytes = JsonInstanceSerializer::new().serialize(&changed).unwrap();
    clients[1].set_data(&path, bytes).await.unwrap();
    support::eventually(WITHIN, "the change by someone else is taken", || async {
        discovery.registered() == vec![changed.clone()]
    })
    .await;
    clients[1].delete(&path).await.unwrap();
    support::eventually(WITHIN, "re-created with the change", || async {
        reader.query_for_instance("api", "me").await.unwrap().as_ref() == Some(&changed)
    })
    .await;
    discovery.close().await.unwrap();
    assert!(reader.query_for_instances("api").await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn this_instance_is_registered_by_start_and_unregistered_by_close() {
    let (_server, clients) = support::server_and_clients(1).await;
    let base = support::unique_path("discovery-this");
    let me = instance("api", "me", 1);
    let discovery = ServiceDiscovery::<Details>::builder(&clients[0], &base).this_instance(me.clone()).build().unwrap();
    assert!(discovery.query_for_instances("api").await.unwrap().is_empty(), "nothing before start");
    discovery.start().await.unwrap();
    assert_eq!(discovery.query_for_instances("api").await.unwrap(), vec![me]);
    discovery.close().await.unwrap();
    assert!(discovery.query_for_instances("api").await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registering_an_id_again_updates_it_or_moves_it_to_its_new_name_and_type() {
    let (server, clients) = support::server_and_clients(1).await;
    let base = support::unique_path("discovery-again");
    let discovery = ServiceDiscovery::<Details>::builder(&clients[0], &base).build().unwrap();
    let zk = support::observer(&server.connect_string()).await;
    let me = instance("api", "me", 1);
    discovery.register(&me).await.unwrap();
    let same = me.to_builder().port(2).build().unwrap();
    discovery.register(&same).await.unwrap();
    support::eventually(WITHIN, "the same node updated", || async {
        discovery.query_for_instance("api", "me").await.unwrap().as_ref() == Some(&same)
    })
    .await;
    let fixed = same.to_builder().service_type(ServiceType::Static).build().unwrap();
    discovery.register(&fixed).await.unwrap();
    let stat = support::stat(&zk, &format!("{base}/api/me")).await.expect("registered");
    assert_eq!(stat.ephemeral_owner, 0, "a new type: a new (persistent) node");
    let moved = ServiceInstance::builder("web")
        .id(fixed.id())
        .address("127.0.0.1")
        .port(3)
        .payload(Details { region: "eu".into() })
        .build()
        .unwrap();
    discovery.register(&moved).await.unwrap();
    assert!(!support::exists(&zk, &format!("{base}/api/me")).await, "moved away from its old name");
    assert_eq!(discovery.query_for_instance("web", "me").await.unwrap(), Some(moved));
    assert_eq!(discovery.registered().len(), 1);
    discovery.close().await.unwrap();
    assert!(!support::exists(&zk, &format!("{base}/web/me")).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_register_cancelled_at_any_point_leaves_no_node_behind() {
    let (server, clients) = support::server_and_clients(1).await;
    let base = support::unique_path("discovery-cancel");
    let discovery = ServiceDiscovery::<Details>::builder(&clients[0], &base).build().unwrap();
    let mut completed = Vec::new();
    // Cancelled after 0, 100, 200, … µs: before the lock, before the create is sent, while its
    // reply is awaited, and (at the end) completed.
    for step in 0..40u64 {
        let me = instance("api", &format!("c{step}"), 1);
        let cancel_after = std::time::Duration::from_micros(step * 100);
        if let Ok(registered) = tokio::time::timeout(cancel_after, discovery.register(&me)).await {
            registered.unwrap();
            completed.push(me);
        }
    }
    let mut kept: Vec<String> = discovery.registered().into_iter().map(|i| i.id().to_string()).collect();
    kept.sort();
    let mut expected: Vec<String> = completed.iter().map(|i| i.id().to_string()).collect();
    expected.sort();
    assert_eq!(kept, expected, "only the completed registers are registered");
    let zk = support::observer(&server.connect_string()).await;
    support::eventually(WITHIN, "only the completed registers' nodes remain", || async {
        let mut nodes = support::sorted_children(&zk, &format!("{base}/api")).await;
        nodes.sort();
        nodes == expected
    })
    .await;
    discovery.close().await.unwrap();
    support::eventually(WITHIN, "nothing once closed", || async {
        support::sorted_children(&zk, &format!("{base}/api")).await.is_empty()
    })
    .await;
}

#[test]
fn discovery_cache_and_provider_dropped_after_their_runtime_shut_down_do_not_panic() {
    let outer = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let server = outer.block_on(support::server());
    let connect = server.connect_string();
    let base = support::unique_path("discovery-late-drop");
    let inner = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let (client, discovery, cache, provider) = inner.block_on(async {
        let client = support::client(&connect).await;
        let discovery = ServiceDiscovery::<Details>::builder(&client, &base).watch_instances(true).build().unwrap();
        discovery.register(&instance("api", "a", 1)).await.unwrap();
        let cache = discovery.service_cache("api").unwrap();
        let provider = discovery.provider_builder("api").start().unwrap();
        assert!(provider.wait_initialized_timeout(WITHIN).await.unwrap());
        (client, discovery, cache, provider)
    });
    inner.shutdown_timeout(std::time::Duration::from_secs(5));
    // Outside any runtime, after the client's runtime is gone.
    drop(provider);
    drop(cache);
    drop(discovery);
    drop(client);
    drop(server);
    drop(outer);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_start_keeps_this_instance_for_the_next_start() {
    let (server, clients) = support::server_and_clients(1).await;
    let base = support::unique_path("discovery-cancel-start");
    let me = instance("api", "me", 1);
    let discovery = ServiceDiscovery::<Details>::builder(&clients[0], &base).this_instance(me.clone()).build().unwrap();
    // Dropped after its first poll: the create is on its way, not yet confirmed.
    let cancelled = tokio::time::timeout(std::time::Duration::ZERO, discovery.start()).await;
    assert!(cancelled.is_err(), "start() completed at its first poll: the test needs it cancelled");
    discovery.start().await.unwrap();
    assert_eq!(discovery.registered().len(), 1, "the next start registers this instance");
    let zk = support::observer(&server.connect_string()).await;
    support::eventually(WITHIN, "this instance's node is there", || async {
        support::sorted_children(&zk, &format!("{base}/api")).await == ["me"]
    })
    .await;
    discovery.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_register_after_a_cancelled_one_of_the_same_id_has_its_node_when_it_returns() {
    let (server, clients) = support::server_and_clients(1).await;
    let base = support::unique_path("discovery-cancel-again");
    let discovery = ServiceDiscovery::<Details>::builder(&clients[0], &base).build().unwrap();
    let me = instance("api", "me", 1);
    // Dropped after its first poll: the create is on its way, its outcome unknown to the call.
    let cancelled = tokio::time::timeout(std::time::Duration::ZERO, discovery.register(&me)).await;
    assert!(cancelled.is_err(), "register() completed at its first poll: the test needs it cancelled");
    discovery.register(&me).await.unwrap();
    let zk = support::observer(&server.connect_string()).await;
    assert_eq!(
        support::sorted_children(&zk, &format!("{base}/api")).await,
        ["me"],
        "registered, yet the cancelled call's cleanup deleted the node"
    );
    discovery.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn register_all_registers_every_instance_or_none_when_one_is_bad() {
    let (server, clients) = support::server_and_clients(1).await;
    let base = support::unique_path("discovery-register-all");
    let discovery = ServiceDiscovery::<Details>::builder(&clients[0], &base).build().unwrap();
    let zk = support::observer(&server.connect_string()).await;
    let new_one = ServiceInstance::builder("api").id("x").port(1).payload(Details { region: "eu".into() });
    let new_one = new_one.build().unwrap();
    let mut bad_batch = vec![instance("api", "a", 1), instance("api", "b", 2)];
    bad_batch.push(instance("api", "a", 3));
    assert!(matches!(discovery.register_all(&bad_batch).await, Err(Error::InvalidArgument { .. })), "an id twice");
    assert!(support::sorted_children(&zk, &format!("{base}/api")).await.is_empty(), "nothing registered");
    let all: Vec<_> =
        (0..50).map(|i| instance(if i % 2 == 0 { "api" } else { "db" }, &format!("i{i:02}"), 1)).collect();
    discovery.register_all(&all).await.unwrap();
    assert_eq!(support::sorted_children(&zk, &format!("{base}/api")).await.len(), 25);
    assert_eq!(support::sorted_children(&zk, &format!("{base}/db")).await.len(), 25);
    assert_eq!(discovery.registered().len(), 50);
    // Ids already registered are updated in place, a new one added.
    discovery.register_all(&[all[0].to_builder().port(7).build().unwrap(), new_one]).await.unwrap();
    // An update is written by the registration's node in the background, as `update` is.
    support::eventually(std::time::Duration::from_secs(20), "the updated port is on the server", || async {
        discovery.query_for_instance("api", "i00").await.unwrap().unwrap().port() == Some(7)
    })
    .await;
    assert_eq!(discovery.registered().len(), 51);
    discovery.close().await.unwrap();
    assert!(support::sorted_children(&zk, &format!("{base}/api")).await.is_empty(), "close leaves nothing");
}
