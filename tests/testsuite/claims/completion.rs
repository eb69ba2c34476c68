//! Claiming, completing, reclaiming: exactly once, fenced, nothing left behind.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use zk_curator::claims::{ClaimState, WorkClaims};
use zk_curator::{Error, ErrorKind};

use super::{add_items, claims, HANG};
use crate::support;

#[tokio::test]
async fn every_item_is_completed_exactly_once_by_several_workers_even_when_one_session_dies_mid_batch() {
    let (server, clients) = support::server_and_clients(4).await;
    let connect = server.connect_string();
    let path = support::unique_path("claims-exactly-once");
    let items = 200;
    add_items(&claims(&clients[0], &path, "loader"), items).await;
    let done: Arc<Mutex<HashMap<String, usize>>> = Arc::default();

    // Worker 0 claims a batch, then its session dies before it completes any of it: every
    // complete it tries afterwards must be refused.
    let doomed = claims(&clients[0], &path, "doomed");
    let batch = doomed.claim(20).await.unwrap();
    assert_eq!(batch.len(), 20);
    zk_curator::testing::expire_session(&connect, &clients[0]).await.unwrap();

    let mut workers = Vec::new();
    for (n, client) in clients.iter().enumerate().skip(1) {
        let work = claims(client, &path, &format!("worker-{n}"));
        let done = done.clone();
        workers.push(crate::support::spawn(async move {
            loop {
                let batch = work.claim(15).await.expect("claim");
                if batch.is_empty() {
                    if work.unclaimed().await.unwrap().is_empty()
                        && !work.wait_for_work(Duration::from_secs(1)).await.unwrap()
                    {
                        break;
                    }
                    continue;
                }
                for claim in batch {
                    work.complete(claim.item()).await.expect("complete a held claim");
                    *done.lock().entry(claim.item().to_string()).or_default() += 1;
                }
            }
        }));
    }
    // The dead session's worker still tries to finish its batch.
    for claim in &batch {
        match doomed.complete(claim.item()).await {
            Ok(()) => *done.lock().entry(claim.item().to_string()).or_default() += 1,
            Err(e) => assert_eq!(e.kind(), ErrorKind::LockLost, "{}: {e}", claim.item()),
        }
        assert_ne!(claim.state(), ClaimState::Held);
    }
    for worker in workers {
        support::join("worker", HANG, worker).await;
    }
    let done = done.lock().clone();
    assert_eq!(done.len(), items, "every item completed");
    assert!(done.values().all(|&n| n == 1), "no item completed twice: {done:?}");
    let zk = support::observer(&connect).await;
    assert!(support::sorted_children(&zk, &format!("{path}/items")).await.is_empty());
    assert!(support::sorted_children(&zk, &format!("{path}/claims")).await.is_empty(), "no orphan claim");
}

#[tokio::test]
async fn a_stuck_holder_is_reclaimed_told_lost_and_its_complete_refused() {
    let (server, clients) = support::server_and_clients(2).await;
    let path = support::unique_path("claims-stuck");
    let stuck = claims(&clients[0], &path, "stuck");
    let other = claims(&clients[1], &path, "other");
    add_items(&stuck, 2).await;
    let held = stuck.claim(2).await.unwrap();
    assert_eq!(held.len(), 2);
    let fences: Vec<i32> = held.iter().map(|c| c.fence()).collect();

    tokio::time::sleep(Duration::from_millis(300)).await;
    let woken = other.reclaim_older_than(Duration::from_millis(100)).await.unwrap();
    assert_eq!(woken.len(), 2, "{woken:?}");
    assert!(woken.iter().all(|w| w.tag == "stuck" && w.session == clients[0].session_id()));
    for claim in &held {
        tokio::time::timeout(HANG, claim.lost()).await.expect("the stuck holder is told its claim is lost");
    }
    assert!(stuck.my_claims().is_empty(), "lost claims are not listed as held");

    // One item is claimed again by another worker: the stale complete must not touch it.
    let again = other.claim(1).await.unwrap();
    assert_eq!(again.len(), 1);
    assert!(again[0].fence() > fences[0].min(fences[1]), "a later claim has a larger fence");
    for claim in &held {
        let refused = stuck.complete(claim.item()).await;
        assert!(matches!(refused, Err(Error::LockLost { .. }) | Err(Error::NotOwner { .. })), "{refused:?}");
    }
    let zk = support::observer(&server.connect_string()).await;
    assert_eq!(support::sorted_children(&zk, &format!("{path}/items")).await.len(), 2, "nothing was completed");
    assert!(support::exists(&zk, &format!("{path}/claims/{}", again[0].item())).await, "the new claim stands");
    other.complete(again[0].item()).await.unwrap();
    assert_eq!(other.claim(5).await.unwrap().len(), 1, "the other reclaimed item is free again");
    other.release_all().await.unwrap();
    assert!(support::sorted_children(&zk, &format!("{path}/claims")).await.is_empty());
}

