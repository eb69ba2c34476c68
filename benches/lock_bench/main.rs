//! Lock benchmark and hold tool for zk-curator.
//!
//! ```text
//! cargo run --release --example lock_bench -- CONNECT MODE ARGS
//!
//!   CONNECT   host:port[,host:port][/chroot], or `local` to start a TestingServer here
//!
//!   raw N                          plain zookeeper-client floor: N x (create eph-seq, list, delete), N x exists
//!   mutex-uncontended N [--guards] one session, N x InterProcessMutex acquire + release (or lock() + guard release)
//!   mutex-contended C N [--tasks T] [--guards [--node-per-task]]
//!                                  C sessions (T tasks each) race for N acquisitions in total
//!   mutex-many-waiters W [S]       W waiters queued behind a holder on S sessions, then drained
//!   mutex-many-waiters W [S] --guards [--token] [--node-per-task]
//!                                  the same with guard-style lock() (the local queue), S default 1
//!   mutex-mixed-curator W [--hold-ms H] [--curator-hold-s S] [--curator-delay-ms D] [--node-per-task]
//!                                  W guard tasks on one session take turns (hold H ms, queue again)
//!                                  while a Curator contender process arrives late: its wait
//!   rwlock-readers C N [HOLD_MS]   C sessions, one reader each, N read-lock acquisitions in total
//!   semaphore L C N [HOLD_MS]      C sessions share an L-lease semaphore, N leases in total
//!   hold PATH SECONDS KIND         KIND mutex|read|write|sem:L|semmutex|latch[:ID]|selector[:ID]:
//!                                  acquire (latch, selector: become leader), print
//!                                  ACQUIRED/TOKEN, report hold-state changes, release (latch,
//!                                  selector: give leadership up and close), print RELEASED
//! ```
//!
//! Every bench prints one `RESULT rust.<bench>.<metric>=<value>` line per metric (latencies in µs,
//! rates per second). Each mode first runs uncounted warm-up cycles (a fresh server JVM interprets
//! its first requests). `raw` interleaves its sequential and pipelined cycles, and
//! `mutex-uncontended` interleaves each acquire/release with the same requests sent bare on the
//! same session (`floor_*`), so that ratios compare like with like on a noisy machine. With `local` the bench also prints `server_force_sync` (0 or 1), read from the
//! started server's `zoo.cfg`: the TestingServer runs with `forceSync=no`, so writes are not
//! fsync'd and are cheaper than on a production server.
//!
//! The guard modes (issue 19, the local queue): `--guards` uses `lock()` and the guard's release,
//! which queue the tasks of one client on one path behind one node per turn (`--node-per-task`:
//! `with_node_per_task()`, a node per task as Curator's threads). `mutex-many-waiters --guards`
//! times each hand-off from the previous holder's release call to the next grant (`handoff_local`:
//! same session; `handoff_cross_session`: the node had to change hands in ZooKeeper), and with
//! `--token` every holder reads its fencing token, which must be larger than the previous
//! holder's (the run fails otherwise). `mutex-mixed-curator` starts
//! `CURATOR hold PATH S mutex` (the Curator side's run script) D ms after its W local tasks, sees
//! its node appear by polling the lock's children (a node owned by another session), and counts
//! the local grants between that and the contender's `ACQUIRED` line.
//!
//! `hold` honours `SESSION_TIMEOUT_MS` (default 15000), `ACQUIRE_TIMEOUT_S` (print `NOT_ACQUIRED`
//! and exit 0 when not acquired in time) and `GUARDED_WRITE_PATH` (a lock-guarded set-data, or
//! create if missing, once the hold is LOST or at the end of the hold). Once LOST the hold ends
//! early: a lost hold cannot come back. `latch:ID` takes part in a `LeaderLatch` on PATH with
//! participant id ID (Curator's `LeaderLatch(client, PATH, ID)`; plain `latch` uses
//! `rust-<pid>`): `ACQUIRED` names our latch node once we lead, and `RELEASED` follows the latch's
//! close (when SECONDS end, or at once when the leadership is LOST). `selector:ID` takes part in a
//! `LeaderSelector` the same way (Curator's `LeaderSelector` with `setId(ID)`): its leadership work
//! runs until SECONDS end or the leadership is lost, then returns, and the selector is closed.

use std::fmt::Display;
use std::io::Write as _;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use zk_curator::raw as zk;
use zk_curator::testing::TestingServer;
use zk_curator::{
    CuratorClient, Error, FencingToken, GuardedWrite, Hold, HoldState, InterProcessMutex, InterProcessReadWriteLock,
    InterProcessSemaphoreV2, LeaderLatch, LeaderSelector, Leadership as SelectorLeadership, Lease, LockDriver,
    MutexGuard, ReadLock,
};

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type BenchResult<T> = Result<T, BoxError>;

/// Uncounted cycles run before measuring (JIT of the server, connection warm-up).
const WARMUP: usize = 1000;
/// Session timeout of the benchmark clients: Curator's default (the hold mode reads `SESSION_TIMEOUT_MS`).
const BENCH_SESSION_TIMEOUT: Duration = Duration::from_secs(60);
/// How often a long many-waiters phase reports its progress on stderr.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

