//! `mutex-mixed-curator W [--hold-ms H] [--curator-hold-s S] [--curator-delay-ms D]
//! [--node-per-task]`: W guard tasks of one session take turns while a Curator contender process
//! arrives late; how long it waits, in local grants.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_curator::locks::InterProcessMutex;
use zk_curator::Error;

use crate::guards::task_mutex;
use crate::report::Report;
use crate::witness::Witness;
use crate::{connect_client, unique_path, BenchResult, BENCH_SESSION_TIMEOUT, WARMUP};

/// Parameters of [`mutex_mixed_curator`].
pub(crate) struct Mixed {
    pub(crate) waiters: usize,
    pub(crate) hold: Duration,
    pub(crate) curator_hold_s: u64,
    pub(crate) curator_delay: Duration,
    pub(crate) curator: String,
    pub(crate) node_per_task: bool,
}

/// One local grant: when, and a hash of the lock node it was granted under (one per turn).
type Grant = (Instant, u64);

fn hash_of(s: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    s.hash(&mut h);
    h.finish()
}

/// What the Curator contender's output told us, with the instants its lines arrived.
#[derive(Default, Debug)]
struct CuratorLines {
    acquired: Option<Instant>,
    after_ms: Option<f64>,
    released: Option<Instant>,
    other: Vec<String>,
}

