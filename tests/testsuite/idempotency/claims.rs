//! Claims: exactly one `Started` among concurrent duplicates on many sessions; a crash or an
//! expired session frees the key; a lost claim's `complete` is refused and records nothing.

use std::sync::Arc;
use std::time::Duration;

use zk_curator::idempotency::Begin;
use zk_curator::testing::expire_session;
use zk_curator::Error;

use super::{keys, kind, started};
use crate::support::{self, join, observer, server_and_clients};

#[tokio::test]
async fn exactly_one_of_many_concurrent_duplicates_is_started_and_all_later_ones_get_its_result() {
    let (_server, clients) = server_and_clients(3).await;
    let base = keys(&clients[0], "idem-dup");
    let mut tasks = Vec::new();
    let barrier = Arc::new(tokio::sync::Barrier::new(clients.len() * 8));
    for client in &clients {
        for _ in 0..8 {
            let keys =
                zk_curator::idempotency::IdempotencyKeys::new(client, base.base(), base.retention()).expect("keys");
            let barrier = barrier.clone();
            tasks.push(crate::support::spawn(async move {
                barrier.wait().await;
                keys.begin("order-1").await.expect("begin")
            }));
        }
    }
    let mut claims = Vec::new();
    let mut others = Vec::new();
    for task in tasks {
        match join("a duplicate's begin", Duration::from_secs(30), task).await {
            Begin::Started(claim) => claims.push(claim),
            other => others.push(kind(&other)),
        }
    }
    assert_eq!(claims.len(), 1, "exactly one duplicate is Started; the others: {others:?}");
    assert!(others.iter().all(|k| k == "in-progress"), "the others see it in progress: {others:?}");
    claims.pop().expect("one claim").complete(b"receipt-1".to_vec()).await.expect("complete");
    for client in &clients {
        let keys = zk_curator::idempotency::IdempotencyKeys::new(client, base.base(), base.retention()).expect("keys");
        let again = keys.begin("order-1").await.expect("begin after completion");
        assert_eq!(kind(&again), "done:receipt-1", "every later duplicate gets the recorded result");
    }
}

#[tokio::test]
async fn a_crashed_claimants_key_is_free_again_for_a_retry() {
    let (server, clients) = server_and_clients(2).await;
    let connect = server.connect_string();
    let a = keys(&clients[0], "idem-crash");
    let b = zk_curator::idempotency::IdempotencyKeys::new(&clients[1], a.base(), a.retention()).expect("keys");
    let claim = started(a.begin("req-1").await.expect("begin"), "the first request");
    assert_eq!(kind(&b.begin("req-1").await.expect("begin")), "in-progress");
    // The process "crashes": its session ends without a word from it (the claim is never dropped).
    std::mem::forget(claim);
    expire_session(&connect, &clients[0]).await.expect("expire");
    let retry = started(b.begin("req-1").await.expect("begin after the crash"), "the retry after the crash");
    retry.complete(b"ok".to_vec()).await.expect("the retry records its outcome");
    assert_eq!(kind(&a.begin("req-1").await.expect("begin")), "done:ok");
}

#[tokio::test]
async fn a_lost_claims_complete_is_refused_and_records_nothing() {
    let (server, clients) = server_and_clients(2).await;
    let connect = server.connect_string();
    let a = keys(&clients[0], "idem-lost");
    let b = zk_curator::idempotency::IdempotencyKeys::new(&clients[1], a.base(), a.retention()).expect("keys");
    let lost = started(a.begin("req-1").await.expect("begin"), "a");
    let lost_alone = started(a.begin("req-2").await.expect("begin"), "a, second key");
    expire_session(&connect, &clients[0]).await.expect("expire");
    support::session_replaced(&clients[0], lost.session().id).await;
    // Someone else retries req-1 and holds it now.
    let retry = started(b.begin("req-1").await.expect("begin"), "b's retry");
    let path = lost.path().to_string();
    match lost.complete(b"from-a".to_vec()).await {
        Err(Error::LockLost { node, .. }) => assert_eq!(node, path, "the error names the key's node"),
        other => panic!("a lost claim's complete must be refused with LockLost, got {other:?}"),
    }
    assert_eq!(kind(&a.begin("req-1").await.expect("begin")), "in-progress", "b's claim is untouched");
    retry.complete(b"from-b".to_vec()).await.expect("b completes");
    assert_eq!(kind(&a.begin("req-1").await.expect("begin")), "done:from-b");
    // And with nobody else there: nothing recorded, the key free.
    let path2 = lost_alone.path().to_string();
    assert!(matches!(lost_alone.complete(b"x".to_vec()).await, Err(Error::LockLost { .. })));
    assert!(!support::exists(&observer(&connect).await, &path2).await, "nothing recorded at {path2}");
}

#[tokio::test]
async fn a_duplicate_waiting_for_the_in_progress_request_gets_its_result() {
    let (_server, clients) = server_and_clients(2).await;
    let a = keys(&clients[0], "idem-wait");
    let b = zk_curator::idempotency::IdempotencyKeys::new(&clients[1], a.base(), a.retention()).expect("keys");
    let claim = started(a.begin("req").await.expect("begin"), "a");
    let waiter = crate::support::spawn(async move { b.wait_done_timeout("req", Duration::from_secs(20)).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    claim.complete(b"42".to_vec()).await.expect("complete");
    let got = join("wait_done", Duration::from_secs(30), waiter).await.expect("wait_done");
    assert_eq!(got, Some(zk_curator::idempotency::Settled::Done { result: b"42".to_vec() }));
    // A key still in progress at the deadline: `Ok(None)` (a wait's time-out is no error), within a
    // bound against a hang.
    let _held = started(a.begin("slow").await.expect("begin"), "slow");
    let c = zk_curator::idempotency::IdempotencyKeys::new(&clients[1], a.base(), a.retention()).expect("keys");
    let waited = tokio::time::timeout(Duration::from_secs(10), c.wait_done_timeout("slow", Duration::from_millis(300)))
        .await
        .expect("wait_done returns by its deadline");
    assert!(matches!(waited, Ok(None)), "{waited:?}");
}
