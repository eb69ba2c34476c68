//! `counter C N`: C sessions increment one `DistributedAtomicLong` (`RetryNTimes(1000, 1 ms)`, no
//! promotion) until N increments succeeded; the same lines as the Curator side's `counter` mode.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_curator::atomic::DistributedAtomicLong;
use zk_curator::RetryNTimes;

use crate::report::{mean, pct, sorted, Report};
use crate::{connect_clients, unique_path, BenchResult};

pub(crate) async fn counter(report: &Report, connect: &str, clients: usize, n: usize) -> BenchResult<()> {
    if clients == 0 {
        return Err("counter needs at least one client".into());
    }
    let path = unique_path("counter");
    let sessions = connect_clients(connect, clients).await?;
    let counters: Vec<DistributedAtomicLong> = sessions
        .iter()
        .map(|c| {
            Ok(DistributedAtomicLong::new(c, &path)?
                .with_retry_policy(RetryNTimes::new(1000, Duration::from_millis(1))))
        })
        .collect::<zk_curator::Result<_>>()?;
    if !counters[0].try_initialize(0).await? {
        return Err(format!("{path} already exists").into());
    }
    for c in &counters {
        c.get().await?; // warm up every session once, as the Curator side
    }
    let tickets = Arc::new(AtomicUsize::new(0));
    let gave_up = Arc::new(AtomicU64::new(0));
    let post_seen: Arc<Vec<AtomicUsize>> = Arc::new((0..=n).map(|_| AtomicUsize::new(0)).collect());
    let bad_post = Arc::new(AtomicU64::new(0));
    let start_line = Arc::new(tokio::sync::Barrier::new(clients + 1));
    let mut tasks = Vec::new();
    for c in counters.clone() {
        let (tickets, gave_up, post_seen, bad_post, start_line) =
            (tickets.clone(), gave_up.clone(), post_seen.clone(), bad_post.clone(), start_line.clone());
        tasks.push(tokio::spawn(async move {
            let (mut latencies, mut attempts) = (Vec::new(), Vec::new());
            start_line.wait().await;
            while tickets.fetch_add(1, Ordering::SeqCst) < n {
                let t0 = Instant::now();
                let mut tries = 0u64;
                let r = loop {
                    // A call that gives up is made again, as on the Curator side.
                    let r = c.increment().await?;
                    tries += u64::from(r.stats().optimistic_tries);
                    if r.succeeded() {
                        break r;
                    }
                    gave_up.fetch_add(1, Ordering::Relaxed);
                };
                latencies.push(t0.elapsed());
                attempts.push(tries);
                let post = *r.post_value();
                let fresh = post >= 1
                    && post as usize <= n
                    && *r.pre_value() == post - 1
                    && post_seen[post as usize].fetch_add(1, Ordering::SeqCst) == 0;
                if !fresh {
                    bad_post.fetch_add(1, Ordering::Relaxed);
                }
            }
            Ok::<_, zk_curator::Error>((latencies, attempts))
        }));
    }
    start_line.wait().await;
    let started = Instant::now();
    let (mut latencies, mut attempts, mut errors) = (Vec::new(), Vec::new(), 0);
    for task in tasks {
        match task.await {
            Ok(Ok((l, a))) => {
                latencies.extend(l);
                attempts.extend(a);
            }
            Ok(Err(e)) => {
                errors += 1;
                eprintln!("an incrementer failed: {e}");
            }
            Err(e) => {
                errors += 1;
                eprintln!("an incrementer panicked: {e}");
            }
        }
    }
    let elapsed = started.elapsed();
    let final_value = counters[0].get().await?;
    let _ = sessions[0].delete(&path).quietly().await;
    for client in &sessions {
        client.close().await;
    }
    let latencies = sorted(latencies);
    attempts.sort_unstable();
    let rank = |q: f64| attempts.get(((q * attempts.len() as f64).ceil() as usize).max(1) - 1).copied().unwrap_or(0);
    report.metric("clients", clients);
    report.metric("n", n);
    report.rate("ops_per_s", latencies.len(), elapsed);
    report.us("increment_p50_us", pct(&latencies, 0.50));
    report.us("increment_p99_us", pct(&latencies, 0.99));
    report.us("increment_mean_us", mean(&latencies));
    report.us("increment_max_us", latencies.last().copied().unwrap_or_default());
    report.metric("attempts_p50", rank(0.50));
    report.metric("attempts_p99", rank(0.99));
    let attempts_mean =
        if attempts.is_empty() { f64::NAN } else { attempts.iter().sum::<u64>() as f64 / attempts.len() as f64 };
    report.metric("attempts_mean", format_args!("{attempts_mean:.1}"));
    report.metric("attempts_max", attempts.last().copied().unwrap_or(0));
    report.metric("gave_up_calls", gave_up.load(Ordering::Relaxed));
    report.metric("final_value", final_value.post_value());
    report.metric("final_ok", final_value.succeeded() && *final_value.post_value() == n as i64);
    report.metric("bad_post_values", bad_post.load(Ordering::Relaxed));
    report.metric("errors", errors);
    Ok(())
}