pub(crate) async fn mutex_mixed_curator(report: &Report, connect: &str, mixed: &Mixed) -> BenchResult<()> {
    use tokio::io::AsyncBufReadExt as _;
    let path = unique_path("mixed-curator");
    let client = connect_client(connect, BENCH_SESSION_TIMEOUT).await?;
    let watcher = connect_client(connect, BENCH_SESSION_TIMEOUT).await?;
    {
        let warm = InterProcessMutex::new(&client, &path)?;
        for _ in 0..WARMUP {
            warm.lock().await?.release().await?;
        }
    }
    let ours = [zk_curator::raw::client(&client)?.session_id().0, zk_curator::raw::client(&watcher)?.session_id().0];

    let witness = Arc::new(Witness::default());
    let stop = Arc::new(AtomicBool::new(false));
    let deadline = Instant::now() + Duration::from_secs(180);
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(mixed.waiters);
    for _ in 0..mixed.waiters {
        let mutex = task_mutex(&client, &path, mixed.node_per_task)?;
        let (witness, stop, hold) = (witness.clone(), stop.clone(), mixed.hold);
        tasks.push(tokio::spawn(async move {
            let mut grants: Vec<Grant> = Vec::new();
            while !stop.load(Ordering::SeqCst) && Instant::now() < deadline {
                let guard = mutex.lock().await?;
                grants.push((Instant::now(), hash_of(guard.node_path())));
                if witness.inside.swap(true, Ordering::SeqCst) {
                    witness.violations.fetch_add(1, Ordering::SeqCst);
                }
                tokio::time::sleep(hold).await;
                witness.counter.fetch_add(1, Ordering::SeqCst);
                witness.inside.store(false, Ordering::SeqCst);
                guard.release().await?;
            }
            Ok::<_, Error>(grants)
        }));
    }

    // The Curator contender, started late.
    tokio::time::sleep(mixed.curator_delay).await;
    let spawned_at = Instant::now();
    let mut child = tokio::process::Command::new(&mixed.curator)
        .args([connect, "hold", &path, &mixed.curator_hold_s.to_string(), "mutex"])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start the Curator contender {:?}: {e}", mixed.curator))?;
    let stdout = child.stdout.take().ok_or("no stdout of the Curator contender")?;
    let lines = Arc::new(std::sync::Mutex::new(CuratorLines::default()));
    let reader = {
        let lines = lines.clone();
        tokio::spawn(async move {
            let mut reader = tokio::io::BufReader::new(stdout).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                let now = Instant::now();
                let mut seen = lines.lock().unwrap_or_else(|e| e.into_inner());
                if line.starts_with("ACQUIRED") {
                    seen.acquired = Some(now);
                    seen.after_ms = line.split("after_ms=").nth(1).and_then(|v| v.trim().parse().ok());
                } else if line.starts_with("RELEASED") {
                    seen.released = Some(now);
                } else if seen.other.len() < 20 {
                    seen.other.push(line);
                }
            }
        })
    };

    // Poll the lock's children for a node of another session: the Curator contender queued.
    let zk = zk_curator::raw::client(&watcher)?;
    let mut known = std::collections::HashSet::new();
    let mut previous_poll = Instant::now();
    let mut queued: Option<(Instant, Duration, String)> = None;
    while queued.is_none() && Instant::now() < deadline {
        if lines.lock().unwrap_or_else(|e| e.into_inner()).acquired.is_some() {
            break;
        }
        let children = zk.list_children(&path).await?;
        let replied = Instant::now();
        // The owners of the nodes not seen before, asked all at once (pipelined on the session).
        let fresh: Vec<String> = children.into_iter().filter(|name| known.insert(name.clone())).collect();
        let owners = futures::future::join_all(fresh.iter().map(|name| {
            let child = format!("{path}/{name}");
            let zk = &zk;
            async move { zk.get_data(&child).await.map(|(_, stat)| stat.ephemeral_owner) }
        }))
        .await;
        // A node gone already is a local node whose turn ended.
        if let Some((name, _)) =
            fresh.into_iter().zip(owners).find(|(_, owner)| owner.as_ref().is_ok_and(|o| !ours.contains(o)))
        {
            queued = Some((replied, replied - previous_poll, name));
        }
        previous_poll = replied;
        tokio::time::sleep(Duration::from_millis(1)).await;
    }

    // Wait for the contender to hold and release, then stop the local tasks.
    let exit = tokio::time::timeout(deadline.saturating_duration_since(Instant::now()), child.wait()).await;
    stop.store(true, Ordering::SeqCst);
    let _ = tokio::time::timeout(Duration::from_secs(5), reader).await;
    let mut grants: Vec<Grant> = Vec::new();
    let mut failure = None;
    for task in tasks {
        match task.await {
            Ok(Ok(g)) => grants.extend(g),
            Ok(Err(e)) => failure = Some(e.to_string()),
            Err(e) => failure = Some(e.to_string()),
        }
    }
    let elapsed = started.elapsed();
    client.close().await;
    watcher.close().await;
    grants.sort_unstable_by_key(|g| g.0);
    let seen = std::mem::take(&mut *lines.lock().unwrap_or_else(|e| e.into_inner()));
    let exit_ok = matches!(exit, Ok(Ok(status)) if status.success());

    // Turns: runs of grants under one lock node.
    let mut turn_sizes = Vec::new();
    let mut last_node = None;
    for &(_, node) in &grants {
        if last_node == Some(node) {
            if let Some(size) = turn_sizes.last_mut() {
                *size += 1;
            }
        } else {
            turn_sizes.push(1usize);
            last_node = Some(node);
        }
    }
    report.metric("local_waiters", mixed.waiters);
    report.metric("node_per_task", u8::from(mixed.node_per_task));
    report.ms("local_hold_ms", mixed.hold);
    report.metric("local_grants", grants.len());
    report.metric("local_turns", turn_sizes.len());
    report.metric("local_turn_len_mean", format_args!("{:.1}", grants.len() as f64 / turn_sizes.len().max(1) as f64));
    report.metric("local_turn_len_max", turn_sizes.iter().max().copied().unwrap_or(0));
    report.metric("overlap_violations", witness.violations.load(Ordering::SeqCst));
    report.ms("run_ms", elapsed);
    if let Some(after) = seen.after_ms {
        report.metric("curator_reported_wait_ms", after);
    }
    let (Some((queued_at, uncertainty, node)), Some(acquired)) = (queued.clone(), seen.acquired) else {
        return Err(format!(
            "the Curator contender was not seen queued and holding (queued: {queued:?}, lines: {seen:?}, exit: {exit:?})"
        )
        .into());
    };
    let during = |from: Instant, to: Instant| grants.iter().filter(|g| g.0 > from && g.0 < to).collect::<Vec<_>>();
    let ahead = during(queued_at, acquired);
    let turns_ahead: std::collections::HashSet<u64> = ahead.iter().map(|g| g.1).collect();
    let before: std::collections::HashSet<u64> = grants.iter().filter(|g| g.0 <= queued_at).map(|g| g.1).collect();
    let new_turns_ahead = turns_ahead.iter().filter(|t| !before.contains(t)).count();
    report.ms("curator_started_after_ms", spawned_at - started);
    report.ms("curator_queued_after_ms", queued_at - started);
    report.ms("curator_queue_seen_within_ms", uncertainty);
    report.ms("curator_wait_ms", acquired - queued_at);
    report.metric("local_grants_after_curator_queued", ahead.len());
    report.metric("local_turns_after_curator_queued", turns_ahead.len());
    report.metric("local_new_turns_after_curator_queued", new_turns_ahead);
    let held_window = Duration::from_secs(mixed.curator_hold_s).saturating_sub(Duration::from_millis(100));
    let while_held = during(acquired, acquired + held_window).len();
    report.metric("local_grants_while_curator_held", while_held);
    report.metric("curator_node", node);
    if let Some(released) = seen.released {
        report.ms("curator_held_ms", released - acquired);
    }
    if let Some(e) = failure {
        return Err(format!("a local waiter failed: {e}").into());
    }
    if !exit_ok {
        return Err(format!("the Curator contender failed: {exit:?} {:?}", seen.other).into());
    }
    if witness.violations.load(Ordering::SeqCst) > 0 || while_held > 0 {
        return Err("two holders overlapped".into());
    }
    Ok(())
}
