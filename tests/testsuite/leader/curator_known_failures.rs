//! Curator's known leader-election failures, reproduced against our `LeaderLatch`:
//! each test names the property it checks and the Curator issue it comes from.
//!
//! Leadership is observed from outside the library, in the test process:
//! * a **sampler** (a plain OS thread, not a tokio task, so a busy runtime cannot stall it) reads
//!   every latch's `has_leadership()` about every millisecond, stamping each read with an
//!   `Instant`; a participant's interval runs from its first `true` read to its last `true` read
//!   of a run of `true`s, so two intervals overlap only if a read saw one participant leading
//!   after a read had seen the other one already leading (and it was still leading later);
//! * **leader records**: one task per latch waits for leadership, stamps its start, waits until
//!   its hold stops being `Held`, stamps the end — the library's own notifications, timestamped;
//! * the real Curator participant's `ACQUIRED` / `RELEASED` lines, stamped when we read them.
//!
//! [`check_one_leader`] then asserts that no two intervals overlap and that fencing tokens (where
//! known) increase in start order. `checker_rejects_overlapping_leaders` shows it fails on a bad
//! history.

use crate::support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use zk_curator::leader::LeaderLatch;
use zk_curator::locks::HoldState;
use zk_curator::testing::{expire_session, FaultProxy, ProxyMode, TestingCluster, TestingServer};
use zk_curator::CuratorClient;

/// Hang guard for waits that normally take well under a second.
const WITHIN: Duration = Duration::from_secs(15);

// =============================================================================================
// The checker
// =============================================================================================

/// One participant's leadership as observed: `[start, end]`.
#[derive(Clone, Debug)]
struct LeadInterval {
    who: String,
    start: Instant,
    end: Instant,
    /// The fencing token (czxid of the leader's node), when known.
    token: Option<i64>,
    /// `Some(slack)`: the end may be observed late by up to `slack` — a Curator participant's
    /// `RELEASED` line is printed after its node is deleted (the next leader may start before we
    /// read it), or the test removed the node from outside (an operator's delete, a server-side
    /// expiry): the old and the new leader learn it from two different connections, and
    /// ZooKeeper cannot order those notifications (see `OVERLAP_BOUND` in leader/latch.rs).
    soft_end: Option<Duration>,
}

/// The rule: no two leadership intervals overlap (touching is fine), except an interval with a
/// `soft_end` may overlap a successor that outlasts it by at most that slack; and where both
/// tokens are known, the later leader has the larger token. Returns the largest (tolerated)
/// overlap seen.
fn check_one_leader(intervals: &[LeadInterval]) -> Result<Duration, String> {
    let Some(origin) = intervals.iter().map(|i| i.start).min() else {
        return Ok(Duration::ZERO);
    };
    let at = |t: Instant| format!("{:.1} ms", t.saturating_duration_since(origin).as_secs_f64() * 1e3);
    let show = |i: &LeadInterval| {
        format!(
            "{} [{} .. {}]{}{}",
            i.who,
            at(i.start),
            at(i.end),
            i.token.map_or(String::new(), |t| format!(" token {t}")),
            i.soft_end.map_or(String::new(), |s| format!(" (soft end {s:?})"))
        )
    };
    let mut sorted: Vec<&LeadInterval> = intervals.iter().collect();
    sorted.sort_by_key(|i| i.start);
    let mut tolerated = Duration::ZERO;
    for (n, a) in sorted.iter().enumerate() {
        if a.end < a.start {
            return Err(format!("interval ends before it starts: {}", show(a)));
        }
        for b in &sorted[n + 1..] {
            if b.start < a.end {
                let overlap = a.end.min(b.end) - b.start;
                if a.soft_end.is_some_and(|slack| overlap <= slack) && b.end >= a.end {
                    tolerated = tolerated.max(overlap);
                } else {
                    return Err(format!("two leaders for {overlap:?}: {} and {}", show(a), show(b)));
                }
            }
            if let (Some(ta), Some(tb)) = (a.token, b.token) {
                // The same hold resumed (Suspended, then Held again) keeps its token.
                if tb < ta || (tb == ta && a.who != b.who) {
                    return Err(format!("fencing token did not increase: {} then {}", show(a), show(b)));
                }
            }
        }
    }
    Ok(tolerated)
}

#[track_caller]
fn assert_one_leader(intervals: &[LeadInterval], scenario: &str) -> Duration {
    match check_one_leader(intervals) {
        Ok(tolerated) => {
            println!(
                "{scenario}: {} leadership intervals, no overlap (tolerated soft end {tolerated:?})",
                intervals.len()
            );
            tolerated
        }
        Err(violation) => panic!("{scenario}: {violation}\nall intervals: {intervals:#?}"),
    }
}

