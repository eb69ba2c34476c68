//! `mutex-many-waiters W [S] [--guards [--token] [--node-per-task] [--one-instance]]`: W waiters
//! queued behind a holder on S sessions, then drained; the time of each hand-off, memory and CPU.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_curator::locks::InterProcessMutex;
use zk_curator::Error;

use crate::guards::{
    counting_first_poll, guard_nodes_expected, task_mutex, GuardSample, GuardStyle, HandoffClock, OUTSIDE,
};
use crate::report::{cpu_time, pct, proc_status_kb, sorted, Report};
use crate::witness::Witness;
use crate::{connect_client, unique_path, BenchResult, BENCH_SESSION_TIMEOUT, PROGRESS_EVERY, WARMUP};

pub(crate) async fn mutex_many_waiters(
    report: &Report,
    connect: &str,
    waiters: usize,
    sessions: usize,
) -> BenchResult<()> {
    if sessions == 0 {
        return Err("mutex-many-waiters needs at least one session".into());
    }
    let path = unique_path("many-waiters");

    let t0 = Instant::now();
    let holder_client = connect_client(connect, BENCH_SESSION_TIMEOUT);
    let waiter_clients =
        futures::future::try_join_all((0..sessions).map(|_| connect_client(connect, BENCH_SESSION_TIMEOUT)));
    let (holder_client, clients) = tokio::try_join!(holder_client, waiter_clients)?;
    let connect_elapsed = t0.elapsed();

    let holder = InterProcessMutex::new(&holder_client, &path)?;
    // Warm the server up (a freshly started JVM interprets its first requests), as the other modes do.
    for _ in 0..WARMUP {
        holder.acquire().await?;
        holder.release().await?;
    }
    let guard = holder.lock().await?;
    // Client CPU of queueing and draining (not of connecting and warming up).
    let cpu_start = cpu_time();

    let witness = Arc::new(Witness::default());
    let completed = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let queue_start = Instant::now();
    let mut tasks = Vec::with_capacity(waiters);
    for i in 0..waiters {
        let mutex = InterProcessMutex::new(&clients[i % sessions], &path)?;
        let (witness, completed, failed) = (witness.clone(), completed.clone(), failed.clone());
        tasks.push(tokio::spawn(async move {
            let outcome = async {
                mutex.acquire().await?;
                witness.critical_section().await;
                mutex.release().await
            };
            match outcome.await {
                Ok(()) => {
                    completed.fetch_add(1, Ordering::SeqCst);
                }
                Err(e) => {
                    if failed.fetch_add(1, Ordering::SeqCst) == 0 {
                        eprintln!("lock_bench: a waiter failed: {e}");
                    }
                }
            }
        }));
    }

    // Queued = the holder's node plus one node per waiter.
    let queue_budget = Duration::from_secs(60).max(Duration::from_millis(20) * waiters as u32);
    let mut queued = 0usize;
    let mut progress = Instant::now();
    let all_queued = loop {
        // A congested server may drop the poller's connection too: keep polling.
        let polled = match zk_curator::raw::client(&holder_client) {
            Ok(zk) => zk.check_stat(&path).await.map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        match polled {
            Ok(Some(stat)) => queued = (stat.num_children.max(1) - 1) as usize,
            Ok(None) => {}
            Err(e) => eprintln!("lock_bench: polling the queue length failed ({e}); polling again"),
        }
        if progress.elapsed() >= PROGRESS_EVERY {
            progress = Instant::now();
            eprintln!("lock_bench: {queued}/{waiters} queued after {:?}", queue_start.elapsed());
        }
        if queued >= waiters {
            break Some(queue_start.elapsed());
        }
        if failed.load(Ordering::SeqCst) > 0 || queue_start.elapsed() > queue_budget {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let Some(all_queued) = all_queued else {
        for task in &tasks {
            task.abort();
        }
        return Err(format!("only {queued} of {waiters} waiters queued within {queue_budget:?}").into());
    };
    let rss_queued = proc_status_kb("VmRSS");

    let drain_start = Instant::now();
    guard.release().await?;
    let drain_budget = Duration::from_secs(60).max(Duration::from_millis(30) * waiters as u32);
    let drain_progress = async {
        loop {
            tokio::time::sleep(PROGRESS_EVERY).await;
            let done = completed.load(Ordering::SeqCst);
            eprintln!("lock_bench: {done}/{waiters} drained after {:?}", drain_start.elapsed());
        }
    };
    let drain = async {
        tokio::select! {
            _ = futures::future::join_all(tasks.iter_mut()) => {},
            _ = drain_progress => {},
        }
    };
    let drained = tokio::time::timeout(drain_budget, drain).await.is_ok();
    let drain_all = drain_start.elapsed();
    if !drained {
        for task in &tasks {
            task.abort();
        }
    }
    let done = completed.load(Ordering::SeqCst);
    for client in clients.iter().chain([&holder_client]) {
        client.close().await;
    }

    report.ms("connect_ms", connect_elapsed);
    report.ms("all_queued_ms", all_queued);
    report.ms("drain_all_ms", drain_all);
    report.metric("drain_per_handoff_ms", format_args!("{:.3}", drain_all.as_secs_f64() * 1e3 / waiters.max(1) as f64));
    report.metric("completed", done);
    report.metric("overlap_violations", witness.violations.load(Ordering::SeqCst));
    report.metric("counter_ok", u8::from(witness.counter.load(Ordering::SeqCst) == done as u64));
    report.metric("peak_rss_kb", proc_status_kb("VmHWM"));
    report.metric("rss_while_queued_kb", rss_queued);
    report.metric("client_cpu_ms", (cpu_time().saturating_sub(cpu_start)).as_millis());
    report.metric("sessions", sessions);
    report.metric("waiters", waiters);
    if !drained || done != waiters {
        return Err(format!("{done} of {waiters} waiters completed (drain finished in budget: {drained})").into());
    }
    Ok(())
}

// ----------------------------------------------------------------------------------------------
// mutex-many-waiters --guards

pub(crate) async fn mutex_many_guards(
    report: &Report,
    connect: &str,
    waiters: usize,
    sessions: usize,
    style: GuardStyle,
) -> BenchResult<()> {
    let GuardStyle { token, node_per_task, one_instance } = style;
    if sessions == 0 {
        return Err("mutex-many-waiters needs at least one session".into());
    }
    let path = unique_path("many-guards");
    let t0 = Instant::now();
    let holder_client = connect_client(connect, BENCH_SESSION_TIMEOUT);
    let waiter_clients =
        futures::future::try_join_all((0..sessions).map(|_| connect_client(connect, BENCH_SESSION_TIMEOUT)));
    let (holder_client, clients) = tokio::try_join!(holder_client, waiter_clients)?;
    let connect_elapsed = t0.elapsed();

    let holder = InterProcessMutex::new(&holder_client, &path)?;
    for _ in 0..WARMUP {
        holder.lock().await?.release().await?;
    }
    let clock = Arc::new(HandoffClock::default());
    let guard = holder.lock().await?;
    if token {
        clock.check_token(guard.fencing_token());
    }
    let cpu_start = cpu_time();

    let witness = Arc::new(Witness::default());
    let polled = Arc::new(AtomicUsize::new(0));
    let completed = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let (mut lock_future_bytes, mut task_future_bytes) = (0, 0);
    let queue_start = Instant::now();
    let mut tasks = Vec::with_capacity(waiters);
    let instances = if one_instance {
        clients.iter().map(|client| task_mutex(client, &path, node_per_task)).collect::<BenchResult<Vec<_>>>()?
    } else {
        Vec::new()
    };
    for i in 0..waiters {
        let session = i % sessions;
        let mutex = match instances.get(session) {
            Some(instance) => instance.clone(),
            None => task_mutex(&clients[session], &path, node_per_task)?,
        };
        let (witness, clock, polled, completed, failed) =
            (witness.clone(), clock.clone(), polled.clone(), completed.clone(), failed.clone());
        if i == 0 {
            // Where the memory of a queued task goes: the futures it is made of.
            lock_future_bytes = std::mem::size_of_val(&mutex.lock());
        }
        let waiter = async move {
            let outcome = async {
                let guard = counting_first_poll(Box::pin(mutex.lock()), &polled).await?;
                let mut sample = GuardSample { handoff: clock.granted(session, Instant::now()), token_call: None };
                witness.critical_section().await;
                if token {
                    let asked = Instant::now();
                    let fencing = guard.fencing_token();
                    sample.token_call = Some(asked.elapsed());
                    clock.check_token(fencing);
                }
                clock.releasing(session);
                guard.release().await?;
                Ok::<_, Error>(sample)
            };
            match outcome.await {
                Ok(sample) => {
                    completed.fetch_add(1, Ordering::SeqCst);
                    Some(sample)
                }
                Err(e) => {
                    if failed.fetch_add(1, Ordering::SeqCst) == 0 {
                        eprintln!("lock_bench: a waiter failed: {e}");
                    }
                    None
                }
            }
        };
        if i == 0 {
            task_future_bytes = std::mem::size_of_val(&waiter);
        }
        tasks.push(tokio::spawn(waiter));
    }

    // Queued = every task polled its lock() once and the lock nodes are there (the holder's plus
    // those of the waiters' sessions).
    let expected_nodes = guard_nodes_expected(waiters, sessions, node_per_task);
    let queue_budget = Duration::from_secs(60).max(Duration::from_millis(20) * waiters as u32);
    let mut nodes = 0usize;
    let mut progress = Instant::now();
    let all_queued = loop {
        let polled_now = polled.load(Ordering::SeqCst);
        if polled_now >= waiters {
            let listed = match zk_curator::raw::client(&holder_client) {
                Ok(zk) => zk.check_stat(&path).await.map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            match listed {
                Ok(Some(stat)) => nodes = (stat.num_children.max(1) - 1) as usize,
                Ok(None) => {}
                Err(e) => eprintln!("lock_bench: polling the queue failed ({e}); polling again"),
            }
            if nodes >= expected_nodes {
                break Some(queue_start.elapsed());
            }
        }
        if progress.elapsed() >= PROGRESS_EVERY {
            progress = Instant::now();
            eprintln!(
                "lock_bench: {polled_now}/{waiters} polled, {nodes}/{expected_nodes} nodes after {:?}",
                queue_start.elapsed()
            );
        }
        if failed.load(Ordering::SeqCst) > 0 || queue_start.elapsed() > queue_budget {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    };
    let Some(all_queued) = all_queued else {
        for task in &tasks {
            task.abort();
        }
        return Err(format!("only {nodes} of {expected_nodes} nodes queued within {queue_budget:?}").into());
    };
    let rss_queued = proc_status_kb("VmRSS");

    let drain_start = Instant::now();
    clock.releasing(OUTSIDE);
    guard.release().await?;
    let drain_budget = Duration::from_secs(60).max(Duration::from_millis(30) * waiters as u32);
    let drain_progress = async {
        loop {
            tokio::time::sleep(PROGRESS_EVERY).await;
            let done = completed.load(Ordering::SeqCst);
            eprintln!("lock_bench: {done}/{waiters} drained after {:?}", drain_start.elapsed());
        }
    };
    let drain = async {
        tokio::select! {
            samples = futures::future::join_all(tasks.iter_mut()) => samples,
            _ = drain_progress => unreachable!("the progress loop never ends"),
        }
    };
    let samples = tokio::time::timeout(drain_budget, drain).await;
    let drain_all = drain_start.elapsed();
    let total = queue_start.elapsed();
    let cpu = cpu_time().saturating_sub(cpu_start);
    let drained = samples.is_ok();
    if !drained {
        for task in &tasks {
            task.abort();
        }
    }
    let samples: Vec<GuardSample> = samples.unwrap_or_default().into_iter().filter_map(|s| s.ok().flatten()).collect();
    let done = completed.load(Ordering::SeqCst);
    // The other future a waiter task holds: the guard's release.
    let release_future_bytes = match holder.try_lock().await {
        Ok(Some(guard)) => {
            let release = guard.release();
            let bytes = std::mem::size_of_val(&release);
            let _ = release.await;
            bytes
        }
        _ => 0,
    };
    for client in clients.iter().chain([&holder_client]) {
        client.close().await;
    }

    let mut local = Vec::new();
    let mut cross = Vec::new();
    for (handoff, same_session) in samples.iter().filter_map(|s| s.handoff) {
        if same_session {
            local.push(handoff);
        } else {
            cross.push(handoff);
        }
    }
    let (local, cross) = (sorted(local), sorted(cross));
    let token_calls = sorted(samples.iter().filter_map(|s| s.token_call).collect());
    report.ms("connect_ms", connect_elapsed);
    report.ms("all_queued_ms", all_queued);
    report.ms("drain_all_ms", drain_all);
    report.ms("total_ms", total);
    report.us("drain_per_handoff_us", drain_all / waiters.max(1) as u32);
    report.us("handoff_local_p50_us", pct(&local, 0.50));
    report.us("handoff_local_p99_us", pct(&local, 0.99));
    report.us("handoff_local_max_us", local.last().copied().unwrap_or_default());
    report.metric("handoffs_local", local.len());
    report.us("handoff_cross_session_p50_us", pct(&cross, 0.50));
    report.us("handoff_cross_session_p99_us", pct(&cross, 0.99));
    report.metric("handoffs_cross_session", cross.len());
    if token {
        report.us("token_call_p50_us", pct(&token_calls, 0.50));
        report.us("token_call_p99_us", pct(&token_calls, 0.99));
        report.metric("token_violations", clock.token_violations.load(Ordering::SeqCst));
    }
    report.metric("nodes_while_queued", nodes);
    report.metric("lock_future_bytes", lock_future_bytes);
    report.metric("release_future_bytes", release_future_bytes);
    report.metric("task_future_bytes", task_future_bytes);
    report.metric("completed", done);
    report.metric("overlap_violations", witness.violations.load(Ordering::SeqCst));
    report.metric("counter_ok", u8::from(witness.counter.load(Ordering::SeqCst) == done as u64));
    report.metric("peak_rss_kb", proc_status_kb("VmHWM"));
    report.metric("rss_while_queued_kb", rss_queued);
    report.metric("client_cpu_ms", cpu.as_millis());
    report.metric("sessions", sessions);
    report.metric("waiters", waiters);
    report.metric("node_per_task", u8::from(node_per_task));
    report.metric("one_instance", u8::from(one_instance));
    if !drained || done != waiters {
        return Err(format!("{done} of {waiters} waiters completed (drain finished in budget: {drained})").into());
    }
    if witness.violations.load(Ordering::SeqCst) > 0 {
        return Err("two holders overlapped".into());
    }
    if clock.token_violations.load(Ordering::SeqCst) > 0 {
        return Err("fencing tokens did not strictly increase from holder to holder".into());
    }
    Ok(())
}
