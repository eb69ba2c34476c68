//! `DistributedDoubleBarrier` round after round on one path: every member enters only once all
//! have called `enter`, leaves only once all have called `leave`, and a next round's entrant is
//! never let through by the previous round's `ready` or woken through by its departures.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use zk_curator::barriers::DistributedDoubleBarrier;

use crate::support;

const HANG: Duration = Duration::from_secs(120);

#[tokio::test]
async fn four_members_enter_and_leave_together_for_twenty_rounds_on_one_path() {
    const ROUNDS: usize = 20;
    const MEMBERS: usize = 4;
    let (server, clients) = support::server_and_clients(MEMBERS).await;
    let path = support::unique_path("double-rounds");
    let entering: Arc<Vec<AtomicUsize>> = Arc::new((0..ROUNDS).map(|_| AtomicUsize::new(0)).collect());
    let leaving: Arc<Vec<AtomicUsize>> = Arc::new((0..ROUNDS).map(|_| AtomicUsize::new(0)).collect());
    let mut tasks = Vec::new();
    for (i, client) in clients.iter().enumerate() {
        let (client, path) = (client.clone(), path.clone());
        let (entering, leaving) = (entering.clone(), leaving.clone());
        tasks.push(crate::support::spawn(async move {
            let mut barrier = DistributedDoubleBarrier::new(&client, &path, MEMBERS).unwrap();
            for round in 0..ROUNDS {
                // Vary who arrives and who leaves last from round to round.
                if (round + i) % 3 == 0 {
                    tokio::time::sleep(Duration::from_millis(5 * i as u64)).await;
                }
                entering[round].fetch_add(1, Ordering::SeqCst);
                barrier.enter().await.unwrap_or_else(|e| panic!("member {i}, round {round}: enter: {e}"));
                let arrived = entering[round].load(Ordering::SeqCst);
                assert_eq!(arrived, MEMBERS, "member {i} entered round {round} when {arrived} had called enter");
                if (round * 7 + i) % 4 == 0 {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                leaving[round].fetch_add(1, Ordering::SeqCst);
                barrier.leave().await.unwrap_or_else(|e| panic!("member {i}, round {round}: leave: {e}"));
                let left = leaving[round].load(Ordering::SeqCst);
                assert_eq!(left, MEMBERS, "member {i} left round {round} when {left} had called leave");
            }
        }));
    }
    for (i, task) in tasks.into_iter().enumerate() {
        support::join(&format!("member {i}"), HANG, task).await;
    }
    let left = support::eventually_no_children(&server.connect_string(), &path, Duration::from_secs(10)).await;
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[tokio::test]
async fn an_entrant_is_neither_let_in_by_the_previous_rounds_ready_nor_woken_in_by_its_departures() {
    let (server, clients) = support::server_and_clients(4).await;
    let path = support::unique_path("double-next-round");
    let mut a = DistributedDoubleBarrier::new(&clients[0], &path, 2).unwrap();
    let mut b = DistributedDoubleBarrier::new(&clients[1], &path, 2).unwrap();
    let mut c = DistributedDoubleBarrier::new(&clients[2], &path, 2).unwrap();
    let mut d = DistributedDoubleBarrier::new(&clients[3], &path, 2).unwrap();
    let a_in = crate::support::spawn(async move { a.enter().await.map(|_| a) });
    b.enter().await.unwrap();
    let mut a = support::join("a enters", HANG, a_in).await.unwrap();

    // a leaves first: round 1 is closed, its `ready` stays until b has left too.
    let a_out = crate::support::spawn(async move { a.leave().await.map(|_| a) });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!a_out.is_finished(), "a left before b did");
    // c arrives for round 2 while round 1's `ready` is still there.
    let c_in = crate::support::spawn(async move { c.enter().await.map(|_| c) });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!c_in.is_finished(), "c entered round 2 alone, through round 1's ready");
    // b's departure wakes c up (its node, then `ready`, go away): still alone in round 2.
    b.leave().await.unwrap();
    support::join("a leaves", HANG, a_out).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!c_in.is_finished(), "the previous round's departures let c into round 2 alone");
    d.enter().await.unwrap();
    let mut c = support::join("c enters", HANG, c_in).await.unwrap();
    let c_out = crate::support::spawn(async move { c.leave().await });
    d.leave().await.unwrap();
    support::join("c leaves", HANG, c_out).await.unwrap();
    let left = support::eventually_no_children(&server.connect_string(), &path, Duration::from_secs(10)).await;
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[tokio::test]
async fn a_waiting_member_woken_by_a_reconnection_keeps_waiting_for_the_others() {
    let (server, clients) = support::server_and_clients(1).await;
    let proxy = zk_curator::testing::FaultProxy::start(&server.connect_string()).await.unwrap();
    let via_proxy = support::client_with(&proxy.connect_string(), Duration::from_secs(20)).await;
    let path = support::unique_path("double-reconnect");
    let mut a = DistributedDoubleBarrier::new(&via_proxy, &path, 2).unwrap();
    let session = via_proxy.session_id();
    let a_in = crate::support::spawn(async move { a.enter().await.map(|_| a) });
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Connection cuts and reconnections (same session) wake the waiter up, several times.
    for cut in 0..3 {
        proxy.set_mode(zk_curator::testing::ProxyMode::Cut);
        tokio::time::sleep(Duration::from_millis(150)).await;
        if cut == 1 {
            // Latency, one more fault: the link comes back slow each way (late events and replies).
            let set = support::latency::set_random(&proxy, &mut rand::thread_rng(), 250);
            println!("latency {}", support::latency::describe(&set));
        }
        proxy.set_mode(zk_curator::testing::ProxyMode::Pass);
        support::eventually(HANG, "reconnected", || async { via_proxy.is_connected() }).await;
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    proxy.set_latency(zk_curator::testing::Latency::NONE);
    assert_eq!(via_proxy.session_id(), session, "the session was meant to survive");
    assert!(!a_in.is_finished(), "a wake-up let a member in alone");
    let mut b = DistributedDoubleBarrier::new(&clients[0], &path, 2).unwrap();
    b.enter().await.unwrap();
    let mut a = support::join("a enters", HANG, a_in).await.unwrap();
    let a_out = crate::support::spawn(async move { a.leave().await });
    b.leave().await.unwrap();
    support::join("a leaves", HANG, a_out).await.unwrap();
}

#[tokio::test]
async fn a_leaving_member_does_not_wait_for_a_node_made_after_its_round_closed() {
    let (server, clients) = support::server_and_clients(2).await;
    let connect = server.connect_string();
    let path = support::unique_path("double-after-close");
    let mut a = DistributedDoubleBarrier::new(&clients[0], &path, 2).unwrap();
    let mut b = DistributedDoubleBarrier::new(&clients[1], &path, 2).unwrap();
    let a_in = crate::support::spawn(async move { a.enter().await.map(|_| a) });
    b.enter().await.unwrap();
    let mut a = support::join("a enters", HANG, a_in).await.unwrap();
    // a leaves first and closes the round; it waits for b.
    let a_out = crate::support::spawn(async move { a.leave().await });
    let zk = support::observer(&connect).await;
    support::eventually(HANG, "a has closed the round", || async {
        support::stat(&zk, &format!("{path}/ready")).await.is_some_and(|s| s.version > 0)
    })
    .await;
    // A next round's member (a plain session, Curator's layout) makes its node now.
    let next = format!("{path}/00000000-0000-4000-8000-000000000000");
    let options = zookeeper_client::CreateMode::Ephemeral.with_acls(zookeeper_client::Acls::anyone_all());
    zk.create(&next, b"", &options).await.unwrap();
    // b's leave lists that node, and must not wait for it.
    match tokio::time::timeout(Duration::from_secs(20), b.leave()).await {
        Ok(left) => left.unwrap(),
        Err(_) => panic!("b's leave waits for a node of the next round"),
    }
    support::join("a leaves", HANG, a_out).await.unwrap();
    zk.delete(&next, None).await.unwrap();
    let left = support::eventually_no_children(&connect, &path, Duration::from_secs(10)).await;
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[tokio::test]
async fn inspect_barrier_lists_the_members_and_whether_the_round_is_open_or_closed() {
    let (_server, clients) = support::server_and_clients(2).await;
    let path = support::unique_path("double-inspect");
    assert!(zk_curator::inspect::inspect_barrier(&clients[0], &path).await.unwrap().is_none());
    let mut a = DistributedDoubleBarrier::new(&clients[0], &path, 2).unwrap();
    let mut b = DistributedDoubleBarrier::new(&clients[1], &path, 2).unwrap();
    let a_in = crate::support::spawn(async move { a.enter().await.map(|_| a) });
    b.enter().await.unwrap();
    let a = support::join("a enters", HANG, a_in).await.unwrap();
    let seen = zk_curator::inspect::inspect_barrier(&clients[0], &path).await.unwrap().unwrap();
    assert_eq!(seen.ready, Some(zk_curator::inspect::BarrierReady::Open));
    let mut nodes: Vec<_> = seen.members.iter().map(|m| m.node.clone()).collect();
    nodes.sort();
    let mut expected = vec![a.member_node().unwrap().to_string(), b.member_node().unwrap().to_string()];
    expected.sort();
    assert_eq!(nodes, expected);
    assert!(seen.members.iter().all(|m| m.session == clients[0].session_id() || m.session == clients[1].session_id()));
    // The member holding the higher-named node leaves first: its node goes at once (the lowest
    // one stays until the others are gone).
    let (mut first, mut last) = if a.member_node() > b.member_node() { (a, b) } else { (b, a) };
    let first_out = crate::support::spawn(async move { first.leave().await });
    support::eventually(HANG, "the round is closed", || async {
        let seen = zk_curator::inspect::inspect_barrier(&clients[0], &path).await.unwrap().unwrap();
        seen.ready == Some(zk_curator::inspect::BarrierReady::Closed) && seen.members.len() == 1
    })
    .await;
    last.leave().await.unwrap();
    support::join("the first member leaves", HANG, first_out).await.unwrap();
}
