//! Cancel safety of `InterProcessMutex` against a real ZooKeeper: an acquire future dropped at any
//! await point (during the protected create, before its reply, while waiting for the predecessor,
//! or after the node already won) leaves no node behind and no stuck waiter, and takes no hold.
//!
//! Cancellation styles mixed at random (seeded; set `CANCEL_SEED` to replay a run):
//! `tokio::time::timeout` around `acquire()` / `lock()` / `acquire_timeout()`, `tokio::select!`
//! against a sleep, and a `lock()` future polled exactly once and dropped (`now_or_never`).
//! Delays: 15 % zero (first poll only: the create is sent but its reply cannot have been read),
//! 65 % uniform in 0..5 ms (around the local round trip: cancels during the create, right after it,
//! or early in the wait), 20 % in 5..60 ms (cancels while waiting on the predecessor's watch).
//!
//! A recursive watch on the lock path records every node created and deleted, in server order, so
//! the tests can count how many cancelled acquires had created a node and how many of those nodes
//! were at the head of the queue (i.e. had won the lock) when they were abandoned.

use crate::support;

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use zk_curator::locks::InterProcessMutex;
use zk_curator::raw as zkc;
use zk_curator::CuratorClient;

const ITERATIONS: usize = 400;

/// A random generator seeded from `CANCEL_SEED` or the clock; the seed is printed for a replay.
fn seeded_rng() -> StdRng {
    let seed = std::env::var("CANCEL_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    });
    println!("CANCEL_SEED={seed}");
    StdRng::seed_from_u64(seed)
}

// ---------------------------------------------------------------------------------------------
// Node log: every create / delete under the lock path, in server order.
// ---------------------------------------------------------------------------------------------

struct NodeLog {
    events: Arc<Mutex<Vec<(zkc::EventType, String)>>>,
    task: tokio::task::JoinHandle<()>,
    _zk: zkc::Client,
}

impl NodeLog {
    async fn start(connect: &str, path: &str) -> NodeLog {
        let zk = support::observer(connect).await;
        let mut watcher = zk.watch(path, zkc::AddWatchMode::PersistentRecursive).await.expect("recursive watch");
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = events.clone();
        let prefix = format!("{path}/");
        let task = crate::support::spawn(async move {
            loop {
                let event = watcher.changed().await;
                match event.event_type {
                    zkc::EventType::NodeCreated | zkc::EventType::NodeDeleted if event.path.starts_with(&prefix) => {
                        sink.lock().push((event.event_type, support::node_name(&event.path).to_string()))
                    }
                    zkc::EventType::Session if event.session_state.is_terminated() => return,
                    _ => {}
                }
            }
        });
        NodeLog { events, task, _zk: zk }
    }

    /// (nodes created, nodes that were at the head of the queue at some moment) so far.
    fn analyse(&self) -> (Vec<String>, HashSet<String>) {
        let events = self.events.lock().clone();
        let mut live: BTreeMap<u64, String> = BTreeMap::new();
        let mut created = Vec::new();
        let mut were_first = HashSet::new();
        for (kind, name) in events {
            let seq: u64 = name[name.len() - 10..].parse().expect("sequence suffix");
            if kind == zkc::EventType::NodeCreated {
                created.push(name.clone());
                live.insert(seq, name);
            } else {
                live.remove(&seq);
            }
            if let Some((_, first)) = live.first_key_value() {
                were_first.insert(first.clone());
            }
        }
        (created, were_first)
    }
}

impl Drop for NodeLog {
    fn drop(&mut self) {
        self.task.abort();
    }
}

// ---------------------------------------------------------------------------------------------
// The churn: many acquires, each cancelled (or, if the lock is free, possibly completed).
// ---------------------------------------------------------------------------------------------

#[derive(Default)]
struct Tally {
    /// Acquires that completed before their cancellation (only possible when the lock is free);
    /// the node names they held (released right away).
    completed: Vec<String>,
    /// Futures dropped after their first poll (create sent, reply unread).
    cancelled_first_poll: usize,
    /// Dropped with a delay below 5 ms.
    cancelled_short: usize,
    /// Dropped with a delay of 5 ms or more.
    cancelled_long: usize,
    /// Dropped while the test SAW our contender node in ZooKeeper (surely waiting or won).
    cancelled_with_node_seen: usize,
}

async fn churn(
    mutex: &InterProcessMutex,
    rng: &mut StdRng,
    iterations: usize,
    lock_is_held_elsewhere: bool,
    obs: &zkc::Client,
    path: &str,
) -> Tally {
    let mut tally = Tally::default();
    for i in 0..iterations {
        let delay = match rng.gen_range(0..100) {
            0..=14 => Duration::ZERO,
            15..=79 => Duration::from_micros(rng.gen_range(0..5000)),
            _ => Duration::from_millis(rng.gen_range(5..60)),
        };
        // Every 40th iteration: drop the future only once our node is visible in ZooKeeper.
        let style = if i % 40 == 39 { 5 } else { rng.gen_range(0..5) };
        let completed: Option<String> = match style {
            0 => match tokio::time::timeout(delay, mutex.acquire()).await {
                Ok(result) => {
                    result.expect("acquire");
                    let node = mutex.lock_node_path().expect("holder has a node");
                    mutex.release().await.expect("release");
                    Some(node)
                }
                Err(_) => None,
            },
            1 => tokio::select! {
                result = mutex.acquire() => {
                    result.expect("acquire");
                    let node = mutex.lock_node_path().expect("holder has a node");
                    mutex.release().await.expect("release");
                    Some(node)
                }
                _ = tokio::time::sleep(delay) => None,
            },
            2 => match tokio::time::timeout(delay, mutex.lock()).await {
                Ok(guard) => {
                    let guard = guard.expect("lock");
                    let node = guard.node_path().to_string();
                    guard.release().await.expect("release");
                    Some(node)
                }
                Err(_) => None,
            },
            3 => match mutex.lock().now_or_never() {
                Some(guard) => {
                    let guard = guard.expect("lock");
                    let node = guard.node_path().to_string();
                    guard.release().await.expect("release");
                    Some(node)
                }
                None => {
                    tally.cancelled_first_poll += 1;
                    continue_checks(mutex, lock_is_held_elsewhere, None);
                    continue;
                }
            },
            4 => match tokio::time::timeout(delay, mutex.acquire_timeout(Duration::from_secs(10))).await {
                Ok(result) => {
                    assert!(result.expect("acquire_timeout"), "a 10 s acquire_timeout gave up");
                    let node = mutex.lock_node_path().expect("holder has a node");
                    mutex.release().await.expect("release");
                    Some(node)
                }
                Err(_) => None,
            },
            _ => {
                let before: HashSet<String> = support::sorted_children(obs, path).await.into_iter().collect();
                let fut = mutex.lock();
                tokio::pin!(fut);
                let seen = async {
                    let deadline = Instant::now() + Duration::from_secs(5);
                    loop {
                        if support::sorted_children(obs, path).await.iter().any(|k| !before.contains(k)) {
                            return true;
                        }
                        if Instant::now() >= deadline {
                            return false;
                        }
                        tokio::time::sleep(Duration::from_millis(2)).await;
                    }
                };
                tokio::select! {
                    biased;
                    guard = &mut fut => {
                        let guard = guard.expect("lock");
                        let node = guard.node_path().to_string();
                        guard.release().await.expect("release");
                        Some(node)
                    }
                    seen = seen => {
                        assert!(seen, "our contender node never appeared");
                        tally.cancelled_with_node_seen += 1;
                        None
                    }
                }
            }
        };
        match &completed {
            Some(node) => tally.completed.push(support::node_name(node).to_string()),
            None if style == 5 => {}
            None if delay.is_zero() => tally.cancelled_first_poll += 1,
            None if delay < Duration::from_millis(5) => tally.cancelled_short += 1,
            None => tally.cancelled_long += 1,
        }
        continue_checks(mutex, lock_is_held_elsewhere, completed.as_deref());
    }
    tally
}

impl std::fmt::Debug for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tally")
            .field("completed", &self.completed.len())
            .field("cancelled_first_poll", &self.cancelled_first_poll)
            .field("cancelled_short", &self.cancelled_short)
            .field("cancelled_long", &self.cancelled_long)
            .field("cancelled_with_node_seen", &self.cancelled_with_node_seen)
            .finish()
    }
}