#[test]
fn checker_rejects_overlapping_leaders() {
    let t0 = Instant::now();
    let ms = |n: u64| t0 + Duration::from_millis(n);
    let iv = |who: &str, start: u64, end: u64| LeadInterval {
        who: who.into(),
        start: ms(start),
        end: ms(end),
        token: None,
        soft_end: None,
    };
    assert_eq!(check_one_leader(&[]), Ok(Duration::ZERO));
    // Out of order, touching: fine.
    assert!(check_one_leader(&[iv("b", 10, 20), iv("a", 0, 10), iv("a", 30, 40)]).is_ok());
    // Overlap by 1 ms.
    let err = check_one_leader(&[iv("a", 0, 11), iv("b", 10, 20)]).unwrap_err();
    assert!(err.contains("two leaders") && err.contains("a [") && err.contains("b ["), "{err}");
    // Nested, and with a non-neighbour.
    assert!(check_one_leader(&[iv("a", 0, 100), iv("b", 10, 20)]).is_err());
    assert!(check_one_leader(&[iv("a", 0, 50), iv("b", 60, 70), iv("c", 40, 45)]).is_err());
    // A soft end may overlap its successor by at most the slack, never swallow it.
    let soft = |who: &str, start: u64, end: u64| LeadInterval {
        soft_end: Some(Duration::from_millis(5)),
        ..iv(who, start, end)
    };
    assert_eq!(check_one_leader(&[soft("j", 0, 13), iv("r", 10, 20)]), Ok(Duration::from_millis(3)));
    assert!(check_one_leader(&[soft("j", 0, 16), iv("r", 10, 20)]).is_err(), "beyond the slack");
    assert!(check_one_leader(&[soft("j", 0, 14), iv("r", 10, 12)]).is_err(), "successor inside");
    assert!(check_one_leader(&[iv("j", 0, 13), iv("r", 10, 20)]).is_err(), "hard end");
    // Tokens.
    let tok = |who: &str, start: u64, end: u64, t: i64| LeadInterval { token: Some(t), ..iv(who, start, end) };
    assert!(check_one_leader(&[tok("a", 0, 10, 5), tok("b", 10, 20, 7)]).is_ok());
    assert!(check_one_leader(&[tok("a", 0, 10, 7), tok("b", 10, 20, 5)]).unwrap_err().contains("token"));
    assert!(check_one_leader(&[tok("a", 0, 10, 7), tok("b", 10, 20, 7)]).unwrap_err().contains("token"));
    assert!(check_one_leader(&[tok("a", 0, 10, 7), tok("a", 15, 20, 7)]).is_ok(), "a resumed hold");
    assert!(check_one_leader(&[iv("a", 10, 5)]).unwrap_err().contains("ends before"));
    // And the asserting wrapper panics.
    let panicked = std::panic::catch_unwind(|| assert_one_leader(&[iv("a", 0, 11), iv("b", 10, 20)], "bad"));
    assert!(panicked.is_err());
}

// =============================================================================================
// Observers: the sampler and the leader records
// =============================================================================================

#[derive(Default)]
struct SamplerLog {
    intervals: Vec<LeadInterval>,
    /// Reads in one pass that found more than one latch leading.
    passes_with_two: usize,
    /// When each of those passes began.
    two_at: Vec<Instant>,
    passes: usize,
}

/// Reads every latch's `has_leadership()` about every millisecond on an OS thread.
struct Sampler {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<SamplerLog>>,
}

