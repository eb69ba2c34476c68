//! Real Curator 5.4 members on our barriers: mixed members entering and leaving one double
//! barrier, and a barrier Curator set, removed by ours.

use std::time::Duration;

use zk_curator::barriers::{DistributedBarrier, DistributedDoubleBarrier};

use crate::support::{self, curator_peer::CuratorPeer};

const HANG: Duration = Duration::from_secs(60);
/// Curator's own `maxWait` for its members' calls: far above [`HANG`], so a slow JVM or a loaded
/// machine never ends a Curator call first; the test's own bounds (each under [`HANG`]) apply.
const CURATOR_WAIT_MS: u64 = 600_000;

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

/// The name of a member's node.
fn node_name(member: &DistributedDoubleBarrier) -> String {
    member.member_node().expect("entered").rsplit('/').next().unwrap().to_string()
}

/// Curator 5.4's leave watches the lowest-named member node and takes its deletion as "the
/// others are gone": a Curator member that then finds one node left leaves. A round on a fresh
/// path with two Curator and two Rust members, the Curator members and the lower-named Rust
/// member leaving before the other Rust member: nobody may leave before that last one calls
/// `leave`. Returns whether a Rust member's node was the lowest (the case where ours must keep its
/// node until the others are gone).
async fn mixed_round(
    peer: &mut CuratorPeer,
    connect: &str,
    clients: &[zk_curator::CuratorClient],
    round: usize,
) -> bool {
    let path = support::unique_path("double-mixed");
    let (c1, c2) = (format!("c1-{round}"), format!("c2-{round}"));
    let mut r1 = DistributedDoubleBarrier::new(&clients[0], &path, 4).unwrap();
    let mut r2 = DistributedDoubleBarrier::new(&clients[1], &path, 4).unwrap();

    assert_eq!(peer.cmd(&format!("dbenter {c1} {path} 4 {CURATOR_WAIT_MS}")).await, "SPAWNED");
    let r1_in = crate::support::spawn(async move { r1.enter().await.map(|_| r1) });
    assert_eq!(peer.cmd(&format!("dbenter {c2} {path} 4 {CURATOR_WAIT_MS}")).await, "SPAWNED");
    support::eventually(HANG, "three members are there", || async {
        support::children(connect, &path).await.len() == 3
    })
    .await;
    assert_eq!(peer.cmd(&format!("dbawait {c1} 300")).await, "PENDING", "Curator entered with three of four");
    assert!(!r1_in.is_finished(), "ours entered with three of four");
    r2.enter().await.unwrap();
    let r1 = support::join("r1 enters", HANG, r1_in).await.unwrap();
    assert_eq!(curator_result(peer, &c1).await, "ENTERED true");
    assert_eq!(curator_result(peer, &c2).await, "ENTERED true");

    let members: Vec<String> = support::children(connect, &path).await.into_iter().filter(|c| c != "ready").collect();
    assert_eq!(members.len(), 4, "members: {members:?}");
    let lowest = members[0].clone();
    let (mut first, mut last) = if node_name(&r1) < node_name(&r2) { (r1, r2) } else { (r2, r1) };
    let ours_lowest = node_name(&first) == lowest;
    // The Curator members leave first; those not holding the lowest node delete theirs at once.
    assert_eq!(peer.cmd(&format!("dbleave {c1} {CURATOR_WAIT_MS}")).await, "SPAWNED");
    assert_eq!(peer.cmd(&format!("dbleave {c2} {CURATOR_WAIT_MS}")).await, "SPAWNED");
    let mut staying: Vec<String> = vec![lowest.clone(), node_name(&first), node_name(&last)];
    staying.sort();
    staying.dedup();
    let now = support::children_become(&support::observer(connect).await, &path, &with_ready(&staying), HANG).await;
    assert_eq!(now, with_ready(&staying), "the Curator members not holding the lowest node deleted theirs");
    let first_out = crate::support::spawn(async move { first.leave().await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(peer.cmd(&format!("dbawait {c1} 0")).await, "PENDING", "Curator left before the last member did");
    assert_eq!(peer.cmd(&format!("dbawait {c2} 0")).await, "PENDING", "Curator left before the last member did");
    assert!(!first_out.is_finished(), "ours left before the last member did");
    last.leave().await.unwrap();
    support::join("the first Rust member leaves", HANG, first_out).await.unwrap();
    assert_eq!(curator_result(peer, &c1).await, "LEFT true");
    assert_eq!(curator_result(peer, &c2).await, "LEFT true");
    let left = support::eventually_no_children(connect, &path, Duration::from_secs(10)).await;
    assert!(left.is_empty(), "left behind: {left:?}");
    ours_lowest
}

/// `members` and `ready`, sorted (as `support::sorted_children` lists them).
fn with_ready(members: &[String]) -> Vec<String> {
    let mut all = members.to_vec();
    all.push("ready".to_string());
    all.sort();
    all
}

#[tokio::test]
async fn curator_and_rust_members_enter_and_leave_one_double_barrier_together() {
    let (server, clients) = support::server_and_clients(2).await;
    let connect = server.connect_string();
    let mut peer = CuratorPeer::start(&connect).await;
    // Node names are random: rounds until one where a Rust member's node is the lowest (half of
    // them), at most twelve; every round checks the whole property either way.
    for round in 0..12 {
        if mixed_round(&mut peer, &connect, &clients, round).await {
            break;
        }
    }
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
    assert_eq!(peer.cmd(&format!("barrierwait w1 {path} {CURATOR_WAIT_MS}")).await, "SPAWNED");
    let waiter = ours.clone();
    let waiting = crate::support::spawn(async move { waiter.wait_on_barrier().await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(peer.cmd("dbawait w1 0").await, "PENDING");
    assert!(!waiting.is_finished());
    ours.remove_barrier().await.unwrap();
    support::join("our waiter", HANG, waiting).await.unwrap();
    assert_eq!(curator_result(&mut peer, "w1").await, "PASSED true");

    // Ours sets it; Curator waits; Curator removes it.
    ours.set_barrier().await.unwrap();
    assert_eq!(peer.cmd(&format!("barrierwait w2 {path} {CURATOR_WAIT_MS}")).await, "SPAWNED");
    let waiter = ours.clone();
    let waiting = crate::support::spawn(async move { waiter.wait_on_barrier().await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(peer.cmd("dbawait w2 0").await, "PENDING");
    assert_eq!(peer.cmd(&format!("barrierremove {path}")).await, "REMOVED");
    support::join("our waiter", HANG, waiting).await.unwrap();
    assert_eq!(curator_result(&mut peer, "w2").await, "PASSED true");
}
