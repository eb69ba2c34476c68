//! Lock safety under faults, checked by a mutual-exclusion checker that does not trust the library.
//!
//! Every holder records `(token, start, end)` into a shared [`HoldLog`]: `start` is taken after the
//! acquire returned, `end` before release is called — or, when the hold went
//! [`HoldState::Lost`], at the moment the holder observed `Lost` (it stops its "work" then). The
//! checker asserts that, in start order, fencing tokens strictly increase and no two intervals
//! overlap. So a holder that learns of its loss only after the next holder started fails the test.
//!
//! Scenarios (each with its own server or ensemble): random cancellation of acquires; server-side
//! session expiry of a holder (blackholed proxy); server stop/restart; leader loss in a 3-node
//! ensemble; `kill -9` of a holder process; release while disconnected (CURATOR-678); a waiter whose
//! session expires; and bad input across the API. After every scenario no node is left under the
//! lock path.

use crate::support;

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::exclusion::{check_exclusion, HoldLog, Interval};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::io::AsyncBufReadExt;
use tokio::sync::oneshot;
use zk_curator::framework::SessionIdentity;
use zk_curator::locks::driver::StandardLockDriver;
use zk_curator::locks::{FencingToken, GuardedWrite, Hold, HoldState, InterProcessMutex, MutexGuard};
use zk_curator::raw as zkc;
use zk_curator::testing::{expire_session, FaultProxy, Latency, ProxyMode, TestingCluster, TestingServer};
use zk_curator::{CuratorClient, Error, ErrorKind, RetryNTimes};

/// Session timeout of clients whose session a test lets expire (server tick 200 ms).
const SHORT_SESSION: Duration = Duration::from_secs(2);

// =============================================================================================
// The mutual-exclusion checker (support/exclusion.rs) checks itself
// =============================================================================================

#[test]
fn checker_detects_broken_exclusion() {
    let t0 = Instant::now();
    let ms = |n: u64| t0 + Duration::from_millis(n);
    let iv = |who: &str, token: u128, start: u64, end: u64| Interval {
        who: who.to_string(),
        token,
        start: ms(start),
        end: ms(end),
        lost: false,
        shared: false,
    };
    // a valid history, logged out of order; touching intervals are fine
    let good = vec![iv("b", 20, 10, 20), iv("a", 10, 0, 10), iv("c", 30, 25, 40)];
    assert_eq!(check_exclusion(&good), Ok(()));
    assert_eq!(check_exclusion(&[]), Ok(()));

    // overlap
    let overlap = vec![iv("a", 10, 0, 11), iv("b", 20, 10, 20)];
    let err = check_exclusion(&overlap).unwrap_err();
    assert!(err.contains("overlap") && err.contains("a token 10"), "{err}");
    // nested
    assert!(check_exclusion(&[iv("a", 10, 0, 100), iv("b", 20, 10, 20)]).unwrap_err().contains("overlap"));
    // overlap with a non-neighbour is still caught (b starts inside a, c is fine)
    assert!(check_exclusion(&[iv("a", 1, 0, 50), iv("b", 2, 60, 70), iv("c", 3, 40, 45)]).is_err());
    // a stale holder that observed Lost too late
    let mut late = iv("old", 10, 0, 30);
    late.lost = true;
    let err = check_exclusion(&[late, iv("new", 20, 25, 40)]).unwrap_err();
    assert!(err.contains("ended by Lost"), "{err}");
    // tokens must strictly increase in start order
    let err = check_exclusion(&[iv("a", 20, 0, 10), iv("b", 10, 10, 20)]).unwrap_err();
    assert!(err.contains("token did not increase"), "{err}");
    assert!(check_exclusion(&[iv("a", 10, 0, 10), iv("b", 10, 10, 20)]).is_err(), "equal tokens");
    // malformed interval
    assert!(check_exclusion(&[iv("a", 10, 10, 5)]).unwrap_err().contains("ends before"));
    // shared holds (readers) may overlap each other, never an exclusive one
    let reader = |who: &str, token: u128, start: u64, end: u64| Interval { shared: true, ..iv(who, token, start, end) };
    assert_eq!(check_exclusion(&[reader("r1", 10, 0, 50), reader("r2", 5, 10, 60), iv("w", 20, 60, 70)]), Ok(()));
    assert!(check_exclusion(&[reader("r1", 10, 0, 50), iv("w", 20, 40, 70)]).unwrap_err().contains("overlap"));
    assert!(check_exclusion(&[iv("w", 20, 0, 50), reader("r", 30, 10, 20)]).unwrap_err().contains("overlap"));
    assert!(check_exclusion(&[iv("w", 20, 0, 10), reader("r", 5, 20, 30)]).unwrap_err().contains("token"));

    // and the panicking wrapper panics
    let log = HoldLog::default();
    log.record("a", 1, ms(0), ms(10), false);
    log.record("b", 2, ms(5), ms(15), false);
    let panicked = std::panic::catch_unwind(|| log.assert_exclusive("synthetic"));
    assert!(panicked.is_err(), "assert_exclusive must panic on an overlapping log");
}

/// What a holder saw during its hold.
#[derive(Clone, Copy, Debug)]
struct HoldReport {
    end: Instant,
    suspended_at: Option<Instant>,
    /// `Held` again after `Suspended`.
    resumed_at: Option<Instant>,
    lost_at: Option<Instant>,
}

/// The holder's "work": runs until `done` resolves or the hold is observed `Lost`, then records
/// the interval (end = now, before any release is called) and returns what it saw.
async fn work(
    log: &HoldLog,
    who: &str,
    node: &Arc<Hold>,
    start: Instant,
    done: impl Future<Output = ()>,
) -> HoldReport {
    let mut rx = node.watch_state();
    let mut report = HoldReport { end: start, suspended_at: None, resumed_at: None, lost_at: None };
    tokio::pin!(done);
    loop {
        let state = *rx.borrow_and_update();
        let now = Instant::now();
        match state {
            HoldState::Lost => {
                report.lost_at = Some(now);
                break;
            }
            HoldState::Suspended if report.suspended_at.is_none() => report.suspended_at = Some(now),
            HoldState::Held if report.suspended_at.is_some() && report.resumed_at.is_none() => {
                report.resumed_at = Some(now)
            }
            _ => {}
        }
        tokio::select! {
            biased;
            changed = rx.changed() => if changed.is_err() { break },
            () = &mut done => break,
        }
    }
    report.end = report.lost_at.unwrap_or_else(Instant::now);
    log.record(who, node.fencing_token().as_u128(), start, report.end, report.lost_at.is_some());
    report
}

// =============================================================================================
// helpers
// =============================================================================================

/// After a scenario: no node may be left under the lock path (background deletes get a few seconds).
async fn assert_no_stray_nodes(obs: &zkc::Client, path: &str, scenario: &str) {
    let left = support::children_become(obs, path, &[], Duration::from_secs(5)).await;
    assert!(left.is_empty(), "{scenario}: stray nodes under {path}: {left:?}");
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1e3)
}

