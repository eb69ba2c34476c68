//! The promises every sibling of the mutex keeps, each reproduced against a real ZooKeeper with
//! the public API: a downgrade only ever starts from a write hold that is held; a semaphore waiter
//! whose session is replaced starts over instead of stalling everyone; giving back what a timed
//! call took never breaks its deadline; absurd input gets a typed error, never a panic.

use crate::support;

use std::time::{Duration, Instant};

use zk_curator::leader::{LeaderLatch, LeaderSelector};
use zk_curator::locks::{
    GuardedWrite, HoldState, HolderId, InterProcessLock, InterProcessMultiLock, InterProcessMutex,
    InterProcessReadWriteLock, InterProcessSemaphoreV2, LockFuture,
};
use zk_curator::testing::{expire_session, FaultProxy, ProxyMode};
use zk_curator::{ConnectionState, CuratorClient, Error, ErrorKind};

/// Item 1, as reported: a task's write hold (Curator-style) is lost to a session expiry, another
/// client takes the write lock, and the task then asks for the read lock. The old code downgraded
/// from the dead write hold — a read node named after the old writer's sequence, sorting ahead of
/// the new writer — and two clients held the lock, one of them writing. It must be refused with
/// `LockLost` naming the write node, and leave no node behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_write_hold_is_never_downgraded() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let c1 = support::client(&connect).await;
    let c2 = support::client(&connect).await;
    let path = support::unique_path("downgrade-lost");
    let l1 = InterProcessReadWriteLock::new(&c1, &path).unwrap();
    let l2 = InterProcessReadWriteLock::new(&c2, &path).unwrap();

    l1.write_lock().acquire().await.unwrap();
    let old_writer = l1.write_lock().lock_node_path().unwrap();
    let hold = l1.write_lock().current_hold().unwrap();
    let old_session = c1.session_id();
    expire_session(&connect, &c1).await.unwrap();
    support::session_replaced(&c1, old_session).await;
    assert_eq!(hold.hold_state(), HoldState::Lost);
    let writer = l2.write_lock().lock().await.unwrap();

    support::assert_lock_lost(
        l1.read_lock().acquire_timeout(Duration::from_secs(5)).await,
        &old_writer,
        "timed acquire",
    );
    support::assert_lock_lost(l1.read_lock().acquire().await, &old_writer, "untimed acquire");
    assert!(!l1.read_lock().is_owned_by_current_task(), "a refused downgrade counts no hold");
    let children = support::sorted_children(&obs, &path).await;
    assert_eq!(children, vec![support::node_name(writer.node_path()).to_string()], "only the new writer's node");

    // The task still owes its release of the lost write hold, and may then read as anyone does.
    l1.write_lock().release().await.unwrap();
    writer.release().await.unwrap();
    assert!(l1.read_lock().acquire_timeout(Duration::from_secs(5)).await.unwrap());
    l1.read_lock().release().await.unwrap();
    assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(10)).await.is_empty());
}

