//! `simple-queue N`: one session offers N items (`item-<k>`) to a `SimpleDistributedQueue`, then
//! polls N times (10 s each), as the Curator side: offers/s, takes/s, items out of order, missing.
//!
//! `simple-queue-depth N`: N items waiting (pipelined creates, untimed), then drained with `take`:
//! the time per take while the queue shrinks (by quarter of the drain), takes/s and peak RSS —
//! Curator lists the whole queue for every take, this one lists once per view.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use zk_curator::queue::SimpleDistributedQueue;
use zk_curator::raw as zk;

use crate::report::{proc_status_kb, Report};
use crate::{connect_client, unique_path, BenchResult, BENCH_SESSION_TIMEOUT};

/// Creates in flight while filling the deep queue.
const WINDOW: usize = 500;

fn number(data: &[u8]) -> Option<usize> {
    std::str::from_utf8(data).ok()?.strip_prefix("item-")?.parse().ok()
}

pub(crate) async fn simple_queue(report: &Report, connect: &str, n: usize) -> BenchResult<()> {
    let client = connect_client(connect, BENCH_SESSION_TIMEOUT).await?;
    let path = unique_path("simple-queue");
    let queue = SimpleDistributedQueue::new(&client, &path)?;
    let t0 = Instant::now();
    for k in 0..n {
        queue.offer(format!("item-{k}")).await?;
    }
    let offer = t0.elapsed();
    let (mut out_of_order, mut missing) = (0, 0);
    let t1 = Instant::now();
    for k in 0..n {
        match queue.poll_timeout(Duration::from_secs(10)).await? {
            Some(data) if number(&data) == Some(k) => {}
            Some(_) => out_of_order += 1,
            None => missing += 1,
        }
    }
    let take = t1.elapsed();
    report.metric("n", n);
    report.rate("offer_per_s", n, offer);
    report.rate("take_per_s", n, take);
    report.metric("out_of_order", out_of_order);
    report.metric("missing", missing);
    client.delete(&path).await?;
    Ok(())
}

pub(crate) async fn simple_queue_depth(report: &Report, connect: &str, n: usize) -> BenchResult<()> {
    let client = connect_client(connect, BENCH_SESSION_TIMEOUT).await?;
    let path = unique_path("simple-queue-depth");
    client.create(&path).creating_parents_if_needed().await?;
    let zk = zk_curator::raw::client(&client)?;
    let sequential = zk::CreateMode::PersistentSequential.with_acls(zk::Acls::anyone_all());
    let item_path = format!("{path}/qn-");
    let s0 = Instant::now();
    let mut inflight = VecDeque::with_capacity(WINDOW);
    for k in 0..n {
        // zookeeper-client sends a request when it is called; the future only waits for its reply.
        inflight.push_back(zk.create(&item_path, format!("item-{k}").as_bytes(), &sequential));
        if inflight.len() >= WINDOW {
            if let Some(reply) = inflight.pop_front() {
                reply.await?;
            }
        }
    }
    while let Some(reply) = inflight.pop_front() {
        reply.await?;
    }
    let fill = s0.elapsed();

    let queue = SimpleDistributedQueue::new(&client, &path)?;
    let quarter = n.div_ceil(4).max(1);
    let mut quarters = Vec::new();
    let (mut out_of_order, mut first_take) = (0, Duration::ZERO);
    let t0 = Instant::now();
    let mut q0 = t0;
    for k in 0..n {
        let data = queue.take().await?;
        if k == 0 {
            first_take = t0.elapsed();
        }
        if number(&data) != Some(k) {
            out_of_order += 1;
        }
        if (k + 1) % quarter == 0 || k + 1 == n {
            let now = Instant::now();
            let taken = (k % quarter) + 1;
            quarters.push(now.duration_since(q0) / taken as u32);
            q0 = now;
        }
    }
    let drain = t0.elapsed();
    report.metric("n", n);
    report.rate("fill_creates_per_s", n, fill);
    report.rate("take_per_s", n, drain);
    report.us("first_take_us", first_take);
    for (i, per_take) in quarters.iter().enumerate() {
        report.us(&format!("take_q{}_mean_us", i + 1), *per_take);
    }
    report.metric("out_of_order", out_of_order);
    report.metric("peak_rss_kb", proc_status_kb("VmHWM"));
    client.delete(&path).await?;
    Ok(())
}
