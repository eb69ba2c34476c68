//! A locked item whose consumer's session is in trouble: an ack that waits for a connection while
//! the client gives the session up is refused, also when the old session reaches the server again
//! before it expires; a lost item its consumer holds on to does not keep its node from the next
//! consumer once the server could have expired the session; an ack that fails on a live session
//! leaves no lock node behind (the item goes to the next consumer).

use std::time::Duration;

use zk_curator::locks::HoldState;
use zk_curator::queue::{DistributedQueue, Item};
use zk_curator::testing::{FaultProxy, ProxyMode};
use zk_curator::{CuratorClient, Error, RetryNTimes};

use super::{bytes_queue, locks_released, next_item, take_acked, WITHIN};
use crate::support;

/// Waits until `rx` shows `want` (hang-guarded).
async fn state_becomes(rx: &mut tokio::sync::watch::Receiver<HoldState>, want: HoldState, what: &str) {
    let reached = tokio::time::timeout(WITHIN, rx.wait_for(|s| *s == want)).await.map(|r| r.is_ok());
    assert_eq!(reached, Ok(true), "{what}: not {want:?} within {WITHIN:?}");
}

/// The item `job` of a locked queue, taken by a consumer behind a proxy whose client `client_for`
/// makes from the proxy's connect string. Its stream is dropped: only the rescuer, a direct
/// consumer of the same queue, takes the item again.
struct Taken {
    _server: zk_curator::testing::TestingServer,
    connect: String,
    lock: String,
    proxy: FaultProxy,
    client: CuratorClient,
    queue: DistributedQueue<Vec<u8>>,
    _rescuer_client: CuratorClient,
    rescuer: DistributedQueue<Vec<u8>>,
    item: Item<Vec<u8>>,
}

async fn taken_behind_a_proxy(name: &str, client_for: impl AsyncFnOnce(&str) -> CuratorClient) -> Taken {
    let server = support::server().await;
    let connect = server.connect_string();
    let path = support::unique_path(name);
    let lock = format!("{path}-locks");
    let rescuer_client = support::client(&connect).await;
    let rescuer = bytes_queue(&rescuer_client, &path, Some(&lock));
    rescuer.put(b"job".to_vec()).await.unwrap();
    let proxy = FaultProxy::start(&connect).await.expect("proxy");
    let client = client_for(&proxy.connect_string()).await;
    let queue = bytes_queue(&client, &path, Some(&lock));
    let mut items = queue.consume().unwrap();
    let item = next_item(&mut items).await;
    drop(items);
    Taken { _server: server, connect, lock, proxy, client, queue, _rescuer_client: rescuer_client, rescuer, item }
}

/// The ack starts while the link is cut (`Suspended`: not refused yet); the client gives the
/// session up while the ack waits, and the link heals at once, seconds before the server could
/// expire the session. The item was `Lost` to its consumer: its ack must be refused, not sent on
/// the old session's handle once that reconnects, and the item goes to the next consumer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ack_waiting_for_a_connection_is_refused_once_the_session_is_given_up_though_the_old_session_comes_back() {
    let Taken { _server, connect, lock, proxy, client, queue, _rescuer_client, rescuer, item } =
        taken_behind_a_proxy("queue-ack-given-up", support::client_given_up_early).await;
    let mut state = item.watch_state();

    support::cut_off(&proxy, &client).await;
    let ack = support::spawn(item.ack());
    state_becomes(&mut state, HoldState::Lost, "the session given up during the cut").await;
    proxy.set_mode(ProxyMode::Pass);
    let acked = support::join("the ack", WITHIN, ack).await;
    assert!(
        matches!(acked, Err(Error::LockLost { .. })),
        "the ack of an item its consumer was told is lost: {acked:?}"
    );

    let mut rescued = rescuer.consume().unwrap();
    assert_eq!(take_acked(&mut rescued, 1).await, ["job"], "delivered again");
    locks_released(&connect, &lock).await;
    queue.close().await;
    rescuer.close().await;
}

/// The consumer keeps a lost item (its work does not watch the hold) after the link healed, so the
/// old session's handle reaches the server again: the item still goes to the next consumer, at the
/// latest once the server could have expired the session, as a lost lock's node does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_item_held_on_to_does_not_keep_its_node_from_the_next_consumer() {
    let Taken { _server, connect, lock, proxy, client, queue, _rescuer_client, rescuer, item } =
        taken_behind_a_proxy("queue-lost-kept", support::client_given_up_early).await;
    let mut state = item.watch_state();

    support::cut_off(&proxy, &client).await;
    state_becomes(&mut state, HoldState::Lost, "the session given up during the cut").await;
    proxy.set_mode(ProxyMode::Pass);
    let mut rescued = rescuer.consume().unwrap();
    assert_eq!(take_acked(&mut rescued, 1).await, ["job"], "delivered again while the lost item is kept");
    assert_eq!(item.hold_state(), HoldState::Lost);
    assert!(matches!(item.ack().await, Err(Error::LockLost { .. })));
    locks_released(&connect, &lock).await;
    queue.close().await;
    rescuer.close().await;
}

/// The ack fails on connection errors after the retry policy while the session lives on (a cut
/// shorter than the session): the lock node must not stay for the rest of the session — the item
/// goes to the next consumer once the link heals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ack_failing_on_a_live_session_leaves_no_lock_node() {
    // The ack gives up after about 2 s; the session (LOST at 85% of 30 s) outlives the cut.
    let impatient = async |connect: &str| {
        CuratorClient::builder(connect)
            .session_timeout(Duration::from_secs(30))
            .connection_timeout(Duration::from_secs(1))
            .retry_policy(RetryNTimes::new(1, Duration::from_millis(50)))
            .connect()
            .await
            .expect("connect")
    };
    let Taken { _server, connect, lock, proxy, client, queue, _rescuer_client, rescuer, item } =
        taken_behind_a_proxy("queue-ack-failed", impatient).await;
    let session = client.session_id();

    support::cut_off(&proxy, &client).await;
    let acked = tokio::time::timeout(WITHIN, item.ack()).await.expect("the ack gives up during the cut");
    assert!(acked.is_err(), "an ack during a cut longer than the retry policy: {acked:?}");
    proxy.set_mode(ProxyMode::Pass);
    support::eventually(WITHIN, "the same session back", || async {
        client.connection_state() != zk_curator::ConnectionState::Suspended
    })
    .await;
    assert_eq!(client.session_id(), session, "the session lived through the cut");
    locks_released(&connect, &lock).await;
    let mut rescued = rescuer.consume().unwrap();
    assert_eq!(take_acked(&mut rescued, 1).await, ["job"], "delivered again");
    queue.close().await;
    rescuer.close().await;
}
