//! Timed local waiters (a `try_lock_for`, a `lock()` under `tokio::time::timeout`, or both) whose
//! deadline fires right as the holder ahead of them hands the turn's node on: the hand-off either
//! reaches the timed waiter as a hold, or passes on to the next waiter; it is never lost, tokens
//! keep increasing, and nothing is left behind. The last timed waiter of a turn being acquired
//! keeps its deadline on a silent link. A guard's release cut short, or awaited on another
//! runtime, still hands on and deletes. A namespaced client's local queue: nodes go into the
//! namespace, paths are reported as the caller gave them.
//!
//! Run: `cargo nextest run --all-features --test testsuite local_queue::timed_waiters`.

use crate::support;

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use zk_curator::locks::{HoldState, InterProcessMutex, MutexGuard};
use zk_curator::testing::{FaultProxy, ProxyMode};
use zk_curator::{CuratorClient, Error, RetryNTimes};

const WITHIN: Duration = Duration::from_secs(20);
/// The timed waiter's timeout: long enough for the turn's node to be acquired first.
const WAIT: Duration = Duration::from_millis(250);
/// An upper bound against a hang only (never a performance assertion).
const HANG: Duration = Duration::from_secs(3);

type Locking = Pin<Box<dyn Future<Output = Option<MutexGuard>> + Send>>;

/// How the timed waiter waits.
#[derive(Clone, Copy, Debug)]
enum Timed {
    TryLockFor,
    LockUnderTimeout,
    TryLockForUnderTimeout,
}

fn timed(mutex: &InterProcessMutex, how: Timed) -> Locking {
    let mutex = mutex.clone();
    Box::pin(async move {
        match how {
            Timed::TryLockFor => mutex.try_lock_for(WAIT).await.expect("try_lock_for"),
            Timed::LockUnderTimeout => tokio::time::timeout(WAIT, mutex.lock()).await.ok().map(|g| g.expect("lock")),
            Timed::TryLockForUnderTimeout => {
                tokio::time::timeout(WAIT, mutex.try_lock_for(WAIT)).await.ok().and_then(|g| g.expect("try_lock_for"))
            }
        }
    })
}

fn forever(mutex: &InterProcessMutex) -> Locking {
    let mutex = mutex.clone();
    Box::pin(async move { Some(mutex.lock().await.expect("lock")) })
}

/// Polls `locking` once, so that the waiter is in the local queue in this order, then lets a task
/// finish it.
async fn enqueue(mut locking: Locking) -> tokio::task::JoinHandle<Option<MutexGuard>> {
    assert!(futures::poll!(&mut locking).is_pending(), "the lock is held: the waiter waits");
    crate::support::spawn(locking)
}

/// Timed waiters in one turn: each releases at once what it gets.
const TIMED: usize = 24;

/// One round: a local holder L; then, in one turn, X (untimed), [`TIMED`] timed waiters B and C
/// (untimed). X releases `offset_us` around the first B's deadline; each B that gets the hold
/// releases it at once, so hand-offs run through the turn while the Bs time out and leave. Returns
/// how many Bs held.
async fn race_round(mutex: &InterProcessMutex, how: Timed, offset_us: i64) -> usize {
    let first = mutex.lock().await.expect("first local holder");
    let (x_granted, x_token) = oneshot::channel();
    let b_start = Instant::now();
    let deadline = b_start + WAIT;
    let release_at = if offset_us >= 0 {
        deadline + Duration::from_micros(offset_us as u64)
    } else {
        deadline - Duration::from_micros(offset_us.unsigned_abs())
    };
    let x = {
        let mut locking = forever(mutex);
        assert!(futures::poll!(&mut locking).is_pending(), "X waits behind L");
        crate::support::spawn(async move {
            let guard = locking.await.expect("X's hold");
            assert_eq!(guard.hold_state(), HoldState::Held);
            let _ = x_granted.send(guard.fencing_token().as_u128());
            tokio::time::sleep_until(release_at.into()).await;
            guard.release().await.expect("X's release");
        })
    };
    let mut bs = Vec::new();
    for _ in 0..TIMED {
        let mut locking = timed(mutex, how);
        assert!(futures::poll!(&mut locking).is_pending(), "B waits behind L");
        bs.push(crate::support::spawn(async move {
            let guard = locking.await?;
            assert_eq!(guard.hold_state(), HoldState::Held);
            let token = guard.fencing_token().as_u128();
            guard.release().await.expect("B's release");
            Some(token)
        }));
    }
    let c = enqueue(forever(mutex)).await;
    drop(first);
    let x_token = tokio::time::timeout(WITHIN, x_token).await.expect("X granted within the bound").unwrap();
    support::join("X", WITHIN, x).await;
    let mut tokens = vec![x_token];
    for b in bs {
        tokens.extend(support::join("B", WAIT + HANG, b).await);
    }
    assert!(b_start.elapsed() < WAIT + HANG, "{how:?}: a B hung");
    // The hold was handed on to C, by the Bs or past them: never lost with a B that left.
    let c_guard = support::join("C", WITHIN, c).await.expect("C's hold");
    assert_eq!(c_guard.hold_state(), HoldState::Held, "{how:?}: C holds");
    let c_token = c_guard.fencing_token().as_u128();
    c_guard.release().await.expect("C's release");
    let held = tokens.len() - 1;
    tokens.sort_unstable();
    tokens.dedup();
    assert_eq!(tokens.len(), held + 1, "{how:?}: every hold has a token of its own");
    assert!(tokens.iter().all(|&token| token < c_token), "{how:?}: C's token {c_token} is the last: {tokens:?}");
    held
}

