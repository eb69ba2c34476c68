//! The blocking facade (`zk_curator::blocking`) from plain threads, against a real ZooKeeper: each
//! test asserts one promise of the async API kept through the facade — mutual exclusion, guards
//! released on drop on any thread, Curator-style re-entrancy per OS thread, strict deadlines with
//! the server down, recovery after a restart, the read-write lock and the semaphores from threads,
//! the blocking leader latch and selector (the selector's work on a plain thread, stopped before
//! the next leader's starts and before its node goes), the shared values and atomic counters from
//! threads (exact totals, change streams, deadlines with the server down), and a typed error
//! (never a panic) for a blocking call made inside a tokio runtime.
//!
//! No test here is a `#[tokio::test]`: the blocking calls run on plain `#[test]` threads. A small
//! runtime of the test's own only starts and stops the ZooKeeper server and looks at the tree
//! through an observer session.

use crate::support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use crate::support::exclusion::HoldLog;
use zk_curator::blocking::{
    self, InterProcessMultiLock, InterProcessMutex, InterProcessReadWriteLock, InterProcessSemaphoreMutex,
    InterProcessSemaphoreV2,
};
use zk_curator::locks::HoldState;
use zk_curator::testing::TestingServer;
use zk_curator::{Error, ErrorKind, RetryNTimes};

/// Generous slack on top of a timeout, for a loaded 2-core machine; only ever an upper bound.
const SLACK: Duration = Duration::from_secs(5);

/// A ZooKeeper server for one test, with the small runtime that starts it and observes the tree.
struct Zk {
    server: TestingServer,
    rt: tokio::runtime::Runtime,
}

impl Zk {
    fn start() -> Zk {
        Self::start_with(false)
    }

    /// A server this test owns (it will be stopped and restarted).
    fn owned() -> Zk {
        Self::start_with(true)
    }

    fn start_with(owned: bool) -> Zk {
        Self::start_builder(if owned { TestingServer::builder().owned() } else { TestingServer::builder() })
    }

    /// A server with a 200 ms tick (expiry is checked once per tick; sessions of 0.4 to 4 s).
    fn fast_ticks() -> Zk {
        Self::start_builder(TestingServer::builder().tick_time(Duration::from_millis(200)))
    }

    fn start_builder(builder: zk_curator::testing::TestingServerBuilder) -> Zk {
        support::init_tracing();
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let server = rt.block_on(support::server_with(builder));
        Zk { server, rt }
    }

    fn connect(&self) -> String {
        self.server.connect_string()
    }

    /// A blocking client with test timeouts (session 10 s, connection 5 s, 10 retries 100 ms apart).
    fn client(&self) -> blocking::CuratorClient {
        let builder = zk_curator::CuratorClient::builder(&self.connect())
            .session_timeout(Duration::from_secs(10))
            .connection_timeout(Duration::from_secs(5))
            .retry_policy(RetryNTimes::new(10, Duration::from_millis(100)));
        blocking::CuratorClient::from_builder(builder).expect("connect")
    }

    /// The children of `path` now, through a fresh observer session.
    fn children(&self, path: &str) -> Vec<String> {
        self.rt.block_on(support::children(&self.connect(), path))
    }

    /// Waits up to `within` for `path` to have no children; returns what it saw last.
    fn eventually_no_children(&self, path: &str, within: Duration) -> Vec<String> {
        self.rt.block_on(support::eventually_no_children(&self.connect(), path, within))
    }

    fn stop(&mut self) {
        self.rt.block_on(self.server.stop()).expect("stop");
    }

    fn restart(&mut self) {
        self.rt.block_on(self.server.restart()).expect("restart");
    }
}

/// Runs `f` on a thread of its own and returns its result, failing the test if it takes longer
/// than `limit` (the thread is left behind then: a hung call must not hang the test).
#[track_caller]
fn within<T: Send + 'static>(what: &str, limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> (T, Duration) {
    let (tx, rx) = mpsc::channel();
    let start = Instant::now();
    thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(value) => (value, start.elapsed()),
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what}: not returned within {limit:?}"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("{what}: the thread panicked"),
    }
}

fn assert_runtime_refused<T: std::fmt::Debug>(result: zk_curator::Result<T>, what: &str) {
    match result {
        Err(Error::InvalidArgument { name: "runtime", .. }) => {}
        other => panic!("{what}: expected InvalidArgument naming `runtime`, got {other:?}"),
    }
}

/// Everything the facade hands out can cross threads: guards and leases move (`Send`), recipes
/// and clients are shared (`Send + Sync`).
#[test]
fn the_facade_types_cross_threads() {
    fn send<T: Send + 'static>() {}
    fn shared<T: Send + Sync + 'static>() {}
    shared::<blocking::CuratorClient>();
    shared::<InterProcessMutex>();
    shared::<InterProcessReadWriteLock>();
    shared::<blocking::ReadLock>();
    shared::<blocking::WriteLock>();
    shared::<InterProcessSemaphoreV2>();
    shared::<InterProcessSemaphoreMutex>();
    shared::<InterProcessMultiLock>();
    shared::<blocking::WorkClaims>();
    send::<blocking::MutexGuard>();
    send::<blocking::ReadLockGuard>();
    send::<blocking::WriteLockGuard>();
    send::<blocking::Lease>();
    shared::<blocking::LeaderLatch>();
    shared::<blocking::LeaderSelector>();
    shared::<blocking::Leadership>();
    send::<blocking::LeadershipChanges>();
    send::<blocking::HoldStateChanges>();
    shared::<blocking::SharedValue>();
    shared::<blocking::SharedCount>();
    send::<blocking::SharedValueChanges<i32>>();
    shared::<blocking::DistributedAtomicValue>();
    shared::<blocking::DistributedAtomicLong>();
    shared::<blocking::DistributedAtomicInteger>();
}

