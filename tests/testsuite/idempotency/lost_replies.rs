//! Replies lost on the way (the request applied, its answer dropped by a `FaultProxy`): the
//! read-back resolves them, and nothing of the call frees the claim it hands out.

use std::time::Duration;

use zk_curator::idempotency::{Begin, IdempotencyKeys};
use zk_curator::testing::{FaultProxy, Latency, ProxyMode};

use super::{keys, kind, started};
use crate::support::{self, eventually, join, observer};

const HANG: Duration = Duration::from_secs(30);

#[tokio::test]
async fn a_claim_whose_create_reply_was_lost_is_started_once_and_stays_claimed() {
    let server = support::server().await;
    let zk = observer(&server.connect_string()).await;
    let proxy = FaultProxy::start(&server.connect_string()).await.expect("proxy");
    let client = support::client(&proxy.connect_string()).await;
    let other = support::client(&server.connect_string()).await;
    let ours = keys(&client, "idem-lost-create");
    let theirs = IdempotencyKeys::new(&other, ours.base(), ours.retention()).expect("keys");
    // The base exists: each round's first create is the claim itself.
    started(ours.begin("warm-up").await.expect("begin"), "warm-up").complete(b"w".to_vec()).await.expect("complete");
    for round in 0..4 {
        let key = format!("req-{round}");
        let path = ours.key_path(&key).expect("key");
        if round % 2 == 1 {
            // Latency, one more fault: the link is slow, each way, around the lost reply and while
            // `begin` finds out what became of its create.
            let set = support::latency::set_random(&proxy, &mut rand::thread_rng(), 200);
            println!("round {round}: latency {}", support::latency::describe(&set));
        }
        proxy.set_mode(ProxyMode::DropReplies);
        let attempt = crate::support::spawn({
            let (keys, key) = (ours.clone(), key.clone());
            async move { keys.begin(&key).await }
        });
        eventually(HANG, "the claim created", || async { support::exists(&zk, &path).await }).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        proxy.set_mode(ProxyMode::Pass);
        let claim = match join("begin", HANG, attempt).await.expect("begin") {
            Begin::Started(claim) => claim,
            other => panic!("round {round}: our own claim answered as {}", kind(&other)),
        };
        proxy.set_latency(Latency::NONE);
        tokio::time::sleep(Duration::from_millis(500)).await;
        // The claim handed out still stands: a duplicate is told it is in progress, never Started.
        let duplicate = theirs.begin(&key).await.expect("a duplicate's begin");
        assert_eq!(kind(&duplicate), "in-progress", "round {round}: a second execution while {path} is claimed");
        drop(duplicate);
        claim.complete(b"once".to_vec()).await.unwrap_or_else(|e| panic!("round {round}: complete refused: {e:?}"));
        assert_eq!(kind(&theirs.begin(&key).await.expect("begin")), "done:once");
    }
}

#[tokio::test]
async fn a_timed_complete_whose_commit_applied_is_never_reported_as_not_recorded() {
    let server = support::server().await;
    let zk = observer(&server.connect_string()).await;
    let proxy = FaultProxy::start(&server.connect_string()).await.expect("proxy");
    let client = support::client(&proxy.connect_string()).await;
    let other = support::client(&server.connect_string()).await;
    let ours = keys(&client, "idem-lost-complete");
    let theirs = IdempotencyKeys::new(&other, ours.base(), ours.retention()).expect("keys");
    let claim = started(ours.begin("req").await.expect("begin"), "req");
    let path = claim.path().to_string();
    // The commit reaches the server; its reply does not reach us before the deadline.
    proxy.set_mode(ProxyMode::DropReplies);
    let completed = tokio::time::timeout(HANG, claim.complete_within(b"paid".to_vec(), Duration::from_millis(500)))
        .await
        .expect("complete_within returns by its deadline");
    proxy.set_mode(ProxyMode::Pass);
    eventually(HANG, "the outcome recorded", || async {
        support::stat(&zk, &path).await.is_some_and(|s| s.ephemeral_owner == 0)
    })
    .await;
    assert_eq!(kind(&theirs.begin("req").await.expect("begin")), "done:paid", "the commit applied");
    // `DeadlineExceeded` is documented as "the outcome was not recorded": the caller would undo work
    // whose outcome every duplicate is now answered with.
    match completed {
        Ok(()) | Err(zk_curator::Error::OutcomeUnknown { .. }) => {}
        other => panic!("a complete whose commit applied was reported as {other:?}"),
    }
}

#[tokio::test]
async fn a_claim_whose_create_reply_was_lost_over_a_long_cut_is_never_freed_by_its_own_begin() {
    let server = support::server().await;
    let zk = observer(&server.connect_string()).await;
    let proxy = FaultProxy::start(&server.connect_string()).await.expect("proxy");
    let client = support::client(&proxy.connect_string()).await;
    let other = support::client(&server.connect_string()).await;
    let ours = keys(&client, "idem-lost-create-cut");
    let theirs = IdempotencyKeys::new(&other, ours.base(), ours.retention()).expect("keys");
    started(ours.begin("warm-up").await.expect("begin"), "warm-up").complete(b"w".to_vec()).await.expect("complete");
    let path = ours.key_path("req").expect("key");
    proxy.set_mode(ProxyMode::DropReplies);
    let attempt = crate::support::spawn({
        let keys = ours.clone();
        async move { keys.begin("req").await }
    });
    eventually(HANG, "the claim created", || async { support::exists(&zk, &path).await }).await;
    // The link is cut for a while (well within the session), then heals: the same session again.
    proxy.set_mode(ProxyMode::Cut);
    tokio::time::sleep(Duration::from_secs(3)).await;
    proxy.set_mode(ProxyMode::Pass);
    let claim = match join("begin", HANG, attempt).await.expect("begin") {
        Begin::Started(claim) => claim,
        other => panic!("our own claim answered as {}", kind(&other)),
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    let duplicate = theirs.begin("req").await.expect("a duplicate's begin");
    assert_eq!(kind(&duplicate), "in-progress", "a second execution while {path} is claimed");
    drop(duplicate);
    claim.complete(b"once".to_vec()).await.expect("the claim handed out completes");
}
