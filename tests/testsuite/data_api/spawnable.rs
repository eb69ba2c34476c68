//! Data-API requests are `'static` futures, as reqwest's are: each builder owns a clone of the
//! client and its arguments, so it can be handed to `tokio::spawn` as it is, and it outlives the
//! handle it was made from.

use crate::support;

use std::future::Future;
use std::time::Duration;

use zk_curator::{CreateMode, CuratorClient, Transaction};

/// Hang guard for joins that must finish (never a timing assertion).
const HANG: Duration = Duration::from_secs(20);

/// Compiles only for futures `tokio::spawn` accepts.
fn assert_spawnable<F: Future + Send + 'static>(_: F) {}

/// Every data-API builder is a `Send + 'static` future, made from a borrowed client that does not
/// outlive the call. (Compile-time: this function does not compile if a builder borrows the
/// client or the path.)
#[allow(dead_code)]
fn every_request_is_spawnable(client: &CuratorClient) {
    let path = String::from("/spawnable");
    assert_spawnable(client.create(&path).data(b"x".to_vec()).timeout(HANG));
    assert_spawnable(client.get_data(&path).timeout(HANG));
    assert_spawnable(client.get_data(&path).watch());
    assert_spawnable(client.set_data(&path, b"y".to_vec()).version(0));
    assert_spawnable(client.exists(&path));
    assert_spawnable(client.exists(&path).watch());
    assert_spawnable(client.get_children(&path));
    assert_spawnable(client.get_children(&path).watch());
    assert_spawnable(client.delete(&path).quietly());
    assert_spawnable(client.watch(&path).recursive());
    assert_spawnable(client.commit(Transaction::new().check(&path, 0)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_api_request_can_be_spawned_as_it_is_and_outlives_its_client_handle() {
    let server = support::server().await;
    let client = support::client(&server.connect_string()).await;
    let zk = support::observer(&server.connect_string()).await;
    let path = support::unique_path("spawned");

    // The request is made from a handle dropped before the spawned task runs it.
    let handle = client.clone();
    let create = handle
        .create(&format!("{path}/job-"))
        .data(b"one".to_vec())
        .mode(CreateMode::PersistentSequential)
        .creating_parents_if_needed();
    drop(handle);
    let created = support::join("spawned create", HANG, crate::support::spawn(create)).await.expect("spawned create");
    assert!(support::exists(&zk, &created).await, "the spawned create made {created}");

    let set = crate::support::spawn(client.set_data(&created, b"two".to_vec()).version(0));
    let stat = support::join("spawned set_data", HANG, set).await.expect("spawned set_data");
    assert_eq!(stat.version, 1, "the spawned write applied once");

    let read = crate::support::spawn(client.get_data(&created).timeout(HANG));
    let (data, _) = support::join("spawned get_data", HANG, read).await.expect("spawned get_data");
    assert_eq!(data, b"two", "the spawned read sees the spawned write");

    let children = crate::support::spawn(client.get_children(&path));
    let children = support::join("spawned get_children", HANG, children).await.expect("spawned get_children");
    assert_eq!(children, vec![support::node_name(&created).to_string()]);

    let (_, watch) =
        support::join("spawned exists+watch", HANG, crate::support::spawn(client.exists(&created).watch()))
            .await
            .expect("exists");
    let deleted = crate::support::spawn(client.delete(&path).deleting_children_if_needed());
    support::join("spawned delete", HANG, deleted).await.expect("spawned delete");
    let event = tokio::time::timeout(HANG, watch).await.expect("the watch fires");
    assert_eq!(event.path, created, "the watch set by a spawned call fires on its node");
    assert!(!support::exists(&zk, &path).await, "the spawned recursive delete removed {path}");

    let gone =
        support::join("spawned exists", HANG, crate::support::spawn(client.exists(&path))).await.expect("exists");
    assert!(gone.is_none(), "nothing left behind at {path}");
}
