//! `DistributedBarrier`: set, wait, remove; deadlines; a waiter across a session loss.

use std::time::{Duration, Instant};

use zk_curator::barriers::DistributedBarrier;

use crate::support;

const HANG: Duration = Duration::from_secs(60);

#[tokio::test]
async fn waiters_pass_only_once_the_barrier_is_removed() {
    let (_server, clients) = support::server_and_clients(2).await;
    let path = support::unique_path("barrier");
    let setter = DistributedBarrier::new(&clients[0], &path).unwrap();
    let waiter = DistributedBarrier::new(&clients[1], &path).unwrap();
    assert!(waiter.wait_on_barrier_timeout(HANG).await.unwrap(), "no barrier: passes at once");
    setter.set_barrier().await.unwrap();
    setter.set_barrier().await.unwrap();
    assert!(waiter.is_set().await.unwrap());
    let waiting = crate::support::spawn(async move { waiter.wait_on_barrier().await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "a waiter passed a barrier that is set");
    setter.remove_barrier().await.unwrap();
    support::join("the waiter", HANG, waiting).await.unwrap();
    setter.remove_barrier().await.unwrap();
}

#[tokio::test]
async fn a_timed_wait_on_a_set_barrier_returns_false_within_its_timeout() {
    let (_server, clients) = support::server_and_clients(1).await;
    let barrier = DistributedBarrier::new(&clients[0], &support::unique_path("barrier-timeout")).unwrap();
    barrier.set_barrier().await.unwrap();
    let start = Instant::now();
    assert!(!barrier.wait_on_barrier_timeout(Duration::from_millis(300)).await.unwrap());
    assert!(start.elapsed() < Duration::from_secs(5), "took {:?}", start.elapsed());
    // An absurd timeout means forever, never a panic.
    barrier.remove_barrier().await.unwrap();
    assert!(barrier.wait_on_barrier_timeout(Duration::MAX).await.unwrap());
}

#[tokio::test]
async fn a_waiter_whose_session_is_lost_keeps_waiting_and_passes_after_the_removal() {
    let (server, clients) = support::server_and_clients(2).await;
    let path = support::unique_path("barrier-expiry");
    let setter = DistributedBarrier::new(&clients[0], &path).unwrap();
    setter.set_barrier().await.unwrap();
    let waiter = DistributedBarrier::new(&clients[1], &path).unwrap();
    let waiting = crate::support::spawn(async move { waiter.wait_on_barrier().await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let old = clients[1].session_id();
    zk_curator::testing::expire_session(&server.connect_string(), &clients[1]).await.unwrap();
    support::session_replaced(&clients[1], old).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiting.is_finished(), "a session loss let the waiter through a barrier that is set");
    setter.remove_barrier().await.unwrap();
    support::join("the waiter", HANG, waiting).await.unwrap();
}

#[tokio::test]
async fn a_bad_barrier_path_is_a_typed_error_naming_it() {
    let (_server, clients) = support::server_and_clients(1).await;
    for bad in ["", "no-slash", "/trailing/", "/a//b"] {
        match DistributedBarrier::new(&clients[0], bad) {
            Err(zk_curator::Error::InvalidPath { path, .. }) => assert_eq!(path, bad),
            other => panic!("{bad:?}: {other:?}"),
        }
    }
}
