//! A claim's identity: its czxid is its claim node's, and a claim node at the same path made by
//! another worker is never taken for its own.

use std::time::{Duration, UNIX_EPOCH};

use zk_curator::claims::ClaimState;
use zk_curator::testing::{FaultProxy, ProxyMode};
use zk_curator::ConnectionState;

use super::{add_items, claims, HANG};
use crate::support;

#[tokio::test]
async fn a_claims_czxid_and_grant_time_are_those_of_its_claim_node_on_the_server() {
    let (server, clients) = support::server_and_clients(1).await;
    let path = support::unique_path("claims-czxid");
    let work = claims(&clients[0], &path, "worker");
    add_items(&work, 3).await;
    let mut held = work.claim(2).await.unwrap();
    held.extend(work.claim(1).await.unwrap());
    assert_eq!(held.len(), 3);
    let zk = support::observer(&server.connect_string()).await;
    for claim in &held {
        let node = support::stat(&zk, &format!("{path}/claims/{}", claim.item())).await.expect("the claim node");
        assert_eq!(claim.czxid(), node.czxid, "{}: czxid is not the claim node's", claim.item());
        assert_eq!(claim.session().id, node.ephemeral_owner);
        let granted = claim.granted_at().duration_since(UNIX_EPOCH).unwrap().as_millis();
        assert_eq!(granted, node.ctime as u128, "{}: granted_at is not the node's creation time", claim.item());
    }
    assert!(held[2].czxid() > held[0].czxid().max(held[1].czxid()), "a later claim has a larger czxid");
    work.release_all().await.unwrap();
}

#[tokio::test]
async fn a_claim_reclaimed_and_taken_by_another_worker_while_its_holder_was_cut_off_is_lost_to_it() {
    let (server, clients) = support::server_and_clients(1).await;
    let proxy = FaultProxy::start(&server.connect_string()).await.expect("proxy");
    let client = support::client(&proxy.connect_string()).await;
    let path = support::unique_path("claims-retaken");
    let work = claims(&client, &path, "cut-off");
    let other = claims(&clients[0], &path, "other");
    add_items(&work, 1).await;
    let session = client.session_id();
    let held = work.claim(1).await.unwrap();
    assert_eq!(held.len(), 1);
    // Cut right away: the claim's watch is not set yet, so it is set again once the link heals —
    // on a claim node at the same path that another worker made meanwhile.
    proxy.set_mode(ProxyMode::Cut);
    assert!(
        support::poll_until(HANG, || async { client.connection_state() == ConnectionState::Suspended }).await,
        "the client notices the cut"
    );
    assert!(
        support::poll_until(HANG, || async {
            other.reclaim_older_than(Duration::from_millis(1)).await.unwrap().len() == 1
        })
        .await,
        "the claim is reclaimed"
    );
    let again = other.claim(1).await.unwrap();
    assert_eq!(again.len(), 1, "another worker takes the item");
    proxy.set_mode(ProxyMode::Pass);
    assert!(
        support::poll_until(HANG, || async { client.connection_state() == ConnectionState::Reconnected }).await,
        "the client reconnects"
    );
    assert_eq!(client.session_id(), session, "the same session: only the node tells the claims apart");

    tokio::time::timeout(HANG, held[0].lost()).await.expect("the first holder is told its claim is lost");
    assert_eq!(held[0].state(), ClaimState::Lost);
    assert!(work.my_claims().is_empty(), "a claim taken by another is listed as held");
    assert!(work.complete(held[0].item()).await.is_err(), "the first holder's complete is refused");
    assert!(again[0].is_held());
    other.complete(again[0].item()).await.expect("the new holder completes");
}
