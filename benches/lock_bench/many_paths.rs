//! `many-paths K C N [--guards] [--nonfair] [--floor]`: one session, C tasks, N acquisitions in
//! total over K lock paths (task t's i-th: path (t + i·C) mod K), an overlap check per path — the
//! Curator side's `many-paths` (C threads on one client). `--nonfair` uses the non-fair mutex;
//! `--floor` runs the raw floor instead: the same concurrency of pipelined create + list + delete
//! cycles on K distinct parents, bare on a plain `zookeeper-client` session.
//!
//! `nonfair-contended C N [--hold-us H]`: the non-fair against the fair mutex under contention on
//! one path — C sessions, one task each, N acquisitions each; throughput and the worst wait.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_curator::locks::{InterProcessMutex, InterProcessNonFairMutex, MutexGuard};
use zk_curator::raw as zk;
use zk_curator::Error;

use crate::raw::pipelined_create_list;
use crate::report::{collect_latencies, pct, sorted, Report};
use crate::{connect_client, connect_clients, unique_path, BenchResult, BENCH_SESSION_TIMEOUT};

/// Which lock a run takes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PathsStyle {
    pub(crate) guards: bool,
    pub(crate) nonfair: bool,
}

/// One lock path, of either kind.
#[derive(Clone)]
enum Lock {
    Fair(InterProcessMutex),
    NonFair(InterProcessNonFairMutex),
}

impl Lock {
    async fn lock(&self) -> Result<MutexGuard, Error> {
        match self {
            Lock::Fair(m) => m.lock().await,
            Lock::NonFair(m) => m.lock().await,
        }
    }
    async fn acquire(&self) -> Result<(), Error> {
        match self {
            Lock::Fair(m) => m.acquire().await,
            Lock::NonFair(m) => m.acquire().await,
        }
    }
    async fn release(&self) -> Result<(), Error> {
        match self {
            Lock::Fair(m) => m.release().await,
            Lock::NonFair(m) => m.release().await,
        }
    }
}

/// Path of task `t`'s `i`-th operation among `k`, with `c` tasks.
fn path_of(t: usize, i: usize, c: usize, k: usize) -> usize {
    ((t as u64 + i as u64 * c as u64) % k as u64) as usize
}

pub(crate) async fn many_paths(
    report: &Report,
    connect: &str,
    k: usize,
    c: usize,
    n: usize,
    style: PathsStyle,
) -> BenchResult<()> {
    if k == 0 || c == 0 {
        return Err("many-paths needs at least one path and one task".into());
    }
    let client = connect_client(connect, BENCH_SESSION_TIMEOUT).await?;
    let parent = unique_path("many-paths");
    let mut locks = Vec::with_capacity(k);
    for p in 0..k {
        let path = format!("{parent}/p-{p}");
        locks.push(if style.nonfair {
            Lock::NonFair(InterProcessNonFairMutex::new(&client, &path)?)
        } else {
            Lock::Fair(InterProcessMutex::new(&client, &path)?)
        });
    }
    // Warm-up: every path once (creates the parents, as the Curator side does).
    for lock in &locks {
        lock.acquire().await?;
        lock.release().await?;
    }
    let locks = Arc::new(locks);
    let inside: Arc<Vec<AtomicU32>> = Arc::new((0..k).map(|_| AtomicU32::new(0)).collect());
    let used: Arc<Vec<AtomicU32>> = Arc::new((0..k).map(|_| AtomicU32::new(0)).collect());
    let violations = Arc::new(AtomicU64::new(0));
    let tickets = Arc::new(AtomicUsize::new(n));
    let start_line = Arc::new(tokio::sync::Barrier::new(c + 1));
    let mut tasks = Vec::with_capacity(c);
    for t in 0..c {
        let (locks, inside, used, violations, tickets, start_line) =
            (locks.clone(), inside.clone(), used.clone(), violations.clone(), tickets.clone(), start_line.clone());
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            start_line.wait().await;
            let mut i = 0;
            while tickets.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |t| t.checked_sub(1)).is_ok() {
                let p = path_of(t, i, c, k);
                let lock = &locks[p];
                let t0 = Instant::now();
                let guard =
                    if style.guards { Some(lock.lock().await?) } else { lock.acquire().await.map(|()| None)? };
                latencies.push(t0.elapsed());
                if inside[p].fetch_add(1, Ordering::SeqCst) != 0 {
                    violations.fetch_add(1, Ordering::SeqCst);
                }
                used[p].fetch_add(1, Ordering::SeqCst);
                inside[p].fetch_sub(1, Ordering::SeqCst);
                match guard {
                    Some(guard) => guard.release().await?,
                    None => lock.release().await?,
                }
                i += 1;
            }
            Ok::<_, Error>(latencies)
        }));
    }
    start_line.wait().await;
    let started = Instant::now();
    let collected = collect_latencies(tasks).await;
    let elapsed = started.elapsed();
    client.close().await;
    let (acquire, _) = collected.map_err(|e| format!("a task failed: {e}"))?;
    report.metric("paths", k);
    report.metric("threads", c);
    report.metric("n", n);
    report.rate("ops_per_s", acquire.len(), elapsed);
    report.us("acquire_p50_us", pct(&acquire, 0.50));
    report.us("acquire_p99_us", pct(&acquire, 0.99));
    report.metric("overlap_violations", violations.load(Ordering::SeqCst));
    report.metric("paths_touched", used.iter().filter(|u| u.load(Ordering::SeqCst) > 0).count());
    report.metric("lock", if style.nonfair { "nonfair" } else { "fair" });
    report.metric("style", if style.guards { "guards" } else { "acquire" });
    Ok(())
}

