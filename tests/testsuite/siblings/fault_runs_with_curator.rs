//! Short fault runs of the mutex's siblings — the read-write lock and the semaphore — with a real
//! Apache Curator contender (`tests/java/CuratorPeer.java`) in the mix, checked by checkers that
//! trust neither library:
//!
//! * **Read-write lock**: Rust readers and writers (guards, Curator-style acquire, random
//!   cancellation) and a Curator thread doing reads and writes on one path, while a writer's
//!   session is expired by the server (blackholed proxy) — after which it tries a downgrade — and
//!   a holder's connection is cut and restored. Checked: (a) no write hold overlaps any other
//!   hold, Curator's holds included (wall-clock bounds mapped onto this process's clock); (b)
//!   the server proves it: every writer writes the data node with the version it read at the
//!   start of its hold, every reader ends its hold with a versioned check of the data node, each
//!   in one multi with a check of the holder's own lock node — so a write that landed during
//!   another write or a read hold fails with `BadVersion`; (c) no node is left under the lock path.
//! * **Semaphore** (2 leases): Rust holders and a Curator thread take leases in a loop, with
//!   random cancellation, while a waiter's session is expired and a holder's session is expired by
//!   the server. Checked: never more than 2 holders — by markers each holder creates in its own
//!   session while it holds (which trust neither library) and by the hold intervals, Curator's
//!   included; progress (every contender finishes within generous bounds: no stall); no lease or
//!   internal-mutex node left.
//!
//! Each checker is shown to fail on bad histories below; seeds are printed (`SIBLING_SEED=<n>`
//! replays the Rust side).

use crate::support;

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::support::curator_peer::{compiled_peer, CuratorPeer};
use crate::support::exclusion::{check_exclusion, HoldLog, Interval};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::{oneshot, Notify};
use zk_curator::locks::{
    GuardedWrite, Hold, HoldState, InterProcessReadWriteLock, InterProcessSemaphoreV2, Lease, ReadLockGuard,
    WriteLockGuard,
};
use zk_curator::raw as zkc;
use zk_curator::testing::{FaultProxy, Latency, ProxyMode, TestingServer};
use zk_curator::{CuratorClient, Error, ErrorKind, RetryNTimes};

/// Session timeout of the clients whose session a run lets the server expire (tick 200 ms).
const SHORT_SESSION: Duration = Duration::from_secs(2);
/// What a release of a client that went through a fault may answer besides `Ok`.
const FAULT_RELEASE: &[ErrorKind] =
    &[ErrorKind::Retryable, ErrorKind::SessionLost, ErrorKind::DeadlineExceeded, ErrorKind::LockLost];
/// Leases of the semaphore run.
const LEASES: usize = 2;

// =============================================================================================
// The Curator contender's report, on this process's clock
// =============================================================================================

/// Maps wall-clock epoch microseconds (the Java peer's clock: same machine) onto `Instant`s.
#[derive(Clone, Copy, Debug)]
struct Clock {
    instant: Instant,
    epoch_us: i64,
}

impl Clock {
    fn now() -> Self {
        let instant = Instant::now();
        let epoch_us = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock after 1970").as_micros() as i64;
        Clock { instant, epoch_us }
    }

    fn instant_of(&self, epoch_us: i64) -> Instant {
        let delta = epoch_us - self.epoch_us;
        if delta >= 0 {
            self.instant + Duration::from_micros(delta as u64)
        } else {
            self.instant.checked_sub(Duration::from_micros(delta.unsigned_abs())).expect("a time before the clock")
        }
    }
}

/// What a Curator loop (`rwloop`, `semloop`) reported.
#[derive(Debug, Default)]
struct LoopReport {
    holds: usize,
    timeouts: usize,
    max: usize,
    intervals: Vec<Interval>,
    violations: Vec<String>,
}

/// Parses `DONE holds=.. timeouts=.. violations=.. max=.. log=K:TOKEN:START:END;... [violation: ...]*`.
fn parse_loop_report(answer: &str, who: &str, clock: &Clock) -> Result<LoopReport, String> {
    let mut parts = answer.split(" violation: ");
    let head = parts.next().unwrap_or_default();
    let violations: Vec<String> = parts.map(str::to_string).collect();
    let fields = head.strip_prefix("DONE ").ok_or_else(|| format!("not a loop result: {answer}"))?;
    let mut report = LoopReport { violations, ..LoopReport::default() };
    let mut declared_violations = None;
    for field in fields.split(' ') {
        let (key, value) = field.split_once('=').ok_or_else(|| format!("bad field {field:?} in {answer}"))?;
        let number = || value.parse::<usize>().map_err(|e| format!("{key}={value}: {e}"));
        match key {
            "holds" => report.holds = number()?,
            "timeouts" => report.timeouts = number()?,
            "max" => report.max = number()?,
            "violations" => declared_violations = Some(number()?),
            "log" => {
                for hold in value.split(';').filter(|h| !h.is_empty()) {
                    let f: Vec<&str> = hold.split(':').collect();
                    let [kind, token, start, end] = f[..] else { return Err(format!("bad hold {hold:?}")) };
                    let n = |s: &str| s.parse::<i64>().map_err(|e| format!("{hold:?}: {e}"));
                    report.intervals.push(Interval {
                        who: format!("{who}-{kind}"),
                        // Curator's token is the node's czxid: a first holder's token (no local hand-off).
                        token: zk_curator::locks::FencingToken::new(n(token)?, 0).as_u128(),
                        start: clock.instant_of(n(start)?),
                        end: clock.instant_of(n(end)?),
                        lost: false,
                        shared: kind != "W",
                    });
                }
            }
            _ => return Err(format!("unknown field {key} in {answer}")),
        }
    }
    if declared_violations != Some(report.violations.len()) || report.intervals.len() != report.holds {
        return Err(format!("inconsistent loop result: {answer}"));
    }
    Ok(report)
}

impl CuratorPeer {
    async fn rw_loop(&mut self, name: &str, path: &str, rounds: usize, data: &str, hold: Duration, seed: u64) {
        let line = format!("rwloop {name} {path} {rounds} {data} {} {}", hold.as_millis(), seed as i64);
        assert_eq!(self.cmd(&line).await, "SPAWNED");
    }

    async fn sem_loop(&mut self, name: &str, path: &str, rounds: usize, markers: &str, hold: Duration, seed: u64) {
        let line = format!("semloop {name} {path} {LEASES} {rounds} {markers} {} {}", hold.as_millis(), seed as i64);
        assert_eq!(self.cmd(&line).await, "SPAWNED");
    }