fn continue_checks(mutex: &InterProcessMutex, lock_is_held_elsewhere: bool, completed: Option<&str>) {
    if lock_is_held_elsewhere {
        assert!(completed.is_none(), "acquired {completed:?} while another client holds the lock");
    }
    assert!(!mutex.is_acquired_in_this_process(), "a cancelled (or released) acquire left a hold");
    assert!(mutex.lock_node_path().is_none());
}

/// Median duration of `n` uncancelled `acquire_timeout(ZERO)` calls (create + listing, and a
/// delete when the lock is taken): the scale the random delays are compared with.
async fn calibrate(mutex: &InterProcessMutex, n: usize) -> Duration {
    let mut times = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        if mutex.acquire_timeout(Duration::ZERO).await.unwrap() {
            times.push(t.elapsed());
            mutex.release().await.unwrap();
        } else {
            times.push(t.elapsed());
        }
    }
    times.sort();
    times[n / 2]
}

async fn no_pending_deletes(client: &CuratorClient) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while client.pending_background_deletes() > 0 {
        assert!(Instant::now() < deadline, "background deletes never finished");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Client A holds the lock; client B cancels hundreds of acquires at random points. Afterwards
/// only A's node exists, and once A releases, client C gets the lock at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_acquires_leave_nothing_behind_while_held() {
    support::init_tracing();
    let mut rng = seeded_rng();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("cancel-held");
    let log = NodeLog::start(&connect, &path).await;
    let a = support::client(&connect).await;
    let b = support::client(&connect).await;
    let ma = InterProcessMutex::new(&a, &path).unwrap();
    let mb = InterProcessMutex::new(&b, &path).unwrap();

    ma.acquire().await.unwrap();
    let a_node = support::node_name(&ma.lock_node_path().unwrap()).to_string();
    let rtt = calibrate(&mb, 10).await;
    let started = Instant::now();
    let tally = churn(&mb, &mut rng, ITERATIONS, true, &obs, &path).await;
    println!(
        "held: {ITERATIONS} cancelled acquires in {:?} (acquire_timeout(ZERO) median {rtt:?}): {tally:?}",
        started.elapsed()
    );
    assert!(tally.completed.is_empty());
    assert!(tally.cancelled_first_poll >= 20 && tally.cancelled_short >= 50 && tally.cancelled_long >= 20, "{tally:?}");
    assert!(tally.cancelled_with_node_seen >= 5, "{tally:?}");

    // No stray node: only the active holder's.
    let left = support::children_become(&obs, &path, std::slice::from_ref(&a_node), Duration::from_secs(5)).await;
    assert_eq!(left, vec![a_node.clone()], "stray contender nodes after cancelled acquires");
    assert!(!mb.is_acquired_in_this_process());
    no_pending_deletes(&b).await;

    let (created, _) = log.analyse();
    let by_b = created.iter().filter(|n| **n != a_node).count();
    println!("held: client B created {by_b} contender nodes, all deleted again");
    assert!(by_b >= ITERATIONS / 2, "most cancelled acquires got as far as creating a node: {by_b}");

    // No stuck waiter: A releases, C gets the lock at once, and B (whose futures are all gone)
    // does not hold it.
    ma.release().await.unwrap();
    let c = support::client(&connect).await;
    let mc = InterProcessMutex::new(&c, &path).unwrap();
    let t = Instant::now();
    assert!(mc.acquire_timeout(Duration::from_secs(2)).await.unwrap(), "C must get the freed lock");
    println!("held: C acquired after {:?}", t.elapsed());
    assert!(t.elapsed() < Duration::from_secs(1), "C waited for something: {:?}", t.elapsed());
    let c_node = support::node_name(&mc.lock_node_path().unwrap()).to_string();
    assert_eq!(support::sorted_children(&obs, &path).await, vec![c_node]);
    assert!(!mb.is_acquired_in_this_process());
    mc.release().await.unwrap();
    assert!(support::sorted_children(&obs, &path).await.is_empty());

    // B itself still works normally.
    assert!(mb.acquire_timeout(Duration::from_secs(2)).await.unwrap());
    mb.release().await.unwrap();
}