#[derive(Parser, Debug)]
#[command(name = "lock_bench", about = "zk-curator lock benchmarks (RESULT lines on stdout)")]
struct Cli {
    /// ZooKeeper connect string, or `local` to start a TestingServer (forceSync=no).
    connect: String,
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Subcommand, Debug)]
enum Mode {
    /// Plain zookeeper-client floor: N x (create ephemeral-sequential + list + delete), then N x exists.
    Raw { n: usize },
    /// One session, N x acquire + release of one InterProcessMutex (`--guards`: `lock()` + guard release).
    MutexUncontended {
        n: usize,
        /// Guard-style `lock()` instead of Curator-style `acquire()`.
        #[arg(long)]
        guards: bool,
    },
    /// C sessions race for N acquisitions in total; overlap and lost-update checks.
    MutexContended {
        clients: usize,
        n: usize,
        /// Tasks per session (each with its own `InterProcessMutex` instance).
        #[arg(long, default_value_t = 1)]
        tasks: usize,
        /// Guard-style `lock()` (the local queue) instead of Curator-style `acquire()`.
        #[arg(long)]
        guards: bool,
        /// With `--guards`: a node per task (`with_node_per_task`), no local queue.
        #[arg(long, requires = "guards")]
        node_per_task: bool,
    },
    /// W waiters queued behind a holder on SESSIONS sessions (default W if W <= 200, else 4), then drained.
    MutexManyWaiters {
        waiters: usize,
        sessions: Option<usize>,
        /// Guard-style `lock()` (the local queue) instead of Curator-style `acquire()`.
        #[arg(long)]
        guards: bool,
        /// With `--guards`: every holder asks for its fencing token; they must strictly increase.
        #[arg(long, requires = "guards")]
        token: bool,
        /// With `--guards`: a node per task (`with_node_per_task`), no local queue.
        #[arg(long, requires = "guards")]
        node_per_task: bool,
        /// With `--guards`: every task locks a clone of one `InterProcessMutex` (default: one
        /// instance per task).
        #[arg(long, requires = "guards")]
        one_instance: bool,
    },
    /// W guard-style waiters on one session take turns (each holds HOLD_MS, then queues again)
    /// while a real Curator contender (another process) arrives late: how long it waits.
    MutexMixedCurator {
        waiters: usize,
        /// How long each local holder holds the lock, in ms.
        #[arg(long, default_value_t = 1)]
        hold_ms: u64,
        /// How long the Curator contender holds the lock, in whole seconds (CuratorBench's SECONDS).
        #[arg(long, default_value_t = 1)]
        curator_hold_s: u64,
        /// Start the Curator contender this many ms after the local tasks start.
        #[arg(long, default_value_t = 500)]
        curator_delay_ms: u64,
        /// The Curator side's run script.
        #[arg(long, default_value = "/work/shared/bench/curator/run.sh")]
        curator: String,
        /// A node per local task (`with_node_per_task`), no local queue: the behaviour before it.
        #[arg(long)]
        node_per_task: bool,
    },
    /// C sessions, one reader task each, take the read lock N times in total, holding it HOLD_MS.
    RwlockReaders { clients: usize, n: usize, hold_ms: Option<u64> },
    /// C sessions, one task each, take N leases in total of an L-lease semaphore, holding each HOLD_MS.
    Semaphore { leases: usize, clients: usize, n: usize, hold_ms: Option<u64> },
    /// Acquire PATH (KIND mutex, read, write, sem:L, semmutex, latch[:ID] or selector[:ID]: lead a
    /// LeaderLatch or LeaderSelector), hold it SECONDS while reporting hold-state changes, release.
    Hold { path: String, seconds: f64, kind: String },
}

impl Mode {
    fn bench(&self) -> &'static str {
        match self {
            Mode::Raw { .. } => "raw",
            Mode::MutexUncontended { .. } => "mutex_uncontended",
            Mode::MutexContended { .. } => "mutex_contended",
            Mode::MutexManyWaiters { guards: false, .. } => "mutex_many_waiters",
            Mode::MutexManyWaiters { guards: true, token: false, .. } => "mutex_many_guards",
            Mode::MutexManyWaiters { guards: true, token: true, .. } => "mutex_many_guards_token",
            Mode::MutexMixedCurator { .. } => "mutex_mixed_curator",
            Mode::RwlockReaders { .. } => "rwlock_readers",
            Mode::Semaphore { .. } => "semaphore",
            Mode::Hold { .. } => "hold",
        }
    }
}

/// Prints one line and flushes, so a reading process sees it at once.
fn say(line: impl Display) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

struct Report {
    bench: &'static str,
}

impl Report {
    fn metric(&self, name: &str, value: impl Display) {
        say(format_args!("RESULT rust.{}.{}={}", self.bench, name, value));
    }

    fn us(&self, name: &str, d: Duration) {
        self.metric(name, format_args!("{:.1}", d.as_secs_f64() * 1e6));
    }

    fn ms(&self, name: &str, d: Duration) {
        self.metric(name, format_args!("{:.1}", d.as_secs_f64() * 1e3));
    }

    fn rate(&self, name: &str, count: usize, elapsed: Duration) {
        let rate = if elapsed.is_zero() { 0.0 } else { count as f64 / elapsed.as_secs_f64() };
        self.metric(name, format_args!("{rate:.1}"));
    }
}

/// Nearest-rank percentile of an already sorted sample.
fn pct(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn mean(v: &[Duration]) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    v.iter().sum::<Duration>() / v.len() as u32
}

fn sorted(mut v: Vec<Duration>) -> Vec<Duration> {
    v.sort_unstable();
    v
}

/// Awaits every contender task: all acquire latencies (sorted) and how many each task made, or
/// the first failure.
async fn collect_latencies(
    tasks: Vec<tokio::task::JoinHandle<Result<Vec<Duration>, Error>>>,
) -> Result<(Vec<Duration>, Vec<usize>), String> {
    let mut acquire = Vec::new();
    let mut per_task = Vec::with_capacity(tasks.len());
    let mut failure = None;
    for task in tasks {
        match task.await {
            Ok(Ok(latencies)) => {
                per_task.push(latencies.len());
                acquire.extend(latencies);
            }
            Ok(Err(e)) => failure = Some(e.to_string()),
            Err(e) => failure = Some(e.to_string()),
        }
    }
    match failure {
        Some(e) => Err(e),
        None => Ok((sorted(acquire), per_task)),
    }
}

/// A lock path no other run uses.
fn unique_path(what: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
    format!("/zk-curator-bench/{what}-{}-{nanos}", std::process::id())
}

/// A field of `/proc/self/status` in kB (`VmHWM`, `VmRSS`).
fn proc_status_kb(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// User + system CPU time of this process so far.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which is in parentheses and may contain spaces).
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after ") state".
    let ticks: u64 = [11usize, 12].iter().filter_map(|&i| fields.get(i)?.parse::<u64>().ok()).sum();
    Duration::from_secs_f64(ticks as f64 / CLOCK_TICKS_PER_S)
}

/// `sysconf(_SC_CLK_TCK)`: 100 on every Linux this runs on.
const CLOCK_TICKS_PER_S: f64 = 100.0;

