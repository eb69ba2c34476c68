//! `DistributedDoubleBarrier` after a round whose members all went without leaving (dropped,
//! sessions lost): its `ready` is still there and open, and must not let the next round's
//! entrants in before `member_count` of them have arrived.

use std::time::Duration;

use zk_curator::DistributedDoubleBarrier;

use crate::support;

const HANG: Duration = Duration::from_secs(60);

#[tokio::test]
async fn an_abandoned_rounds_open_ready_does_not_let_two_entrants_of_three_in() {
    let (server, clients) = support::server_and_clients(3).await;
    let connect = server.connect_string();
    let path = support::unique_path("double-abandoned");
    let mut members: Vec<_> = clients.iter().map(|c| DistributedDoubleBarrier::new(c, &path, 3).unwrap()).collect();
    let mut entering = Vec::new();
    for mut m in members.drain(..) {
        entering.push(tokio::spawn(async move { m.enter().await.map(|_| m) }));
    }
    for (i, task) in entering.into_iter().enumerate() {
        // Entered, then dropped without leaving: the round is abandoned with `ready` open.
        drop(support::join(&format!("member {i} enters"), HANG, task).await.unwrap());
    }
    support::eventually(HANG, "only the abandoned round's ready is left", || async {
        support::children(&connect, &path).await == vec!["ready".to_string()]
    })
    .await;

    // A next-round entrant that has made its node and not looked yet (what `enter` does first).
    let observer = support::observer(&connect).await;
    let other = format!("{path}/{}", uuid::Uuid::new_v4());
    observer
        .create(&other, b"", &zookeeper_client::CreateMode::Ephemeral.with_acls(zookeeper_client::Acls::anyone_all()))
        .await
        .unwrap();

    let mut d = DistributedDoubleBarrier::new(&clients[0], &path, 3).unwrap();
    let entered = d.enter_timeout(Duration::from_millis(1500)).await.unwrap();
    assert!(
        !entered,
        "entered a barrier for three with two nodes there: {:?}",
        support::children(&connect, &path).await
    );
    assert!(d.member_node().is_none());
}
