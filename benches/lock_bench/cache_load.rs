//! `cache-load N`: N children of 100 bytes under a fresh parent (pipelined creates, untimed), then
//! a `CuratorCache` of the parent from `start` to initialized: the time, the nodes it holds (must
//! be N + 1), the peak RSS after the load and the memory each cached node costs.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use zk_curator::cache::CuratorCache;
use zk_curator::raw as zk;

use crate::report::{proc_status_kb, Report};
use crate::{connect_client, unique_path, BenchResult, BENCH_SESSION_TIMEOUT};

/// Requests in flight while creating and deleting the children (as the Curator side's 500).
const WINDOW: usize = 500;
/// Reads per multi-read request in the floor (500 x ~200 B replies: far below 1 MiB).
const MULTI_READ: usize = 500;
/// Longest wait for the cache's first load (the Curator side's).
const INIT_LIMIT: Duration = Duration::from_secs(300);

/// Sends one request per path, at most [`WINDOW`] in flight; the first failure stops it.
async fn pipelined<'a, F, Fut>(paths: &'a [String], mut op: F) -> BenchResult<()>
where
    F: FnMut(&'a str) -> Fut,
    Fut: std::future::Future<Output = Result<(), zk::Error>>,
{
    let mut inflight = VecDeque::with_capacity(WINDOW);
    for path in paths {
        // zookeeper-client sends a request when it is called; the future only waits for its reply.
        inflight.push_back(op(path));
        if inflight.len() >= WINDOW {
            if let Some(reply) = inflight.pop_front() {
                reply.await?;
            }
        }
    }
    while let Some(reply) = inflight.pop_front() {
        reply.await?;
    }
    Ok(())
}

pub(crate) async fn cache_load(report: &Report, connect: &str, n: usize) -> BenchResult<()> {
    let client = connect_client(connect, BENCH_SESSION_TIMEOUT).await?;
    let parent = unique_path("cache-load");
    client.create(&parent).creating_parents_if_needed().await?;
    let zk = zk_curator::raw::client(&client)?;
    let data = [b'x'; 100];
    let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    let kids: Vec<String> = (0..n).map(|i| format!("{parent}/n-{i:07}")).collect();
    let s0 = Instant::now();
    pipelined(&kids, |path| {
        let reply = zk.create(path, &data, &persistent);
        async move { reply.await.map(|_| ()) }
    })
    .await?;
    let setup = s0.elapsed();

    let rss_before_kb = proc_status_kb("VmRSS");
    let t0 = Instant::now();
    let cache = CuratorCache::start(&client, &parent)?;
    if !cache.wait_initialized_timeout(INIT_LIMIT).await? {
        return Err(format!("the cache did not load within {INIT_LIMIT:?}").into());
    }
    let init = t0.elapsed();
    let nodes = cache.size();
    let peak_rss_kb = proc_status_kb("VmHWM");
    let rss_after_kb = proc_status_kb("VmRSS");
    report.metric("n", n);
    report.ms("init_ms", init);
    report.metric("nodes", nodes);
    report.metric("nodes_ok", nodes == n + 1);
    report.metric("peak_rss_kb", peak_rss_kb);
    report.metric("rss_before_cache_kb", rss_before_kb);
    report.metric("rss_after_init_kb", rss_after_kb);
    let per_node = rss_after_kb.saturating_sub(rss_before_kb) as f64 * 1024.0 / nodes.max(1) as f64;
    report.metric("bytes_per_node", format_args!("{per_node:.0}"));
    report.rate("setup_creates_per_s", n, setup);
    cache.close().await;
    drop(cache);

    // The floors: the same N + 1 reads sent bare, one request each (what the cache's load sends),
    // and batched into ZooKeeper's multi-read requests of MULTI_READ reads each.
    let mut all = kids.clone();
    all.push(parent.clone());
    let t0 = Instant::now();
    pipelined(&all, |path| {
        let reply = zk.get_data(path);
        async move { reply.await.map(|_| ()) }
    })
    .await?;
    report.ms("floor_get_data_ms", t0.elapsed());
    let t0 = Instant::now();
    let mut inflight = VecDeque::new();
    for chunk in all.chunks(MULTI_READ) {
        let mut reader = zk.new_multi_reader();
        for path in chunk {
            reader.add_get_data(path)?;
        }
        inflight.push_back(reader.commit());
        if inflight.len() >= 4 {
            if let Some(reply) = inflight.pop_front() {
                reply.await?;
            }
        }
    }
    while let Some(reply) = inflight.pop_front() {
        reply.await?;
    }
    report.ms("floor_multi_read_ms", t0.elapsed());

    pipelined(&kids, |path| zk.delete(path, None)).await?;
    let _ = zk.delete(&parent, None).await;
    client.close().await;
    Ok(())
}