/// The floor of `many-paths`: C tasks on one plain session, N cycles in total, each a pipelined
/// create (EPHEMERAL_SEQUENTIAL, a protected lock node's name and data) + list, then a delete, on
/// parent (t + i·C) mod K of K pre-made parents.
pub(crate) async fn many_paths_floor(report: &Report, connect: &str, k: usize, c: usize, n: usize) -> BenchResult<()> {
    if k == 0 || c == 0 {
        return Err("many-paths needs at least one path and one task".into());
    }
    let zk = zk::Client::connector().with_session_timeout(BENCH_SESSION_TIMEOUT).connect(connect).await?;
    let root = unique_path("many-paths-floor");
    let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    zk.mkdir(&root, &persistent).await?;
    let parents: Vec<String> = (0..k).map(|p| format!("{root}/p-{p}")).collect();
    futures::future::try_join_all(parents.iter().map(|p| zk.create(p, &[], &persistent))).await?;
    let parents = Arc::new(parents);
    let tickets = Arc::new(AtomicUsize::new(n));
    let start_line = Arc::new(tokio::sync::Barrier::new(c + 1));
    let mut tasks = Vec::with_capacity(c);
    for t in 0..c {
        let (zk, parents, tickets, start_line) = (zk.clone(), parents.clone(), tickets.clone(), start_line.clone());
        tasks.push(tokio::spawn(async move {
            let options = zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
            let mut latencies = Vec::new();
            start_line.wait().await;
            let mut i = 0;
            while tickets.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |t| t.checked_sub(1)).is_ok() {
                let parent = &parents[path_of(t, i, c, parents.len())];
                let prefix = format!("{parent}/_c_00000000-0000-0000-0000-000000000000-lock-");
                let cycle = pipelined_create_list(&zk, &prefix, parent, b"127.0.0.1", &options)
                    .await
                    .map_err(|e| format!("{parent}: {e}"))?;
                latencies.push(cycle.elapsed);
                zk.delete(&cycle.path, None).await.map_err(|e| format!("{parent}: {e}"))?;
                i += 1;
            }
            Ok::<_, String>(latencies)
        }));
    }
    start_line.wait().await;
    let started = Instant::now();
    let mut cycles = Vec::with_capacity(n);
    for task in tasks {
        cycles.extend(task.await.map_err(|e| e.to_string())??);
    }
    let elapsed = started.elapsed();
    let cycles = sorted(cycles);
    for parent in parents.iter() {
        let _ = zk.delete(parent, None).await;
    }
    let _ = zk.delete(&root, None).await;
    report.metric("paths", k);
    report.metric("threads", c);
    report.metric("n", n);
    report.rate("cycle_per_s", cycles.len(), elapsed);
    report.us("create_list_p50_us", pct(&cycles, 0.50));
    report.us("create_list_p99_us", pct(&cycles, 0.99));
    Ok(())
}

/// `nonfair-contended C N [--hold-us H]`: C sessions, one task each, take one lock N times each
/// (holding it H µs), first with the fair mutex, then with the non-fair one: ops/s, the acquire
/// p50/p99 and the worst wait (starvation), and how unevenly the sessions got the lock.
pub(crate) async fn nonfair_contended(
    report: &Report,
    connect: &str,
    c: usize,
    n: usize,
    hold: Duration,
) -> BenchResult<()> {
    let sessions = connect_clients(connect, c).await?;
    for nonfair in [false, true] {
        let path = unique_path(if nonfair { "nonfair-contended" } else { "fair-contended" });
        let mut locks = Vec::with_capacity(c);
        for client in &sessions {
            locks.push(if nonfair {
                Lock::NonFair(InterProcessNonFairMutex::new(client, &path)?)
            } else {
                Lock::Fair(InterProcessMutex::new(client, &path)?)
            });
        }
        locks[0].acquire().await?;
        locks[0].release().await?;
        let inside = Arc::new(AtomicU32::new(0));
        let violations = Arc::new(AtomicU64::new(0));
        let start_line = Arc::new(tokio::sync::Barrier::new(c + 1));
        let mut tasks = Vec::with_capacity(c);
        for lock in locks {
            let (inside, violations, start_line) = (inside.clone(), violations.clone(), start_line.clone());
            tasks.push(tokio::spawn(async move {
                let mut latencies = Vec::with_capacity(n);
                start_line.wait().await;
                for _ in 0..n {
                    let t0 = Instant::now();
                    let guard = lock.lock().await?;
                    latencies.push(t0.elapsed());
                    if inside.fetch_add(1, Ordering::SeqCst) != 0 {
                        violations.fetch_add(1, Ordering::SeqCst);
                    }
                    if !hold.is_zero() {
                        tokio::time::sleep(hold).await;
                    }
                    inside.fetch_sub(1, Ordering::SeqCst);
                    guard.release().await?;
                }
                Ok::<_, Error>(latencies)
            }));
        }
        start_line.wait().await;
        let started = Instant::now();
        let collected = collect_latencies(tasks).await;
        let elapsed = started.elapsed();
        let (acquire, _) = collected.map_err(|e| format!("a task failed: {e}"))?;
        let acquire = sorted(acquire);
        let kind = if nonfair { "nonfair" } else { "fair" };
        report.rate(&format!("{kind}_ops_per_s"), acquire.len(), elapsed);
        report.us(&format!("{kind}_acquire_p50_us"), pct(&acquire, 0.50));
        report.us(&format!("{kind}_acquire_p99_us"), pct(&acquire, 0.99));
        report.us(&format!("{kind}_acquire_max_us"), acquire.last().copied().unwrap_or_default());
        report.metric(&format!("{kind}_overlap_violations"), violations.load(Ordering::SeqCst));
    }
    for client in &sessions {
        client.close().await;
    }
    report.metric("clients", c);
    report.metric("n_per_client", n);
    report.us("hold_us", hold);
    Ok(())
}
