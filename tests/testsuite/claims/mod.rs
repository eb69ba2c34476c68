//! Lock-tag batch claims (`WorkClaims`) against a real server: exactly-once completion with
//! several workers (one losing its session mid-batch), a stuck holder reclaimed and refused, no
//! orphan claim after a cancelled claim, no watcher growth over repeated timed waits, bad input.

mod completion;
mod connection_cuts;
mod faults;
mod identity;
mod limits;
mod session;
mod waiting;

use std::time::Duration;

use zk_curator::claims::WorkClaims;
use zk_curator::CuratorClient;

const HANG: Duration = Duration::from_secs(60);

/// Adds `count` items `item-0000`.. under `path`.
async fn add_items(work: &WorkClaims, count: usize) {
    for i in 0..count {
        work.add(&format!("item-{i:04}"), format!("payload {i}").as_bytes()).await.expect("add an item");
    }
}

fn claims(client: &CuratorClient, path: &str, tag: &str) -> WorkClaims {
    WorkClaims::new(client, path, tag).expect("valid path and tag")
}