/// `forceSync` of a started local server, from its `zoo.cfg` (ZooKeeper's default is yes).
fn local_force_sync(server: &TestingServer) -> Option<bool> {
    if server.is_external() {
        return None;
    }
    let cfg = std::fs::read_to_string(server.data_dir().join("zoo.cfg")).ok()?;
    let value = cfg.lines().rev().find_map(|l| l.trim().strip_prefix("forceSync="));
    Some(value.map_or(true, |v| !v.trim().eq_ignore_ascii_case("no")))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .try_init();
    if let Mode::Hold { kind, .. } = &cli.mode {
        let known = matches!(kind.as_str(), "mutex" | "read" | "write")
            || semaphore_leases(kind).is_ok_and(|l| l.is_some())
            || leader_kind(kind).is_ok_and(|k| k.is_some());
        if !known {
            eprintln!(
                "lock_bench: unknown lock kind {kind:?} for `hold` (supported: mutex, read, write, sem:L with L >= 1, semmutex, latch[:ID], selector[:ID])"
            );
            return ExitCode::from(2);
        }
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("lock_bench: cannot build the tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(run(cli));
    // Background tasks (session I/O of clients dropped above) must not hold up the exit.
    runtime.shutdown_timeout(Duration::from_secs(2));
    code
}

async fn run(cli: Cli) -> ExitCode {
    let report = Report { bench: cli.mode.bench() };
    // The server (if any) lives until the bench is done; dropping it kills the JVM.
    let mut server = None;
    let connect = if cli.connect == "local" {
        // A normal tick and ZooKeeper's own container reaping interval, not the fast test settings.
        let started = TestingServer::builder()
            .tick_time(Duration::from_secs(2))
            .container_check_interval(Duration::from_secs(60))
            .start()
            .await;
        match started {
            Ok(s) => {
                let connect = s.connect_string();
                if let (Some(force_sync), false) = (local_force_sync(&s), matches!(cli.mode, Mode::Hold { .. })) {
                    report.metric("server_force_sync", u8::from(force_sync));
                }
                server = Some(s);
                connect
            }
            Err(e) => {
                eprintln!("lock_bench: cannot start a local ZooKeeper: {e}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        cli.connect.clone()
    };
    let result = match cli.mode {
        Mode::Raw { n } => raw(&report, &connect, n).await,
        Mode::MutexUncontended { n, guards } => mutex_uncontended(&report, &connect, n, guards).await,
        Mode::MutexContended { clients, n, tasks: 1, guards: false, .. } => {
            mutex_contended(&report, &connect, clients, n).await
        }
        Mode::MutexContended { clients, n, tasks, guards, node_per_task } => {
            let style = Style { guards, node_per_task };
            mutex_contended_tasks(&report, &connect, clients, n, tasks, style).await
        }
        Mode::MutexManyWaiters { waiters, sessions, guards: false, .. } => {
            let sessions = sessions.unwrap_or(if waiters <= 200 { waiters } else { 4 });
            mutex_many_waiters(&report, &connect, waiters, sessions).await
        }
        Mode::MutexManyWaiters { waiters, sessions, guards: true, token, node_per_task, one_instance } => {
            let style = GuardStyle { token, node_per_task, one_instance };
            mutex_many_guards(&report, &connect, waiters, sessions.unwrap_or(1), style).await
        }
        Mode::MutexMixedCurator { waiters, hold_ms, curator_hold_s, curator_delay_ms, curator, node_per_task } => {
            let mixed = Mixed {
                waiters,
                hold: Duration::from_millis(hold_ms),
                curator_hold_s,
                curator_delay: Duration::from_millis(curator_delay_ms),
                curator,
                node_per_task,
            };
            mutex_mixed_curator(&report, &connect, &mixed).await
        }
        Mode::RwlockReaders { clients, n, hold_ms } => {
            rwlock_readers(&report, &connect, clients, n, Duration::from_millis(hold_ms.unwrap_or(0))).await
        }
        Mode::Semaphore { leases, clients, n, hold_ms } => {
            semaphore(&report, &connect, leases, clients, n, Duration::from_millis(hold_ms.unwrap_or(0))).await
        }
        Mode::Hold { path, seconds, kind } => hold(&connect, &path, seconds, &kind).await,
    };
    drop(server);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lock_bench: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn connect_client(connect: &str, session_timeout: Duration) -> BenchResult<CuratorClient> {
    Ok(CuratorClient::builder(connect).session_timeout(session_timeout).connect().await?)
}

// ----------------------------------------------------------------------------------------------
// raw: the floor

async fn raw(report: &Report, connect: &str, n: usize) -> BenchResult<()> {
    let zk = zk::Client::connector().with_session_timeout(BENCH_SESSION_TIMEOUT).connect(connect).await?;
    let parent = unique_path("raw");
    zk.mkdir(&parent, &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())).await?;
    let options = zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
    // Same name length and data size as a protected Curator lock node.
    let prefix = format!("{parent}/_c_00000000-0000-0000-0000-000000000000-lock-");
    let data = b"127.0.0.1";

    for _ in 0..WARMUP.min(n) {
        let (_, seq) = zk.create(&prefix, data, &options).await?;
        zk.list_children(&parent).await?;
        zk.delete(&format!("{prefix}{seq}"), None).await?;
    }

    // Each sequential cycle (every request awaited before the next: three round trips) is followed
    // by a pipelined one (create + list sent back to back, what the mutex does), so that both see
    // the same server and machine conditions.
    let (mut create, mut list, mut delete, mut cycle) =
        (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
    let (mut pipelined, mut pipelined_delete) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let mut list_after_create = Vec::with_capacity(n);
    let mut missed = 0usize;
    for _ in 0..n {
        let t0 = Instant::now();
        let (_, seq) = zk.create(&prefix, data, &options).await?;
        let t1 = Instant::now();
        let children = zk.list_children(&parent).await?;
        let t2 = Instant::now();
        zk.delete(&format!("{prefix}{seq}"), None).await?;
        let t3 = Instant::now();
        debug_assert_eq!(children.len(), 1);
        create.push(t1 - t0);
        list.push(t2 - t1);
        delete.push(t3 - t2);
        cycle.push(t3 - t0);

        let p = pipelined_create_list(&zk, &prefix, &parent, data, &options).await?;
        pipelined.push(p.elapsed);
        list_after_create.push(p.list_after_create);
        let t0 = Instant::now();
        zk.delete(&p.path, None).await?;
        pipelined_delete.push(t0.elapsed());
        if !p.seen {
            missed += 1;
        }
    }
    // Rate of the sequential cycles alone.
    let cycles_elapsed: Duration = cycle.iter().sum();

    let mut exists = Vec::with_capacity(n);
    let started = Instant::now();
    for _ in 0..n {
        let t0 = Instant::now();
        zk.check_stat(&parent).await?;
        exists.push(t0.elapsed());
    }
    let exists_elapsed = started.elapsed();
    let _ = zk.delete(&parent, None).await;

    let (create, list, delete, cycle) = (sorted(create), sorted(list), sorted(delete), sorted(cycle));
    let (pipelined, pipelined_delete, exists) = (sorted(pipelined), sorted(pipelined_delete), sorted(exists));
    report.rate("cycle_per_s", n, cycles_elapsed);
    report.us("cycle_p50_us", pct(&cycle, 0.50));
    report.us("cycle_p99_us", pct(&cycle, 0.99));
    report.us("create_eph_seq_p50_us", pct(&create, 0.50));
    report.us("create_eph_seq_p99_us", pct(&create, 0.99));
    report.us("get_children_p50_us", pct(&list, 0.50));
    report.us("get_children_p99_us", pct(&list, 0.99));
    report.us("delete_p50_us", pct(&delete, 0.50));
    report.us("delete_p99_us", pct(&delete, 0.99));
    // Means, to compare with the many-waiters hand-off time (a mean, tail included).
    report.us("create_eph_seq_mean_us", mean(&create));
    report.us("get_children_mean_us", mean(&list));
    report.us("delete_mean_us", mean(&delete));
    report.us("create_list_pipelined_p50_us", pct(&pipelined, 0.50));
    report.us("create_list_pipelined_p99_us", pct(&pipelined, 0.99));
    // Listing replies that came with the create's reply (same read) rather than a round trip later.
    let same_batch = list_after_create.iter().filter(|d| **d < Duration::from_micros(50)).count();
    report.metric("pipelined_list_with_create_pct", format_args!("{:.1}", 100.0 * same_batch as f64 / n.max(1) as f64));
    report.us("pipelined_list_after_create_p50_us", pct(&sorted(list_after_create), 0.50));
    report.us("delete_after_pipelined_p50_us", pct(&pipelined_delete, 0.50));
    report.metric("pipelined_listing_missed_node", missed);
    report.rate("exists_per_s", n, exists_elapsed);
    report.us("exists_p50_us", pct(&exists, 0.50));
    report.us("exists_p99_us", pct(&exists, 0.99));
    Ok(())
}

/// One pipelined create + list: the created path, whether the listing contained it, the time until
/// the listing arrived, and how much later than the create's reply it arrived.
struct Pipelined {
    path: String,
    seen: bool,
    elapsed: Duration,
    list_after_create: Duration,
}

/// Sends a create of `prefix` (ephemeral-sequential) and a listing of `parent` back to back (both
/// are queued on the session when called), then awaits both.
async fn pipelined_create_list(
    zk: &zk::Client,
    prefix: &str,
    parent: &str,
    data: &[u8],
    options: &zk::CreateOptions<'_>,
) -> BenchResult<Pipelined> {
    let t0 = Instant::now();
    let created = zk.create(prefix, data, options);
    let listed = zk.list_children(parent);
    let (_, seq) = created.await?;
    let t1 = Instant::now();
    let children = listed.await?;
    let t2 = Instant::now();
    let path = format!("{prefix}{seq}");
    let seen = children.iter().any(|c| path.ends_with(c.as_str()));
    Ok(Pipelined { path, seen, elapsed: t2 - t0, list_after_create: t2 - t1 })
}

// ----------------------------------------------------------------------------------------------
// mutex-uncontended

/// One acquire + release cycle of `mutex`: Curator-style `acquire()`/`release()`, or with `guards`
/// `lock()` and the guard's release. Returns the two durations.
async fn uncontended_cycle(mutex: &InterProcessMutex, guards: bool) -> BenchResult<(Duration, Duration)> {
    let t0 = Instant::now();
    if guards {
        let guard = mutex.lock().await?;
        let t1 = Instant::now();
        guard.release().await?;
        Ok((t1 - t0, t1.elapsed()))
    } else {
        mutex.acquire().await?;
        let t1 = Instant::now();
        mutex.release().await?;
        Ok((t1 - t0, t1.elapsed()))
    }
}

async fn mutex_uncontended(report: &Report, connect: &str, n: usize, guards: bool) -> BenchResult<()> {
    let client = connect_client(connect, BENCH_SESSION_TIMEOUT).await?;
    let base = unique_path("uncontended");
    let mutex = InterProcessMutex::new(&client, &format!("{base}/lock"))?;
    // The floor, on the same session, interleaved with the mutex cycles: the pipelined create +
    // list and the delete the mutex does, without the library, in a sibling directory.
    let zk = zk_curator::raw::client(&client)?;
    let floor_parent = format!("{base}/floor");
    zk.mkdir(&floor_parent, &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())).await?;
    let floor_prefix = format!("{floor_parent}/_c_00000000-0000-0000-0000-000000000000-lock-");
    let floor_options = zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
    let data = client.default_data().to_vec();
    for _ in 0..WARMUP.min(n) {
        uncontended_cycle(&mutex, guards).await?;
        let p = pipelined_create_list(&zk, &floor_prefix, &floor_parent, &data, &floor_options).await?;
        zk.delete(&p.path, None).await?;
    }
    let (mut acquire, mut release) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let (mut floor_create_list, mut floor_delete) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for _ in 0..n {
        let (acquired, released) = uncontended_cycle(&mutex, guards).await?;
        acquire.push(acquired);
        release.push(released);

        let p = pipelined_create_list(&zk, &floor_prefix, &floor_parent, &data, &floor_options).await?;
        floor_create_list.push(p.elapsed);
        let t0 = Instant::now();
        zk.delete(&p.path, None).await?;
        floor_delete.push(t0.elapsed());
    }
    // Rate of the mutex cycles alone (the floor cycles between them are not counted).
    let elapsed: Duration = acquire.iter().chain(&release).sum();
    let _ = zk.delete(&floor_parent, None).await;
    client.close().await;
    let (acquire, release) = (sorted(acquire), sorted(release));
    let (floor_create_list, floor_delete) = (sorted(floor_create_list), sorted(floor_delete));
    report.rate("ops_per_s", n, elapsed);
    report.us("acquire_p50_us", pct(&acquire, 0.50));
    report.us("acquire_p99_us", pct(&acquire, 0.99));
    report.us("release_p50_us", pct(&release, 0.50));
    report.us("release_p99_us", pct(&release, 0.99));
    report.metric("n", n);
    report.metric("guards", u8::from(guards));
    report.us("floor_create_list_p50_us", pct(&floor_create_list, 0.50));
    report.us("floor_create_list_p99_us", pct(&floor_create_list, 0.99));
    report.us("floor_delete_p50_us", pct(&floor_delete, 0.50));
    report.us("floor_delete_p99_us", pct(&floor_delete, 0.99));
    let ratio = |a: Duration, b: Duration| if b.is_zero() { 0.0 } else { a.as_secs_f64() / b.as_secs_f64() };
    report.metric(
        "acquire_vs_floor_p50",
        format_args!("{:.2}", ratio(pct(&acquire, 0.50), pct(&floor_create_list, 0.50))),
    );
    report.metric("release_vs_floor_p50", format_args!("{:.2}", ratio(pct(&release, 0.50), pct(&floor_delete, 0.50))));
    Ok(())
}

// ----------------------------------------------------------------------------------------------
// mutex-contended

/// In-process witness of mutual exclusion: a flag that must be clear on entry, and a counter
/// updated with a load / yield / store that loses updates if two holders overlap.
#[derive(Default)]
struct Witness {
    inside: AtomicBool,
    counter: AtomicU64,
    violations: AtomicU64,
}

impl Witness {
    async fn critical_section(&self) {
        if self.inside.swap(true, Ordering::SeqCst) {
            self.violations.fetch_add(1, Ordering::SeqCst);
        }
        let v = self.counter.load(Ordering::SeqCst);
        tokio::task::yield_now().await;
        self.counter.store(v + 1, Ordering::SeqCst);
        self.inside.store(false, Ordering::SeqCst);
    }
}

async fn mutex_contended(report: &Report, connect: &str, clients: usize, n: usize) -> BenchResult<()> {
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
// rwlock-readers

async fn rwlock_readers(report: &Report, connect: &str, clients: usize, n: usize, hold: Duration) -> BenchResult<()> {
    let path = unique_path("rwlock-readers");
    let sessions = connect_clients(connect, clients).await?;
    let mut readers = Vec::with_capacity(clients);
    for client in &sessions {
        readers.push(InterProcessReadWriteLock::new(client, &path)?.read_lock().clone());
    }
    let turns = take_turns(&sessions, readers, n, hold, usize::MAX, take_read, give_back_read).await;
    let turns = turns.map_err(|e| format!("a reader failed: {e}"))?;
    report.rate("ops_per_s", turns.acquire.len(), turns.elapsed);
    report.us("acquire_p50_us", pct(&turns.acquire, 0.50));
    report.us("acquire_p99_us", pct(&turns.acquire, 0.99));
    report.metric("max_concurrent_readers", turns.most_inside);
    report.metric("clients", clients);
    report.metric("n", n);
    report.metric("hold_ms", hold.as_millis());
    Ok(())
}

fn take_read(read: &ReadLock) -> BoxedResult<'_, ()> {
    Box::pin(read.acquire())
}

fn give_back_read(read: &ReadLock, (): ()) -> BoxedResult<'_, ()> {
    Box::pin(read.release())
}

// ----------------------------------------------------------------------------------------------
// semaphore

async fn semaphore(
    report: &Report,
    connect: &str,
    leases: usize,
    clients: usize,
    n: usize,
    hold: Duration,
) -> BenchResult<()> {
    let path = unique_path("semaphore");
    let sessions = connect_clients(connect, clients).await?;
    let mut semaphores = Vec::with_capacity(clients);
    for client in &sessions {
        semaphores.push(InterProcessSemaphoreV2::new(client, &path, leases)?);
    }
    let turns = take_turns(&sessions, semaphores, n, hold, leases, take_lease, give_back_lease).await;
    let turns = turns.map_err(|e| format!("a lease holder failed: {e}"))?;
    report.rate("ops_per_s", turns.acquire.len(), turns.elapsed);
    report.us("acquire_p50_us", pct(&turns.acquire, 0.50));
    report.us("acquire_p99_us", pct(&turns.acquire, 0.99));
    report.metric("max_concurrent_holders", turns.most_inside);
    report.metric("over_limit_violations", turns.over_limit);
    report.metric("leases", leases);
    report.metric("clients", clients);
    report.metric("n", n);
    report.metric("hold_ms", hold.as_millis());
    Ok(())
}

fn take_lease(semaphore: &InterProcessSemaphoreV2) -> BoxedResult<'_, Lease> {
    Box::pin(semaphore.acquire())
}

fn give_back_lease(_: &InterProcessSemaphoreV2, lease: Lease) -> BoxedResult<'_, ()> {
    Box::pin(lease.release())
}

// ----------------------------------------------------------------------------------------------
// shared holders: several sessions take turns on something more than one may hold

type BoxedResult<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = Result<T, Error>> + Send + 'a>>;

async fn connect_clients(connect: &str, clients: usize) -> BenchResult<Vec<CuratorClient>> {
    if clients == 0 {
        return Err("at least one client is needed".into());
    }
    futures::future::try_join_all((0..clients).map(|_| connect_client(connect, BENCH_SESSION_TIMEOUT))).await
}

/// What [`take_turns`] measured.
struct Turns {
    /// Acquire latencies, sorted.
    acquire: Vec<Duration>,
    elapsed: Duration,
    /// The most holders inside at once, by a counter that does not trust the library.
    most_inside: usize,
    /// How often more than the limit were inside.
    over_limit: usize,
}

/// Each of `holders` (one per session) is warmed up, then they take `n` turns in total from one
/// start line: take, hold for `hold`, give back. The sessions are closed at the end.
async fn take_turns<H: Send + Sync + 'static, T: Send + 'static>(
    sessions: &[CuratorClient],
    holders: Vec<H>,
    n: usize,
    hold: Duration,
    limit: usize,
    take: for<'a> fn(&'a H) -> BoxedResult<'a, T>,
    give_back: for<'a> fn(&'a H, T) -> BoxedResult<'a, ()>,
) -> Result<Turns, String> {
    let warm_up = async {
        for holder in &holders {
            give_back(holder, take(holder).await?).await?;
        }
        for _ in 0..WARMUP.min(n) {
            give_back(&holders[0], take(&holders[0]).await?).await?;
        }
        Ok::<_, Error>(())
    };
    warm_up.await.map_err(|e| format!("warming up: {e}"))?;
    let tickets = Arc::new(AtomicUsize::new(n));
    let inside = Arc::new(AtomicUsize::new(0));
    let most_inside = Arc::new(AtomicUsize::new(0));
    let over_limit = Arc::new(AtomicUsize::new(0));
    let start_line = Arc::new(tokio::sync::Barrier::new(holders.len() + 1));
    let mut tasks = Vec::with_capacity(holders.len());
    for holder in holders {
        let (tickets, inside, most_inside, over_limit, start_line) =
            (tickets.clone(), inside.clone(), most_inside.clone(), over_limit.clone(), start_line.clone());
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            start_line.wait().await;
            while tickets.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |t| t.checked_sub(1)).is_ok() {
                let t0 = Instant::now();
                let taken = take(&holder).await?;
                latencies.push(t0.elapsed());
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                most_inside.fetch_max(now, Ordering::SeqCst);
                if now > limit {
                    over_limit.fetch_add(1, Ordering::SeqCst);
                }
                if !hold.is_zero() {
                    tokio::time::sleep(hold).await;
                }
                inside.fetch_sub(1, Ordering::SeqCst);
                give_back(&holder, taken).await?;
            }
            Ok::<_, Error>(latencies)
        }));
    }
    start_line.wait().await;
    let started = Instant::now();
    let collected = collect_latencies(tasks).await;
    let elapsed = started.elapsed();
    for client in sessions {
        client.close().await;
    }
    let (acquire, _) = collected?;
    Ok(Turns {
        acquire,
        elapsed,
        most_inside: most_inside.load(Ordering::SeqCst),
        over_limit: over_limit.load(Ordering::SeqCst),
    })
}

