//! `zk-curator participants PATH`: the nodes of a lock of any kind, holders first, with their data.
//!
//! * mutex: `_c_<uuid>-lock-<seq>`; the first in sequence order holds it.
//! * leader latch (`elect`, Curator's `LeaderLatch`): `_c_<uuid>-latch-<seq>`, the participant id
//!   as data; the first in sequence order leads (listed as the holder).
//! * read-write lock: `_c_<uuid>-__READ__<seq>` / `__WRIT__<seq>` in one queue; a writer holds it
//!   when first, a reader when no writer comes before it.
//! * semaphore (and semaphore mutex): leases under `PATH/leases`, acquirers queued on the internal
//!   mutex `PATH/locks`. The first in that queue is deciding: if it has created its lease already
//!   (the newest lease, of the same session) that lease is not granted yet (`WAITER`): Curator and
//!   zk-curator hand a lease out only after releasing the internal mutex.

use std::process::ExitCode;
use std::time::Duration;

use zk_curator::inspect::inspect_lock;
use zk_curator::CuratorClient;

use crate::common::{exit, EXIT_UNAVAILABLE};
use crate::connection::Resolved;

pub(crate) async fn run(connection: &Resolved, path: &str) -> ExitCode {
    let client = match connection.connect(Duration::from_secs(15)).await {
        Ok(client) => client,
        Err(e) => {
            eprintln!("zk-curator: {}", crate::common::Report(&e));
            return exit(EXIT_UNAVAILABLE);
        }
    };
    let listed = list(&client, path).await;
    client.close().await;
    match listed {
        Ok(lines) => {
            for line in lines {
                println!("{line}");
            }
            exit(0)
        }
        Err(e) => {
            eprintln!("zk-curator: {}", crate::common::Report(&e));
            exit(EXIT_UNAVAILABLE)
        }
    }
}

async fn list(client: &CuratorClient, path: &str) -> zk_curator::Result<Vec<String>> {
    // The library recognises the kind and splits holders from waiters (`zk-curator inspect` uses
    // the same code); the waiters' data is read here.
    let Some(lock) = inspect_lock(client, path).await? else { return Ok(Vec::new()) };
    let quoted = |data: &[u8]| format!("{:?}", String::from_utf8_lossy(data));
    let mut lines: Vec<String> =
        lock.holders.iter().map(|h| format!("HOLDER {}  data={}", h.node, quoted(&h.data))).collect();
    for node in lock.pending.iter().chain(&lock.waiters) {
        let data = match client.get_data(node).await {
            Ok((data, _)) => quoted(&data),
            Err(_) => "<gone>".to_string(),
        };
        lines.push(format!("WAITER {node}  data={data}"));
    }
    Ok(lines)
}
