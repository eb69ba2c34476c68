//! `queue N P C` and `queue-locked N P C`: a `DistributedQueue` of byte items (`item-<k>`), P
//! producer sessions put N items in total (background puts, Curator's default), C consumer
//! sessions consume them (with a lock path for `queue-locked`: acknowledged after each item is
//! recorded; the acks run concurrently, as a consumer that processes items in parallel would).
//! Each item is checked once; end-to-end items/s from the first put to the last consume, and put →
//! consume latency. CuratorBench's `queue` / `queue-locked` modes, same lines.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_curator::queue::DistributedQueue;

use crate::report::{pct, sorted, Report};
use crate::{connect_clients, unique_path, BenchResult};

pub(crate) async fn queue(
    report: &Report,
    connect: &str,
    n: usize,
    p: usize,
    c: usize,
    locked: bool,
) -> BenchResult<()> {
    if n == 0 || p == 0 || c == 0 {
        return Err("queue needs N, P and C of at least 1".into());
    }
    let producers = connect_clients(connect, p).await?;
    let consumers = connect_clients(connect, c).await?;
    let path = unique_path(report.bench);
    let lock = format!("{path}-locks");
    let build = |client| {
        let builder = DistributedQueue::builder(client, &path);
        if locked { builder.lock_path(&lock) } else { builder }.build()
    };
    let origin = Instant::now();
    let since = move || origin.elapsed().as_nanos() as u64;
    let put_at: Arc<Vec<AtomicU64>> = Arc::new((0..n).map(|_| AtomicU64::new(0)).collect());
    let got_at: Arc<Vec<AtomicU64>> = Arc::new((0..n).map(|_| AtomicU64::new(0)).collect());
    let (duplicates, bad, errors, total) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
    );
    let all = Arc::new(tokio::sync::Notify::new());

    let mut consumer_queues = Vec::new();
    for client in &consumers {
        let queue = build(client)?;
        let mut items = queue.consume()?;
        consumer_queues.push(queue);
        let (got_at, duplicates, bad, errors, total, all) =
            (got_at.clone(), duplicates.clone(), bad.clone(), errors.clone(), total.clone(), all.clone());
        tokio::spawn(async move {
            while let Some(next) = items.next().await {
                let now = since();
                let item = match next {
                    Ok(item) => item,
                    Err(e) => {
                        // Named on stderr: a count alone does not say what went wrong.
                        eprintln!("queue bench: the consumer reported: {e}");
                        errors.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                };
                let k = std::str::from_utf8(item.value())
                    .ok()
                    .and_then(|s| s.strip_prefix("item-"))
                    .and_then(|s| s.parse::<usize>().ok())
                    .filter(|k| *k < n);
                match k {
                    None => drop(bad.fetch_add(1, Ordering::Relaxed)),
                    Some(k) => {
                        if got_at[k].compare_exchange(0, now.max(1), Ordering::AcqRel, Ordering::Acquire).is_err() {
                            duplicates.fetch_add(1, Ordering::Relaxed);
                        } else if total.fetch_add(1, Ordering::AcqRel) + 1 == n {
                            all.notify_one();
                        }
                    }
                }
                let errors = errors.clone();
                tokio::spawn(async move {
                    if let Err(e) = item.ack().await {
                        eprintln!("queue bench: an ack failed: {e}");
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
        });
    }
    let mut producer_queues = Vec::new();
    for client in &producers {
        producer_queues.push(build(client)?);
    }

    let tickets = Arc::new(AtomicUsize::new(0));
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for queue in &producer_queues {
        let (queue, tickets, put_at, errors) = (queue.clone(), tickets.clone(), put_at.clone(), errors.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let k = tickets.fetch_add(1, Ordering::Relaxed);
                if k >= n {
                    break;
                }
                put_at[k].store(since(), Ordering::Release);
                if let Err(e) = queue.put(format!("item-{k}").into_bytes()).await {
                    eprintln!("queue bench: a put failed: {e}");
                    errors.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    for task in tasks {
        task.await?;
    }
    let put_elapsed = t0.elapsed();
    let done = total.load(Ordering::Acquire) >= n
        || tokio::time::timeout(Duration::from_secs(600), async {
            while total.load(Ordering::Acquire) < n {
                tokio::time::timeout(Duration::from_millis(100), all.notified()).await.ok();
            }
        })
        .await
        .is_ok();
    let e2e = t0.elapsed();
    tokio::time::sleep(Duration::from_millis(500)).await; // late duplicates
    for queue in &producer_queues {
        match queue.flush_puts_timeout(Duration::from_secs(10)).await {
            Ok(true) => {}
            Ok(false) => {
                eprintln!("queue bench: puts still pending after 10 s");
                errors.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                eprintln!("queue bench: a background put failed: {e}");
                errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    let mut latencies = Vec::with_capacity(n);
    let mut missing = 0;
    for k in 0..n {
        match got_at[k].load(Ordering::Acquire) {
            0 => missing += 1,
            got => latencies.push(Duration::from_nanos(got.saturating_sub(put_at[k].load(Ordering::Acquire)))),
        }
    }
    let latencies = sorted(latencies);
    report.metric("n", n);
    report.metric("producers", p);
    report.metric("consumers", c);
    report.rate("put_per_s", n, put_elapsed);
    report.rate("items_per_s", total.load(Ordering::Acquire), e2e);
    report.us("put_to_consume_p50_us", pct(&latencies, 0.50));
    report.us("put_to_consume_p99_us", pct(&latencies, 0.99));
    report.us("put_to_consume_mean_us", crate::report::mean(&latencies));
    report.us("put_to_consume_max_us", latencies.last().copied().unwrap_or_default());
    report.metric("duplicates", duplicates.load(Ordering::Relaxed));
    report.metric("missing", missing);
    report.metric("bad_items", bad.load(Ordering::Relaxed));
    report.metric("errors", errors.load(Ordering::Relaxed));
    report.metric("completed", done);
    for queue in consumer_queues.iter().chain(&producer_queues) {
        queue.close().await;
    }
    let cleaner = &producers[0];
    for dir in [path.as_str(), lock.as_str()] {
        if let Err(e) = cleaner.delete(dir).deleting_children_if_needed().await {
            if e.code() != Some(zk_curator::ErrorCode::NoNode) {
                return Err(e.into());
            }
        }
    }
    Ok(())
}
