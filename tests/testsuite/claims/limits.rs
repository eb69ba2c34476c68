//! Absurd input against the claims: huge ages, many long item names, payloads at the size limit,
//! tags that cannot name a node.

use std::time::Duration;

use zk_curator::claims::WorkClaims;
use zk_curator::Error;

use super::{add_items, claims, HANG};
use crate::support;

#[tokio::test]
async fn a_huge_reclaim_age_wakes_up_no_claim() {
    let (_server, clients) = support::server_and_clients(2).await;
    let path = support::unique_path("claims-huge-age");
    let holder = claims(&clients[0], &path, "holder");
    let sweeper = claims(&clients[1], &path, "sweeper");
    add_items(&holder, 3).await;
    let held = holder.claim(3).await.unwrap();
    assert_eq!(held.len(), 3);
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Ages whose milliseconds do not fit 64 bits (the first one is 384 ms past 2^64 ms).
    for age in [Duration::from_secs(18_446_744_073_709_552), Duration::MAX, Duration::from_secs(u64::MAX / 2)] {
        let woken = sweeper.reclaim_older_than(age).await.unwrap();
        assert!(woken.is_empty(), "an age of {age:?} woke up {woken:?}");
    }
    assert!(held.iter().all(|c| c.is_held()), "no claim is lost");
    holder.release_all().await.unwrap();
}

#[tokio::test]
async fn many_long_named_items_are_claimed_and_reclaimed_without_an_oversized_request() {
    let (_server, clients) = support::server_and_clients(2).await;
    let path = support::unique_path("claims-long-names");
    let worker = claims(&clients[0], &path, "worker");
    let sweeper = claims(&clients[1], &path, "sweeper");
    // 520 names of 2,100 bytes: one request reading all of them is over the server's 1 MiB.
    let count = 520;
    let names: Vec<String> = (0..count).map(|i| format!("{i:04}{}", "n".repeat(2_096))).collect();
    let adds: Vec<_> = names.iter().map(|n| worker.add(n, b"x")).collect();
    for added in futures::future::join_all(adds).await {
        added.expect("add a long-named item");
    }
    let session = clients[0].session_id();
    // A request over the server's limit closes the connection every time, so it would fail every
    // call; a connection lost to a loaded machine may end one call with part of the items, and
    // the next call takes the rest.
    let mut held = Vec::new();
    for _ in 0..5 {
        if held.len() == count {
            break;
        }
        match worker.claim(usize::MAX).await {
            Ok(claims) => held.extend(claims),
            Err(e) if e.is_retryable() => {}
            Err(e) => panic!("claim: {e}"),
        }
    }
    // First: a session lost meanwhile (a very loaded machine) would have the next call claim again.
    assert_eq!(clients[0].session_id(), session, "the claims' session lived");
    assert_eq!(held.len(), count, "every item claimed");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut woken = std::collections::HashSet::new();
    for _ in 0..5 {
        if woken.len() == count {
            break;
        }
        match sweeper.reclaim_older_than(Duration::from_millis(100)).await {
            Ok(items) => woken.extend(items.into_iter().map(|reclaimed| reclaimed.item)),
            Err(e) if e.is_retryable() => {}
            Err(e) => panic!("reclaim: {e}"),
        }
    }
    assert_eq!(woken.len(), count, "every claim woken up");
    // The holder hears of each reclaim through its claim's watch, a moment later.
    support::eventually(HANG, "the holder was told every claim is lost", || async {
        held.iter().all(|c| !c.is_held()) && worker.my_claims().is_empty()
    })
    .await;
}

#[tokio::test]
async fn an_item_that_add_accepts_can_be_claimed() {
    let (_server, clients) = support::server_and_clients(1).await;
    let client = &clients[0];
    let path = support::unique_path("claims-big-item");
    let work = claims(client, &path, &"t".repeat(256));
    let max = zk_curator::framework::DEFAULT_MAX_DATA_SIZE;
    let name = "n".repeat(1_900);
    let session = client.session_id();
    match work.add(&name, &vec![7u8; max]).await {
        // Refused up front, with a typed error: fine.
        Err(Error::InvalidArgument { .. }) => {}
        Err(e) => panic!("add: {e}"),
        Ok(()) => {
            let claimed = tokio::time::timeout(Duration::from_secs(60), work.claim(1))
                .await
                .expect("claim returns")
                .expect("an added item can be claimed");
            assert_eq!(claimed.len(), 1);
            assert_eq!(client.session_id(), session);
            work.complete(&name).await.unwrap();
        }
    }
    // The largest payload that fits is claimed and completed.
    work.add("small-name", &vec![7u8; max]).await.unwrap();
    assert_eq!(work.claim(1).await.unwrap().len(), 1);
    work.complete("small-name").await.unwrap();
}

#[tokio::test]
async fn a_tag_that_cannot_name_a_member_node_is_refused_up_front() {
    let (_server, clients) = support::server_and_clients(1).await;
    let path = support::unique_path("claims-odd-tag");
    for tag in ["a\u{0}b", "\u{1}", "x\u{fffe}"] {
        match WorkClaims::new(&clients[0], &path, tag) {
            Err(Error::InvalidArgument { name: "tag", value, .. }) => assert_eq!(value, tag),
            Ok(work) => {
                let work = work.with_fair_share();
                work.add("item", b"").await.ok();
                let claimed = work.claim(1).await;
                assert!(claimed.is_ok_and(|c| c.len() == 1), "tag {tag:?}: a tag accepted is usable");
                work.release_all().await.unwrap();
            }
            Err(e) => panic!("tag {tag:?}: {e}"),
        }
    }
}

#[tokio::test]
async fn a_handle_keeps_working_after_its_recipe_path_was_deleted_under_it() {
    let (server, clients) = support::server_and_clients(1).await;
    let path = support::unique_path("claims-path-deleted");
    let work = claims(&clients[0], &path, "worker");
    add_items(&work, 1).await;
    assert!(work.wait_for_work(Duration::from_secs(5)).await.unwrap());
    // An operator removes the whole recipe tree.
    let zk = support::observer(&server.connect_string()).await;
    for dir in ["items/item-0000", "items", "claims"] {
        zk.delete(&format!("{path}/{dir}"), None).await.unwrap();
    }
    assert!(!work.wait_for_work(Duration::from_millis(200)).await.expect("wait on a deleted tree"));
    assert!(work.claim(1).await.expect("claim on a deleted tree").is_empty());
    zk.delete(&format!("{path}/claims"), None).await.unwrap();
    assert!(work.reclaim_older_than(Duration::from_secs(1)).await.expect("sweep a deleted tree").is_empty());
    work.add("again", b"").await.expect("add makes the tree again");
    assert!(work.wait_for_work(Duration::from_secs(5)).await.unwrap());
    assert_eq!(work.claim(1).await.unwrap().len(), 1);
    work.complete("again").await.unwrap();
}
