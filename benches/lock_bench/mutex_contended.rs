//! `mutex-contended C N [--tasks T] [--guards [--node-per-task]]`: C sessions (T tasks each) race
//! for N acquisitions in total, with an in-process witness of mutual exclusion.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_curator::locks::InterProcessMutex;
use zk_curator::{CuratorClient, Error};

use crate::connect_clients;
use crate::guards::{task_mutex, Style, OUTSIDE};
use crate::report::{collect_latencies, cpu_time, pct, proc_status_kb, sorted, Report};
use crate::witness::Witness;
use crate::{connect_client, unique_path, BenchResult, BENCH_SESSION_TIMEOUT, WARMUP};

pub(crate) async fn mutex_contended(report: &Report, connect: &str, clients: usize, n: usize) -> BenchResult<()> {
    if clients == 0 {
        return Err("mutex-contended needs at least one client".into());
    }
    let path = unique_path("contended");
    let sessions: Vec<CuratorClient> =
        futures::future::try_join_all((0..clients).map(|_| connect_client(connect, BENCH_SESSION_TIMEOUT))).await?;
    {
        let warm = InterProcessMutex::new(&sessions[0], &path)?;
        for _ in 0..WARMUP.min(n) {
            warm.acquire().await?;
            warm.release().await?;
        }
    }
    let witness = Arc::new(Witness::default());
    let tickets = Arc::new(AtomicUsize::new(n));
    let start_line = Arc::new(tokio::sync::Barrier::new(clients + 1));
    let mut tasks = Vec::with_capacity(clients);
    for client in &sessions {
        let mutex = InterProcessMutex::new(client, &path)?;
        let (witness, tickets, start_line) = (witness.clone(), tickets.clone(), start_line.clone());
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            start_line.wait().await;
            // A ticket is taken before acquiring, so exactly n acquisitions happen in total.
            while tickets.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |t| t.checked_sub(1)).is_ok() {
                let t0 = Instant::now();
                mutex.acquire().await?;
                latencies.push(t0.elapsed());
                witness.critical_section().await;
                mutex.release().await?;
            }
            Ok::<_, Error>(latencies)
        }));
    }
    start_line.wait().await;
    let started = Instant::now();
    let collected = collect_latencies(tasks).await;
    let elapsed = started.elapsed();
    for client in &sessions {
        client.close().await;
    }
    let (acquire, per_client) = collected.map_err(|e| format!("a contender failed: {e}"))?;
    let counter = witness.counter.load(Ordering::SeqCst);
    report.rate("ops_per_s", acquire.len(), elapsed);
    report.us("acquire_p50_us", pct(&acquire, 0.50));
    report.us("acquire_p99_us", pct(&acquire, 0.99));
    report.metric("overlap_violations", witness.violations.load(Ordering::SeqCst));
    report.metric("counter_ok", u8::from(counter == n as u64));
    report.metric("per_client_min", per_client.iter().min().copied().unwrap_or(0));
    report.metric("per_client_max", per_client.iter().max().copied().unwrap_or(0));
    report.metric("clients", clients);
    report.metric("n", n);
    Ok(())
}

// ----------------------------------------------------------------------------------------------
// mutex-contended --tasks T [--guards]

