//! The hold model against a real ZooKeeper: who owns a hold (guards vs Curator-style), no re-entry
//! into a lost or suspended hold, no grant on a dead session, strict deadlines, and the driver
//! layer's children-watch verdict and data hook that the sibling recipes build on.
//!
//! Each test names the property it checks; each failed on the code before these rules existed
//! (a moved guard re-entered, a lost hold was re-entered, a stale grant came back `Lost`, a timed
//! call waited for the 15 s connection timeout).

use crate::support;

use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use zk_curator::locks::driver::{Contender, LockDriver, StandardLockDriver, Verdict};
use zk_curator::locks::{GuardedWrite, HoldState, InterProcessMutex};
use zk_curator::raw as zkc;
use zk_curator::testing::{expire_session, FaultProxy, ProxyMode};
use zk_curator::{ConnectionState, CuratorClient, Error, ErrorKind, RetryNTimes};

/// Upper bound for calls that must not wait: far below the connection timeouts these tests use
/// (15 s), far above any machine's scheduling noise. Only a hang fails it.
const PROMPT: Duration = Duration::from_secs(3);

// ---------------------------------------------------------------------------------------------
// 1. a guard owns its hold
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_is_an_exclusive_hold_that_moves_with_it() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let client = support::client(&connect).await;
    let path = support::unique_path("guard-owns");
    let m = InterProcessMutex::new(&client, &path).unwrap();

    // Moved to another task, the guard takes the hold with it.
    let guard = m.lock().await.unwrap();
    let node = support::node_name(guard.node_path()).to_string();
    let (release_tx, release_rx) = oneshot::channel::<()>();
    let worker = crate::support::spawn(async move {
        let _ = release_rx.await;
        guard.release().await
    });
    assert!(m.try_lock().await.unwrap().is_none(), "the spawning task re-entered a guard it gave away");
    assert!(m.try_lock_for(Duration::from_millis(300)).await.unwrap().is_none());
    assert!(!m.acquire_timeout(Duration::from_millis(300)).await.unwrap(), "a guard is not the task's hold");
    assert!(!m.is_owned_by_current_task());
    assert!(m.is_acquired_in_this_process(), "the moved guard still holds this instance");
    // (A timed-out attempt's delete may finish in the background, after the call returned.)
    let left = support::children_become(&obs, &path, std::slice::from_ref(&node), Duration::from_secs(5)).await;
    assert_eq!(left, std::slice::from_ref(&node), "failed tries leave no node");
    release_tx.send(()).unwrap();
    support::join("guard holder", Duration::from_secs(5), worker).await.unwrap();
    assert!(!m.is_acquired_in_this_process());

    // A second lock() in the same task queues behind the first guard, like tokio's Mutex.
    let first = m.lock().await.unwrap();
    let second = tokio::time::timeout(Duration::from_millis(500), m.lock()).await;
    assert!(second.is_err(), "a second lock() in one task must queue, not re-enter: {second:?}");
    // Curator-style acquire does not count the guard either.
    assert!(!m.acquire_timeout(Duration::from_millis(300)).await.unwrap());
    assert_eq!(support::sorted_children(&obs, &path).await.len(), 1, "the abandoned waits left no node");
    first.release().await.unwrap();

    // And a guard does not re-enter a Curator-style hold of its task.
    m.acquire().await.unwrap();
    assert!(m.try_lock_for(Duration::from_millis(300)).await.unwrap().is_none());
    m.release().await.unwrap();
    assert!(support::sorted_children(&obs, &path).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_curator_style_acquires_of_one_task_reenter() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let client = support::client(&connect).await;
    let path = support::unique_path("join");
    let m = InterProcessMutex::new(&client, &path).unwrap();

    // join! polls both in one task: the second takes its turn and re-enters (one node, count 2).
    let joined = tokio::time::timeout(Duration::from_secs(10), async { tokio::join!(m.acquire(), m.acquire()) });
    let (a, b) = joined.await.expect("two acquires of one task in join! must not deadlock");
    a.unwrap();
    b.unwrap();
    assert_eq!(support::sorted_children(&obs, &path).await.len(), 1, "one node for one holder");
    m.release().await.unwrap();
    assert!(m.is_owned_by_current_task(), "two acquires, two releases");
    m.release().await.unwrap();
    assert!(support::sorted_children(&obs, &path).await.is_empty());
}

