//! `DiscoveryPathConstructor` (Curator's): a registry in a layout of its own — registering,
//! querying, caching and unregistering all follow it, and a discovery of the standard layout over
//! the same base does not see its instances where they are not.

use std::collections::BTreeSet;

use zk_curator::discovery::{DiscoveryPathConstructor, ServiceDiscovery, StandardPathConstructor};

use super::registration::{instance, Details};
use super::WITHIN;
use crate::support;

/// `BASE/NAME/hosts/ID`.
struct HostsLayout {
    base: String,
}

impl DiscoveryPathConstructor for HostsLayout {
    fn base_path(&self) -> &str {
        &self.base
    }

    fn path_for_instances(&self, service_name: &str) -> String {
        format!("{}/{service_name}/hosts", self.base)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_layout_places_finds_caches_and_removes_instances_where_it_says() {
    let (server, clients) = support::server_and_clients(2).await;
    let base = support::unique_path("discovery-layout");
    let layout = |client| {
        ServiceDiscovery::<Details>::builder(client, "/ignored-when-a-constructor-is-set")
            .path_constructor(HostsLayout { base: base.clone() })
            .build()
            .unwrap()
    };
    let (writer, reader) = (layout(&clients[0]), layout(&clients[1]));
    assert_eq!(writer.base_path(), base);
    assert_eq!(writer.path_for_instance("api", "a"), format!("{base}/api/hosts/a"));
    let cache = reader.service_cache("api").unwrap();
    assert!(cache.wait_initialized_timeout(WITHIN).await.unwrap());

    let (a, b, db) = (instance("api", "a", 1), instance("api", "b", 2), instance("db", "d", 3));
    writer.register(&a).await.unwrap();
    writer.register_all(&[b.clone(), db.clone()]).await.unwrap();
    let obs = support::observer(&server.connect_string()).await;
    assert_eq!(support::sorted_children(&obs, &format!("{base}/api/hosts")).await, ["a", "b"]);
    assert_eq!(support::sorted_children(&obs, &format!("{base}/db/hosts")).await, ["d"]);
    assert_eq!(reader.query_for_names().await.unwrap(), ["api", "db"]);
    assert_eq!(reader.query_for_instances("api").await.unwrap(), [a.clone(), b.clone()]);
    assert_eq!(reader.query_for_instance("db", "d").await.unwrap(), Some(db.clone()));
    support::eventually(WITHIN, "the cache of the layout holds both", || async {
        cache.instances().iter().map(|i| i.id().to_string()).collect::<BTreeSet<_>>()
            == BTreeSet::from(["a".into(), "b".into()])
    })
    .await;

    // The standard layout over the same base finds the services but not the instances (they are
    // one level further down).
    let standard = ServiceDiscovery::<Details>::builder(&clients[1], &base).build().unwrap();
    assert!(standard.query_for_instances("api").await.unwrap().is_empty());

    writer.unregister(&a).await.unwrap();
    assert_eq!(support::sorted_children(&obs, &format!("{base}/api/hosts")).await, ["b"]);
    writer.close().await.unwrap();
    support::eventually(WITHIN, "the cache of the layout empties on close", || async { cache.is_empty() }).await;
    assert!(support::sorted_children(&obs, &format!("{base}/db/hosts")).await.is_empty());
}

#[test]
fn the_standard_layout_is_base_name_and_refuses_a_bad_base() {
    let standard = StandardPathConstructor::new("/services").unwrap();
    assert_eq!((standard.base_path(), standard.path_for_instances("api").as_str()), ("/services", "/services/api"));
    assert!(matches!(StandardPathConstructor::new("services/"), Err(zk_curator::Error::InvalidPath { .. })));
}

/// A layout whose paths are whatever it is given.
struct Fixed {
    base: &'static str,
    instances: &'static str,
}

impl DiscoveryPathConstructor for Fixed {
    fn base_path(&self) -> &str {
        self.base
    }

    fn path_for_instances(&self, _service_name: &str) -> String {
        self.instances.to_string()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absurd_layouts_and_names_are_typed_errors_naming_the_value_and_leave_nothing() {
    let (server, clients) = support::server_and_clients(1).await;
    let client = &clients[0];
    let root = support::unique_path("discovery-layout-absurd");
    for base in ["", "relative", "/trailing/", "//"] {
        let built = ServiceDiscovery::<Details>::builder(client, "/ok")
            .path_constructor(Fixed { base, instances: "/x" })
            .build();
        assert!(
            matches!(&built, Err(zk_curator::Error::InvalidPath { path, .. }) if path == base),
            "{base:?}: {built:?}"
        );
    }
    // A base that is valid, instance paths that are not: every call that uses one says so.
    for instances in ["", "relative/api", "/trailing/"] {
        let discovery = ServiceDiscovery::<Details>::builder(client, "/ok")
            .path_constructor(Fixed { base: "/", instances })
            .build()
            .unwrap();
        let a = instance("api", "a", 1);
        let registered = discovery.register(&a).await;
        assert!(matches!(&registered, Err(zk_curator::Error::InvalidPath { .. })), "{instances:?}: {registered:?}");
        let queried = discovery.query_for_instances("api").await;
        assert!(matches!(&queried, Err(zk_curator::Error::InvalidPath { .. })), "{instances:?}: {queried:?}");
        let one = discovery.query_for_instance("api", "a").await;
        assert!(matches!(&one, Err(zk_curator::Error::InvalidPath { .. })), "{instances:?}: {one:?}");
        let cache = discovery.service_cache("api");
        assert!(matches!(&cache, Err(zk_curator::Error::InvalidPath { .. })), "{instances:?}: {:?}", cache.err());
        discovery.close().await.unwrap();
    }
    // The standard layout at "/" with unicode and odd names: no panic, names refused by type.
    let discovery = ServiceDiscovery::<Details>::builder(client, &root).build().unwrap();
    let standard = StandardPathConstructor::new("/").unwrap();
    assert_eq!(standard.path_for_instances("dienst-ü"), "/dienst-ü");
    let unicode = instance("dienst-ü", "ид-1", 1);
    discovery.register(&unicode).await.unwrap();
    assert_eq!(discovery.query_for_instances("dienst-ü").await.unwrap(), [unicode]);
    for name in ["", "a/b", ".", ".."] {
        let found = discovery.query_for_instances(name).await;
        assert!(
            matches!(&found, Err(zk_curator::Error::InvalidArgument { value, .. }) if value.contains(name)),
            "{name:?}: {found:?}"
        );
    }
    discovery.close().await.unwrap();
    let obs = support::observer(&server.connect_string()).await;
    assert!(support::sorted_children(&obs, &format!("{root}/dienst-ü")).await.is_empty(), "nothing left behind");
}
