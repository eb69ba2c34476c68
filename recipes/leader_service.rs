//! Leader service: one active instance among several worker *processes*, with failover. Each
//! worker takes part in one `LeaderLatch`; while it leads it runs the "service" (here: it logs
//! `ACTIVE <id> <term> <µs timestamp>` every 50 ms to its own log file) and the moment it stops
//! leading it logs `INACTIVE`. The program kills the active process with `kill -9` (`--kills`
//! times, a supervisor restarting it each time), then makes the active one resign gracefully
//! (SIGTERM: it stops its service, logs `INACTIVE` and closes its latch), stops everything and
//! proves **from the workers' own logs** that no two were ever active at the same time. It also
//! reports how long each failover took.
//!
//! ```text
//! cargo run --release --example leader_service                 # starts its own ZooKeeper
//! ZK_CONNECT=127.0.0.1:2181 cargo run --release --example leader_service -- --workers 4 --kills 3
//! cargo run --release --example leader_service -- --without-latch   # watch the proof fail
//! ```
//!
//! How long failover takes, and why:
//!
//! * **After `kill -9`** the dead leader cannot delete its latch node: it goes when ZooKeeper
//!   expires the dead process's session, one session timeout (plus up to one server tick) after
//!   its last heartbeat. The next in line is watching that node and leads at once. So failover is
//!   bounded by the session timeout: the workers use a short one (`--session-ms`, default 4 s).
//! * **After a graceful resign** it is one delete (the latch's close) and one watch event: a few
//!   milliseconds.
//!
//! Why the proof holds: a worker claims to be active only while its leadership's `HoldState` is
//! `Held`. A leader that is cut off from ZooKeeper stops claiming within 0.85 × the session
//! timeout after the server's last reply (the hold becomes `Lost`), before the server can expire
//! its session and hand leadership to the next in line. The check is an interval overlap test:
//! a worker is active from its first `ACTIVE` line until its `INACTIVE` line; a worker killed with
//! `kill -9` may have been active until its death, so its interval ends when the parent has
//! reaped it (after the kill), not at its last logged line.
//!
//! The workers' logs are removed after a successful proof and kept (in the directory printed at the
//! start) when it fails.
//!
//! The latch is wire-compatible with Curator's: a Java service using
//! `new LeaderLatch(client, "<the path printed>", id)` takes part in the same election.

use std::fs::OpenOptions;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;
use tokio::process::{Child, Command};
use tokio::signal::unix::{signal, SignalKind};
use zk_curator::leader::LeaderLatch;
use zk_curator::locks::HoldState;
use zk_curator::CuratorClient;

#[derive(Parser, Debug)]
#[command(about = "Run one active service instance among several processes (LeaderLatch), kill it, prove exclusion")]
struct Args {
    /// Worker processes.
    #[arg(long, default_value_t = 3)]
    workers: u32,
    /// How many times the active worker is killed with kill -9 (and restarted).
    #[arg(long, default_value_t = 2)]
    kills: u32,
    /// The workers' ZooKeeper session timeout, in milliseconds: bounds the failover after kill -9.
    #[arg(long, default_value_t = 4000)]
    session_ms: u64,
    /// Let every worker run its service without the latch, to see the proof fail.
    #[arg(long)]
    without_latch: bool,
    /// Internal: run as a worker.
    #[arg(long, num_args = 5, value_names = ["ID", "CONNECT", "PATH", "LOG", "SESSION_MS"], hide = true)]
    worker: Option<Vec<String>>,
}

type AnyResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// How often an active worker logs that it is active.
const HEARTBEAT: Duration = Duration::from_millis(50);
/// Hang guard for each wait of the coordinator (a new leader, a worker's exit).
const WAIT_LIMIT: Duration = Duration::from_secs(30);

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = match &args.worker {
        Some(w) => runtime.block_on(worker(w, args.without_latch)),
        None => runtime.block_on(coordinator(&args)),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn now_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0)
}

// ----------------------------------------------------------------------------------------------
// The worker: a latch participant running the service while it leads.

