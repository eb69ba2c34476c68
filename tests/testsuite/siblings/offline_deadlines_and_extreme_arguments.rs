//! The mutex's siblings at the edges, against a real ZooKeeper: a zero-timeout downgrade of a lost
//! write hold with the server gone, a timed semaphore waiter restarting on a new session within its
//! deadline, a cancelled multi-lock release, `Duration::MAX` everywhere, and a read-while-writing
//! lock across clients. Each test states the promise it checks.

use crate::support;

use std::time::{Duration, Instant};

use zk_curator::locks::{
    HoldState, InterProcessMultiLock, InterProcessMutex, InterProcessReadWriteLock, InterProcessSemaphoreV2,
};
use zk_curator::testing::{expire_session, FaultProxy, ProxyMode, TestingServer};
use zk_curator::Error;

/// Session timeout of clients whose session a test lets the client give up (server tick 200 ms).
const SHORT_SESSION: Duration = Duration::from_secs(2);

/// Promise: a downgrade only ever starts from a write hold that is `Held`, else `LockLost`
/// naming the write node. The timed and the untimed downgrade keep it while the client is offline
/// with a lost write hold; the zero-timeout downgrade (`acquire_timeout(0)`, one attempt) does
/// not: it answers `Ok(false)` ("not acquired") because `attempt_lock_inner` returns "not
/// connected → not acquired" before it looks at the basis. A re-entry of a lost hold with a zero
/// timeout is `LockLost` (the re-entry check comes first), so the two paths disagree.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zero_timeout_downgrade_from_a_lost_write_hold_is_lock_lost_offline_too() {
    support::init_tracing();
    let server = support::server_with(TestingServer::builder().tick_time(Duration::from_millis(200))).await;
    let connect = server.connect_string();
    let proxy = FaultProxy::start(&connect).await.unwrap();
    let client = support::client_with_timeouts(&proxy.connect_string(), SHORT_SESSION, Duration::from_secs(2)).await;
    let path = support::unique_path("review-zero-downgrade");
    let lock = InterProcessReadWriteLock::new(&client, &path).unwrap();
    lock.write_lock().acquire().await.unwrap();
    let writer = lock.write_lock().lock_node_path().unwrap();
    let hold = lock.write_lock().current_hold().unwrap();

    // The link is cut: the hold is suspended, then lost when the client gives the session up.
    proxy.set_mode(ProxyMode::Cut);
    support::eventually(Duration::from_secs(10), "the write hold is lost", || async {
        hold.hold_state() == HoldState::Lost
    })
    .await;
    assert!(!client.is_connected());

    // Timed: refused with LockLost (held up).
    support::assert_lock_lost(
        lock.read_lock().acquire_timeout(Duration::from_millis(200)).await,
        &writer,
        "timed downgrade",
    );
    // Re-entering the lost write hold with a zero timeout: LockLost (held up).
    support::assert_lock_lost(
        lock.write_lock().acquire_timeout(Duration::ZERO).await,
        &writer,
        "zero-timeout re-entry",
    );
    // Zero timeout downgrade: must be LockLost too, never a plain "not acquired".
    support::assert_lock_lost(
        lock.read_lock().acquire_timeout(Duration::ZERO).await,
        &writer,
        "zero-timeout downgrade",
    );

    proxy.set_mode(ProxyMode::Pass);
    lock.write_lock().release().await.unwrap();
    client.close().await;
}

