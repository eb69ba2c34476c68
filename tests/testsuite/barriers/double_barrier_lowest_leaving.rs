//! `DistributedDoubleBarrier` rounds on one path while the member holding a round's lowest-named
//! node gives up its `leave` (cancelled at any point, or timed out) or loses its session while it
//! waits, and rounds in a namespace
//! whose nodes (and the barrier's ancestors) are missing, with container parents off: the other
//! members still leave, every round, and nothing is left behind.

use std::time::Duration;

use zk_curator::barriers::DistributedDoubleBarrier;
use zk_curator::CuratorClient;

use crate::support;

const HANG: Duration = Duration::from_secs(60);

/// `n` members on `path`, each entering on its own task; returned sorted by node name (lowest
/// first).
async fn all_entered(members: Vec<DistributedDoubleBarrier>) -> Vec<DistributedDoubleBarrier> {
    let entering: Vec<_> = members
        .into_iter()
        .map(|mut member| crate::support::spawn(async move { member.enter().await.map(|_| member) }))
        .collect();
    let mut entered = Vec::new();
    for (i, task) in entering.into_iter().enumerate() {
        entered.push(support::join(&format!("member {i} enters"), HANG, task).await.unwrap());
    }
    entered.sort_by_key(|m| m.member_node().unwrap().to_string());
    entered
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_the_lowest_member_gives_up_leaving_at_any_point_the_others_leave_and_nothing_is_left() {
    const ROUNDS: u64 = 12;
    let (server, clients) = support::server_and_clients(3).await;
    let path = support::unique_path("double-lowest-cancelled");
    let mut members: Vec<_> =
        clients.iter().map(|client| DistributedDoubleBarrier::new(client, &path, 3).unwrap()).collect();
    for round in 0..ROUNDS {
        let mut entered = all_entered(members).await.into_iter();
        let mut lowest = entered.next().unwrap();
        let others: Vec<_> = entered
            .map(|mut member| crate::support::spawn(async move { member.leave().await.map(|_| member) }))
            .collect();
        // The lowest member's leave dropped after 0..5 ms (even rounds) or timed out (odd ones).
        if round % 2 == 0 {
            let _ = tokio::time::timeout(Duration::from_millis(round / 2), lowest.leave()).await;
        } else {
            let _ = lowest.leave_timeout(Duration::from_millis(round * 20)).await;
        }
        members = vec![lowest];
        for (i, task) in others.into_iter().enumerate() {
            let member = support::join(&format!("round {round}: member {i} leaves"), HANG, task).await;
            members.push(member.unwrap_or_else(|e| panic!("round {round}: member {i}: leave: {e}")));
        }
    }
    let left = support::eventually_no_children(&server.connect_string(), &path, Duration::from_secs(10)).await;
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_namespace_without_containers_rounds_on_one_path_whose_ancestors_are_missing_leave_nothing() {
    const ROUNDS: usize = 5;
    let (server, _) = support::server_and_clients(0).await;
    let connect = server.connect_string();
    let namespace = support::unique_path("double-ns")[1..].to_string();
    let mut clients = Vec::new();
    for _ in 0..3 {
        let client =
            CuratorClient::builder(&connect).namespace(&namespace).dont_use_container_parents().connect().await;
        clients.push(client.expect("connect"));
    }
    let path = "/a/b/barrier";
    let mut members: Vec<_> =
        clients.iter().map(|client| DistributedDoubleBarrier::new(client, path, 3).unwrap()).collect();
    for round in 0..ROUNDS {
        let entered = all_entered(members).await;
        let leaving: Vec<_> = entered
            .into_iter()
            .map(|mut member| crate::support::spawn(async move { member.leave().await.map(|_| member) }))
            .collect();
        members = Vec::new();
        for (i, task) in leaving.into_iter().enumerate() {
            let member = support::join(&format!("round {round}: member {i} leaves"), HANG, task).await;
            members.push(member.unwrap_or_else(|e| panic!("round {round}: member {i}: leave: {e}")));
        }
        // A lone member's timed-out enter in between rounds lets no one through and leaves nothing.
        let mut lone = DistributedDoubleBarrier::new(&clients[0], path, 3).unwrap();
        assert!(!lone.enter_timeout(Duration::from_millis(200)).await.unwrap(), "round {round}: lone enter");
    }
    let full = format!("/{namespace}{path}");
    let left = support::eventually_no_children(&connect, &full, Duration::from_secs(10)).await;
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_the_lowest_members_session_ends_while_it_waits_to_leave_everyone_leaves_and_the_next_round_runs() {
    let (server, clients) = support::server_and_clients(3).await;
    let connect = server.connect_string();
    let path = support::unique_path("double-lowest-expired");
    let members: Vec<_> =
        clients.iter().map(|client| DistributedDoubleBarrier::new(client, &path, 3).unwrap()).collect();
    let mut entered = all_entered(members).await.into_iter();
    let (mut lowest, mut middle, mut last) =
        (entered.next().unwrap(), entered.next().unwrap(), entered.next().unwrap());
    let obs = support::observer(&connect).await;
    let owner = support::stat(&obs, lowest.member_node().unwrap()).await.unwrap().ephemeral_owner;
    let lowest_client = clients.iter().find(|c| c.session_id() == owner).unwrap().clone();
    let lowest_out = crate::support::spawn(async move {
        let r = lowest.leave().await;
        (lowest, r)
    });
    let middle_out = crate::support::spawn(async move { middle.leave().await.map(|_| middle) });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let old = lowest_client.session_id();
    zk_curator::testing::expire_session(&connect, &lowest_client).await.unwrap();
    support::session_replaced(&lowest_client, old).await;
    last.leave().await.unwrap();
    let middle = support::join("the middle member leaves", HANG, middle_out).await.unwrap();
    let (lowest, result) = support::join("the lowest member's leave returns", HANG, lowest_out).await;
    if let Err(e) = &result {
        assert_eq!(e.kind(), zk_curator::ErrorKind::SessionLost, "the lowest member's leave: {e}");
    }
    let left = support::eventually_no_children(&connect, &path, Duration::from_secs(10)).await;
    assert!(left.is_empty(), "left behind: {left:?}");

    // The next round on the path, the lowest member on its new session.
    let entered = all_entered(vec![lowest, middle, last]).await;
    let leaving: Vec<_> =
        entered.into_iter().map(|mut m| crate::support::spawn(async move { m.leave().await })).collect();
    for (i, task) in leaving.into_iter().enumerate() {
        support::join(&format!("next round: member {i} leaves"), HANG, task).await.unwrap();
    }
    let left = support::eventually_no_children(&connect, &path, Duration::from_secs(10)).await;
    assert!(left.is_empty(), "left behind after the next round: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lowest_member_waiting_to_leave_is_told_its_session_ended_without_waiting_for_the_others() {
    let (server, clients) = support::server_and_clients(2).await;
    let connect = server.connect_string();
    let path = support::unique_path("double-lowest-told");
    let members: Vec<_> =
        clients.iter().map(|client| DistributedDoubleBarrier::new(client, &path, 2).unwrap()).collect();
    let mut entered = all_entered(members).await.into_iter();
    let (mut lowest, mut other) = (entered.next().unwrap(), entered.next().unwrap());
    let obs = support::observer(&connect).await;
    let owner = support::stat(&obs, lowest.member_node().unwrap()).await.unwrap().ephemeral_owner;
    let lowest_client = clients.iter().find(|c| c.session_id() == owner).unwrap().clone();
    let lowest_out = crate::support::spawn(async move { lowest.leave().await });
    // Lets the lowest member start waiting for the other one (which has not called leave).
    tokio::time::sleep(Duration::from_millis(300)).await;
    zk_curator::testing::expire_session(&connect, &lowest_client).await.unwrap();
    // Its node went with its session: it has left, and is told so without the other leaving.
    let result = support::join("the lowest member's leave returns", HANG, lowest_out).await;
    let e = result.expect_err("leave on an expired session");
    assert_eq!(e.kind(), zk_curator::ErrorKind::SessionLost, "the lowest member's leave: {e}");
    support::join("the other member leaves", HANG, crate::support::spawn(async move { other.leave().await }))
        .await
        .unwrap();
    let left = support::eventually_no_children(&connect, &path, Duration::from_secs(10)).await;
    assert!(left.is_empty(), "left behind: {left:?}");
}