    /// Waits (polling, at most `within`) for a loop's result.
    async fn loop_result(&mut self, name: &str, within: Duration, clock: &Clock) -> LoopReport {
        let deadline = Instant::now() + within;
        loop {
            let answer = self.cmd(&format!("loopawait {name} 1000")).await;
            if answer != "PENDING" {
                return parse_loop_report(&answer, "curator", clock).unwrap_or_else(|e| panic!("{e}"));
            }
            assert!(Instant::now() < deadline, "the Curator loop {name} did not finish within {within:?}: a stall");
        }
    }
}

// =============================================================================================
// Checkers
// =============================================================================================

/// At most `n` holds at any moment; the error names a moment with more and the holds there.
fn check_at_most(log: &[Interval], n: usize) -> Result<usize, String> {
    let mut most = 0;
    for a in log {
        let at: Vec<&Interval> = log.iter().filter(|b| b.start <= a.start && a.start < b.end).collect();
        most = most.max(at.len());
        if at.len() > n {
            let names: Vec<String> = at.iter().map(|i| format!("{} token {}", i.who, i.token)).collect();
            return Err(format!("{} holders of {n} leases when {} started: {}", at.len(), a.who, names.join(", ")));
        }
    }
    Ok(most)
}

/// What the holders found wrong (server-proven or by markers), collected across tasks.
#[derive(Clone, Default)]
struct Violations(Arc<Mutex<Vec<String>>>);

impl Violations {
    fn push(&self, v: String) {
        println!("VIOLATION: {v}");
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(v);
    }

    fn all(&self) -> Vec<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Runs until `done` resolves (None) or the hold is observed `Lost` (when).
async fn until_lost(hold: &Arc<Hold>, done: impl Future<Output = ()>) -> Option<Instant> {
    let mut rx = hold.watch_state();
    tokio::pin!(done);
    loop {
        if *rx.borrow_and_update() == HoldState::Lost {
            return Some(Instant::now());
        }
        tokio::select! {
            biased;
            changed = rx.changed() => if changed.is_err() { return Some(Instant::now()) },
            () = &mut done => return None,
        }
    }
}

/// The version of `path` read through `client` (with its retries); None if it cannot be read now.
async fn version_of(client: &CuratorClient, path: &str) -> Option<i32> {
    let owned = path.to_string();
    let read = zk_curator::raw::with_retry(client, path, None, move |zk| {
        let path = owned.clone();
        async move { zk.check_stat(&path).await }
    })
    .await;
    match read {
        Ok(Some(stat)) => Some(stat.version),
        Ok(None) => panic!("the data node {path} is gone"),
        Err(e) => {
            println!("cannot read the version of {path} now: {e}");
            None
        }
    }
}

/// The read-write lock's shared state: the hold log, the data node, the violations.
#[derive(Clone)]
struct RwCtx {
    log: HoldLog,
    data: String,
    violations: Violations,
}

impl RwCtx {
    /// One hold of the read-write lock, proven to the server: reads the data node's version, works
    /// until `done` or `Lost`, then — in one multi with the check of our lock node — a writer sets
    /// the data node at that version and a reader checks that version; a `BadVersion` means a write
    /// landed during this hold, a violation. Logs the interval (end after the proof, or when `Lost`
    /// was observed). Returns whether the hold was lost.
    async fn hold(
        &self,
        client: &CuratorClient,
        who: &str,
        hold: &Arc<Hold>,
        write: bool,
        start: Instant,
        done: impl Future<Output = ()>,
    ) -> bool {
        let version = version_of(client, &self.data).await;
        let mut lost_at = until_lost(hold, done).await;
        if let (None, Some(v)) = (lost_at, version) {
            let proof = if write {
                GuardedWrite::new().set_data(&self.data, who.as_bytes(), Some(v))
            } else {
                GuardedWrite::new().check(&self.data, v)
            };
            match hold.guarded_write(proof).await {
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::LockLost => lost_at = Some(Instant::now()),
                Err(e) if e.code() == Some(zk_curator::ErrorCode::BadVersion) => self.violations.push(format!(
                    "{who} ({}, token {}): a write landed on {} during the {} hold (version {v} at its start)",
                    hold.name(),
                    hold.fencing_token(),
                    self.data,
                    if write { "write" } else { "read" }
                )),
                // Unknown outcome (the connection went): nothing proven either way.
                Err(e) => println!("{who}: proof not made: {e} ({:?}), state {:?}", e.kind(), hold.hold_state()),
            }
        }
        self.log.push(Interval {
            who: who.to_string(),
            token: hold.fencing_token().as_u128(),
            start,
            end: lost_at.unwrap_or_else(Instant::now),
            lost: lost_at.is_some(),
            shared: !write,
        });
        lost_at.is_some()
    }
}

/// The semaphore's shared state: the hold log, the markers node, the violations.
#[derive(Clone)]
struct SemCtx {
    log: HoldLog,
    markers: String,
    violations: Violations,
    most_markers: Arc<AtomicUsize>,
}

impl SemCtx {
    /// One lease hold: creates an EPHEMERAL_SEQUENTIAL marker `<markers>/rust-` in the holder's
    /// own session (it lives no longer than the lease: deleted before the release, gone with the
    /// session) and lists the markers — more than [`LEASES`] is a violation; works until `done` or
    /// `Lost`; deletes the marker; logs the interval. Returns whether the lease was lost.
    async fn hold(&self, client: &CuratorClient, who: &str, lease: &Lease, start: Instant, done: impl Future) -> bool {
        let mode = zkc::CreateMode::EphemeralSequential.with_acls(zkc::Acls::anyone_all());
        let mut marker = None;
        if let Ok(zk) = zk_curator::raw::client(client) {
            match zk.create(&format!("{}/rust-", self.markers), who.as_bytes(), &mode).await {
                Ok((_, sequence)) => {
                    marker = Some((zk.clone(), format!("{}/rust-{sequence}", self.markers)));
                    match zk.list_children(&self.markers).await {
                        Ok(seen) => {
                            self.most_markers.fetch_max(seen.len(), Ordering::SeqCst);
                            if seen.len() > LEASES {
                                self.violations.push(format!(
                                    "{who} ({}): {} holders of {LEASES} leases: {seen:?}",
                                    lease.node_name(),
                                    seen.len()
                                ));
                            }
                        }
                        Err(e) => println!("{who}: cannot list the markers: {e}"),
                    }
                }
                Err(e) => println!("{who}: no marker ({e}), lease state {:?}", lease.hold_state()),
            }
        }
        let lost_at = until_lost(lease.hold(), async {
            done.await;
        })
        .await;
        let end = lost_at.unwrap_or_else(Instant::now);
        if let Some((zk, marker)) = marker {
            match zk.delete(&marker, None).await {
                Ok(()) | Err(zkc::Error::NoNode | zkc::Error::SessionExpired) => {}
                Err(e) if lost_at.is_some() => println!("{who}: marker of a lost lease not deleted: {e}"),
                Err(e) => panic!("{who}: delete marker {marker}: {e}"),
            }
        }
        self.log.push(Interval {
            who: who.to_string(),
            token: lease.fencing_token().as_u128(),
            start,
            end,
            lost: lost_at.is_some(),
            shared: true,
        });
        lost_at.is_some()
    }
}

// =============================================================================================
// The checkers check themselves
// =============================================================================================

#[test]
fn checkers_detect_bad_histories() {
    let t0 = Instant::now();
    let iv = |who: &str, token: u128, start: u64, end: u64, shared: bool| Interval {
        who: who.to_string(),
        token,
        start: t0 + Duration::from_millis(start),
        end: t0 + Duration::from_millis(end),
        lost: false,
        shared,
    };
    // at most N holders
    let two = vec![iv("a", 1, 0, 10, true), iv("b", 2, 5, 20, true), iv("c", 3, 10, 30, true)];
    assert_eq!(check_at_most(&two, 2), Ok(2));
    assert_eq!(check_at_most(&[], 2), Ok(0));
    let three = vec![iv("a", 1, 0, 10, true), iv("b", 2, 5, 20, true), iv("c", 3, 9, 30, true)];
    let err = check_at_most(&three, 2).unwrap_err();
    assert!(err.contains("3 holders of 2") && err.contains("c token 3"), "{err}");
    assert!(check_at_most(&[iv("a", 1, 0, 100, true), iv("b", 2, 50, 60, true)], 1).is_err(), "nested");

    // Curator's report: parsed onto this clock, kinds mapped to shared / exclusive, violations kept
    let clock = Clock::now();
    let us = |ms: i64| clock.epoch_us + ms * 1000;
    let answer =
        format!("DONE holds=2 timeouts=1 violations=0 max=0 log=R:7:{}:{};W:9:{}:{}", us(0), us(5), us(5), us(9));
    let report = parse_loop_report(&answer, "curator", &clock).unwrap();
    assert_eq!((report.holds, report.timeouts, report.intervals.len()), (2, 1, 2));
    assert!(report.intervals[0].shared && !report.intervals[1].shared);
    assert_eq!(report.intervals[1].token, zk_curator::locks::FencingToken::new(9, 0).as_u128());
    assert_eq!(report.intervals[0].end - report.intervals[0].start, Duration::from_millis(5));
    assert_eq!(report.intervals[0].start, clock.instant);
    assert_eq!(clock.instant_of(us(-3)) + Duration::from_millis(3), clock.instant);
    assert_eq!(check_exclusion(&report.intervals), Ok(()));
    // a Curator write overlapping a Rust read is caught once mapped onto this clock
    let mut mixed = report.intervals.clone();
    mixed.push(Interval {
        start: clock.instant_of(us(6)),
        end: clock.instant_of(us(20)),
        ..iv("rust", 10, 0, 0, true)
    });
    assert!(check_exclusion(&mixed).unwrap_err().contains("overlap"));
    let bad = "DONE holds=1 timeouts=0 violations=1 max=3 log=L:1:5:6 violation: curator round 3: 3 holders";
    let report = parse_loop_report(bad, "curator", &clock).unwrap();
    assert_eq!(report.violations, vec!["curator round 3: 3 holders".to_string()]);
    assert!(parse_loop_report("DONE holds=2 timeouts=0 violations=0 max=0 log=R:1:5:6", "c", &clock).is_err());
    assert!(parse_loop_report("DONE holds=0 timeouts=0 violations=1 max=0 log=", "c", &clock).is_err());
    assert!(parse_loop_report("ERROR boom", "c", &clock).is_err());
}

/// The server-proven checks fail when a write lands during a hold: a foreign write during a read
/// hold and during a write hold is reported, and a marker too many is reported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_proven_checks_detect_a_write_during_a_hold() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let client = support::client(&connect).await;
    let intruder = support::observer(&connect).await;
    let path = support::unique_path("proof-selftest");
    let data = format!("{path}-data");
    client.create(&data).creating_parent_containers_if_needed().await.unwrap();
    let ctx = RwCtx { log: HoldLog::default(), data: data.clone(), violations: Violations::default() };
    let rw = InterProcessReadWriteLock::new(&client, &path).unwrap();

