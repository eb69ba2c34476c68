//! The waiter gauge with the local queue: local waiters of one client (queued in-process behind
//! one node) are each counted while they wait, and the gauge returns to 0 after they are cancelled
//! or time out at every point.

use std::time::Duration;

use tokio::sync::mpsc;
use zk_curator::locks::{InterProcessMutex, MutexGuard};
use zk_curator::CuratorClient;

use crate::capture::{gauge, install};
use crate::support;

const WITHIN: Duration = Duration::from_secs(20);

/// Spawns a task that waits for `mutex.lock()` and sends the guard on `tx`.
fn spawn_locker(
    mutex: &InterProcessMutex,
    who: String,
    tx: mpsc::UnboundedSender<MutexGuard>,
) -> tokio::task::JoinHandle<()> {
    let mutex = mutex.clone();
    tokio::spawn(async move {
        let guard = mutex.lock().await.unwrap_or_else(|e| panic!("{who}: lock: {e}"));
        let _ = tx.send(guard);
    })
}

async fn recv(rx: &mut mpsc::UnboundedReceiver<MutexGuard>, what: &str) -> MutexGuard {
    match tokio::time::timeout(WITHIN, rx.recv()).await {
        Ok(Some(guard)) => guard,
        Ok(None) => panic!("{what}: every locker is gone"),
        Err(_) => panic!("{what}: nothing granted within {WITHIN:?}"),
    }
}

/// A remote holder (another client) on `path`: returns its guard once held.
async fn remote_holds(client: &CuratorClient, path: &str) -> MutexGuard {
    InterProcessMutex::new(client, path).unwrap().lock().await.expect("remote lock")
}

fn waiters(path: &str) -> f64 {
    gauge("zk_curator_waiters", &[("recipe", "mutex"), ("path", path)])
}

/// The waiters gauge returns to 0 after local waiters are cancelled and time out at every
/// point, and counts each local waiter once while it waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_gauge_returns_to_zero_after_local_cancellations() {
    install();
    let server = support::server().await;
    let connect = server.connect_string();
    let (local, remote) = (support::client(&connect).await, support::client(&connect).await);
    let path = support::unique_path("lq-metrics");
    let mutex = InterProcessMutex::new(&local, &path).unwrap();
    let blocker = remote_holds(&remote, &path).await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let waiters_tasks: Vec<_> = (0..5).map(|i| spawn_locker(&mutex, format!("W{i}"), tx.clone())).collect();
    support::eventually(WITHIN, "five local waiters counted", || async { waiters(&path) == 5.0 }).await;
    let timed: Vec<_> = (0..3)
        .map(|i| {
            let mutex = mutex.clone();
            tokio::spawn(async move { mutex.try_lock_for(Duration::from_millis(100 + 50 * i)).await })
        })
        .collect();
    for t in timed {
        assert!(support::join("timed", WITHIN, t).await.unwrap().is_none());
    }
    for t in &waiters_tasks[..2] {
        t.abort();
    }
    support::eventually(WITHIN, "aborted waiters leave the gauge", || async { waiters(&path) == 3.0 }).await;
    blocker.release().await.unwrap();
    let g = recv(&mut rx, "a local waiter").await;
    for t in &waiters_tasks[2..] {
        t.abort();
    }
    drop(g);
    support::eventually(WITHIN, "the gauge is back at 0", || async { waiters(&path) == 0.0 }).await;
    support::eventually_no_children(&connect, &path, WITHIN).await;
    let g = mutex.lock().await.unwrap();
    g.release().await.unwrap();
    assert_eq!(waiters(&path), 0.0);
}

/// A namespaced client's local queue labels its series with the path as the caller gave it (every
/// instance of the lock shares it): each hold and each acquire is counted under that path, none
/// under the path sent with the namespace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespaced_local_queue_labels_the_callers_path() {
    install();
    let server = support::server().await;
    let connect = server.connect_string();
    let local = support::namespaced_client(&connect, "ns-metrics").await;
    let remote = support::namespaced_client(&connect, "ns-metrics").await;
    let path = support::unique_path("lq-metrics-namespace");
    let fixed = format!("/ns-metrics{path}");
    let blocker = remote_holds(&remote, &path).await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    // One lock instance per task, as programs make them.
    for i in 0..3 {
        spawn_locker(&InterProcessMutex::new(&local, &path).unwrap(), format!("W{i}"), tx.clone());
    }
    support::eventually(WITHIN, "three local waiters counted", || async { waiters(&path) == 3.0 }).await;
    blocker.release().await.unwrap();
    for i in 0..3 {
        recv(&mut rx, &format!("local holder {i}")).await.release().await.unwrap();
    }
    support::eventually(WITHIN, "the gauge is back at 0", || async { waiters(&path) == 0.0 }).await;
    let holds = |path: &str| crate::capture::count("zk_curator_hold_seconds", &[("recipe", "mutex"), ("path", path)]);
    // The remote holder's (same path, same namespace) and the three local ones.
    support::eventually(WITHIN, "the holds counted", || async { holds(&path) == 4 }).await;
    assert!(crate::capture::series_of_path(&fixed).is_empty(), "no series under the path sent");
    support::eventually_no_children(&connect, &fixed, WITHIN).await;
}
