//! A counter fault run: several of our clients (each behind its own `FaultProxy`) and a real
//! Curator peer (on a clean connection) increment one `DistributedAtomicLong` while our links are
//! cut, blackholed, made to lose replies, and our sessions expired. The checker trusts only the
//! server's final value and what each call reported:
//!
//! * every increment reported successful is in the final value exactly once (the post values of
//!   the successes are distinct, and the final value is at least their number);
//! * the increments whose outcome is unknown (an error: `OutcomeUnknown` after a lost reply, a
//!   deadline, a connection given up) add at most one each: `final = successes + k` with
//!   `0 <= k <= unknowns`;
//! * every call returns within its timeout, and every client increments again after the faults.
//!
//! A retry that re-applies a lost reply's increment (a blind retry, or a refused retry taken as
//! "not applied") makes `k` exceed the unknowns: the run then fails.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_curator::atomic::DistributedAtomicLong;
use zk_curator::testing::{expire_session, FaultProxy, Latency, ProxyMode, TestingServer};
use zk_curator::{CuratorClient, Error, ErrorKind, RetryNTimes};

use crate::support::{self, curator_peer::CuratorPeer};

/// Session timeout of our clients (server tick 200 ms): a blackhole longer than this expires it.
const SESSION: Duration = Duration::from_secs(2);
/// Every increment is bounded by this.
const CALL_TIMEOUT: Duration = Duration::from_secs(2);
/// What a timed call may take past its timeout (a hang guard, not a performance bound).
const SLACK: Duration = Duration::from_secs(2);
/// Our incrementing clients.
const CLIENTS: usize = 3;
/// Successful increments of the Curator peer.
const CURATOR_INCREMENTS: usize = 150;
/// Successful increments each client must make once the faults are over.
const AFTER_FAULTS: usize = 5;
const HANG: Duration = Duration::from_secs(120);

/// What one client's calls reported.
#[derive(Debug, Default)]
struct Tally {
    /// Post values of the increments reported successful.
    posts: Vec<i64>,
    /// Calls that gave up after losing every optimistic try (reported not applied).
    gave_up: usize,
    /// `Error::OutcomeUnknown`: a reply was lost and the node could not tell.
    lost_replies: usize,
    /// Other errors (deadline, connection or session given up): applied at most once.
    other_errors: usize,
}

impl Tally {
    fn unknowns(&self) -> usize {
        self.lost_replies + self.other_errors
    }
}

async fn fault_client(connect: &str) -> CuratorClient {
    CuratorClient::builder(connect)
        .session_timeout(SESSION)
        .connection_timeout(Duration::from_secs(1))
        .retry_policy(RetryNTimes::new(10, Duration::from_millis(100)))
        .connect()
        .await
        .expect("connect")
}

