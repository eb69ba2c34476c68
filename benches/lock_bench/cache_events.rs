//! `cache-events N`: a `CuratorCache` on one node; a second session sets the node's data WARMUP + N
//! times (`e-<k>`), each time waiting at most 5 s for the change event that carries it: set → event
//! latency, rate, and how many were never seen. Each set is followed by a bare `set_data` of a
//! sibling node on the writer's session (`set_data_*`): the round trip the event latency compares
//! with.
//!
//! With `CHILDREN=1` the writer creates a child `<node>/c-<k>` (data `e-<k>`) instead of setting the
//! node, and the event waited for is the child's `Created` (each also makes the cache re-read the
//! parent's stat); the floor is a bare create of a sibling's child.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::Notify;
use zk_curator::cache::{CacheEvent, CuratorCache};

use crate::report::{mean, pct, sorted, Report};
use crate::{connect_client, unique_path, BenchResult, BENCH_SESSION_TIMEOUT};

/// How long each set waits for its event (the Curator side's).
const EVENT_WAIT: Duration = Duration::from_secs(5);

/// Untimed sets first: `WARMUP` from the environment, 200 as on the Curator side.
fn warmup() -> usize {
    std::env::var("WARMUP").ok().and_then(|w| w.parse().ok()).unwrap_or(200)
}

/// True when `CHILDREN=1`: children are created rather than the node set.
fn children_mode() -> bool {
    std::env::var("CHILDREN").is_ok_and(|v| v == "1")
}

/// `e-<k>` → k.
fn seq_of(data: &[u8]) -> Option<usize> {
    std::str::from_utf8(data.strip_prefix(b"e-")?).ok()?.parse().ok()
}

/// When each set was seen (by k), counted repeats and foreign events.
struct Seen {
    at: Vec<Option<Instant>>,
    repeats: usize,
    other: usize,
}

pub(crate) async fn cache_events(report: &Report, connect: &str, n: usize) -> BenchResult<()> {
    let reader = connect_client(connect, BENCH_SESSION_TIMEOUT).await?;
    let writer = connect_client(connect, BENCH_SESSION_TIMEOUT).await?;
    let path = unique_path("cache-events");
    let floor = format!("{path}-floor");
    reader.create(&path).data("init").creating_parents_if_needed().await?;
    reader.create(&floor).data("init").await?;
    let warmup = warmup();
    let total = warmup + n;

    let seen = Arc::new(Mutex::new(Seen { at: vec![None; total], repeats: 0, other: 0 }));
    let notify = Arc::new(Notify::new());
    let cache = CuratorCache::start(&reader, &path)?;
    let mut events = cache.events();
    if !cache.wait_initialized_timeout(Duration::from_secs(60)).await? {
        return Err("the cache did not load within 60 s".into());
    }
    let children = children_mode();
    let listener = {
        let (seen, notify, path) = (seen.clone(), notify.clone(), path.clone());
        tokio::spawn(async move {
            while let Some(event) = events.next().await {
                let now = Instant::now();
                let new = match event {
                    CacheEvent::Changed { new, .. } if !children => new,
                    CacheEvent::Created(new) if children => new,
                    _ => continue,
                };
                let mut seen = seen.lock();
                let ours = if children { new.path().starts_with(&format!("{path}/")) } else { new.path() == path };
                match seq_of(new.data()).filter(|k| *k < total && ours) {
                    Some(k) if seen.at[k].is_none() => seen.at[k] = Some(now),
                    Some(_) => seen.repeats += 1,
                    None => seen.other += 1,
                }
                drop(seen);
                notify.notify_waiters();
            }
        })
    };

    let zk = zk_curator::raw::client(&writer)?;
    let persistent = zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    let mut latency = Vec::with_capacity(n);
    let mut set_data = Vec::with_capacity(n);
    let mut missed = 0usize;
    let mut t0 = Instant::now();
    for k in 0..total {
        if k == warmup {
            t0 = Instant::now();
        }
        let value = format!("e-{k}");
        let a = Instant::now();
        if children {
            zk.create(&format!("{path}/c-{k}"), value.as_bytes(), &persistent).await?;
        } else {
            zk.set_data(&path, value.as_bytes(), None).await?;
        }
        let deadline = a + EVENT_WAIT;
        let at = loop {
            let notified = notify.notified();
            if let Some(at) = seen.lock().at[k] {
                break Some(at);
            }
            if tokio::time::timeout_at(deadline.into(), notified).await.is_err() {
                break seen.lock().at[k];
            }
        };
        let elapsed = Instant::now() - a;
        let b = Instant::now();
        if children {
            zk.create(&format!("{floor}/c-{k}"), value.as_bytes(), &persistent).await?;
        } else {
            zk.set_data(&floor, value.as_bytes(), None).await?;
        }
        let bare = b.elapsed();
        if k < warmup {
            continue;
        }
        set_data.push(bare);
        match at {
            Some(at) => latency.push(at - a),
            None => {
                missed += 1;
                debug_assert!(elapsed >= EVENT_WAIT);
            }
        }
    }
    let secs = t0.elapsed();
    let got = latency.len();
    let (latency, set_data) = (sorted(latency), sorted(set_data));
    let (repeats, other) = {
        let seen = seen.lock();
        (seen.repeats, seen.other)
    };
    report.metric("n", n);
    report.metric("children", children);
    report.metric("warmup", warmup);
    report.rate("events_per_s", got, secs);
    report.us("event_p50_us", pct(&latency, 0.50));
    report.us("event_p99_us", pct(&latency, 0.99));
    report.us("event_mean_us", mean(&latency));
    report.us("event_max_us", latency.last().copied().unwrap_or_default());
    report.metric("missed", missed);
    report.metric("repeated_events", repeats);
    report.metric("other_events", other);
    report.us("set_data_p50_us", pct(&set_data, 0.50));
    report.us("set_data_p99_us", pct(&set_data, 0.99));
    let ratio = |a: Duration, b: Duration| if b.is_zero() { 0.0 } else { a.as_secs_f64() / b.as_secs_f64() };
    report.metric("event_vs_set_data_p50", format_args!("{:.2}", ratio(pct(&latency, 0.50), pct(&set_data, 0.50))));
    cache.close().await;
    listener.abort();
    if children {
        for k in 0..total {
            let _ = zk.delete(&format!("{path}/c-{k}"), None).await;
            let _ = zk.delete(&format!("{floor}/c-{k}"), None).await;
        }
    }
    let _ = zk.delete(&floor, None).await;
    let _ = zk.delete(&path, None).await;
    writer.close().await;
    reader.close().await;
    Ok(())
}