/// Timed waiters whose deadline races the hand-offs of their turn's node (at and around the
/// deadline, in each of the three ways to time a wait) either hold or let the hold pass on: the
/// next waiter always gets it, tokens increase, and the lock path is left empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_off_racing_a_timed_waiters_deadline_is_never_lost() {
    let server = support::server().await;
    let connect = server.connect_string();
    let local = support::client(&connect).await;
    let path = support::unique_path("lq-timed-race");
    let mutex = InterProcessMutex::new(&local, &path).unwrap();
    let (mut held, mut rounds) = (0, 0);
    for how in [Timed::TryLockFor, Timed::LockUnderTimeout, Timed::TryLockForUnderTimeout] {
        for offset_us in [-1500, -900, -600, -300, -100, 0, 0, 100, 300, 700] {
            held += race_round(&mutex, how, offset_us).await;
            rounds += 1;
            let left = support::eventually_no_children(&connect, &path, WITHIN).await;
            assert!(left.is_empty(), "{how:?} {offset_us} us: nodes left: {left:?}");
        }
    }
    println!("{rounds} rounds of {TIMED} timed waiters: {held} holds");
    let guard = tokio::time::timeout(WITHIN, mutex.try_lock()).await.expect("try_lock").unwrap();
    assert!(guard.is_some(), "the lock is free after the rounds");
    drop(guard);
    support::eventually_no_children(&connect, &path, WITHIN).await;
}

/// A namespaced client's local queue: its turn's node is made inside the namespace, guards and
/// errors name the path as the caller gave it, tokens increase across the local hand-offs, and
/// nothing is left in the namespace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespaced_local_queue_makes_its_nodes_in_the_namespace_and_reports_the_callers_path() {
    let server = support::server().await;
    let connect = server.connect_string();
    let local = support::namespaced_client(&connect, "ns-queue").await;
    let remote = support::namespaced_client(&connect, "ns-queue").await;
    let path = support::unique_path("lq-namespace");
    let mutex = InterProcessMutex::new(&local, &path).unwrap();
    let blocker = InterProcessMutex::new(&remote, &path).unwrap().lock().await.expect("remote lock");
    // A local waiter with a turn of its own, then three gathered in the next turn.
    let first = enqueue(forever(&mutex)).await;
    let a = enqueue(forever(&mutex)).await;
    let b = enqueue(timed(&mutex, Timed::TryLockFor)).await;
    let c = enqueue(forever(&mutex)).await;
    let zk = support::observer(&connect).await;
    let fixed = format!("/ns-queue{path}");
    support::eventually_queued(&zk, &fixed, 2, "the local turn's node queues in the namespace").await;
    assert!(support::sorted_children(&zk, &path).await.is_empty(), "nothing outside the namespace");
    // B times out in the waiting turn; A and C then share its node.
    let b_got = support::join("B", WAIT + HANG, b).await;
    assert!(b_got.is_none(), "B timed out behind the remote holder");
    blocker.release().await.unwrap();
    let first = support::join("the first local waiter", WITHIN, first).await.expect("its hold");
    assert_eq!(first.hold_state(), HoldState::Held);
    let first_token = first.fencing_token().as_u128();
    first.release().await.unwrap();
    let a_guard = support::join("A", WITHIN, a).await.expect("A's hold");
    assert!(
        a_guard.node_path().starts_with(&format!("{path}/")),
        "reported without namespace: {}",
        a_guard.node_path()
    );
    let a_token = a_guard.fencing_token().as_u128();
    assert!(a_token > first_token, "the next turn's token is larger");
    let node = a_guard.node_path().to_string();
    drop(a_guard);
    let c_guard = support::join("C", WITHIN, c).await.expect("C's hold");
    assert_eq!(c_guard.node_path(), node, "handed on locally: the same node");
    assert!(c_guard.fencing_token().as_u128() > a_token, "tokens increase across the hand-off");
    c_guard.release().await.unwrap();
    let left = support::eventually_no_children(&connect, &fixed, WITHIN).await;
    assert!(left.is_empty(), "nodes left in the namespace: {left:?}");
    local.close().await;
    for (what, result) in
        [("lock", mutex.lock().await.map(drop)), ("try_lock_for", mutex.try_lock_for(WAIT).await.map(drop))]
    {
        match result {
            Err(Error::Closed { path: reported }) => assert_eq!(reported, path, "{what} names the caller's path"),
            other => panic!("{what} on a closed client: {other:?}"),
        }
    }
}

