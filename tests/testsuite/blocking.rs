//! The blocking facade (`zk_curator::blocking`) from plain threads, against a real ZooKeeper: each
//! test asserts one promise of the async API kept through the facade — mutual exclusion, guards
//! released on drop on any thread, Curator-style re-entrancy per OS thread, strict deadlines with
//! the server down, recovery after a restart, the read-write lock and the semaphores from threads,
//! and a typed error (never a panic) for a blocking call made inside a tokio runtime.
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
use zk_curator::testing::TestingServer;
use zk_curator::{Error, ErrorKind, HoldState, RetryNTimes};

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
        support::init_tracing();
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let builder = if owned { TestingServer::builder().owned() } else { TestingServer::builder() };
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
    send::<blocking::MutexGuard>();
    send::<blocking::ReadLockGuard>();
    send::<blocking::WriteLockGuard>();
    send::<blocking::Lease>();
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
    assert_eq!(max.load(Ordering::SeqCst), 2, "more than 2 leases at once, or never 2");
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
        async move { tokio::spawn(async move { mutex.acquire() }).await.unwrap() }
    });
    assert_runtime_refused(in_task, "acquire in a task");
    let in_spawn_blocking = zk.rt.block_on({
        let mutex = mutex.clone();
        async move { tokio::task::spawn_blocking(move || mutex.try_lock().map(|g| g.is_some())).await.unwrap() }
    });
    assert_runtime_refused(in_spawn_blocking, "try_lock in spawn_blocking");

    // A guard dropped inside a runtime's task is released too.
    let guard = mutex.lock().unwrap();
    zk.rt.block_on(async move { tokio::spawn(async move { drop(guard) }).await.unwrap() });
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
