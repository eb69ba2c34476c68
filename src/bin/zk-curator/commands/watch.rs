//! `zk-curator watch PATH [--json] [--depth N]`: the operator's view of a `CuratorCache` — the
//! nodes under PATH as first loaded, then every change as it happens, one line per event (as
//! `etcdctl watch` prints them), until SIGINT or SIGTERM.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use serde_json::json;
use tokio::time::Instant;
use zk_curator::cache::{CacheEntry, CacheEvent, CacheState, CuratorCache};
use zk_curator::CuratorClient;

use crate::common::{exit, parse_seconds, Signals, EXIT_UNAVAILABLE};
use crate::connection::Resolved;

#[derive(Args, Debug)]
pub(crate) struct WatchArgs {
    /// The node to watch (within --namespace), with what is below it.
    #[arg(value_parser = parse_watch_path)]
    path: String,
    /// One JSON object per line (schema in docs/cli.md).
    #[arg(long)]
    json: bool,
    /// Watch at most N levels below PATH (0: only PATH itself). Default: the whole tree.
    #[arg(long, value_name = "N")]
    depth: Option<usize>,
    /// Stop (status 69) rather than hold more than N nodes.
    #[arg(long, value_name = "N", value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    max_nodes: Option<usize>,
    /// Connecting and the first full load must be done within SECS (fractions allowed), or the
    /// watch gives up with status 69. Later disconnects are waited out.
    #[arg(long, value_name = "SECS", default_value = "15", value_parser = parse_seconds)]
    timeout: Duration,
}

fn parse_watch_path(text: &str) -> Result<String, String> {
    zk_curator::framework::validate_path(text).map_err(|e| e.to_string())?;
    Ok(text.to_string())
}

/// Writes one line and flushes it (a reader of the pipe sees every event at once); `false` when
/// stdout is gone (e.g. `| head` exited).
fn say(line: &str) -> bool {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").and_then(|()| out.flush()).is_ok()
}

pub(crate) async fn run(connection: &Resolved, args: WatchArgs) -> ExitCode {
    let mut signals = match Signals::install() {
        Ok(signals) => signals,
        Err(e) => {
            eprintln!("zk-curator: cannot install signal handlers: {e}");
            return exit(EXIT_UNAVAILABLE);
        }
    };
    // A --timeout past what an Instant can hold (e.g. 1e19) means no limit, not an overflow.
    let now = Instant::now();
    let deadline = now.checked_add(args.timeout).unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 86_400));
    let client = tokio::select! {
        connected = connection.connect(args.timeout.max(Duration::from_millis(100))) => match connected {
            Ok(client) => client,
            Err(e) => {
                eprintln!("zk-curator: {}", crate::common::Report(&e));
                return exit(EXIT_UNAVAILABLE);
            }
        },
        // Interrupted before anything was watched: a clean end all the same.
        _ = signals.next() => return exit(0),
    };
    let code = watch(&client, &args, deadline, &mut signals).await;
    tokio::select! {
        () = client.close() => {}
        _ = signals.next() => {}
    }
    code
}

async fn watch(client: &CuratorClient, args: &WatchArgs, deadline: Instant, signals: &mut Signals) -> ExitCode {
    // A bad path is reported by `start`.
    let mut builder = CuratorCache::builder(client, &args.path);
    if let Some(depth) = args.depth {
        builder = builder.max_depth(depth);
    }
    if let Some(nodes) = args.max_nodes {
        builder = builder.max_nodes(nodes);
    }
    let cache = match builder.start() {
        Ok(cache) => cache,
        Err(e) => {
            eprintln!("zk-curator: {}", crate::common::Report(&e));
            return exit(EXIT_UNAVAILABLE);
        }
    };
    let code = follow(&cache, args, deadline, signals).await;
    cache.close().await;
    code
}

