//! `DistributedDoubleBarrier` after a round whose members all went without leaving (dropped,
//! sessions lost): its `ready` is still there and open, and must not let the next round's
//! entrants in before `member_count` of them have arrived; and a member counted in a round enters
//! it even when the others are gone again before it looked.

use std::time::Duration;

use zk_curator::barriers::DistributedDoubleBarrier;

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
        entering.push(crate::support::spawn(async move { m.enter().await.map(|_| m) }));
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

/// A member counted in a round (its node was there when `ready` was made) has entered, even when
/// the round's other members have already gone again by the time it looks: `ready` made after
/// its node is its round's, not an abandoned one to clear away.
#[tokio::test]
async fn a_member_counted_in_a_round_enters_even_when_the_others_left_before_it_looked() {
    let (server, _) = support::server_and_clients(0).await;
    let connect = server.connect_string();
    let proxy = zk_curator::testing::FaultProxy::start(&connect).await.unwrap();
    let via_proxy = support::client_with(&proxy.connect_string(), Duration::from_secs(20)).await;
    let path = support::unique_path("double-counted");
    let mut slow = DistributedDoubleBarrier::new(&via_proxy, &path, 3).unwrap();
    let slow_in =
        crate::support::spawn(async move { slow.enter_timeout(Duration::from_secs(20)).await.map(|e| (e, slow)) });
    let observer = support::observer(&connect).await;
    support::eventually(HANG, "the slow member's node is there", || async {
        support::children(&connect, &path).await.len() == 1
    })
    .await;

    // Its link is cut while it waits; meanwhile two more members come (plain sessions, Curator's
    // layout), the last makes `ready` counting all three, and both are gone again.
    proxy.set_mode(zk_curator::testing::ProxyMode::Cut);
    support::eventually(HANG, "the slow member's client noticed", || async { !via_proxy.is_connected() }).await;
    let options = zookeeper_client::CreateMode::Ephemeral.with_acls(zookeeper_client::Acls::anyone_all());
    let others: Vec<String> = (0..2).map(|_| format!("{path}/{}", uuid::Uuid::new_v4())).collect();
    for other in &others {
        observer.create(other, b"", &options).await.unwrap();
    }
    let persistent = zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    observer.create(&format!("{path}/ready"), b"", &persistent).await.unwrap();
    for other in &others {
        observer.delete(other, None).await.unwrap();
    }
    proxy.set_mode(zk_curator::testing::ProxyMode::Pass);

    let (entered, slow) = support::join("the slow member enters", HANG, slow_in).await.unwrap();
    assert!(entered, "a member counted in the round did not enter: {:?}", support::children(&connect, &path).await);
    assert!(slow.member_node().is_some());
    assert!(support::exists(&observer, &format!("{path}/ready")).await, "its round's ready was deleted");
}