/// Promise: a semaphore waiter whose session is replaced while it holds the internal mutex starts
/// over within its deadline (timed acquire), and a cancelled acquire leaves nothing behind, also
/// when it is cancelled while it starts over. Held up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_semaphore_waiter_restarts_within_its_deadline_and_cancels_cleanly() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("review-sem-restart");
    let (leases_path, locks_path) = (format!("{path}/leases"), format!("{path}/locks"));
    let holder = support::client(&connect).await;
    let a = support::client(&connect).await;

    let held = InterProcessSemaphoreV2::new(&holder, &path, 1).unwrap().acquire().await.unwrap();
    let semaphore_a = InterProcessSemaphoreV2::new(&a, &path, 1).unwrap();
    let timeout = Duration::from_secs(8);
    let started = Instant::now();
    let sem = semaphore_a.clone();
    let waiter = crate::support::spawn(async move { sem.acquire_timeout(timeout).await });
    support::eventually_queued(&obs, &leases_path, 2, "A's lease node").await;
    let old = a.session_id();
    expire_session(&connect, &a).await.unwrap();
    support::session_replaced(&a, old).await;
    // Not released: the restarted waiter must give up at its deadline, not stall past it.
    let got = support::join("the timed waiter", timeout + Duration::from_secs(20), waiter).await;
    let took = started.elapsed();
    assert!(got.unwrap().is_none(), "the lease is held by another: not acquired");
    assert!(took < timeout + Duration::from_secs(3), "a {timeout:?} acquire took {took:?}");
    let leases = support::eventually_no_children(&connect, &leases_path, Duration::from_millis(1)).await;
    assert!(leases.len() <= 1, "only the holder's lease: {leases:?}");
    assert!(support::eventually_no_children(&connect, &locks_path, Duration::from_secs(10)).await.is_empty());

    // Cancelled while starting over: drop the acquire right after its session is replaced.
    let sem = semaphore_a.clone();
    let waiter = crate::support::spawn(async move { sem.acquire().await });
    support::eventually_queued(&obs, &leases_path, 2, "A's lease node again").await;
    let old = a.session_id();
    expire_session(&connect, &a).await.unwrap();
    support::eventually(Duration::from_secs(20), "A's session ended", || async { a.session_id() != old }).await;
    waiter.abort();
    let _ = waiter.await;
    support::session_replaced(&a, old).await;
    let holder_lease = vec![held.node_name().to_string()];
    let left = support::children_become(&obs, &leases_path, &holder_lease, Duration::from_secs(10)).await;
    assert_eq!(left, holder_lease, "only the holder's lease is left");
    assert!(support::eventually_no_children(&connect, &locks_path, Duration::from_secs(10)).await.is_empty());

    // A zero-timeout acquire (one attempt) on the new session: not acquired, nothing left.
    assert!(semaphore_a.acquire_timeout(Duration::ZERO).await.unwrap().is_none());
    held.release().await.unwrap();
    let lease = semaphore_a.acquire_timeout(Duration::from_secs(5)).await.unwrap().expect("the free lease");
    assert_eq!(lease.hold_state(), HoldState::Held);
    lease.release().await.unwrap();
    assert!(support::eventually_no_children(&connect, &leases_path, Duration::from_secs(10)).await.is_empty());
    assert!(support::eventually_no_children(&connect, &locks_path, Duration::from_secs(10)).await.is_empty());
}

/// Promise: a multi-lock release is cancel safe (new in this change) and gives back exactly the
/// holds the multi-lock took: a lock the task also holds on its own (re-entered by the
/// multi-lock) stays held once. Held up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_multi_lock_release_gives_back_only_its_own_holds() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let proxy = FaultProxy::start(&connect).await.expect("proxy");
    let client = support::client(&proxy.connect_string()).await;
    let obs = support::observer(&connect).await;
    let (first, second) = (support::unique_path("review-multi-1"), support::unique_path("review-multi-2"));
    let a = InterProcessMutex::new(&client, &first).unwrap();
    let b = InterProcessMutex::new(&client, &second).unwrap();
    a.acquire().await.unwrap();
    let multi = InterProcessMultiLock::new(vec![Box::new(a.clone()), Box::new(b.clone())]).unwrap();
    assert!(multi.acquire_timeout(Duration::from_secs(5)).await.unwrap());

    // Cut short at its first await (B's delete, which no answer can complete while the link is
    // silent): A's multi-lock hold is given back in the background, the task's own hold of A stays.
    proxy.set_mode(ProxyMode::Blackhole);
    assert!(tokio::time::timeout(Duration::ZERO, multi.release()).await.is_err(), "the release was cut short");
    proxy.set_mode(ProxyMode::Pass);
    assert!(!b.is_owned_by_current_task(), "B is given back");
    assert!(a.is_owned_by_current_task(), "the task's own hold of A stays");
    assert!(support::eventually_no_children(&connect, &second, Duration::from_secs(10)).await.is_empty());
    assert_eq!(support::sorted_children(&obs, &first).await.len(), 1, "A is still held");
    a.release().await.unwrap();
    assert!(a.release().await.is_err(), "A was held exactly once more");
    assert!(support::eventually_no_children(&connect, &first, Duration::from_secs(10)).await.is_empty());
}