async fn worker(w: &[String], without_latch: bool) -> AnyResult<ExitCode> {
    let (id, connect, path, log_path) = (&w[0], &w[1], &w[2], &w[3]);
    let session_timeout = Duration::from_millis(w[4].parse()?);
    let mut log = OpenOptions::new().create(true).append(true).open(log_path)?;
    // Each line is one write(2) to a file opened for appending: it is on disk (in the page cache)
    // the moment it is written, even if this process is killed right after.
    let mut say = move |line: String| log.write_all(format!("{line}\n").as_bytes());
    let mut terminate = signal(SignalKind::terminate())?;

    if without_latch {
        // The broken variant: everybody serves, nobody asks.
        say(format!("READY {id}"))?;
        let mut beat = tokio::time::interval(HEARTBEAT);
        loop {
            tokio::select! {
                _ = beat.tick() => say(format!("ACTIVE {id} 0 {}", now_us()))?,
                _ = terminate.recv() => break,
            }
        }
        say(format!("INACTIVE {id} 0 {} resigned", now_us()))?;
        return Ok(ExitCode::SUCCESS);
    }

    let client = CuratorClient::builder(connect).session_timeout(session_timeout).connect().await?;
    let latch = LeaderLatch::new(&client, path, id.as_str())?;
    latch.start()?;
    // Taking part, and SIGTERM is ours to handle: the coordinator may stop us from now on.
    say(format!("READY {id}"))?;
    'service: loop {
        // Queued: wait for leadership (or to be told to stop).
        tokio::select! {
            led = latch.await_leadership() => led?,
            _ = terminate.recv() => break 'service,
        }
        let Some(hold) = latch.hold().filter(|h| h.hold_state() == HoldState::Held) else { continue };
        let term = hold.fencing_token();
        let mut states = hold.watch_state();
        let mut beat = tokio::time::interval(HEARTBEAT);
        // Active: serve while the leadership is Held, and only then.
        let why = loop {
            tokio::select! {
                _ = beat.tick() => {
                    if hold.hold_state() != HoldState::Held {
                        break "leadership not held";
                    }
                    say(format!("ACTIVE {id} {term} {}", now_us()))?;
                }
                _ = states.changed() => {
                    let now = *states.borrow_and_update();
                    if now != HoldState::Held {
                        break if now == HoldState::Lost { "leadership lost" } else { "connection suspended" };
                    }
                }
                _ = terminate.recv() => break "resigned",
            }
        };
        // Stop serving first, then give leadership up: never active without being leader.
        say(format!("INACTIVE {id} {term} {} {why}", now_us()))?;
        if why == "resigned" {
            break 'service;
        }
    }
    latch.close().await?;
    client.close().await;
    Ok(ExitCode::SUCCESS)
}

// ----------------------------------------------------------------------------------------------
// The coordinator: starts the workers, kills the active one, checks the logs.

/// A worker process and how it ended.
struct Worker {
    id: String,
    log: PathBuf,
    child: Option<Child>,
    /// Set once the process was killed with kill -9 and reaped: it was dead by then.
    killed_dead_at: Option<u64>,
}

/// One log line: `ACTIVE id term ts` or `INACTIVE id term ts why...`.
struct Line {
    active: bool,
    term: u64,
    ts: u64,
}

fn read_log(path: &Path) -> Vec<Line> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let active = match f.first() {
                Some(&"ACTIVE") => true,
                Some(&"INACTIVE") => false,
                _ => return None,
            };
            Some(Line { active, term: f.get(2)?.parse().ok()?, ts: f.get(3)?.parse().ok()? })
        })
        .collect()
}

/// An interval during which a worker was (or may have been) active.
#[derive(Debug)]
struct Interval {
    id: String,
    term: u64,
    start: u64,
    end: u64,
    /// How the end is known: its INACTIVE line, or its death.
    end_by: &'static str,
}