impl Sampler {
    fn start(latches: Vec<Arc<LeaderLatch>>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut log = SamplerLog::default();
                // Per latch: (first true read, last true read, token) of the current run.
                let mut runs: Vec<Option<(Instant, Instant, Option<i64>)>> = vec![None; latches.len()];
                let close = |who: &str, run: (Instant, Instant, Option<i64>)| LeadInterval {
                    who: who.to_string(),
                    start: run.0,
                    end: run.1,
                    token: run.2,
                    soft_end: None,
                };
                while !stop.load(Ordering::SeqCst) {
                    let pass_start = Instant::now();
                    let mut leading = 0;
                    for (i, latch) in latches.iter().enumerate() {
                        let now = Instant::now();
                        let leads = latch.has_leadership();
                        let token = if leads { latch.fencing_token().map(|t| t.value()) } else { None };
                        match (leads, runs[i]) {
                            (true, None) => runs[i] = Some((now, now, token)),
                            (true, Some((start, _, t))) if t == token => runs[i] = Some((start, now, t)),
                            (true, Some(run)) => {
                                // A new leadership (another node) without a false read between.
                                log.intervals.push(close(latch.id(), run));
                                runs[i] = Some((now, now, token));
                            }
                            (false, Some(run)) => {
                                log.intervals.push(close(latch.id(), run));
                                runs[i] = None;
                            }
                            (false, None) => {}
                        }
                        leading += usize::from(leads);
                    }
                    log.passes += 1;
                    log.passes_with_two += usize::from(leading > 1);
                    if leading > 1 {
                        log.two_at.push(pass_start);
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                for (i, run) in runs.into_iter().enumerate() {
                    if let Some(run) = run {
                        log.intervals.push(close(latches[i].id(), run));
                    }
                }
                log
            })
        };
        Self { stop, thread: Some(thread) }
    }

    fn finish(mut self) -> SamplerLog {
        self.stop.store(true, Ordering::SeqCst);
        let log = self.thread.take().map(|t| t.join().expect("sampler thread")).unwrap_or_default();
        println!("sampler: {} passes, {} with two leaders read", log.passes, log.passes_with_two);
        log
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// The leader records: per latch, a task that stamps when `await_leadership` returns and when
/// the hold then stops being `Held` (Suspended or Lost) or the latch stops leading.
struct Records {
    log: Arc<Mutex<Vec<LeadInterval>>>,
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Records {
    fn start(latches: &[Arc<LeaderLatch>]) -> Self {
        let log = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let tasks = latches
            .iter()
            .map(|latch| {
                let (latch, log, stop) = (latch.clone(), log.clone(), stop.clone());
                crate::support::spawn(async move {
                    while !stop.load(Ordering::SeqCst) {
                        match latch.await_leadership_timeout(Duration::from_millis(200)).await {
                            Ok(true) => {}
                            Ok(false) => continue,
                            Err(_) => return, // closed
                        }
                        let start = Instant::now();
                        let Some(hold) = latch.hold() else {
                            // Lost in between: look again (without spinning).
                            tokio::time::sleep(Duration::from_millis(5)).await;
                            continue;
                        };
                        let mut state = hold.watch_state();
                        // Until the hold is not Held, or the latch stops reporting it (closed).
                        loop {
                            if *state.borrow_and_update() != HoldState::Held
                                || !latch.has_leadership()
                                || stop.load(Ordering::SeqCst)
                            {
                                break;
                            }
                            tokio::select! {
                                changed = state.changed() => if changed.is_err() { break },
                                _ = tokio::time::sleep(Duration::from_millis(5)) => {}
                            }
                        }
                        let interval = LeadInterval {
                            who: latch.id().to_string(),
                            start,
                            end: Instant::now(),
                            token: Some(hold.fencing_token().value()),
                            soft_end: None,
                        };
                        log.lock().unwrap().push(interval);
                        // Never spin, whatever the latch reports.
                        tokio::time::sleep(Duration::from_millis(2)).await;
                    }
                })
            })
            .collect();
        Self { log, stop, tasks }
    }

    async fn finish(self) -> Vec<LeadInterval> {
        self.stop.store(true, Ordering::SeqCst);
        for task in self.tasks {
            support::join("leader record", WITHIN, task).await;
        }

        self.log.lock().unwrap().clone()
    }
}

// =============================================================================================
// helpers
// =============================================================================================

/// A server with a 200 ms tick (expiry is checked once per tick) and a 400 ms minimum session.
async fn fault_server() -> TestingServer {
    support::server_with(TestingServer::builder().tick_time(Duration::from_millis(200))).await
}

async fn short_client(connect: &str, session: Duration) -> CuratorClient {
    let client = support::client_with_timeouts(connect, session, Duration::from_secs(2)).await;
    assert_eq!(client.negotiated_session_timeout(), session, "negotiated session timeout");
    client
}

fn leaders(latches: &[Arc<LeaderLatch>]) -> Vec<String> {
    latches.iter().filter(|l| l.has_leadership()).map(|l| l.id().to_string()).collect()
}

async fn exactly_one_leader(latches: &[Arc<LeaderLatch>], what: &str) -> String {
    support::eventually(WITHIN, what, || async { leaders(latches).len() == 1 }).await;
    let now = leaders(latches);
    assert_eq!(now.len(), 1, "{what}: {now:?}");
    now[0].clone()
}

/// A round trip through `client` now, so its last reply from the server is fresh.
async fn touch(client: &CuratorClient) {
    zk_curator::raw::with_retry(client, "/", None, |zk| async move { zk.check_stat("/").await }).await.expect("stat");
}

/// Child creates under `path` so far: the parent's `cversion` counts creates and deletes of
/// children (it is also the next sequence number), so creates = (cversion + children now) / 2.
async fn creates_under(obs: &zookeeper_client::Client, path: &str) -> i64 {
    let stat = support::stat(obs, path).await.expect("latch path exists");
    let now = support::sorted_children(obs, path).await.len() as i64;
    (i64::from(stat.cversion) + now) / 2
}

async fn close_all(latches: &[Arc<LeaderLatch>]) {
    for latch in latches {
        let closed = tokio::time::timeout(WITHIN, latch.close()).await.expect("close in time");
        support::assert_ok_or_kind(
            &closed,
            &[zk_curator::ErrorKind::Retryable, zk_curator::ErrorKind::DeadlineExceeded],
            "close",
        );
    }
}

// =============================================================================================
// CURATOR-620: two leaders after two RECONNECTED events interleave
// =============================================================================================

/// CURATOR-620: Curator's latch reset itself on every RECONNECTED; two resets interleaving after
/// quick reconnects left it with two nodes and let it lead next to another participant. Here the
/// connection of participant `a` flaps quickly — first while it leads, then (after its session
/// was expired) while it waits behind `b`. At no instant do both report leadership, `a` keeps its
/// node across the flaps of phase 1, and `b` is never disturbed in phase 3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flapping_connection_never_yields_two_leaders() {
    support::init_tracing();
    let seed = support::seed("LEADER_FAULTS_SEED");
    let mut rng = StdRng::seed_from_u64(seed);
    let server = fault_server().await;
    let connect = server.connect_string();
    let proxy = FaultProxy::start(&connect).await.expect("proxy");
    let obs = support::observer(&connect).await;
    let path = support::unique_path("flap-620");
    let a = short_client(&proxy.connect_string(), Duration::from_secs(4)).await;
    let b = short_client(&connect, Duration::from_secs(4)).await;
    let la = Arc::new(LeaderLatch::new(&a, &path, "a").unwrap());
    let lb = Arc::new(LeaderLatch::new(&b, &path, "b").unwrap());
    la.start().unwrap();
    la.await_leadership().await.unwrap();
    lb.start().unwrap();
    support::eventually_queued(&obs, &path, 2, "b queued").await;
    let latches = vec![la.clone(), lb.clone()];
    let sampler = Sampler::start(latches.clone());
    let records = Records::start(&latches);
    // Phase 1: a leads and flaps.
    let node = la.hold().expect("a's hold").path().to_string();
    let session = a.session_id();
    for _ in 0..10 {
        proxy.set_mode(ProxyMode::Cut);
        tokio::time::sleep(Duration::from_millis(rng.gen_range(20..250))).await;
        proxy.set_mode(ProxyMode::Pass);
        // Reconnected (so the session survives the flaps), then cut again soon.
        support::eventually(WITHIN, "a reconnects", || async { a.is_connected() }).await;
        tokio::time::sleep(Duration::from_millis(rng.gen_range(0..150))).await;
    }
    let led = la.await_leadership_timeout(WITHIN).await.unwrap();
    assert!(
        led,
        "a leads again once the link is stable: a {la:?}, hold {:?}, client {:?} connected {} session {:x} (was {session:x}), children {:?}",
        la.hold().map(|h| (h.path().to_string(), h.hold_state(), h.session())),
        a.connection_state(),
        a.is_connected(),
        a.session_id(),
        support::sorted_children(&obs, &path).await
    );
    assert_eq!(a.session_id(), session, "short cuts keep the session");
    assert_eq!(la.hold().unwrap().path(), node, "a kept its node across the flaps");
    assert!(!lb.has_leadership());

    // Phase 2: a's session ends; b leads, a queues again.
    let expired_at = Instant::now();
    expire_session(&connect, &a).await.expect("expire a's session");
    assert!(lb.await_leadership_timeout(WITHIN).await.unwrap(), "b leads");
    support::session_replaced(&a, session).await;
    support::eventually_queued(&obs, &path, 2, "a queued again").await;

    // Phase 3: a waits and flaps; b leads throughout.
    let b_hold = lb.hold().unwrap();
    for _ in 0..10 {
        proxy.set_mode(ProxyMode::Cut);
        tokio::time::sleep(Duration::from_millis(rng.gen_range(20..250))).await;
        proxy.set_mode(ProxyMode::Pass);
        tokio::time::sleep(Duration::from_millis(rng.gen_range(0..300))).await;
        assert!(!la.has_leadership(), "a must not lead while b does");
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(leaders(&latches), ["b"], "b still leads");
    assert_eq!(lb.hold().unwrap().path(), b_hold.path());
    // A flap may still be re-queueing a's node (a reconnect under load): one node each, eventually.
    support::eventually_queued(&obs, &path, 2, "one node each").await;

    let mut sampled = sampler.finish();
    let mut recorded = records.finish().await;
    // The expiry removes a's node from outside: a and b learn it from their own connections, in
    // no order ZooKeeper guarantees, so a's last term may end a few ms late (the bug was seconds).
    // Two leaders are read only then, for at most that slack once b leads; never during the flaps.
    let two_at = &sampled.two_at;
    assert!(two_at.iter().all(|at| *at >= expired_at), "a sampler pass read two leaders before the expiry");
    if let (Some(first), Some(last)) = (two_at.first(), two_at.last()) {
        assert!(
            *last - *first <= REMOVAL_NOTIFICATION_SLACK,
            "sampler passes read two leaders for {:?} after the expiry",
            *last - *first
        );
    }
    for i in sampled.intervals.iter_mut().chain(recorded.iter_mut()).filter(|i| i.who == "a" && i.start <= expired_at) {
        i.soft_end = Some(REMOVAL_NOTIFICATION_SLACK);
    }
    assert_one_leader(&sampled.intervals, "CURATOR-620 sampled");
    assert_one_leader(&recorded, "CURATOR-620 recorded");
    close_all(&latches).await;
    assert!(support::eventually_no_children(&connect, &path, WITHIN).await.is_empty());
}

/// Found by the test above (phase 2 right after phase 1's last flap): `zookeeper-client` reports
/// SyncConnected on the connect response, before the reconnected session is established; when
/// the server closes that connection in between (here: `expire_session` taking the session over),
/// nothing reports the disconnect until the next TCP connect, so the old leader kept reporting
/// leadership (Held on a dead connection) next to the new one — 0.8 to 1.6 s in our runs, and on
/// a real partition up to 1.4 × the session timeout. Each round: the leader reconnects after a
/// cut and, as soon as its client says connected, its session is expired from outside.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnect_racing_expiry_never_yields_two_leaders() {
    support::init_tracing();
    const ROUNDS: usize = 8;
    let server = fault_server().await;
    let connect = server.connect_string();
    let proxy = FaultProxy::start(&connect).await.expect("proxy");
    let obs = support::observer(&connect).await;
    let path = support::unique_path("reconnect-expiry");
    let a = short_client(&proxy.connect_string(), Duration::from_secs(4)).await;
    let b = support::client(&connect).await;
    let la = Arc::new(LeaderLatch::new(&a, &path, "a").unwrap());
    la.start().unwrap();
    let mut intervals = Vec::new();
    let mut overlapping_passes = 0;
    for round in 0..ROUNDS {
        assert!(la.await_leadership_timeout(WITHIN).await.unwrap(), "round {round}: a leads");
        let lb = Arc::new(LeaderLatch::new(&b, &path, format!("b{round}")).unwrap());
        lb.start().unwrap();
        support::eventually_queued(&obs, &path, 2, "b queued").await;
        let sampler = Sampler::start(vec![la.clone(), lb.clone()]);
        proxy.set_mode(ProxyMode::Cut);
        tokio::time::sleep(Duration::from_millis(100)).await;
        proxy.set_mode(ProxyMode::Pass);
        support::eventually(WITHIN, "a reconnects", || async { a.is_connected() }).await;
        let _ = expire_session(&connect, &a).await;
        assert!(lb.await_leadership_timeout(WITHIN).await.unwrap(), "round {round}: b leads");
        support::eventually(WITHIN, "a queued again", || async {
            !la.has_leadership() && support::sorted_children(&obs, &path).await.len() == 2
        })
        .await;
        let sampled = sampler.finish();
        overlapping_passes += sampled.passes_with_two;
        intervals.extend(sampled.intervals);
        lb.close().await.unwrap();
    }
    println!("reconnect racing expiry: {overlapping_passes} sampler passes read two leaders");
    // The expiry removes the old leader's node from outside (see EXTERNAL_DELETE_SLACK): the
    // notifications of the two participants are not ordered, so a few milliseconds are tolerated;
    // the bug was hundreds of milliseconds to seconds.
    for i in intervals.iter_mut().filter(|i| i.who == "a") {
        i.soft_end = Some(REMOVAL_NOTIFICATION_SLACK);
    }
    assert_one_leader(&intervals, "reconnect racing expiry");
    la.close().await.unwrap();
    assert!(support::eventually_no_children(&connect, &path, WITHIN).await.is_empty());
}

/// How long two participants may both report leadership when a node is removed from outside
/// and both learn it from their own connection at about the same moment (a scheduling race, not
/// a stale leader).
const REMOVAL_NOTIFICATION_SLACK: Duration = Duration::from_millis(100);

// =============================================================================================
// CURATOR-653: two leaders after a ZooKeeper ensemble leader switch
// =============================================================================================

/// CURATOR-653: after the ensemble's leader changed, Curator's latch could report leadership next
/// to another participant. Three participants, each connected to one ensemble member only; the
/// latch leader sits on the ensemble leader, which is killed: its participant is cut off (and
/// gives up at 0.85 of its session timeout), another participant takes over — never both. Once
/// the killed member is back, its participant queues again and exactly one leads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensemble_leader_switch_never_yields_two_leaders() {
    support::init_tracing();
    let mut cluster = TestingCluster::start(3).await.expect("start a 3-node ensemble");
    let path = support::unique_path("ensemble-653");
    let zk_leader = cluster.leader().await.expect("an ensemble leader");
    // Participant i talks to member i only. Session 4 s: an election (about a second here) does
    // not expire the sessions on the surviving members.
    let mut clients = Vec::new();
    let mut latches = Vec::new();
    let order: Vec<usize> = std::iter::once(zk_leader).chain((0..3).filter(|i| *i != zk_leader)).collect();
    for &i in &order {
        let client = short_client(&cluster.node_connect_string(i), Duration::from_secs(4)).await;
        let latch = Arc::new(LeaderLatch::new(&client, &path, format!("p{i}")).unwrap());
        latch.start().unwrap();
        if latches.is_empty() {
            latch.await_leadership().await.unwrap();
        }
        clients.push(client);
        latches.push(latch);
    }
    // The observer may use any member (it fails over when its member is killed).
    let obs_connect = cluster.connect_string();
    let obs = support::observer(&obs_connect).await;
    support::eventually_queued(&obs, &path, 3, "all three queued").await;
    assert_eq!(leaders(&latches), [format!("p{zk_leader}")]);
    let sampler = Sampler::start(latches.clone());
    let records = Records::start(&latches);

    let killed = Instant::now();
    cluster.kill(zk_leader).await.expect("kill the ensemble leader");
    cluster.wait_for_quorum(Duration::from_secs(30)).await.expect("a new ensemble leader");
    let new_zk_leader = cluster.leader().await;
    // The cut-off participant gives up; one of the others leads.
    let leader = exactly_one_leader(&latches[1..], "a surviving participant leads").await;
    println!(
        "CURATOR-653: member {zk_leader} killed, member {new_zk_leader:?} leads the ensemble, {leader} leads the latch after {:?}",
        killed.elapsed()
    );
    assert!(!latches[0].has_leadership(), "the cut-off participant does not lead");

    // The member comes back: its participant reconnects (a new session), queues again, and
    // exactly one leads.
    cluster.restart(zk_leader).await.expect("restart the old leader");
    cluster.wait_for_quorum(Duration::from_secs(30)).await.expect("full quorum again");
    support::eventually(Duration::from_secs(30), "the cut-off participant queued again", || async {
        clients[0].is_connected() && support::sorted_children(&obs, &path).await.len() == 3
    })
    .await;

    // A second switch: kill whichever member leads now.
    let zk_leader2 = cluster.leader().await.expect("an ensemble leader");
    cluster.kill(zk_leader2).await.expect("kill the ensemble leader again");
    cluster.wait_for_quorum(Duration::from_secs(30)).await.expect("a new ensemble leader");
    let survivors: Vec<Arc<LeaderLatch>> =
        order.iter().zip(&latches).filter(|(i, _)| **i != zk_leader2).map(|(_, l)| l.clone()).collect();
    let leader2 = exactly_one_leader(&survivors, "one participant leads after the second switch").await;
    println!("CURATOR-653: member {zk_leader2} killed; {leader2} leads the latch");
    cluster.restart(zk_leader2).await.expect("restart");
    cluster.wait_for_quorum(Duration::from_secs(30)).await.expect("full quorum again");
    support::eventually(Duration::from_secs(30), "all three queued after the second switch", || async {
        clients.iter().all(|c| c.is_connected()) && support::sorted_children(&obs, &path).await.len() == 3
    })
    .await;
    exactly_one_leader(&latches, "exactly one leader once the quorum is whole").await;

    let sampled = sampler.finish();
    let recorded = records.finish().await;
    assert_eq!(sampled.passes_with_two, 0, "a sampler pass read two leaders");
    assert_one_leader(&sampled.intervals, "CURATOR-653 sampled");
    assert_one_leader(&recorded, "CURATOR-653 recorded");
    close_all(&latches).await;
    assert!(support::eventually_no_children(&obs_connect, &path, WITHIN).await.is_empty());
}