#[tokio::test]
async fn a_cancelled_claim_leaves_no_claim_node() {
    let (server, clients) = support::server_and_clients(1).await;
    let path = support::unique_path("claims-cancelled");
    let work = claims(&clients[0], &path, "canceller");
    add_items(&work, 40).await;
    // Dropped after its task handed over a result that the caller never read: polled once, then
    // left alone until its claims exist and a while after.
    let mut unread = Box::pin(work.claim(40));
    assert!(tokio::time::timeout(Duration::ZERO, &mut unread).await.is_err());
    let zk = support::observer(&server.connect_string()).await;
    let claims_dir = format!("{path}/claims");
    assert!(
        support::poll_until(HANG, || async { support::sorted_children(&zk, &claims_dir).await.len() == 40 }).await,
        "the unread claim claimed every item"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(unread);
    // Dropped at different points: before its first request and while requests are in flight.
    for wait_us in [0, 200, 500, 1_000, 2_000, 3_000, 5_000, 8_000, 12_000, 20_000] {
        if let Ok(done) = tokio::time::timeout(Duration::from_micros(wait_us), work.claim(40)).await {
            // Not cancelled after all: this one's claims are ours to release.
            for claim in done.unwrap() {
                work.release(claim.item()).await.unwrap();
            }
        }
    }
    // The next claim waits for the cancelled claims' releases: a claim left behind would keep
    // its item from it.
    assert_eq!(work.claim(40).await.unwrap().len(), 40, "every item can be claimed again");
    assert_eq!(work.my_claims().len(), 40);
    work.release_all().await.unwrap();
    let left = support::eventually_no_children(&server.connect_string(), &format!("{path}/claims"), HANG).await;
    assert!(left.is_empty(), "claims left after release_all: {left:?}");
}

#[tokio::test]
async fn bad_input_is_refused_with_a_typed_error_naming_the_value() {
    let (_server, clients) = support::server_and_clients(1).await;
    let client = &clients[0];
    let path = support::unique_path("claims-bad-input");
    let long = "t".repeat(300);
    for (tag, shown) in [("", "\"\""), ("a\nb", "a\nb"), (long.as_str(), long.as_str())] {
        match WorkClaims::new(client, &path, tag) {
            Err(Error::InvalidArgument { name: "tag", value, .. }) => assert_eq!(value, shown),
            other => panic!("tag {tag:?}: {other:?}"),
        }
    }
    assert!(matches!(WorkClaims::new(client, "no-slash", "t"), Err(Error::InvalidPath { .. })));
    let work = claims(client, &path, "t");
    assert!(matches!(work.claim(0).await, Err(Error::InvalidArgument { name: "n", .. })));
    assert!(matches!(work.add("a/b", b"").await, Err(Error::InvalidArgument { name: "item", .. })));
    assert!(matches!(work.complete("").await, Err(Error::InvalidArgument { name: "item", .. })));
    assert!(matches!(work.reclaim_older_than(Duration::ZERO).await, Err(Error::InvalidArgument { name: "age", .. })));
    match work.complete("never-claimed").await {
        Err(Error::NotOwner { path: p, .. }) => assert!(p.ends_with("/items/never-claimed"), "{p}"),
        other => panic!("{other:?}"),
    }
    work.add("x", b"").await.unwrap();
    assert!(work.add("x", b"").await.unwrap_err().code() == Some(zk_curator::ErrorCode::NodeExists));
}

#[tokio::test]
async fn a_complete_sent_before_the_holder_hears_of_the_reclaim_is_refused_by_the_fence() {
    use zk_curator::testing::{FaultProxy, ProxyMode};
    let (server, clients) = support::server_and_clients(1).await;
    let proxy = FaultProxy::start(&server.connect_string()).await.expect("proxy");
    let stuck_client = support::client(&proxy.connect_string()).await;
    let path = support::unique_path("claims-fence");
    let stuck = claims(&stuck_client, &path, "stuck");
    let other = claims(&clients[0], &path, "other");
    add_items(&stuck, 1).await;
    let held = stuck.claim(1).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;

    // The holder cannot hear anything: its complete goes out while its claim still looks held,
    // and meanwhile the item is reclaimed and claimed by another worker.
    proxy.set_mode(ProxyMode::Blackhole);
    let completing = {
        let stuck = stuck.clone();
        let item = held[0].item().to_string();
        crate::support::spawn(async move { stuck.complete(&item).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(other.reclaim_older_than(Duration::from_millis(100)).await.unwrap().len(), 1);
    let again = other.claim(1).await.unwrap();
    assert_eq!(again.len(), 1);
    proxy.set_mode(ProxyMode::Pass);

    let refused = support::join("the stale complete", HANG, completing).await;
    assert!(refused.is_err(), "a stale complete must be refused, got {refused:?}");
    let zk = support::observer(&server.connect_string()).await;
    assert!(support::exists(&zk, &format!("{path}/items/{}", again[0].item())).await, "the item is not completed");
    assert!(support::exists(&zk, &format!("{path}/claims/{}", again[0].item())).await, "the new claim stands");
    other.complete(again[0].item()).await.expect("the new holder completes");
}

#[tokio::test]
async fn with_fair_share_a_worker_claims_at_most_its_share_of_the_unclaimed_items() {
    let (_server, clients) = support::server_and_clients(2).await;
    let path = support::unique_path("claims-fair");
    let a = WorkClaims::new(&clients[0], &path, "a").unwrap().with_fair_share();
    let b = WorkClaims::new(&clients[1], &path, "b").unwrap().with_fair_share();
    add_items(&a, 10).await;
    assert_eq!(b.claim(1).await.unwrap().len(), 1, "b joins and takes one");
    // 9 unclaimed, 2 members: at most ceil(9 / 2) = 5.
    assert_eq!(a.claim(100).await.unwrap().len(), 5);
    assert_eq!(b.claim(100).await.unwrap().len(), 2, "ceil(4 / 2)");
}

/// A holder whose link goes through a proxy, with its claim of `job` (at least 300 ms old) and its
/// `complete("job")` lost on the wire (blackholed) and already reclaimed by `other`.
struct StuckComplete {
    server: zk_curator::testing::TestingServer,
    proxy: zk_curator::testing::FaultProxy,
    path: String,
    other: WorkClaims,
    completing: tokio::task::JoinHandle<zk_curator::Result<()>>,
}

async fn a_stuck_complete_whose_claim_was_reclaimed(name: &str) -> StuckComplete {
    use zk_curator::testing::{FaultProxy, ProxyMode};
    let (server, clients) = support::server_and_clients(1).await;
    let proxy = FaultProxy::start(&server.connect_string()).await.expect("proxy");
    let stuck_client = support::client(&proxy.connect_string()).await;
    let path = support::unique_path(name);
    let stuck = claims(&stuck_client, &path, "stuck");
    let other = claims(&clients[0], &path, "other");
    stuck.add("job", b"first").await.unwrap();
    assert_eq!(stuck.claim(1).await.unwrap().len(), 1);
    tokio::time::sleep(Duration::from_millis(300)).await;
    proxy.set_mode(ProxyMode::Blackhole);
    let completing = crate::support::spawn(async move { stuck.complete("job").await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(other.reclaim_older_than(Duration::from_millis(100)).await.unwrap().len(), 1);
    StuckComplete { server, proxy, path, other, completing }
}

#[tokio::test]
async fn a_complete_resent_after_a_reconnect_never_deletes_an_item_added_again_and_held_by_another() {
    // The stuck holder's complete is lost on the wire; meanwhile its claim is reclaimed, the item
    // is claimed and completed by another worker, added again under the same name and claimed
    // again: that claim has the same item version (the same fence number) as the stuck one.
    let StuckComplete { server, proxy, path, other, completing } =
        a_stuck_complete_whose_claim_was_reclaimed("claims-fence-readded").await;
    assert_eq!(other.claim(1).await.unwrap().len(), 1);
    other.complete("job").await.unwrap();
    other.add("job", b"second").await.unwrap();
    let again = other.claim(1).await.unwrap();
    assert_eq!(again.len(), 1);
    // The link heals: the stuck complete is sent again on the same session.
    proxy.set_mode(zk_curator::testing::ProxyMode::Pass);

    let stale = support::join("the stale complete", HANG, completing).await;
    assert!(stale.is_err(), "a stale complete must not succeed, got {stale:?}");
    let zk = support::observer(&server.connect_string()).await;
    assert!(support::exists(&zk, &format!("{path}/items/job")).await, "the item added again is not completed");
    assert!(support::exists(&zk, &format!("{path}/claims/job")).await, "the new claim stands");
    assert!(again[0].is_held());
    other.complete("job").await.expect("the new holder completes");
}

#[tokio::test]
async fn a_complete_resent_after_its_claim_was_reclaimed_is_refused_and_the_item_stays_for_others() {
    // The complete is lost on the wire and the claim reclaimed meanwhile; nobody claims the item
    // before the complete is sent again.
    let StuckComplete { server, proxy, path, other, completing } =
        a_stuck_complete_whose_claim_was_reclaimed("claims-resent-reclaimed").await;
    proxy.set_mode(zk_curator::testing::ProxyMode::Pass);

    let stale = support::join("the stale complete", HANG, completing).await;
    match stale {
        Err(e) => assert_eq!(e.kind(), ErrorKind::LockLost, "{e}"),
        Ok(()) => panic!("a complete that completed nothing reported success"),
    }
    let zk = support::observer(&server.connect_string()).await;
    assert!(support::exists(&zk, &format!("{path}/items/job")).await, "the item was not completed");
    assert_eq!(other.claim(1).await.unwrap().len(), 1, "the item is there for others");
    other.complete("job").await.unwrap();
}

#[tokio::test]
async fn a_claim_whose_item_someone_else_deleted_is_not_left_behind() {
    let (server, clients) = support::server_and_clients(2).await;
    let path = support::unique_path("claims-item-deleted");
    let holder = claims(&clients[0], &path, "holder");
    let sweeper = claims(&clients[1], &path, "sweeper");
    add_items(&holder, 2).await;
    let held = holder.claim(2).await.unwrap();
    assert_eq!(held.len(), 2);
    // An operator deletes both items while they are claimed.
    let zk = support::observer(&server.connect_string()).await;
    for claim in &held {
        zk.delete(&format!("{path}/items/{}", claim.item()), None).await.unwrap();
    }
    let claim_node = |item: &str| format!("{path}/claims/{item}");

    // The holder lets go of one: its claim node goes, whatever release answers.
    let released = holder.release(held[0].item()).await;
    assert!(!support::exists(&zk, &claim_node(held[0].item())).await, "release left the claim: {released:?}");
    // The other holder is stuck: a sweep wakes its item-less claim up.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let woken = sweeper.reclaim_older_than(Duration::from_millis(100)).await.unwrap();
    assert_eq!(woken.len(), 1, "{woken:?}");
    assert!(!support::exists(&zk, &claim_node(held[1].item())).await, "the sweep left the item-less claim");
    tokio::time::timeout(HANG, held[1].lost()).await.expect("the stuck holder is told");
    assert!(holder.complete(held[1].item()).await.is_err());
    assert!(support::sorted_children(&zk, &format!("{path}/claims")).await.is_empty(), "no orphan claim");
}

#[tokio::test]
async fn a_dropped_fair_share_participant_no_longer_counts_as_a_member() {
    let (server, clients) = support::server_and_clients(2).await;
    let path = support::unique_path("claims-fair-dropped");
    let a = WorkClaims::new(&clients[0], &path, "a").unwrap().with_fair_share();
    let b = WorkClaims::new(&clients[1], &path, "b").unwrap().with_fair_share();
    add_items(&a, 10).await;
    assert_eq!(b.claim(1).await.unwrap().len(), 1, "b joins and takes one");
    b.release_all().await.unwrap();
    // b's process stops taking part (its handle dropped), its client lives on for other work.
    drop(b);
    let members = format!("{path}/members");
    let left = support::eventually_no_children(&server.connect_string(), &members, HANG).await;
    assert_eq!(left.len(), 0, "a dropped participant's member node is left: {left:?}");
    assert_eq!(a.claim(100).await.unwrap().len(), 10, "a is the only member: it may take everything");
    a.release_all().await.unwrap();
}

#[tokio::test]
async fn a_claim_whose_item_was_replaced_under_it_is_released_and_the_new_item_is_free() {
    let (server, clients) = support::server_and_clients(2).await;
    let path = support::unique_path("claims-item-replaced");
    let holder = claims(&clients[0], &path, "holder");
    let other = claims(&clients[1], &path, "other");
    add_items(&holder, 1).await;
    let held = holder.claim(1).await.unwrap();
    assert_eq!(held.len(), 1);
    let item = held[0].item().to_string();
    // An operator replaces the item (deleted and made again under its name) while it is claimed.
    let zk = support::observer(&server.connect_string()).await;
    let item_path = format!("{path}/items/{item}");
    zk.delete(&item_path, None).await.unwrap();
    let options = zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    zk.create(&item_path, b"new payload", &options).await.unwrap();

    let released = holder.release(&item).await;
    assert!(
        !support::exists(&zk, &format!("{path}/claims/{item}")).await,
        "the old claim blocks the new item: {released:?}"
    );
    let again = other.claim(1).await.unwrap();
    assert_eq!(again.len(), 1, "the new item is free for others");
    assert_eq!(again[0].data(), b"new payload");
    other.complete(&item).await.unwrap();
}

#[tokio::test]
async fn a_complete_called_while_cut_off_never_deletes_an_item_added_again_and_held_by_another() {
    use zk_curator::testing::{FaultProxy, ProxyMode};
    use zk_curator::ConnectionState;
    // The holder is cut off; meanwhile its claim is reclaimed, the item is claimed and completed by
    // another worker, added again under the same name and claimed again: that claim has the same
    // item version (the same fence number) as the holder's. The holder's complete, called while it
    // is cut off, is first sent once the link heals, on the same session.
    let (server, clients) = support::server_and_clients(1).await;
    let proxy = FaultProxy::start(&server.connect_string()).await.expect("proxy");
    let holder_client = support::client(&proxy.connect_string()).await;
    let path = support::unique_path("claims-complete-while-cut");
    let holder = claims(&holder_client, &path, "holder");
    let other = claims(&clients[0], &path, "other");
    holder.add("job", b"first").await.unwrap();
    let held = holder.claim(1).await.unwrap();
    assert_eq!(held.len(), 1);
    proxy.set_mode(ProxyMode::Cut);
    assert!(
        support::poll_until(HANG, || async { holder_client.connection_state() == ConnectionState::Suspended }).await,
        "the holder notices the cut"
    );
    let completing = {
        let holder = holder.clone();
        crate::support::spawn(async move { holder.complete("job").await })
    };
    assert!(
        support::poll_until(HANG, || async {
            other.reclaim_older_than(Duration::from_millis(1)).await.unwrap().len() == 1
        })
        .await
    );
    assert_eq!(other.claim(1).await.unwrap().len(), 1);
    other.complete("job").await.unwrap();
    other.add("job", b"second").await.unwrap();
    let again = other.claim(1).await.unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].fence(), held[0].fence(), "the set-up: the same fence number");
    proxy.set_mode(ProxyMode::Pass);

    let stale = support::join("the stale complete", HANG, completing).await;
    assert!(stale.is_err(), "a stale complete must not succeed, got {stale:?}");
    let zk = support::observer(&server.connect_string()).await;
    assert!(support::exists(&zk, &format!("{path}/items/job")).await, "the item added again is not completed");
    assert!(support::exists(&zk, &format!("{path}/claims/job")).await, "the new claim stands");
    assert!(again[0].is_held());
    other.complete("job").await.expect("the new holder completes");
}