// ---------------------------------------------------------------------------------------------
// 2. no re-entry into a lost (or suspended) hold
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_hold_is_never_reentered() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let a = support::client(&connect).await;
    let b = support::client(&connect).await;
    let path = support::unique_path("lost-reentry");
    let ma = InterProcessMutex::new(&a, &path).unwrap();
    let mb = InterProcessMutex::new(&b, &path).unwrap();

    ma.acquire().await.unwrap();
    let hold = ma.current_hold().unwrap();
    let node = hold.path().to_string();
    expire_session(&connect, &a).await.expect("expire A's session");
    support::eventually(Duration::from_secs(10), "A's hold is lost", || async { hold.hold_state() == HoldState::Lost })
        .await;
    let gb = mb.try_lock_for(Duration::from_secs(10)).await.unwrap().expect("B takes the lock");

    support::assert_lock_lost(ma.acquire().await, &node, "acquire() re-entering a lost hold");
    support::assert_lock_lost(ma.acquire_timeout(Duration::from_secs(1)).await, &node, "acquire_timeout re-entering");
    // The failed re-entries took nothing: one release balances the one acquire.
    assert!(ma.is_owned_by_current_task());
    ma.release().await.unwrap();
    assert!(!ma.is_owned_by_current_task());
    assert_eq!(ma.release().await.map_err(|e| e.kind()), Err(ErrorKind::NotOwner));

    gb.release().await.unwrap();
    assert!(ma.acquire_timeout(Duration::from_secs(5)).await.unwrap(), "A acquires afresh on its new session");
    assert_eq!(ma.current_hold().unwrap().session(), a.session());
    ma.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspended_hold_is_reentered_only_once_held_again() {
    support::init_tracing();
    let server = support::server().await;
    let proxy = FaultProxy::start(&server.connect_string()).await.unwrap();
    let client = support::client_with(&proxy.connect_string(), Duration::from_secs(20)).await;
    let path = support::unique_path("suspended-reentry");
    let m = InterProcessMutex::new(&client, &path).unwrap();

    m.acquire().await.unwrap();
    proxy.set_mode(ProxyMode::Cut);
    support::eventually(Duration::from_secs(5), "suspended", || async { !client.is_connected() }).await;
    assert_eq!(m.current_hold().unwrap().hold_state(), HoldState::Suspended);
    assert!(!m.acquire_timeout(Duration::from_millis(300)).await.unwrap(), "re-entered a suspended hold");
    assert!(!m.acquire_timeout(Duration::ZERO).await.unwrap());

    // Re-entry waits for the connection to come back (same session: the hold is Held again).
    let reentry = {
        let m = m.clone();
        // acquire() is per task: the waiting re-entry must run in the holder's task, so poll it here.
        async move { m.acquire_timeout(Duration::from_secs(10)).await }
    };
    let heal = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        proxy.set_mode(ProxyMode::Pass);
    };
    let (reentered, ()) = tokio::join!(reentry, heal);
    assert!(reentered.unwrap(), "re-entry once Held again");
    assert_eq!(m.current_hold().unwrap().hold_state(), HoldState::Held);
    m.release().await.unwrap();
    m.release().await.unwrap();
    assert!(!m.is_acquired_in_this_process());
}

// ---------------------------------------------------------------------------------------------
// 3. never grant on a dead session
// ---------------------------------------------------------------------------------------------