/// The lock is free: some cancelled acquires had already won (their node was first in line) when
/// they were dropped. Those nodes must be deleted too, and no hold may be left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_acquires_leave_nothing_behind_when_free() {
    support::init_tracing();
    let mut rng = seeded_rng();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("cancel-free");
    let log = NodeLog::start(&connect, &path).await;
    let b = support::client(&connect).await;
    let mb = InterProcessMutex::new(&b, &path).unwrap();

    let rtt = calibrate(&mb, 10).await;
    let started = Instant::now();
    let tally = churn(&mb, &mut rng, ITERATIONS, false, &obs, &path).await;
    println!("free: {ITERATIONS} acquires in {:?} (uncontended acquire median {rtt:?}): {tally:?}", started.elapsed());
    assert!(!mb.is_acquired_in_this_process(), "no hold after all the cancellations");

    let left = support::children_become(&obs, &path, &[], Duration::from_secs(5)).await;
    assert!(left.is_empty(), "stray nodes after cancelled acquires on a free lock: {left:?}");
    no_pending_deletes(&b).await;

    let (created, were_first) = log.analyse();
    let completed: HashSet<&String> = tally.completed.iter().collect();
    let cancelled_created = created.iter().filter(|n| !completed.contains(n)).count();
    let cancelled_winners = were_first.iter().filter(|n| !completed.contains(n)).count();
    println!(
        "free: {} nodes created, {cancelled_created} by cancelled acquires, {cancelled_winners} of which had won the \
         lock (first in line) when dropped; all deleted",
        created.len()
    );
    assert!(cancelled_created > 0 && cancelled_winners > 0, "the scenario was not exercised");

    let c = support::client(&connect).await;
    let mc = InterProcessMutex::new(&c, &path).unwrap();
    let t = Instant::now();
    assert!(mc.acquire_timeout(Duration::from_secs(2)).await.unwrap(), "C must get the free lock");
    assert!(t.elapsed() < Duration::from_secs(1), "C waited for something: {:?}", t.elapsed());
    mc.release().await.unwrap();
    assert!(!mb.is_acquired_in_this_process());
}