fn intervals(w: &Worker) -> Vec<Interval> {
    let mut out = Vec::new();
    let mut open: Option<(u64, u64, u64)> = None; // (term, start, last)
    for line in read_log(&w.log) {
        match (line.active, open) {
            (true, None) => open = Some((line.term, line.ts, line.ts)),
            (true, Some((term, start, _))) if term == line.term => open = Some((term, start, line.ts)),
            (true, Some((term, start, last))) => {
                // A new term without INACTIVE: should not happen; the old one ends at its last line.
                out.push(Interval { id: w.id.clone(), term, start, end: last, end_by: "last ACTIVE line" });
                open = Some((line.term, line.ts, line.ts));
            }
            (false, Some((term, start, _))) => {
                out.push(Interval { id: w.id.clone(), term, start, end: line.ts, end_by: "INACTIVE" });
                open = None;
            }
            (false, None) => {}
        }
    }
    if let Some((term, start, last)) = open {
        // Still active when the log ends. Killed: possibly active until its death. Otherwise the
        // worker broke its own protocol (it must log INACTIVE before exiting): until now.
        let (end, end_by) = match w.killed_dead_at {
            Some(dead) => (dead.max(last), "kill -9"),
            None => (now_us(), "no INACTIVE line"),
        };
        out.push(Interval { id: w.id.clone(), term, start, end, end_by });
    }
    out
}

/// The worker currently active (its last line is ACTIVE), the newest claim first.
fn active_now(workers: &[Worker]) -> Option<(usize, u64, u64)> {
    workers
        .iter()
        .enumerate()
        .filter(|(_, w)| w.child.is_some())
        .filter_map(|(i, w)| read_log(&w.log).last().filter(|l| l.active).map(|l| (i, l.term, l.ts)))
        .max_by_key(|&(_, _, ts)| ts)
}