/// Item 1, the session replaced *during* the attempt: the writer's connection is cut (its hold is
/// `Suspended`), its session is expired on the server and another client takes the write lock;
/// then a downgrade is asked for — Curator-style and guard-style — and the connection comes back.
/// The old code created the read node on the new session at the old writer's place and granted
/// it. Both must end with `LockLost` naming their write node, and leave no node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_downgrade_across_a_replaced_session_is_refused() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let proxy = FaultProxy::start(&connect).await.unwrap();
    let c1 = support::client_with(&proxy.connect_string(), Duration::from_secs(20)).await;
    let c2 = support::client(&connect).await;
    let (curator_path, guard_path) =
        (support::unique_path("downgrade-curator"), support::unique_path("downgrade-guard"));
    let (l1_curator, l1_guard) = (
        InterProcessReadWriteLock::new(&c1, &curator_path).unwrap(),
        InterProcessReadWriteLock::new(&c1, &guard_path).unwrap(),
    );

    l1_curator.write_lock().acquire().await.unwrap();
    let curator_writer = l1_curator.write_lock().lock_node_path().unwrap();
    let write_guard = l1_guard.write_lock().lock().await.unwrap();
    let guard_writer = write_guard.node_path().to_string();
    let session = zk_curator::raw::client(&c1).unwrap().session().clone();
    let old_session = c1.session_id();

    proxy.set_mode(ProxyMode::Cut);
    support::eventually(Duration::from_secs(10), "the writer is suspended", || async {
        write_guard.hold_state() == HoldState::Suspended
    })
    .await;
    zk_curator::raw::expire_session(&connect, &session).await.unwrap();
    let mut new_writers = Vec::new();
    for path in [&curator_path, &guard_path] {
        new_writers.push(InterProcessReadWriteLock::new(&c2, path).unwrap().write_lock().lock().await.unwrap());
    }

    let heal = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        proxy.set_mode(ProxyMode::Pass);
    };
    let (curator_style, guard_style, ()) = tokio::join!(
        l1_curator.read_lock().acquire_timeout(Duration::from_secs(20)),
        l1_guard.read_lock().lock_while_writing(&write_guard),
        heal
    );
    support::assert_lock_lost(curator_style, &curator_writer, "Curator-style downgrade");
    support::assert_lock_lost(guard_style, &guard_writer, "guard-style downgrade");
    support::session_replaced(&c1, old_session).await;
    for (path, writer) in [&curator_path, &guard_path].into_iter().zip(&new_writers) {
        let children = support::sorted_children(&obs, path).await;
        assert_eq!(children, vec![support::node_name(writer.node_path()).to_string()], "{path}: only the new writer");
    }
    drop(write_guard);
    l1_curator.write_lock().release().await.unwrap();
}

/// Item 2: one lease, held; waiter A holds the internal mutex with its lease node queued when its
/// session expires; waiter B arrives; the holder releases. The old code let A queue a new lease
/// node on its new session while still acting on the internal-mutex hold that died with the old
/// one, so two lease nodes counted against a limit of one and nobody got the free lease. Now A
/// gives up its turn and starts over: both waiters get the lease, one after the other, never two
/// at once, and nothing is left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_semaphore_waiter_whose_session_is_replaced_starts_over() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("semaphore-replaced");
    let (leases_path, locks_path) = (format!("{path}/leases"), format!("{path}/locks"));
    let holder = support::client(&connect).await;
    let a = support::client(&connect).await;
    let b = support::client(&connect).await;

    let held = InterProcessSemaphoreV2::new(&holder, &path, 1).unwrap().acquire().await.unwrap();
    let semaphore_a = InterProcessSemaphoreV2::new(&a, &path, 1).unwrap();
    let mut waiter_a = crate::support::spawn(async move { semaphore_a.acquire().await });
    support::eventually_queued(&obs, &leases_path, 2, "A's lease node").await;
    let old_session = a.session_id();
    expire_session(&connect, &a).await.unwrap();
    support::session_replaced(&a, old_session).await;
    // A is back in line on its new session (as a lease node, or waiting for the internal mutex).
    let a_session = a.session_id();
    support::eventually(Duration::from_secs(10), "A queues again on its new session", || async {
        let mut queued = false;
        for dir in [&leases_path, &locks_path] {
            for child in support::sorted_children(&obs, dir).await {
                queued |= support::stat(&obs, &format!("{dir}/{child}"))
                    .await
                    .is_some_and(|s| s.ephemeral_owner == a_session);
            }
        }
        queued
    })
    .await;
    let semaphore_b = InterProcessSemaphoreV2::new(&b, &path, 1).unwrap();
    let mut waiter_b = crate::support::spawn(async move { semaphore_b.acquire().await });
    support::eventually(Duration::from_secs(10), "B waits", || async {
        support::sorted_children(&obs, &locks_path).await.len()
            + support::sorted_children(&obs, &leases_path).await.len()
            >= 4
    })
    .await;

    held.release().await.unwrap();
    // Someone gets the free lease (the old code stalled here until the waiters gave up).
    let (first, mut second) = tokio::time::timeout(Duration::from_secs(15), async {
        tokio::select! {
            a = &mut waiter_a => (a, waiter_b),
            b = &mut waiter_b => (b, waiter_a),
        }
    })
    .await
    .expect("a waiter gets the free lease (no stall)");
    let first = first.unwrap().unwrap();
    assert_eq!(first.hold_state(), HoldState::Held);
    // The other waiter may already have queued its own lease node behind (it takes the internal
    // mutex the first one gave back): the first one's lease is the oldest, the only one within
    // the limit of one.
    let mut leases = support::sorted_children(&obs, &leases_path).await;
    leases.sort_by_key(|name| name[name.len().saturating_sub(10)..].to_string());
    assert_eq!(
        leases.first().map(String::as_str),
        Some(first.node_name()),
        "the first waiter's lease is first: {leases:?}"
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(300), &mut second).await.is_err(),
        "the other waiter waits while the lease is held"
    );
    first.release().await.unwrap();
    let second = support::join("the other waiter's lease", Duration::from_secs(15), second).await.unwrap();
    assert_eq!(support::sorted_children(&obs, &leases_path).await, vec![second.node_name().to_string()]);
    second.release().await.unwrap();
    assert!(support::eventually_no_children(&connect, &leases_path, Duration::from_secs(10)).await.is_empty());
    assert!(support::eventually_no_children(&connect, &locks_path, Duration::from_secs(10)).await.is_empty());
}

