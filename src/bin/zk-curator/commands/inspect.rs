//! `zk-curator inspect [ROOT] [--json] [--older-than DURATION]`: every lock under ROOT, who holds it,
//! since when, and how many wait (the library's `inspect_with`).

use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use zk_curator::inspect::{
    inspect_queue, inspect_services, inspect_with, InspectOptions, LockInfo, QueueInfo, ServiceSummary,
};

use crate::common::{exit, parse_seconds, EXIT_UNAVAILABLE};
use crate::connection::Resolved;

/// The status when `--older-than` finds a hold (as a lock conflict's: "somebody else has it").
const EXIT_OLD_HOLDS: u8 = 1;

#[derive(Args, Debug)]
pub(crate) struct InspectArgs {
    /// Where to start (within --namespace); every lock below it is listed.
    #[arg(default_value = "/", value_parser = parse_root)]
    root: String,
    /// A JSON array, one object per lock (schema in docs/cli.md).
    #[arg(long)]
    json: bool,
    /// List only holds older than DURATION (seconds, or e.g. 90s, 15m, 1h), and exit 1 if there is
    /// any (a probe for stuck locks).
    #[arg(long, value_name = "DURATION", value_parser = parse_seconds)]
    older_than: Option<Duration>,
    /// List at most N levels below ROOT.
    #[arg(long, value_name = "N", default_value_t = InspectOptions::default().max_depth)]
    max_depth: usize,
    /// List (getChildren) at most N nodes; stop there, with a warning on stderr. Discovery
    /// services: at most N reads (getChildren or getData), a service listed whole or not at all.
    #[arg(long, value_name = "N", default_value_t = InspectOptions::default().max_listings, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    max_nodes: usize,
    /// ROOT is a queue whose lock path (guaranteed delivery) is L: show its items in flight, each
    /// with the session of the consumer holding it (a queue's depth is shown without it too).
    #[arg(long, value_name = "L", value_parser = parse_root)]
    lock_path: Option<String>,
}

fn parse_root(text: &str) -> Result<String, String> {
    zk_curator::framework::validate_path(text).map_err(|e| e.to_string())?;
    Ok(text.to_string())
}

