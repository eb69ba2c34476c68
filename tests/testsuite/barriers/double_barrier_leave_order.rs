//! Curator's leave protocol kept by our members: the lowest-named member node of a round is
//! deleted last. Curator 5.4's members watch that node and take its deletion as "the others are
//! gone" (one that then finds a single node left leaves), so ours holding it keeps it until the
//! round's other members are gone — and still deletes it when it gives up waiting.

use std::time::Duration;

use zk_curator::barriers::DistributedDoubleBarrier;

use crate::support;

const HANG: Duration = Duration::from_secs(60);

/// Three members entered on a fresh path, sorted by the name of their nodes (lowest first).
async fn three_entered(clients: &[zk_curator::CuratorClient], path: &str) -> Vec<DistributedDoubleBarrier> {
    let entering: Vec<_> = clients
        .iter()
        .map(|client| {
            let mut member = DistributedDoubleBarrier::new(client, path, 3).unwrap();
            crate::support::spawn(async move { member.enter().await.map(|_| member) })
        })
        .collect();
    let mut members = Vec::new();
    for (i, task) in entering.into_iter().enumerate() {
        members.push(support::join(&format!("member {i} enters"), HANG, task).await.unwrap());
    }
    members.sort_by_key(|m| m.member_node().unwrap().to_string());
    members
}

#[tokio::test]
async fn a_leaving_member_holding_the_lowest_node_keeps_it_until_the_others_have_left() {
    let (server, clients) = support::server_and_clients(3).await;
    let zk = support::observer(&server.connect_string()).await;
    let path = support::unique_path("double-lowest-last");
    let mut members = three_entered(&clients, &path).await.into_iter();
    let (mut lowest, mut middle, mut last) =
        (members.next().unwrap(), members.next().unwrap(), members.next().unwrap());
    let (lowest_node, middle_node) =
        (lowest.member_node().unwrap().to_string(), middle.member_node().unwrap().to_string());

    let middle_out = crate::support::spawn(async move { middle.leave().await });
    let lowest_out = crate::support::spawn(async move { lowest.leave().await });
    support::eventually(HANG, "the middle member's node is gone", || async {
        !support::exists(&zk, &middle_node).await
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(support::exists(&zk, &lowest_node).await, "the lowest node went while a member had not left");
    assert!(!lowest_out.is_finished() && !middle_out.is_finished(), "left before the last member did");

    last.leave().await.unwrap();
    support::join("the lowest member leaves", HANG, lowest_out).await.unwrap();
    support::join("the middle member leaves", HANG, middle_out).await.unwrap();
    let left = support::eventually_no_children(&server.connect_string(), &path, Duration::from_secs(10)).await;
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[tokio::test]
async fn a_member_holding_the_lowest_node_that_gives_up_leaving_deletes_it_when_it_gives_up() {
    let (server, clients) = support::server_and_clients(3).await;
    let zk = support::observer(&server.connect_string()).await;
    let path = support::unique_path("double-lowest-gives-up");
    let mut members = three_entered(&clients, &path).await.into_iter();
    let (mut lowest, mut middle, mut last) =
        (members.next().unwrap(), members.next().unwrap(), members.next().unwrap());
    let lowest_node = lowest.member_node().unwrap().to_string();

    let middle_out = crate::support::spawn(async move { middle.leave().await });
    let lowest_out = crate::support::spawn(async move { lowest.leave_timeout(Duration::from_secs(2)).await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(support::exists(&zk, &lowest_node).await, "the lowest node went while a member had not left");
    let gave_up = support::join("the lowest member gives up", HANG, lowest_out).await.unwrap();
    assert!(!gave_up, "the lowest member's leave returned true while a member had not left");
    support::eventually(HANG, "the lowest node is deleted once its member gave up", || async {
        !support::exists(&zk, &lowest_node).await
    })
    .await;

    last.leave().await.unwrap();
    support::join("the middle member leaves", HANG, middle_out).await.unwrap();
    let left = support::eventually_no_children(&server.connect_string(), &path, Duration::from_secs(10)).await;
    assert!(left.is_empty(), "left behind: {left:?}");
}
