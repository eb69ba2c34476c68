//! Interop with real Curator 5.4 + curator-x-discovery (tests/java/CuratorPeer.java), both ways:
//! a Java-registered instance (its payload a Java class) is found, parsed and picked by ours; ours
//! is found and parsed by Curator's ServiceDiscovery, ServiceCache and ServiceProvider; both caches
//! over one registry end equal.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use zk_curator::discovery::{InstanceSerializer, JsonInstanceSerializer, ServiceDiscovery, ServiceInstance, UriSpec};

use super::WITHIN;
use crate::support;
use crate::support::curator_peer::CuratorPeer;

/// The peer's `PeerPayload`, field for field.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
struct PeerPayload {
    region: String,
    weight: i32,
}

const JAVA_CLASS: &str = "CuratorPeer$PeerPayload";

fn ours(id: &str, port: u16, region: &str, weight: i32) -> ServiceInstance<PeerPayload> {
    ServiceInstance::builder("api")
        .id(id)
        .address("127.0.0.1")
        .port(port)
        .uri_spec(UriSpec::parse("{scheme}://{address}:{port}").unwrap())
        .payload(PeerPayload { region: region.into(), weight })
        .build()
        .unwrap()
}

/// The ids listed by a peer `INSTANCES` answer.
fn listed_ids(answer: &str) -> BTreeSet<String> {
    let body = answer.strip_prefix("INSTANCES").expect("an INSTANCES answer").trim();
    body.split(';').filter(|s| !s.is_empty()).map(|s| s.split('|').next().unwrap().to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_curator_registered_instance_is_found_parsed_and_picked_by_ours_byte_for_byte() {
    let (server, clients) = support::server_and_clients(1).await;
    let connect = server.connect_string();
    let base = support::unique_path("discovery-interop-java");
    let mut peer = CuratorPeer::start(&connect).await;
    peer.cmd(&format!("dreg {base} api j1 8081 eu 3")).await;
    peer.cmd(&format!("dreg {base} api j2 8082 us 5")).await;

    let discovery = ServiceDiscovery::<PeerPayload>::builder(&clients[0], &base).build().unwrap();
    let found = discovery.query_for_instances("api").await.unwrap();
    assert_eq!(found.iter().map(|i| i.id()).collect::<Vec<_>>(), ["j1", "j2"]);
    let j1 = &found[0];
    assert_eq!(j1.payload(), Some(&PeerPayload { region: "eu".into(), weight: 3 }));
    assert_eq!((j1.address(), j1.port(), j1.ssl_port()), (Some("127.0.0.1"), Some(8081), None));
    assert_eq!(j1.build_uri(), "http://127.0.0.1:8081");
    assert!(j1.registration_time_utc() > 0 && j1.is_enabled());

    // Byte for byte: Curator's node data read and written again with the Java payload class.
    let (bytes, _) = clients[0].get_data(&format!("{base}/api/j1")).await.unwrap();
    let serializer = JsonInstanceSerializer::new().payload_class(JAVA_CLASS);
    let read: ServiceInstance<PeerPayload> = serializer.deserialize(&bytes).unwrap();
    assert_eq!(String::from_utf8(serializer.serialize(&read).unwrap()).unwrap(), String::from_utf8(bytes).unwrap());

    let provider = discovery.provider_builder("api").start().unwrap();
    assert!(provider.wait_initialized_timeout(WITHIN).await.unwrap());
    let picks: Vec<String> = (0..4).map(|_| provider.get_instance().unwrap().id().to_string()).collect();
    assert_eq!(picks, ["j1", "j2", "j1", "j2"]);

    peer.cmd(&format!("dupdate {base} api j1 9091 eu 4")).await;
    peer.cmd(&format!("dunreg {base} api j2")).await;
    support::eventually(WITHIN, "our cache follows Curator's update and unregister", || async {
        let all = provider.get_all_instances();
        all.len() == 1 && all[0].port() == Some(9091) && all[0].payload().is_some_and(|p| p.weight == 4)
    })
    .await;
    peer.cmd(&format!("dclose {base}")).await;
    support::eventually(WITHIN, "Curator's close empties our cache", || async { provider.get_instance().is_none() })
        .await;
    provider.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ours_is_found_and_parsed_by_curators_discovery_cache_and_provider_and_both_caches_end_equal() {
    let (server, clients) = support::server_and_clients(1).await;
    let connect = server.connect_string();
    let base = support::unique_path("discovery-interop-rust");
    let mut peer = CuratorPeer::start(&connect).await;
    // Default serializer: the payload as a Java map; a second discovery names the Java class.
    let untyped = ServiceDiscovery::<PeerPayload>::builder(&clients[0], &base).build().unwrap();
    let typed = ServiceDiscovery::<PeerPayload>::builder(&clients[0], &base)
        .serializer(JsonInstanceSerializer::new().payload_class(JAVA_CLASS))
        .build()
        .unwrap();
    let r1 = ours("r1", 8080, "eu", 1).to_builder().ssl_port(8443).build().unwrap();
    untyped.register(&r1).await.unwrap();
    typed.register(&ours("r2", 8090, "us", 2)).await.unwrap();

    assert_eq!(peer.cmd(&format!("dnames {base}")).await, "NAMES api");
    assert_eq!(
        peer.cmd(&format!("dlist {base} api")).await,
        "INSTANCES r1|127.0.0.1|8080|8443|true|https://127.0.0.1:8080|java.util.LinkedHashMap|{region=eu,_weight=1};\
         r2|127.0.0.1|8090|null|true|http://127.0.0.1:8090|CuratorPeer$PeerPayload|{region=us,_weight=2}"
    );
    peer.cmd(&format!("dcache c {base} api")).await;
    assert_eq!(listed_ids(&peer.cmd("dcachedump c").await), ["r1", "r2"].map(String::from).into());
    peer.cmd(&format!("dprovider p {base} api")).await;
    let picks = peer.cmd("dpick p 4").await;
    let picked: Vec<&str> = picks.strip_prefix("PICKS ").unwrap().split(',').collect();
    assert_eq!(picked.iter().filter(|p| **p == "r1").count(), 2, "{picks}");
    assert_eq!(picked.iter().filter(|p| **p == "r2").count(), 2, "{picks}");

    // Registrations, updates and unregistrations from both sides: both caches end equal.
    let cache = untyped.service_cache("api").unwrap();
    assert!(cache.wait_initialized_timeout(WITHIN).await.unwrap());
    peer.cmd(&format!("dreg {base} api j1 7001 eu 1")).await;
    untyped.update(&r1.to_builder().port(8081).build().unwrap()).unwrap();
    typed.unregister(&ours("r2", 8090, "us", 2)).await.unwrap();
    peer.cmd(&format!("dreg {base} api j2 7002 eu 1")).await;
    peer.cmd(&format!("dunreg {base} api j1")).await;
    let expected: BTreeSet<String> = ["r1", "j2"].map(String::from).into();
    support::eventually(WITHIN, "our cache holds r1 and j2", || async {
        cache.instances().iter().map(|i| i.id().to_string()).collect::<BTreeSet<_>>() == expected
    })
    .await;
    let deadline = std::time::Instant::now() + WITHIN;
    let java_view = loop {
        let view = peer.cmd("dcachedump c").await;
        if listed_ids(&view) == ["j2", "r1"].map(String::from).into() || std::time::Instant::now() > deadline {
            break view;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(listed_ids(&java_view), ["j2", "r1"].map(String::from).into(), "Curator's cache: {java_view}");
    assert!(java_view.contains("r1|127.0.0.1|8081|"), "Curator's cache has our update: {java_view}");

    untyped.close().await.unwrap();
    peer.cmd(&format!("dclose {base}")).await;
    assert_eq!(peer.cmd(&format!("dlist {base} api")).await, "INSTANCES ");
    support::eventually(WITHIN, "our cache empties", || async { cache.is_empty() }).await;
}