// =============================================================================================
// CURATOR-460: tolerating SUSPENDED must not yield two leaders
// =============================================================================================

/// CURATOR-460: with `SessionConnectionStateErrorPolicy`-style tolerance of SUSPENDED, a Curator
/// leader cut off from the ensemble kept leading until it heard LOST — which it only hears after
/// reconnecting, long after the server expired its session and another participant took over.
/// Here the leader's link goes silent (blackhole) until the server expires its session: the old
/// leader's last `true` read comes before the new leader's first `true` read, both read by the
/// same sampler (our Lost comes at 0.85 of the session timeout after the last reply, before the
/// server can expire the session; `has_leadership` is false from Suspended on).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_leader_stops_before_the_next_one_starts() {
    support::init_tracing();
    const TRIALS: usize = 3;
    let server = fault_server().await;
    let connect = server.connect_string();
    let proxy = FaultProxy::start(&connect).await.expect("proxy");
    let obs = support::observer(&connect).await;
    let path = support::unique_path("silent-460");
    let a = short_client(&proxy.connect_string(), Duration::from_secs(2)).await;
    let b = support::client(&connect).await;
    let la = Arc::new(LeaderLatch::new(&a, &path, "a").unwrap());
    la.start().unwrap();
    la.await_leadership().await.unwrap();
    let mut all = Vec::new();
    for trial in 0..TRIALS {
        assert!(la.await_leadership_timeout(WITHIN).await.unwrap(), "trial {trial}: a leads");
        let lb = Arc::new(LeaderLatch::new(&b, &path, format!("b{trial}")).unwrap());
        lb.start().unwrap();
        support::eventually_queued(&obs, &path, 2, "b queued").await;
        let sampler = Sampler::start(vec![la.clone(), lb.clone()]);
        let records = Records::start(&[la.clone(), lb.clone()]);
        // a's 2 s session can be suspended for a moment on a loaded machine: its token is read
        // while it leads held.
        let a_token = loop {
            if let Some(token) = la.fencing_token() {
                break token.value();
            }
            assert!(la.await_leadership_timeout(WITHIN).await.unwrap(), "trial {trial}: a leads again");
        };
        let session = a.session_id();

        // a has just heard from the server (worst case for its timer); then silence.
        touch(&a).await;
        let silenced = Instant::now();
        proxy.set_mode(ProxyMode::Blackhole);
        assert!(lb.await_leadership_timeout(WITHIN).await.unwrap(), "trial {trial}: b leads after a's expiry");
        tokio::time::sleep(Duration::from_millis(100)).await;
        let sampled = sampler.finish();
        let recorded = records.finish().await;
        let last_a = sampled.intervals.iter().filter(|i| i.who == "a").map(|i| i.end).max().expect("a was sampled");
        let first_b = sampled
            .intervals
            .iter()
            .filter(|i| i.who == lb.id())
            .map(|i| i.start)
            .min()
            .expect("b was sampled leading");
        println!(
            "CURATOR-460 trial {trial}: a's last leading read +{:?}, b's first +{:?} after the silence (gap {:?})",
            last_a - silenced,
            first_b - silenced,
            first_b.saturating_duration_since(last_a)
        );
        assert!(last_a < first_b, "trial {trial}: a still read leading {:?} after b started", last_a - first_b);
        assert_eq!(sampled.passes_with_two, 0, "trial {trial}: a sampler pass read two leaders");
        assert_one_leader(&sampled.intervals, "CURATOR-460 sampled");
        assert_one_leader(&recorded, "CURATOR-460 recorded");
        assert!(lb.fencing_token().unwrap().value() > a_token);
        all.extend(sampled.intervals);

        // The link comes back: a is on a new session and queues behind b; b hands over.
        proxy.set_mode(ProxyMode::Pass);
        support::session_replaced(&a, session).await;
        support::eventually_queued(&obs, &path, 2, "a queued again").await;
        assert!(!la.has_leadership());
        lb.close().await.unwrap();
    }
    assert_one_leader(&all, "CURATOR-460 all trials");
    la.close().await.unwrap();
    assert!(support::eventually_no_children(&connect, &path, WITHIN).await.is_empty());
}