    // clean holds: nothing reported
    rw.read_lock().acquire().await.unwrap();
    let hold = rw.read_lock().current_hold().unwrap();
    assert!(!ctx.hold(&client, "reader", &hold, false, Instant::now(), async {}).await);
    rw.read_lock().release().await.unwrap();
    let guard = rw.write_lock().lock().await.unwrap();
    assert!(!ctx.hold(&client, "writer", guard.hold(), true, Instant::now(), async {}).await);
    guard.release().await.unwrap();
    assert!(ctx.violations.all().is_empty(), "{:?}", ctx.violations.all());

    // a write that lands during a read hold, then during a write hold
    for write in [false, true] {
        let (hold, release): (Arc<Hold>, Box<dyn FnOnce() + Send>) = if write {
            let g: WriteLockGuard = rw.write_lock().lock().await.unwrap();
            (g.hold().clone(), Box::new(move || drop(g)))
        } else {
            let g: ReadLockGuard = rw.read_lock().lock().await.unwrap();
            (g.hold().clone(), Box::new(move || drop(g)))
        };
        let who = if write { "writer" } else { "reader" };
        let intrude = async {
            intruder.set_data(&data, b"intruder", None).await.expect("the intruder's write");
        };
        assert!(!ctx.hold(&client, who, &hold, write, Instant::now(), intrude).await);
        release();
        let found = ctx.violations.all();
        assert!(
            found.last().is_some_and(|v| v.starts_with(who) && v.contains("a write landed")),
            "the {who}'s proof missed a write during its hold: {found:?}"
        );
    }
    assert_eq!(ctx.violations.all().len(), 2);