/// How far past its timeout a timed call may return here before it counts as hanging: generous,
/// since the failure this catches is a wait for a delete on a silent connection (the connection
/// timeout, 15 s).
const HANG_MARGIN: Duration = Duration::from_secs(3);

/// Item 3: a multi-lock that times out holding its first lock, and `acquire_many_timeout` that
/// times out holding a lease, give back what they took on a silent connection. The old code
/// waited for each give-back's delete (up to the connection timeout: 17 s for a 2 s call). The
/// deletes are queued, never awaited past the deadline, and done once the link heals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn giving_back_keeps_the_deadline_on_a_silent_connection() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let proxy = FaultProxy::start(&connect).await.unwrap();
    let silent =
        support::client_with_timeouts(&proxy.connect_string(), Duration::from_secs(30), Duration::from_secs(15)).await;
    let other = support::client(&connect).await;
    let timeout = Duration::from_secs(2);

    // A multi-lock holding its first lock while it waits for the second.
    let (first, second) = (support::unique_path("give-back-1"), support::unique_path("give-back-2"));
    let blocker = InterProcessMutex::new(&other, &second).unwrap().lock().await.unwrap();
    let multi = InterProcessMultiLock::from_paths(&silent, &[&first, &second]).unwrap();
    let started = Instant::now();
    let call = crate::support::spawn(async move { multi.acquire_timeout(timeout).await });
    support::eventually_queued(&obs, &second, 2, "the multi-lock waits for its second lock").await;
    assert_eq!(support::sorted_children(&obs, &first).await.len(), 1, "holding the first lock");
    proxy.set_mode(ProxyMode::Blackhole);
    let acquired = support::join("the multi-lock call", timeout + Duration::from_secs(30), call).await;
    let took = started.elapsed();
    assert!(!acquired.unwrap(), "not acquired");
    assert!(took < timeout + HANG_MARGIN, "a {timeout:?} multi-lock call took {took:?}");

    // acquire_many_timeout holding one lease while it waits for the second.
    proxy.set_mode(ProxyMode::Pass);
    support::eventually(Duration::from_secs(20), "reconnected", || async { silent.is_connected() }).await;
    let sem_path = support::unique_path("give-back-leases");
    let leases_path = format!("{sem_path}/leases");
    let taken = InterProcessSemaphoreV2::new(&other, &sem_path, 2).unwrap().acquire().await.unwrap();
    let semaphore = InterProcessSemaphoreV2::new(&silent, &sem_path, 2).unwrap();
    let started = Instant::now();
    let call = crate::support::spawn(async move { semaphore.acquire_many_timeout(2, timeout).await });
    support::eventually_queued(&obs, &leases_path, 3, "the second lease waits").await;
    proxy.set_mode(ProxyMode::Blackhole);
    let leases = support::join("the acquire_many call", timeout + Duration::from_secs(30), call).await;
    let took = started.elapsed();
    assert!(leases.unwrap().is_none(), "not acquired");
    assert!(took < timeout + HANG_MARGIN, "a {timeout:?} acquire_many call took {took:?}");

    // Once the link heals, the queued deletes leave nothing of the silent client behind.
    proxy.set_mode(ProxyMode::Pass);
    assert!(support::eventually_no_children(&connect, &first, Duration::from_secs(20)).await.is_empty());
    let left = support::eventually_no_children(&connect, &leases_path, Duration::from_secs(1)).await;
    assert!(left.len() <= 1, "{left:?}");
    taken.release().await.unwrap();
    blocker.release().await.unwrap();
    assert!(support::eventually_no_children(&connect, &leases_path, Duration::from_secs(20)).await.is_empty());
    assert!(support::eventually_no_children(&connect, &second, Duration::from_secs(20)).await.is_empty());
}