fn summary(name: &str, values: &[Duration]) -> String {
    if values.is_empty() {
        return format!("{name}: -");
    }
    let min = values.iter().min().copied().unwrap_or_default();
    let max = values.iter().max().copied().unwrap_or_default();
    let avg = values.iter().sum::<Duration>() / values.len() as u32;
    format!("{name}: min {} avg {} max {} (n={})", ms(min), ms(avg), ms(max), values.len())
}

fn set_token(resource: &str, token: FencingToken) -> GuardedWrite {
    GuardedWrite::new().set_data(resource, token.to_string().as_bytes(), None)
}

// =============================================================================================
// 1. random cancellation of acquires
// =============================================================================================

#[derive(Debug, Default, Clone, Copy)]
struct Stats {
    attempts: usize,
    won: usize,
    timed_out: usize,
    cancelled: usize,
    dropped_guards: usize,
}

impl std::ops::AddAssign for Stats {
    fn add_assign(&mut self, o: Stats) {
        self.attempts += o.attempts;
        self.won += o.won;
        self.timed_out += o.timed_out;
        self.cancelled += o.cancelled;
        self.dropped_guards += o.dropped_guards;
    }
}

/// How many holds the random-cancellation run checks at least: its hammers go on past their
/// attempts (up to ten times as many) until the log has this many, since on a loaded machine more
/// of their short waits time out.
const ENOUGH_HOLDS: usize = 300;