/// How long a guard's release runs before it is dropped: `None` dropped unpolled.
const RELEASE_CUTS: [Option<Duration>; 7] = [
    None,
    Some(Duration::ZERO),
    Some(Duration::from_micros(100)),
    Some(Duration::from_micros(500)),
    Some(Duration::from_millis(1)),
    Some(Duration::from_millis(3)),
    Some(Duration::from_millis(10)),
];

/// Runs `guard.release()` for at most `cut`, then drops it.
async fn cut_release(guard: MutexGuard, cut: Option<Duration>) {
    let release = guard.release();
    match cut {
        None => drop(release),
        Some(cut) => {
            if let Ok(result) = tokio::time::timeout(cut, release).await {
                result.expect("release");
            }
        }
    }
}

/// A guard's release cut short at any point (dropped unpolled, or under a tiny timeout): a local
/// holder's hands its node on to the next waiter of its turn (with a larger token), the last
/// holder's still deletes the node, and the lock is free again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_release_cut_short_still_hands_on_and_deletes() {
    let server = support::server().await;
    let connect = server.connect_string();
    let local = support::client(&connect).await;
    let path = support::unique_path("lq-release-cut");
    let mutex = InterProcessMutex::new(&local, &path).unwrap();
    for cut in RELEASE_CUTS {
        // L alone in its turn; A and C gathered in the next.
        let first = mutex.lock().await.expect("first local holder");
        let a = enqueue(forever(&mutex)).await;
        let c = enqueue(forever(&mutex)).await;
        drop(first);
        let a_guard = support::join("A", WITHIN, a).await.expect("A's hold");
        let a_token = a_guard.fencing_token().as_u128();
        cut_release(a_guard, cut).await;
        let c_guard = support::join("C", WITHIN, c).await.expect("C's hold");
        assert_eq!(c_guard.hold_state(), HoldState::Held, "{cut:?}: C holds");
        assert!(c_guard.fencing_token().as_u128() > a_token, "{cut:?}: C's token after A's");
        cut_release(c_guard, cut).await;
        let left = support::eventually_no_children(&connect, &path, WITHIN).await;
        assert!(left.is_empty(), "{cut:?}: nodes left: {left:?}");
        let free = tokio::time::timeout(WITHIN, mutex.try_lock()).await.expect("try_lock").unwrap();
        assert!(free.is_some(), "{cut:?}: the lock is free again");
        drop(free);
        support::eventually_no_children(&connect, &path, WITHIN).await;
    }
}

/// A guard taken on a runtime that is shut down since, released (awaited) on a fresh
/// current-thread runtime of a plain thread: it hands the node on to the next waiter of its turn,
/// and that waiter's release deletes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_released_on_another_runtime_hands_on() {
    let server = support::server().await;
    let connect = server.connect_string();
    let local = support::client(&connect).await;
    let path = support::unique_path("lq-release-elsewhere");
    let mutex = InterProcessMutex::new(&local, &path).unwrap();
    let first = mutex.lock().await.expect("first local holder");
    let r2 = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("a runtime");
    let a = r2.spawn(forever(&mutex));
    // A is in the next turn before C (setup only).
    tokio::time::sleep(Duration::from_millis(200)).await;
    let c = enqueue(forever(&mutex)).await;
    drop(first);
    let a_guard = support::join("A, on another runtime", WITHIN, a).await.expect("A's hold");
    r2.shutdown_background();
    let a_token = a_guard.fencing_token().as_u128();
    let released = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        rt.block_on(async move { tokio::time::timeout(WITHIN, a_guard.release()).await })
    });
    let c_guard = support::join("C", WITHIN, c).await.expect("C's hold");
    assert_eq!(c_guard.hold_state(), HoldState::Held);
    assert!(c_guard.fencing_token().as_u128() > a_token, "C's token after A's");
    let released = tokio::task::spawn_blocking(move || released.join()).await.unwrap().expect("the releasing thread");
    released.expect("A's release returns").expect("A's release");
    c_guard.release().await.expect("C's release");
    let left = support::eventually_no_children(&connect, &path, WITHIN).await;
    assert!(left.is_empty(), "nodes left: {left:?}");
}

