//! Lock benchmark and hold tool for zk-curator (a benchmark target, `harness = false`; not part of the
//! published crate).
//!
//! ```text
//! cargo bench --bench lock_bench -- CONNECT MODE ARGS
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
//!   barrier C [one-path]           C sessions enter + leave a DistributedDoubleBarrier(C), 20 rounds
//!   simple-queue N                 one session: N offers to a SimpleDistributedQueue, then N polls
//!   simple-queue-depth N           N items waiting (untimed fill), then drained with take: time per
//!                                  take by quarter of the drain, peak RSS
//!   counter C N                    C sessions increment one DistributedAtomicLong until N succeeded
//!   cache-load N                   N children (100 B) under a fresh parent, then a CuratorCache of it:
//!                                  start -> initialized, nodes, peak RSS, bytes per cached node
//!   discovery N                    curator-x-discovery's measure: N instances registered (register_all,
//!                                  and one by one), a ServiceCache's load, 1,000,000 provider picks,
//!                                  200 x register -> seen in the other session's cache
//!   cache-events N                 CuratorCache on one node; another session sets it WARMUP + N times (CHILDREN=1: creates children),
//!                                  each time waiting for the event: set -> event p50/p99, missed,
//!                                  and a bare set_data round trip for comparison
//!   many-paths K C N [--guards] [--nonfair] [--floor]
//!                                  one session, C tasks, N acquisitions over K lock paths (task t's
//!                                  i-th: path (t + i*C) mod K); --nonfair: the non-fair mutex;
//!                                  --floor: pipelined create + list + delete on K parents instead
//!   nonfair-contended C N [--hold-us H]
//!                                  C sessions on one lock, fair then non-fair: rate, worst wait
//!   pnode-reregister N             N session replacements: a PersistentNode back on the new session,
//!                                  next to the floor (one create on it)
//!   idempotency N C                C tasks on one session: N idempotency keys begun + completed, and the raw floor
//!   claims P B M                   P sessions drain M items with WorkClaims (batch B) vs a bare floor
//!   queue N P C                    DistributedQueue: P sessions put N items, C sessions consume them:
//!                                  put/s, end-to-end items/s, put -> consume p50/p99, duplicates, missing
//!   queue-locked N P C             the same with a lock path (removed once acknowledged)
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
//! The guard modes (the local queue): `--guards` uses `lock()` and the guard's release,
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

//!
//! `hold` overlaps `zk-curator hold`, and stays: it also leads a `LeaderLatch` or `LeaderSelector`
//! (`latch:ID`, `selector:ID`; the CLI's `hold` takes locks only), does a guarded write after the
//! hold (`GUARDED_WRITE_PATH`), and takes the same positional command line as the Curator side's
//! `hold` mode, so that failover and interop runs (docs/performance.md) start either side alike.
//!
//! `cargo bench --bench lock_bench --no-run` builds it and prints the path of the executable, for
//! scripts that start it themselves; the modes are files of this directory.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use zk_curator::testing::TestingServer;
use zk_curator::CuratorClient;

use barrier::barrier;
use cache_events::cache_events;
use cache_load::cache_load;
use claims::claims;
use counter::counter;
use discovery::discovery;
use guards::{GuardStyle, Style};
use hold::{hold, leader_kind, semaphore_leases};
use idempotency::idempotency;
use many_paths::{many_paths, many_paths_floor, nonfair_contended, PathsStyle};
use mutex_contended::{mutex_contended, mutex_contended_tasks};
use mutex_many_waiters::{mutex_many_guards, mutex_many_waiters};
use mutex_mixed_curator::{mutex_mixed_curator, Mixed};
use mutex_uncontended::mutex_uncontended;
use pnode_reregister::pnode_reregister;
use raw::raw;
use report::Report;
use rwlock_readers::rwlock_readers;
use semaphore::semaphore;
use simple_queue::{simple_queue, simple_queue_depth};

