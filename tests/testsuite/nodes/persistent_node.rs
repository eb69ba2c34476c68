//! `PersistentNode`: every mode keeps exactly one node, re-created with its latest data after a
//! delete by someone else; close deletes exactly its own node; quick start/close, cancelled close
//! and drop without a runtime leave nothing; bad input is a typed error.

use std::time::Duration;

use zk_curator::nodes::{PersistentNode, Protection};
use zk_curator::{CreateMode, Error, ErrorKind};

use super::WITHIN;
use crate::support;

async fn started(client: &zk_curator::CuratorClient, path: &str, mode: CreateMode, protected: bool) -> PersistentNode {
    let node = PersistentNode::new(
        client,
        path,
        mode,
        if protected { Protection::Protected } else { Protection::Unprotected },
        b"v1".to_vec(),
    )
    .unwrap();
    node.start().unwrap();
    assert!(node.wait_for_initial_create(WITHIN).await.unwrap(), "{mode:?} created");
    node
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_mode_keeps_one_node_with_its_data_and_close_deletes_exactly_it() {
    let (server, clients) = support::server_and_clients(1).await;
    let client = &clients[0];
    let obs = support::observer(&server.connect_string()).await;
    let modes = [
        (CreateMode::Ephemeral, false),
        (CreateMode::EphemeralSequential, false),
        (CreateMode::EphemeralSequential, true),
        (CreateMode::Ephemeral, true),
        (CreateMode::Persistent, false),
        (CreateMode::PersistentWithTtl(Duration::from_secs(60)), false),
    ];
    for (mode, protected) in modes {
        let parent = support::unique_path("modes");
        let path = format!("{parent}/member-");
        let node = started(client, &path, mode, protected).await;
        let actual = node.actual_path().expect("an actual path");
        let children = support::sorted_children(&obs, &parent).await;
        assert_eq!(children.len(), 1, "{mode:?} protected={protected}: one node: {children:?}");
        assert_eq!(format!("{parent}/{}", children[0]), actual, "{mode:?}: the actual path is the node");
        assert_eq!(zk_curator::framework::is_protected(&children[0]), protected, "{mode:?}: protection as asked");
        let (data, stat) = obs.get_data(&actual).await.unwrap();
        assert_eq!(data, b"v1");
        assert_eq!(stat.ephemeral_owner != 0, mode.is_ephemeral(), "{mode:?}: ephemeral as asked");
        node.set_data(b"v2".to_vec()).unwrap();
        support::eventually(WITHIN, "the new data is written", || async {
            obs.get_data(&actual).await.map(|(d, _)| d == b"v2").unwrap_or(false)
        })
        .await;
        node.close().await.unwrap();
        assert_eq!(node.actual_path(), None);
        assert!(support::sorted_children(&obs, &parent).await.is_empty(), "{mode:?}: close deleted the node");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_deleted_by_someone_else_is_created_again_with_its_latest_data() {
    let (server, clients) = support::server_and_clients(1).await;
    let obs = support::observer(&server.connect_string()).await;
    for (mode, protected) in [(CreateMode::Ephemeral, false), (CreateMode::EphemeralSequential, true)] {
        let parent = support::unique_path("deleted");
        let node = started(&clients[0], &format!("{parent}/n"), mode, protected).await;
        node.set_data(b"latest".to_vec()).unwrap();
        let first = node.actual_path().unwrap();
        support::eventually(WITHIN, "data set", || async {
            obs.get_data(&first).await.map(|(d, _)| d == b"latest").unwrap_or(false)
        })
        .await;
        obs.delete(&first, None).await.unwrap();
        support::eventually(WITHIN, "the node is created again", || async {
            node.actual_path().is_some_and(|p| p != first || mode == CreateMode::Ephemeral)
                && support::sorted_children(&obs, &parent).await.len() == 1
        })
        .await;
        let again = node.actual_path().unwrap();
        let (data, _) = obs.get_data(&again).await.unwrap();
        assert_eq!(data, b"latest", "{mode:?}: re-created with the latest data");
        node.close().await.unwrap();
        assert!(support::sorted_children(&obs, &parent).await.is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_deletes_its_own_node_never_a_node_at_its_former_name() {
    // CURATOR-506: a sequential node re-created under another name; close must delete the new
    // one and leave whatever sits at the old name.
    let (server, clients) = support::server_and_clients(1).await;
    let obs = support::observer(&server.connect_string()).await;
    let parent = support::unique_path("own-node");
    let node = started(&clients[0], &format!("{parent}/n-"), CreateMode::EphemeralSequential, true).await;
    let first = node.actual_path().unwrap();
    obs.delete(&first, None).await.unwrap();
    support::eventually(WITHIN, "re-created under a new name", || async {
        node.actual_path().is_some_and(|p| p != first)
    })
    .await;
    let options = zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    obs.create(&first, b"someone else's", &options).await.unwrap();
    node.close().await.unwrap();
    let left = support::sorted_children(&obs, &parent).await;
    assert_eq!(left, [support::node_name(&first).to_string()], "only the other node is left");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quick_start_and_close_or_drop_leaves_no_node() {
    // CURATOR-297: a close while the create is in flight left the ephemeral node behind.
    let (server, clients) = support::server_and_clients(1).await;
    let connect = server.connect_string();
    let parent = support::unique_path("quick");
    for i in 0..30u64 {
        let protected = i % 2 == 0;
        let mode = if i % 4 < 2 { CreateMode::Ephemeral } else { CreateMode::EphemeralSequential };
        let node = PersistentNode::new(
            &clients[0],
            &format!("{parent}/n{i}-"),
            mode,
            if protected { Protection::Protected } else { Protection::Unprotected },
            vec![],
        )
        .unwrap();
        node.start().unwrap();
        // Closed before, while and after the create is in flight.
        tokio::time::sleep(Duration::from_micros(i * 150)).await;
        if i % 3 == 0 {
            drop(node);
        } else {
            node.close().await.unwrap();
        }
    }
    let left = support::eventually_no_children(&connect, &parent, WITHIN).await;
    assert!(left.is_empty(), "nodes left behind: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quick_start_then_close_drop_or_cancelled_close_of_a_persistent_node_leaves_no_node_and_no_marker() {
    // Persistent and TTL nodes are made with a create marker child: a close, a drop or a
    // cancelled close landing while that create, its marker's delete or a lost reply's
    // resolution is in flight must leave neither the node nor its marker.
    let (server, clients) = support::server_and_clients(1).await;
    let connect = server.connect_string();
    let parent = support::unique_path("quick-persistent");
    for i in 0..40u64 {
        let mode =
            if i % 2 == 0 { CreateMode::Persistent } else { CreateMode::PersistentWithTtl(Duration::from_secs(60)) };
        let node =
            PersistentNode::new(&clients[0], &format!("{parent}/n{i}"), mode, Protection::Unprotected, vec![]).unwrap();
        node.start().unwrap();
        tokio::time::sleep(Duration::from_micros(i * 100)).await;
        match i % 4 {
            0 => drop(node),
            1 => {
                // Dropped after 0..10 polls' worth of time, then closed again.
                let _ = tokio::time::timeout(Duration::from_micros(i * 50), node.close()).await;
                node.close().await.unwrap();
            }
            _ => node.close().await.unwrap(),
        }
    }
    let left = support::eventually_no_children(&connect, &parent, WITHIN).await;
    assert!(left.is_empty(), "nodes left behind: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_close_still_deletes_the_node() {
    let (server, clients) = support::server_and_clients(1).await;
    let connect = server.connect_string();
    let parent = support::unique_path("cancelled-close");
    let node = started(&clients[0], &format!("{parent}/n"), CreateMode::EphemeralSequential, true).await;
    // Polled once, then dropped.
    let mut close = Box::pin(node.close());
    let _ = futures::poll!(close.as_mut());
    drop(close);
    let left = support::eventually_no_children(&connect, &parent, WITHIN).await;
    assert!(left.is_empty(), "the cancelled close left {left:?}");
    // A later close waits for it and succeeds.
    node.close().await.unwrap();
}

#[test]
fn dropping_a_started_node_on_a_thread_without_a_runtime_deletes_it() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let (server, clients) = runtime.block_on(support::server_and_clients(1));
    let parent = support::unique_path("drop-no-runtime");
    let node = runtime.block_on(started(&clients[0], &format!("{parent}/n"), CreateMode::Ephemeral, false));
    // Dropped on a plain thread: no runtime there, no panic, and the node goes.
    std::thread::spawn(move || drop(node)).join().expect("drop does not panic");
    let left = runtime.block_on(support::eventually_no_children(&server.connect_string(), &parent, WITHIN));
    assert!(left.is_empty(), "the dropped node is left: {left:?}");
    runtime.block_on(clients[0].close());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_a_typed_error_naming_it() {
    let (_server, clients) = support::server_and_clients(1).await;
    let client = &clients[0];
    let bad_path = PersistentNode::new(client, "no-slash", CreateMode::Ephemeral, Protection::Unprotected, vec![]);
    assert!(matches!(bad_path, Err(Error::InvalidPath { ref path, .. }) if path == "no-slash"), "{bad_path:?}");
    let root = PersistentNode::new(client, "/", CreateMode::Ephemeral, Protection::Unprotected, vec![]);
    assert!(matches!(root, Err(Error::InvalidPath { .. })), "{root:?}");
    let container = PersistentNode::new(client, "/a", CreateMode::Container, Protection::Unprotected, vec![]);
    assert!(matches!(container, Err(Error::InvalidArgument { name: "mode", .. })), "{container:?}");
    let zero_ttl = PersistentNode::new(
        client,
        "/a",
        CreateMode::PersistentWithTtl(Duration::ZERO),
        Protection::Unprotected,
        vec![],
    );
    assert!(matches!(zero_ttl, Err(Error::InvalidArgument { name: "ttl", .. })), "{zero_ttl:?}");
    let huge = PersistentNode::new(client, "/a", CreateMode::Ephemeral, Protection::Unprotected, vec![0; 2 << 20]);
    assert_eq!(huge.unwrap_err().kind(), ErrorKind::BadArgument);
    let node = PersistentNode::new(client, "/a", CreateMode::Ephemeral, Protection::Unprotected, vec![]).unwrap();
    assert_eq!(node.set_data(vec![0; 2 << 20]).unwrap_err().kind(), ErrorKind::BadArgument);
    assert!(matches!(node.wait_for_initial_create(WITHIN).await, Err(Error::Closed { .. })), "not started");
    node.start().unwrap();
    assert!(matches!(node.start(), Err(Error::InvalidArgument { .. })), "started twice");
    node.close().await.unwrap();
    let ttl = zk_curator::nodes::PersistentTtlNode::new(client, "/t", Duration::from_millis(1), vec![]);
    assert!(matches!(ttl, Err(Error::InvalidArgument { name: "ttl", .. })), "{ttl:?}");
    let member = zk_curator::nodes::GroupMember::new(client, "/g", "a/b", vec![]);
    assert!(matches!(member, Err(Error::InvalidArgument { .. }) | Err(Error::InvalidPath { .. })), "{member:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_initial_create_returns_within_its_timeout_when_the_server_is_silent() {
    let server = support::owned_server().await;
    let proxy = zk_curator::testing::FaultProxy::start(&server.connect_string()).await.unwrap();
    let client = support::client(&proxy.connect_string()).await;
    proxy.set_mode(zk_curator::testing::ProxyMode::Blackhole);
    let node = PersistentNode::new(
        &client,
        &support::unique_path("silent"),
        CreateMode::Ephemeral,
        Protection::Unprotected,
        vec![],
    )
    .unwrap();
    node.start().unwrap();
    let start = std::time::Instant::now();
    let created = node.wait_for_initial_create(Duration::from_millis(500)).await.unwrap();
    assert!(!created);
    assert!(start.elapsed() < Duration::from_secs(2), "returned after {:?}", start.elapsed());
    proxy.set_mode(zk_curator::testing::ProxyMode::Pass);
    assert!(node.wait_for_initial_create(WITHIN).await.unwrap(), "created once the server answers");
    node.close().await.unwrap();
}

/// Clones share one node: dropping a clone leaves it kept (the node stays, still re-created by the
/// remaining clone), closing through a clone closes it for all, and once the last clone is dropped
/// the node is deleted: nothing left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persistent_node_stays_until_its_last_clone_is_dropped_then_nothing_is_left() {
    let (server, clients) = support::server_and_clients(1).await;
    let client = &clients[0];
    let obs = support::observer(&server.connect_string()).await;
    let parent = support::unique_path("pnode-clones");
    let path = format!("{parent}/n");
    let node = started(client, &path, CreateMode::Ephemeral, false).await;
    let clone = node.clone();
    let third = node.clone();
    assert_eq!(clone.actual_path(), node.actual_path(), "one node for every clone");

    drop(node);
    assert_eq!(clone.state(), zk_curator::nodes::NodeState::Started, "dropping one clone leaves the node started");
    clone.set_data(b"v2".to_vec()).unwrap();
    support::eventually(WITHIN, "the remaining clone writes to the same node, still there", || async {
        obs.get_data(&path).await.is_ok_and(|(data, _)| data == b"v2")
    })
    .await;
    assert_eq!(third.data(), b"v2", "every clone sees the same data");

    drop(clone);
    assert_eq!(third.state(), zk_curator::nodes::NodeState::Started, "still started while a clone lives");
    drop(third);
    let left = support::eventually_no_children(&server.connect_string(), &parent, WITHIN).await;
    assert!(left.is_empty(), "the last clone dropped deletes the node: {left:?}");

    // Closing through a clone closes the node for every clone.
    let node = started(client, &path, CreateMode::Persistent, true).await;
    let clone = node.clone();
    clone.close().await.unwrap();
    assert_eq!(node.state(), zk_curator::nodes::NodeState::Closed, "closed for every clone");
    assert!(support::sorted_children(&obs, &parent).await.is_empty(), "close deleted the node");
}
