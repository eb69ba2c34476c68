//! `inspect` recognises curator-x-discovery registries (`base/NAME/ID`, Curator's JSON): the
//! services, their instances (address, port, type, enabled) and the nodes under a service that are
//! not instances — registered by zk-curator and by real Curator; and `zk-curator inspect` shows
//! them.

use std::process::Command;

use zk_curator::discovery::{JsonInstanceSerializer, ServiceDiscovery, ServiceInstance, ServiceType};
use zk_curator::inspect::{inspect, inspect_services, InspectOptions, LockKind, ServiceSummary, ServicesInspection};
use zk_curator::nodes::GroupMember;
use zk_curator::CreateMode;

use crate::support;
use crate::support::curator_peer::CuratorPeer;

fn service<'a>(found: &'a ServicesInspection, path: &str) -> &'a ServiceSummary {
    found.services.iter().find(|s| s.path == path).unwrap_or_else(|| panic!("no service {path} in {found:#?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_instances_and_malformed_nodes_of_a_registry_are_recognised() {
    let (_server, clients) = support::server_and_clients(1).await;
    let client = &clients[0];
    let root = support::unique_path("inspect-discovery");
    let base = format!("{root}/registry");
    // Writes `enabled` (compatible mode would not), so a disabled instance reads back disabled.
    let discovery = ServiceDiscovery::<()>::builder(client, &base)
        .serializer(JsonInstanceSerializer::new().compatible(false))
        .build()
        .unwrap();
    let api1 = ServiceInstance::builder("api").id("a1").address("10.0.0.1").port(8080).build().unwrap();
    let api2 = ServiceInstance::builder("api")
        .id("a2")
        .address("10.0.0.2")
        .port(8081)
        .ssl_port(8443)
        .service_type(ServiceType::Static)
        .enabled(false)
        .build()
        .unwrap();
    let db = ServiceInstance::builder("db").id("d1").no_address().port(5432).build().unwrap();
    discovery.register_all(&[api1, api2, db]).await.unwrap();
    // Another writer's garbage under the service, and JSON elsewhere that is no instance.
    client.create(&format!("{base}/api/junk")).data(b"not json".to_vec()).await.unwrap();
    client
        .create(&format!("{root}/config/app"))
        .creating_parents_if_needed()
        .mode(CreateMode::Persistent)
        .data(br#"{"a":1}"#.to_vec())
        .await
        .unwrap();

    let found = inspect_services(client, &root, &InspectOptions::new()).await.unwrap();
    assert!(!found.truncated && found.unreadable.is_empty(), "{found:#?}");
    assert_eq!(
        found.services.iter().map(|s| s.path.as_str()).collect::<Vec<_>>(),
        [format!("{base}/api"), format!("{base}/db")],
        "exactly the two services; the config node is not one"
    );
    let api = service(&found, &format!("{base}/api"));
    assert_eq!(api.name, "api");
    let ids: Vec<&str> = api.instances.iter().map(|i| i.id.as_str()).collect();
    assert_eq!(ids, ["a1", "a2"]);
    let a1 = &api.instances[0];
    assert_eq!(
        (a1.address.as_deref(), a1.port, a1.ssl_port, a1.service_type, a1.enabled),
        (Some("10.0.0.1"), Some(8080), None, "DYNAMIC", true)
    );
    assert_eq!(a1.session, client.session_id(), "a dynamic instance is the registering session's");
    let a2 = &api.instances[1];
    assert_eq!(
        (a2.address.as_deref(), a2.port, a2.ssl_port, a2.service_type, a2.enabled, a2.session),
        (Some("10.0.0.2"), Some(8081), Some(8443), "STATIC", false, 0)
    );
    assert_eq!(api.malformed.len(), 1, "{api:#?}");
    assert_eq!(api.malformed[0].node, format!("{base}/api/junk"));
    assert!(!api.malformed[0].error.is_empty());
    let db = service(&found, &format!("{base}/db"));
    assert_eq!(db.instances.len(), 1);
    assert_eq!((db.instances[0].address.as_deref(), db.instances[0].port), (None, Some(5432)));
    assert!(db.malformed.is_empty());

    let locks = inspect(client, &root).await.unwrap().locks;
    assert!(locks.is_empty(), "the registry's ephemeral instances are no group's members: {locks:#?}");

    // Bounded: one node read at most stops the walk and says so.
    let cut = inspect_services(client, &root, &InspectOptions::new().max_listings(1)).await.unwrap();
    assert!(cut.truncated && cut.services.is_empty(), "{cut:#?}");
    discovery.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_written_by_curator_is_recognised() {
    let (server, clients) = support::server_and_clients(1).await;
    let base = support::unique_path("inspect-discovery-java");
    let mut peer = CuratorPeer::start(&server.connect_string()).await;
    peer.cmd(&format!("dreg {base} api j1 8081 eu 3")).await;
    peer.cmd(&format!("dreg {base} api j2 8082 us 5")).await;

    let found = inspect_services(&clients[0], &base, &InspectOptions::new()).await.unwrap();
    assert_eq!(found.services.len(), 1, "{found:#?}");
    let api = &found.services[0];
    assert_eq!((api.path.clone(), api.name.as_str()), (format!("{base}/api"), "api"));
    let seen: Vec<_> = api
        .instances
        .iter()
        .map(|i| (i.id.as_str(), i.address.as_deref(), i.port, i.service_type, i.enabled))
        .collect();
    assert_eq!(
        seen,
        [
            ("j1", Some("127.0.0.1"), Some(8081), "DYNAMIC", true),
            ("j2", Some("127.0.0.1"), Some(8082), "DYNAMIC", true)
        ]
    );
    assert!(api.instances.iter().all(|i| i.session != 0), "Curator's dynamic instances are ephemeral");
    assert!(api.malformed.is_empty());
    let locks = inspect(&clients[0], &base).await.unwrap().locks;
    assert!(locks.is_empty(), "a registry is no group of members: {locks:#?}");
    peer.cmd(&format!("dclose {base}")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_whose_members_hold_json_stays_a_group() {
    let (_server, clients) = support::server_and_clients(1).await;
    let client = &clients[0];
    let root = support::unique_path("inspect-discovery-group");
    let path = format!("{root}/workers");
    // JSON a lenient reader takes for an instance, but naming neither the group nor the member.
    let data: [&[u8]; 3] = [br#"{"name":"api","id":"other","address":"10.0.0.1","port":1}"#, br#"{"a":1}"#, b"host-c"];
    let mut members = Vec::new();
    for (id, data) in ["a", "b", "c"].into_iter().zip(data) {
        let member = GroupMember::new(client, &path, id, data.to_vec()).unwrap();
        member.start().unwrap();
        assert!(member.wait_for_initial_create(std::time::Duration::from_secs(20)).await.unwrap());
        members.push(member);
    }

    let found = inspect(client, &root).await.unwrap();
    assert_eq!(found.locks.len(), 1, "{found:#?}");
    assert_eq!((found.locks[0].path.as_str(), found.locks[0].kind), (path.as_str(), LockKind::Membership));
    assert_eq!(found.locks[0].holders.len(), 3);
    let services = inspect_services(client, &root, &InspectOptions::new()).await.unwrap();
    assert!(services.services.is_empty(), "{services:#?}");
    for member in members {
        member.close().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inspect_command_lists_services_in_its_table_and_json() {
    const BIN: &str = env!("CARGO_BIN_EXE_zk-curator");
    let (server, clients) = support::server_and_clients(1).await;
    let connect = server.connect_string();
    let base = support::unique_path("inspect-discovery-cli");
    let discovery = ServiceDiscovery::<()>::builder(&clients[0], &base).build().unwrap();
    let web = ServiceInstance::builder("web").id("w1").address("10.1.1.1").port(80).build().unwrap();
    discovery.register(&web).await.unwrap();
    clients[0].create(&format!("{base}/web/broken")).data(b"{".to_vec()).await.unwrap();

    let out = Command::new(BIN).args(["--connect", &connect, "inspect", &base]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let service_line =
        text.lines().find(|l| l.starts_with(&format!("{base}/web "))).unwrap_or_else(|| panic!("{text}"));
    for cell in ["w1", "10.1.1.1", "80", "DYNAMIC", "true"] {
        assert!(service_line.split_whitespace().any(|c| c == cell), "{cell} in {service_line:?}");
    }
    assert!(text.lines().any(|l| l.contains("broken") && l.contains("malformed")), "{text}");
    assert!(!text.contains("membership"), "the registry is no group: {text}");

    let out = Command::new(BIN).args(["--connect", &connect, "inspect", &base, "--json"]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let items: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let web = items.as_array().unwrap().iter().find(|i| i["kind"] == "service").unwrap_or_else(|| panic!("{items}"));
    assert_eq!(web["path"], format!("{base}/web"));
    assert_eq!(web["instances"][0]["id"], "w1");
    assert_eq!(web["instances"][0]["port"], 80);
    assert_eq!(web["malformed"][0]["node"], format!("{base}/web/broken"));
    assert_eq!(items.as_array().unwrap().len(), 1, "the service alone, no membership lock: {items}");
    discovery.close().await.unwrap();
}

/// `max_listings` bounds every read of `inspect_services` (getChildren and getData alike): a
/// service with many instances is listed whole when its reads fit, and not at all — with
/// `truncated` and no more requests than allowed — when they do not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wide_service_is_read_whole_within_max_listings_or_not_at_all() {
    const INSTANCES: usize = 150;
    let (_server, clients) = support::server_and_clients(1).await;
    let client = &clients[0];
    let base = support::unique_path("inspect-wide-service");
    let discovery = ServiceDiscovery::<()>::builder(client, &base).build().unwrap();
    let instances: Vec<_> = (0..INSTANCES)
        .map(|i| ServiceInstance::builder("wide").id(format!("i{i:03}")).port(1000 + i as u16).build().unwrap())
        .collect();
    discovery.register_all(&instances).await.unwrap();

    // Listing BASE, reading and listing BASE/wide, reading each instance.
    let reads = 1 + 1 + 1 + INSTANCES;
    let found = inspect_services(client, &base, &InspectOptions::new().max_listings(reads)).await.unwrap();
    assert!(!found.truncated, "{found:#?}");
    assert_eq!(found.requests, reads);
    let wide = service(&found, &format!("{base}/wide"));
    assert_eq!(wide.instances.len(), INSTANCES, "every instance is listed");
    assert_eq!(wide.instances[INSTANCES - 1].port, Some(1000 + INSTANCES as u16 - 1));

    let cut = inspect_services(client, &base, &InspectOptions::new().max_listings(reads - 1)).await.unwrap();
    assert!(cut.truncated, "{cut:#?}");
    assert!(cut.requests < reads, "{} reads sent, {} allowed", cut.requests, reads - 1);
    assert!(cut.services.is_empty(), "a service is not listed in part: {cut:#?}");
    discovery.close().await.unwrap();
}