/// A lock granted exactly as its timeout runs out: it acquires and then lets the whole timeout
/// pass before answering `true` (as a grant that arrives at the deadline does).
struct GrantedAtTheDeadline(InterProcessMutex);

impl InterProcessLock for GrantedAtTheDeadline {
    fn path(&self) -> &str {
        self.0.path()
    }
    fn acquire(&self) -> LockFuture<'_, ()> {
        Box::pin(self.0.acquire())
    }
    fn acquire_timeout(&self, timeout: Duration) -> LockFuture<'_, bool> {
        Box::pin(async move {
            let deadline = tokio::time::Instant::now() + timeout;
            let acquired = self.0.acquire_timeout(timeout).await;
            tokio::time::sleep_until(deadline).await;
            acquired
        })
    }
    fn release(&self) -> LockFuture<'_, ()> {
        Box::pin(self.0.release())
    }
    fn is_acquired_in_this_process(&self) -> bool {
        self.0.is_acquired_in_this_process()
    }
    fn release_abandoned(&self, holder: HolderId) {
        InterProcessLock::release_abandoned(&self.0, holder)
    }
}

/// Item 3: a multi-lock whose deadline is used up by its first lock reports "not acquired" and
/// gives the first lock back. The old code went on with a zero timeout — one fresh attempt — at
/// the next lock, and so acquired the set after its deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_used_up_deadline_is_not_a_fresh_attempt() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let client = support::client(&connect).await;
    let obs = support::observer(&connect).await;
    let (first, second) = (support::unique_path("used-up-1"), support::unique_path("used-up-2"));
    let multi = InterProcessMultiLock::new(vec![
        Box::new(GrantedAtTheDeadline(InterProcessMutex::new(&client, &first).unwrap())),
        Box::new(InterProcessMutex::new(&client, &second).unwrap()),
    ])
    .unwrap();
    assert!(!multi.acquire_timeout(Duration::from_millis(300)).await.unwrap(), "acquired after the deadline");
    assert!(!multi.is_acquired_in_this_process());
    assert!(
        support::sorted_children(&obs, &second).await.is_empty(),
        "no attempt at the second lock after the deadline"
    );
    assert!(support::eventually_no_children(&connect, &first, Duration::from_secs(10)).await.is_empty());
}

/// Item 4: absurd arguments get a typed error or a saturating meaning — never a panic — and a
/// refused call writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absurd_input_never_panics() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;

    // A session timeout ZooKeeper cannot carry is refused, naming the argument.
    let refused = CuratorClient::builder(&connect).session_timeout(Duration::MAX).connect().await;
    match refused {
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::BadArgument, "{e}");
            assert!(e.to_string().contains("session_timeout"), "{e}");
        }
        Ok(_) => panic!("a session timeout of Duration::MAX was accepted"),
    }
    // Timeouts of Duration::MAX mean "forever".
    let client = CuratorClient::builder(&connect)
        .session_timeout(Duration::from_secs(10))
        .connection_timeout(Duration::MAX)
        .max_close_wait(Duration::MAX)
        .connect()
        .await
        .unwrap();
    let path = support::unique_path("absurd");
    let mutex = InterProcessMutex::new(&client, &path).unwrap();
    assert!(mutex.try_lock().await.unwrap().is_some_and(|guard| guard.hold_state() == HoldState::Held));
    assert!(mutex.acquire_timeout(Duration::MAX).await.unwrap());
    assert_eq!(mutex.participant_nodes_within(Duration::MAX).await.unwrap().len(), 1);
    mutex.release().await.unwrap();

    // As many leases as the semaphore has: taken one at a time until the deadline, then given back.
    let semaphore = InterProcessSemaphoreV2::new(&client, &format!("{path}-sem"), usize::MAX).unwrap();
    assert!(semaphore.acquire_many_timeout(usize::MAX, Duration::from_millis(300)).await.unwrap().is_none());
    let multi = InterProcessMultiLock::from_paths(&client, &[&format!("{path}-m")]).unwrap();
    assert!(multi.acquire_timeout(Duration::MAX).await.unwrap());
    multi.release().await.unwrap();

    // A shared-count semaphore with a bad path is refused before the counter is written.
    let count_path = support::unique_path("absurd-count");
    let bad = InterProcessSemaphoreV2::with_shared_count(&client, "no-slash", &count_path, 1).await;
    assert!(matches!(bad, Err(Error::InvalidPath { ref path, .. }) if path == "no-slash"), "{bad:?}");
    assert!(!support::exists(&obs, &count_path).await, "nothing was written for a refused call");

    client.close().await;
    assert!(support::eventually_no_children(&connect, &format!("{path}-sem/leases"), Duration::from_secs(10))
        .await
        .is_empty());
}