mod barrier;
mod cache_events;
mod cache_load;
mod claims;
mod counter;
mod discovery;
mod guards;
mod hold;
mod idempotency;
mod many_paths;
mod mutex_contended;
mod mutex_many_waiters;
mod mutex_mixed_curator;
mod mutex_uncontended;
mod pnode_reregister;
mod queue;
mod raw;
mod report;
mod rwlock_readers;
mod semaphore;
mod simple_queue;
mod turns;
mod witness;

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
    /// P sessions drain M work items with WorkClaims (batch B), against a floor of bare requests.
    Claims { p: usize, b: usize, m: usize },
    /// C sessions increment one DistributedAtomicLong (RetryNTimes(1000, 1 ms)) until N succeeded.
    Counter { clients: usize, n: usize },
    /// N children of 100 B under a fresh parent, then a CuratorCache of it: start -> initialized.
    CacheLoad { n: usize },
    /// A CuratorCache on one node; a second session sets its data WARMUP + N times (env WARMUP,
    /// default 200), each time waiting <= 5 s for the event carrying it.
    CacheEvents { n: usize },
    /// curator-x-discovery: N instances registered, a ServiceCache's load, 1,000,000 round-robin
    /// picks, 200 x register -> seen in the other session's cache.
    Discovery { n: usize },
    /// One session, C tasks, N acquisitions over K lock paths (task t's i-th: path (t + i*C) mod K).
    ManyPaths {
        k: usize,
        c: usize,
        n: usize,
        /// Guard-style `lock()` instead of Curator-style `acquire()`.
        #[arg(long)]
        guards: bool,
        /// The non-fair mutex instead of the fair one.
        #[arg(long)]
        nonfair: bool,
        /// The raw floor instead: pipelined create + list + delete cycles on K distinct parents.
        #[arg(long, conflicts_with_all = ["guards", "nonfair"])]
        floor: bool,
    },
    /// C sessions, one task each, N acquisitions each of one lock: fair, then non-fair (worst wait).
    NonfairContended {
        c: usize,
        n: usize,
        /// How long each holder holds, in µs.
        #[arg(long, default_value_t = 0)]
        hold_us: u64,
    },
    /// C sessions enter and leave a DistributedDoubleBarrier(C): 20 timed rounds after an untimed
    /// one, a fresh path per round (`one-path`: every round on one path).
    Barrier { clients: usize, one_path: Option<String> },
    /// N session replacements: a PersistentNode back on the new session, next to one create on it.
    PnodeReregister { n: usize },
    /// One session: N offers to a SimpleDistributedQueue, then N polls (10 s each).
    SimpleQueue { n: usize },
    /// N items waiting in a SimpleDistributedQueue (untimed fill), then drained with take.
    SimpleQueueDepth { n: usize },
    /// C tasks on one session begin + complete N fresh idempotency keys; then the same requests bare.
    Idempotency { n: usize, concurrency: usize },
    /// P sessions put N byte items in total into a DistributedQueue, C sessions consume them.
    Queue { n: usize, p: usize, c: usize },
    /// `queue` with a lock path (guaranteed delivery: removed once acknowledged).
    QueueLocked { n: usize, p: usize, c: usize },
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
            Mode::Counter { .. } => "counter",
            Mode::CacheLoad { .. } => "cache_load",
            Mode::CacheEvents { .. } => "cache_events",
            Mode::Discovery { .. } => "discovery",
            Mode::ManyPaths { floor: false, .. } => "many_paths",
            Mode::ManyPaths { floor: true, .. } => "many_paths_floor",
            Mode::NonfairContended { .. } => "nonfair_contended",
            Mode::Barrier { .. } => "barrier",
            Mode::PnodeReregister { .. } => "pnode_reregister",
            Mode::SimpleQueue { .. } => "simple_queue",
            Mode::SimpleQueueDepth { .. } => "simple_queue_depth",
            Mode::Idempotency { .. } => "idempotency",
            Mode::Claims { .. } => "claims",
            Mode::Queue { .. } => "queue",
            Mode::QueueLocked { .. } => "queue_locked",
            Mode::Hold { .. } => "hold",
        }
    }
}

/// A lock path no other run uses.
fn unique_path(what: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
    format!("/zk-curator-bench/{what}-{}-{nanos}", std::process::id())
}

/// `forceSync` of a started local server, from its `zoo.cfg` (ZooKeeper's default is yes).
fn local_force_sync(server: &TestingServer) -> Option<bool> {
    if server.is_external() {
        return None;
    }
    let cfg = std::fs::read_to_string(server.data_dir().join("zoo.cfg")).ok()?;
    let value = cfg.lines().rev().find_map(|l| l.trim().strip_prefix("forceSync="));
    Some(value.is_none_or(|v| !v.trim().eq_ignore_ascii_case("no")))
}

fn main() -> ExitCode {
    // `cargo bench` adds `--bench` to the arguments; `cargo test --benches` (or `--all-targets`)
    // runs this target with no arguments at all: there is nothing to check without CONNECT MODE.
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let benched = args.iter().skip(1).any(|a| a == "--bench");
    args.retain(|a| a != "--bench");
    if args.len() == 1 && !benched {
        eprintln!("lock_bench: no CONNECT MODE given, nothing to run (see --help)");
        return ExitCode::SUCCESS;
    }
    let cli = Cli::parse_from(args);
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
        Mode::Counter { clients, n } => counter(&report, &connect, clients, n).await,
        Mode::CacheLoad { n } => cache_load(&report, &connect, n).await,
        Mode::CacheEvents { n } => cache_events(&report, &connect, n).await,
        Mode::Discovery { n } => discovery(&report, &connect, n).await,
        Mode::ManyPaths { k, c, n, floor: true, .. } => many_paths_floor(&report, &connect, k, c, n).await,
        Mode::ManyPaths { k, c, n, guards, nonfair, floor: false } => {
            many_paths(&report, &connect, k, c, n, PathsStyle { guards, nonfair }).await
        }
        Mode::NonfairContended { c, n, hold_us } => {
            nonfair_contended(&report, &connect, c, n, Duration::from_micros(hold_us)).await
        }
        Mode::Barrier { clients, one_path } => match one_path.as_deref() {
            None => barrier(&report, &connect, clients, false).await,
            Some("one-path") => barrier(&report, &connect, clients, true).await,
            Some(other) => Err(format!("barrier: unknown option {other:?} (only `one-path`)").into()),
        },
        Mode::PnodeReregister { n } => pnode_reregister(&report, &connect, n).await,
        Mode::SimpleQueue { n } => simple_queue(&report, &connect, n).await,
        Mode::SimpleQueueDepth { n } => simple_queue_depth(&report, &connect, n).await,
        Mode::Idempotency { n, concurrency } => idempotency(&report, &connect, n, concurrency).await,
        Mode::Claims { p, b, m } => claims(&report, &connect, p, b, m).await,
        Mode::Queue { n, p, c } => queue::queue(&report, &connect, n, p, c, false).await,
        Mode::QueueLocked { n, p, c } => queue::queue(&report, &connect, n, p, c, true).await,
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

/// `clients` sessions (at least one).
async fn connect_clients(connect: &str, clients: usize) -> BenchResult<Vec<CuratorClient>> {
    if clients == 0 {
        return Err("at least one client is needed".into());
    }
    futures::future::try_join_all((0..clients).map(|_| connect_client(connect, BENCH_SESSION_TIMEOUT))).await
}