// =============================================================================================
// CURATOR-644/645: reset storm / livelock on a flapping connection
// =============================================================================================

/// CURATOR-644 / CURATOR-645: Curator's latch reset (deleted and re-created its node) on every
/// reconnect, so a flapping connection produced a storm of nodes and could livelock (never
/// leading). Here both participants sit behind flapping links (20 cuts of 100-300 ms each, well
/// within the 4 s session): a node is only ever created again after a Lost, so with the sessions
/// surviving exactly one node per participant is created; and once the link is stable the
/// leader leads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flapping_connection_creates_no_node_storm() {
    support::init_tracing();
    let seed = support::seed("LEADER_FAULTS_SEED");
    let mut rng = StdRng::seed_from_u64(seed);
    let server = fault_server().await;
    let connect = server.connect_string();
    let pa = FaultProxy::start(&connect).await.expect("proxy a");
    let pb = FaultProxy::start(&connect).await.expect("proxy b");
    let obs = support::observer(&connect).await;
    let path = support::unique_path("storm-644");
    let a = short_client(&pa.connect_string(), Duration::from_secs(4)).await;
    let b = short_client(&pb.connect_string(), Duration::from_secs(4)).await;
    let la = Arc::new(LeaderLatch::new(&a, &path, "a").unwrap());
    let lb = Arc::new(LeaderLatch::new(&b, &path, "b").unwrap());
    la.start().unwrap();
    la.await_leadership().await.unwrap();
    lb.start().unwrap();
    support::eventually_queued(&obs, &path, 2, "b queued").await;
    let latches = vec![la.clone(), lb.clone()];
    let sessions = (a.session(), b.session());
    let a_node = la.hold().unwrap().path().to_string();
    assert_eq!(creates_under(&obs, &path).await, 2);

    // Distinct node names seen by a watching observer (a lower bound of the creates; the cversion
    // count below is exact).
    let seen = Arc::new(Mutex::new(std::collections::BTreeSet::new()));
    let watcher = {
        let (seen, path, connect) = (seen.clone(), path.clone(), connect.clone());
        crate::support::spawn(async move {
            let obs = support::observer(&connect).await;
            loop {
                let Ok((children, w)) = obs.list_and_watch_children(&path).await else { return };
                seen.lock().unwrap().extend(children);
                w.changed().await;
            }
        })
    };
    let sampler = Sampler::start(latches.clone());
    let storm_start = Instant::now();
    for n in 0..20 {
        let proxy = match n % 3 {
            0 => &pa,
            1 => &pb,
            _ => {
                pb.set_mode(ProxyMode::Cut);
                &pa
            }
        };
        proxy.set_mode(ProxyMode::Cut);
        tokio::time::sleep(Duration::from_millis(rng.gen_range(100..300))).await;
        pa.set_mode(ProxyMode::Pass);
        pb.set_mode(ProxyMode::Pass);
        tokio::time::sleep(Duration::from_millis(rng.gen_range(50..200))).await;
    }
    println!("CURATOR-644: 20 cuts in {:?}", storm_start.elapsed());
    // Stable again: one participant leads (no livelock) — a, on its original node, unless the
    // flaps cost it its session (a reconnect can keep landing in a cut; printed below).
    let leader = exactly_one_leader(&latches, "one participant leads once the links are stable").await;
    if a.session() == sessions.0 {
        assert_eq!(leader, "a", "a kept its session, so it still leads");
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    watcher.abort();
    // In this order: every name the watcher saw was created before the count, and every create
    // the count includes after a lost session comes after that loss is visible here.
    let distinct = seen.lock().unwrap().len();
    let creates = creates_under(&obs, &path).await;
    // Counted by session epochs: a client can lose its replacement session too (a reconnect that
    // keeps landing in a cut on a stalled machine), and each session makes at most one node.
    let sessions_lost = (a.session().epoch - sessions.0.epoch) + (b.session().epoch - sessions.1.epoch);
    println!("CURATOR-644: {creates} latch nodes created in all ({distinct} distinct names seen), {sessions_lost} sessions lost");
    // Bound: one node per participant, plus one per session lost (a node is created again only
    // after Lost). The cuts are far shorter than 0.85 × 4 s, so no session should be lost; if the
    // machine stalls one, the bound still holds.
    assert!(creates <= 2 + sessions_lost as i64, "node storm: {creates} creates, {sessions_lost} sessions lost");
    assert!(distinct as i64 <= creates);
    if sessions_lost == 0 {
        assert_eq!(la.hold().unwrap().path(), a_node, "a kept its node");
    }
    assert_eq!(support::sorted_children(&obs, &path).await.len(), 2);
    let sampled = sampler.finish();
    assert_eq!(sampled.passes_with_two, 0);
    assert_one_leader(&sampled.intervals, "CURATOR-644 sampled");
    close_all(&latches).await;
    assert!(support::eventually_no_children(&connect, &path, WITHIN).await.is_empty());
}

