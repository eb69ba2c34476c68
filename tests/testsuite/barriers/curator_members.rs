//! Real Curator 5.4 members on our barriers: mixed members entering and leaving one double
//! barrier, and a barrier Curator set, removed by ours.

use std::time::Duration;

use zk_curator::{DistributedBarrier, DistributedDoubleBarrier};

use crate::support::{self, curator_peer::CuratorPeer};

const HANG: Duration = Duration::from_secs(60);

/// Waits (bounded) for the answer of a Curator member's background call.
async fn curator_result(peer: &mut CuratorPeer, name: &str) -> String {
    let deadline = std::time::Instant::now() + HANG;
    loop {
        let answer = peer.cmd(&format!("dbawait {name} 500")).await;
        if answer != "PENDING" {
            return answer;
        }
        assert!(std::time::Instant::now() < deadline, "Curator's {name} did not return");
    }
}

#[tokio::test]
async fn curator_and_rust_members_enter_and_leave_one_double_barrier_together() {
    let (server, clients) = support::server_and_clients(2).await;
    let connect = server.connect_string();
    let mut peer = CuratorPeer::start(&connect).await;
    let path = support::unique_path("double-mixed");
    let mut r1 = DistributedDoubleBarrier::new(&clients[0], &path, 4).unwrap();
    let mut r2 = DistributedDoubleBarrier::new(&clients[1], &path, 4).unwrap();

    assert_eq!(peer.cmd(&format!("dbenter c1 {path} 4 30000")).await, "SPAWNED");
    let r1_in = tokio::spawn(async move { r1.enter().await.map(|_| r1) });
    assert_eq!(peer.cmd(&format!("dbenter c2 {path} 4 30000")).await, "SPAWNED");
    support::eventually(HANG, "three members are there", || async {
        support::children(&connect, &path).await.len() == 3
    })
    .await;
    assert_eq!(peer.cmd("dbawait c1 300").await, "PENDING", "Curator entered with three of four");
    assert!(!r1_in.is_finished(), "ours entered with three of four");
    r2.enter().await.unwrap();
    let mut r1 = support::join("r1 enters", HANG, r1_in).await.unwrap();
    assert_eq!(curator_result(&mut peer, "c1").await, "ENTERED true");
    assert_eq!(curator_result(&mut peer, "c2").await, "ENTERED true");

    assert_eq!(peer.cmd("dbleave c1 30000").await, "SPAWNED");
    let r1_out = tokio::spawn(async move { r1.leave().await });
    assert_eq!(peer.cmd("dbleave c2 30000").await, "SPAWNED");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(peer.cmd("dbawait c1 0").await, "PENDING", "Curator left before r2 did");
    assert!(!r1_out.is_finished(), "ours left before r2 did");
    r2.leave().await.unwrap();
    support::join("r1 leaves", HANG, r1_out).await.unwrap();
    assert_eq!(curator_result(&mut peer, "c1").await, "LEFT true");
    assert_eq!(curator_result(&mut peer, "c2").await, "LEFT true");
    let left = support::eventually_no_children(&connect, &path, Duration::from_secs(10)).await;
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[tokio::test]
async fn a_barrier_set_by_curator_is_removed_by_ours_and_the_other_way_round() {
    let (server, clients) = support::server_and_clients(1).await;
    let mut peer = CuratorPeer::start(&server.connect_string()).await;
    let path = support::unique_path("barrier-mixed");
    let ours = DistributedBarrier::new(&clients[0], &path).unwrap();

    // Curator sets it; Curator and we wait; ours removes it.
    assert_eq!(peer.cmd(&format!("barrierset {path}")).await, "SET");
    assert!(ours.is_set().await.unwrap());
    assert_eq!(peer.cmd(&format!("barrierwait w1 {path} 30000")).await, "SPAWNED");
    let waiter = ours.clone();
    let waiting = tokio::spawn(async move { waiter.wait_on_barrier().await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(peer.cmd("dbawait w1 0").await, "PENDING");
    assert!(!waiting.is_finished());
    ours.remove_barrier().await.unwrap();
    support::join("our waiter", HANG, waiting).await.unwrap();
    assert_eq!(curator_result(&mut peer, "w1").await, "PASSED true");

    // Ours sets it; Curator waits; Curator removes it.
    ours.set_barrier().await.unwrap();
    assert_eq!(peer.cmd(&format!("barrierwait w2 {path} 30000")).await, "SPAWNED");
    let waiter = ours.clone();
    let waiting = tokio::spawn(async move { waiter.wait_on_barrier().await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(peer.cmd("dbawait w2 0").await, "PENDING");
    assert_eq!(peer.cmd(&format!("barrierremove {path}")).await, "REMOVED");
    support::join("our waiter", HANG, waiting).await.unwrap();
    assert_eq!(curator_result(&mut peer, "w2").await, "PASSED true");
}