async fn follow(cache: &CuratorCache, args: &WatchArgs, deadline: Instant, signals: &mut Signals) -> ExitCode {
    let mut events = cache.events();
    let mut states = cache.states();
    let mut last_state = *states.borrow_and_update();
    // The nodes the printed events add up to (what `INITIALIZED` reports).
    let mut nodes = 0usize;
    let load_limit = tokio::time::sleep_until(deadline);
    tokio::pin!(load_limit);
    loop {
        tokio::select! {
            biased;
            _ = signals.next() => return exit(0),
            event = events.next() => {
                let Some(event) = event else {
                    // The cache ended: failed, or its client was closed.
                    let why = cache.error().map_or_else(|| "the connection was closed".to_string(), |e| e.to_string());
                    eprintln!("zk-curator: watch of {} stopped: {why}", args.path);
                    return exit(EXIT_UNAVAILABLE);
                };
                let initialized = matches!(event, CacheEvent::Initialized);
                match event {
                    CacheEvent::Created(_) => nodes += 1,
                    CacheEvent::Deleted(_) => nodes = nodes.saturating_sub(1),
                    // The cache's contents follow again, as `CREATED` lines.
                    CacheEvent::Lagged { .. } => nodes = 0,
                    _ => {}
                }
                if !say(&line(&event, nodes, args.json)) {
                    return exit(0);
                }
                if initialized {
                    for path in cache.unreadable() {
                        eprintln!("zk-curator: not allowed to read {path}; not shown");
                    }
                }
            },
            changed = states.changed() => {
                if changed.is_err() {
                    continue;
                }
                let state = *states.borrow_and_update();
                // Loading and Synced are told by the events (`INITIALIZED`); the rest is news.
                let news = matches!(state, CacheState::Suspended | CacheState::Resyncing)
                    || (state == CacheState::Synced && last_state != CacheState::Loading);
                last_state = state;
                if news && !say(&state_line(state, args.json)) {
                    return exit(0);
                }
            },
            () = &mut load_limit, if !cache.is_initialized() => {
                eprintln!(
                    "zk-curator: watch of {}: not connected and loaded within {:?} (--timeout)",
                    args.path, args.timeout
                );
                return exit(EXIT_UNAVAILABLE);
            },
        }
    }
}

fn state_name(state: CacheState) -> &'static str {
    match state {
        CacheState::Loading => "loading",
        CacheState::Synced => "synced",
        CacheState::Suspended => "suspended",
        CacheState::Resyncing => "resyncing",
        CacheState::Closed => "closed",
        CacheState::Failed => "failed",
        _ => "unknown",
    }
}

fn state_line(state: CacheState, as_json: bool) -> String {
    if as_json {
        json!({ "event": "state", "state": state_name(state) }).to_string()
    } else {
        format!("STATE {}", state_name(state).to_uppercase())
    }
}

/// One event as a line: `CREATED PATH version=V data="..."`, `CHANGED ...`, `DELETED PATH`,
/// `INITIALIZED N nodes`, `LAGGED N events missed` (the output fell behind; the contents follow
/// again as `CREATED` lines); or, with `--json`, one object.
fn line(event: &CacheEvent, nodes: usize, as_json: bool) -> String {
    if let CacheEvent::Lagged { missed } = event {
        return if as_json {
            json!({ "event": "lagged", "missed": missed }).to_string()
        } else {
            format!("LAGGED {missed} events missed")
        };
    }
    let (kind, entry) = match event {
        CacheEvent::Created(entry) => ("created", Some(entry)),
        CacheEvent::Changed { new, .. } => ("changed", Some(new)),
        CacheEvent::Deleted(entry) => ("deleted", Some(entry)),
        CacheEvent::Initialized => ("initialized", None),
        _ => ("unknown", None),
    };
    match (entry, as_json) {
        (None, false) => format!("{} {nodes} nodes", kind.to_uppercase()),
        (None, true) => json!({ "event": kind, "nodes": nodes }).to_string(),
        (Some(entry), false) if kind == "deleted" => format!("DELETED {}", entry.path()),
        (Some(entry), false) => {
            format!("{} {} version={} data={:?}", kind.to_uppercase(), entry.path(), entry.stat().version, lossy(entry))
        }
        (Some(entry), true) => {
            let stat = entry.stat();
            let mut object = json!({
                "event": kind,
                "path": entry.path(),
                "data": lossy(entry),
                "data_length": entry.data().len(),
                "version": stat.version,
                "cversion": stat.cversion,
                "mzxid": stat.mzxid,
                "mtime_ms": stat.mtime,
                "ephemeral_owner": format!("0x{:x}", stat.ephemeral_owner),
            });
            if let CacheEvent::Changed { data_changed, .. } = event {
                object["data_changed"] = json!(data_changed);
            }
            object.to_string()
        }
    }
}

/// The data as UTF-8, invalid bytes replaced (as `inspect` shows node data).
fn lossy(entry: &CacheEntry) -> String {
    String::from_utf8_lossy(entry.data()).into_owned()
}
