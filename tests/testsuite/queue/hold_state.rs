//! A taken item's hold state (`Item::hold_state`, `watch_state`, `state_changes`, `lost`): with a
//! lock path it follows its consumer's session as a lock hold does — `Suspended` during a cut and
//! `Held` again after it, `Lost` once the session was given up or expired, its ack then refused
//! even when the old session could still reach the server — and `Lost` once its node is settled;
//! without a lock path it stays `Held` whatever the connection does.

use std::time::Duration;

use zk_curator::locks::HoldState;
use zk_curator::testing::{FaultProxy, ProxyMode};
use zk_curator::Error;

use super::{bytes_queue, next_item, take_acked, WITHIN};
use crate::support;

/// Waits until `rx` shows `want` (hang-guarded).
async fn state_becomes(rx: &mut tokio::sync::watch::Receiver<HoldState>, want: HoldState, what: &str) {
    let reached = tokio::time::timeout(WITHIN, rx.wait_for(|s| *s == want)).await.map(|r| r.is_ok());
    match reached {
        Ok(true) => {}
        Ok(false) => panic!("{what}: the item's state sender is gone before {want:?}"),
        Err(_) => panic!("{what}: not {want:?} within {WITHIN:?} (still {:?})", *rx.borrow()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locked_item_is_suspended_during_a_cut_and_held_again_after_it() {
    let server = support::server().await;
    let connect = server.connect_string();
    let path = support::unique_path("queue-item-suspended");
    let lock = format!("{path}-locks");
    let producer = bytes_queue(&support::client(&connect).await, &path, Some(&lock));
    producer.put(b"job".to_vec()).await.unwrap();
    let proxy = FaultProxy::start(&connect).await.expect("proxy");
    // A 10 s session outlives the cut: the same session comes back.
    let client = support::client(&proxy.connect_string()).await;
    let queue = bytes_queue(&client, &path, Some(&lock));
    let mut items = queue.consume().unwrap();
    let item = next_item(&mut items).await;
    assert_eq!(item.hold_state(), HoldState::Held, "handed out Held");
    let mut state = item.watch_state();
    let mut changes = item.state_changes();

    support::cut_off(&proxy, &client).await;
    assert_eq!(item.hold_state(), HoldState::Suspended);
    state_becomes(&mut state, HoldState::Suspended, "during the cut").await;
    assert!(
        tokio::time::timeout(Duration::from_millis(200), item.lost()).await.is_err(),
        "lost() resolved for a suspended item"
    );
    proxy.set_mode(ProxyMode::Pass);
    state_becomes(&mut state, HoldState::Held, "after the cut").await;
    assert_eq!(item.hold_state(), HoldState::Held);

    item.ack().await.expect("the ack of an item held again");
    state_becomes(&mut state, HoldState::Lost, "once acknowledged").await;
    // Read after the fact: the changes in between may be folded into the latest.
    let mut last = None;
    while let Some(state) = changes.next().await {
        last = Some(state);
    }
    assert_eq!(last, Some(HoldState::Lost), "the changes end with Lost");
    assert_eq!(producer.len().await.unwrap(), 0);
    assert!(support::children(&connect, &lock).await.is_empty(), "no lock node left");
    queue.close().await;
    producer.close().await;
}

/// The client gives a silent session up (LOST) before the server can expire it; the item is then
/// `Lost`, and its ack is refused although the old session's handle reaches the server again at
/// once (the link heals right after LOST, before the server expired the session): an item its
/// consumer was told is lost is never acknowledged. Its next consumer gets it once the session
/// expired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locked_item_is_lost_once_its_session_is_given_up_and_its_ack_is_refused() {
    let server = support::server().await;
    let connect = server.connect_string();
    let path = support::unique_path("queue-item-lost");
    let lock = format!("{path}-locks");
    let rescuer_client = support::client(&connect).await;
    let rescuer = bytes_queue(&rescuer_client, &path, Some(&lock));
    rescuer.put(b"job".to_vec()).await.unwrap();
    let proxy = FaultProxy::start(&connect).await.expect("proxy");
    // LOST comes at 85% of 4 s: the server expires the session about 0.6 s later.
    let client = support::client_with(&proxy.connect_string(), Duration::from_secs(4)).await;
    let queue = bytes_queue(&client, &path, Some(&lock));
    let mut items = queue.consume().unwrap();
    let item = next_item(&mut items).await;
    // Only the rescuer takes the item again (this consumer would, on its next session).
    drop(items);
    let mut changes = item.state_changes();

    proxy.set_mode(ProxyMode::Blackhole);
    tokio::time::timeout(WITHIN, item.lost()).await.expect("the item is lost once its session is given up");
    proxy.set_mode(ProxyMode::Pass);
    assert_eq!(item.hold_state(), HoldState::Lost);
    // Read after the fact: the changes in between may be folded into the latest.
    assert_eq!(changes.next().await, Some(HoldState::Lost));
    assert_eq!(changes.next().await, None, "the changes end after Lost");
    match item.ack().await {
        Err(Error::LockLost { node, .. }) => assert!(node.starts_with(&lock), "names the lock node: {node}"),
        other => panic!("the ack of a lost item was {other:?}"),
    }
    let mut rescued = rescuer.consume().unwrap();
    assert_eq!(take_acked(&mut rescued, 1).await, ["job"], "delivered again");
    assert_eq!(rescuer.len().await.unwrap(), 0);
    assert!(support::children(&connect, &lock).await.is_empty(), "no lock node left");
    queue.close().await;
    rescuer.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_item_without_a_lock_path_stays_held_whatever_the_connection_does() {
    let server = support::server().await;
    let connect = server.connect_string();
    let path = support::unique_path("queue-item-unlocked");
    let proxy = FaultProxy::start(&connect).await.expect("proxy");
    let client = support::client(&proxy.connect_string()).await;
    let queue = bytes_queue(&client, &path, None);
    queue.put(b"job".to_vec()).await.unwrap();
    let mut items = queue.consume().unwrap();
    let item = next_item(&mut items).await;
    let state = item.watch_state();
    support::cut_off(&proxy, &client).await;
    assert_eq!(item.hold_state(), HoldState::Held, "nobody else can get an item whose node is deleted");
    assert!(tokio::time::timeout(Duration::from_millis(200), item.lost()).await.is_err(), "lost() resolved");
    assert_eq!(*state.borrow(), HoldState::Held);
    proxy.set_mode(ProxyMode::Pass);
    item.ack().await.unwrap();
    assert_eq!(*state.borrow(), HoldState::Lost, "Lost once acknowledged");
    queue.close().await;
}

/// The items of one node share its lock node: once one of them is put back, the others are `Lost`
/// and their acks refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_items_of_a_node_are_lost_once_one_of_them_is_requeued() {
    let (server, clients) = support::server_and_clients(1).await;
    let path = support::unique_path("queue-item-sibling");
    let lock = format!("{path}-locks");
    let queue = bytes_queue(&clients[0], &path, Some(&lock));
    queue.put_multi(vec![b"a".to_vec(), b"b".to_vec()]).await.unwrap();
    let mut items = queue.consume().unwrap();
    let first = next_item(&mut items).await;
    let second = next_item(&mut items).await;
    assert_eq!(second.hold_state(), HoldState::Held);
    first.requeue().await.unwrap();
    assert_eq!(second.hold_state(), HoldState::Lost);
    tokio::time::timeout(WITHIN, second.lost()).await.expect("lost() resolves for a settled node");
    assert!(matches!(second.ack().await, Err(Error::LockLost { .. })), "the sibling's ack must be refused");
    assert_eq!(take_acked(&mut items, 2).await.len(), 2, "the node comes back whole");
    assert!(support::children(&server.connect_string(), &lock).await.is_empty());
    queue.close().await;
}
