//! Retention: outcomes as TTL nodes expire on the server; plain outcomes are removed by the
//! sweep, which never touches claims or fresh outcomes.

use std::time::Duration;

use zk_curator::idempotency::{IdempotencyKeys, Retention};

use super::{kind, started};
use crate::support::{self, eventually, observer, server_and_clients, unique_path};

#[tokio::test]
async fn a_recorded_outcome_expires_after_its_ttl_and_the_key_is_free_again() {
    let (server, clients) = server_and_clients(1).await;
    let keys = IdempotencyKeys::new(&clients[0], &unique_path("idem-ttl"), Retention::Ttl(Duration::from_millis(500)))
        .expect("keys");
    let claim = started(keys.begin("r").await.expect("begin"), "r");
    let path = claim.path().to_string();
    claim.complete(b"v".to_vec()).await.expect("complete");
    let zk = observer(&server.connect_string()).await;
    let stat = support::stat(&zk, &path).await.expect("the outcome exists");
    assert_eq!(stat.ephemeral_owner, 0, "the outcome outlives the session");
    // The server reaps the TTL node (checked every 100 ms by the testing server).
    eventually(Duration::from_secs(20), "the outcome's TTL node is removed by the server", || async {
        !support::exists(&zk, &path).await
    })
    .await;
    assert_eq!(kind(&keys.begin("r").await.expect("begin")), "started", "the key is free after its retention");
}

#[tokio::test]
async fn the_sweep_removes_only_outcomes_older_than_the_retention() {
    let (server, clients) = server_and_clients(1).await;
    let keys =
        IdempotencyKeys::new(&clients[0], &unique_path("idem-sweep"), Retention::Sweep(Duration::from_millis(400)))
            .expect("keys");
    started(keys.begin("old").await.expect("begin"), "old").complete(b"1".to_vec()).await.expect("complete");
    let live = started(keys.begin("live").await.expect("begin"), "live");
    tokio::time::sleep(Duration::from_millis(600)).await;
    started(keys.begin("fresh").await.expect("begin"), "fresh").complete(b"3".to_vec()).await.expect("complete");
    assert_eq!(keys.sweep_expired().await.expect("sweep"), 1, "only the old outcome is expired");
    let zk = observer(&server.connect_string()).await;
    let mut left = support::sorted_children(&zk, keys.base()).await;
    left.sort();
    assert_eq!(left, vec!["fresh".to_string(), "live".to_string()]);
    assert_eq!(kind(&keys.begin("old").await.expect("begin")), "started", "a swept key is free again");
    assert_eq!(kind(&keys.begin("fresh").await.expect("begin")), "done:3");
    live.complete(b"2".to_vec()).await.expect("the live claim was untouched");
    // Nothing to sweep under a base that does not exist.
    let empty = IdempotencyKeys::new(&clients[0], &unique_path("idem-none"), keys.retention()).expect("keys");
    assert_eq!(empty.sweep_expired().await.expect("sweep"), 0);
}
