//! `PersistentNode` when the client gives its session up while cut off but the server still holds
//! it (LOST before the server's expiry): the old session's node must go before a new one comes —
//! never two of our nodes at once — and the node is back on the new session.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use zk_curator::nodes::{PersistentNode, Protection};
use zk_curator::testing::{FaultProxy, ProxyMode, TestingServer};
use zk_curator::{ConnectionState, CreateMode};

use super::WITHIN;
use crate::support;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_given_up_while_the_server_still_holds_it_never_leaves_two_of_our_nodes() {
    support::init_tracing();
    let server = support::server_with(
        TestingServer::builder().tick_time(Duration::from_millis(200)).max_session_timeout(Duration::from_secs(20)),
    )
    .await;
    let connect = server.connect_string();
    let proxy = FaultProxy::start(&connect).await.expect("proxy");
    let client =
        support::client_with_timeouts(&proxy.connect_string(), Duration::from_secs(8), Duration::from_secs(2)).await;
    let obs = support::observer(&connect).await;
    for (mode, protected) in [(CreateMode::EphemeralSequential, true), (CreateMode::Ephemeral, true)] {
        let parent = support::unique_path("givenup");
        let node = PersistentNode::new(
            &client,
            &format!("{parent}/member-"),
            mode,
            if protected { Protection::Protected } else { Protection::Unprotected },
            b"x".to_vec(),
        )
        .unwrap();
        node.start().unwrap();
        assert!(node.wait_for_initial_create(WITHIN).await.unwrap());
        let old_session = client.session_id();
        let stop = Arc::new(AtomicBool::new(false));
        let doubled = Arc::new(AtomicUsize::new(0));
        let sampler = {
            let (stop, doubled) = (stop.clone(), doubled.clone());
            let (obs, parent) = (support::observer(&connect).await, parent.clone());
            crate::support::spawn(async move {
                let mut seen = Vec::new();
                while !stop.load(Ordering::SeqCst) {
                    let children = support::sorted_children(&obs, &parent).await;
                    if children.len() > 1 {
                        doubled.fetch_add(1, Ordering::SeqCst);
                        seen.push(children);
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                seen
            })
        };
        // Cut off until the client gives the session up (LOST, before the server's expiry), then heal.
        proxy.set_mode(ProxyMode::Blackhole);
        support::eventually(WITHIN, "the client gives the session up", || async {
            client.connection_state() == ConnectionState::Lost || client.session_id() != old_session
        })
        .await;
        proxy.set_mode(ProxyMode::Pass);
        support::session_replaced(&client, old_session).await;
        support::eventually(WITHIN, "the node is back on the new session", || async {
            let children = support::sorted_children(&obs, &parent).await;
            let Some(actual) = node.actual_path() else { return false };
            let owner = support::stat(&obs, &actual).await.map(|s| s.ephemeral_owner);
            children.len() == 1 && owner == Some(client.session_id())
        })
        .await;
        // Past the old session's expiry on the server.
        tokio::time::sleep(Duration::from_secs(9)).await;
        stop.store(true, Ordering::SeqCst);
        let seen = support::join("sampler", WITHIN, sampler).await;
        assert_eq!(doubled.load(Ordering::SeqCst), 0, "{mode:?}: two of our nodes at once: {seen:?}");
        let children = support::sorted_children(&obs, &parent).await;
        assert_eq!(children.len(), 1, "{mode:?}: one node after the old session's expiry: {children:?}");
        node.close().await.unwrap();
        let left = support::eventually_no_children(&connect, &parent, WITHIN).await;
        assert!(left.is_empty(), "{mode:?}: left after close: {left:?}");
    }
    client.close().await;
}

#[tokio::test]
async fn an_ephemeral_node_is_not_reported_kept_once_the_client_gives_its_session_up() {
    support::init_tracing();
    let server = support::server().await;
    let proxy = FaultProxy::start(&server.connect_string()).await.expect("proxy");
    // Short timeouts: the client gives a cut-off session up (LOST) after ~0.85 of 2 s.
    let client =
        support::client_with_timeouts(&proxy.connect_string(), Duration::from_secs(2), Duration::from_secs(1)).await;
    let parent = support::unique_path("givenup-kept");
    let node = PersistentNode::new(
        &client,
        &format!("{parent}/member"),
        CreateMode::Ephemeral,
        Protection::Unprotected,
        b"x".to_vec(),
    )
    .unwrap();
    node.start().unwrap();
    assert!(node.wait_for_initial_create(WITHIN).await.unwrap());
    let old_session = client.session_id();
    // A cut refuses new connections too: the client stays LOST, no new session connects.
    proxy.set_mode(ProxyMode::Cut);
    support::eventually(WITHIN, "the client gives the session up", || async {
        client.connection_state() == ConnectionState::Lost
    })
    .await;
    support::eventually(WITHIN, "the given-up session's node is no longer reported kept", || async {
        node.actual_path().is_none()
    })
    .await;
    assert_eq!(client.session_id(), old_session, "no new session connected through the cut");
    proxy.set_mode(ProxyMode::Pass);
    support::eventually(WITHIN, "the node is kept again on a new session", || async {
        node.actual_path().is_some() && client.session_id() != old_session
    })
    .await;
    node.close().await.unwrap();
    client.close().await;
}
