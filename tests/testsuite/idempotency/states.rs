//! An idempotency claim is a hold: `Suspended` while its link is cut, `Held` again on the same
//! session, `Lost` once its session or its node is gone — and a lost claim records nothing over
//! someone else's claim at the same key.

use std::time::{Duration, UNIX_EPOCH};

use zk_curator::idempotency::Begin;
use zk_curator::locks::HoldState;
use zk_curator::testing::{expire_session, FaultProxy, ProxyMode};
use zk_curator::Error;

use super::{keys, kind, started};
use crate::support::{self, observer, server_and_clients};

const HANG: Duration = Duration::from_secs(60);

#[tokio::test]
async fn an_idempotency_claim_is_suspended_while_its_link_is_cut_and_held_again_on_the_same_session() {
    let (server, _clients) = server_and_clients(0).await;
    let proxy = FaultProxy::start(&server.connect_string()).await.expect("proxy");
    let client = support::client(&proxy.connect_string()).await;
    let keys = keys(&client, "idem-suspended");
    let claim = started(keys.begin("req").await.expect("begin"), "a free key");
    assert_eq!(claim.state(), HoldState::Held);
    let node = support::stat(&observer(&server.connect_string()).await, claim.path()).await.expect("the claim node");
    let granted = claim.granted_at().duration_since(UNIX_EPOCH).unwrap().as_millis();
    assert_eq!(granted, node.ctime as u128, "granted_at is the claim node's creation time");
    let mut changes = claim.state_changes();

    proxy.set_mode(ProxyMode::Cut);
    let first = tokio::time::timeout(HANG, changes.next()).await.expect("a state change on the cut");
    assert_eq!(first, Some(HoldState::Suspended));
    assert_eq!(claim.state(), HoldState::Suspended);
    proxy.set_mode(ProxyMode::Pass);
    let healed = tokio::time::timeout(HANG, changes.next()).await.expect("a state change on the heal");
    assert_eq!(healed, Some(HoldState::Held));
    assert_eq!(client.session_id(), claim.session().id, "the same session");
    claim.complete(b"done".to_vec()).await.expect("a held claim completes");
    assert_eq!(kind(&keys.begin("req").await.unwrap()), "done:done");
}

#[tokio::test]
async fn an_idempotency_claim_is_lost_when_its_session_expires_and_lost_resolves() {
    let (server, clients) = server_and_clients(1).await;
    let keys = keys(&clients[0], "idem-expired");
    let claim = started(keys.begin("req").await.expect("begin"), "a free key");
    let mut changes = claim.state_changes();
    expire_session(&server.connect_string(), &clients[0]).await.expect("expire");
    tokio::time::timeout(HANG, claim.lost()).await.expect("lost() resolves on the session's end");
    assert_eq!(claim.state(), HoldState::Lost);
    let mut seen = Vec::new();
    while let Some(state) = tokio::time::timeout(HANG, changes.next()).await.expect("the stream ends") {
        seen.push(state);
    }
    assert_eq!(seen.last(), Some(&HoldState::Lost), "{seen:?}");
    assert!(matches!(claim.complete(b"x".to_vec()).await, Err(Error::LockLost { .. })));
}

#[tokio::test]
async fn a_claim_whose_node_was_deleted_is_lost_and_never_completes_over_the_next_claim_at_its_key() {
    let (server, clients) = server_and_clients(2).await;
    let a = keys(&clients[0], "idem-replaced");
    let b = zk_curator::idempotency::IdempotencyKeys::new(&clients[1], a.base(), a.retention()).expect("keys");
    let first = started(a.begin("req").await.expect("begin"), "a");
    // An operator deletes the claim node; another worker begins the key again.
    observer(&server.connect_string()).await.delete(first.path(), None).await.expect("delete the claim node");
    tokio::time::timeout(HANG, first.lost()).await.expect("the first holder is told its claim is gone");
    assert_eq!(first.state(), HoldState::Lost);
    let second = started(b.begin("req").await.expect("begin"), "b, after the deletion");
    match first.complete(b"from-a".to_vec()).await {
        Err(Error::LockLost { .. }) => {}
        other => panic!("a lost claim's complete must be refused, got {other:?}"),
    }
    assert!(matches!(a.begin("req").await.expect("begin"), Begin::InProgress { .. }), "b's claim is untouched");
    second.complete(b"from-b".to_vec()).await.expect("b completes");
    assert_eq!(kind(&a.begin("req").await.unwrap()), "done:from-b");
}
