//! Idempotency keys across a connection cut: `begin` rides out a cut longer than the connection
//! timeout under the client's retry policy (as every data call does), on the same session, while a
//! timed `begin_within` still ends at its own deadline.

use std::time::{Duration, Instant};

use zk_curator::idempotency::IdempotencyKeys;
use zk_curator::testing::{FaultProxy, ProxyMode};
use zk_curator::{CuratorClient, ErrorKind};

use super::{keys, kind, started};
use crate::support::{self, cut_off, during_a_cut, riding_client};

const HANG: Duration = Duration::from_secs(60);

/// Keys whose base exists already: the first request of a `begin` is the claim's create.
async fn warmed_keys(client: &CuratorClient, name: &str) -> IdempotencyKeys {
    let keys = keys(client, name);
    started(keys.begin("warm-up").await.expect("begin"), "warm-up").complete(b"w".to_vec()).await.expect("complete");
    keys
}

#[tokio::test]
async fn a_begin_during_a_cut_longer_than_the_connection_timeout_rides_it_out() {
    let server = support::server().await;
    let proxy = FaultProxy::start(&server.connect_string()).await.expect("proxy");
    let client = riding_client(&proxy.connect_string()).await;
    let other = support::client(&server.connect_string()).await;
    let ours = warmed_keys(&client, "idem-cut-begin").await;
    let theirs = IdempotencyKeys::new(&other, ours.base(), ours.retention()).expect("keys");
    let session = client.session_id();

    let begun = during_a_cut(&proxy, &client, {
        let ours = ours.clone();
        async move { ours.begin("req").await }
    })
    .await
    .expect("a begin during a cut the retry policy outlasts");
    assert_eq!(client.session_id(), session, "the session survived the cut");
    let claim = started(begun, "req");

    assert_eq!(kind(&theirs.begin("req").await.expect("a duplicate's begin")), "in-progress");
    claim.complete(b"once".to_vec()).await.expect("complete");
    assert_eq!(kind(&theirs.begin("req").await.expect("begin")), "done:once");
}

#[tokio::test]
async fn a_timed_begin_during_a_cut_ends_at_its_own_deadline_and_leaves_no_claim() {
    let server = support::server().await;
    let proxy = FaultProxy::start(&server.connect_string()).await.expect("proxy");
    let client = riding_client(&proxy.connect_string()).await;
    let ours = warmed_keys(&client, "idem-cut-timed-begin").await;
    // Longer than the connection timeout, shorter than the cut.
    let timeout = Duration::from_millis(1500);

    cut_off(&proxy, &client).await;
    let started_at = Instant::now();
    let begun = tokio::time::timeout(HANG, ours.begin_within("req", timeout)).await.expect("begin_within hangs");
    let took = started_at.elapsed();
    proxy.set_mode(ProxyMode::Pass);
    // Not given up with a connection error after the connection timeout: the caller's deadline
    // is what ends it.
    match begun {
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::DeadlineExceeded, "{e}");
            assert!(e.to_string().starts_with(&format!("deadline of {timeout:?} exceeded")), "{e}");
        }
        Ok(begun) => panic!("begin_within answered {} through a cut", kind(&begun)),
    }
    // Strict: a margin for scheduling only (the failure this guards against is a wait for the cut).
    assert!(took < timeout + Duration::from_millis(500), "begin_within returned after {took:?}");

    assert!(client.block_until_connected(HANG).await.unwrap(), "reconnects");
    let zk = support::observer(&server.connect_string()).await;
    let path = ours.key_path("req").expect("key");
    assert!(!support::exists(&zk, &path).await, "a timed-out begin left its claim behind");
}
