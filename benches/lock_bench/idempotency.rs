//! `idempotency N C`: C tasks on one session run N idempotency keys in total, each `begin` (a
//! fresh key: `Started`) + `complete`; then the floor: the same requests sent bare on a plain
//! `zookeeper-client` session at the same concurrency (create ephemeral, then one transaction:
//! delete at version 0 + create + set data).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_curator::idempotency::{Begin, IdempotencyKeys, Retention};
use zk_curator::raw as zk;

use crate::report::{pct, sorted, Report};
use crate::{connect_clients, unique_path, BenchResult, BENCH_SESSION_TIMEOUT};

pub(crate) async fn idempotency(report: &Report, connect: &str, n: usize, concurrency: usize) -> BenchResult<()> {
    if concurrency == 0 {
        return Err("idempotency needs a concurrency of at least 1".into());
    }
    let clients = connect_clients(connect, 1).await?;
    let base = unique_path("idempotency");
    // Sweep retention: plain persistent outcomes, as the floor creates.
    let keys = IdempotencyKeys::new(&clients[0], &base, Retention::Sweep(Duration::from_secs(3600)))?;
    let result = vec![b'r'; 64];
    // Warm-up (uncounted), also creating the base path.
    for i in 0..concurrency.min(n).max(1) {
        if let Begin::Started(claim) = keys.begin(&format!("warm-{i}")).await? {
            claim.complete(result.clone()).await?;
        }
    }
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (keys, next, result) = (keys.clone(), next.clone(), result.clone());
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let t0 = Instant::now();
                match keys.begin(&format!("key-{i}")).await? {
                    Begin::Started(claim) => claim.complete(result.clone()).await?,
                    _ => {
                        return Err(zk_curator::Error::InvalidArgument {
                            name: "key",
                            value: i.to_string(),
                            reason: "not fresh",
                        })
                    }
                }
                latencies.push(t0.elapsed());
            }
            Ok::<_, zk_curator::Error>(latencies)
        }));
    }
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await??);
    }
    let elapsed = started.elapsed();
    let _ = clients[0].delete(&base).deleting_children_if_needed().quietly().await;
    clients[0].close().await;

    // The floor: the same requests, bare, at the same concurrency on one session.
    let raw = Arc::new(zk::Client::connector().with_session_timeout(BENCH_SESSION_TIMEOUT).connect(connect).await?);
    let parent = unique_path("idempotency-floor");
    raw.mkdir(&parent, &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())).await?;
    let next = Arc::new(AtomicUsize::new(0));
    let floor_started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (raw, next, parent) = (raw.clone(), next.clone(), parent.clone());
        let data = [b"zk-curator-idempotency-outcome\n00000000-0000-0000-0000-000000000000\n".as_slice(), &[b'r'; 64]]
            .concat();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let claim = zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all());
            let outcome = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let path = format!("{parent}/key-{i}");
                let t0 = Instant::now();
                raw.create(&path, &data[..100], &claim).await?;
                let mut writer = raw.new_multi_writer();
                writer.add_delete(&path, Some(0))?;
                writer.add_create(&path, &[], &outcome)?;
                writer.add_set_data(&path, &data, Some(0))?;
                writer.commit().await.map_err(|e| format!("floor transaction: {e}"))?;
                latencies.push(t0.elapsed());
            }
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(latencies)
        }));
    }
    let mut floor = Vec::new();
    for task in tasks {
        floor.extend(task.await??);
    }
    let floor_elapsed = floor_started.elapsed();

    let latencies = sorted(latencies);
    let floor = sorted(floor);
    report.metric("n", n);
    report.metric("concurrency", concurrency);
    report.rate("ops_per_s", latencies.len(), elapsed);
    report.us("begin_complete_p50_us", pct(&latencies, 0.50));
    report.us("begin_complete_p99_us", pct(&latencies, 0.99));
    report.rate("floor_ops_per_s", floor.len(), floor_elapsed);
    report.us("floor_p50_us", pct(&floor, 0.50));
    report.us("floor_p99_us", pct(&floor, 0.99));
    let ratio = (latencies.len() as f64 / elapsed.as_secs_f64()) / (floor.len() as f64 / floor_elapsed.as_secs_f64());
    report.metric("ratio_to_floor", format_args!("{ratio:.2}"));
    Ok(())
}
