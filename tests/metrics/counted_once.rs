//! The `metrics` feature's counts under stress, against a real ZooKeeper: the waiter gauge returns
//! to exactly 0 after cancelled (at every await point), timed-out and failed acquires of every
//! recipe; every acquire records exactly one wait sample; every hold ends exactly once (re-entrant
//! pairs, release racing an expiry); odd path labels. Each test uses its own paths.

use crate::support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use zk_curator::leader::LeaderLatch;
use zk_curator::locks::{
    InterProcessMultiLock, InterProcessMutex, InterProcessReadWriteLock, InterProcessSemaphoreMutex,
    InterProcessSemaphoreV2,
};
use zk_curator::testing::expire_session;
use zk_curator::CuratorClient;

const WITHIN: Duration = Duration::from_secs(10);

const WAIT: &str = "zk_curator_acquire_wait_seconds";
const HOLD: &str = "zk_curator_hold_seconds";
const LOST: &str = "zk_curator_holds_lost_total";
const WAITERS: &str = "zk_curator_waiters";

use crate::capture::*;

/// The number of wait samples of `recipe` on `path`, whatever their outcome.
fn waits(recipe: &str, path: &str) -> usize {
    ["acquired", "timed_out", "cancelled", "error"]
        .iter()
        .map(|outcome| count(WAIT, &[("recipe", recipe), ("path", path), ("outcome", outcome)]))
        .sum()
}

fn waiters(recipe: &str, path: &str) -> f64 {
    gauge(WAITERS, &[("recipe", recipe), ("path", path)])
}

