//! `SharedCount` / `SharedValue`: Curator's 4 bytes, following another client's changes,
//! versioned compare-and-set, a set whose reply was lost, a node deleted under them, and timed
//! writes on a silent link.

use std::time::{Duration, Instant};

use zk_curator::shared::{SharedCount, SharedValue};
use zk_curator::testing::{FaultProxy, ProxyMode};
use zk_curator::{Error, ErrorCode, ErrorKind};

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
    let attempt = crate::support::spawn({
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

fn assert_no_node<T: std::fmt::Debug>(result: zk_curator::Result<T>, path: &str, what: &str) {
    match result {
        Err(e) if e.code() == Some(ErrorCode::NoNode) => {
            assert!(e.to_string().contains(path), "{what}: the error does not name {path}: {e}");
        }
        other => panic!("{what}: expected NoNode naming {path}, got {other:?}"),
    }
}

#[tokio::test]
async fn the_documented_try_set_loop_ends_with_no_node_when_the_node_was_deleted() {
    let (server, clients) = support::server_and_clients(1).await;
    let zk = support::observer(&server.connect_string()).await;
    let count_path = support::unique_path("shared-count-deleted");
    let value_path = support::unique_path("shared-value-deleted");
    let count = SharedCount::start(&clients[0], &count_path, 3).await.unwrap();
    let value = SharedValue::start(&clients[0], &value_path, b"v".to_vec()).await.unwrap();
    zk.delete(&count_path, None).await.unwrap();
    zk.delete(&value_path, None).await.unwrap();

    // The loop of `SharedCount::try_set`'s example. A deleted node is not a race lost to another
    // writer: no version can match it, so `Ok(false)` would make this loop spin for ever.
    let mut turns = 0;
    let ended = loop {
        turns += 1;
        assert!(turns <= 20, "the documented loop still spins after {turns} turns on a deleted node");
        let current = count.versioned_value();
        match count.try_set(current.value() * 2, &current).await {
            Ok(true) => panic!("set a deleted count"),
            Ok(false) => continue,
            Err(e) => break Err::<(), _>(e),
        }
    };
    assert_no_node(ended, &count_path, "SharedCount::try_set on a deleted node");
    assert_no_node(count.set_count(9).await, &count_path, "SharedCount::set_count on a deleted node");
    let current = value.versioned_value();
    assert_no_node(value.try_set(b"w".to_vec(), &current).await, &value_path, "SharedValue::try_set");
    assert!(!support::exists(&zk, &count_path).await && !support::exists(&zk, &value_path).await, "re-created");

    // Made again (by anyone): the follower sees it and the loop works from the fresh value.
    let again = SharedCount::start(&clients[0], &count_path, 5).await.unwrap();
    support::eventually(HANG, "the first count follows the re-created node", || async { count.count() == 5 }).await;
    let current = count.versioned_value();
    assert!(count.try_set(current.value() * 2, &current).await.unwrap());
    assert_eq!(zk.get_data(&count_path).await.unwrap().0, 10i32.to_be_bytes().to_vec());
    drop(again);
}

#[tokio::test]
async fn a_timed_write_returns_within_its_timeout_on_a_silent_link_and_the_value_stays_consistent() {
    let server = support::server().await;
    let zk = support::observer(&server.connect_string()).await;
    let proxy = FaultProxy::start(&server.connect_string()).await.expect("proxy");
    let client = support::client(&proxy.connect_string()).await;
    let count_path = support::unique_path("shared-count-timed");
    let value_path = support::unique_path("shared-value-timed");
    let timeout = Duration::from_millis(500);
    let count = SharedCount::start(&client, &count_path, 1).await.unwrap().timeout(timeout);
    let value = SharedValue::start(&client, &value_path, b"a".to_vec()).await.unwrap().timeout(timeout);
    count.set_count(2).await.unwrap();

    proxy.set_mode(ProxyMode::Blackhole);
    let current = count.versioned_value();
    let current_value = value.versioned_value();
    within_the_timeout("SharedCount::set_count", count.set_count(3)).await;
    within_the_timeout("SharedCount::try_set", async { count.try_set(4, &current).await.map(drop) }).await;
    within_the_timeout("SharedValue::set", value.set(b"b".to_vec())).await;
    within_the_timeout("SharedValue::try_set", async { value.try_set(b"c".to_vec(), &current_value).await.map(drop) })
        .await;
    proxy.set_mode(ProxyMode::Pass);

    // Consistent: each handle follows the node's value and version, and a compare-and-set from
    // them applies exactly once.
    let (data, stat) = zk.get_data(&count_path).await.unwrap();
    support::eventually(HANG, "the count follows the node", || async {
        let seen = count.versioned_value();
        (seen.version(), seen.value().to_be_bytes().to_vec()) == (stat.version, data.clone())
    })
    .await;
    let (data, stat) = zk.get_data(&value_path).await.unwrap();
    support::eventually(HANG, "the value follows the node", || async {
        let seen = value.versioned_value();
        (seen.version(), seen.value().clone()) == (stat.version, data.clone())
    })
    .await;
    let current = count.versioned_value();
    assert!(count.try_set(current.value() + 1, &current).await.unwrap());
    let (data, stat) = zk.get_data(&count_path).await.unwrap();
    assert_eq!((data, stat.version), ((current.value() + 1).to_be_bytes().to_vec(), current.version() + 1));
}

/// `write` (of a handle with a 500 ms timeout) ends with `DeadlineExceeded`, within the timeout
/// (give or take the scheduling of a loaded machine).
async fn within_the_timeout(what: &str, write: impl std::future::Future<Output = zk_curator::Result<()>>) {
    let start = Instant::now();
    // A hang bound: without the timeout the write waits for the connection under the policy.
    let result = tokio::time::timeout(Duration::from_secs(5), write).await.unwrap_or_else(|_| panic!("{what} hangs"));
    assert_eq!(result.as_ref().map_err(Error::kind).err(), Some(ErrorKind::DeadlineExceeded), "{what}: {result:?}");
    assert!(start.elapsed() < Duration::from_secs(2), "{what} returned after {:?}", start.elapsed());
}

#[tokio::test]
async fn shared_count_changes_drain_as_a_stream_with_stream_combinators() {
    use futures::StreamExt;

    let (_server, clients) = support::server_and_clients(2).await;
    let path = support::unique_path("shared-count-stream");
    let reader = SharedCount::start(&clients[0], &path, 0).await.unwrap();
    let writer = SharedCount::start(&clients[1], &path, 0).await.unwrap();
    // Only counts above 2, as plain numbers: the latest value is never missed, whatever is skipped.
    let mut above_two = reader.changes().map(|seen| *seen.value()).filter(|n| std::future::ready(*n > 2));
    for n in 1..=3 {
        writer.set_count(n).await.unwrap();
    }
    let seen = tokio::time::timeout(HANG, above_two.next()).await.expect("the count in time");
    assert_eq!(seen, Some(3));
    drop(reader);
    let rest = tokio::time::timeout(HANG, above_two.collect::<Vec<_>>()).await.expect("the stream ends with the count");
    assert!(rest.is_empty(), "{rest:?}");
}
