//! The value one turn's write hands to the client's next turn on a counter: it may only stand in
//! for a read when it was written while the next call was already waiting, never for a call that
//! began after the node was deleted and made again (same version, other data) by someone else;
//! and dropped calls neither hold the turn nor count twice.

use zookeeper_client as zk;

use zk_curator::atomic::DistributedAtomicLong;

use crate::support;

#[tokio::test]
async fn an_increment_after_another_session_remade_the_node_counts_from_the_new_value() {
    let (server, clients) = support::server_and_clients(1).await;
    let zk = support::observer(&server.connect_string()).await;
    let base = support::unique_path("atomic-hand-off");
    let options = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    // A node that stays beside the counters, so the server never reaps their (container) parent
    // while a counter is deleted and made again.
    let keep = DistributedAtomicLong::new(&clients[0], &format!("{base}/keep")).unwrap();
    assert!(keep.increment().await.unwrap().succeeded());
    for round in 0..20 {
        let counter = DistributedAtomicLong::new(&clients[0], &format!("{base}/c{round}")).unwrap();
        // Makes the node: version 0, holding 1; the turn hands (1, version 0) on.
        assert_eq!(*counter.increment().await.unwrap().post_value(), 1);
        // Another session deletes the node and makes it again (version 0 again, holding 100),
        // both queued at once so that this happens well within the hand-off's lifetime.
        let delete = zk.delete(counter.path(), None);
        let create = zk.create(counter.path(), &100i64.to_be_bytes(), &options);
        delete.await.expect("delete the counter");
        create.await.expect("make it again");
        // A call begun after that must see 100: a hand-off from before it began is stale.
        let r = counter.increment().await.unwrap();
        assert!(r.succeeded());
        assert_eq!(
            (*r.pre_value(), *r.post_value()),
            (100, 101),
            "round {round}: the increment counted from the value before the node was remade"
        );
        let (data, _) = zk.get_data(counter.path()).await.unwrap();
        assert_eq!(data, 101i64.to_be_bytes().to_vec(), "round {round}: the other session's 100 was lost");
    }
}

#[tokio::test]
async fn increments_dropped_at_every_await_leave_no_turn_stuck_and_count_at_most_once() {
    use std::time::Duration;
    let (_server, clients) = support::server_and_clients(1).await;
    let path = format!("{}/c", support::unique_path("atomic-hand-off-cancel"));
    let counter = DistributedAtomicLong::new(&clients[0], &path).unwrap();
    assert!(counter.increment().await.unwrap().succeeded());
    // A second task of the same client keeps the turn queue busy (and its hand-offs in use).
    let steady = {
        let counter = counter.clone();
        crate::support::spawn(async move {
            let mut ok = 0u64;
            for _ in 0..150 {
                let r = counter.increment().await.expect("a steady increment");
                assert!(r.succeeded(), "a steady increment gave up");
                ok += 1;
            }
            ok
        })
    };
    let (mut succeeded, mut dropped) = (1u64, 0u64);
    for i in 0..300u64 {
        match tokio::time::timeout(Duration::from_micros(i * 37 % 4000), counter.increment()).await {
            Ok(r) => {
                assert!(r.unwrap().succeeded());
                succeeded += 1;
            }
            Err(_) => dropped += 1,
        }
    }
    succeeded += tokio::time::timeout(Duration::from_secs(60), steady).await.expect("no stuck turn").unwrap();
    let last = tokio::time::timeout(Duration::from_secs(60), counter.increment())
        .await
        .expect("the turn is free after the dropped calls")
        .unwrap();
    assert!(last.succeeded());
    succeeded += 1;
    let total = *last.post_value() as u64;
    assert!(
        (succeeded..=succeeded + dropped).contains(&total),
        "total {total}: {succeeded} successes, {dropped} dropped (each at most once)"
    );
}
