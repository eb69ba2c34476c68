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

use zk_curator::{
    java_cmp, parse_sequence, read_write_sort_key, standard_sort_key, CuratorClient, ErrorCode, LATCH_LOCK_NAME,
    READ_LOCK_NAME, SEMAPHORE_LEASE_PARENT, SEMAPHORE_LOCK_PARENT, WRITE_LOCK_NAME,
};

use super::lock_command::{exit, EXIT_UNAVAILABLE};
use super::Resolved;

/// The lock name of `InterProcessMutex` nodes (Curator's `LOCK_NAME`).
const MUTEX_LOCK_NAME: &str = "lock-";

pub(crate) async fn run(connection: &Resolved, path: &str) -> ExitCode {
    let client = match connection.connect(Duration::from_secs(15)).await {
        Ok(client) => client,
        Err(e) => {
            eprintln!("zk-curator: {e}");
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
            eprintln!("zk-curator: {e}");
            exit(EXIT_UNAVAILABLE)
        }
    }
}

/// Children of `path` sorted by sequence number (then name); none if it does not exist.
async fn children(client: &CuratorClient, path: &str) -> Result<Vec<String>, String> {
    match client.get_children(path).await {
        Ok(mut names) => {
            names.sort_by(|a, b| (parse_sequence(a), a).cmp(&(parse_sequence(b), b)));
            Ok(names)
        }
        Err(e) if e.code() == Some(ErrorCode::NoNode) => Ok(Vec::new()),
        Err(e) => Err(format!("listing {path}: {e}")),
    }
}

/// `names` in the recipe's order: by `key` (Curator's `fixForSorting`), Java's string order, stable.
fn sorted_by(names: &[String], key: impl Fn(&String) -> String) -> Vec<String> {
    let mut keyed: Vec<(String, &String)> = names.iter().map(|n| (key(n), n)).collect();
    keyed.sort_by(|a, b| java_cmp(&a.0, &b.0));
    keyed.into_iter().map(|(_, n)| n.clone()).collect()
}

async fn list(client: &CuratorClient, path: &str) -> Result<Vec<String>, String> {
    let names = children(client, path).await?;
    // (holder, path) in the order to print.
    let mut nodes: Vec<(bool, String)> = Vec::new();
    let child = |name: &str| format!("{path}/{name}");
    let is_rw = |n: &String| n.contains(READ_LOCK_NAME) || n.contains(WRITE_LOCK_NAME);
    if names.iter().any(|n| n == SEMAPHORE_LEASE_PARENT || n == SEMAPHORE_LOCK_PARENT) {
        let (leases_path, locks_path) = (child(SEMAPHORE_LEASE_PARENT), child(SEMAPHORE_LOCK_PARENT));
        let leases = children(client, &leases_path).await?;
        let locks = children(client, &locks_path).await?;
        let owner = |p: String| async move { client.exists(&p).await.ok().flatten().map(|s| s.ephemeral_owner) };
        let pending = match (locks.first(), leases.iter().max_by_key(|n| parse_sequence(n))) {
            (Some(first), Some(newest)) => {
                let deciding = owner(format!("{locks_path}/{first}")).await;
                let newest_owner = owner(format!("{leases_path}/{newest}")).await;
                (deciding.is_some() && deciding == newest_owner).then(|| newest.clone())
            }
            _ => None,
        };
        for lease in &leases {
            if Some(lease) != pending.as_ref() {
                nodes.push((true, format!("{leases_path}/{lease}")));
            }
        }
        nodes.extend(pending.map(|lease| (false, format!("{leases_path}/{lease}"))));
        nodes.extend(locks.iter().map(|lock| (false, format!("{locks_path}/{lock}"))));
    } else if names.iter().any(is_rw) {
        // Every child is in the queue, sorted as the recipe sorts it (a foreign child that sorts
        // first keeps writers out, as in Curator); only lock nodes are listed.
        let key = |n: &String| read_write_sort_key(n).to_string();
        let sorted = sorted_by(&names, key);
        for (i, name) in sorted.iter().enumerate() {
            if !is_rw(name) {
                continue;
            }
            let holder = if name.contains(WRITE_LOCK_NAME) {
                i == 0
            } else {
                // A reader holds unless a writer sorts strictly before it (a downgrading
                // writer's read node carries the writer's own sequence number).
                !sorted[..i].iter().any(|w| {
                    w.contains(WRITE_LOCK_NAME) && java_cmp(read_write_sort_key(w), read_write_sort_key(name)).is_lt()
                })
            };
            nodes.push((holder, child(name)));
        }
        // Holders first, in queue order.
        nodes.sort_by_key(|(holder, _)| !*holder);
    } else {
        // As the recipe (and Curator): every child is a contender, the first in sort order holds
        // (leads, for a latch).
        let lock_name =
            if names.iter().any(|n| n.contains(LATCH_LOCK_NAME)) { LATCH_LOCK_NAME } else { MUTEX_LOCK_NAME };
        let sorted = sorted_by(&names, |n| standard_sort_key(n, lock_name).to_string());
        for (i, name) in sorted.iter().enumerate() {
            if name.contains(lock_name) {
                nodes.push((i == 0, child(name)));
            }
        }
    }
    let mut lines = Vec::with_capacity(nodes.len());
    for (holder, node) in nodes {
        let data = match client.get_data(&node).await {
            Ok((data, _)) => format!("{:?}", String::from_utf8_lossy(&data)),
            Err(_) => "<gone>".to_string(),
        };
        lines.push(format!("{} {node}  data={data}", if holder { "HOLDER" } else { "WAITER" }));
    }
    Ok(lines)
}