/// Promise: absurd timeouts never panic and mean "forever" on every timed entry point the
/// change touched or that it did not list (read/write halves, guards, leases). Held up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duration_max_everywhere() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let client = support::client(&connect).await;
    let path = support::unique_path("review-max");
    let rw = InterProcessReadWriteLock::new(&client, &path).unwrap();
    assert!(rw.write_lock().acquire_timeout(Duration::MAX).await.unwrap());
    // A downgrade with an absurd timeout.
    assert!(rw.read_lock().acquire_timeout(Duration::MAX).await.unwrap());
    assert_eq!(rw.read_lock().participant_nodes_within(Duration::MAX).await.unwrap().len(), 1);
    rw.write_lock().release().await.unwrap();
    rw.read_lock().release().await.unwrap();
    let guard = rw.write_lock().try_lock_for(Duration::MAX).await.unwrap().expect("free");
    guard.release().await.unwrap();

    let semaphore = InterProcessSemaphoreV2::new(&client, &format!("{path}-sem"), 2).unwrap();
    let lease = semaphore.acquire_timeout(Duration::MAX).await.unwrap().expect("free");
    let more = semaphore.acquire_many_timeout(1, Duration::MAX).await.unwrap().expect("free");
    // None left: a zero timeout is one attempt, "not acquired".
    assert!(semaphore.acquire_many_timeout(2, Duration::ZERO).await.unwrap().is_none());
    assert!(semaphore.acquire_many_timeout(usize::MAX, Duration::ZERO).await.is_err(), "more than the maximum");
    lease.release().await.unwrap();
    zk_curator::locks::return_all(more).await.unwrap();
    let multi = InterProcessMultiLock::from_paths(&client, &[&format!("{path}-a"), &format!("{path}-b")]).unwrap();
    assert!(multi.acquire_timeout(Duration::ZERO).await.unwrap());
    multi.release().await.unwrap();
    assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(10)).await.is_empty());
    assert!(support::eventually_no_children(&connect, &format!("{path}-sem/leases"), Duration::from_secs(10))
        .await
        .is_empty());
    client.close().await;
}

/// Promise (documented on `lock_while_writing`): `InvalidArgument` if `writer` is not a guard of
/// this lock; `LockLost` only if its hold is lost. A write guard of the same lock path taken
/// through another client (another session) is not a guard of this lock, and it is `Held` — yet
/// the call creates a read node on this client's session, finds that the basis's session differs
/// (`internals.rs`, the check right after the create) and reports `LockLost` naming a write
/// node that is still held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_while_writing_with_another_clients_writer_is_a_bad_argument_not_lock_lost() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let c1 = support::client(&connect).await;
    let c2 = support::client(&connect).await;
    let path = support::unique_path("review-foreign-writer");
    let l1 = InterProcessReadWriteLock::new(&c1, &path).unwrap();
    let l2 = InterProcessReadWriteLock::new(&c2, &path).unwrap();
    let writer = l2.write_lock().lock().await.unwrap();
    let refused = tokio::time::timeout(Duration::from_secs(10), l1.read_lock().lock_while_writing(&writer))
        .await
        .expect("no hang");
    assert_eq!(writer.hold_state(), HoldState::Held, "the writer is held throughout");
    match refused {
        Err(Error::InvalidArgument { .. }) => {}
        other => panic!("a writer of another client: expected InvalidArgument, got {other:?}"),
    }
    let only_writer = vec![support::node_name(writer.node_path()).to_string()];
    let obs = support::observer(&connect).await;
    assert_eq!(support::children_become(&obs, &path, &only_writer, Duration::from_secs(10)).await, only_writer);
    writer.release().await.unwrap();
}
