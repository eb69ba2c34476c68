//! Claims and their session: a claim is never reported held on a session the client gave up, and
//! a given-up session does not live on for its claims.

use std::time::Duration;

use zk_curator::claims::ClaimState;
use zk_curator::locks::HoldState;
use zk_curator::testing::{FaultProxy, ProxyMode};
use zk_curator::ConnectionState;

use super::{add_items, claims, HANG};
use crate::support;

#[tokio::test]
async fn a_claim_on_a_session_given_up_while_cut_off_is_lost_and_its_node_goes_when_the_link_heals() {
    let (server, clients) = support::server_and_clients(1).await;
    let proxy = FaultProxy::start(&server.connect_string()).await.expect("proxy");
    let cut_off = support::client(&proxy.connect_string()).await;
    let path = support::unique_path("claims-given-up");
    let work = claims(&cut_off, &path, "cut-off");
    add_items(&work, 2).await;
    let held = work.claim(2).await.unwrap();
    assert_eq!(held.len(), 2);
    // The claims' watches are set (nothing in flight).
    tokio::time::sleep(Duration::from_millis(300)).await;

    // Cut off until the client gives its session up (LOST, before the server can expire it).
    proxy.set_mode(ProxyMode::Blackhole);
    assert!(
        support::poll_until(HANG, || async { cut_off.connection_state() == ConnectionState::Lost }).await,
        "the client gives the session up"
    );
    for claim in &held {
        assert_eq!(claim.state(), ClaimState::Lost, "{} is reported held on a given-up session", claim.item());
    }
    assert!(work.my_claims().is_empty(), "my_claims lists claims of a given-up session");

    // The link heals before the server expired the session: nothing of ours may keep the given-up
    // session (and its claim nodes) alive, or the items stay claimed by nobody.
    proxy.set_mode(ProxyMode::Pass);
    let zk = support::observer(&server.connect_string()).await;
    let claims_dir = format!("{path}/claims");
    assert!(
        support::poll_until(HANG, || async { support::sorted_children(&zk, &claims_dir).await.is_empty() }).await,
        "the given-up session's claim nodes are still there: {:?}",
        support::sorted_children(&zk, &claims_dir).await
    );
    let other = claims(&clients[0], &path, "other");
    assert_eq!(other.claim(2).await.unwrap().len(), 2, "another worker takes the items");
    other.release_all().await.unwrap();
}

#[tokio::test]
async fn a_claim_made_just_before_a_short_blackout_is_still_held_after_it_and_completes() {
    let (server, _clients) = support::server_and_clients(0).await;
    let proxy = FaultProxy::start(&server.connect_string()).await.expect("proxy");
    let client = support::client(&proxy.connect_string()).await;
    let path = support::unique_path("claims-blackout");
    let work = claims(&client, &path, "worker");
    add_items(&work, 3).await;
    let session = client.session_id();
    let held = work.claim(3).await.unwrap();
    assert_eq!(held.len(), 3);

    // The link goes silent right after the claims were made, long enough for the client to drop
    // the connection, far shorter than the session timeout: the session and its claims live on.
    proxy.set_mode(ProxyMode::Blackhole);
    assert!(
        support::poll_until(HANG, || async { client.connection_state() == ConnectionState::Suspended }).await,
        "the client notices the silent link"
    );
    proxy.set_mode(ProxyMode::Pass);
    assert!(
        support::poll_until(HANG, || async { client.connection_state() == ConnectionState::Reconnected }).await,
        "the client reconnects"
    );
    assert_eq!(client.session_id(), session, "the same session");
    for claim in &held {
        assert_eq!(claim.state(), ClaimState::Held, "{} is reported lost though its node stands", claim.item());
    }
    assert_eq!(work.my_claims().len(), 3);
    for claim in &held {
        work.complete(claim.item()).await.expect("a held claim completes");
    }
    let zk = support::observer(&server.connect_string()).await;
    assert!(support::sorted_children(&zk, &format!("{path}/claims")).await.is_empty(), "no orphan claim");
    assert!(support::sorted_children(&zk, &format!("{path}/items")).await.is_empty(), "every item completed");
}