// =============================================================================================
// CURATOR-171: an operator deletes the leader's node
// =============================================================================================

/// How long an old leader whose node was deleted from outside may still report leadership after
/// the next one started: the two learn of the delete from two connections, in no order ZooKeeper
/// guarantees (see `OVERLAP_BOUND` in leader/latch.rs). A hang guard, not a timing claim.
const EXTERNAL_DELETE_SLACK: Duration = Duration::from_secs(2);

/// Every interval of a leadership (a participant's node: who and token) that the test removed
/// from outside gets a soft end: the holder may also have resumed it (Suspended, then Held again)
/// just before the server removed the node — e.g. when a server-side expiry raced its reconnect.
fn soften_external_removals(intervals: &mut [LeadInterval], removed: &[(String, i64)]) {
    for (who, token) in removed {
        for i in intervals.iter_mut().filter(|i| &i.who == who && i.token == Some(*token)) {
            i.soft_end = Some(EXTERNAL_DELETE_SLACK);
        }
    }
}

/// CURATOR-171: Curator's leader did not notice its node being deleted (by an operator forcing a
/// failover) and kept leading. Here, five times: the old leader stops reporting leadership
/// (`lost()` resolves), queues again with a new node, the other participant leads, and fencing
/// tokens increase. Overlap is measured and reported; it is tolerated only at an external delete
/// and only within the hang guard above (leader/latch.rs covers the single step-down).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_leader_node_fails_over_without_two_leaders() {
    support::init_tracing();
    let server = fault_server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("delete-171");
    let a = support::client(&connect).await;
    let b = support::client(&connect).await;
    let latches =
        vec![Arc::new(LeaderLatch::new(&a, &path, "a").unwrap()), Arc::new(LeaderLatch::new(&b, &path, "b").unwrap())];
    latches[0].start().unwrap();
    latches[0].await_leadership().await.unwrap();
    latches[1].start().unwrap();
    support::eventually_queued(&obs, &path, 2, "b queued").await;
    let sampler = Sampler::start(latches.clone());
    let mut deletes = Vec::new();
    for round in 0..5 {
        let leader = exactly_one_leader(&latches, "one leader").await;
        let (old, new) = if leader == "a" { (&latches[0], &latches[1]) } else { (&latches[1], &latches[0]) };
        let hold = old.hold().unwrap();
        let lost = {
            let old = old.clone();
            crate::support::spawn(async move { old.lost().await })
        };
        tokio::task::yield_now().await;
        deletes.push((old.id().to_string(), hold.fencing_token().value()));
        obs.delete(hold.path(), None).await.expect("operator delete");
        support::join("lost() resolves", WITHIN, lost).await;
        assert!(!old.has_leadership(), "round {round}: lost() resolved, so no leadership");
        assert!(new.await_leadership_timeout(WITHIN).await.unwrap(), "round {round}: the other leads");
        support::eventually(WITHIN, "the old leader queued again with a new node", || async {
            let children = support::sorted_children(&obs, &path).await;
            children.len() == 2 && !children.iter().any(|c| hold.path().ends_with(c.as_str()))
        })
        .await;
        assert_eq!(leaders(&latches), [new.id()], "round {round}");
        assert!(new.fencing_token().unwrap() > hold.fencing_token());
    }
    let mut sampled = sampler.finish();
    soften_external_removals(&mut sampled.intervals, &deletes);
    let tolerated = assert_one_leader(&sampled.intervals, "CURATOR-171 sampled");
    println!(
        "CURATOR-171: largest overlap at an external delete {tolerated:?} ({} passes read two leaders)",
        sampled.passes_with_two
    );
    close_all(&latches).await;
    assert!(support::eventually_no_children(&connect, &path, WITHIN).await.is_empty());
}