    // markers: one too many holders is reported
    let markers = format!("{path}-markers");
    client.create(&markers).creating_parent_containers_if_needed().await.unwrap();
    let sem_ctx = SemCtx {
        log: HoldLog::default(),
        markers: markers.clone(),
        violations: Violations::default(),
        most_markers: Arc::default(),
    };
    let semaphore = InterProcessSemaphoreV2::new(&client, &format!("{path}-sem"), 1).unwrap();
    let lease = semaphore.acquire().await.unwrap();
    assert!(!sem_ctx.hold(&client, "alone", &lease, Instant::now(), async {}).await);
    assert!(sem_ctx.violations.all().is_empty());
    for _ in 0..LEASES {
        // holders the library did not count
        let mode = zkc::CreateMode::Ephemeral.with_acls(zkc::Acls::anyone_all());
        intruder.create(&format!("{markers}/intruder-{}", rand::random::<u32>()), b"", &mode).await.unwrap();
    }
    assert!(!sem_ctx.hold(&client, "crowded", &lease, Instant::now(), async {}).await);
    lease.release().await.unwrap();
    let found = sem_ctx.violations.all();
    assert!(found.len() == 1 && found[0].contains("3 holders of 2"), "{found:?}");
    assert_eq!(sem_ctx.most_markers.load(Ordering::SeqCst), LEASES + 1);
}

// =============================================================================================
// helpers
// =============================================================================================

#[derive(Debug, Default, Clone, Copy)]
struct Stats {
    attempts: usize,
    won: usize,
    timed_out: usize,
    cancelled: usize,
    errors: usize,
    lost: usize,
    dropped: usize,
}

impl std::ops::AddAssign for Stats {
    fn add_assign(&mut self, o: Stats) {
        self.attempts += o.attempts;
        self.won += o.won;
        self.timed_out += o.timed_out;
        self.cancelled += o.cancelled;
        self.errors += o.errors;
        self.lost += o.lost;
        self.dropped += o.dropped;
    }
}

/// How long one acquire may wait: half the time so short (< 30 ms) that it gives up or is
/// cancelled midway, otherwise long enough to get its turn.
fn random_wait(rng: &mut StdRng) -> Duration {
    if rng.gen_bool(0.5) {
        Duration::from_micros(rng.gen_range(0..30_000))
    } else {
        Duration::from_millis(rng.gen_range(1_000..5_000))
    }
}

/// A client with the given session timeout, a 2 s connection timeout and 10 retries 100 ms apart.
async fn fault_client(connect: &str, session: Duration) -> CuratorClient {
    CuratorClient::builder(connect)
        .session_timeout(session)
        .connection_timeout(Duration::from_secs(2))
        .retry_policy(RetryNTimes::new(10, Duration::from_millis(100)))
        .connect()
        .await
        .expect("connect")
}

/// An acquire's error is fine only for a client that goes through faults.
#[track_caller]
fn tolerate(e: Error, faulty: bool, who: &str, stats: &mut Stats) {
    assert!(faulty, "{who}: acquire failed without a fault: {e}");
    stats.errors += 1;
}

/// Waits for a spawned task, at most `within`, propagating its panic.
async fn join<T>(what: &str, within: Duration, handle: tokio::task::JoinHandle<T>) -> T {
    support::join(what, within, handle).await
}

/// After a run: nothing left under `path` (background deletes get 10 s).
async fn assert_nothing_left(connect: &str, path: &str, run: &str) {
    let left = support::eventually_no_children(connect, path, Duration::from_secs(10)).await;
    assert!(left.is_empty(), "{run}: nodes left under {path}: {left:?}");
}

// =============================================================================================
// 1. read-write lock
// =============================================================================================

/// A hold of either half, taken one way or another.
enum Taken {
    Read(ReadLockGuard),
    Write(WriteLockGuard),
    /// Curator-style (`acquire_timeout`): released through the half by this task.
    CuratorStyle {
        write: bool,
        hold: Arc<Hold>,
    },
}

impl Taken {
    fn hold(&self) -> Arc<Hold> {
        match self {
            Taken::Read(g) => g.hold().clone(),
            Taken::Write(g) => g.hold().clone(),
            Taken::CuratorStyle { hold, .. } => hold.clone(),
        }
    }

    /// Releases (or, if `drop_it`, drops a guard: released in the background).
    async fn release(self, rw: &InterProcessReadWriteLock, drop_it: bool) -> zk_curator::Result<()> {
        match self {
            Taken::Read(g) if drop_it => {
                drop(g);
                Ok(())
            }
            Taken::Write(g) if drop_it => {
                drop(g);
                Ok(())
            }
            Taken::Read(g) => g.release().await,
            Taken::Write(g) => g.release().await,
            Taken::CuratorStyle { write: true, .. } => rw.write_lock().release().await,
            Taken::CuratorStyle { write: false, .. } => rw.read_lock().release().await,
        }
    }
}

/// One acquire of `$half` (a `ReadLock` or `WriteLock`) in a random way: a dropped `lock()`
/// future, `try_lock_for`, Curator-style `acquire_timeout`, or an aborted task running `lock()`.
macro_rules! take {
    ($half:expr, $wrap:path, $write:expr, $mode:expr, $wait:expr, $stats:expr) => {{
        let half = $half;
        match $mode {
            0 => match tokio::time::timeout($wait, half.lock()).await {
                Ok(guard) => guard.map(|g| Some($wrap(g))),
                Err(_) => {
                    $stats.cancelled += 1;
                    Ok(None)
                }
            },
            1 => half.try_lock_for($wait).await.map(|g| g.map($wrap)),
            2 => match half.acquire_timeout($wait).await {
                Ok(true) => Ok(Some(Taken::CuratorStyle {
                    write: $write,
                    hold: half.current_hold().expect("a hold after acquire"),
                })),
                Ok(false) => Ok(None),
                Err(e) => Err(e),
            },
            _ => {
                let (tx, rx) = oneshot::channel();
                let task = {
                    let half = half.clone();
                    crate::support::spawn(async move {
                        if let Ok(guard) = half.lock().await {
                            let _ = tx.send(guard);
                        }
                    })
                };
                let mut rx = rx;
                let early = tokio::select! {
                    guard = &mut rx => guard.ok(),
                    () = tokio::time::sleep($wait) => None,
                };
                task.abort();
                match early.map_or_else(|| rx.try_recv().ok(), Some).ok_or(()) {
                    Ok(guard) => Ok(Some($wrap(guard))),
                    Err(_) => {
                        if let Err(e) = task.await {
                            if e.is_panic() {
                                std::panic::resume_unwind(e.into_panic());
                            }
                        }
                        $stats.cancelled += 1;
                        Ok(None)
                    }
                }
            }
        }
    }};
}