/// A waiter's session is declared LOST (0.85 T) while the server still keeps it (until T). The
/// holder releases meanwhile, so the waiter's *old* node is first on the server when the network
/// heals and the client lists again on its new session. That listing must not grant the dead node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_grant_from_a_dead_session() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let proxy = FaultProxy::start(&connect).await.unwrap();
    let a =
        support::client_with_timeouts(&proxy.connect_string(), Duration::from_secs(4), Duration::from_secs(5)).await;
    let b = support::client(&connect).await;
    let path = support::unique_path("stale-grant");
    let ma = InterProcessMutex::new(&a, &path).unwrap();
    let mb = InterProcessMutex::new(&b, &path).unwrap();

    let gb = mb.lock().await.unwrap();
    let a_session = a.session();
    let waiter = crate::support::spawn(async move {
        let guard = ma.lock().await.expect("A lock");
        // Read everything at the moment the guard is returned.
        let state = guard.hold_state();
        let hold_session = guard.hold().session();
        (guard, state, hold_session)
    });
    support::eventually_queued(&obs, &path, 2, "A queued behind B").await;
    let mut states = a.connection_states();
    assert_eq!(states.next().await, Some(ConnectionState::Connected));

    proxy.set_mode(ProxyMode::Blackhole);
    tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(state) = states.next().await {
            if state == ConnectionState::Lost {
                return;
            }
        }
    })
    .await
    .expect("A's client declares LOST");
    // The server has not expired A's session yet: its node is still queued, and now first.
    gb.release().await.unwrap();
    let left = support::sorted_children(&obs, &path).await;
    assert_eq!(left.len(), 1, "only A's old node is left: {left:?}");
    proxy.set_mode(ProxyMode::Pass);

    let (guard, state, hold_session) = support::join("A's lock", Duration::from_secs(20), waiter).await;
    assert_eq!(state, HoldState::Held, "lock() returned a hold that was not Held");
    assert_ne!(hold_session, a_session, "granted on the session the client had given up");
    assert_eq!(hold_session, a.session(), "the hold is on the current session");
    let stat = support::stat(&obs, guard.node_path()).await.expect("the granted node exists");
    assert_eq!(stat.ephemeral_owner, a.session_id(), "the granted node belongs to the current session");
    guard.release().await.unwrap();
    assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(10)).await.is_empty());
}

/// A lost hold keeps its session (and so its node) while it lives, also once the link healed
/// after LOST — but not for ever: closing the client ends the kept session at once, and a hold
/// nobody ever lets go of (a forgotten guard) frees its node once the server could have expired
/// the session anyway. Two clients behind one proxy lose their sessions together; one closes, the
/// other forgets its guard.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_lost_session_ends_on_client_close_or_at_the_earliest_expiry() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let proxy = FaultProxy::start(&connect).await.unwrap();
    let timeout = Duration::from_secs(8);
    let closing = support::client_with_timeouts(&proxy.connect_string(), timeout, Duration::from_secs(5)).await;
    let forgetting = support::client_with_timeouts(&proxy.connect_string(), timeout, Duration::from_secs(5)).await;
    let path = support::unique_path("kept-session");
    let closing_guard = InterProcessMutex::new(&closing, &format!("{path}-c")).unwrap().lock().await.unwrap();
    let forgotten_guard = InterProcessMutex::new(&forgetting, &format!("{path}-f")).unwrap().lock().await.unwrap();
    let (closing_node, forgotten_node) =
        (closing_guard.node_path().to_string(), forgotten_guard.node_path().to_string());
    let (closing_session, forgotten_session) = (closing.session(), forgetting.session());

    proxy.set_mode(ProxyMode::Blackhole);
    support::eventually(Duration::from_secs(20), "both clients give their sessions up", || async {
        closing_guard.hold_state() == HoldState::Lost && forgotten_guard.hold_state() == HoldState::Lost
    })
    .await;
    let expiry = forgetting.earliest_expiry(forgotten_session).expect("a given-up session has an expiry bound");
    proxy.set_mode(ProxyMode::Pass);
    support::session_replaced(&closing, closing_session.id).await;
    support::session_replaced(&forgetting, forgotten_session.id).await;
    if Instant::now() + Duration::from_millis(500) < expiry {
        assert!(support::exists(&obs, &closing_node).await, "a lost hold's node is kept while the hold lives");
        assert!(support::exists(&obs, &forgotten_node).await, "a lost hold's node is kept while the hold lives");
    }

    // Closing the client ends the session its lost hold keeps, although the guard lives.
    closing.close().await;
    support::eventually(PROMPT, "closing the client frees its lost hold's node", || async {
        !support::exists(&obs, &closing_node).await
    })
    .await;
    drop(closing_guard);

    // A guard nobody drops does not keep the node past the server's earliest expiry.
    std::mem::forget(forgotten_guard);
    let left = expiry.saturating_duration_since(Instant::now());
    support::eventually(left + Duration::from_secs(10), "a forgotten lost hold's node goes at the expiry", || async {
        !support::exists(&obs, &forgotten_node).await
    })
    .await;
    assert!(Instant::now() >= expiry, "the forgotten lost hold's node went before the earliest expiry");
}

