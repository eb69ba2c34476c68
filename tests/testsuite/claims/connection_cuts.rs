//! Claims across a connection cut: `claim`, `complete` and `release` ride out a cut longer than
//! the connection timeout under the client's retry policy (as every data call does), on the same
//! session, and the claims stay held.

use std::time::{Duration, Instant};

use zk_curator::testing::{FaultProxy, ProxyMode};
use zk_curator::{ClaimState, ConnectionState, CuratorClient, RetryNTimes};

use super::{add_items, claims, HANG};
use crate::support;

/// The cut: longer than two connection timeouts of [`riding_client`], far shorter than its session.
const CUT: Duration = Duration::from_millis(2500);

/// A client whose retry policy outlasts [`CUT`] many times over, with a connection timeout shorter
/// than it: a call that waits for a connection outside the policy gives up within the cut.
async fn riding_client(connect: &str) -> CuratorClient {
    CuratorClient::builder(connect)
        .session_timeout(Duration::from_secs(10))
        .connection_timeout(Duration::from_secs(1))
        .retry_policy(RetryNTimes::new(1000, Duration::from_millis(50)))
        .connect()
        .await
        .expect("connect")
}

/// Cuts the link, runs `call` once the client knows it is cut off (a request made before that is
/// queued on the connection and rides the cut out anyway), heals the link after [`CUT`], and
/// returns the call's result.
async fn across_a_cut<T: Send + 'static>(
    proxy: &FaultProxy,
    client: &CuratorClient,
    call: impl std::future::Future<Output = T> + Send + 'static,
) -> T {
    proxy.set_mode(ProxyMode::Cut);
    let started = Instant::now();
    support::eventually(HANG, "the client notices the cut", || async {
        client.connection_state() == ConnectionState::Suspended
    })
    .await;
    let call = tokio::spawn(call);
    tokio::time::sleep(CUT).await;
    proxy.set_mode(ProxyMode::Pass);
    let result = support::join("the call made during the cut", HANG, call).await;
    assert!(started.elapsed() >= CUT, "the call ended before the cut healed (the test proves nothing)");
    result
}

#[tokio::test]
async fn a_claim_made_during_a_cut_longer_than_the_connection_timeout_rides_it_out() {
    let (server, _) = support::server_and_clients(0).await;
    let proxy = FaultProxy::start(&server.connect_string()).await.expect("proxy");
    let client = riding_client(&proxy.connect_string()).await;
    let path = support::unique_path("claims-cut-claim");
    let work = claims(&client, &path, "worker");
    add_items(&work, 2).await;
    let session = client.session_id();

    let claimed = across_a_cut(&proxy, &client, {
        let work = work.clone();
        async move { work.claim(2).await }
    })
    .await
    .expect("a claim during a cut the retry policy outlasts succeeds");

    assert_eq!(client.session_id(), session, "the session survived the cut");
    assert_eq!(claimed.len(), 2);
    for claim in &claimed {
        assert_eq!(claim.state(), ClaimState::Held, "{}", claim.item());
        work.complete(claim.item()).await.expect("complete");
    }
    let zk = support::observer(&server.connect_string()).await;
    assert!(support::sorted_children(&zk, &format!("{path}/items")).await.is_empty(), "every item completed");
}

#[tokio::test]
async fn complete_and_release_during_a_cut_longer_than_the_connection_timeout_ride_it_out() {
    let (server, _) = support::server_and_clients(0).await;
    let proxy = FaultProxy::start(&server.connect_string()).await.expect("proxy");
    let client = riding_client(&proxy.connect_string()).await;
    let path = support::unique_path("claims-cut-complete");
    let work = claims(&client, &path, "worker");
    add_items(&work, 2).await;
    let session = client.session_id();
    let claimed = work.claim(2).await.expect("claim");
    assert_eq!(claimed.len(), 2);
    let (done, released) = (claimed[0].item().to_string(), claimed[1].item().to_string());

    across_a_cut(&proxy, &client, {
        let (work, done) = (work.clone(), done.clone());
        async move { work.complete(&done).await }
    })
    .await
    .expect("a complete during a cut the retry policy outlasts succeeds");
    across_a_cut(&proxy, &client, {
        let (work, released) = (work.clone(), released.clone());
        async move { work.release(&released).await }
    })
    .await
    .expect("a release during a cut the retry policy outlasts succeeds");

    assert_eq!(client.session_id(), session, "the session survived the cuts");
    let zk = support::observer(&server.connect_string()).await;
    assert_eq!(support::sorted_children(&zk, &format!("{path}/items")).await, vec![released], "one completed");
    assert!(support::sorted_children(&zk, &format!("{path}/claims")).await.is_empty(), "no claim left");
}