/// A Rust contender: until `stop` (and at least `min_rounds`, at most 10 times that), takes the
/// read lock or (1 in 3) the write lock in a random way, holds briefly with the server-proven
/// checks, releases (sometimes by dropping the guard). `faulty`: its client goes through faults.
#[allow(clippy::too_many_arguments)]
async fn rw_contender(
    client: CuratorClient,
    path: String,
    who: String,
    ctx: RwCtx,
    stop: Arc<AtomicBool>,
    seed: u64,
    min_rounds: usize,
    faulty: bool,
) -> Stats {
    let rw = InterProcessReadWriteLock::new(&client, &path).unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut s = Stats::default();
    while s.attempts < min_rounds * 10 && (s.attempts < min_rounds || !stop.load(Ordering::SeqCst)) {
        s.attempts += 1;
        let write = rng.gen_range(0..3) == 0;
        let wait = random_wait(&mut rng);
        let hold_for = Duration::from_micros(rng.gen_range(0..3_000));
        let mode = rng.gen_range(0..4);
        let taken = if write {
            take!(rw.write_lock(), Taken::Write, true, mode, wait, s)
        } else {
            take!(rw.read_lock(), Taken::Read, false, mode, wait, s)
        };
        let taken = match taken {
            Ok(Some(taken)) => taken,
            Ok(None) => {
                s.timed_out += 1;
                continue;
            }
            Err(e) => {
                tolerate(e, faulty, &who, &mut s);
                continue;
            }
        };
        let start = Instant::now();
        s.won += 1;
        let hold = taken.hold();
        if ctx.hold(&client, &who, &hold, write, start, tokio::time::sleep(hold_for)).await {
            s.lost += 1;
        }
        let drop_it = !matches!(taken, Taken::CuratorStyle { .. }) && rng.gen_bool(0.15);
        s.dropped += usize::from(drop_it);
        let released = taken.release(&rw, drop_it).await;
        if faulty {
            support::assert_ok_or_kind(&released, FAULT_RELEASE, &format!("{who}: release"));
        } else {
            released.unwrap_or_else(|e| panic!("{who}: release: {e}"));
        }
    }
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_write_lock_fault_run() {
    support::init_tracing();
    let began = Instant::now();
    let seed = support::seed("SIBLING_SEED");
    let compile = tokio::task::spawn_blocking(compiled_peer);
    let server = support::server_with(TestingServer::builder().tick_time(Duration::from_millis(200))).await;
    let connect = server.connect_string();
    compile.await.expect("compile the Curator peer");
    let expiring = FaultProxy::start(&connect).await.expect("proxy");
    let cutting = FaultProxy::start(&connect).await.expect("proxy");
    let path = support::unique_path("rw-faults");
    let data = format!("{path}-data");
    let clock = Clock::now();
    let (mut peer, setup) = tokio::join!(CuratorPeer::start(&connect), support::client(&connect));
    setup.create(&data).creating_parent_containers_if_needed().await.unwrap();
    let ctx = RwCtx { log: HoldLog::default(), data: data.clone(), violations: Violations::default() };
    let stop = Arc::new(AtomicBool::new(false));

    // The load: three Rust contenders on their own sessions, one on the proxy that will be cut,
    // and a Curator thread.
    peer.rw_loop("rw", &path, 150, &data, Duration::from_millis(4), seed).await;
    let mut contenders = Vec::new();
    for i in 0..4u64 {
        let faulty = i == 3;
        let client = if faulty {
            fault_client(&cutting.connect_string(), Duration::from_secs(10)).await
        } else {
            support::client(&connect).await
        };
        let who = if faulty { "cut".to_string() } else { format!("rust{i}") };
        let task = rw_contender(client, path.clone(), who, ctx.clone(), stop.clone(), seed.wrapping_add(i), 60, faulty);
        contenders.push(crate::support::spawn(task));
    }

    // Fault 1: a writer's session is expired by the server (blackholed); B, queued behind it,
    // gets the lock only after the writer observed Lost; then the writer tries a downgrade.
    // Latency, one more fault: V's link delays each way until the partition ends, its replies by
    // less than the 0.15 T margin its Lost needs (300 ms of SHORT_SESSION).
    let mut rng = StdRng::seed_from_u64(seed);
    let set = support::latency::set_random(&expiring, &mut rng, 150);
    println!("rw: V's link latency {}", support::latency::describe(&set));
    let v = fault_client(&expiring.connect_string(), SHORT_SESSION).await;
    assert_eq!(v.negotiated_session_timeout(), SHORT_SESSION);
    let b = support::client(&connect).await;
    let (v_holds_tx, v_holds_rx) = oneshot::channel::<()>();
    let (v_lost_tx, v_lost_rx) = oneshot::channel::<()>();
    let (downgrade_tx, downgrade_rx) = oneshot::channel::<bool>();
    let b_done = Arc::new(Notify::new());
    let v_task = {
        let (v, ctx, path, b_done) = (v.clone(), ctx.clone(), path.clone(), b_done.clone());
        crate::support::spawn(async move {
            let rw = InterProcessReadWriteLock::new(&v, &path).unwrap();
            let old = v.session();
            let acquired = rw.write_lock().acquire_timeout(Duration::from_secs(30)).await.expect("V's write lock");
            assert!(acquired, "V's write lock within 30 s");
            let start = Instant::now();
            let hold = rw.write_lock().current_hold().unwrap();
            let _ = v_holds_tx.send(());
            // holds (its proof is never made: the hold is lost first)
            let lost = ctx.hold(&v, "V-writer", &hold, true, start, std::future::pending()).await;
            assert!(lost, "V's hold can only end by Lost");
            let _ = v_lost_tx.send(());
            support::eventually(Duration::from_secs(15), "V's client is on a new session", || async {
                v.session().epoch > old.epoch && v.is_connected()
            })
            .await;
            // Downgrade from the lost write hold (the write lock is still "owned" by this task):
            // it must not be granted at the lost writer's old place while another writer holds.
            let downgrade = rw.read_lock().acquire_timeout(Duration::from_secs(3)).await;
            println!("rw: V's downgrade after its write hold was lost: {downgrade:?}");
            let granted = matches!(downgrade, Ok(true));
            let _ = downgrade_tx.send(granted);
            if granted {
                let start = Instant::now();
                let hold = rw.read_lock().current_hold().unwrap();
                let b_finished = async {
                    let _ = tokio::time::timeout(Duration::from_secs(3), b_done.notified()).await;
                };
                ctx.hold(&v, "V-downgraded-reader", &hold, false, start, b_finished).await;
                support::assert_ok_or_kind(&rw.read_lock().release().await, FAULT_RELEASE, "V: read release");
            }
            let released = rw.write_lock().release().await;
            println!("rw: V's release of its lost write lock: {released:?}");
            support::assert_ok_or_kind(&released, FAULT_RELEASE, "V: write release after loss");
        })
    };
    tokio::time::timeout(Duration::from_secs(30), v_holds_rx).await.expect("V holds").expect("V's task");
    println!("rw: V holds after {:?}", began.elapsed());
    let (b_acquired_tx, b_acquired_rx) = oneshot::channel::<()>();
    let (b_finish_tx, b_finish_rx) = oneshot::channel::<()>();
    let b_task = {
        let (b, ctx, path, b_done) = (b.clone(), ctx.clone(), path.clone(), b_done.clone());
        crate::support::spawn(async move {
            let rw = InterProcessReadWriteLock::new(&b, &path).unwrap();
            let guard = tokio::time::timeout(Duration::from_secs(30), rw.write_lock().lock())
                .await
                .expect("B's write lock within 30 s")
                .expect("B's write lock");
            let start = Instant::now();
            let _ = b_acquired_tx.send(());
            let lost = ctx
                .hold(&b, "B-writer", guard.hold(), true, start, async {
                    let _ = b_finish_rx.await;
                })
                .await;
            assert!(!lost, "B's hold was lost");
            guard.release().await.expect("B's release");
            b_done.notify_one();
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await; // B queues behind V
    zk_curator::raw::with_retry(&v, "/", None, |zk| async move { zk.check_stat("/").await })
        .await
        .expect("V reaches the server");
    let partitioned = Instant::now();
    expiring.set_mode(ProxyMode::Blackhole);
    tokio::time::timeout(Duration::from_secs(15), v_lost_rx).await.expect("V observes Lost").expect("V's task");
    let lost_after = partitioned.elapsed();
    tokio::time::timeout(Duration::from_secs(20), b_acquired_rx).await.expect("B acquires").expect("B's task");
    println!("rw: V lost {lost_after:?} after the partition, B acquired {:?} after it", partitioned.elapsed());
    expiring.set_mode(ProxyMode::Pass);
    expiring.set_latency(Latency::NONE);
    // B holds while V tries its downgrade; B finishes once V's attempt answered (or 1.5 s passed).
    let granted = tokio::time::timeout(Duration::from_millis(1500), downgrade_rx).await;
    println!("rw: V's downgrade granted while B held: {granted:?}");
    // (V reads the data node's version before B writes)
    tokio::time::sleep(Duration::from_millis(200)).await;
    b_finish_tx.send(()).unwrap();
    join("B", Duration::from_secs(20), b_task).await;
    join("V", Duration::from_secs(20), v_task).await;

    // Fault 2: a writer holds across a cut connection: Suspended, Held again, its proof succeeds
    // — on a slow link (latency on the cut link, the faulty contender's too, until C is done).
    let set = support::latency::set_random(&cutting, &mut rng, 250);
    println!("rw: the cut link's latency {}", support::latency::describe(&set));
    let c = fault_client(&cutting.connect_string(), Duration::from_secs(10)).await;
    let rw_c = InterProcessReadWriteLock::new(&c, &path).unwrap();
    let guard = tokio::time::timeout(Duration::from_secs(30), rw_c.write_lock().lock())
        .await
        .expect("C's write lock within 30 s")
        .expect("C's write lock");
    let c_start = Instant::now();
    let c_session = c.session();
    let mut states = guard.state_changes();
    cutting.set_mode(ProxyMode::Cut);
    let suspended = tokio::time::timeout(Duration::from_secs(10), states.next()).await.expect("C is Suspended");
    assert_eq!(suspended, Some(HoldState::Suspended));
    tokio::time::sleep(Duration::from_secs(1)).await;
    cutting.set_mode(ProxyMode::Pass);
    let held = tokio::time::timeout(Duration::from_secs(10), states.next()).await.expect("C is Held again");
    assert_eq!(held, Some(HoldState::Held));
    assert_eq!(c.session(), c_session, "the session survived the cut");
    let lost = ctx.hold(&c, "C-writer-across-cut", guard.hold(), true, c_start, async {}).await;
    assert!(!lost, "C's hold survives a short cut");
    guard.release().await.expect("C's release");
    cutting.set_latency(Latency::NONE);

    // The load ends; everybody's holds are checked.
    println!("rw: faults done after {:?}", began.elapsed());
    stop.store(true, Ordering::SeqCst);
    let mut stats = Stats::default();
    for (i, task) in contenders.into_iter().enumerate() {
        stats += join(&format!("contender {i}"), Duration::from_secs(60), task).await;
    }
    println!("rw: Rust contenders done after {:?}", began.elapsed());
    let curator = peer.loop_result("rw", Duration::from_secs(60), &clock).await;
    for interval in &curator.intervals {
        ctx.log.push(interval.clone());
    }
    let intervals = ctx.log.intervals();
    let (writes, lost) = (intervals.iter().filter(|i| !i.shared).count(), intervals.iter().filter(|i| i.lost).count());
    println!(
        "rw: Rust {stats:?}; Curator {} holds, {} timeouts; {} holds checked ({writes} writes, {lost} lost); took {:?}",
        curator.holds,
        curator.timeouts,
        intervals.len(),
        began.elapsed()
    );
    let mut violations = ctx.violations.all();
    violations.extend(curator.violations.iter().cloned());
    let exclusion = check_exclusion(&intervals);
    assert!(
        violations.is_empty() && exclusion.is_ok(),
        "rw: (a) by the hold intervals: {exclusion:?}\n(b) proven by the server: {violations:#?}"
    );
    assert!(curator.holds >= 10 && stats.won >= 100, "too few holds to mean anything: {stats:?}, {curator:?}");
    assert!(stats.cancelled + stats.timed_out >= 10, "the cancellations did not happen: {stats:?}");
    assert_nothing_left(&connect, &path, "read-write lock fault run").await;
}

// =============================================================================================
// 2. semaphore
// =============================================================================================

/// A Rust lease taker: until `stop` (and at least `min_rounds`, at most 10 times that), takes a
/// lease in a random way (timed, a dropped `acquire()` future, an aborted task, untimed), holds
/// briefly with the marker check, gives it back (sometimes by dropping it).
async fn sem_contender(
    client: CuratorClient,
    path: String,
    who: String,
    ctx: SemCtx,
    stop: Arc<AtomicBool>,
    seed: u64,
    min_rounds: usize,
) -> Stats {
    let semaphore = InterProcessSemaphoreV2::new(&client, &path, LEASES).unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut s = Stats::default();
    while s.attempts < min_rounds * 10 && (s.attempts < min_rounds || !stop.load(Ordering::SeqCst)) {
        s.attempts += 1;
        let wait = random_wait(&mut rng);
        let hold_for = Duration::from_micros(rng.gen_range(0..3_000));
        let lease = match rng.gen_range(0..4) {
            0 => semaphore.acquire_timeout(wait).await.expect("acquire_timeout"),
            1 => match tokio::time::timeout(wait, semaphore.acquire()).await {
                Ok(lease) => Some(lease.expect("acquire")),
                Err(_) => {
                    s.cancelled += 1;
                    continue;
                }
            },
            2 => {
                let (tx, rx) = oneshot::channel();
                let task = {
                    let semaphore = semaphore.clone();
                    crate::support::spawn(async move {
                        let lease = semaphore.acquire().await.expect("acquire in an aborted task");
                        let _ = tx.send(lease);
                    })
                };
                let mut rx = rx;
                let early = tokio::select! {
                    lease = &mut rx => lease.ok(),
                    () = tokio::time::sleep(wait) => None,
                };
                task.abort();
                match early.map_or_else(|| rx.try_recv().ok(), Some).ok_or(()) {
                    Ok(lease) => Some(lease),
                    Err(_) => {
                        if let Err(e) = task.await {
                            if e.is_panic() {
                                std::panic::resume_unwind(e.into_panic());
                            }
                        }
                        s.cancelled += 1;
                        continue;
                    }
                }
            }
            _ => Some(
                tokio::time::timeout(Duration::from_secs(20), semaphore.acquire())
                    .await
                    .unwrap_or_else(|_| panic!("{who}: an untimed acquire stalled for 20 s"))
                    .expect("acquire"),
            ),
        };
        let Some(lease) = lease else {
            s.timed_out += 1;
            continue;
        };
        let start = Instant::now();
        s.won += 1;
        if ctx.hold(&client, &who, &lease, start, tokio::time::sleep(hold_for)).await {
            s.lost += 1;
        }
        if rng.gen_bool(0.15) {
            s.dropped += 1;
            drop(lease);
        } else {
            lease.release().await.unwrap_or_else(|e| panic!("{who}: release: {e}"));
        }
    }
    s
}

/// Whether the session `owner` has a node under `<path>/<dir>` for one of `dirs` (`locks`: the
/// internal mutex, `leases`).
async fn owns_a_node(obs: &zkc::Client, path: &str, dirs: &[&str], owner: i64) -> bool {
    for dir in dirs {
        let dir = format!("{path}/{dir}");
        for child in support::sorted_children(obs, &dir).await {
            if let Ok(Some(stat)) = obs.check_stat(&format!("{dir}/{child}")).await {
                if stat.ephemeral_owner == owner {
                    return true;
                }
            }
        }
    }
    false
}

/// A waiter: an untimed acquire (a stall fails the test after 25 s), a short hold, a release;
/// returns when it acquired.
/// `faulty`: its client goes through a partition, during which an acquire may fail (and is retried).
fn spawn_waiter(
    w: CuratorClient,
    path: String,
    who: &'static str,
    ctx: SemCtx,
    faulty: bool,
) -> tokio::task::JoinHandle<Instant> {
    crate::support::spawn(async move {
        let semaphore = InterProcessSemaphoreV2::new(&w, &path, LEASES).unwrap();
        let deadline = Instant::now() + Duration::from_secs(25);
        let lease = loop {
            let attempt = tokio::time::timeout_at(deadline.into(), semaphore.acquire()).await.unwrap_or_else(|_| {
                panic!("{who}: no lease within 25 s after its session was replaced while it waited (a stall)")
            });
            match attempt {
                Ok(lease) => break lease,
                Err(e) if faulty && FAULT_RELEASE.contains(&e.kind()) => {
                    println!("{who}: acquire failed during the partition: {e}; again");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("{who}: acquire: {e}"),
            }
        };
        let acquired = Instant::now();
        ctx.hold(&w, who, &lease, acquired, tokio::time::sleep(Duration::from_millis(5))).await;
        lease.release().await.unwrap_or_else(|e| panic!("{who}: release: {e}"));
        acquired
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_fault_run() {
    support::init_tracing();
    let began = Instant::now();
    let seed = support::seed("SIBLING_SEED");
    let compile = tokio::task::spawn_blocking(compiled_peer);
    let server = support::server_with(TestingServer::builder().tick_time(Duration::from_millis(200))).await;
    let connect = server.connect_string();
    compile.await.expect("compile the Curator peer");
    let expiring = FaultProxy::start(&connect).await.expect("proxy");
    let path = support::unique_path("sem-faults");
    let markers = format!("{path}-markers");
    let clock = Clock::now();
    let (mut peer, setup) = tokio::join!(CuratorPeer::start(&connect), support::client(&connect));
    setup.create(&markers).creating_parent_containers_if_needed().await.unwrap();
    let obs = support::observer(&connect).await;
    let ctx = SemCtx {
        log: HoldLog::default(),
        markers: markers.clone(),
        violations: Violations::default(),
        most_markers: Arc::default(),
    };
    let stop = Arc::new(AtomicBool::new(false));

    // Two pinned holders fill the semaphore: P on its own session, V through the proxy.
    let mut pins = Vec::new();
    let mut pin_done = Vec::new();
    let (pinned_tx, mut pinned_rx) = tokio::sync::mpsc::channel::<()>(2);
    // Latency, one more fault: the expiring link (V, W3) delays each way until its partition ends,
    // its replies by less than the 0.15 T margin a Lost needs (300 ms of SHORT_SESSION).
    let set = support::latency::set_random(&expiring, &mut StdRng::seed_from_u64(seed), 150);
    println!("sem: the expiring link's latency {}", support::latency::describe(&set));
    let v = fault_client(&expiring.connect_string(), SHORT_SESSION).await;
    assert_eq!(v.negotiated_session_timeout(), SHORT_SESSION);
    for (who, client) in [("P", support::client(&connect).await), ("V", v.clone())] {
        let (done_tx, done_rx) = oneshot::channel::<()>();
        pin_done.push(done_tx);
        let (ctx, path, pinned_tx) = (ctx.clone(), path.clone(), pinned_tx.clone());
        pins.push(crate::support::spawn(async move {
            let semaphore = InterProcessSemaphoreV2::new(&client, &path, LEASES).unwrap();
            let lease = tokio::time::timeout(Duration::from_secs(20), semaphore.acquire())
                .await
                .unwrap_or_else(|_| panic!("{who}: no lease within 20 s"))
                .expect("acquire");
            let start = Instant::now();
            pinned_tx.send(()).await.unwrap();
            let lost = ctx
                .hold(&client, who, &lease, start, async {
                    let _ = done_rx.await;
                })
                .await;
            let released = lease.release().await;
            support::assert_ok_or_kind(&released, FAULT_RELEASE, &format!("{who}: release"));
            lost
        }));
    }
    for _ in 0..2 {
        tokio::time::timeout(Duration::from_secs(25), pinned_rx.recv()).await.expect("both pins hold").unwrap();
    }

    // Waiter W1 takes the internal mutex, creates its lease node and waits for a lease to free
    // (the semaphore is full); then the load starts and queues behind it on the internal mutex.
    let w1 = support::client(&connect).await;
    let w1_task = spawn_waiter(w1.clone(), path.clone(), "W1", ctx.clone(), false);
    let w1_waits = support::poll_until(Duration::from_secs(10), || async {
        owns_a_node(&obs, &path, &["leases"], w1.session().id).await && !w1_task.is_finished()
    })
    .await;
    assert!(w1_waits, "W1 did not wait for a lease of a full semaphore; by the markers: {:?}", ctx.violations.all());

    // The load: three Rust lease takers and a Curator thread.
    peer.sem_loop("sem", &path, 120, &markers, Duration::from_millis(4), seed).await;
    let mut contenders = Vec::new();
    for i in 0..3u64 {
        let client = support::client(&connect).await;
        let task = sem_contender(client, path.clone(), format!("rust{i}"), ctx.clone(), stop.clone(), seed + i, 60);
        contenders.push(crate::support::spawn(task));
    }
    // Waiter W2 queues on the internal mutex behind W1 and the load.
    let w2 = support::client(&connect).await;
    let w2_task = spawn_waiter(w2.clone(), path.clone(), "W2", ctx.clone(), false);
    // Waiter W3, behind the proxy that will blackhole V: its session expires with V's.
    let w3 = fault_client(&expiring.connect_string(), SHORT_SESSION).await;
    let w3_session = w3.session();
    let w3_task = spawn_waiter(w3.clone(), path.clone(), "W3", ctx.clone(), true);
    for (who, w) in [("W2", &w2), ("W3", &w3)] {
        support::eventually(Duration::from_secs(10), &format!("{who} is queued"), || async {
            owns_a_node(&obs, &path, &["locks", "leases"], w.session().id).await
        })
        .await;
    }

    // Fault 1: both waiters' sessions are expired while they wait (W1 for a lease, holding the
    // internal mutex; W2 for the internal mutex).
    let mut expired = Vec::new();
    for (who, w) in [("W1", &w1), ("W2", &w2)] {
        let old = w.session();
        let waiting_for_lease = owns_a_node(&obs, &path, &["leases"], old.id).await;
        let info = zk_curator::raw::client(w).unwrap().session().clone();
        zk_curator::raw::expire_session(&connect, &info)
            .await
            .unwrap_or_else(|e| panic!("expire {who}'s session: {e}"));
        expired.push(Instant::now());
        println!("sem: {who}'s session expired while it waited (with a lease node: {waiting_for_lease})");
        support::eventually(Duration::from_secs(10), &format!("{who}'s client is on a new session"), || async {
            w.session().epoch > old.epoch && w.is_connected()
        })
        .await;
    }

    // Fault 2: a holder's session is expired by the server (blackholed): V observes Lost before
    // anyone else takes its lease.
    zk_curator::raw::with_retry(&v, "/", None, |zk| async move { zk.check_stat("/").await })
        .await
        .expect("V reaches the server");
    expiring.set_mode(ProxyMode::Blackhole);
    // (V's pin ends by itself once Lost; its release then fails or deletes nothing)
    let blackholed = Instant::now();
    let v_lost = join("V", Duration::from_secs(15), pins.pop().unwrap()).await;
    assert!(v_lost, "V's hold can only end by Lost");
    support::eventually(Duration::from_secs(10), "the server expired W3's session", || async {
        !owns_a_node(&obs, &path, &["locks", "leases"], w3_session.id).await
    })
    .await;
    expiring.set_mode(ProxyMode::Pass);
    expiring.set_latency(Latency::NONE);
    expired.push(blackholed);
    pin_done.remove(0).send(()).unwrap();
    let p_lost = join("P", Duration::from_secs(15), pins.pop().unwrap()).await;
    assert!(!p_lost, "P's lease was lost");
    for ((who, task), at) in [("W1", w1_task), ("W2", w2_task), ("W3", w3_task)].into_iter().zip(expired) {
        let acquired = join(who, Duration::from_secs(30), task).await;
        println!("sem: {who} acquired {:?} after its session was expired", acquired - at);
    }
    println!("sem: faults done after {:?}", began.elapsed());

    stop.store(true, Ordering::SeqCst);
    let mut stats = Stats::default();
    for (i, task) in contenders.into_iter().enumerate() {
        stats += join(&format!("contender {i}"), Duration::from_secs(60), task).await;
    }
    println!("sem: Rust contenders done after {:?}", began.elapsed());
    let curator = peer.loop_result("sem", Duration::from_secs(60), &clock).await;
    for interval in &curator.intervals {
        ctx.log.push(interval.clone());
    }
    let intervals = ctx.log.intervals();
    let at_most = check_at_most(&intervals, LEASES);
    let most = at_most.clone().unwrap_or(LEASES + 1);
    println!(
        "sem: Rust {stats:?}; Curator {} holds, {} timeouts, saw at most {} markers; Rust saw at most {} markers; \
         at most {most} holds at once of {} checked; took {:?}",
        curator.holds,
        curator.timeouts,
        curator.max,
        ctx.most_markers.load(Ordering::SeqCst),
        intervals.len(),
        began.elapsed()
    );
    let mut violations = ctx.violations.all();
    violations.extend(curator.violations.iter().cloned());
    assert!(
        violations.is_empty() && at_most.is_ok(),
        "sem: more holders than leases: by the hold intervals: {at_most:?}\nby the markers: {violations:#?}"
    );
    assert!(curator.max <= LEASES && ctx.most_markers.load(Ordering::SeqCst) <= LEASES);
    assert!(curator.holds >= 10 && stats.won >= 60, "too few holds to mean anything: {stats:?}, {curator:?}");
    assert!(stats.cancelled + stats.timed_out >= 10, "the cancellations did not happen: {stats:?}");
    assert_nothing_left(&connect, &format!("{path}/leases"), "semaphore fault run").await;
    assert_nothing_left(&connect, &format!("{path}/locks"), "semaphore fault run").await;
}