pub(crate) async fn run(connection: &Resolved, args: InspectArgs) -> ExitCode {
    let client = match connection.connect(Duration::from_secs(15)).await {
        Ok(client) => client,
        Err(e) => {
            eprintln!("zk-curator: {}", crate::common::Report(&e));
            return exit(EXIT_UNAVAILABLE);
        }
    };
    let options = InspectOptions::new().max_depth(args.max_depth).max_listings(args.max_nodes);
    let found = inspect_with(&client, &args.root, &options).await;
    // Discovery registries are a walk of their own (it reads nodes' data, the lock walk does not).
    let services = match (&found, args.older_than) {
        (Ok(_), None) => Some(inspect_services(&client, &args.root, &options).await),
        _ => None,
    };
    // A queue at ROOT itself (its item nodes `queue-…` are children of ROOT).
    let queue = match (&found, args.older_than) {
        (Ok(_), None) => Some(inspect_queue(&client, &args.root, args.lock_path.as_deref()).await),
        _ => None,
    };
    client.close().await;
    let queue = match queue.transpose() {
        Ok(queue) => queue.flatten().filter(|q| q.depth > 0 || q.lock_path.is_some()),
        Err(e) => {
            eprintln!("zk-curator: {}", crate::common::Report(&e));
            return exit(EXIT_UNAVAILABLE);
        }
    };
    let services = match services.transpose() {
        Ok(services) => services,
        Err(e) => {
            eprintln!("zk-curator: {}", crate::common::Report(&e));
            return exit(EXIT_UNAVAILABLE);
        }
    };
    let found = match found {
        Ok(found) => found,
        Err(e) => {
            eprintln!("zk-curator: {}", crate::common::Report(&e));
            return exit(EXIT_UNAVAILABLE);
        }
    };
    if found.truncated {
        eprintln!(
            "zk-curator: stopped at --max-nodes {} / --max-depth {}: locks further down are not listed",
            args.max_nodes, args.max_depth
        );
    }
    for path in &found.unreadable {
        eprintln!("zk-curator: not allowed to read {path}; skipped (a holder's node: shown without data)");
    }
    let truncated = found.truncated;
    let mut locks = found.locks;
    if let Some(limit) = args.older_than {
        for lock in &mut locks {
            lock.holders.retain(|h| h.held > limit);
        }
        locks.retain(|lock| !lock.holders.is_empty());
    }
    let services = services.map(|found| {
        for path in &found.unreadable {
            eprintln!("zk-curator: not allowed to read {path}; skipped");
        }
        if found.truncated && !truncated {
            eprintln!(
                "zk-curator: stopped at --max-nodes {} / --max-depth {}: services further down are not listed",
                args.max_nodes, args.max_depth
            );
        }
        found.services
    });
    let services = services.unwrap_or_default();
    if args.json {
        // The library's `serde` shapes of `LockInfo` and `ServiceSummary` are the documented
        // `--json` schema (a service is an object of kind "service").
        let mut items: Vec<serde_json::Value> = Vec::with_capacity(locks.len() + services.len());
        for lock in &locks {
            items.push(serde_json::to_value(lock).unwrap_or_default());
        }
        for service in &services {
            let mut item = serde_json::to_value(service).unwrap_or_default();
            if let Some(object) = item.as_object_mut() {
                object.insert("kind".into(), "service".into());
            }
            items.push(item);
        }
        if let Some(queue) = &queue {
            let mut item = serde_json::to_value(queue).unwrap_or_default();
            if let Some(object) = item.as_object_mut() {
                object.insert("kind".into(), "queue".into());
            }
            items.push(item);
        }
        items.sort_by(|a, b| a["path"].as_str().cmp(&b["path"].as_str()));
        match serde_json::to_string(&items) {
            Ok(json) => println!("{json}"),
            Err(e) => {
                eprintln!("zk-curator: cannot write JSON: {e}");
                return exit(EXIT_UNAVAILABLE);
            }
        }
    } else {
        print!("{}", table(&locks));
        if !services.is_empty() {
            print!("\n{}", services_table(&services));
        }
        if let Some(queue) = &queue {
            print!("\n{}", queue_table(queue));
        }
    }
    match args.older_than {
        Some(_) if !locks.is_empty() => exit(EXIT_OLD_HOLDS),
        // A probe fails closed: locks it did not reach may hold for too long.
        Some(_) if truncated => {
            eprintln!("zk-curator: the walk was cut short: no old hold found, but not every lock was looked at");
            exit(EXIT_OLD_HOLDS)
        }
        _ => exit(0),
    }
}