/// Hammers the lock with timed, cancelled, aborted and zero-wait acquires; holds briefly when it
/// wins. Makes `attempts` attempts, and more until `log` holds [`ENOUGH_HOLDS`].
async fn hammer(m: InterProcessMutex, who: String, log: HoldLog, seed: u64, attempts: usize) -> Stats {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut s = Stats::default();
    while s.attempts < attempts || (log.len() < ENOUGH_HOLDS && s.attempts < attempts * 10) {
        s.attempts += 1;
        let wait = Duration::from_micros(rng.gen_range(0..20_000));
        let hold_for = Duration::from_micros(rng.gen_range(0..3_000));
        let guard: Option<MutexGuard> = match rng.gen_range(0..5) {
            // timed acquire
            0 => m.try_lock_for(wait).await.expect("try_lock_for"),
            // the acquire future is dropped at a random point
            1 => match tokio::time::timeout(wait, m.lock()).await {
                Ok(guard) => Some(guard.expect("lock")),
                Err(_) => {
                    s.cancelled += 1;
                    continue;
                }
            },
            // a task running the acquire is aborted at a random point
            2 => {
                let (tx, rx) = oneshot::channel();
                let m2 = m.clone();
                let task = crate::support::spawn(async move {
                    let guard = m2.lock().await.expect("lock in an aborted task");
                    let _ = tx.send(guard);
                });
                tokio::time::sleep(wait).await;
                task.abort();
                match rx.await {
                    Ok(guard) => Some(guard),
                    Err(_) => {
                        // aborted before it got the lock (a panic in it is a failure)
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
            // Curator style: acquire_timeout / release, owned by this task
            3 => {
                if m.acquire_timeout(wait).await.expect("acquire_timeout") {
                    let start = Instant::now();
                    s.won += 1;
                    let node = m.current_hold().expect("a hold after acquire");
                    work(&log, &who, &node, start, tokio::time::sleep(hold_for)).await;
                    m.release().await.expect("release");
                } else {
                    s.timed_out += 1;
                }
                continue;
            }
            _ => m.try_lock().await.expect("try_lock"),
        };
        let Some(guard) = guard else {
            s.timed_out += 1;
            continue;
        };
        let start = Instant::now();
        s.won += 1;
        work(&log, &who, guard.hold(), start, tokio::time::sleep(hold_for)).await;
        if rng.gen_bool(0.2) {
            s.dropped_guards += 1;
            drop(guard); // released in the background
        } else {
            guard.release().await.expect("release");
        }
    }
    s
}

/// Waits without limit for each of its `rounds` holds.
async fn steady_holder(m: InterProcessMutex, who: String, log: HoldLog, seed: u64, rounds: usize) -> Stats {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut s = Stats::default();
    for _ in 0..rounds {
        s.attempts += 1;
        let guard = tokio::time::timeout(Duration::from_secs(30), m.lock())
            .await
            .expect("an untimed lock must not starve")
            .expect("lock");
        let start = Instant::now();
        s.won += 1;
        let hold_for = Duration::from_micros(rng.gen_range(0..4_000));
        work(&log, &who, guard.hold(), start, tokio::time::sleep(hold_for)).await;
        guard.release().await.expect("release");
    }
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_cancellation_keeps_exclusion() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("cancel");
    let log = HoldLog::default();
    let seed: u64 = rand::random();
    println!("random_cancellation: seed {seed}");
    let started = Instant::now();
    let mut tasks = Vec::new();
    for h in 0..3u64 {
        let client = support::client(&connect).await;
        let m = InterProcessMutex::new(&client, &path).unwrap();
        tasks.push(crate::support::spawn(hammer(m, format!("hammer{h}"), log.clone(), seed.wrapping_add(h), 300)));
    }
    for h in 0..2u64 {
        let client = support::client(&connect).await;
        let m = InterProcessMutex::new(&client, &path).unwrap();
        tasks.push(crate::support::spawn(steady_holder(
            m,
            format!("steady{h}"),
            log.clone(),
            seed.wrapping_add(10 + h),
            100,
        )));
    }
    let mut stats = Stats::default();
    for (i, task) in tasks.into_iter().enumerate() {
        stats += support::join(&format!("contender {i}"), Duration::from_secs(90), task).await;
    }
    let holds = log.assert_exclusive("random cancellation");
    println!("random_cancellation: {stats:?}, {} holds checked, took {:?}", holds.len(), started.elapsed());
    assert_eq!(holds.len(), stats.won);
    assert!(holds.len() >= ENOUGH_HOLDS, "too few acquisitions to mean anything: {stats:?}");
    assert!(stats.cancelled >= 20 && stats.timed_out >= 20, "the faults did not happen often: {stats:?}");
    assert_no_stray_nodes(&obs, &path, "random cancellation").await;
}

// =============================================================================================
// 2. server-side session expiry of a holder
// =============================================================================================

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_holder_sees_lost_before_the_next_holder_acquires() {
    support::init_tracing();
    const TRIALS: usize = 10;
    let server = support::server_with(TestingServer::builder().tick_time(Duration::from_millis(200))).await;
    let connect = server.connect_string();
    let proxy = FaultProxy::start(&connect).await.expect("proxy");
    let obs = support::observer(&connect).await;
    let a = support::client_with_timeouts(&proxy.connect_string(), SHORT_SESSION, Duration::from_secs(2)).await;
    assert_eq!(a.negotiated_session_timeout(), SHORT_SESSION, "negotiated session timeout");
    let b = support::client(&connect).await;
    let path = support::unique_path("expiry");
    let resource = support::unique_path("expiry-resource");
    b.create(&resource).creating_parent_containers_if_needed().await.expect("resource node");
    let ma = InterProcessMutex::new(&a, &path).unwrap();
    let mb = InterProcessMutex::new(&b, &path).unwrap();
    let log = HoldLog::default();
    let (mut to_suspended, mut to_lost, mut lost_to_b, mut suspended_to_b) = (vec![], vec![], vec![], vec![]);

    for trial in 0..TRIALS {
        // Latency, one more fault (odd trials): A's link delays each way, its replies by less than
        // the 0.15 T margin its Lost needs (300 ms of SHORT_SESSION); the last reply before the
        // partition then arrives late, the worst case for A's timer.
        if trial % 2 == 1 {
            let set = support::latency::set_random(&proxy, &mut rand::thread_rng(), 150);
            println!("expiry trial {trial}: latency {}", support::latency::describe(&set));
        }
        let ga = tokio::time::timeout(Duration::from_secs(20), ma.lock()).await.expect("A locks in time").unwrap();
        let a_start = Instant::now();
        let a_node = ga.hold().clone();
        let a_token = ga.fencing_token();
        let a_session = a.session();
        assert_eq!(a_node.session(), a_session);
        ga.guarded_write(set_token(&resource, a_token)).await.expect("A's guarded write while it holds");
        let a_worker = {
            let (log, node) = (log.clone(), a_node.clone());
            crate::support::spawn(async move { work(&log, "A", &node, a_start, std::future::pending()).await })
        };

        let (acquired_tx, acquired_rx) = oneshot::channel();
        let (finish_tx, finish_rx) = oneshot::channel::<()>();
        let b_task = {
            let (mb, log, resource) = (mb.clone(), log.clone(), resource.clone());
            crate::support::spawn(async move {
                let gb = mb.lock().await.expect("B lock");
                let b_start = Instant::now();
                let b_token = gb.fencing_token();
                let _ = acquired_tx.send((b_start, b_token));
                gb.guarded_write(set_token(&resource, b_token)).await.expect("B's guarded write");
                let report = work(&log, "B", gb.hold(), b_start, async {
                    let _ = finish_rx.await;
                })
                .await;
                assert!(report.lost_at.is_none() && report.suspended_at.is_none(), "B's hold was disturbed");
                gb.release().await.expect("B release");
            })
        };
        support::eventually_queued(&obs, &path, 2, "B queued behind A").await;

        // A has just heard from the server (worst case for its timer), then the partition starts.
        zk_curator::raw::with_retry(&a, "/", None, |zk| async move { zk.check_stat("/").await })
            .await
            .expect("stat through the proxy");
        let partitioned = Instant::now();
        proxy.set_mode(ProxyMode::Blackhole);

        let report = support::join("A's worker (must observe Lost)", Duration::from_secs(15), a_worker).await;
        let (b_start, b_token) =
            tokio::time::timeout(Duration::from_secs(15), acquired_rx).await.expect("B acquires").expect("B task");
        let suspended = report.suspended_at.expect("A saw Suspended before Lost");
        let lost = report.lost_at.expect("A saw Lost");
        println!(
            "expiry trial {trial}: Suspended +{}, Lost +{}, B acquired +{} after the partition (Lost {} before B)",
            ms(suspended - partitioned),
            ms(lost - partitioned),
            ms(b_start - partitioned),
            if b_start >= lost { ms(b_start - lost) } else { format!("-{}", ms(lost - b_start)) },
        );
        assert!(suspended < lost, "trial {trial}: Suspended must come before Lost");
        assert!(
            lost < b_start,
            "trial {trial}: A observed Lost {} AFTER B acquired (Suspended +{}, Lost +{}, B +{} after the partition)",
            ms(lost - b_start),
            ms(suspended - partitioned),
            ms(lost - partitioned),
            ms(b_start - partitioned)
        );
        to_suspended.push(suspended - partitioned);
        to_lost.push(lost - partitioned);
        lost_to_b.push(b_start - lost);
        suspended_to_b.push(b_start - suspended);
        assert!(b_token > a_token, "trial {trial}: B's token {b_token} must exceed A's {a_token}");
        assert_eq!(ga.hold_state(), HoldState::Lost, "the caller can see the loss");

        // The old holder's guarded write fails (still partitioned): the lock is lost.
        let write = tokio::time::timeout(Duration::from_secs(5), ga.guarded_write(set_token(&resource, a_token)))
            .await
            .expect("a guarded write of a lost hold must not hang");
        match write {
            Err(e) => assert_eq!(e.kind(), ErrorKind::LockLost, "trial {trial}: partitioned guarded write: {e}"),
            Ok(_) => panic!("trial {trial}: a lost hold's guarded write succeeded"),
        }

        // Network back: A's client opens a new session; the write still fails.
        proxy.set_mode(ProxyMode::Pass);
        proxy.set_latency(Latency::NONE);
        support::eventually(Duration::from_secs(10), "A's client is on a new session", || async {
            a.session().epoch > a_session.epoch && a.is_connected()
        })
        .await;
        match ga.guarded_write(set_token(&resource, a_token)).await {
            Err(e @ Error::LockLost { .. }) => assert_eq!(e.kind(), ErrorKind::LockLost),
            other => panic!("trial {trial}: guarded write on the new session: {other:?}"),
        }
        let (data, _) = obs.get_data(&resource).await.unwrap();
        assert_eq!(data, b_token.to_string().into_bytes(), "only B's write landed");

        // A's release after the loss: Ok or a typed error, no panic, and the loss stays visible.
        match tokio::time::timeout(Duration::from_secs(10), ga.release()).await.expect("release must not hang") {
            Ok(()) => {}
            Err(e) => println!("expiry trial {trial}: release after loss: {e} ({:?})", e.kind()),
        }
        assert_eq!(a_node.hold_state(), HoldState::Lost);
        assert!(!ma.is_acquired_in_this_process());

        finish_tx.send(()).unwrap();
        support::join("B", Duration::from_secs(10), b_task).await;
    }
    let holds = log.assert_exclusive("session expiry");
    assert_eq!(holds.len(), 2 * TRIALS);
    println!("expiry: {}", summary("partition -> A Suspended", &to_suspended));
    println!("expiry: {}", summary("partition -> A Lost", &to_lost));
    println!("expiry: {}", summary("A Suspended -> B acquired", &suspended_to_b));
    println!("expiry: {}", summary("A Lost -> B acquired", &lost_to_b));
    assert_no_stray_nodes(&obs, &path, "session expiry").await;
}

// =============================================================================================
// 3. server stop / restart within the session timeout
// =============================================================================================

/// Spawns a waiter that takes the lock, works `hold_for`, releases.
fn spawn_waiter(m: InterProcessMutex, who: String, log: HoldLog, hold_for: Duration) -> tokio::task::JoinHandle<()> {
    crate::support::spawn(async move {
        let guard = m.lock().await.unwrap_or_else(|e| panic!("{who}: lock: {e}"));
        let start = Instant::now();
        let report = work(&log, &who, guard.hold(), start, tokio::time::sleep(hold_for)).await;
        assert!(report.lost_at.is_none(), "{who}: hold lost");
        guard.release().await.unwrap_or_else(|e| panic!("{who}: release: {e}"));
    })
}

/// Loops lock / work / release until `stop` is set (and at least `min` holds were done).
fn spawn_worker(
    m: InterProcessMutex,
    who: String,
    log: HoldLog,
    stop: Arc<AtomicBool>,
    count: Arc<AtomicUsize>,
    seed: u64,
) -> tokio::task::JoinHandle<usize> {
    crate::support::spawn(async move {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut done = 0;
        while !stop.load(Ordering::SeqCst) {
            let guard = tokio::time::timeout(Duration::from_secs(40), m.lock())
                .await
                .unwrap_or_else(|_| panic!("{who}: lock not acquired within 40 s"))
                .unwrap_or_else(|e| panic!("{who}: lock: {e}"));
            let start = Instant::now();
            let hold_for = Duration::from_micros(rng.gen_range(0..5_000));
            work(&log, &who, guard.hold(), start, tokio::time::sleep(hold_for)).await;
            // A release during an outage may report a retryable error; the node stays queued for
            // deletion (checked by the no-stray-nodes assertion at the end).
            let released = guard.release().await;
            support::assert_ok_or_kind(
                &released,
                &[ErrorKind::Retryable, ErrorKind::SessionLost, ErrorKind::DeadlineExceeded],
                &format!("{who}: release"),
            );
            done += 1;
            count.fetch_add(1, Ordering::SeqCst);
        }
        done
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_restart_within_session_timeout() {
    support::init_tracing();
    let mut server = support::owned_server().await;
    let connect = server.connect_string();
    let path = support::unique_path("restart");
    let log = HoldLog::default();
    // Session 20 s: the client gives a suspended session up after 10 s, more than a restart takes
    // even on a loaded machine.
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(support::client_with(&connect, Duration::from_secs(20)).await);
    }
    let sessions: Vec<SessionIdentity> = clients.iter().map(|c| c.session()).collect();
    let resource = support::unique_path("restart-resource");
    clients[0].create(&resource).creating_parent_containers_if_needed().await.unwrap();

    for round in 0..2 {
        let h = round % clients.len();
        let mh = InterProcessMutex::new(&clients[h], &path).unwrap();
        let gh = mh.lock().await.unwrap();
        let h_start = Instant::now();
        let node = gh.hold().clone();
        let (done_tx, done_rx) = oneshot::channel::<()>();
        let h_worker = {
            let (log, node) = (log.clone(), node.clone());
            crate::support::spawn(async move {
                work(&log, &format!("H{round}"), &node, h_start, async {
                    let _ = done_rx.await;
                })
                .await
            })
        };
        let mut waiters = Vec::new();
        for (i, c) in clients.iter().enumerate().filter(|(i, _)| *i != h) {
            let m = InterProcessMutex::new(c, &path).unwrap();
            waiters.push(spawn_waiter(m, format!("W{round}.{i}"), log.clone(), Duration::from_millis(10)));
        }
        {
            let obs = support::observer(&connect).await;
            support::eventually_queued(&obs, &path, 3, "both waiters queued").await;
        }
        let mut rx = node.watch_state();
        server.stop().await.expect("stop");
        let stopped = Instant::now();
        tokio::time::timeout(Duration::from_secs(5), rx.wait_for(|s| *s == HoldState::Suspended))
            .await
            .expect("the holder sees Suspended")
            .unwrap();
        let suspended = stopped.elapsed();
        tokio::time::sleep(Duration::from_millis(300)).await;
        server.restart().await.expect("restart");
        let restarted = stopped.elapsed();
        tokio::time::timeout(Duration::from_secs(10), rx.wait_for(|s| *s == HoldState::Held))
            .await
            .expect("the holder is Held again after the restart")
            .unwrap();
        println!(
            "restart round {round}: Suspended {} after stop, server back after {}, Held again after {}",
            ms(suspended),
            ms(restarted),
            ms(stopped.elapsed())
        );
        for (c, s) in clients.iter().zip(&sessions) {
            assert_eq!(c.session(), *s, "the session survived the restart");
        }
        gh.guarded_write(set_token(&resource, gh.fencing_token())).await.expect("guarded write after the restart");
        done_tx.send(()).unwrap();
        let report = support::join("holder", Duration::from_secs(5), h_worker).await;
        assert!(report.suspended_at.is_some() && report.resumed_at.is_some(), "{report:?}");
        assert!(report.lost_at.is_none(), "{report:?}");
        gh.release().await.expect("release after the restart");
        for (i, w) in waiters.into_iter().enumerate() {
            support::join(&format!("waiter {i}"), Duration::from_secs(20), w).await;
        }
    }

    // Load: workers on every client keep locking while the server goes down and comes back.
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for (i, c) in clients.iter().enumerate() {
        for j in 0..2 {
            let m = InterProcessMutex::new(c, &path).unwrap();
            let who = format!("load{i}.{j}");
            workers.push(spawn_worker(m, who, log.clone(), stop.clone(), count.clone(), (i * 2 + j) as u64));
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = count.load(Ordering::SeqCst);
    server.stop().await.expect("stop");
    let stopped = Instant::now();
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.restart().await.expect("restart");
    println!("restart load: server back after {}", ms(stopped.elapsed()));
    let at_restart = count.load(Ordering::SeqCst);
    support::eventually(Duration::from_secs(20), "work continues after the restart", || async {
        count.load(Ordering::SeqCst) >= at_restart + 60
    })
    .await;
    stop.store(true, Ordering::SeqCst);
    let mut total = 0;
    for (i, w) in workers.into_iter().enumerate() {
        total += support::join(&format!("worker {i}"), Duration::from_secs(45), w).await;
    }
    println!("restart load: {before} holds before the stop, {at_restart} at restart, {total} in all");
    for (c, s) in clients.iter().zip(&sessions) {
        assert_eq!(c.session(), *s, "the session survived the restart");
    }
    let holds = log.assert_exclusive("server restart");
    assert!(holds.iter().all(|h| !h.lost), "no hold may be lost by a short restart");
    let obs = support::observer(&connect).await;
    assert_no_stray_nodes(&obs, &path, "server restart").await;
}

// =============================================================================================
// 4. leader loss in a three-node ensemble
// =============================================================================================

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_loss_keeps_exclusion() {
    support::init_tracing();
    let mut cluster = TestingCluster::start(3).await.expect("start a 3-node ensemble");
    let connect = cluster.connect_string();
    let path = support::unique_path("leader");
    let log = HoldLog::default();
    // Session 20 s: an election (about a second here) is a disconnect, not a session loss.
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(support::client_with(&connect, Duration::from_secs(20)).await);
    }

    // Phase 1: a holder and two waiters across the loss of the leader.
    let leader = cluster.leader().await.expect("a leader");
    let mh = InterProcessMutex::new(&clients[0], &path).unwrap();
    let gh = mh.lock().await.unwrap();
    let h_start = Instant::now();
    let node = gh.hold().clone();
    let first_epoch = gh.fencing_token().zxid() >> 32;
    let (done_tx, done_rx) = oneshot::channel::<()>();
    let h_worker = {
        let (log, node) = (log.clone(), node.clone());
        crate::support::spawn(async move {
            work(&log, "H", &node, h_start, async {
                let _ = done_rx.await;
            })
            .await
        })
    };
    let mut waiters = Vec::new();
    for (i, c) in clients.iter().enumerate().skip(1) {
        let m = InterProcessMutex::new(c, &path).unwrap();
        waiters.push(spawn_waiter(m, format!("W{i}"), log.clone(), Duration::from_millis(10)));
    }
    {
        let obs = support::observer(&connect).await;
        support::eventually_queued(&obs, &path, 3, "both waiters queued").await;
    }
    let killed = Instant::now();
    cluster.kill(leader).await.expect("kill the leader");
    cluster.wait_for_quorum(Duration::from_secs(30)).await.expect("a new leader");
    let new_leader = cluster.leader().await;
    let mut rx = node.watch_state();
    tokio::time::timeout(Duration::from_secs(15), rx.wait_for(|s| *s != HoldState::Suspended))
        .await
        .expect("the holder's connection comes back")
        .unwrap();
    println!(
        "leader loss: node {leader} killed, node {new_leader:?} leads after {}, holder state {:?}",
        ms(killed.elapsed()),
        node.hold_state()
    );
    done_tx.send(()).unwrap();
    let report = support::join("holder", Duration::from_secs(5), h_worker).await;
    println!(
        "leader loss: holder Suspended {} after the kill, Held again {} later",
        report.suspended_at.map_or("never".into(), |t| ms(t.saturating_duration_since(killed))),
        match (report.suspended_at, report.resumed_at) {
            (Some(s), Some(r)) => ms(r - s),
            _ => "-".into(),
        }
    );
    assert!(report.lost_at.is_none(), "the holder's session survives a leader change: {report:?}");
    assert_eq!(gh.hold_state(), HoldState::Held);
    gh.guarded_write(GuardedWrite::new()).await.expect("a guarded (check-only) write after the leader change");
    support::assert_ok_or_kind(
        &gh.release().await,
        &[ErrorKind::Retryable, ErrorKind::SessionLost, ErrorKind::DeadlineExceeded],
        "release",
    );
    for (i, w) in waiters.into_iter().enumerate() {
        support::join(&format!("waiter {i}"), Duration::from_secs(30), w).await;
    }
    cluster.restart(leader).await.expect("restart the old leader");
    cluster.wait_for_quorum(Duration::from_secs(30)).await.expect("full quorum again");

    // Phase 2: continuous load while the (new) leader is killed.
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for (i, c) in clients.iter().enumerate() {
        let m = InterProcessMutex::new(c, &path).unwrap();
        workers.push(spawn_worker(m, format!("load{i}"), log.clone(), stop.clone(), count.clone(), i as u64));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let leader = cluster.leader().await.expect("a leader");
    cluster.kill(leader).await.expect("kill the leader");
    let at_kill = count.load(Ordering::SeqCst);
    cluster.wait_for_quorum(Duration::from_secs(30)).await.expect("a new leader");
    support::eventually(Duration::from_secs(30), "work continues after the leader change", || async {
        count.load(Ordering::SeqCst) >= at_kill + 60
    })
    .await;
    stop.store(true, Ordering::SeqCst);
    let mut total = 0;
    for (i, w) in workers.into_iter().enumerate() {
        total += support::join(&format!("worker {i}"), Duration::from_secs(45), w).await;
    }
    let holds = log.assert_exclusive("leader loss");
    // Tokens are recorded as `FencingToken::as_u128`: the zxid in the high 64 bits, its epoch in the top 32.
    let last_epoch = holds.iter().map(|h| (h.token >> 96) as i64).max().unwrap_or_default();
    println!(
        "leader loss: {} holds ({total} under load, {at_kill} before the 2nd kill), token epochs {first_epoch} -> \
         {last_epoch}, {} lost",
        holds.len(),
        holds.iter().filter(|h| h.lost).count()
    );
    assert!(last_epoch >= first_epoch + 2, "tokens carry the new leaders' epochs: {first_epoch} -> {last_epoch}");
    let obs = support::observer(&connect).await;
    assert_no_stray_nodes(&obs, &path, "leader loss").await;
}

// =============================================================================================
// 5. kill -9 of a holder process
// =============================================================================================

/// The holder process: the `zk-curator` CLI's `hold` command (built for the tests: the self
/// dev-dependency enables the `cli` feature), which prints `ACQUIRED <node>` and `TOKEN <token>`.
const HOLDER_BIN: &str = env!("CARGO_BIN_EXE_zk-curator");

/// The holder's next line, which must start with `prefix`; returns the rest.
async fn holder_line(
    lines: &mut tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    prefix: &str,
) -> String {
    let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .unwrap_or_else(|_| panic!("the holder process prints {prefix:?} within 30 s"))
        .expect("read holder stdout")
        .unwrap_or_else(|| panic!("the holder process exited before {prefix:?}"));
    line.strip_prefix(prefix).unwrap_or_else(|| panic!("expected {prefix:?}, got {line:?}")).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_holder_process() {
    support::init_tracing();
    const TRIALS: usize = 3;
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("process");
    let b = support::client(&connect).await;
    let mb = InterProcessMutex::new(&b, &path).unwrap();
    let log = HoldLog::default();
    let mut delays = Vec::new();
    for trial in 0..TRIALS {
        let session_ms = SHORT_SESSION.as_millis().to_string();
        let mut child = tokio::process::Command::new(HOLDER_BIN)
            .args(["--connect", &connect, "--session-timeout-ms", &session_ms, "hold", &path, "--seconds", "600"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn the holder process");
        let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let child_node = holder_line(&mut lines, "ACQUIRED ").await;
        let child_token: i64 = holder_line(&mut lines, "TOKEN ").await.parse().expect("a numeric token");
        let child_start = Instant::now();
        assert_eq!(support::sorted_children(&obs, &path).await, vec![support::node_name(&child_node).to_string()]);

        let (acquired_tx, mut acquired_rx) = oneshot::channel();
        let (finish_tx, finish_rx) = oneshot::channel::<()>();
        let b_task = {
            let (mb, log) = (mb.clone(), log.clone());
            crate::support::spawn(async move {
                let gb = mb.lock().await.expect("B lock");
                let start = Instant::now();
                let _ = acquired_tx.send((start, gb.fencing_token()));
                work(&log, "B", gb.hold(), start, async {
                    let _ = finish_rx.await;
                })
                .await;
                gb.release().await.expect("B release");
            })
        };
        support::eventually_queued(&obs, &path, 2, "B queued behind the process").await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(acquired_rx.try_recv().is_err(), "B acquired while the holder process was alive");

        let killed = Instant::now();
        child.kill().await.expect("SIGKILL the holder process");
        log.record(
            "process",
            zk_curator::locks::FencingToken::new(child_token, 0).as_u128(),
            child_start,
            killed,
            false,
        );
        let (b_start, b_token) =
            tokio::time::timeout(Duration::from_secs(10), acquired_rx).await.expect("B acquires").unwrap();
        let delay = b_start - killed;
        println!("killed process trial {trial}: B acquired {} after the SIGKILL", ms(delay));
        assert!(b_start > killed);
        assert!(
            delay >= SHORT_SESSION / 2 && delay <= SHORT_SESSION + Duration::from_secs(2),
            "B acquired {} after the kill; expected about the session timeout {SHORT_SESSION:?}",
            ms(delay)
        );
        assert!(b_token.value() > child_token);
        delays.push(delay);
        finish_tx.send(()).unwrap();
        support::join("B", Duration::from_secs(10), b_task).await;
    }
    log.assert_exclusive("killed holder process");
    println!("killed process: {}", summary("SIGKILL -> B acquired", &delays));
    assert_no_stray_nodes(&obs, &path, "killed holder process").await;
}

// =============================================================================================
// 6. release while disconnected (CURATOR-678)
// =============================================================================================

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_while_disconnected_is_not_forgotten() {
    support::init_tracing();
    const TRIALS: usize = 4;
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let proxy = FaultProxy::start(&connect).await.expect("proxy");
    // Session 10 s: a cut of up to ~3 s is a disconnect, not a loss (LOST would come after 5 s).
    // Connection timeout 1 s and one retry: a release during the cut fails after about 2 s.
    let a = CuratorClient::builder(&proxy.connect_string())
        .session_timeout(Duration::from_secs(10))
        .connection_timeout(Duration::from_secs(1))
        .retry_policy(RetryNTimes::new(1, Duration::from_millis(100)))
        .connect()
        .await
        .expect("connect A");
    let b = support::client(&connect).await;
    let path = support::unique_path("release-cut");
    let ma = InterProcessMutex::new(&a, &path).unwrap();
    let mb = InterProcessMutex::new(&b, &path).unwrap();
    let log = HoldLog::default();
    let session = a.session();
    let mut deleted_after = Vec::new();
    for trial in 0..TRIALS {
        // guard / Curator style; the release is dropped after 1.5 s / left to fail by itself
        let curator_style = trial % 2 == 1;
        let wait_for_error = trial >= 2;
        let guard = if curator_style {
            ma.acquire().await.unwrap();
            None
        } else {
            Some(ma.lock().await.unwrap())
        };
        let start = Instant::now();
        let node = match &guard {
            Some(guard) => guard.hold().clone(),
            None => ma.current_hold().expect("A holds Curator-style"),
        };
        let a_node = node.path().to_string();

        let (acquired_tx, mut acquired_rx) = oneshot::channel();
        let b_task = {
            let (mb, log) = (mb.clone(), log.clone());
            crate::support::spawn(async move {
                let gb = mb.lock().await.expect("B lock");
                let start = Instant::now();
                let _ = acquired_tx.send(start);
                work(&log, "B", gb.hold(), start, tokio::time::sleep(Duration::from_millis(5))).await;
                gb.release().await.expect("B release");
            })
        };
        support::eventually_queued(&obs, &path, 2, "B queued behind A").await;

        // A's work is done; now release while the network is cut.
        log.record("A", node.fencing_token().as_u128(), start, Instant::now(), false);
        proxy.set_mode(ProxyMode::Cut);
        support::eventually(Duration::from_secs(5), "A noticed the cut", || async { !a.is_connected() }).await;
        let release = async {
            match guard {
                Some(g) => g.release().await,
                None => ma.release().await,
            }
        };
        let bound = if wait_for_error { Duration::from_secs(4) } else { Duration::from_millis(1500) };
        let releasing = Instant::now();
        match tokio::time::timeout(bound, release).await {
            Err(_) if !wait_for_error => {
                println!("release-cut trial {trial}: release still retrying after 1.5 s (dropped)")
            }
            Err(_) => panic!("trial {trial}: release neither succeeded nor failed within {bound:?}"),
            Ok(Err(e)) => {
                println!(
                    "release-cut trial {trial}: release failed after {}: {e} ({:?})",
                    ms(releasing.elapsed()),
                    e.kind()
                );
                // The connection's failure, or the release's own bound (the connection timeout).
                assert!(matches!(e.kind(), ErrorKind::Retryable | ErrorKind::DeadlineExceeded), "{e}");
            }
            Ok(Ok(())) => panic!("trial {trial}: a release cannot succeed while the network is cut"),
        }
        assert!(!ma.is_acquired_in_this_process(), "the hold ends at release, whatever the delete did");
        assert_eq!(node.hold_state(), HoldState::Lost, "a released hold is over");
        assert!(
            support::sorted_children(&obs, &path).await.contains(&support::node_name(&a_node).to_string()),
            "A's node is still there"
        );
        assert!(acquired_rx.try_recv().is_err(), "B cannot have the lock yet");

        let restored = Instant::now();
        proxy.set_mode(ProxyMode::Pass);
        let b_start = tokio::time::timeout(Duration::from_secs(5), acquired_rx)
            .await
            .expect("A's node is deleted once the connection returns, and B acquires")
            .unwrap();
        let after = b_start - restored;
        println!("release-cut trial {trial}: B acquired {} after the network came back", ms(after));
        deleted_after.push(after);
        assert_eq!(a.session(), session, "the session survived the cut: the library deleted the node itself");
        support::join("B", Duration::from_secs(10), b_task).await;
        support::eventually(Duration::from_secs(5), "A reconnected", || async { a.is_connected() }).await;
    }
    log.assert_exclusive("release while disconnected");
    println!("release-cut: {}", summary("network back -> B acquired", &deleted_after));
    // A's client works normally afterwards: it queues behind no stale node.
    assert!(ma.acquire_timeout(Duration::from_secs(5)).await.unwrap());
    ma.release().await.unwrap();
    assert_no_stray_nodes(&obs, &path, "release while disconnected").await;
}

// =============================================================================================
// 7. a waiter whose session expires queues again
// =============================================================================================

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_waiter_queues_again_with_one_node() {
    support::init_tracing();
    const TRIALS: usize = 3;
    const WAITER_DATA: &[u8] = b"the-waiter";
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("waiter-expiry");
    let h = support::client(&connect).await;
    let w = CuratorClient::builder(&connect)
        .session_timeout(Duration::from_secs(10))
        .connection_timeout(Duration::from_secs(5))
        .retry_policy(RetryNTimes::new(10, Duration::from_millis(100)))
        .default_data(WAITER_DATA)
        .connect()
        .await
        .expect("connect W");
    let mh = InterProcessMutex::new(&h, &path).unwrap();
    let mw = InterProcessMutex::new(&w, &path).unwrap();
    let log = HoldLog::default();

    // The waiter's nodes (by their data) with their owners.
    async fn waiter_nodes(obs: &zkc::Client, path: &str) -> Vec<(String, i64)> {
        let mut found = Vec::new();
        for child in support::sorted_children(obs, path).await {
            match obs.get_data(&format!("{path}/{child}")).await {
                Ok((data, stat)) if data == WAITER_DATA => found.push((child, stat.ephemeral_owner)),
                Ok(_) | Err(zkc::Error::NoNode) => {}
                Err(e) => panic!("get_data: {e}"),
            }
        }
        found
    }

    for trial in 0..TRIALS {
        let gh = mh.lock().await.unwrap();
        let h_start = Instant::now();
        let old_session = w.session();

        // Sample the tree while the waiter waits: never two nodes of the waiter at once.
        let sampling = Arc::new(AtomicBool::new(true));
        let sampler = {
            let (sampling, path, connect) = (sampling.clone(), path.clone(), connect.clone());
            crate::support::spawn(async move {
                let obs = support::observer(&connect).await;
                let (mut samples, mut max) = (0usize, 0usize);
                while sampling.load(Ordering::SeqCst) {
                    let nodes = waiter_nodes(&obs, &path).await;
                    assert!(nodes.len() <= 1, "two nodes of one waiter at once: {nodes:?}");
                    max = max.max(nodes.len());
                    samples += 1;
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                (samples, max)
            })
        };

        let (acquired_tx, acquired_rx) = oneshot::channel();
        let w_task = {
            let (mw, log, w) = (mw.clone(), log.clone(), w.clone());
            crate::support::spawn(async move {
                let gw =
                    mw.try_lock_for(Duration::from_secs(20)).await.expect("W lock").expect("W within its deadline");
                let start = Instant::now();
                let _ = acquired_tx.send((start, gw.fencing_token(), gw.hold().session(), w.session()));
                work(&log, "W", gw.hold(), start, tokio::time::sleep(Duration::from_millis(5))).await;
                gw.release().await.expect("W release");
            })
        };
        support::eventually(Duration::from_secs(5), "W queued", || async {
            waiter_nodes(&obs, &path).await.iter().any(|(_, owner)| *owner == old_session.id)
        })
        .await;
        let old_node = waiter_nodes(&obs, &path).await[0].0.clone();

        expire_session(&connect, &w).await.expect("expire W's session");
        support::eventually(Duration::from_secs(10), "W's client opened a new session", || async {
            w.session().epoch > old_session.epoch && w.is_connected()
        })
        .await;
        let new_session = w.session();
        support::eventually(Duration::from_secs(10), "W queued again on its new session", || async {
            waiter_nodes(&obs, &path).await.iter().any(|(_, owner)| *owner == new_session.id)
        })
        .await;
        let nodes = waiter_nodes(&obs, &path).await;
        assert_eq!(nodes.len(), 1, "trial {trial}: one node of W: {nodes:?}");
        assert_ne!(nodes[0].0, old_node, "a new node");
        assert_eq!(gh.hold_state(), HoldState::Held, "the holder is not affected");

        log.record("H", gh.fencing_token().as_u128(), h_start, Instant::now(), false);
        let h_token = gh.fencing_token();
        gh.release().await.unwrap();
        let (_, w_token, hold_session, client_session) =
            tokio::time::timeout(Duration::from_secs(5), acquired_rx).await.expect("W acquires").unwrap();
        assert_eq!(hold_session, new_session, "W holds through its new session");
        assert_eq!(client_session, new_session);
        assert!(w_token > h_token);
        support::join("W", Duration::from_secs(10), w_task).await;
        sampling.store(false, Ordering::SeqCst);
        let (samples, max) = support::join("sampler", Duration::from_secs(10), sampler).await;
        println!("waiter expiry trial {trial}: {samples} samples, at most {max} node(s) of W at once");
    }
    log.assert_exclusive("waiter expiry");
    assert_no_stray_nodes(&obs, &path, "waiter expiry").await;
}

// =============================================================================================
// bad input across the API
// =============================================================================================

#[track_caller]
fn expect_kind<T: std::fmt::Debug>(result: zk_curator::Result<T>, kind: ErrorKind, what: &str) -> Error {
    match result {
        Err(e) => {
            assert_eq!(e.kind(), kind, "{what}: {e}");
            e
        }
        Ok(v) => panic!("{what}: expected a {kind:?} error, got Ok({v:?})"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gives_typed_errors() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let client = support::client(&connect).await;
    let path = support::unique_path("bad-input");
    let held = InterProcessMutex::new(&client, &format!("{path}-held")).unwrap().lock().await.unwrap();

    // invalid paths
    // (a character above U+FFFF is one ZooKeeper rejects: Java sees a surrogate pair)
    for bad in ["", "relative", "/trailing/", "/", "/a//b", "/a/./b", "/a/../b", "/nul\0x", "/emoji-\u{1f600}"] {
        let e = expect_kind(InterProcessMutex::new(&client, bad), ErrorKind::BadArgument, &format!("mutex {bad:?}"));
        assert!(matches!(&e, Error::InvalidPath { path, .. } if path == bad), "{e:?}");
        if bad == "/" {
            continue; // a valid path for anything but a lock
        }
        expect_kind(
            held.guarded_write(GuardedWrite::new().set_data(bad, b"", None)).await,
            ErrorKind::BadArgument,
            &format!("guarded set {bad:?}"),
        );
        // The data API names the path in a typed error and sends nothing.
        let named = |e: Error| assert!(matches!(&e, Error::InvalidPath { path, .. } if path == bad), "{e:?}");
        named(expect_kind(client.create(bad).await, ErrorKind::BadArgument, &format!("create {bad:?}")));
        named(expect_kind(client.get_data(bad).await, ErrorKind::BadArgument, &format!("get_data {bad:?}")));
        named(expect_kind(client.set_data(bad, "x").await, ErrorKind::BadArgument, &format!("set_data {bad:?}")));
        named(expect_kind(client.exists(bad).watch().await, ErrorKind::BadArgument, &format!("exists {bad:?}")));
        named(expect_kind(client.get_children(bad).await, ErrorKind::BadArgument, &format!("children {bad:?}")));
        named(expect_kind(client.delete(bad).await, ErrorKind::BadArgument, &format!("delete {bad:?}")));
        named(expect_kind(client.watch(bad).await, ErrorKind::BadArgument, &format!("watch {bad:?}")));
        named(expect_kind(
            client.commit(zk_curator::Transaction::new().check("/", 0).delete(bad, None)).await,
            ErrorKind::BadArgument,
            &format!("transaction {bad:?}"),
        ));
        expect_kind(client.delete_guaranteed(bad).await, ErrorKind::BadArgument, &format!("delete {bad:?}"));
    }
    for (write, what) in [
        (GuardedWrite::new().create("x", b"", zk_curator::CreateMode::Persistent), "create"),
        (GuardedWrite::new().delete("/a/", None), "delete"),
        (GuardedWrite::new().check("//", 0), "check"),
        (GuardedWrite::new().create("/a", b"", zk_curator::CreateMode::PersistentWithTtl(Duration::ZERO)), "zero ttl"),
    ] {
        expect_kind(held.guarded_write(write).await, ErrorKind::BadArgument, what);
    }
    expect_kind(client.create("/").await, ErrorKind::BadArgument, "create /");
    expect_kind(client.delete("/").await, ErrorKind::BadArgument, "delete /");
    expect_kind(
        client.create(&format!("{path}-ttl")).mode(zk_curator::CreateMode::PersistentWithTtl(Duration::MAX)).await,
        ErrorKind::BadArgument,
        "absurd ttl",
    );
    expect_kind(client.create(&format!("{path}-acl")).with_acl(Vec::new()).await, ErrorKind::BadArgument, "empty acl");
    expect_kind(
        client.delete(&format!("{path}-held")).guaranteed().version(3).await,
        ErrorKind::BadArgument,
        "guaranteed delete with a version",
    );

    // empty / invalid lock names and lease counts
    for name in ["", "a/b", "/", "lock-\u{1f600}"] {
        let e = expect_kind(
            InterProcessMutex::with_driver(&client, &path, StandardLockDriver::new(name)),
            ErrorKind::BadArgument,
            &format!("mutex with lock name {name:?}"),
        );
        assert!(matches!(e, Error::InvalidArgument { .. }), "{e:?}");
    }

    // client arguments
    expect_kind(CuratorClient::builder("").connect().await, ErrorKind::BadArgument, "empty connect string");
    expect_kind(
        CuratorClient::builder(&connect).session_timeout(Duration::ZERO).connect().await,
        ErrorKind::BadArgument,
        "zero session timeout",
    );
    expect_kind(
        CuratorClient::builder(&connect).namespace("bad/").connect().await,
        ErrorKind::BadArgument,
        "bad namespace",
    );

    // release without acquire / twice / from another task
    let m = InterProcessMutex::new(&client, &path).unwrap();
    expect_kind(m.release().await, ErrorKind::NotOwner, "release without acquire");
    m.acquire().await.unwrap();
    let m2 = m.clone();
    let other =
        support::join("other task", Duration::from_secs(5), crate::support::spawn(async move { m2.release().await }))
            .await;
    expect_kind(other, ErrorKind::NotOwner, "release from another task");
    assert!(m.is_owned_by_current_task());
    m.release().await.unwrap();
    expect_kind(m.release().await, ErrorKind::NotOwner, "second release");

    // a failing guarded op is a typed error that writes nothing and keeps the hold
    let guard = m.lock().await.unwrap();
    let missing = format!("{path}-missing");
    let e = expect_kind(
        guard.guarded_write(GuardedWrite::new().set_data(&missing, b"x", None)).await,
        ErrorKind::Other,
        "set_data of a missing node",
    );
    assert!(
        matches!(&e, Error::TransactionFailed { index: 0, path, code: zk_curator::ErrorCode::NoNode } if *path == missing),
        "{e:?}"
    );
    assert_eq!(guard.hold_state(), HoldState::Held);
    guard.release().await.unwrap();
    // a huge timeout saturates instead of overflowing
    assert!(m.acquire_timeout(Duration::MAX).await.unwrap());
    m.release().await.unwrap();

    // use after close
    let closing = support::client(&connect).await;
    let mc = InterProcessMutex::new(&closing, &path).unwrap();
    let held = mc.lock().await.unwrap();
    let hold = held.hold().clone();
    // A Curator-style hold too, re-entered (on another path: a guard is not the task's hold).
    let mc = InterProcessMutex::new(&closing, &format!("{path}-curator-style")).unwrap();
    mc.acquire().await.unwrap();
    mc.acquire().await.unwrap();
    closing.close().await;
    assert!(closing.is_closed());
    assert_eq!(hold.hold_state(), HoldState::Lost, "a hold of a closed client is lost");
    let e = held.guarded_write(GuardedWrite::new()).await.expect_err("guarded write after close");
    assert!(matches!(e.kind(), ErrorKind::Closed | ErrorKind::LockLost), "guarded write after close: {e}");
    match mc.release().await {
        Ok(()) => {}
        Err(e) => panic!("re-entrant release after close: {e}"),
    }
    match mc.release().await {
        Ok(()) => {}
        Err(e) => assert_eq!(e.kind(), ErrorKind::Closed, "last Curator-style release after close: {e}"),
    }
    match held.release().await {
        Ok(()) => {}
        Err(e) => assert_eq!(e.kind(), ErrorKind::Closed, "last release after close: {e}"),
    }
    expect_kind(mc.acquire().await, ErrorKind::Closed, "acquire after close");
    expect_kind(mc.acquire_timeout(Duration::from_secs(1)).await, ErrorKind::Closed, "acquire_timeout after close");
    expect_kind(mc.lock().await, ErrorKind::Closed, "lock after close");
    expect_kind(mc.try_lock().await, ErrorKind::Closed, "try_lock after close");
    expect_kind(mc.participant_nodes().await, ErrorKind::Closed, "participants after close");
    let fresh = InterProcessMutex::new(&closing, &path).expect("constructing needs no connection");
    expect_kind(fresh.acquire().await, ErrorKind::Closed, "acquire on a new mutex of a closed client");
    expect_kind(closing.delete_guaranteed(&path).await, ErrorKind::Closed, "delete after close");

    let obs = support::observer(&connect).await;
    assert_no_stray_nodes(&obs, &path, "bad input").await;
}

/// The hold-state stream yields each change once and ends after `Lost`: Suspended on a cut
/// connection, Held when it returns (same session), Lost on release, then nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hold_state_stream_follows_the_connection() {
    let server = support::server().await;
    let proxy = FaultProxy::start(&server.connect_string()).await.expect("proxy");
    let client = support::client_with(&proxy.connect_string(), Duration::from_secs(20)).await;
    let path = support::unique_path("stream");
    let guard = zk_curator::locks::InterProcessMutex::new(&client, &path).unwrap().lock().await.unwrap();
    let mut changes = guard.state_changes();
    proxy.set_mode(ProxyMode::Cut);
    let next = tokio::time::timeout(Duration::from_secs(10), changes.next()).await.expect("a change");
    assert_eq!(next, Some(zk_curator::locks::HoldState::Suspended));
    proxy.set_mode(ProxyMode::Pass);
    let next = tokio::time::timeout(Duration::from_secs(15), changes.next()).await.expect("a change");
    assert_eq!(next, Some(zk_curator::locks::HoldState::Held));
    guard.release().await.unwrap();
    let next = tokio::time::timeout(Duration::from_secs(5), changes.next()).await.expect("a change");
    assert_eq!(next, Some(zk_curator::locks::HoldState::Lost));
    assert_eq!(changes.next().await, None, "the stream ends after Lost");
}