pub(crate) async fn mutex_contended_tasks(
    report: &Report,
    connect: &str,
    clients: usize,
    n: usize,
    tasks_per_session: usize,
    style: Style,
) -> BenchResult<()> {
    let Style { guards, node_per_task } = style;
    if clients == 0 || tasks_per_session == 0 {
        return Err("mutex-contended needs at least one client and one task per client".into());
    }
    let path = unique_path("contended-tasks");
    let sessions = connect_clients(connect, clients).await?;
    {
        let warm = InterProcessMutex::new(&sessions[0], &path)?;
        for _ in 0..WARMUP.min(n) {
            warm.acquire().await?;
            warm.release().await?;
        }
    }
    let witness = Arc::new(Witness::default());
    let tickets = Arc::new(AtomicUsize::new(n));
    // Who held last: a change of session is a new turn (a cross-session hand-off).
    let last_session = Arc::new(AtomicUsize::new(OUTSIDE));
    let turns = Arc::new(AtomicUsize::new(0));
    let start_line = Arc::new(tokio::sync::Barrier::new(clients * tasks_per_session + 1));
    let mut tasks = Vec::with_capacity(clients * tasks_per_session);
    for (session, client) in sessions.iter().enumerate() {
        for _ in 0..tasks_per_session {
            let mutex = task_mutex(client, &path, node_per_task)?;
            let (witness, tickets, start_line, last_session, turns) =
                (witness.clone(), tickets.clone(), start_line.clone(), last_session.clone(), turns.clone());
            tasks.push(tokio::spawn(async move {
                let mut latencies = Vec::new();
                start_line.wait().await;
                while tickets.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |t| t.checked_sub(1)).is_ok() {
                    let t0 = Instant::now();
                    let guard = if guards {
                        Some(mutex.lock().await?)
                    } else {
                        mutex.acquire().await?;
                        None
                    };
                    latencies.push(t0.elapsed());
                    if last_session.swap(session, Ordering::SeqCst) != session {
                        turns.fetch_add(1, Ordering::SeqCst);
                    }
                    witness.critical_section().await;
                    match guard {
                        Some(guard) => guard.release().await?,
                        None => mutex.release().await?,
                    }
                }
                Ok::<_, Error>((session, latencies))
            }));
        }
    }
    let cpu_start = cpu_time();
    start_line.wait().await;
    let started = Instant::now();
    let mut per_session = vec![(0usize, Duration::ZERO); clients];
    let mut per_task = Vec::with_capacity(tasks.len());
    let mut acquire = Vec::with_capacity(n);
    let mut failure = None;
    for task in tasks {
        match task.await {
            Ok(Ok((session, latencies))) => {
                per_task.push(latencies.len());
                per_session[session].0 += latencies.len();
                per_session[session].1 =
                    per_session[session].1.max(latencies.iter().copied().max().unwrap_or_default());
                acquire.extend(latencies);
            }
            Ok(Err(e)) => failure = Some(e.to_string()),
            Err(e) => failure = Some(e.to_string()),
        }
    }
    let elapsed = started.elapsed();
    let cpu = cpu_time().saturating_sub(cpu_start);
    for client in &sessions {
        client.close().await;
    }
    if let Some(e) = failure {
        return Err(format!("a contender failed: {e}").into());
    }
    let acquire = sorted(acquire);
    let counter = witness.counter.load(Ordering::SeqCst);
    let turns = turns.load(Ordering::SeqCst);
    let join = |v: Vec<String>| v.join("/");
    report.rate("ops_per_s", acquire.len(), elapsed);
    report.us("acquire_p50_us", pct(&acquire, 0.50));
    report.us("acquire_p99_us", pct(&acquire, 0.99));
    report.ms("acquire_max_ms", acquire.last().copied().unwrap_or_default());
    report.metric("overlap_violations", witness.violations.load(Ordering::SeqCst));
    report.metric("counter_ok", u8::from(counter == n as u64));
    report.metric("per_session_min", per_session.iter().map(|s| s.0).min().unwrap_or(0));
    report.metric("per_session_max", per_session.iter().map(|s| s.0).max().unwrap_or(0));
    report.metric("per_session", join(per_session.iter().map(|s| s.0.to_string()).collect()));
    report.metric(
        "max_wait_ms_per_session",
        join(per_session.iter().map(|s| format!("{:.1}", s.1.as_secs_f64() * 1e3)).collect()),
    );
    report.metric("per_task_min", per_task.iter().min().copied().unwrap_or(0));
    report.metric("per_task_max", per_task.iter().max().copied().unwrap_or(0));
    report.metric("session_turns", turns);
    report.metric("mean_turn_len", format_args!("{:.1}", n as f64 / turns.max(1) as f64));
    report.metric("client_cpu_ms", cpu.as_millis());
    report.metric("peak_rss_kb", proc_status_kb("VmHWM"));
    report.metric("clients", clients);
    report.metric("tasks_per_client", tasks_per_session);
    report.metric("guards", u8::from(guards));
    report.metric("node_per_task", u8::from(node_per_task));
    report.metric("n", n);
    if witness.violations.load(Ordering::SeqCst) > 0 || counter != n as u64 {
        return Err("two holders overlapped".into());
    }
    Ok(())
}
