//! `DistributedDoubleBarrier` under faults and misuse: a member's session lost while entering
//! or after entering, cancelled and timed-out enters leaving nothing, a member dropped while
//! entered, deadlines with the server gone, bad input.

use std::time::{Duration, Instant};

use zk_curator::barriers::DistributedDoubleBarrier;
use zk_curator::testing::{FaultProxy, ProxyMode};
use zk_curator::{ConnectionState, CuratorClient, Error, ErrorCode, ErrorKind, RetryNTimes};

use crate::support;

const HANG: Duration = Duration::from_secs(60);

fn assert_session_lost<T: std::fmt::Debug>(result: zk_curator::Result<T>, path: &str, what: &str) {
    match result {
        Err(e @ Error::ZooKeeper { code: ErrorCode::SessionExpired, .. }) => {
            assert_eq!(e.kind(), ErrorKind::SessionLost);
            assert!(e.to_string().contains(path), "{what}: the error names no node under {path}: {e}");
        }
        other => panic!("{what}: expected a session-lost error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_member_whose_session_is_lost_gets_a_typed_error_and_the_others_go_on_without_it() {
    let (server, clients) = support::server_and_clients(3).await;
    let connect = server.connect_string();
    let path = support::unique_path("double-expiry");
    let mut a = DistributedDoubleBarrier::new(&clients[0], &path, 3).unwrap();
    let mut b = DistributedDoubleBarrier::new(&clients[1], &path, 3).unwrap();
    let mut c = DistributedDoubleBarrier::new(&clients[2], &path, 3).unwrap();

    // While entering: a's session ends; its enter fails, its node is gone, b still waits.
    let a_in = crate::support::spawn(async move {
        let r = a.enter().await;
        (a, r)
    });
    let b_in = crate::support::spawn(async move { b.enter().await.map(|_| b) });
    support::eventually(HANG, "a and b have made their nodes", || async {
        support::children(&connect, &path).await.len() == 2
    })
    .await;
    let old = clients[0].session_id();
    zk_curator::testing::expire_session(&connect, &clients[0]).await.unwrap();
    let (mut a, result) = support::join("a's enter", HANG, a_in).await;
    assert_session_lost(result, &path, "a's enter after its session ended");
    assert!(a.member_node().is_none());
    support::session_replaced(&clients[0], old).await;
    // c arrives: with a gone, two nodes of three: nobody passes.
    let c_in = crate::support::spawn(async move { c.enter().await.map(|_| c) });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!b_in.is_finished() && !c_in.is_finished(), "entered with a member short");
    // a enters again on its new session: the round is complete.
    a.enter().await.unwrap();
    let mut b = support::join("b enters", HANG, b_in).await.unwrap();
    let mut c = support::join("c enters", HANG, c_in).await.unwrap();

    // After entering: b's session ends; a and c leave without waiting for it, b's leave fails.
    let old = clients[1].session_id();
    zk_curator::testing::expire_session(&connect, &clients[1]).await.unwrap();
    support::session_replaced(&clients[1], old).await;
    let c_out = crate::support::spawn(async move { c.leave().await });
    a.leave().await.unwrap();
    support::join("c leaves", HANG, c_out).await.unwrap();
    assert_session_lost(b.leave().await, &path, "b's leave after its session ended");
    let left = support::eventually_no_children(&connect, &path, Duration::from_secs(10)).await;
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[tokio::test]
async fn a_member_whose_session_was_given_up_is_told_so_by_leave_before_the_new_session_connects() {
    let (server, clients) = support::server_and_clients(1).await;
    let connect = server.connect_string();
    let proxy = FaultProxy::start(&connect).await.expect("proxy");
    // Short timeouts: the client gives a cut-off session up (LOST) after ~0.85 of 2 s.
    let cut_off =
        support::client_with_timeouts(&proxy.connect_string(), Duration::from_secs(2), Duration::from_secs(1)).await;
    let path = support::unique_path("double-given-up");
    let mut a = DistributedDoubleBarrier::new(&cut_off, &path, 2).unwrap();
    let mut b = DistributedDoubleBarrier::new(&clients[0], &path, 2).unwrap();
    let b_in = crate::support::spawn(async move { b.enter().await.map(|_| b) });
    a.enter().await.unwrap();
    let mut b = support::join("b enters", HANG, b_in).await.unwrap();

    // Cut off until the client gives the session up; a cut refuses new connections, so no new
    // session is connected yet.
    proxy.set_mode(ProxyMode::Cut);
    support::eventually(HANG, "the client gives its session up", || async {
        cut_off.connection_state() == ConnectionState::Lost
    })
    .await;
    let old = cut_off.session_id();
    // The other member leaves meanwhile: it stops waiting for a once the server drops a's node.
    let b_out = crate::support::spawn(async move { b.leave().await });
    // a leaves while LOST; the link comes back while its call runs, so a new session can connect.
    let a_out = crate::support::spawn(async move { a.leave().await });
    proxy.set_mode(ProxyMode::Pass);
    assert_session_lost(support::join("a leaves", HANG, a_out).await, &path, "a's leave on a given-up session");
    support::join("b leaves", HANG, b_out).await.unwrap();
    support::session_replaced(&cut_off, old).await;
    let left = support::eventually_no_children(&connect, &path, Duration::from_secs(10)).await;
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[tokio::test]
async fn a_member_waiting_to_enter_is_told_its_session_was_given_up_before_the_new_one_connects() {
    let server = support::server().await;
    let connect = server.connect_string();
    let proxy = FaultProxy::start(&connect).await.expect("proxy");
    // Short timeouts: the client gives a cut-off session up (LOST) after ~0.85 of 2 s. Its retry
    // policy outlasts that by far, so that the enter is told of the loss rather than running out
    // of retries first (a connection-loss error, also honest, on a loaded machine).
    let cut_off = CuratorClient::builder(&proxy.connect_string())
        .session_timeout(Duration::from_secs(2))
        .connection_timeout(Duration::from_secs(1))
        .retry_policy(RetryNTimes::new(100, Duration::from_millis(100)))
        .connect()
        .await
        .expect("connect");
    let path = support::unique_path("double-given-up-enter");
    let mut a = DistributedDoubleBarrier::new(&cut_off, &path, 2).unwrap();
    let a_in = crate::support::spawn(async move {
        let r = a.enter().await;
        (a, r)
    });
    support::eventually(HANG, "a has made its node", || async { support::children(&connect, &path).await.len() == 1 })
        .await;
    // A round trip on a's session: its reply comes after those of a's create and first look, so
    // the enter knows its node before the cut (a create whose reply the cut lost is retried on a
    // new session instead, for as long as the retry policy allows).
    cut_off.exists(&path).await.expect("a round trip on a's session");
    // A cut refuses new connections too: no new session connects while it lasts.
    proxy.set_mode(ProxyMode::Cut);
    let (a, result) = support::join("a's enter", HANG, a_in).await;
    assert_eq!(cut_off.connection_state(), ConnectionState::Lost, "a's enter ended before it was told");
    assert_session_lost(result, &path, "a's enter on a given-up session");
    assert!(a.member_node().is_none());
    proxy.set_mode(ProxyMode::Pass);
    let left = support::eventually_no_children(&connect, &path, Duration::from_secs(10)).await;
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[tokio::test]
async fn a_cancelled_or_timed_out_enter_leaves_no_node_and_has_not_entered() {
    let (server, clients) = support::server_and_clients(1).await;
    let connect = server.connect_string();
    let path = support::unique_path("double-cancel");
    let mut barrier = DistributedDoubleBarrier::new(&clients[0], &path, 2).unwrap();
    assert!(tokio::time::timeout(Duration::from_millis(300), barrier.enter()).await.is_err(), "entered alone");
    assert!(barrier.member_node().is_none());
    let left = support::eventually_no_children(&connect, &path, Duration::from_secs(10)).await;
    assert!(left.is_empty(), "a cancelled enter left {left:?}");

    let start = Instant::now();
    assert!(!barrier.enter_timeout(Duration::from_millis(300)).await.unwrap());
    assert!(start.elapsed() < Duration::from_secs(5), "took {:?}", start.elapsed());
    assert!(barrier.member_node().is_none());
    let left = support::eventually_no_children(&connect, &path, Duration::from_secs(10)).await;
    assert!(left.is_empty(), "a timed-out enter left {left:?}");
    // Not entered: leave is refused.
    assert!(matches!(barrier.leave().await, Err(Error::InvalidArgument { name: "leave", .. })));
}

#[tokio::test]
async fn a_member_dropped_while_entered_leaves_no_node_and_does_not_hold_the_next_round_open() {
    let (server, clients) = support::server_and_clients(2).await;
    let connect = server.connect_string();
    let path = support::unique_path("double-drop");
    let mut a = DistributedDoubleBarrier::new(&clients[0], &path, 2).unwrap();
    let mut b = DistributedDoubleBarrier::new(&clients[1], &path, 2).unwrap();
    let a_in = crate::support::spawn(async move { a.enter().await.map(|_| a) });
    b.enter().await.unwrap();
    let a = support::join("a enters", HANG, a_in).await.unwrap();
    drop(a);
    drop(b);
    let left = support::children_become(&support::observer(&connect).await, &path, &["ready".to_string()], HANG).await;
    assert_eq!(left, ["ready"], "a dropped member's node was left");
    // Both went without leaving: a new member must still wait for a second one.
    let mut c = DistributedDoubleBarrier::new(&clients[0], &path, 2).unwrap();
    assert!(!c.enter_timeout(Duration::from_millis(500)).await.unwrap(), "entered alone through an abandoned round");
    let mut d = DistributedDoubleBarrier::new(&clients[1], &path, 2).unwrap();
    let c_in = crate::support::spawn(async move { c.enter().await.map(|_| c) });
    d.enter().await.unwrap();
    let mut c = support::join("c enters", HANG, c_in).await.unwrap();
    let c_out = crate::support::spawn(async move { c.leave().await });
    d.leave().await.unwrap();
    support::join("c leaves", HANG, c_out).await.unwrap();
    let left = support::eventually_no_children(&connect, &path, Duration::from_secs(10)).await;
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[tokio::test]
async fn timed_enter_and_leave_return_within_their_timeout_with_the_server_paused() {
    let server = support::owned_server().await;
    let connect = server.connect_string();
    let client = support::client(&connect).await;
    let other = support::client(&connect).await;
    let path = support::unique_path("double-deadline");
    let mut a = DistributedDoubleBarrier::new(&client, &path, 2).unwrap();
    let mut b = DistributedDoubleBarrier::new(&other, &path, 2).unwrap();
    let a_in = crate::support::spawn(async move { a.enter().await.map(|_| a) });
    b.enter().await.unwrap();
    let mut a = support::join("a enters", HANG, a_in).await.unwrap();
    // b stays in: a's timed leave gives up in time, and has left.
    let start = Instant::now();
    assert!(!a.leave_timeout(Duration::from_millis(300)).await.unwrap());
    assert!(start.elapsed() < Duration::from_secs(5), "took {:?}", start.elapsed());
    assert!(a.member_node().is_none());

    server.pause().unwrap();
    for timeout in [Duration::ZERO, Duration::from_millis(400)] {
        let start = Instant::now();
        let r = a.enter_timeout(timeout).await;
        assert!(start.elapsed() < timeout + Duration::from_secs(2), "took {:?} for {timeout:?}", start.elapsed());
        assert!(!matches!(r, Ok(true)), "entered with the server paused: {r:?}");
        let start = Instant::now();
        let r = b.leave_timeout(timeout).await;
        assert!(start.elapsed() < timeout + Duration::from_secs(2), "took {:?} for {timeout:?}", start.elapsed());
        assert!(!matches!(r, Ok(true)), "left with the server paused: {r:?}");
    }
    server.resume().unwrap();
    let left = support::eventually_no_children(&connect, &path, Duration::from_secs(20)).await;
    assert!(left.iter().all(|c| c == "ready"), "member nodes left behind: {left:?}");
}

#[tokio::test]
async fn bad_input_is_a_typed_error_naming_the_value() {
    let (_server, clients) = support::server_and_clients(1).await;
    let client = &clients[0];
    match DistributedDoubleBarrier::new(client, "/b", 0) {
        Err(Error::InvalidArgument { name: "member_count", value, .. }) => assert_eq!(value, "0"),
        other => panic!("member count 0: {other:?}"),
    }
    match DistributedDoubleBarrier::new(client, "/b", usize::MAX) {
        Err(Error::InvalidArgument { name: "member_count", value, .. }) => assert_eq!(value, usize::MAX.to_string()),
        other => panic!("member count usize::MAX: {other:?}"),
    }
    for bad in ["", "relative", "/trailing/", "/a//b"] {
        match DistributedDoubleBarrier::new(client, bad, 2) {
            Err(Error::InvalidPath { path, .. }) => assert_eq!(path, bad),
            other => panic!("{bad:?}: {other:?}"),
        }
    }
    let path = support::unique_path("double-misuse");
    let mut alone = DistributedDoubleBarrier::new(client, &path, 1).unwrap();
    assert!(matches!(alone.leave().await, Err(Error::InvalidArgument { name: "leave", .. })));
    alone.enter().await.unwrap();
    assert!(matches!(alone.enter().await, Err(Error::InvalidArgument { name: "enter", .. })));
    assert!(alone.enter_timeout(Duration::MAX).await.is_err());
    assert!(alone.leave_timeout(Duration::MAX).await.unwrap());
    // A second round of one on the same path.
    assert!(alone.enter_timeout(Duration::MAX).await.unwrap());
    alone.leave().await.unwrap();
}