/// Increments until `stop`, then until `AFTER_FAULTS` more succeeded; every call within its
/// timeout.
async fn incrementer(who: usize, counter: DistributedAtomicLong, stop: Arc<AtomicBool>) -> Tally {
    let mut tally = Tally::default();
    let mut after = 0;
    while after < AFTER_FAULTS {
        let stopped = stop.load(Ordering::SeqCst);
        let start = Instant::now();
        let result = counter.increment().await;
        let took = start.elapsed();
        assert!(took < CALL_TIMEOUT + SLACK, "client {who}: an increment took {took:?} (timeout {CALL_TIMEOUT:?})");
        match result {
            Ok(r) if r.succeeded() => {
                assert_eq!(*r.post_value(), r.pre_value() + 1, "client {who}: a success is one step");
                tally.posts.push(*r.post_value());
                after += usize::from(stopped);
            }
            Ok(_) => tally.gave_up += 1,
            Err(Error::OutcomeUnknown { .. }) => tally.lost_replies += 1,
            Err(e) => {
                let kind = e.kind();
                assert!(
                    matches!(kind, ErrorKind::Retryable | ErrorKind::SessionLost | ErrorKind::DeadlineExceeded),
                    "client {who}: unexpected error {e}"
                );
                tally.other_errors += 1;
                // Let a broken connection be noticed rather than spin on it.
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    tally
}

/// The faults, in turn: a cut of one link, lost replies on every link, a short blackhole of one
/// link (the session survives), an expiry of one session (by the server after a long blackhole,
/// or closed from outside); after each, the links recover through random latency.
async fn faults(connect: &str, proxies: &[FaultProxy], clients: &[CuratorClient]) {
    const ROUNDS: usize = 12;
    for round in 0..ROUNDS {
        let i = round % proxies.len();
        match round % 4 {
            0 => {
                proxies[i].set_mode(ProxyMode::Cut);
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            1 => {
                // Whatever each client has in flight now is applied; its reply never comes.
                proxies.iter().for_each(|p| p.set_mode(ProxyMode::DropReplies));
                tokio::time::sleep(Duration::from_millis(400)).await;
            }
            2 => {
                proxies[i].set_mode(ProxyMode::Blackhole);
                tokio::time::sleep(Duration::from_millis(800)).await;
            }
            _ if round % 8 == 3 => {
                proxies[i].set_mode(ProxyMode::Blackhole);
                tokio::time::sleep(SESSION + Duration::from_secs(1)).await;
            }
            _ => expire_session(connect, &clients[i]).await.expect("expire a session"),
        }
        proxies.iter().for_each(|p| p.set_mode(ProxyMode::Pass));
        // Latency, one more fault: the links recover (reconnects, retries of unknown outcomes)
        // through random delays each way, cleared before the next fault.
        for proxy in proxies {
            let set = support::latency::set_random(proxy, &mut rand::thread_rng(), 200);
            println!("round {round}: latency {}", support::latency::describe(&set));
        }
        tokio::time::sleep(Duration::from_millis(400)).await;
        proxies.iter().for_each(|p| p.set_latency(Latency::NONE));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_increment_reported_successful_counts_exactly_once_through_cuts_blackholes_expiries_and_lost_replies() {
    support::init_tracing();
    let server = support::server_with(TestingServer::builder().tick_time(Duration::from_millis(200))).await;
    let connect = server.connect_string();
    let path = support::unique_path("atomic-faults");
    let mut proxies = Vec::new();
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        let proxy = FaultProxy::start(&connect).await.expect("proxy");
        clients.push(fault_client(&proxy.connect_string()).await);
        proxies.push(proxy);
    }
    let (mut peer, observer) = tokio::join!(CuratorPeer::start(&connect), support::client(&connect));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for (who, client) in clients.iter().enumerate() {
        let counter = DistributedAtomicLong::new(client, &path)
            .unwrap()
            .with_retry_policy(RetryNTimes::new(1000, Duration::from_millis(1)))
            .timeout(CALL_TIMEOUT);
        tasks.push(crate::support::spawn(incrementer(who, counter, stop.clone())));
    }

    let curator = async { peer.cmd(&format!("increment {path} {CURATOR_INCREMENTS}")).await };
    let (answer, ()) = tokio::join!(curator, faults(&connect, &proxies, &clients));
    stop.store(true, Ordering::SeqCst);

    let mut posts: Vec<i64> = answer
        .strip_prefix("INCREMENTED ")
        .unwrap_or_else(|| panic!("bad answer {answer}"))
        .split(',')
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(posts.len(), CURATOR_INCREMENTS);
    let mut total = Tally::default();
    for task in tasks {
        let tally = support::join("incrementer", HANG, task).await;
        println!(
            "client: {} successes, {} lost replies, {} other errors, {} gave up",
            tally.posts.len(),
            tally.lost_replies,
            tally.other_errors,
            tally.gave_up
        );
        posts.extend(&tally.posts);
        total.gave_up += tally.gave_up;
        total.lost_replies += tally.lost_replies;
        total.other_errors += tally.other_errors;
    }

    let final_value = *DistributedAtomicLong::new(&observer, &path).unwrap().get().await.unwrap().post_value();
    let successes = posts.len() as i64;
    let unknowns = total.unknowns() as i64;
    println!(
        "final {final_value}, successes {successes}, lost replies {}, other errors {}, gave up {}",
        total.lost_replies, total.other_errors, total.gave_up
    );
    posts.sort_unstable();
    let before = posts.len();
    posts.dedup();
    assert_eq!(posts.len(), before, "two successes reported the same post value");
    assert!(posts.iter().all(|&p| 1 <= p && p <= final_value), "a success's post value is past the final value");
    let k = final_value - successes;
    assert!(
        (0..=unknowns).contains(&k),
        "final {final_value} = {successes} successes + {k}, but only {unknowns} calls had an unknown outcome: \
         an increment applied twice or a success was lost"
    );
    assert!(total.lost_replies > 0, "the run never lost a reply of a set: it did not test what it should");
}