#[tokio::test]
async fn a_claim_is_suspended_while_its_link_is_cut_and_held_again_when_it_heals_on_the_same_session() {
    let (server, _clients) = support::server_and_clients(0).await;
    let proxy = FaultProxy::start(&server.connect_string()).await.expect("proxy");
    let client = support::client(&proxy.connect_string()).await;
    let path = support::unique_path("claims-suspended");
    let work = claims(&client, &path, "worker");
    add_items(&work, 1).await;
    let session = client.session_id();
    let claim = work.claim(1).await.unwrap().pop().expect("a claim");
    assert_eq!(claim.state(), ClaimState::Held);
    let mut changes = claim.state_changes();

    proxy.set_mode(ProxyMode::Cut);
    let first = tokio::time::timeout(HANG, changes.next()).await.expect("a state change on the cut");
    assert_eq!(first, Some(HoldState::Suspended), "the cut is told at once, before the session is in doubt");
    assert_eq!(claim.state(), ClaimState::Suspended);
    assert!(!claim.is_held());
    assert_eq!(work.my_claims().len(), 1, "a suspended claim is still one of mine");

    proxy.set_mode(ProxyMode::Pass);
    let healed = tokio::time::timeout(HANG, changes.next()).await.expect("a state change on the heal");
    assert_eq!(healed, Some(HoldState::Held));
    assert_eq!(client.session_id(), session, "the same session");
    assert_eq!(claim.state(), ClaimState::Held);
    work.complete(claim.item()).await.expect("the claim completes");
    assert_eq!(claim.state(), ClaimState::Finished);
    assert_eq!(tokio::time::timeout(HANG, changes.next()).await.unwrap(), Some(HoldState::Lost), "the stream ends");
    assert_eq!(tokio::time::timeout(HANG, changes.next()).await.unwrap(), None);
}

#[tokio::test]
async fn a_claim_is_lost_when_its_session_expires_and_lost_resolves() {
    let (server, clients) = support::server_and_clients(1).await;
    let path = support::unique_path("claims-expired");
    let work = claims(&clients[0], &path, "worker");
    add_items(&work, 1).await;
    let claim = work.claim(1).await.unwrap().pop().expect("a claim");
    let mut changes = claim.state_changes();
    zk_curator::testing::expire_session(&server.connect_string(), &clients[0]).await.unwrap();
    tokio::time::timeout(HANG, claim.lost()).await.expect("lost() resolves on the session's end");
    assert_eq!(claim.state(), ClaimState::Lost);
    let mut seen = Vec::new();
    while let Some(state) = tokio::time::timeout(HANG, changes.next()).await.expect("the stream ends") {
        seen.push(state);
    }
    assert_eq!(seen.last(), Some(&HoldState::Lost), "{seen:?}");
    assert!(work.complete(claim.item()).await.is_err());
}

#[tokio::test]
async fn a_complete_that_applied_before_its_session_ended_is_never_reported_as_refused() {
    let (server, _clients) = support::server_and_clients(0).await;
    let connect = server.connect_string();
    let proxy = FaultProxy::start(&connect).await.expect("proxy");
    let client = support::client(&proxy.connect_string()).await;
    let path = support::unique_path("claims-complete-then-expiry");
    let work = claims(&client, &path, "worker");
    add_items(&work, 1).await;
    let claim = work.claim(1).await.unwrap().pop().expect("a claim");
    let zk = support::observer(&connect).await;
    let item = format!("{path}/items/{}", claim.item());

    // The complete reaches the server and applies; its reply never comes back. Then the session
    // ends (closed from outside) before the client could hear anything.
    proxy.set_mode(ProxyMode::DropReplies);
    let completing = crate::support::spawn({
        let (work, item) = (work.clone(), claim.item().to_string());
        async move { work.complete(&item).await }
    });
    support::eventually(HANG, "the complete applied", || async { !support::exists(&zk, &item).await }).await;
    zk_curator::testing::expire_session(&connect, &client).await.expect("expire");
    proxy.set_mode(ProxyMode::Pass);
    let completed = support::join("complete", HANG, completing).await;

    // `LockLost` says "nothing was deleted": the caller would do the work again, for an item that
    // is gone. Only `Ok` or `OutcomeUnknown` are true here.
    match completed {
        Ok(()) | Err(zk_curator::Error::OutcomeUnknown { .. }) => {}
        other => panic!("a complete that deleted the item was reported as {other:?}"),
    }
}