// ---------------------------------------------------------------------------------------------
// 5. strict deadlines
// ---------------------------------------------------------------------------------------------

async fn timed<T>(what: &str, bound: Duration, call: impl std::future::Future<Output = T>) -> T {
    let start = Instant::now();
    let result = tokio::time::timeout(bound * 10, call).await.unwrap_or_else(|_| panic!("{what}: hung"));
    let took = start.elapsed();
    println!("{what}: returned after {took:?}");
    assert!(took < bound, "{what}: returned after {took:?}, past its deadline (bound {bound:?})");
    result
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timed_calls_keep_their_deadline_with_the_server_down() {
    support::init_tracing();
    let mut server = support::owned_server().await;
    let connect = server.connect_string();
    // The connection timeout (15 s) is what the old code waited for; the deadlines are 300 ms.
    let client = CuratorClient::builder(&connect)
        .session_timeout(Duration::from_secs(30))
        .retry_policy(RetryNTimes::new(10, Duration::from_millis(100)))
        .connect()
        .await
        .unwrap();
    let short = support::client_with_timeouts(&connect, Duration::from_secs(30), Duration::from_secs(2)).await;
    let path = support::unique_path("deadlines");
    let m = InterProcessMutex::new(&client, &path).unwrap();
    let held = InterProcessMutex::new(&short, &format!("{path}-held")).unwrap().lock().await.unwrap();
    let held_node = held.node_path().to_string();

    server.stop().await.unwrap();
    support::eventually(Duration::from_secs(10), "both clients suspended", || async {
        !client.is_connected() && !short.is_connected()
    })
    .await;
    let ms300 = Duration::from_millis(300);
    let none = timed("try_lock_for(300 ms)", PROMPT, m.try_lock_for(ms300)).await.unwrap();
    assert!(none.is_none());
    assert!(!timed("acquire_timeout(300 ms)", PROMPT, m.acquire_timeout(ms300)).await.unwrap());
    assert!(timed("try_lock() without a connection", PROMPT, m.try_lock()).await.unwrap().is_none());
    let listed = timed("participant_nodes_within(300 ms)", PROMPT, m.participant_nodes_within(ms300)).await;
    assert_eq!(listed.map_err(|e| e.kind()), Err(ErrorKind::DeadlineExceeded));
    // A release waits at most the connection timeout (2 s here), then leaves the delete queued.
    let released = timed("release while down", Duration::from_secs(6), held.release()).await;
    let kind = released.expect_err("a release cannot finish while the server is down").kind();
    assert!(matches!(kind, ErrorKind::DeadlineExceeded | ErrorKind::Retryable), "{kind:?}");
    assert_eq!(short.pending_background_deletes(), 1, "the node stays queued for deletion");

    server.restart().await.unwrap();
    support::eventually(Duration::from_secs(20), "reconnected", || async { client.is_connected() }).await;
    let obs = support::observer(&connect).await;
    support::eventually(Duration::from_secs(10), "the queued release deleted the node", || async {
        !support::exists(&obs, &held_node).await
    })
    .await;
    assert!(support::sorted_children(&obs, &path).await.is_empty(), "no timed-out call left a node");
    let guard = m.try_lock_for(Duration::from_secs(5)).await.unwrap().expect("free lock acquired");
    guard.release().await.unwrap();
}

/// With the server up but the connection silent, a timed call still returns at its deadline and
/// the node its create may have left is cleaned up once the connection is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timed_calls_keep_their_deadline_on_a_silent_connection() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let proxy = FaultProxy::start(&connect).await.unwrap();
    let client =
        support::client_with_timeouts(&proxy.connect_string(), Duration::from_secs(30), Duration::from_secs(15)).await;
    let path = support::unique_path("silent");
    let m = InterProcessMutex::new(&client, &path).unwrap();

    proxy.set_mode(ProxyMode::DropReplies);
    let none = timed("try_lock_for(300 ms), replies dropped", PROMPT, m.try_lock_for(Duration::from_millis(300))).await;
    assert!(none.unwrap().is_none());
    proxy.set_mode(ProxyMode::Pass);
    assert!(
        support::eventually_no_children(&connect, &path, Duration::from_secs(20)).await.is_empty(),
        "the node whose create reply was lost is deleted in the background"
    );
    let guard = m.try_lock_for(Duration::from_secs(5)).await.unwrap().expect("free lock acquired");
    guard.release().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// driver layer: a children-watch verdict, the caller's context, the data hook
// ---------------------------------------------------------------------------------------------

/// Holds when first by sequence; otherwise waits on the children (like a semaphore would), and
/// lets a caller that already holds another node of the path in (like a downgrading writer).
struct ChildrenWatchingDriver;

impl LockDriver for ChildrenWatchingDriver {
    fn lock_name(&self) -> &str {
        StandardLockDriver::MUTEX_LOCK_NAME
    }

    fn verdict(&self, sorted: &[String], contender: &Contender<'_>) -> Verdict {
        let Some(index) = sorted.iter().position(|c| c == contender.our_name) else {
            return Verdict::NotInQueue;
        };
        let ahead_not_ours = sorted[..index].iter().filter(|c| !contender.caller_holds.contains(c)).count();
        if ahead_not_ours < contender.max_leases {
            Verdict::Acquired
        } else {
            Verdict::WatchChildren
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_children_watch_verdict_waits_for_any_child_change() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let a = support::client(&connect).await;
    let b = support::client(&connect).await;
    let path = support::unique_path("children-watch");
    let ma = InterProcessMutex::with_driver(&a, &path, ChildrenWatchingDriver).unwrap();
    let mb = InterProcessMutex::with_driver(&b, &path, ChildrenWatchingDriver).unwrap();

    let ga = ma.lock().await.unwrap();
    assert!(mb.try_lock_for(Duration::from_millis(300)).await.unwrap().is_none(), "B waits (children watch)");
    let (acquired_tx, mut acquired_rx) = oneshot::channel();
    let waiter = crate::support::spawn(async move {
        let gb = mb.lock().await.expect("B lock");
        let _ = acquired_tx.send(gb.fencing_token());
        gb.release().await.unwrap();
    });
    let obs = support::observer(&connect).await;
    support::eventually_queued(&obs, &path, 2, "B queued").await;
    // An unrelated child appears: B looks again and keeps waiting.
    obs.create(&format!("{path}/zz-foreign"), b"", &zkc::CreateMode::Ephemeral.with_acls(zkc::Acls::anyone_all()))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(acquired_rx.try_recv().is_err(), "B acquired while A held the lock");
    let a_token = ga.fencing_token();
    ga.release().await.unwrap();
    let b_token = tokio::time::timeout(Duration::from_secs(10), acquired_rx).await.expect("B acquires").unwrap();
    assert!(b_token > a_token);
    support::join("B", Duration::from_secs(10), waiter).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_sees_data_written_into_its_node() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let client = support::client(&connect).await;
    let path = support::unique_path("data-hook");
    let m = InterProcessMutex::with_data(&client, &path, b"mine".to_vec()).unwrap();
    let guard = m.lock().await.unwrap();
    let mut data = guard.hold().watch_data();
    assert_eq!(*data.borrow_and_update(), b"mine");
    // What Curator's Revoker does: write __REVOKE__ into the holder's node.
    let obs = support::observer(&connect).await;
    obs.set_data(guard.node_path(), b"__REVOKE__", None).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), data.wait_for(|d| d == b"__REVOKE__"))
        .await
        .expect("the hold saw the write")
        .unwrap();
    assert_eq!(guard.hold_state(), HoldState::Held, "a data change is not a loss");
    guard.release().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// guarded writes report what really happened
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guarded_writes_name_the_real_failure_and_strip_the_namespace() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("guarded");

    // Result paths come back as the caller gave them, without the client's namespace.
    let namespaced = support::namespaced_client(&connect, "app").await;
    let guard = InterProcessMutex::new(&namespaced, &path).unwrap().lock().await.unwrap();
    let target = format!("{path}-created");
    let write = GuardedWrite::new().create(&target, b"v", zk_curator::CreateMode::Persistent);
    match &guard.guarded_write(write).await.unwrap()[..] {
        [zk_curator::OpResult::Created { path: created, .. }] => assert_eq!(created, &target),
        other => panic!("one create result expected: {other:?}"),
    }
    assert!(support::exists(&obs, &format!("/app{target}")).await);
    guard.release().await.unwrap();

    // A check refused for lack of READ on our node is not a lost lock: the hold stays Held.
    let no_read = zk_curator::Acl::new(
        zk_curator::Permissions::WRITE
            | zk_curator::Permissions::CREATE
            | zk_curator::Permissions::DELETE
            | zk_curator::Permissions::ADMIN,
        zk_curator::Id::anyone(),
    );
    let parent = format!("{path}-no-read");
    obs.create("/zkc-test", b"", &zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all())).await.ok();
    obs.create(&parent, b"", &zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all())).await.unwrap();
    let restricted = CuratorClient::builder(&connect)
        .acls(vec![no_read])
        .session_timeout(Duration::from_secs(10))
        .connect()
        .await
        .unwrap();
    let guard = InterProcessMutex::new(&restricted, &parent).unwrap().lock().await.unwrap();
    let write = GuardedWrite::new().set_data(&parent, b"x", None);
    match guard.guarded_write(write).await {
        Err(Error::ZooKeeper { path: named, code: zk_curator::ErrorCode::NoAuth, .. }) => {
            assert_eq!(named, guard.node_path())
        }
        other => panic!("a NoAuth check must be reported as NoAuth on the lock node, not LockLost: {other:?}"),
    }
    assert_eq!(guard.hold_state(), HoldState::Held, "NoAuth does not mean the node is gone");
    guard.release().await.unwrap();
    assert!(support::sorted_children(&obs, &parent).await.is_empty());
}

/// A hold watched first on a runtime that has been shut down since (its monitor went with it) is
/// still watched when watched again on another runtime: the deletion of its node by someone else
/// makes it `Lost`, and `lost()` resolves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_watched_on_a_runtime_shut_down_since_is_watched_again_elsewhere() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let client = support::client(&connect).await;
    let path = support::unique_path("hold-monitor-runtime");
    let mutex = InterProcessMutex::new(&client, &path).unwrap().with_node_per_task();
    let guard = mutex.lock().await.unwrap();
    let r2 = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let hold = guard.hold().clone();
    let watching = r2.spawn(async move {
        let state = hold.watch_state();

        *state.borrow()
    });
    assert_eq!(watching.await.unwrap(), HoldState::Held);
    r2.shutdown_background();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let node = guard.node_path().to_string();
    obs.delete(&node, None).await.expect("delete the held node");
    tokio::time::timeout(PROMPT, guard.lost()).await.expect("the hold sees its node deleted");
    assert_eq!(guard.hold_state(), HoldState::Lost);
    drop(guard);
}