/// The last waiter of a turn whose node is being acquired by the queue's task (the turn started
/// when the local holder let go; its node waits behind a remote holder) times out with the link
/// silent: `try_lock_for` answers "not acquired" within its timeout (the clean-up after the
/// timeout is bounded too), and once the link is back nothing of ours is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_waiter_of_a_turn_being_acquired_keeps_its_deadline_on_a_silent_link() {
    let server = support::server().await;
    let connect = server.connect_string();
    let proxy = FaultProxy::start(&connect).await.expect("proxy");
    let local = CuratorClient::builder(&proxy.connect_string())
        .session_timeout(Duration::from_secs(20))
        .connection_timeout(Duration::from_secs(2))
        .retry_policy(RetryNTimes::new(50, Duration::from_millis(100)))
        .connect()
        .await
        .expect("connect");
    let remote = support::client(&connect).await;
    let path = support::unique_path("lq-turn-blackhole");
    let mutex = InterProcessMutex::new(&local, &path).unwrap();
    let first = mutex.lock().await.expect("the local holder");
    let blocker = crate::support::spawn({
        let mutex = InterProcessMutex::new(&remote, &path).unwrap();
        async move { mutex.lock().await.expect("the remote contender") }
    });
    let zk = support::observer(&connect).await;
    support::eventually_queued(&zk, &path, 2, "the remote contender queues").await;
    let timeout = Duration::from_millis(1500);
    let start = Instant::now();
    let mut waiting = timed_for(&mutex, timeout);
    assert!(futures::poll!(&mut waiting).is_pending(), "B waits behind the local holder");
    let b = crate::support::spawn(waiting);
    // The holder lets go: B's turn starts, and its node queues behind the remote contender.
    let first_node = first.node_path().rsplit('/').next().unwrap().to_string();
    first.release().await.unwrap();
    support::eventually(Duration::from_secs(5), "B's turn's node queues", || async {
        let nodes = support::sorted_children(&zk, &path).await;
        nodes.len() == 2 && !nodes.contains(&first_node)
    })
    .await;
    proxy.set_mode(ProxyMode::Blackhole);
    let answer = support::join("B", timeout + HANG, b).await;
    let took = start.elapsed();
    assert!(answer.is_none(), "B got the lock while the remote contender held it");
    assert!(took <= timeout + Duration::from_millis(300), "try_lock_for({timeout:?}) took {took:?}");
    proxy.set_mode(ProxyMode::Pass);
    let guard = support::join("the remote contender", WITHIN, blocker).await;
    guard.release().await.unwrap();
    let left = support::eventually_no_children(&connect, &path, WITHIN).await;
    assert!(left.is_empty(), "nodes left: {left:?}");
    let again = tokio::time::timeout(WITHIN, mutex.try_lock_for(Duration::from_secs(5))).await.expect("try_lock_for");
    assert!(again.unwrap().is_some(), "the local queue works once the link is back");
}

fn timed_for(mutex: &InterProcessMutex, timeout: Duration) -> Locking {
    let mutex = mutex.clone();
    Box::pin(async move { mutex.try_lock_for(timeout).await.expect("try_lock_for") })
}

/// Timed waiters with absurdly long timeouts (`Duration::MAX`, a century) wait in the local queue
/// like `lock()` — no panic, no instant timeout — and get the hold in turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timed_waiters_with_absurd_timeouts_wait_and_get_the_hold() {
    let server = support::server().await;
    let connect = server.connect_string();
    let local = support::client(&connect).await;
    let path = support::unique_path("lq-absurd-timeouts");
    let mutex = InterProcessMutex::new(&local, &path).unwrap();
    let first = mutex.lock().await.expect("the local holder");
    let century = Duration::from_secs(100 * 365 * 24 * 3600);
    let mut tasks = Vec::new();
    for timeout in [Duration::MAX, century, Duration::MAX] {
        tasks.push(enqueue(timed_for(&mutex, timeout)).await);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(tasks.iter().all(|t| !t.is_finished()), "a timed waiter gave up behind the holder");
    let mut last = first.fencing_token().as_u128();
    drop(first);
    for task in tasks {
        let guard = support::join("a timed waiter", WITHIN, task).await.expect("its hold");
        let token = guard.fencing_token().as_u128();
        assert!(token > last, "tokens increase");
        last = token;
        guard.release().await.unwrap();
    }
    let left = support::eventually_no_children(&connect, &path, WITHIN).await;
    assert!(left.is_empty(), "nodes left: {left:?}");
}
