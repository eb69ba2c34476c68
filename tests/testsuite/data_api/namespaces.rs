//! `CuratorClient::using_namespace`: a view of the same client under another namespace, its node
//! made lazily, recipes on it working within it, and bad namespaces refused by name.

use crate::support;

use std::time::Duration;

use zk_curator::locks::InterProcessMutex;
use zk_curator::{CreateMode, Error, ErrorCode, Transaction};

/// Hang guard for awaits that must finish (never a timing assertion).
const HANG: Duration = Duration::from_secs(20);

/// The namespace (without its leading slash) of a fresh unique path.
fn unique_namespace(name: &str) -> String {
    support::unique_path(name).trim_start_matches('/').to_string()
}

#[tokio::test]
async fn a_namespace_view_shares_the_session_and_makes_its_namespace_on_the_first_create() {
    let (_server, clients) = support::server_and_clients(1).await;
    let client = &clients[0];
    let namespace = unique_namespace("view");
    let view = client.using_namespace(&namespace).unwrap();
    assert_eq!(view.namespace(), format!("/{namespace}"));
    assert_eq!(view.session_id(), client.session_id());

    // No parents asked for: the namespace node is made by the create that misses it.
    assert_eq!(view.create("/a").data(b"x".to_vec()).await.unwrap(), "/a");
    let (data, _) = client.get_data(&format!("/{namespace}/a")).await.unwrap();
    assert_eq!(data, b"x");
    assert_eq!(view.get_children("/").await.unwrap(), vec!["a".to_string()]);
    // A missing parent inside the namespace is still the caller's to make.
    assert_eq!(view.create("/missing/b").await.unwrap_err().code(), Some(ErrorCode::NoNode));

    // The namespace node is a container: once emptied the server may reap it; a later create
    // makes it again rather than failing.
    view.delete("/a").await.unwrap();
    // The reaper may have been first (it runs every 100 ms here).
    match client.delete(&format!("/{namespace}")).await {
        Ok(_) => {}
        Err(e) => assert_eq!(e.code(), Some(ErrorCode::NoNode), "{e}"),
    }
    assert!(client.exists(&format!("/{namespace}")).await.unwrap().is_none());
    assert_eq!(view.create("/again").await.unwrap(), "/again");
    assert!(client.exists(&format!("/{namespace}/again")).await.unwrap().is_some());

    // The root view: "" is no namespace at all.
    let root = view.using_namespace("").unwrap();
    assert_eq!(root.namespace(), "");
}

#[tokio::test]
async fn recipes_on_a_namespace_view_work_within_it_and_apart_from_other_namespaces() {
    let (_server, clients) = support::server_and_clients(1).await;
    let client = &clients[0];
    let (first, second) = (unique_namespace("ns-a"), unique_namespace("ns-b"));
    let (a, b) = (client.using_namespace(&first).unwrap(), client.using_namespace(&second).unwrap());
    // The same lock path in two namespaces: two locks, both held at once by this task.
    let in_a = InterProcessMutex::new(&a, "/lock").unwrap();
    let in_b = InterProcessMutex::new(&b, "/lock").unwrap();
    let held_a = tokio::time::timeout(HANG, in_a.try_lock_for(Duration::from_secs(5))).await.unwrap().unwrap();
    let held_b = tokio::time::timeout(HANG, in_b.try_lock_for(Duration::from_secs(5))).await.unwrap().unwrap();
    assert!(held_a.is_some(), "the lock in {first}");
    assert!(held_b.is_some(), "the lock in {second}: another namespace's lock of the same path");
    // Their nodes are under each namespace, seen from the base client.
    assert_eq!(client.get_children(&format!("/{first}/lock")).await.unwrap().len(), 1);
    assert_eq!(client.get_children(&format!("/{second}/lock")).await.unwrap().len(), 1);
    // And the base client's lock of the full path excludes the view's.
    let full = InterProcessMutex::new(client, &format!("/{first}/lock")).unwrap();
    assert!(full.try_lock().await.unwrap().is_none(), "the same lock through the base client");
    drop((held_a, held_b));
}

#[tokio::test]
async fn an_invalid_namespace_is_refused_naming_it() {
    let (_server, clients) = support::server_and_clients(1).await;
    let client = &clients[0];
    for bad in ["/a", "a/", "a//b", "a/./b", "a/../b", "a\u{1}b", "zookeeper/x/.."] {
        match client.using_namespace(bad) {
            Err(Error::InvalidPath { path, .. }) => assert_eq!(path, bad),
            other => panic!("namespace {bad:?}: expected InvalidPath naming it, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_transaction_as_the_first_write_of_a_namespace_view_makes_its_namespace() {
    let (_server, clients) = support::server_and_clients(1).await;
    let client = &clients[0];
    let namespace = unique_namespace("tx-first");
    let view = client.using_namespace(&namespace).unwrap();
    let transaction = Transaction::new().create("/a", b"x", CreateMode::Persistent);
    let committed = tokio::time::timeout(HANG, view.commit(transaction)).await.unwrap();
    assert!(committed.is_ok(), "a transaction in a namespace not made yet: {committed:?}");
    assert_eq!(client.get_data(&format!("/{namespace}/a")).await.unwrap().0, b"x");
    // A parent missing inside the namespace is still the caller's: NoNode, nothing applied.
    let transaction =
        Transaction::new().create("/b", b"", CreateMode::Persistent).create("/missing/c", b"", CreateMode::Persistent);
    match view.commit(transaction).await {
        Err(Error::TransactionFailed { index: 1, code: ErrorCode::NoNode, .. }) => {}
        other => panic!("expected NoNode at the second operation, got {other:?}"),
    }
    assert!(view.exists("/b").await.unwrap().is_none(), "a failed transaction applies nothing");
}

#[tokio::test]
async fn zookeepers_reserved_subtree_is_no_namespace() {
    let (server, clients) = support::server_and_clients(1).await;
    let client = &clients[0];
    for reserved in ["zookeeper", "zookeeper/config", "zookeeper/app"] {
        match client.using_namespace(reserved) {
            Err(Error::InvalidPath { path, .. }) => assert_eq!(path, reserved),
            Ok(view) => panic!("namespace {reserved:?} accepted: {:?}", view.namespace()),
            Err(other) => panic!("namespace {reserved:?}: expected InvalidPath naming it, got {other:?}"),
        }
        let built = zk_curator::CuratorClient::builder(&server.connect_string()).namespace(reserved).connect().await;
        assert!(matches!(built, Err(Error::InvalidPath { .. })), "builder namespace {reserved:?}: {built:?}");
    }
    // A namespace that only starts with the same letters is an ordinary one.
    assert!(client.using_namespace(&unique_namespace("zookeeperish")).is_ok());
    assert!(client.using_namespace("zookeepers").is_ok());
}