// ----------------------------------------------------------------------------------------------
// mutex-many-waiters

async fn mutex_many_waiters(report: &Report, connect: &str, waiters: usize, sessions: usize) -> BenchResult<()> {
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
// guard-style waiters: shared helpers

/// Awaits `fut`, counting its first poll in `polled`: after it the task has joined the lock's
/// queue (the local queue, or the create of its own node has been sent). The future comes boxed:
/// an argument of an async fn is kept in its state next to the pinned copy, which would count the
/// lock future twice in every task's memory.
async fn counting_first_poll<F: std::future::Future>(
    mut fut: std::pin::Pin<Box<F>>,
    polled: &AtomicUsize,
) -> F::Output {
    let mut first = true;
    std::future::poll_fn(|cx| {
        let out = fut.as_mut().poll(cx);
        if first {
            first = false;
            polled.fetch_add(1, Ordering::SeqCst);
        }
        out
    })
    .await
}

/// Session index of a holder outside the measured sessions (the blocking holder).
const OUTSIDE: usize = usize::MAX;

/// Times hand-offs between holders and checks fencing tokens, trusting the lock (the [`Witness`]
/// checks that trust): the holder that releases notes who it is and when it asked to release,
/// the next holder reads that when it is granted.
#[derive(Default)]
struct HandoffClock {
    last: std::sync::Mutex<Option<(usize, Instant)>>,
    token: std::sync::Mutex<Option<FencingToken>>,
    token_violations: AtomicU64,
}

impl HandoffClock {
    /// Called by a holder just granted: the time since the previous holder's release call, and
    /// whether that holder was on the same session.
    fn granted(&self, session: usize, at: Instant) -> Option<(Duration, bool)> {
        let last = self.last.lock().unwrap_or_else(|e| e.into_inner()).take();
        last.map(|(s, released)| (at.saturating_duration_since(released), s == session))
    }

    /// Called by a holder just before it releases.
    fn releasing(&self, session: usize) {
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Some((session, Instant::now()));
    }

    /// Checks that `token` is larger than every token seen before; counts and reports it if not.
    fn check_token(&self, token: FencingToken) {
        let mut last = self.token.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(previous) = *last {
            if token <= previous && self.token_violations.fetch_add(1, Ordering::SeqCst) < 10 {
                eprintln!("lock_bench: FENCING TOKEN DID NOT INCREASE: {previous:?} then {token:?}");
            }
        }
        *last = Some(token);
    }
}

/// What one guard-style waiter measured.
#[derive(Default)]
struct GuardSample {
    /// Release call of the previous holder to our grant, and whether that holder was on our session.
    handoff: Option<(Duration, bool)>,
    /// How long `fencing_token()` took, when asked.
    token_call: Option<Duration>,
}

/// How many lock nodes W guard waiters on S sessions create while queued behind another holder:
/// one per session (the local queue), or one per waiter with `node_per_task`.
fn guard_nodes_expected(waiters: usize, sessions: usize, node_per_task: bool) -> usize {
    if node_per_task {
        waiters
    } else {
        sessions.min(waiters)
    }
}

/// A mutex for one task: sharing the client's local queue, or with a node of its own.
fn task_mutex(client: &CuratorClient, path: &str, node_per_task: bool) -> BenchResult<InterProcessMutex> {
    let mutex = InterProcessMutex::new(client, path)?;
    Ok(if node_per_task { mutex.with_node_per_task() } else { mutex })
}

/// How the tasks of `mutex-many-waiters --guards` take the lock.
#[derive(Clone, Copy)]
struct GuardStyle {
    /// Every holder asks for its fencing token.
    token: bool,
    /// A node per task (`with_node_per_task`).
    node_per_task: bool,
    /// Clones of one `InterProcessMutex` per session instead of one instance per task.
    one_instance: bool,
}

/// How contending tasks take the lock.
#[derive(Clone, Copy)]
struct Style {
    /// Guard-style `lock()` instead of Curator-style `acquire()`.
    guards: bool,
    /// A node per task (`with_node_per_task`).
    node_per_task: bool,
}

// ----------------------------------------------------------------------------------------------
// mutex-many-waiters --guards

async fn mutex_many_guards(
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

// ----------------------------------------------------------------------------------------------
// mutex-contended --tasks T [--guards]

async fn mutex_contended_tasks(
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

// ----------------------------------------------------------------------------------------------
// mutex-mixed-curator

/// Parameters of [`mutex_mixed_curator`].
struct Mixed {
    waiters: usize,
    hold: Duration,
    curator_hold_s: u64,
    curator_delay: Duration,
    curator: String,
    node_per_task: bool,
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

async fn mutex_mixed_curator(report: &Report, connect: &str, mixed: &Mixed) -> BenchResult<()> {
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

// ----------------------------------------------------------------------------------------------
// hold

fn env_parse<T: std::str::FromStr>(name: &str) -> BenchResult<Option<T>> {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => {
            v.trim().parse().map(Some).map_err(|_| format!("{name}={v:?} is not a valid value").into())
        }
        _ => Ok(None),
    }
}

fn state_word(state: HoldState) -> &'static str {
    match state {
        HoldState::Held => "HELD",
        HoldState::Suspended => "SUSPENDED",
        HoldState::Lost => "LOST",
        _ => "UNKNOWN",
    }
}

async fn hold(connect: &str, path: &str, seconds: f64, kind: &str) -> BenchResult<()> {
    let session_timeout = Duration::from_millis(env_parse::<u64>("SESSION_TIMEOUT_MS")?.unwrap_or(15_000));
    let acquire_timeout = match env_parse::<f64>("ACQUIRE_TIMEOUT_S")? {
        Some(t) => Some(Duration::try_from_secs_f64(t.max(0.0)).map_err(|e| format!("bad ACQUIRE_TIMEOUT_S: {e}"))?),
        None => None,
    };
    let guarded_path = std::env::var("GUARDED_WRITE_PATH").ok().filter(|p| !p.is_empty());
    let hold_for = Duration::try_from_secs_f64(seconds.max(0.0)).map_err(|e| format!("bad SECONDS: {e}"))?;

    let client = connect_client(connect, session_timeout).await?;
    let held = hold_kind(&client, path, kind, acquire_timeout, hold_for, &guarded_path).await;
    client.close().await;
    held
}

async fn hold_kind(
    client: &CuratorClient,
    path: &str,
    kind: &str,
    acquire_timeout: Option<Duration>,
    hold_for: Duration,
    guarded_path: &Option<String>,
) -> BenchResult<()> {
    if let Some((Election::Selector, id)) = leader_kind(kind)? {
        return hold_selector(client, path, id, acquire_timeout, hold_for, guarded_path).await;
    }
    if let Some((Election::Latch, id)) = leader_kind(kind)? {
        let latch = LeaderLatch::new(client, path, id)?;
        latch.start()?;
        let leadership = lead(&latch, acquire_timeout).await;
        return match leadership {
            Ok(Some(hold)) => hold_for_a_while(Some(Leadership { latch, hold }), hold_for, guarded_path).await,
            not_leading => {
                // Timed out (NOT_ACQUIRED) or failed: leave the line first.
                if let Err(e) = latch.close().await {
                    eprintln!("lock_bench: closing the latch: {e}");
                }
                not_leading?;
                hold_for_a_while(None::<Leadership>, hold_for, guarded_path).await
            }
        };
    }
    if let Some(leases) = semaphore_leases(kind)? {
        let semaphore = InterProcessSemaphoreV2::new(client, path, leases)?;
        let lease = match acquire_timeout {
            Some(t) => semaphore.acquire_timeout(t).await?,
            None => Some(semaphore.acquire().await?),
        };
        return hold_for_a_while(lease, hold_for, guarded_path).await;
    }
    let rw = InterProcessReadWriteLock::new(client, path)?;
    let mutex = InterProcessMutex::new(client, path)?;
    match (kind, acquire_timeout) {
        ("read", Some(t)) => hold_for_a_while(rw.read_lock().try_lock_for(t).await?, hold_for, guarded_path).await,
        ("read", None) => hold_for_a_while(Some(rw.read_lock().lock().await?), hold_for, guarded_path).await,
        ("write", Some(t)) => hold_for_a_while(rw.write_lock().try_lock_for(t).await?, hold_for, guarded_path).await,
        ("write", None) => hold_for_a_while(Some(rw.write_lock().lock().await?), hold_for, guarded_path).await,
        ("mutex", Some(t)) => hold_for_a_while(mutex.try_lock_for(t).await?, hold_for, guarded_path).await,
        ("mutex", None) => hold_for_a_while(Some(mutex.lock().await?), hold_for, guarded_path).await,
        (other, _) => Err(format!("unknown KIND {other} (mutex, read, write, sem:L or semmutex)").into()),
    }
}

/// The lease count of a semaphore KIND (`sem:L`, or `semmutex`: a semaphore mutex is a one-lease
/// semaphore on the wire, as in Curator); None for the lock kinds.
fn semaphore_leases(kind: &str) -> Result<Option<usize>, String> {
    if kind == "semmutex" {
        return Ok(Some(1));
    }
    match kind.strip_prefix("sem:") {
        Some(l) => match l.parse::<usize>() {
            Ok(leases) if leases >= 1 => Ok(Some(leases)),
            _ => Err(format!("bad KIND {kind}: the lease count must be a whole number >= 1")),
        },
        None => Ok(None),
    }
}

/// The two leader election recipes `hold` takes part in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Election {
    Latch,
    Selector,
}

/// The election and participant id of a leader KIND (`latch:ID`, `selector:ID`, or without `:ID`:
/// `rust-<pid>`); None for the lock kinds.
fn leader_kind(kind: &str) -> Result<Option<(Election, String)>, String> {
    let (name, id) = kind.split_once(':').map_or((kind, None), |(n, id)| (n, Some(id)));
    let election = match name {
        "latch" => Election::Latch,
        "selector" => Election::Selector,
        _ => return Ok(None),
    };
    match id {
        None => Ok(Some((election, format!("rust-{}", std::process::id())))),
        Some("") => Err(format!("bad KIND {kind}: the participant id is empty")),
        Some(id) => Ok(Some((election, id.to_string()))),
    }
}

/// `hold` as a `LeaderSelector` participant: the leadership work hands its [`SelectorLeadership`]
/// over and runs until told to return (SECONDS over) or the leadership is lost.
async fn hold_selector(
    client: &CuratorClient,
    path: &str,
    id: String,
    acquire_timeout: Option<Duration>,
    hold_for: Duration,
    guarded_path: &Option<String>,
) -> BenchResult<()> {
    let (leading_tx, mut leading) = tokio::sync::mpsc::unbounded_channel::<SelectorLeadership>();
    let (done, done_rx) = tokio::sync::watch::channel(false);
    let selector = LeaderSelector::new(client, path, id, move |leadership: SelectorLeadership| {
        let (leading_tx, mut done) = (leading_tx.clone(), done_rx.clone());
        async move {
            let _ = leading_tx.send(leadership.clone());
            tokio::select! {
                _ = done.wait_for(|d| *d) => {}
                _ = leadership.lost() => {}
            }
        }
    })?;
    selector.start()?;
    let term = match acquire_timeout {
        Some(t) => tokio::time::timeout(t, leading.recv()).await.ok().flatten(),
        None => leading.recv().await,
    };
    match term {
        Some(leadership) => {
            let hold = leadership.hold().clone();
            hold_for_a_while(Some(SelectorTerm { selector, done, hold }), hold_for, guarded_path).await
        }
        None => {
            if let Err(e) = selector.close().await {
                eprintln!("lock_bench: closing the selector: {e}");
            }
            hold_for_a_while(None::<SelectorTerm>, hold_for, guarded_path).await
        }
    }
}

/// A selector while its leadership work runs: releasing it lets the work return, then closes the
/// selector.
struct SelectorTerm {
    selector: LeaderSelector,
    done: tokio::sync::watch::Sender<bool>,
    hold: Arc<Hold>,
}

impl Held for SelectorTerm {
    fn hold(&self) -> &Arc<Hold> {
        &self.hold
    }
    async fn release(self) -> zk_curator::Result<()> {
        self.done.send_replace(true);
        self.selector.close().await
    }
}

/// Waits (at most `timeout`) until the started `latch` leads; the hold of that leadership.
async fn lead(latch: &LeaderLatch, timeout: Option<Duration>) -> zk_curator::Result<Option<Arc<Hold>>> {
    let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
    loop {
        let leading = match deadline {
            Some(d) => latch.await_leadership_timeout(d.saturating_duration_since(tokio::time::Instant::now())).await?,
            None => {
                latch.await_leadership().await?;
                true
            }
        };
        if !leading {
            return Ok(None);
        }
        // Leadership may already be gone again (then the latch has queued again): wait on.
        if let Some(hold) = latch.hold().filter(|h| h.hold_state() == HoldState::Held) {
            return Ok(Some(hold));
        }
    }
}

/// A leader latch while it leads: the hold is the leadership, releasing it closes the latch.
struct Leadership {
    latch: LeaderLatch,
    hold: Arc<Hold>,
}

impl Held for Leadership {
    fn hold(&self) -> &Arc<Hold> {
        &self.hold
    }
    async fn release(self) -> zk_curator::Result<()> {
        self.latch.close().await
    }
}

/// What `hold` holds: a lock guard, a semaphore lease or a latch's leadership.
trait Held {
    fn hold(&self) -> &Arc<Hold>;
    fn release(self) -> impl std::future::Future<Output = zk_curator::Result<()>> + Send;
}

impl<D: LockDriver> Held for MutexGuard<D> {
    fn hold(&self) -> &Arc<Hold> {
        MutexGuard::hold(self)
    }
    fn release(self) -> impl std::future::Future<Output = zk_curator::Result<()>> + Send {
        MutexGuard::release(self)
    }
}

impl Held for Lease {
    fn hold(&self) -> &Arc<Hold> {
        Lease::hold(self)
    }
    fn release(self) -> impl std::future::Future<Output = zk_curator::Result<()>> + Send {
        Lease::release(self)
    }
}

/// Prints what a holder sees (`ACQUIRED`, `TOKEN`, state changes, `RELEASED`) or `NOT_ACQUIRED`.
async fn hold_for_a_while(
    held: Option<impl Held>,
    hold_for: Duration,
    guarded_path: &Option<String>,
) -> BenchResult<()> {
    let Some(held) = held else {
        say("NOT_ACQUIRED");
        return Ok(());
    };
    let hold = held.hold().clone();
    say(format_args!("ACQUIRED {}", hold.path()));
    say(format_args!("TOKEN {}", hold.fencing_token()));

    let mut states = hold.watch_state();
    let mut last = HoldState::Held;
    let end = tokio::time::Instant::now() + hold_for;
    loop {
        let now = *states.borrow_and_update();
        if now != last {
            say(state_word(now));
            last = now;
        }
        if now == HoldState::Lost {
            break;
        }
        tokio::select! {
            _ = tokio::time::sleep_until(end) => break,
            changed = states.changed() => if changed.is_err() { break },
        }
    }

    if let Some(p) = &guarded_path {
        say(guarded_write(&hold, p).await);
    }
    // A lost hold has nothing left to delete; a disconnected one leaves the delete queued.
    match tokio::time::timeout(Duration::from_secs(5), held.release()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => eprintln!("lock_bench: release: {e} (the delete goes on in the background)"),
        Err(_) => eprintln!("lock_bench: release still pending after 5 s (the delete goes on in the background)"),
    }
    say("RELEASED");
    Ok(())
}

/// A set-data of `path` guarded by our lock node, or a create if `path` does not exist yet.
async fn guarded_write(hold: &Hold, path: &str) -> &'static str {
    let data = format!("token={}", hold.fencing_token()).into_bytes();
    let attempt = async {
        let set = GuardedWrite::new().set_data(path, &data, None);
        match hold.guarded_write(set).await {
            Err(e) if e.code() == Some(zk_curator::ErrorCode::NoNode) => {
                let create = GuardedWrite::new().create(path, &data, zk_curator::CreateMode::Persistent);
                hold.guarded_write(create).await
            }
            other => other,
        }
    };
    match tokio::time::timeout(Duration::from_secs(20), attempt).await {
        Ok(Ok(_)) => "GUARDED_WRITE_ACCEPTED",
        Ok(Err(e)) => {
            eprintln!("lock_bench: guarded write of {path} not applied: {e}");
            "GUARDED_WRITE_REJECTED"
        }
        Err(_) => {
            eprintln!("lock_bench: guarded write of {path} timed out (outcome unknown)");
            "GUARDED_WRITE_REJECTED"
        }
    }
}