/// Seconds with one decimal, e.g. `12.3s`.
fn secs(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

/// One line per instance or malformed node (the first line of a service carries its path and
/// counts).
fn services_table(services: &[ServiceSummary]) -> String {
    let header = ["SERVICE", "INSTANCES", "MALFORMED", "ID", "ADDRESS", "PORT", "TYPE", "ENABLED", "SESSION"];
    let mut rows: Vec<Vec<String>> = Vec::new();
    for service in services {
        let counts = [service.path.clone(), service.instances.len().to_string(), service.malformed.len().to_string()];
        let mut first = true;
        let mut lead = || {
            let lead = if first { counts.clone() } else { Default::default() };
            first = false;
            lead
        };
        for i in &service.instances {
            let mut row = lead().to_vec();
            row.extend([
                i.id.clone(),
                i.address.clone().unwrap_or_else(|| "-".into()),
                i.port.map_or_else(|| "-".into(), |p| p.to_string()),
                i.service_type.to_string(),
                i.enabled.to_string(),
                if i.session == 0 { "-".into() } else { format!("0x{:x}", i.session) },
            ]);
            rows.push(row);
        }
        for m in &service.malformed {
            let mut row = lead().to_vec();
            let name = m.node.rsplit('/').next().unwrap_or(&m.node).to_string();
            row.extend([
                name,
                format!("malformed: {}", m.error),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
            ]);
            rows.push(row);
        }
        if service.instances.is_empty() && service.malformed.is_empty() {
            let mut row = lead().to_vec();
            row.extend(std::iter::repeat_n(String::from("-"), 6));
            rows.push(row);
        }
    }
    aligned(&header, &rows)
}

/// A queue's line (path, depth, how many in flight), then a line per item in flight.
fn queue_table(queue: &QueueInfo) -> String {
    let header = ["QUEUE", "DEPTH", "IN FLIGHT", "ITEM", "CONSUMER SESSION", "HELD"];
    let counts = [
        queue.path.clone(),
        queue.depth.to_string(),
        if queue.lock_path.is_some() { queue.in_flight.len().to_string() } else { "-".into() },
    ];
    let mut rows: Vec<Vec<String>> = Vec::new();
    for (i, item) in queue.in_flight.iter().enumerate() {
        let mut row = if i == 0 { counts.to_vec() } else { vec![String::new(); 3] };
        let name = item.item.rsplit('/').next().unwrap_or(&item.item).to_string();
        row.extend([name, item.lock.session_hex(), secs(item.lock.held)]);
        rows.push(row);
    }
    if rows.is_empty() {
        let mut row = counts.to_vec();
        row.extend(std::iter::repeat_n(String::from("-"), 3));
        rows.push(row);
    }
    aligned(&header, &rows)
}

/// The rows under the header, each column as wide as its widest cell.
fn aligned(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &[&str]| {
        let mut text = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            text.push_str(cell);
            if i + 1 < cells.len() {
                // Padded by hand: a format width over u16::MAX panics, and an error may be long.
                text.extend(std::iter::repeat_n(' ', w.saturating_sub(cell.chars().count()) + 2));
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(header);
    for row in rows {
        line(&row.iter().map(String::as_str).collect::<Vec<_>>());
    }
    out
}

/// One line per holder (the first line of a lock carries its path, kind and waiters).
fn table(locks: &[LockInfo]) -> String {
    let header = ["PATH", "KIND", "HOLDER SESSION", "HELD", "DATA", "WAITERS", "OLDEST WAIT", "HOLDER NODE"];
    let mut rows: Vec<[String; 8]> = Vec::new();
    for lock in locks {
        let waiters = lock.waiters.len().to_string();
        let oldest = lock.oldest_wait.map(secs).unwrap_or_else(|| "-".into());
        let kind = lock.kind.to_string();
        if lock.holders.is_empty() {
            rows.push([lock.path.clone(), kind, "-".into(), "-".into(), "-".into(), waiters, oldest, "-".into()]);
            continue;
        }
        for (i, h) in lock.holders.iter().enumerate() {
            let first = i == 0;
            let node = h.node.rsplit('/').next().unwrap_or(&h.node).to_string();
            rows.push([
                if first { lock.path.clone() } else { String::new() },
                if first { kind.clone() } else { String::new() },
                h.session_hex(),
                secs(h.held),
                format!("{:?}", h.data_lossy()),
                if first { waiters.clone() } else { String::new() },
                if first { oldest.clone() } else { String::new() },
                node,
            ]);
        }
    }
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &[&str]| {
        let mut text = String::new();
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            if i + 1 == cells.len() {
                text.push_str(cell);
            } else {
                // Padded by hand: a format width over u16::MAX panics, and data may be 1 MB.
                text.push_str(cell);
                text.extend(std::iter::repeat_n(' ', w.saturating_sub(cell.chars().count()) + 2));
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(&header);
    for row in &rows {
        line(&row.each_ref().map(String::as_str));
    }
    out
}
