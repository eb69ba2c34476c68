//! Claims across a connection cut: `claim`, `complete` and `release` ride out a cut longer than
//! the connection timeout under the client's retry policy (as every data call does), on the same
//! session, and the claims stay held.

use zk_curator::claims::ClaimState;
use zk_curator::testing::FaultProxy;

use super::{add_items, claims};
use crate::support::{self, during_a_cut, riding_client};

#[tokio::test]
async fn a_claim_made_during_a_cut_longer_than_the_connection_timeout_rides_it_out() {
    let (server, _) = support::server_and_clients(0).await;
    let proxy = FaultProxy::start(&server.connect_string()).await.expect("proxy");
    let client = riding_client(&proxy.connect_string()).await;
    let path = support::unique_path("claims-cut-claim");
    let work = claims(&client, &path, "worker");
    add_items(&work, 2).await;
    let session = client.session_id();

    let claimed = during_a_cut(&proxy, &client, {
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

    during_a_cut(&proxy, &client, {
        let (work, done) = (work.clone(), done.clone());
        async move { work.complete(&done).await }
    })
    .await
    .expect("a complete during a cut the retry policy outlasts succeeds");
    during_a_cut(&proxy, &client, {
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
