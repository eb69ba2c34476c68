//! `SharedCount` / `SharedValue`: Curator's 4 bytes, following another client's changes,
//! versioned compare-and-set, and a set whose reply was lost.

use std::time::Duration;

use zk_curator::testing::{FaultProxy, ProxyMode};
use zk_curator::{Error, SharedCount, SharedValue};

use crate::support;

const HANG: Duration = Duration::from_secs(30);

#[tokio::test]
async fn a_shared_count_follows_another_clients_changes_and_try_set_compares_versions() {
    let (server, clients) = support::server_and_clients(2).await;
    let zk = support::observer(&server.connect_string()).await;
    let path = support::unique_path("shared-count");
    let a = SharedCount::start(&clients[0], &path, 3).await.unwrap();
    let b = SharedCount::start(&clients[1], &path, 99).await.unwrap();
    assert_eq!((a.count(), b.count()), (3, 3), "the seed only creates");
    assert_eq!(zk.get_data(&path).await.unwrap().0, 3i32.to_be_bytes().to_vec(), "4 bytes, big-endian");

    let mut changes = b.changes();
    let stale = b.versioned_value();
    a.set_count(7).await.unwrap();
    let seen = tokio::time::timeout(HANG, changes.next()).await.expect("b sees a's change").unwrap();
    assert_eq!(*seen.value(), 7);
    assert_eq!(b.count(), 7);

    assert!(!b.try_set(100, &stale).await.unwrap(), "a stale version is refused");
    assert_eq!(zk.get_data(&path).await.unwrap().0, 7i32.to_be_bytes().to_vec());
    let fresh = b.versioned_value();
    assert!(b.try_set(fresh.value() + 1, &fresh).await.unwrap());
    assert_eq!(b.count(), 8);
    support::eventually(HANG, "a follows b", || async { a.count() == 8 }).await;

    // Bytes of another size are refused at start, naming the path and the length.
    let odd = support::unique_path("shared-count-odd");
    clients[0].create(&odd).data(vec![0; 8]).creating_parents_if_needed().await.unwrap();
    match SharedCount::start(&clients[0], &odd, 1).await {
        Err(Error::CorruptedValue { path: p, len: 8, .. }) => assert_eq!(p, odd),
        other => panic!("expected CorruptedValue, got {other:?}"),
    }
    let value = SharedValue::start(&clients[1], &odd, b"x".to_vec()).await.unwrap();
    assert_eq!(value.value(), vec![0; 8]);
}

#[tokio::test]
async fn a_versioned_set_whose_reply_was_lost_is_never_reported_as_not_applied() {
    let server = support::server().await;
    let zk = support::observer(&server.connect_string()).await;
    let proxy = FaultProxy::start(&server.connect_string()).await.expect("proxy");
    let client = support::client(&proxy.connect_string()).await;
    let path = support::unique_path("shared-count-lost-reply");
    let count = SharedCount::start(&client, &path, 1).await.unwrap();
    let expected = count.versioned_value();

    // The set reaches the server; its reply does not reach us.
    proxy.set_mode(ProxyMode::DropReplies);
    let attempt = tokio::spawn({
        let count = count.clone();
        async move { count.try_set(2, &expected).await }
    });
    support::eventually(HANG, "the set applied", || async {
        zk.get_data(&path).await.map(|(d, _)| d == 2i32.to_be_bytes()).unwrap_or(false)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    proxy.set_mode(ProxyMode::Pass);
    let result = support::join("try_set", HANG, attempt).await;
    // It applied: `Ok(false)` would invite the caller to apply it again.
    match result {
        Ok(true) | Err(Error::OutcomeUnknown { .. }) => {}
        other => panic!("a set that applied was reported as {other:?}"),
    }
    let (data, stat) = zk.get_data(&path).await.unwrap();
    assert_eq!((data, stat.version), (2i32.to_be_bytes().to_vec(), 1), "applied exactly once");
}