/// Asserts `r` is `InvalidArgument` for the argument `name`, naming its size and `path`.
#[track_caller]
fn assert_too_big<T>(r: zk_curator::Result<T>, what: &str, name: &str, size: usize, path: &str) {
    match r {
        Err(Error::InvalidArgument { name: named, value, .. }) => {
            assert_eq!(named, name, "{what}: {value}");
            assert!(value.contains(&format!("{size} bytes")), "{what}: names the size {size}: {value}");
            assert!(value.contains(path), "{what}: names the path {path}: {value}");
        }
        Err(e) => panic!("{what}: expected InvalidArgument for the {name}, got {e:?}"),
        Ok(_) => panic!("{what}: expected InvalidArgument for the {name}, got Ok"),
    }
}

/// Node data over the client's max data size (by default 1 MiB - 4 KiB) is refused by every
/// recipe that writes it — lock, read-write lock and semaphore `with_data`, latch and selector
/// ids, a guarded write — with `InvalidArgument` naming its size and path, before anything is
/// sent: a hold of the same client stays `Held` and the connection is never dropped (sent, the
/// request would make the server drop it, suspending every hold of the client).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_over_the_max_data_size_is_refused_by_every_recipe_before_anything_is_sent() {
    support::init_tracing();
    let server = support::server().await;
    let client = support::client(&server.connect_string()).await;
    let path = support::unique_path("big-data");
    let held = InterProcessMutex::new(&client, &format!("{path}/held")).unwrap().lock().await.unwrap();
    let mut states = client.connection_states();
    assert_eq!(states.try_next(), Some(ConnectionState::Connected));
    let session = client.session();

    for n in [1024 * 1024 - 4096 + 1, 1024 * 1024 + 1] {
        let big = vec![7u8; n];
        let id = "i".repeat(n);
        let at = |name: &str| format!("{path}/{name}");
        assert_too_big(InterProcessMutex::with_data(&client, &at("m"), big.clone()), "mutex", "data", n, &at("m"));
        let rw = InterProcessReadWriteLock::with_data(&client, &at("rw"), big.clone());
        assert_too_big(rw, "read-write lock", "data", n, &at("rw"));
        let leases = InterProcessSemaphoreV2::with_data(&client, &at("s"), 2, big.clone());
        assert_too_big(leases, "semaphore", "data", n, &at("s"));
        assert_too_big(LeaderLatch::new(&client, &at("l"), id.clone()), "latch", "id", n, &at("l"));
        let selector = LeaderSelector::new(&client, &at("e"), id, |_leadership| async {});
        assert_too_big(selector, "selector", "id", n, &at("e"));
        let write = GuardedWrite::new().create(&at("w"), &big, zk_curator::CreateMode::Persistent);
        assert_too_big(held.guarded_write(write).await, "guarded write", "data", n, &at("w"));
    }

    assert_eq!(held.hold_state(), HoldState::Held, "the client's hold never noticed");
    assert!(support::queued_states(&mut states).is_empty(), "the connection stayed up");
    assert_eq!(client.session(), session);
    held.release().await.unwrap();
    client.close().await;
}