/// Waits until a live worker other than `not` logs ACTIVE after `since`: (worker, term, first
/// ACTIVE timestamp after `since`).
async fn new_leader(workers: &[Worker], since: u64, not: Option<usize>) -> AnyResult<(usize, u64, u64)> {
    let started = Instant::now();
    loop {
        let found = workers
            .iter()
            .enumerate()
            .filter(|&(i, w)| Some(i) != not && w.child.is_some())
            .filter_map(|(i, w)| {
                read_log(&w.log).into_iter().find(|l| l.active && l.ts > since).map(|l| (i, l.term, l.ts))
            })
            .min_by_key(|&(_, _, ts)| ts);
        if let Some(found) = found {
            return Ok(found);
        }
        if started.elapsed() > WAIT_LIMIT {
            return Err(format!("no worker became active within {WAIT_LIMIT:?}").into());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

struct Spawner {
    exe: PathBuf,
    connect: String,
    path: String,
    dir: PathBuf,
    session_ms: u64,
    without_latch: bool,
    next: u32,
}

impl Spawner {
    fn spawn(&mut self) -> AnyResult<Worker> {
        let id = format!("worker-{}", self.next);
        self.next += 1;
        let log = self.dir.join(format!("{id}.log"));
        let mut command = Command::new(&self.exe);
        command
            .args(["--worker", &id, &self.connect, &self.path])
            .arg(&log)
            .arg(self.session_ms.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        if self.without_latch {
            command.arg("--without-latch");
        }
        let child = command.spawn()?;
        Ok(Worker { id, log, child: Some(child), killed_dead_at: None })
    }

    /// Spawns a worker and waits until it takes part (its log says READY).
    async fn start(&mut self) -> AnyResult<Worker> {
        let mut w = self.spawn()?;
        let started = Instant::now();
        loop {
            let log = std::fs::read_to_string(&w.log).unwrap_or_default();
            if log.lines().any(|l| l.starts_with("READY ")) {
                return Ok(w);
            }
            if let Some(child) = &mut w.child {
                if let Some(status) = child.try_wait()? {
                    return Err(format!("{} exited with {status} before taking part", w.id).into());
                }
            }
            if started.elapsed() > WAIT_LIMIT {
                return Err(format!("{} did not start within {WAIT_LIMIT:?}", w.id).into());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

fn secs(from_us: u64, to_us: u64) -> String {
    let d = to_us.saturating_sub(from_us);
    if d >= 1_000_000 {
        format!("{:.2} s", d as f64 / 1e6)
    } else {
        format!("{:.1} ms", d as f64 / 1e3)
    }
}

/// Sends SIGTERM: the worker resigns (logs INACTIVE, closes its latch) and exits.
fn terminate(child: &Child) -> AnyResult<()> {
    let pid = child.id().ok_or("worker already reaped")?;
    let status = std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status()?;
    if !status.success() {
        return Err(format!("kill -TERM {pid} failed: {status}").into());
    }
    Ok(())
}

async fn reap(child: &mut Child) -> AnyResult<std::process::ExitStatus> {
    Ok(tokio::time::timeout(WAIT_LIMIT, child.wait()).await.map_err(|_| "a worker did not exit")??)
}

async fn coordinator(args: &Args) -> AnyResult<ExitCode> {
    if args.workers < 2 {
        return Err("--workers must be at least 2 (someone has to take over)".into());
    }
    // A local ZooKeeper, or with ZK_CONNECT set that server, in a chroot of this run's own that
    // goes when `server` drops.
    let server = zk_curator::testing::TestingServer::start().await?;
    let connect = server.connect_string();
    if !server.is_external() {
        println!("started a local ZooKeeper at {connect} (set ZK_CONNECT to use your own)");
    }
    let run = format!("leader-service-{}", std::process::id());
    let dir = std::env::temp_dir().join(&run);
    std::fs::create_dir_all(&dir)?;
    let mut spawner = Spawner {
        exe: std::env::current_exe()?,
        connect,
        path: format!("/leader-service/{run}/leader"),
        dir: dir.clone(),
        session_ms: args.session_ms,
        without_latch: args.without_latch,
        next: 0,
    };
    println!(
        "{} workers on latch {}, session timeout {} ms, logs in {}{}",
        args.workers,
        spawner.path,
        args.session_ms,
        dir.display(),
        if args.without_latch { " -- WITHOUT the latch" } else { "" }
    );
    let run_start = now_us();
    let mut workers = Vec::new();
    let mut outcome = Ok((Vec::new(), None));
    for _ in 0..args.workers {
        match spawner.start().await {
            Ok(w) => workers.push(w),
            Err(e) => {
                outcome = Err(e);
                break;
            }
        }
    }
    if outcome.is_ok() {
        outcome = exercise(args, &mut spawner, &mut workers).await;
    }

    // Stop everything (gracefully), whatever happened above.
    for w in &workers {
        if let Some(child) = &w.child {
            let _ = terminate(child);
        }
    }
    let mut failed = Vec::new();
    for w in &mut workers {
        if let Some(mut child) = w.child.take() {
            match reap(&mut child).await {
                Ok(status) if status.success() => {}
                Ok(status) => failed.push(format!("{} exited with {status}", w.id)),
                Err(e) => {
                    let _ = child.start_kill();
                    failed.push(format!("{}: {e}", w.id));
                }
            }
        }
    }
    let (kill_failovers, resign_failover) = match outcome {
        Ok(f) => f,
        Err(e) => {
            println!("FAILED: {e}");
            (Vec::new(), None)
        }
    };

    // The proof, from the logs alone.
    let mut all: Vec<Interval> = workers.iter().flat_map(intervals).collect();
    all.sort_by_key(|i| i.start);
    let mut ok = !all.is_empty() && failed.is_empty() && resign_failover.is_some();
    for f in &failed {
        println!("PROOF FAILED: {f}");
    }
    let mut smallest_gap: Option<u64> = None;
    let mut overlaps = 0;
    // Times relative to the start of the exercise.
    let at = |ts: u64| format!("{:+.3} s", (ts as f64 - run_start as f64) / 1e6);
    for (n, a) in all.iter().enumerate() {
        for b in &all[n + 1..] {
            if b.start < a.end && a.id != b.id {
                ok = false;
                overlaps += 1;
                if overlaps <= 3 {
                    println!(
                        "PROOF FAILED: {} (term {}) active {} .. {} ({}), {} (term {}) active from {}: overlap {}",
                        a.id,
                        a.term,
                        at(a.start),
                        at(a.end),
                        a.end_by,
                        b.id,
                        b.term,
                        at(b.start),
                        secs(b.start, a.end)
                    );
                }
            }
        }
        if let Some(b) = all.get(n + 1) {
            if b.start >= a.end {
                let gap = b.start - a.end;
                smallest_gap = Some(smallest_gap.map_or(gap, |g| g.min(gap)));
            }
            let same_leadership = b.id == a.id && b.term == a.term; // held again after a suspension
            if (b.term < a.term || (b.term == a.term && !same_leadership)) && !args.without_latch {
                ok = false;
                println!("PROOF FAILED: term {} of {} does not follow term {} of {}", b.term, b.id, a.term, a.id);
            }
        }
    }
    if overlaps > 3 {
        println!("PROOF FAILED: ... {} overlapping pairs in all", overlaps);
    }
    println!(
        "{} active intervals in {} worker logs; smallest gap between two: {}",
        all.len(),
        workers.len(),
        smallest_gap.map_or("-".to_string(), |g| secs(0, g))
    );
    if ok {
        println!(
            "failover after kill -9: {} -- the dead leader's node stays until ZooKeeper expires its session, \
             one session timeout ({} ms) after its last heartbeat, rounded up to the server's tick",
            kill_failovers.iter().map(|f| secs(0, *f)).collect::<Vec<_>>().join(", "),
            args.session_ms,
        );
        println!(
            "failover after a graceful resign: {} -- one delete (the latch's close) and one watch event",
            resign_failover.map_or("-".to_string(), |f| secs(0, f)),
        );
        println!(
            "PROOF OK: never two workers active at once (checked on their own logs); terms (fencing tokens) increase"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// Kills the active worker `--kills` times, then makes it resign once: the failover times (µs).
async fn exercise(args: &Args, spawner: &mut Spawner, workers: &mut Vec<Worker>) -> AnyResult<(Vec<u64>, Option<u64>)> {
    let (first, term, _) = new_leader(workers, 0, None).await?;
    println!("{} is active (term {term})", workers[first].id);
    let mut kill_failovers = Vec::new();
    for _ in 0..args.kills {
        // Let it serve a little, then kill whoever is active now.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (victim, _, _) = active_now(workers).ok_or("nobody is active")?;
        let killed_at = now_us();
        let mut child = workers[victim].child.take().ok_or("no process")?;
        child.start_kill()?;
        reap(&mut child).await?;
        workers[victim].killed_dead_at = Some(now_us());
        let (next, term, started) = new_leader(workers, killed_at, Some(victim)).await?;
        let restarted = spawner.start().await?;
        println!(
            "kill -9 {} -> {} active after {} (term {term}); restarted as {}",
            workers[victim].id,
            workers[next].id,
            secs(killed_at, started),
            restarted.id
        );
        kill_failovers.push(started.saturating_sub(killed_at));
        workers.push(restarted);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (resigner, _, _) = active_now(workers).ok_or("nobody is active")?;
    let child = workers[resigner].child.as_ref().ok_or("no process")?;
    let asked = now_us();
    terminate(child)?;
    let (next, term, started) = new_leader(workers, asked, Some(resigner)).await?;
    let stopped = read_log(&workers[resigner].log).iter().rev().find(|l| !l.active).map(|l| l.ts).unwrap_or(asked);
    println!(
        "SIGTERM {} (resigns: INACTIVE, closes its latch) -> {} active after {} (term {term})",
        workers[resigner].id,
        workers[next].id,
        secs(stopped, started)
    );
    if let Some(mut child) = workers[resigner].child.take() {
        let status = reap(&mut child).await?;
        if !status.success() {
            return Err(format!("{} exited with {status} after resigning", workers[resigner].id).into());
        }
    }
    Ok((kill_failovers, Some(started.saturating_sub(stopped))))
}