// =============================================================================================
// Rust and Curator participants together under faults
// =============================================================================================

/// Curator's `RELEASED` line is printed after its `close()` deleted the node, so the next leader
/// may start before we read it: Curator intervals have a soft end, tolerated by this much (the
/// JVM's print and our pipe read; normally a few ms). Curator's `ACQUIRED` line is read after it
/// became leader too, so its interval starts late: a Rust leader that overlapped the first
/// moments of Curator's leadership would go unseen by this checker for that delay — the
/// measurement is weaker there, and we say so rather than pretend otherwise.
const CURATOR_SLACK: Duration = Duration::from_millis(500);

/// One Curator `LeaderLatch` participant per JVM, one after the other: each waits, leads for
/// `hold` seconds, closes. Its intervals are stamped when we read its lines.
fn curator_participants(
    connect: String,
    path: String,
    hold: u64,
    stop: Arc<AtomicBool>,
    log: Arc<Mutex<Vec<LeadInterval>>>,
) -> tokio::task::JoinHandle<usize> {
    crate::support::spawn(async move {
        use tokio::io::AsyncBufReadExt;
        let mut runs = 0;
        while !stop.load(Ordering::SeqCst) {
            runs += 1;
            let id = format!("curator{runs}");
            let mut child = tokio::process::Command::new(support::curator_hold::run_sh())
                .args([connect.as_str(), "hold", path.as_str(), &hold.to_string(), &format!("latch:{id}")])
                .env("CURATOR_BENCH_BUILD", support::curator_hold::bench_build_dir())
                .env("SESSION_TIMEOUT_MS", "4000")
                .stdout(std::process::Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .expect("run the Curator latch");
            let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
            let mut start = None;
            while let Ok(Some(line)) = lines.next_line().await {
                if line.starts_with("ACQUIRED") {
                    start = Some(Instant::now());
                } else if line.starts_with("RELEASED") {
                    let end = Instant::now();
                    let start = start.expect("RELEASED after ACQUIRED");
                    log.lock().unwrap().push(LeadInterval {
                        who: id.clone(),
                        start,
                        end,
                        token: None,
                        soft_end: Some(CURATOR_SLACK),
                    });
                }
            }
            let status = child.wait().await.expect("Curator exit");
            assert!(status.success(), "Curator participant {id} failed: {status}");
        }
        runs
    })
}

/// Two Rust latches (each behind its own proxy, session 3 s) and a real Curator `LeaderLatch`
/// (a new JVM each time it has led for 2 s) on one path, for about 25 s of faults aimed at the
/// Rust participants only: server-side expiry of a session, an operator's delete of a Rust
/// leader's node, short cuts, and a blackhole until the server expires the session. (The Curator
/// participant is left alone: its bench harness cannot report losing leadership, and Curator
/// tolerating a SUSPENDED is known unsafe — CURATOR-460.) The checker builds every participant's
/// intervals and asserts no overlap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_and_curator_participants_never_lead_together() {
    support::init_tracing();
    let seed = support::seed("LEADER_FAULTS_SEED");
    let mut rng = StdRng::seed_from_u64(seed);
    let server = fault_server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("mixed");
    let proxies = [FaultProxy::start(&connect).await.unwrap(), FaultProxy::start(&connect).await.unwrap()];
    let mut clients = Vec::new();
    let mut latches = Vec::new();
    for (i, proxy) in proxies.iter().enumerate() {
        let client = short_client(&proxy.connect_string(), Duration::from_secs(3)).await;
        let latch = Arc::new(LeaderLatch::new(&client, &path, format!("rust{i}")).unwrap());
        latch.start().unwrap();
        clients.push(client);
        latches.push(latch);
    }
    exactly_one_leader(&latches, "a Rust participant leads").await;
    let sampler = Sampler::start(latches.clone());
    let stop = Arc::new(AtomicBool::new(false));
    let curator_log = Arc::new(Mutex::new(Vec::new()));
    let curator = curator_participants(connect.clone(), path.clone(), 2, stop.clone(), curator_log.clone());
    // External removals of a Rust participant's granted node (delete, server-side expiry):
    // (who, token).
    let mut deletes = Vec::new();

    let started = Instant::now();
    let mut n = 0usize;
    while started.elapsed() < Duration::from_secs(25) {
        // The Rust participant that leads now, or a random one.
        let target = latches.iter().position(|l| l.has_leadership()).unwrap_or_else(|| rng.gen_range(0..2));
        let (latch, client, proxy) = (&latches[target], &clients[target], &proxies[target]);
        match n % 4 {
            0 => {
                if let Some(hold) = latch.hold() {
                    deletes.push((latch.id().to_string(), hold.fencing_token().value()));
                }
                let _ = expire_session(&connect, client).await;
            }
            1 => {
                if let Some(hold) = latch.hold().filter(|_| latch.has_leadership()) {
                    deletes.push((latch.id().to_string(), hold.fencing_token().value()));
                    let _ = obs.delete(hold.path(), None).await;
                }
            }
            2 => {
                for _ in 0..3 {
                    proxy.set_mode(ProxyMode::Cut);
                    tokio::time::sleep(Duration::from_millis(rng.gen_range(50..250))).await;
                    proxy.set_mode(ProxyMode::Pass);
                    tokio::time::sleep(Duration::from_millis(rng.gen_range(50..250))).await;
                }
            }
            _ => {
                // Silence until the server expires the session (3 s + a tick).
                proxy.set_mode(ProxyMode::Blackhole);
                tokio::time::sleep(Duration::from_millis(3600)).await;
                proxy.set_mode(ProxyMode::Pass);
            }
        }
        n += 1;
        tokio::time::sleep(Duration::from_millis(rng.gen_range(500..1500))).await;
    }
    stop.store(true, Ordering::SeqCst);
    // The Rust participants step aside so the last Curator run can lead, release and exit.
    close_all(&latches).await;
    let runs = support::join("Curator participants", Duration::from_secs(60), curator).await;
    let mut intervals = sampler.finish().intervals;
    soften_external_removals(&mut intervals, &deletes);
    let curator_intervals = curator_log.lock().unwrap().clone();
    println!(
        "mixed: {} faults, {} Rust intervals, {} Curator runs, {} Curator intervals",
        n,
        intervals.len(),
        runs,
        curator_intervals.len()
    );
    assert!(!curator_intervals.is_empty(), "Curator never led: the run did not mix participants");
    intervals.extend(curator_intervals);
    // Soft ends (Curator's late RELEASED, an external delete or expiry) each within its own bound.
    let tolerated = assert_one_leader(&intervals, "mixed");
    println!("mixed: largest tolerated soft-end overlap {tolerated:?}");
    assert!(support::eventually_no_children(&connect, &path, WITHIN).await.is_empty());
}