/// Three threads, each on its own client (session), take the mutex 8 times each with guards: the
/// critical section is never entered twice at once, a read-modify-write counter loses no update,
/// and the fencing tokens increase (checked by the shared exclusion checker). Half the guards are
/// released, half dropped.
#[test]
fn mutual_exclusion_between_threads() {
    let zk = Zk::start();
    let path = support::unique_path("blocking-exclusion");
    let inside = Arc::new(AtomicUsize::new(0));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let counter = Arc::new(AtomicUsize::new(0));
    let log = HoldLog::default();
    let start = Arc::new(Barrier::new(3));
    let threads: Vec<_> = (0..3)
        .map(|t| {
            let client = zk.client();
            let mutex = InterProcessMutex::new(&client, &path).unwrap();
            let (inside, overlaps, counter, log, start) =
                (inside.clone(), overlaps.clone(), counter.clone(), log.clone(), start.clone());
            thread::spawn(move || {
                start.wait();
                for round in 0..8 {
                    let guard = mutex.lock().expect("lock");
                    let holding = log.start(format!("thread {t} round {round}"), guard.fencing_token().as_u128());
                    if inside.fetch_add(1, Ordering::SeqCst) != 0 {
                        overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                    // A read-modify-write that loses updates unless the lock excludes.
                    let seen = counter.load(Ordering::SeqCst);
                    thread::sleep(Duration::from_millis(3));
                    counter.store(seen + 1, Ordering::SeqCst);
                    inside.fetch_sub(1, Ordering::SeqCst);
                    holding.end();
                    if round % 2 == 0 {
                        guard.release().expect("release");
                    } else {
                        drop(guard);
                    }
                }
                drop(client);
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("worker thread");
    }
    assert_eq!(overlaps.load(Ordering::SeqCst), 0, "two threads were in the critical section at once");
    assert_eq!(counter.load(Ordering::SeqCst), 24, "an update was lost: the lock did not exclude");
    assert_eq!(log.assert_exclusive("blocking mutex, 3 threads").len(), 24);
    let left = zk.eventually_no_children(&path, Duration::from_secs(5));
    assert!(left.is_empty(), "nodes left behind: {left:?}");
}

/// The blocking non-fair mutex from plain threads: guards exclude (one checker), a Curator-style
/// hold is re-entrant for its thread only, and nothing is left behind.
#[test]
fn the_non_fair_mutex_excludes_between_threads_and_is_reentrant_per_thread() {
    let zk = Zk::start();
    let path = support::unique_path("blocking-nonfair");
    let log = HoldLog::default();
    let threads: Vec<_> = (0..3)
        .map(|t| {
            let client = zk.client();
            let mutex = blocking::InterProcessNonFairMutex::new(&client, &path).unwrap();
            let log = log.clone();
            thread::spawn(move || {
                for round in 0..8 {
                    let guard = mutex.lock().expect("lock");
                    let holding = log.start(format!("thread {t} round {round}"), guard.fencing_token().as_u128());
                    thread::sleep(Duration::from_millis(2));
                    holding.end();
                    guard.release().expect("release");
                }
                drop(client);
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("worker thread");
    }
    assert_eq!(log.assert_exclusive("blocking non-fair mutex, 3 threads").len(), 24);

    let client = zk.client();
    let mutex = blocking::InterProcessNonFairMutex::new(&client, &path).unwrap();
    mutex.acquire().unwrap();
    assert!(mutex.acquire_timeout(Duration::from_secs(2)).unwrap(), "the owner thread re-enters");
    let other = mutex.clone();
    let (released, reentered) =
        thread::spawn(move || (other.release(), other.acquire_timeout(Duration::from_millis(300)))).join().unwrap();
    assert_eq!(released.unwrap_err().kind(), ErrorKind::NotOwner, "another thread cannot release it");
    assert!(!reentered.unwrap(), "another thread cannot re-enter it");
    assert!(mutex.current_hold().is_some());
    mutex.release().unwrap();
    mutex.release().unwrap();
    let left = zk.eventually_no_children(&path, Duration::from_secs(5));
    assert!(left.is_empty(), "nodes left behind: {left:?}");
}

/// A guard taken on one thread and dropped on another — a plain thread with no runtime — releases
/// its node (in the background, through the client's queue), and another client gets the lock.
/// The same for a semaphore lease.
#[test]
fn guard_dropped_on_another_thread_releases_the_node() {
    let zk = Zk::start();
    let client = zk.client();
    let path = support::unique_path("blocking-drop-elsewhere");
    let mutex = InterProcessMutex::new(&client, &path).unwrap();

    let guard = thread::spawn(move || mutex.lock().expect("lock")).join().unwrap();
    let node = support::node_name(guard.node_path()).to_string();
    assert_eq!(zk.children(&path), vec![node], "the guard's node is there while held");
    let dropper = thread::spawn(move || {
        assert!(tokio::runtime::Handle::try_current().is_err(), "the dropping thread has no runtime");
        drop(guard);
    });
    dropper.join().expect("dropping the guard on another thread must not panic");
    let left = zk.eventually_no_children(&path, Duration::from_secs(5));
    assert!(left.is_empty(), "the dropped guard's node is still there: {left:?}");
    let other = zk.client();
    let guard = InterProcessMutex::new(&other, &path).unwrap().try_lock_for(Duration::from_secs(5)).unwrap();
    assert!(guard.is_some(), "another client gets the lock once the dropped guard's node is gone");
    drop(guard);

    let sem_path = support::unique_path("blocking-lease-drop-elsewhere");
    let semaphore = InterProcessSemaphoreV2::new(&client, &sem_path, 1).unwrap();
    let lease = semaphore.acquire().expect("lease");
    let leases = format!("{sem_path}/leases");
    assert_eq!(zk.children(&leases).len(), 1);
    thread::spawn(move || drop(lease)).join().unwrap();
    let left = zk.eventually_no_children(&leases, Duration::from_secs(5));
    assert!(left.is_empty(), "the dropped lease's node is still there: {left:?}");
}

/// Curator-style holds belong to the calling OS thread: it re-enters (one node, count 2), another
/// thread can neither release its hold (`NotOwner`) nor re-enter it (it queues and times out), and
/// the owner's second release deletes the node.
#[test]
fn curator_style_reentrancy_is_per_thread() {
    let zk = Zk::start();
    let client = zk.client();
    let path = support::unique_path("blocking-reentrancy");
    let mutex = InterProcessMutex::new(&client, &path).unwrap();

    mutex.acquire().expect("first acquire");
    assert!(mutex.is_owned_by_current_thread());
    let node = mutex.lock_node_path().expect("the owner has a node");
    // Bounded, so that a facade that ran each call as a holder of its own fails here instead of
    // waiting forever behind its own node.
    assert!(mutex.acquire_timeout(Duration::from_secs(2)).unwrap(), "the owner thread re-enters");
    assert_eq!(mutex.lock_node_path().as_deref(), Some(node.as_str()), "re-entry reuses the node");
    assert_eq!(zk.children(&path).len(), 1, "one node for two holds");

    let other = mutex.clone();
    let (released, owned, reentered) = thread::spawn(move || {
        let released = other.release();
        let owned = other.is_owned_by_current_thread();
        let reentered = other.acquire_timeout(Duration::from_millis(300));
        (released, owned, reentered)
    })
    .join()
    .unwrap();
    match released {
        Err(Error::NotOwner { .. }) => {}
        other => panic!("another thread released the owner's hold: {other:?}"),
    }
    assert!(!owned, "another thread does not own the hold");
    assert!(!reentered.unwrap(), "another thread cannot re-enter the owner's hold: it queues");
    assert_eq!(zk.children(&path).len(), 1, "the other thread's attempt left nothing behind");

    mutex.release().expect("first release");
    assert!(mutex.is_owned_by_current_thread(), "still held once");
    assert_eq!(zk.children(&path).len(), 1, "the node stays until the last release");
    mutex.release().expect("last release");
    assert!(!mutex.is_owned_by_current_thread());
    assert!(zk.children(&path).is_empty(), "the last release deleted the node before returning");
    assert_eq!(mutex.release().unwrap_err().kind(), ErrorKind::NotOwner, "nothing left to release");
}

/// A timed call made on a thread of its own: `Ok(true)` if it acquired.
type TimedCall = Box<dyn FnOnce() -> Result<bool, Error> + Send>;

/// With the server down, every timed call returns within its timeout (plus slack), from several
/// threads at once; a call made while it is down completes once it is back.
#[test]
fn deadlines_hold_while_the_server_is_down_and_calls_recover_after_a_restart() {
    let mut zk = Zk::owned();
    let client = zk.client();
    let path = support::unique_path("blocking-server-down");
    let mutex = InterProcessMutex::new(&client, &path).unwrap();
    let rw = InterProcessReadWriteLock::new(&client, &support::unique_path("blocking-down-rw")).unwrap();
    let semaphore = InterProcessSemaphoreV2::new(&client, &support::unique_path("blocking-down-sem"), 2).unwrap();
    zk.stop();

    let timeout = Duration::from_millis(1500);
    let limit = timeout + SLACK;
    let allowed = [ErrorKind::Retryable, ErrorKind::DeadlineExceeded];
    let calls: Vec<(&str, TimedCall)> = vec![
        ("mutex try_lock_for", {
            let m = mutex.clone();
            Box::new(move || m.try_lock_for(timeout).map(|g| g.is_some()))
        }),
        ("mutex acquire_timeout", {
            let m = mutex.clone();
            Box::new(move || m.acquire_timeout(timeout))
        }),
        ("write try_lock_for", {
            let rw = rw.clone();
            Box::new(move || rw.write_lock().try_lock_for(timeout).map(|g| g.is_some()))
        }),
        ("semaphore acquire_timeout", {
            let s = semaphore.clone();
            Box::new(move || s.acquire_timeout(timeout).map(|l| l.is_some()))
        }),
        ("mutex try_lock", {
            let m = mutex.clone();
            Box::new(move || m.try_lock().map(|g| g.is_some()))
        }),
    ];
    let running: Vec<_> = calls
        .into_iter()
        .map(|(what, call)| {
            let (tx, rx) = mpsc::channel();
            thread::spawn(move || {
                let start = Instant::now();
                let result = call();
                let _ = tx.send((result, start.elapsed()));
            });
            (what, rx)
        })
        .collect();
    let start = Instant::now();
    for (what, rx) in running {
        let left = limit.saturating_sub(start.elapsed());
        let (result, took) = rx.recv_timeout(left).unwrap_or_else(|_| panic!("{what}: not returned within {limit:?}"));
        println!("{what}: {result:?} after {took:?}");
        assert!(took <= limit, "{what}: took {took:?}, more than {limit:?}");
        support::assert_ok_or_kind(&result, &allowed, what);
        assert!(!result.unwrap_or(false), "{what}: acquired with the server down");
    }

    // An untimed lock() made while the server is down returns once it is back.
    let waiting = {
        let m = mutex.clone();
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let _ = tx.send(m.lock());
        });
        rx
    };
    thread::sleep(Duration::from_millis(300));
    zk.restart();
    let guard = waiting
        .recv_timeout(Duration::from_secs(30))
        .expect("lock() made while the server was down did not return after the restart")
        .expect("lock() made while the server was down fails after the restart");
    assert_eq!(guard.hold_state(), HoldState::Held);
    guard.release().expect("release after the restart");
    assert!(client.block_until_connected(Duration::from_secs(5)).unwrap());
    let (acquired, _) = within("acquire_timeout after the restart", Duration::from_secs(10), {
        let m = mutex.clone();
        move || {
            let got = m.acquire_timeout(Duration::from_secs(5));
            if let Ok(true) = got {
                m.release().unwrap();
            }
            got
        }
    });
    assert!(acquired.unwrap(), "the mutex works after the restart");
    let left = zk.eventually_no_children(&path, Duration::from_secs(5));
    assert!(left.is_empty(), "nodes left behind: {left:?}");
}

/// The read-write lock from threads: readers share, a writer waits for them and excludes them;
/// Curator-style downgrade on one thread; an upgrade is refused; a guard downgrade.
#[test]
fn read_write_lock_from_threads() {
    let zk = Zk::start();
    let client = zk.client();
    let path = support::unique_path("blocking-rw");
    let lock = InterProcessReadWriteLock::new(&client, &path).unwrap();

    // Two readers at once, on two threads; a writer cannot get in meanwhile.
    let both_reading = Arc::new(Barrier::new(3));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (lock, both_reading) = (lock.clone(), both_reading.clone());
            thread::spawn(move || {
                let guard = lock.read_lock().try_lock_for(Duration::from_secs(5)).unwrap().expect("shared read");
                both_reading.wait(); // both hold the read lock now
                both_reading.wait(); // the writer has tried
                guard.release().unwrap();
            })
        })
        .collect();
    both_reading.wait();
    let writer = zk.client();
    let writer_lock = InterProcessReadWriteLock::new(&writer, &path).unwrap();
    let blocked = writer_lock.write_lock().try_lock_for(Duration::from_millis(300)).unwrap();
    assert!(blocked.is_none(), "a writer got in while two readers held the lock");
    both_reading.wait();
    for reader in readers {
        reader.join().unwrap();
    }
    let write = writer_lock.write_lock().try_lock_for(Duration::from_secs(5)).unwrap().expect("write after readers");
    let read = thread::spawn({
        let lock = lock.clone();
        move || lock.read_lock().try_lock_for(Duration::from_millis(300)).unwrap().is_some()
    });
    assert!(!read.join().unwrap(), "a reader got in while a writer held the lock");
    // Guard downgrade: the writer's own read node takes its place.
    let downgraded = writer_lock.read_lock().lock_while_writing(&write).unwrap();
    write.release().unwrap();
    assert_eq!(downgraded.hold_state(), HoldState::Held);
    downgraded.release().unwrap();

    // Curator-style on one thread: downgrade works, upgrade is refused.
    lock.write_lock().acquire().unwrap();
    lock.read_lock().acquire().unwrap();
    lock.write_lock().release().unwrap();
    assert!(lock.read_lock().is_owned_by_current_thread());
    match lock.write_lock().acquire_timeout(Duration::from_secs(1)) {
        Err(Error::WouldDeadlock { .. }) => {}
        other => panic!("an upgrade must be refused, got {other:?}"),
    }
    let other_thread = thread::spawn({
        let lock = lock.clone();
        move || lock.read_lock().release()
    });
    assert_eq!(other_thread.join().unwrap().unwrap_err().kind(), ErrorKind::NotOwner);
    lock.read_lock().release().unwrap();
    let left = zk.eventually_no_children(&path, Duration::from_secs(5));
    assert!(left.is_empty(), "nodes left behind: {left:?}");
}

/// The semaphores and the multi-lock from threads: never more than the maximum leases at once
/// (and the maximum reached), a semaphore mutex released by another thread, a multi-lock's holds
/// owned by the thread that took them.
#[test]
fn semaphores_and_multi_lock_from_threads() {
    let zk = Zk::start();
    let client = zk.client();
    let path = support::unique_path("blocking-semaphore");
    let semaphore = InterProcessSemaphoreV2::new(&client, &path, 2).unwrap();
    let inside = Arc::new(AtomicUsize::new(0));
    let max = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (semaphore, inside, max) = (semaphore.clone(), inside.clone(), max.clone());
            thread::spawn(move || {
                for _ in 0..3 {
                    let lease = semaphore.acquire().expect("lease");
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    max.fetch_max(now, Ordering::SeqCst);
                    thread::sleep(Duration::from_millis(40));
                    inside.fetch_sub(1, Ordering::SeqCst);
                    lease.release().expect("release lease");
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    // At most 2 at once (that 2 are handed out together is up to the threads' timing, so it is
    // checked below with acquire_many(2), not here).
    assert!(max.load(Ordering::SeqCst) <= 2, "more than 2 leases at once: {}", max.load(Ordering::SeqCst));
    let many = semaphore.acquire_many(2).unwrap();
    assert!(semaphore.acquire_timeout(Duration::from_millis(200)).unwrap().is_none(), "a third lease");
    blocking::return_all(many).unwrap();
    assert!(zk.eventually_no_children(&format!("{path}/leases"), Duration::from_secs(5)).is_empty());

    let semmutex = InterProcessSemaphoreMutex::new(&client, &support::unique_path("blocking-semmutex")).unwrap();
    semmutex.acquire().unwrap();
    assert!(!semmutex.acquire_timeout(Duration::from_millis(200)).unwrap(), "not re-entrant");
    let releaser = thread::spawn({
        let semmutex = semmutex.clone();
        move || semmutex.release()
    });
    releaser.join().unwrap().expect("another thread may release a semaphore mutex");
    assert!(!semmutex.is_acquired_in_this_process());

    let (a, b) = (support::unique_path("blocking-multi-a"), support::unique_path("blocking-multi-b"));
    let multi = Arc::new(InterProcessMultiLock::from_paths(&client, &[&a, &b]).unwrap());
    multi.acquire().unwrap();
    assert!(multi.is_acquired_in_this_process());
    let other = thread::spawn({
        let multi = multi.clone();
        move || multi.release()
    });
    let refused = other.join().unwrap().unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::NotOwner, "another thread released the multi-lock: {refused}");
    assert_eq!((zk.children(&a).len(), zk.children(&b).len()), (1, 1), "still held by the owner");
    multi.release().unwrap();
    assert!(zk.children(&a).is_empty() && zk.children(&b).is_empty());
}

/// A blocking call made inside a tokio runtime — in `block_on`, in a task, in `spawn_blocking` —
/// returns `InvalidArgument` naming `runtime` instead of panicking or blocking the runtime; a
/// guard dropped there is still released; the facade keeps working from plain threads afterwards.
#[test]
fn a_blocking_call_inside_a_runtime_is_a_typed_error() {
    let zk = Zk::start();
    let client = zk.client();
    let path = support::unique_path("blocking-in-runtime");
    let mutex = InterProcessMutex::new(&client, &path).unwrap();
    let connect = zk.connect();

    let guard = mutex.lock().unwrap();
    let (refused_lock, refused_connect, refused_release, refused_close) = zk.rt.block_on(async {
        let refused_lock = mutex.try_lock_for(Duration::from_millis(100)).map(|g| g.is_some());
        let refused_connect = blocking::CuratorClient::connect(&connect).map(|_| ());
        // release() cannot wait here: it says so, and the guard is released in the background.
        let refused_release = guard.release();
        let refused_close = client.close();
        (refused_lock, refused_connect, refused_release, refused_close)
    });
    assert_runtime_refused(refused_lock, "try_lock_for in block_on");
    assert_runtime_refused(refused_connect, "connect in block_on");
    assert_runtime_refused(refused_release, "release in block_on");
    assert_runtime_refused(refused_close, "close in block_on");
    let left = zk.eventually_no_children(&path, Duration::from_secs(5));
    assert!(left.is_empty(), "a guard whose release was refused is still released: {left:?}");

    let in_task = zk.rt.block_on({
        let mutex = mutex.clone();
        async move { crate::support::spawn(async move { mutex.acquire() }).await.unwrap() }
    });
    assert_runtime_refused(in_task, "acquire in a task");
    let in_spawn_blocking = zk.rt.block_on({
        let mutex = mutex.clone();
        async move { tokio::task::spawn_blocking(move || mutex.try_lock().map(|g| g.is_some())).await.unwrap() }
    });
    assert_runtime_refused(in_spawn_blocking, "try_lock in spawn_blocking");

    // A guard dropped inside a runtime's task is released too.
    let guard = mutex.lock().unwrap();
    zk.rt.block_on(async move { crate::support::spawn(async move { drop(guard) }).await.unwrap() });
    let left = zk.eventually_no_children(&path, Duration::from_secs(5));
    assert!(left.is_empty(), "a guard dropped in a task is released: {left:?}");

    // Still fine from a plain thread.
    let guard = mutex.try_lock_for(Duration::from_secs(5)).unwrap().expect("lock from a plain thread");
    guard.release().unwrap();
}

/// `close()` makes every later call fail with `Closed`; dropping the last handle (client, recipes,
/// guards) closes the client in the background.
#[test]
fn close_and_drop_close_the_client() {
    let zk = Zk::start();
    let client = zk.client();
    let mutex = InterProcessMutex::new(&client, &support::unique_path("blocking-close")).unwrap();
    client.close().unwrap();
    assert_eq!(mutex.try_lock_for(Duration::from_secs(1)).unwrap_err().kind(), ErrorKind::Closed);

    let client = zk.client();
    let path = support::unique_path("blocking-drop-client");
    let mutex = InterProcessMutex::new(&client, &path).unwrap();
    let guard = mutex.lock().unwrap();
    let async_client = client.async_client().clone();
    drop((client, mutex));
    assert!(!async_client.is_closed(), "a live guard keeps the client open");
    drop(guard);
    let closed = zk.rt.block_on(support::poll_until(Duration::from_secs(5), || {
        let closed = async_client.is_closed();
        async move { closed }
    }));
    assert!(closed, "dropping the last handle closes the client");
    let left = zk.eventually_no_children(&path, Duration::from_secs(5));
    assert!(left.is_empty(), "nodes left behind: {left:?}");
}

#[test]
fn the_data_api_from_plain_threads() {
    let mut zk = Zk::owned();
    let client = zk.client();
    let base = support::unique_path("blocking-data");
    let node = format!("{base}/config");
    assert_eq!(client.create(&node, b"v1", zk_curator::CreateMode::Persistent).unwrap(), node);
    let (data, stat) = client.get_data(&node).unwrap();
    assert_eq!(data, b"v1");
    // A conditional write from another thread wins; ours at the old version is refused, typed.
    let other = client.clone();
    let (node2, version) = (node.clone(), stat.version);
    thread::spawn(move || other.set_data(&node2, b"v2", Some(version)).unwrap()).join().unwrap();
    let refused = client.set_data(&node, b"v3", Some(version)).unwrap_err();
    assert_eq!(refused.code(), Some(zk_curator::ErrorCode::BadVersion), "{refused}");
    assert_eq!(client.get_data(&node).unwrap().0, b"v2");
    assert_eq!(client.get_children(&base).unwrap(), vec!["config".to_string()]);
    // A one-time watch, waited for on a plain thread.
    let (_, _, changed) = client.call(client.async_client().get_data(&node).watch()).unwrap();
    client.set_data(&node, b"v4", None).unwrap();
    let event = client.block_on(changed).unwrap();
    assert_eq!((event.event_type, event.path.as_str()), (zk_curator::EventType::NodeDataChanged, node.as_str()));
    let results =
        client.commit(zk_curator::Transaction::new().check(&node, 2).delete(&node, None).delete(&base, None)).unwrap();
    assert_eq!(results.len(), 3);
    assert!(client.exists(&node).unwrap().is_none());

    // Server down: a timed read returns within its timeout, typed; after a restart, calls work.
    zk.stop();
    let reader = client.clone();
    let path = node.clone();
    let (result, took) = within("a timed read with the server down", Duration::from_secs(1) + SLACK, move || {
        reader.call(reader.async_client().get_data(&path).timeout(Duration::from_secs(1)))
    });
    let err = result.unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::DeadlineExceeded | ErrorKind::Retryable), "{err:?} after {took:?}");
    zk.restart();
    assert!(client.exists(&node).unwrap().is_none());
}

// =============================================================================================
// elections: the blocking LeaderLatch and LeaderSelector
// =============================================================================================

/// A blocking client with the given session timeout (connection timeout 2 s), connected to
/// `connect`.
fn short_client(connect: &str, session: Duration) -> blocking::CuratorClient {
    let builder = zk_curator::CuratorClient::builder(connect)
        .session_timeout(session)
        .connection_timeout(Duration::from_secs(2))
        .retry_policy(RetryNTimes::new(10, Duration::from_millis(100)));
    let client = blocking::CuratorClient::from_builder(builder).expect("connect");
    assert_eq!(client.async_client().negotiated_session_timeout(), session, "negotiated session timeout");
    client
}

/// Two blocking latches on two clients: the first leads; the second, queued, is not leader and
/// `await_leadership_timeout` returns `false` within its timeout; its change iterator says
/// `NotLeader`. Once the first closes (its node deleted before `close` returns), the second leads,
/// with a larger fencing token, and its iterator says `Leader`; closing it leaves nothing behind.
#[test]
fn a_blocking_latch_leads_and_the_next_leads_after_it_closes() {
    let zk = Zk::start();
    let (ca, cb) = (zk.client(), zk.client());
    let path = support::unique_path("blocking-latch");
    let a = blocking::LeaderLatch::new(&ca, &path, "a").unwrap();
    let b = blocking::LeaderLatch::new(&cb, &path, "b").unwrap();
    assert_eq!(a.state(), zk_curator::leader::LatchState::Latent);
    assert_eq!(b.await_leadership_timeout(Duration::from_millis(10)).unwrap_err().kind(), ErrorKind::Closed);
    a.start().unwrap();
    assert!(a.await_leadership_timeout(Duration::from_secs(10)).unwrap(), "the only participant leads");
    assert!(a.has_leadership());
    assert_eq!(a.leadership_state(), zk_curator::leader::LeadershipState::Leader);
    let a_token = a.fencing_token().expect("a leader has a token");
    assert_eq!(a.start().unwrap_err().kind(), ErrorKind::BadArgument, "a latch starts once");

    b.start().unwrap();
    let mut b_changes = b.leadership_changes();
    assert_eq!(b_changes.next(), Some(zk_curator::leader::LeadershipState::NotLeader));
    let timeout = Duration::from_millis(700);
    let start = Instant::now();
    assert!(!b.await_leadership_timeout(timeout).unwrap(), "b leads while a does");
    let took = start.elapsed();
    assert!(took <= timeout + SLACK, "await_leadership_timeout took {took:?} for a {timeout:?} timeout");
    assert!(!b.has_leadership() && b.fencing_token().is_none());
    let participants = b.participants().unwrap();
    let ids: Vec<_> = participants.iter().map(|p| (p.id.as_str(), p.is_leader)).collect();
    assert_eq!(ids, [("a", true), ("b", false)], "participants in line, the leader first");
    assert_eq!(b.leader().unwrap().map(|p| p.id), Some("a".to_string()));
    let nothing = b_changes.next_timeout(Duration::from_millis(200)).unwrap_err();
    assert_eq!(nothing.kind(), ErrorKind::DeadlineExceeded, "no change while a leads: {nothing}");

    a.close().unwrap();
    assert!(!a.has_leadership());
    assert_eq!(zk.children(&path).len(), 1, "a's node was deleted before close returned");
    assert!(b.await_leadership_timeout(Duration::from_secs(10)).unwrap(), "b leads after a closed");
    assert!(b.fencing_token().unwrap() > a_token, "fencing tokens increase from leader to leader");
    assert_eq!(
        b_changes.next_timeout(Duration::from_secs(5)).unwrap(),
        Some(zk_curator::leader::LeadershipState::Leader)
    );
    b.close().unwrap();
    assert_eq!(b_changes.next_timeout(Duration::from_secs(5)).unwrap(), None, "the iterator ends on close");
    assert!(zk.children(&path).is_empty(), "nothing left behind");
}

/// A selector's work for one test: logs its term (start after it began, end just before it
/// returns, `stop_after` after being told to stop) and reports the start on `started`.
fn logged_work(
    who: &'static str,
    log: HoldLog,
    started: mpsc::Sender<&'static str>,
    stop_after: Duration,
) -> impl Fn(blocking::Leadership) + Send + Sync + 'static {
    let started = parking_lot::Mutex::new(started);
    move |leadership: blocking::Leadership| {
        let start = Instant::now();
        let token = leadership.fencing_token().as_u128();
        let _ = started.lock().send(who);
        leadership.cancelled();
        // Cleaning up after being told: still the leader's work until it returns.
        thread::sleep(stop_after);
        log.record(who, token, start, Instant::now(), false);
    }
}

/// Three blocking selectors (three sessions) with auto-requeue take turns: their work runs on a
/// plain thread (no runtime context; a blocking guarded write from it works), never two works at
/// once (the shared exclusion checker, fencing tokens increasing), and closing them leaves nothing
/// behind.
#[test]
fn selector_work_runs_on_plain_threads_and_never_twice_at_once() {
    let zk = Zk::start();
    let path = support::unique_path("blocking-selector");
    let marker = support::unique_path("blocking-selector-marker");
    let setup = zk.client();
    setup.create(&marker, b"", zk_curator::CreateMode::Persistent).unwrap();
    let log = HoldLog::default();
    let terms = Arc::new(AtomicUsize::new(0));
    let on_runtime = Arc::new(AtomicUsize::new(0));
    let inside = Arc::new(AtomicUsize::new(0));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let clients: Vec<_> = (0..3).map(|_| zk.client()).collect();
    let selectors: Vec<_> = clients
        .iter()
        .enumerate()
        .map(|(n, client)| {
            let (log, terms, on_runtime, inside, overlaps, marker) =
                (log.clone(), terms.clone(), on_runtime.clone(), inside.clone(), overlaps.clone(), marker.clone());
            let who = format!("selector {n}");
            let selector = blocking::LeaderSelector::new(client, &path, who.clone(), move |leadership| {
                let holding = log.start(who.clone(), leadership.fencing_token().as_u128());
                if inside.fetch_add(1, Ordering::SeqCst) != 0 {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                if tokio::runtime::Handle::try_current().is_ok() {
                    on_runtime.fetch_add(1, Ordering::SeqCst);
                }
                // A blocking call from the work's thread.
                let write = zk_curator::locks::GuardedWrite::new().set_data(&marker, who.as_bytes(), None);
                leadership.guarded_write(write).expect("a guarded write from the work");
                leadership.cancelled_timeout(Duration::from_millis(20));
                inside.fetch_sub(1, Ordering::SeqCst);
                holding.end();
                terms.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
            selector.auto_requeue();
            selector
        })
        .collect();
    for selector in &selectors {
        selector.start().unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while terms.load(Ordering::SeqCst) < 12 {
        assert!(Instant::now() < deadline, "only {} terms in 60 s", terms.load(Ordering::SeqCst));
        thread::sleep(Duration::from_millis(20));
    }
    for selector in &selectors {
        selector.close().unwrap();
    }
    let intervals = log.assert_exclusive("3 blocking selectors");
    assert_eq!(overlaps.load(Ordering::SeqCst), 0, "two works ran at once");
    assert_eq!(on_runtime.load(Ordering::SeqCst), 0, "a work ran inside a tokio runtime context");
    let who: std::collections::BTreeSet<_> = intervals.iter().map(|i| i.who.clone()).collect();
    assert_eq!(who.len(), 3, "every selector led in turn: {who:?}");
    assert!(zk.children(&path).is_empty(), "nothing left behind: {:?}", zk.children(&path));
    setup.delete(&marker, None).unwrap();
}

/// `interrupt_leadership` and `close` wait for the work: a work that takes 300 ms to stop after
/// being told keeps the node — the next selector's work starts only after it returned — and
/// `close` returns only after the work returned and the node is gone.
#[test]
fn interrupt_and_close_wait_for_the_work_to_stop() {
    let zk = Zk::start();
    let (ca, cb) = (zk.client(), zk.client());
    let path = support::unique_path("blocking-selector-close");
    let log = HoldLog::default();
    let (started, starts) = mpsc::channel();
    let stop_after = Duration::from_millis(300);
    let a = blocking::LeaderSelector::new(&ca, &path, "a", logged_work("a", log.clone(), started.clone(), stop_after))
        .unwrap();
    let b = blocking::LeaderSelector::new(&cb, &path, "b", logged_work("b", log.clone(), started, stop_after)).unwrap();
    a.start().unwrap();
    assert_eq!(starts.recv_timeout(Duration::from_secs(10)), Ok("a"));
    assert!(a.has_leadership());
    b.start().unwrap();
    zk.rt.block_on(async {
        support::eventually_queued(&support::observer(&zk.connect()).await, &path, 2, "b queued").await;
    });

    a.interrupt_leadership();
    assert_eq!(starts.recv_timeout(Duration::from_secs(10)), Ok("b"), "b leads after a's interrupted term");
    log.assert_exclusive("a interrupted, then b");
    assert_eq!(log.intervals().len(), 1, "a's work returned before b's started");
    assert!(!a.has_leadership() && b.has_leadership());

    let closing = Instant::now();
    b.close().unwrap();
    let closed = Instant::now();
    let intervals = log.assert_exclusive("b closed");
    let b_end = intervals.iter().find(|i| i.who == "b").expect("b's work returned before close did").end;
    assert!(b_end <= closed && closed - closing >= stop_after, "close returned before the work stopped");
    assert_eq!(zk.children(&path), Vec::<String>::new(), "close returned before b's node was deleted");
    a.close().unwrap();
}

/// A leader whose link goes silent (blackhole) until its session is given up: its work is told
/// to stop, and returns (100 ms after being told), before the other selector's work starts —
/// the other leads only once the server expired the silent session. The await of a latch behind
/// the silent link returns within its timeout.
#[test]
fn a_lost_session_stops_the_work_before_another_leader_starts() {
    let zk = Zk::fast_ticks();
    let proxy = zk.rt.block_on(zk_curator::testing::FaultProxy::start(&zk.connect())).expect("proxy");
    let session = Duration::from_secs(4);
    let ca = short_client(&proxy.connect_string(), session);
    let cb = short_client(&zk.connect(), session);
    let path = support::unique_path("blocking-selector-lost");
    let log = HoldLog::default();
    let (started, starts) = mpsc::channel();
    let stop_after = Duration::from_millis(100);
    let a = blocking::LeaderSelector::new(&ca, &path, "a", logged_work("a", log.clone(), started.clone(), stop_after))
        .unwrap();
    let b = blocking::LeaderSelector::new(&cb, &path, "b", logged_work("b", log.clone(), started, stop_after)).unwrap();
    a.start().unwrap();
    assert_eq!(starts.recv_timeout(Duration::from_secs(10)), Ok("a"));
    b.start().unwrap();
    zk.rt.block_on(async {
        support::eventually_queued(&support::observer(&zk.connect()).await, &path, 2, "b queued").await;
    });
    let latch = blocking::LeaderLatch::new(&ca, &support::unique_path("blocking-latch-silent"), "a").unwrap();
    latch.start().unwrap();
    assert!(latch.await_leadership_timeout(Duration::from_secs(10)).unwrap());
    let other = blocking::LeaderLatch::new(&ca, latch.path(), "queued").unwrap();
    other.start().unwrap();

    // a has just heard from the server (worst case for its timer); then silence.
    ca.exists("/").unwrap();
    let silenced = Instant::now();
    proxy.set_mode(zk_curator::testing::ProxyMode::Blackhole);
    let timeout = Duration::from_millis(1500);
    let ((waited, other), took) = within("await_leadership_timeout behind a silent link", timeout + SLACK, move || {
        let waited = other.await_leadership_timeout(timeout);
        (waited, other)
    });
    assert!(!waited.unwrap(), "a queued latch led behind a silent link");
    assert!(took <= timeout + SLACK, "await_leadership_timeout took {took:?}");
    assert_eq!(starts.recv_timeout(Duration::from_secs(30)), Ok("b"), "b leads after a's session is gone");
    let b_started = Instant::now();
    let intervals = log.assert_exclusive("a silenced, then b");
    let a_end = intervals.iter().find(|i| i.who == "a").expect("a's work returned before b's started").end;
    println!(
        "a's work returned {:?} after the silence; b's work started {:?} after it",
        a_end - silenced,
        b_started - silenced
    );
    assert!(!a.has_leadership());

    proxy.set_mode(zk_curator::testing::ProxyMode::Pass);
    b.close().unwrap();
    a.close().unwrap();
    drop((latch, other));
    let left = zk.eventually_no_children(&path, Duration::from_secs(10));
    assert!(left.is_empty(), "nodes left behind: {left:?}");
}

/// Dropping a started selector whose work runs — on a plain thread with no runtime, together with
/// its client — never panics; the work is told to stop, and its node is deleted only after the
/// work returned (1 s after being told).
#[test]
fn a_dropped_selector_stops_its_work_before_its_node_goes() {
    let zk = Zk::start();
    let client = zk.client();
    let path = support::unique_path("blocking-selector-drop");
    let log = HoldLog::default();
    let (started, starts) = mpsc::channel();
    let stop_after = Duration::from_secs(1);
    let selector =
        blocking::LeaderSelector::new(&client, &path, "a", logged_work("a", log.clone(), started, stop_after)).unwrap();
    selector.start().unwrap();
    assert_eq!(starts.recv_timeout(Duration::from_secs(10)), Ok("a"));
    thread::spawn(move || {
        assert!(tokio::runtime::Handle::try_current().is_err());
        drop((selector, client));
    })
    .join()
    .expect("dropping a started selector must not panic");
    let dropped = Instant::now();
    assert_eq!(zk.children(&path).len(), 1, "the node stays while the work still runs");
    let left = zk.eventually_no_children(&path, Duration::from_secs(10));
    let gone = Instant::now();
    assert!(left.is_empty(), "the dropped selector's node is still there: {left:?}");
    let ended = log.intervals().first().expect("the work returned").end;
    assert!(ended < gone && ended >= dropped, "the work returned {:?} after the drop", ended - dropped);
}

/// The election calls that wait, made inside a tokio runtime, return `InvalidArgument` naming
/// `runtime` (those that do not wait work); a selector closed from its own work gets
/// `WouldDeadlock` instead of waiting for itself; a started latch and a selector whose work runs,
/// dropped inside a runtime's task, do not panic and leave nothing behind.
#[test]
fn election_calls_inside_a_runtime_are_typed_errors() {
    let zk = Zk::start();
    let client = zk.client();
    let path = support::unique_path("blocking-latch-in-runtime");
    let latch = blocking::LeaderLatch::new(&client, &path, "a").unwrap();
    zk.rt.block_on(async { latch.start() }).expect("start does not wait: it works inside a runtime");
    assert!(latch.await_leadership_timeout(Duration::from_secs(10)).unwrap());
    let (timed, untimed, closed, read, changes) = zk.rt.block_on(async {
        (
            latch.await_leadership_timeout(Duration::from_millis(100)),
            latch.await_leadership(),
            latch.close(),
            latch.participants(),
            latch.leadership_changes().next_timeout(Duration::from_secs(1)),
        )
    });
    assert_runtime_refused(timed, "await_leadership_timeout in block_on");
    assert_runtime_refused(untimed, "await_leadership in block_on");
    assert_runtime_refused(closed, "latch close in block_on");
    assert_runtime_refused(read, "participants in block_on");
    assert_runtime_refused(changes, "LeadershipChanges::recv in block_on");
    assert!(latch.has_leadership(), "a refused close closes nothing");
    zk.rt.block_on(async move { crate::support::spawn(async move { drop(latch) }).await.unwrap() });
    let left = zk.eventually_no_children(&path, Duration::from_secs(5));
    assert!(left.is_empty(), "a latch dropped in a task left its node: {left:?}");

    let sel_path = support::unique_path("blocking-selector-in-runtime");
    let (tx, from_work) = mpsc::channel();
    let me: Arc<std::sync::OnceLock<std::sync::Weak<blocking::LeaderSelector>>> = Arc::default();
    let selector = Arc::new(
        blocking::LeaderSelector::new(&client, &sel_path, "a", {
            let (me, tx) = (me.clone(), parking_lot::Mutex::new(tx));
            move |leadership: blocking::Leadership| {
                let closed = me.get().and_then(|me| me.upgrade()).map(|selector| selector.close());
                let _ = tx.lock().send(closed);
                leadership.cancelled();
            }
        })
        .unwrap(),
    );
    me.set(Arc::downgrade(&selector)).unwrap();
    selector.start().unwrap();
    match from_work.recv_timeout(Duration::from_secs(10)).expect("the work ran") {
        Some(Err(Error::WouldDeadlock { .. })) => {}
        other => panic!("close from the work itself: expected WouldDeadlock, got {other:?}"),
    }
    assert!(selector.has_leadership(), "a refused close closes nothing");
    assert_runtime_refused(zk.rt.block_on(async { selector.close() }), "selector close in block_on");
    let selector = Arc::into_inner(selector).expect("the only handle");
    zk.rt.block_on(async move { crate::support::spawn(async move { drop(selector) }).await.unwrap() });
    let left = zk.eventually_no_children(&sel_path, Duration::from_secs(5));
    assert!(left.is_empty(), "a selector dropped in a task left its node: {left:?}");
}

/// Threads of this process now.
fn thread_count() -> usize {
    std::fs::read_dir("/proc/self/task").map(|dir| dir.count()).unwrap_or(0)
}

/// A selector dropped from inside its own work closes in the background once the work returned;
/// a panicking work ends its term and the next participant leads; and selectors made and dropped
/// (unstarted, leading, queued) leave no thread behind.
#[test]
fn selectors_dropped_from_their_work_or_panicking_leave_no_node_and_no_thread() {
    let zk = Zk::start();
    let client = zk.client();
    let baseline = thread_count();

    // Dropped from its own work thread.
    let path = support::unique_path("blocking-selector-self-drop");
    let slot: Arc<parking_lot::Mutex<Option<blocking::LeaderSelector>>> = Arc::default();
    let (returned, returns) = mpsc::channel::<()>();
    let returned = parking_lot::Mutex::new(returned);
    let in_work = slot.clone();
    let selector =
        blocking::LeaderSelector::new(&client, &path, "self-drop", move |leadership: blocking::Leadership| {
            drop(in_work.lock().take());
            leadership.cancelled();
            let _ = returned.lock().send(());
        })
        .unwrap();
    selector.start().unwrap();
    *slot.lock() = Some(selector);
    assert_eq!(returns.recv_timeout(Duration::from_secs(10)), Ok(()), "the work was told to stop");
    assert!(zk.eventually_no_children(&path, Duration::from_secs(10)).is_empty(), "the node is deleted");

    // A panicking work gives leadership up to the next participant.
    let path = support::unique_path("blocking-selector-panic");
    let (started, starts) = mpsc::channel::<&'static str>();
    let started = Arc::new(parking_lot::Mutex::new(started));
    let panicking = {
        let started = started.clone();
        blocking::LeaderSelector::new(&client, &path, "panics", move |_| {
            let _ = started.lock().send("panics");
            panic!("the work panics");
        })
        .unwrap()
    };
    panicking.start().unwrap();
    assert_eq!(starts.recv_timeout(Duration::from_secs(10)), Ok("panics"));
    let other = zk.client();
    let next = {
        let started = started.clone();
        blocking::LeaderSelector::new(&other, &path, "next", move |leadership: blocking::Leadership| {
            let _ = started.lock().send("next");
            leadership.cancelled();
        })
        .unwrap()
    };
    next.start().unwrap();
    assert_eq!(starts.recv_timeout(Duration::from_secs(10)), Ok("next"), "the next participant leads");
    assert!(panicking.close().is_ok());
    next.close().unwrap();
    drop((panicking, next, other));

    // Many selectors made and dropped: their runtime threads end.
    let path = support::unique_path("blocking-selector-threads");
    for round in 0..20 {
        let selector = blocking::LeaderSelector::new(&client, &path, "many", |leadership: blocking::Leadership| {
            leadership.cancelled();
        })
        .unwrap();
        if round % 2 == 0 {
            selector.start().unwrap();
        }
        drop(selector);
    }
    assert!(zk.eventually_no_children(&path, Duration::from_secs(20)).is_empty(), "dropped selectors' nodes go");
    let deadline = Instant::now() + Duration::from_secs(20);
    while thread_count() > baseline && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(50));
    }
    assert!(thread_count() <= baseline, "threads left behind: {} now, {baseline} before", thread_count());
    client.close().unwrap();
}

// =============================================================================================
// shared values and atomic counters
// =============================================================================================

/// Threads incrementing one blocking `DistributedAtomicLong` reach the exact total (every success
/// one distinct step); the integer counter, the byte value and both shared values work from plain
/// threads; a shared count set on one client is seen on another's blocking change stream.
#[test]
fn counters_and_shared_values_from_plain_threads() {
    const THREADS: usize = 4;
    const EACH: usize = 25;
    let zk = Zk::start();
    let clients: Vec<_> = (0..2).map(|_| zk.client()).collect();
    let base = support::unique_path("blocking-counters");
    let path = format!("{base}/sold");
    let mut threads = Vec::new();
    for t in 0..THREADS {
        let counter = blocking::DistributedAtomicLong::new(&clients[t % 2], &path)
            .unwrap()
            .with_retry_policy(RetryNTimes::new(1000, Duration::from_millis(1)));
        threads.push(thread::spawn(move || {
            let mut posts = Vec::new();
            while posts.len() < EACH {
                let r = counter.increment().expect("increment");
                if r.succeeded() {
                    assert_eq!(*r.post_value(), r.pre_value() + 1);
                    posts.push(*r.post_value());
                }
            }
            posts
        }));
    }
    let mut posts: Vec<i64> = threads.into_iter().flat_map(|t| t.join().expect("incrementer")).collect();
    posts.sort_unstable();
    let total = (THREADS * EACH) as i64;
    assert_eq!(posts, (1..=total).collect::<Vec<_>>(), "every success is one step, none twice");
    let counter = blocking::DistributedAtomicLong::new(&clients[0], &path).unwrap();
    assert_eq!(*counter.get().unwrap().post_value(), total);
    assert!(counter.compare_and_set(total, -1).unwrap().succeeded());
    assert_eq!(*counter.decrement().unwrap().post_value(), -2);

    let stock = blocking::DistributedAtomicInteger::new(&clients[1], &format!("{base}/stock")).unwrap();
    assert!(stock.try_initialize(10).unwrap());
    assert!(!stock.try_initialize(99).unwrap(), "initialize only creates");
    assert_eq!(*stock.subtract(3).unwrap().post_value(), 7);
    assert_eq!(*stock.add(1).unwrap().post_value(), 8);
    stock.force_set(0).unwrap();
    assert_eq!(*stock.try_set(5).unwrap().post_value(), 5);
    let token = blocking::DistributedAtomicValue::new(&clients[0], &format!("{base}/token")).unwrap();
    assert!(token.try_set(b"v1".to_vec()).unwrap().succeeded());
    assert!(!token.compare_and_set(b"v0".to_vec(), b"v2".to_vec()).unwrap().succeeded());
    assert!(token.compare_and_set(b"v1".to_vec(), b"v2".to_vec()).unwrap().succeeded());
    assert_eq!(token.get().unwrap().post_value(), b"v2");

    let count_path = format!("{base}/limit");
    let a = blocking::SharedCount::start(&clients[0], &count_path, 3).unwrap();
    let b = blocking::SharedCount::start(&clients[1], &count_path, 99).unwrap();
    assert_eq!((a.count(), b.count()), (3, 3), "the seed only creates");
    let mut changes = b.changes();
    let stale = b.versioned_value();
    let setter = a.clone();
    thread::spawn(move || setter.set_count(7).unwrap()).join().unwrap();
    let (seen, _) = within("b sees a's change", SLACK, move || changes.next_timeout(SLACK).unwrap());
    assert_eq!(seen.map(|s| *s.value()), Some(7));
    assert!(!b.try_set(100, &stale).unwrap(), "a stale version is refused");
    let fresh = b.versioned_value();
    assert!(b.try_set(8, &fresh).unwrap());
    let value = blocking::SharedValue::start(&clients[0], &format!("{base}/mode"), "normal").unwrap();
    assert_eq!(value.value(), b"normal");
    value.set("maintenance").unwrap();
    let current = value.versioned_value();
    assert_eq!(current.value(), b"maintenance");
    assert!(value.try_set("normal", &current).unwrap());
    assert!(!value.try_set("other", &current).unwrap(), "the version moved on");
}

/// With the server down, a timed blocking increment and a change wait return within their
/// timeouts; inside a tokio runtime the calls are typed errors; a shared value dropped on a plain
/// thread ends its change stream (no panic, no runtime needed).
#[test]
fn counter_and_shared_value_calls_keep_deadlines_refuse_a_runtime_and_drop_anywhere() {
    let mut zk = Zk::owned();
    let client = zk.client();
    let base = support::unique_path("blocking-counter-deadlines");
    let counter = blocking::DistributedAtomicLong::new(&client, &format!("{base}/n")).unwrap();
    assert!(counter.increment().unwrap().succeeded());
    let count = blocking::SharedCount::start(&client, &format!("{base}/limit"), 1).unwrap();

    let (in_runtime_increment, in_runtime_start, in_runtime_next) = zk.rt.block_on(async {
        (
            counter.increment().map(|_| ()),
            blocking::SharedCount::start(&client, &format!("{base}/other"), 1).map(|_| ()),
            count.changes().next_timeout(Duration::from_secs(1)).map(|_| ()),
        )
    });
    assert_runtime_refused(in_runtime_increment, "increment in block_on");
    assert_runtime_refused(in_runtime_start, "SharedCount::start in block_on");
    assert_runtime_refused(in_runtime_next, "changes().next() in block_on");

    zk.stop();
    let timed = counter.timeout(Duration::from_secs(1));
    let (result, took) =
        within("an increment with the server down", Duration::from_secs(1) + SLACK, move || timed.increment());
    let err = result.unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::DeadlineExceeded | ErrorKind::Retryable), "{err:?} after {took:?}");
    let mut changes = count.changes();
    let (seen, _) = within("a change wait with the server down", Duration::from_millis(500) + SLACK, move || {
        let seen = changes.next_timeout(Duration::from_millis(500));
        (seen, changes)
    });
    let (seen, mut changes) = seen;
    assert_eq!(seen.unwrap_err().kind(), ErrorKind::DeadlineExceeded, "nothing changed");
    zk.restart();

    drop(count);
    let (ended, _) = within("the change stream of a dropped count", SLACK, move || changes.next());
    assert_eq!(ended, None, "a dropped shared count ends its stream");
    assert!(*counter.get().unwrap().post_value() >= 1);
}

#[test]
fn blocking_idempotency_keys_run_each_key_once_across_threads_and_free_a_dropped_claim() {
    let zk = Zk::start();
    let client = zk.client();
    let base = support::unique_path("blocking-idem");
    let keys = blocking::IdempotencyKeys::new(
        &client,
        &base,
        zk_curator::idempotency::Retention::Ttl(Duration::from_secs(3600)),
    )
    .expect("keys");
    let started = Arc::new(AtomicUsize::new(0));
    let barrier = Arc::new(Barrier::new(6));
    let threads: Vec<_> = (0..6)
        .map(|_| {
            let (keys, started, barrier) = (keys.clone(), started.clone(), barrier.clone());
            thread::spawn(move || {
                barrier.wait();
                if let blocking::Begin::Started(claim) = keys.begin("form-1").expect("begin") {
                    started.fetch_add(1, Ordering::SeqCst);
                    claim.complete(b"ok".to_vec()).expect("complete");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a thread");
    }
    assert_eq!(started.load(Ordering::SeqCst), 1, "one thread runs the key");
    assert!(matches!(keys.begin("form-1").expect("begin"), blocking::Begin::Done { result } if result == b"ok"));
    // A claim dropped on a plain thread is freed in the background.
    let claim = match keys.begin("form-2").expect("begin") {
        blocking::Begin::Started(claim) => claim,
        other => panic!("expected Started, got {other:?}"),
    };
    thread::spawn(move || drop(claim)).join().expect("drop");
    let deadline = Instant::now() + Duration::from_secs(10);
    while zk.children(&base).contains(&"form-2".to_string()) {
        assert!(Instant::now() < deadline, "the dropped claim is deleted");
        thread::sleep(Duration::from_millis(20));
    }
    assert!(matches!(keys.begin("form-2").expect("begin"), blocking::Begin::Started(_)));
}

#[test]
fn blocking_claims_and_idempotency_claims_are_told_lost_when_their_session_expires() {
    let zk = Zk::start();
    let client = zk.client();
    let path = support::unique_path("blocking-claims-lost");
    let work = blocking::WorkClaims::new(&client, &path, "worker").unwrap();
    work.add("item", b"").unwrap();
    let claim = work.claim(1).unwrap().pop().expect("a claim");
    let keys = blocking::IdempotencyKeys::new(
        &client,
        &support::unique_path("blocking-idem-lost"),
        zk_curator::idempotency::Retention::Ttl(Duration::from_secs(3600)),
    )
    .expect("keys");
    let key = match keys.begin("req").expect("begin") {
        blocking::Begin::Started(claim) => claim,
        other => panic!("expected Started, got {other:?}"),
    };
    assert_eq!(claim.state(), zk_curator::claims::ClaimState::Held);
    assert_eq!(key.state(), zk_curator::locks::HoldState::Held);
    assert!(!work.lost_timeout(&claim, Duration::from_millis(50)).unwrap(), "a held claim is not lost");
    assert!(!key.lost_timeout(Duration::from_millis(50)).unwrap());
    let changes = work.state_changes(&claim);
    let key_changes = key.state_changes();

    zk.rt.block_on(zk_curator::testing::expire_session(&zk.connect(), client.async_client())).expect("expire");
    assert!(work.lost_timeout(&claim, Duration::from_secs(30)).unwrap(), "the claim is told lost");
    assert!(key.lost_timeout(Duration::from_secs(30)).unwrap(), "the idempotency claim is told lost");
    assert_eq!(claim.state(), zk_curator::claims::ClaimState::Lost);
    assert_eq!(key.state(), zk_curator::locks::HoldState::Lost);
    // Both streams end with Lost (an iterator on a plain thread).
    let seen: Vec<_> = thread::spawn(move || changes.collect::<Vec<_>>()).join().unwrap();
    assert_eq!(seen.last(), Some(&zk_curator::locks::HoldState::Lost), "{seen:?}");
    let seen: Vec<_> = thread::spawn(move || key_changes.collect::<Vec<_>>()).join().unwrap();
    assert_eq!(seen.last(), Some(&zk_curator::locks::HoldState::Lost), "{seen:?}");
}

#[test]
fn blocking_work_claims_complete_every_item_exactly_once_from_plain_threads() {
    let zk = Zk::start();
    let path = support::unique_path("blocking-claims");
    let loader = blocking::WorkClaims::new(&zk.client(), &path, "loader").unwrap();
    for i in 0..60 {
        loader.add(&format!("item-{i:02}"), b"").unwrap();
    }
    let done = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..3)
        .map(|t| {
            let work = blocking::WorkClaims::new(&zk.client(), &path, &format!("thread-{t}")).unwrap();
            let done = done.clone();
            thread::spawn(move || loop {
                let batch = work.claim(7).expect("claim");
                if batch.is_empty() {
                    if !work.wait_for_work(Duration::from_millis(200)).unwrap() {
                        break;
                    }
                    continue;
                }
                for claim in batch {
                    work.complete(claim.item()).expect("complete");
                    done.lock().push(claim.item().to_string());
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut done = done.lock().clone();
    done.sort();
    let before = done.len();
    done.dedup();
    assert_eq!((before, done.len()), (60, 60), "every item once");
    assert!(loader.unclaimed().unwrap().is_empty());
}

/// The blocking `DistributedQueue` with a lock path, from plain threads: every item put is taken
/// and acknowledged exactly once by competing consumer threads, and no item or lock node is left.
#[test]
fn a_blocking_queue_hands_each_item_to_one_consumer_thread_and_leaves_no_node() {
    let zk = Zk::start();
    let path = support::unique_path("blocking-queue");
    let (queue_path, lock_path) = (format!("{path}/queue"), format!("{path}/locks"));
    let producer = blocking::DistributedQueue::with_lock_path(&zk.client(), &queue_path, &lock_path).unwrap();
    for i in 0..40 {
        producer.put(format!("job-{i:02}").into_bytes()).unwrap();
    }
    assert!(producer.flush_puts_timeout(Duration::from_secs(30)).unwrap(), "puts flushed");
    assert_eq!(producer.len().unwrap(), 40);
    let done = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..3)
        .map(|_| {
            let queue = blocking::DistributedQueue::with_lock_path(&zk.client(), &queue_path, &lock_path).unwrap();
            let done = done.clone();
            thread::spawn(move || {
                let mut items = queue.consume().unwrap();
                // Ends when the queue stayed empty for a while (the others took the rest).
                while let Ok(Some(item)) = items.next_timeout(Duration::from_secs(2)) {
                    let item = item.expect("no report");
                    done.lock().push(String::from_utf8(item.value().clone()).unwrap());
                    item.ack().expect("ack");
                }
                queue.close().unwrap();
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut done = done.lock().clone();
    done.sort();
    let expected: Vec<_> = (0..40).map(|i| format!("job-{i:02}")).collect();
    assert_eq!(done, expected, "each item exactly once");
    assert!(zk.children(&queue_path).is_empty(), "no item node left");
    assert!(zk.eventually_no_children(&lock_path, Duration::from_secs(5)).is_empty(), "no lock node left");
}

/// A blocking queue item dropped unacknowledged on a thread that never saw a runtime goes to the
/// next consumer; a requeued one comes back at the tail; calls inside a runtime are typed errors
/// (the iterator ends, an item whose ack was refused is released); dropping everything on a
/// plain thread leaves no lock node.
#[test]
fn a_blocking_queue_item_dropped_anywhere_goes_to_the_next_consumer() {
    let zk = Zk::start();
    let path = support::unique_path("blocking-queue-drop");
    let (queue_path, lock_path) = (format!("{path}/queue"), format!("{path}/locks"));
    let queue = blocking::DistributedQueue::with_lock_path(&zk.client(), &queue_path, &lock_path).unwrap();
    queue.put(b"a".to_vec()).unwrap();
    queue.put(b"b".to_vec()).unwrap();
    let first = blocking::DistributedQueue::with_lock_path(&zk.client(), &queue_path, &lock_path).unwrap();
    let mut items = first.consume().unwrap();
    let a = items.next_timeout(Duration::from_secs(30)).unwrap().unwrap().unwrap();
    assert_eq!(a.value(), b"a");
    // Dropped on a plain thread: released to the next consumer.
    thread::spawn(move || drop(a)).join().unwrap();
    let b = items.next_timeout(Duration::from_secs(30)).unwrap().unwrap().unwrap();
    assert_eq!(b.value(), b"b");
    b.requeue().unwrap();
    drop(items);
    // The dropped item's lock node goes in the background: until it has, the next consumer would
    // skip that item as held and take the requeued one first.
    assert!(zk.eventually_no_children(&lock_path, Duration::from_secs(5)).is_empty(), "the dropped item released");

    let second = blocking::DistributedQueue::with_lock_path(&zk.client(), &queue_path, &lock_path).unwrap();
    let mut items = second.consume().unwrap();
    let mut got = Vec::new();
    for _ in 0..2 {
        let item = items.next_timeout(Duration::from_secs(30)).unwrap().unwrap().unwrap();
        got.push(String::from_utf8(item.value().clone()).unwrap());
        if got.len() == 2 {
            // An ack refused inside a runtime releases the item (as a drop would).
            let refused = zk.rt.block_on(async move { item.ack() });
            assert_runtime_refused(refused, "ack in block_on");
        } else {
            item.ack().unwrap();
        }
    }
    assert_eq!(got, ["a", "b"], "the dropped item again, then the requeued one at the tail");
    let in_runtime = zk.rt.block_on(async { (queue.put(b"c".to_vec()), items.next()) });
    assert_runtime_refused(in_runtime.0, "put in block_on");
    assert!(in_runtime.1.is_none(), "the iterator ends inside a runtime");
    // Everything dropped on a thread without a runtime: no panic, the lock nodes go (the refused
    // ack's item was released) and the unacknowledged item stays queued.
    thread::spawn(move || drop((items, second, first, queue))).join().unwrap();
    assert!(zk.eventually_no_children(&lock_path, Duration::from_secs(5)).is_empty(), "no lock node left");
    assert_eq!(zk.children(&queue_path).len(), 1, "the unacknowledged item stays queued");
}