/// Drops `attempt` futures made by `make` at many points of their life (timeouts from 0 up, by
/// steps of `step`), and one that loses a `select!` to a timer: returns how many were started.
async fn cancel_everywhere<F, Fut, T>(make: F, step: Duration, rounds: u32) -> usize
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let mut started = 0;
    for i in 0..rounds {
        started += 1;
        let _ = tokio::time::timeout(step * i, make()).await;
    }
    started += 1;
    tokio::select! {
        _ = make() => panic!("the lock is held elsewhere"),
        _ = tokio::time::sleep(Duration::from_millis(30)) => {}
    }
    started
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_acquires_of_every_recipe_leave_no_waiter_and_one_sample_each() {
    install();
    let server = support::server().await;
    let connect = server.connect_string();
    let (a, b) = (support::client(&connect).await, support::client(&connect).await);
    let step = Duration::from_micros(700);
    let rounds = 25;

    // Mutex (guard API and Curator-style).
    let path = support::unique_path("review-mutex");
    let held = InterProcessMutex::new(&a, &path).unwrap().lock().await.unwrap();
    let theirs = InterProcessMutex::new(&b, &path).unwrap();
    let mut started = cancel_everywhere(|| theirs.lock(), step, rounds).await;
    started += cancel_everywhere(|| theirs.acquire(), step, rounds).await;
    started += cancel_everywhere(|| theirs.try_lock_for(WITHIN), step, rounds).await;
    assert_eq!(waiters("mutex", &path), 0.0);
    held.release().await.unwrap();
    assert_eq!(waits("mutex", &path), started + 1, "one sample per acquire");

    // Read-write: a writer waits behind a reader, a reader behind a writer.
    let path = support::unique_path("review-rw");
    let ours = InterProcessReadWriteLock::new(&a, &path).unwrap();
    let theirs = InterProcessReadWriteLock::new(&b, &path).unwrap();
    let read = ours.read_lock().lock().await.unwrap();
    let started_write = cancel_everywhere(|| theirs.write_lock().lock(), step, rounds).await;
    read.release().await.unwrap();
    let write = ours.write_lock().lock().await.unwrap();
    let started_read = cancel_everywhere(|| theirs.read_lock().lock(), step, rounds).await;
    write.release().await.unwrap();
    assert_eq!(waiters("read", &path), 0.0);
    assert_eq!(waiters("write", &path), 0.0);
    assert_eq!(waits("write", &path), started_write + 1);
    assert_eq!(waits("read", &path), started_read + 1);

    // Semaphore: acquire_many cancelled part-way (one lease free of three).
    let path = support::unique_path("review-semaphore");
    let ours = InterProcessSemaphoreV2::new(&a, &path, 3).unwrap();
    let leases = ours.acquire_many(2).await.unwrap();
    let theirs = InterProcessSemaphoreV2::new(&b, &path, 3).unwrap();
    cancel_everywhere(|| theirs.acquire_many(2), step, rounds).await;
    cancel_everywhere(|| theirs.acquire_many_timeout(2, WITHIN), step, rounds).await;
    assert_eq!(waiters("semaphore", &path), 0.0);
    zk_curator::locks::return_all(leases).await.unwrap();
    let got = theirs.acquire_many(3).await.unwrap();
    zk_curator::locks::return_all(got).await.unwrap();
    assert_eq!(waiters("semaphore", &path), 0.0);
    assert_eq!(
        count(HOLD, &[("recipe", "semaphore"), ("path", path.as_str())]),
        count(WAIT, &[("recipe", "semaphore"), ("path", path.as_str()), ("outcome", "acquired")]),
        "every lease granted ends once (partly acquired leases of a cancelled acquire_many included)"
    );

    // Semaphore mutex.
    let path = support::unique_path("review-semaphore-mutex");
    let ours = InterProcessSemaphoreMutex::new(&a, &path).unwrap();
    ours.acquire().await.unwrap();
    let theirs = InterProcessSemaphoreMutex::new(&b, &path).unwrap();
    let started = cancel_everywhere(|| theirs.acquire(), step, rounds).await;
    ours.release().await.unwrap();
    assert_eq!(waiters("semaphore_mutex", &path), 0.0);
    assert_eq!(waits("semaphore_mutex", &path), started + 1);

    // Multi-lock from paths: the second lock is taken elsewhere.
    let (first, second) = (support::unique_path("review-multi-a"), support::unique_path("review-multi-b"));
    let blocker = InterProcessMutex::new(&a, &second).unwrap().lock().await.unwrap();
    let multi = InterProcessMultiLock::from_paths(&b, &[first.as_str(), second.as_str()]).unwrap();
    cancel_everywhere(|| multi.acquire(), step, rounds).await;
    blocker.release().await.unwrap();
    assert_eq!(waiters("mutex", &first), 0.0);
    assert_eq!(waiters("mutex", &second), 0.0);
    assert_eq!(
        count(HOLD, &[("recipe", "mutex"), ("path", first.as_str())]),
        count(WAIT, &[("recipe", "mutex"), ("path", first.as_str()), ("outcome", "acquired")]),
        "the first lock of a cancelled multi-lock acquire is released and its hold recorded"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_of_every_recipe_failed_by_a_closed_client_leave_no_waiter() {
    install();
    let server = support::server().await;
    let connect = server.connect_string();
    let a = support::client(&connect).await;
    let b = support::client(&connect).await;
    let (m, r, s, sm, l) = (
        support::unique_path("review-closed-mutex"),
        support::unique_path("review-closed-rw"),
        support::unique_path("review-closed-sem"),
        support::unique_path("review-closed-semmutex"),
        support::unique_path("review-closed-latch"),
    );
    let mutex = InterProcessMutex::new(&a, &m).unwrap().lock().await.unwrap();
    let read = InterProcessReadWriteLock::new(&a, &r).unwrap();
    let read_guard = read.read_lock().lock().await.unwrap();
    let sem = InterProcessSemaphoreV2::new(&a, &s, 1).unwrap().acquire().await.unwrap();
    let semmutex = InterProcessSemaphoreMutex::new(&a, &sm).unwrap();
    semmutex.acquire().await.unwrap();
    let leader = LeaderLatch::new(&a, &l, "leader").unwrap();
    leader.start().unwrap();
    assert!(leader.await_leadership_timeout(WITHIN).await.unwrap());

    let mut tasks = Vec::new();
    let their_mutex = InterProcessMutex::new(&b, &m).unwrap();
    tasks.push(tokio::spawn(async move { their_mutex.lock().await.map(drop) }));
    let their_rw = InterProcessReadWriteLock::new(&b, &r).unwrap();
    tasks.push(tokio::spawn(async move { their_rw.write_lock().lock().await.map(drop) }));
    let their_sem = InterProcessSemaphoreV2::new(&b, &s, 1).unwrap();
    tasks.push(tokio::spawn(async move { their_sem.acquire_many(1).await.map(drop) }));
    let their_semmutex = InterProcessSemaphoreMutex::new(&b, &sm).unwrap();
    tasks.push(tokio::spawn(async move { their_semmutex.acquire().await }));
    let follower = LeaderLatch::new(&b, &l, "follower").unwrap();
    follower.start().unwrap();
    let all = [("mutex", &m), ("write", &r), ("semaphore", &s), ("semaphore_mutex", &sm), ("latch", &l)];
    support::eventually(WITHIN, "all wait", || async { all.iter().all(|(k, p)| waiters(k, p) == 1.0) }).await;

    b.close().await;
    for task in tasks {
        let result = tokio::time::timeout(WITHIN, task).await.expect("the waiter ends").unwrap();
        assert!(result.is_err(), "a closed client fails its waiters");
    }
    let _ = follower.close().await;
    support::eventually(WITHIN, "no waiter left", || async { all.iter().all(|(k, p)| waiters(k, p) == 0.0) }).await;
    for (recipe, path) in &all[..4] {
        assert_eq!(waits(recipe, path), 2 - usize::from(*recipe == "write"), "{recipe}: one sample per acquire");
        assert_eq!(count(WAIT, &[("recipe", recipe), ("path", path.as_str()), ("outcome", "error")]), 1, "{recipe}");
    }
    mutex.release().await.unwrap();
    read_guard.release().await.unwrap();
    sem.release().await.unwrap();
    semmutex.release().await.unwrap();
    leader.close().await.unwrap();
    for (recipe, path) in all {
        assert_eq!(waiters(recipe, path), 0.0, "{recipe}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reentrant_pairs_and_a_downgrade_end_each_hold_once() {
    install();
    let server = support::server().await;
    let a = support::client(&server.connect_string()).await;
    let path = support::unique_path("review-reentrant");
    let mutex = InterProcessMutex::new(&a, &path).unwrap();
    mutex.acquire().await.unwrap();
    mutex.acquire().await.unwrap();
    assert!(mutex.acquire_timeout(Duration::from_millis(1)).await.unwrap());
    mutex.release().await.unwrap();
    mutex.release().await.unwrap();
    let lock = [("recipe", "mutex"), ("path", path.as_str())];
    assert_eq!(count(HOLD, &lock), 0, "still held once");
    mutex.release().await.unwrap();
    assert_eq!(count(HOLD, &lock), 1, "a re-entrant hold ends once");
    assert_eq!(counter(LOST, &[("recipe", "mutex"), ("path", path.as_str()), ("cause", "node_deleted")]), 0);

    // Downgrade: write, then read on top of it, then the write released; then the read.
    let path = support::unique_path("review-downgrade");
    let rw = InterProcessReadWriteLock::new(&a, &path).unwrap();
    rw.write_lock().acquire().await.unwrap();
    rw.read_lock().acquire().await.unwrap();
    rw.write_lock().release().await.unwrap();
    assert_eq!(count(HOLD, &[("recipe", "write"), ("path", path.as_str())]), 1);
    rw.read_lock().release().await.unwrap();
    assert_eq!(count(HOLD, &[("recipe", "read"), ("path", path.as_str())]), 1);
    let lost: Vec<_> = series_of_path(&path).into_iter().filter(|(n, _, _)| n == LOST).collect();
    assert!(lost.is_empty(), "a downgrade loses nothing: {lost:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_racing_an_expiry_ends_the_hold_exactly_once() {
    install();
    let server = support::server().await;
    let connect = server.connect_string();
    for round in 0..3 {
        let a = support::client(&connect).await;
        let path = support::unique_path(&format!("review-race-{round}"));
        let mutex = InterProcessMutex::new(&a, &path).unwrap();
        let guard = mutex.lock().await.unwrap();
        let hold = guard.hold().clone();
        let (expired, released) = tokio::join!(expire_session(&connect, &a), async {
            tokio::time::sleep(Duration::from_millis(round * 20)).await;
            guard.release().await
        });
        expired.unwrap();
        let _ = released;
        tokio::time::timeout(WITHIN, hold.lost()).await.expect("the hold ends");
        drop(hold);
        let lock = [("recipe", "mutex"), ("path", path.as_str())];
        assert_eq!(count(HOLD, &lock), 1, "round {round}: one hold sample");
        let lost: u64 = series_of_path(&path).iter().filter(|(n, _, _)| n == LOST).map(|(_, _, v)| *v as u64).sum();
        assert!(lost <= 1, "round {round}: lost at most once, {lost}");
        // Held again after release+loss on a new session: a second, separate hold.
        let again = mutex.lock().await.unwrap();
        again.release().await.unwrap();
        assert_eq!(count(HOLD, &lock), 2, "round {round}");
        a.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn odd_path_labels_are_recorded_as_given_and_do_not_break_locking() {
    install();
    let server = support::server().await;
    let connect = server.connect_string();
    let huge = "x".repeat(100_000);
    for label in [String::new(), huge.clone()] {
        let client = CuratorClient::builder(connect.as_str())
            .metrics_path_label({
                let label = label.clone();
                move |_| label.clone()
            })
            .connect()
            .await
            .unwrap();
        let path = support::unique_path("review-label");
        let mutex = InterProcessMutex::new(&client, &path).unwrap();
        mutex.lock().await.unwrap().release().await.unwrap();
        assert!(count(HOLD, &[("recipe", "mutex"), ("path", label.as_str())]) >= 1);
        assert_eq!(gauge(WAITERS, &[("recipe", "mutex"), ("path", label.as_str())]), 0.0);
        client.close().await;
    }
}

/// A label function that panics: the panic surfaces in the recipe's constructor (where the
/// function runs, once per lock object), before any node exists; the client and other lock
/// objects of other clients are unaffected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_path_label_panics_in_the_constructor_and_poisons_nothing() {
    install();
    let server = support::server().await;
    let connect = server.connect_string();
    let client = CuratorClient::builder(connect.as_str())
        .metrics_path_label(|path| if path.contains("boom") { panic!("label of {path}") } else { path.to_string() })
        .connect()
        .await
        .unwrap();
    let bad = support::unique_path("review-boom");
    let made = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| InterProcessMutex::new(&client, &bad)));
    assert!(made.is_err(), "the panic surfaces where the label is made");
    let good = support::unique_path("review-fine");
    let mutex = InterProcessMutex::new(&client, &good).unwrap();
    mutex.lock().await.unwrap().release().await.unwrap();
    assert_eq!(count(HOLD, &[("recipe", "mutex"), ("path", good.as_str())]), 1);
    // Nothing was created for the bad path.
    let other = support::client(&connect).await;
    assert!(InterProcessMutex::new(&other, &bad).unwrap().participant_nodes().await.unwrap().is_empty());
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_latch_and_selector_through_an_expiry_and_close_leave_no_waiter() {
    install();
    let server = support::server().await;
    let connect = server.connect_string();
    let (a, b) = (support::client(&connect).await, support::client(&connect).await);

    // Latch: a follower queued, its session expired (it re-queues), then closed.
    let path = support::unique_path("review-latch");
    let leader = LeaderLatch::new(&a, &path, "leader").unwrap();
    leader.start().unwrap();
    assert!(leader.await_leadership_timeout(WITHIN).await.unwrap());
    let follower = LeaderLatch::new(&b, &path, "follower").unwrap();
    follower.start().unwrap();
    support::eventually(WITHIN, "the follower waits", || async { waiters("latch", &path) == 1.0 }).await;
    expire_session(&connect, &b).await.unwrap();
    support::eventually(WITHIN, "the follower queues again", || async {
        leader.participants().await.map(|p| p.len() == 2).unwrap_or(false)
    })
    .await;
    assert!(waiters("latch", &path) <= 1.0, "one follower, at most one waiter: {}", waiters("latch", &path));
    follower.close().await.unwrap();
    assert_eq!(waiters("latch", &path), 0.0);
    leader.close().await.unwrap();
    support::eventually(WITHIN, "the term ends", || async {
        count(HOLD, &[("recipe", "latch"), ("path", path.as_str())]) == 1
    })
    .await;
    assert_eq!(waiters("latch", &path), 0.0);

    // Selector: one leads (its work blocks), another queues and is closed.
    let path = support::unique_path("review-selector");
    let (led_tx, mut led_rx) = tokio::sync::mpsc::unbounded_channel();
    let work = move |_| {
        let led = led_tx.clone();
        async move {
            let _ = led.send(());
            std::future::pending::<()>().await;
        }
    };
    let first = zk_curator::leader::LeaderSelector::new(&a, &path, "first", work.clone()).unwrap();
    first.start().unwrap();
    tokio::time::timeout(WITHIN, led_rx.recv()).await.expect("first leads");
    let second = zk_curator::leader::LeaderSelector::new(&b, &path, "second", work).unwrap();
    second.start().unwrap();
    support::eventually(WITHIN, "the second waits", || async { waiters("selector", &path) == 1.0 }).await;
    second.close().await.unwrap();
    assert_eq!(waiters("selector", &path), 0.0);
    first.close().await.unwrap();
    support::eventually(WITHIN, "the term ends", || async {
        count(HOLD, &[("recipe", "selector"), ("path", path.as_str())]) == 1
    })
    .await;
    assert_eq!(waiters("selector", &path), 0.0);

    // A guard dropped (not released) ends its hold once.
    let path = support::unique_path("review-dropped-guard");
    let mutex = InterProcessMutex::new(&a, &path).unwrap();
    drop(mutex.lock().await.unwrap());
    let again = mutex.lock().await.unwrap();
    again.release().await.unwrap();
    assert_eq!(count(HOLD, &[("recipe", "mutex"), ("path", path.as_str())]), 2, "each hold ends once");
    assert_eq!(count(WAIT, &[("recipe", "mutex"), ("path", path.as_str()), ("outcome", "acquired")]), 2);
}

/// Contenders on two clients acquire, hold briefly and release, while being cancelled at random
/// points (grants racing cancellations): afterwards no waiter is left, every acquire left exactly
/// one wait sample, and every granted hold exactly one hold sample.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_contenders_cancelled_at_random_keep_every_count_exact() {
    install();
    let server = support::server().await;
    let connect = server.connect_string();
    let clients = [support::client(&connect).await, support::client(&connect).await];
    let path = support::unique_path("review-churn");
    let started = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for task in 0..8u64 {
        let mutex = InterProcessMutex::new(&clients[task as usize % 2], &path).unwrap();
        let started = started.clone();
        tasks.push(tokio::spawn(async move {
            for round in 0..12u64 {
                started.fetch_add(1, Ordering::SeqCst);
                let budget = Duration::from_micros((task * 7919 + round * 104_729) % 40_000);
                let curator_style = (task + round) % 2 == 0;
                let _ = tokio::time::timeout(budget, async {
                    if curator_style {
                        mutex.acquire().await.unwrap();
                        tokio::task::yield_now().await;
                        mutex.release().await.unwrap();
                    } else {
                        let guard = mutex.lock().await.unwrap();
                        tokio::task::yield_now().await;
                        guard.release().await.unwrap();
                    }
                })
                .await;
                // A Curator-style hold whose release was cut short is still ours: give it back.
                while mutex.is_acquired_in_this_process() {
                    mutex.release().await.unwrap();
                }
            }
        }));
    }
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(60), task).await.expect("no hang").unwrap();
    }
    let lock = [("recipe", "mutex"), ("path", path.as_str())];
    assert_eq!(waiters("mutex", &path), 0.0);
    assert_eq!(waits("mutex", &path) as u64, started.load(Ordering::SeqCst), "one wait sample per acquire");
    // Holds whose release was cut short end in the background; a hang bound, generous for a
    // loaded machine.
    support::eventually(Duration::from_secs(30), "every hold ended", || async {
        count(HOLD, &lock) == count(WAIT, &[("recipe", "mutex"), ("path", path.as_str()), ("outcome", "acquired")])
    })
    .await;
    let lost: Vec<_> = series_of_path(&path).into_iter().filter(|(n, _, _)| n == LOST).collect();
    assert!(lost.is_empty(), "nothing lost: {lost:?}");
}

/// KNOWN DEFECT (ignored so the suite stays green; run with `--run-ignored only`): a hold nobody
/// watches whose node someone deletes is later released as if nothing happened — the release
/// counts no loss (`node_deleted` never known: the monitor that would see the deletion only runs
/// for watched holds, and the release ends the meter before its delete answers `NoNode`). The
/// docs promise `zk_curator_holds_lost_total` for every hold that ends without having been
/// released, `node_deleted` when someone deleted the lock node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "known defect: an unwatched hold whose node was deleted is counted as released"]
async fn an_unwatched_hold_whose_node_was_deleted_counts_a_loss_at_its_release() {
    install();
    let server = support::server().await;
    let connect = server.connect_string();
    let a = support::client(&connect).await;
    let path = support::unique_path("review-unwatched-deleted");
    let guard = InterProcessMutex::new(&a, &path).unwrap().lock().await.unwrap();
    support::observer(&connect).await.delete(guard.node_path(), None).await.unwrap();
    let _ = guard.release().await;
    assert_eq!(count(HOLD, &[("recipe", "mutex"), ("path", path.as_str())]), 1);
    assert_eq!(counter(LOST, &[("recipe", "mutex"), ("path", path.as_str()), ("cause", "node_deleted")]), 1);
}

/// An unwatched hold whose session expired, released only after its client was closed: the loss
/// happened at the expiry, while the client was open, so its cause is `session_expired`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unwatched_hold_expired_then_its_client_closed_counts_the_expiry() {
    install();
    let server = support::server().await;
    let connect = server.connect_string();
    let a = support::client(&connect).await;
    let path = support::unique_path("review-expired-then-closed");
    let guard = InterProcessMutex::new(&a, &path).unwrap().lock().await.unwrap();
    let before = a.session();
    expire_session(&connect, &a).await.unwrap();
    support::eventually(WITHIN, "a new session", || async { a.session() != before && a.is_connected() }).await;
    a.close().await;
    drop(guard);
    let cause = |cause| counter(LOST, &[("recipe", "mutex"), ("path", path.as_str()), ("cause", cause)]);
    assert_eq!(count(HOLD, &[("recipe", "mutex"), ("path", path.as_str())]), 1);
    assert_eq!((cause("session_expired"), cause("client_closed")), (1, 0));
}

/// A local hand-off that reaches a waiter whose future is dropped before it takes the grant: the
/// hold is handed on, and counted nowhere — the waiter's acquire records a cancelled wait and no
/// hold, so every hold sample still has an acquired wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_its_cancelled_waiter_never_took_counts_no_hold() {
    install();
    let server = support::server().await;
    let client = support::client(&server.connect_string()).await;
    let path = support::unique_path("metrics-untaken-grant");
    let mutex = InterProcessMutex::new(&client, &path).unwrap();
    let held = mutex.lock().await.unwrap();
    // Queued behind the holder (polled once), then left unpolled while the hand-off reaches it.
    let mut waiting = Box::pin(mutex.lock());
    assert!(futures::poll!(waiting.as_mut()).is_pending(), "queued behind the holder");
    support::eventually(WITHIN, "the waiter is queued", || async { waiters("mutex", &path) == 1.0 }).await;
    held.release().await.unwrap();
    // The hand-off runs on a task of its own; no sign of it reaches the unpolled waiter but its
    // channel. Should it come later than this pause, the waiter leaves first and there is no
    // grant to miscount (the test passes without testing): never a false failure.
    tokio::time::sleep(Duration::from_millis(200)).await;
    drop(waiting);
    let lock = [("recipe", "mutex"), ("path", path.as_str())];
    let acquired = [("recipe", "mutex"), ("path", path.as_str()), ("outcome", "acquired")];
    let cancelled = [("recipe", "mutex"), ("path", path.as_str()), ("outcome", "cancelled")];
    assert_eq!((count(WAIT, &acquired), count(WAIT, &cancelled)), (1, 1));
    // The grant was handed on: the lock is free once the hand-off's node is given back.
    support::eventually(WITHIN, "the lock is free again", || async { mutex.try_lock().await.unwrap().is_some() }).await;
    support::eventually(WITHIN, "one hold sample per acquired wait", || async {
        count(HOLD, &lock) == count(WAIT, &acquired)
    })
    .await;
    assert_eq!(count(HOLD, &lock), 2, "the first holder's and the free lock's, not the untaken grant's");
}
