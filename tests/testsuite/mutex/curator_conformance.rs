//! Curator's own mutex tests (`TestInterProcessMutexBase` / `TestInterProcessMutex`) ported to zk-curator, against a real ZooKeeper server
//! (one `TestingServer` per test), plus the Rust-specific release / guard / argument semantics.

use crate::support;

use crate::support::exclusion::HoldLog;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use zk_curator::locks::driver::{LockDriver, NodeSpec, StandardLockDriver};
use zk_curator::locks::{HoldState, InterProcessMutex, MutexGuard};
use zk_curator::{ConnectionState, CuratorClient, Error, ErrorKind};

// ---------------------------------------------------------------------------------------------
// helpers
// ---------------------------------------------------------------------------------------------

fn sequence(name: &str) -> u64 {
    name[name.len() - 10..].parse().unwrap_or_else(|_| panic!("no sequence suffix in {name}"))
}

async fn new_session(client: &CuratorClient, old: i64, within: Duration) {
    support::eventually(within, "the client opened a new session", || async { client.session_id() != old }).await;
    support::eventually(within, "the client is connected again", || async { client.is_connected() }).await;
}

// ---------------------------------------------------------------------------------------------
// TestInterProcessMutexBase
// ---------------------------------------------------------------------------------------------

/// Curator `testReentrant` (item 8) + `testLocker` (item 1): three levels in one task, one node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reentrant() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let client = support::client(&connect).await;
    let path = support::unique_path("reentrant");
    let m = InterProcessMutex::new(&client, &path).unwrap();

    assert!(!m.is_acquired_in_this_process());
    assert!(m.lock_node_path().is_none());
    m.acquire().await.unwrap(); // "foo"
    assert!(m.is_acquired_in_this_process());
    assert!(m.is_owned_by_current_task());
    let node = m.lock_node_path().expect("holder has a node");
    assert_eq!(support::sorted_children(&obs, &path).await, vec![support::node_name(&node).to_string()]);
    m.acquire().await.unwrap(); // "bar"
    assert!(m.is_acquired_in_this_process());
    assert!(m.acquire_timeout(Duration::ZERO).await.unwrap()); // "snafu"
    assert!(m.is_acquired_in_this_process());
    assert_eq!(m.lock_node_path().as_deref(), Some(node.as_str()), "re-entry reuses the node");
    assert_eq!(support::sorted_children(&obs, &path).await.len(), 1, "only ONE node while re-entered 3 deep");

    m.release().await.unwrap();
    assert!(m.is_acquired_in_this_process());
    m.release().await.unwrap();
    assert!(m.is_acquired_in_this_process());
    assert_eq!(support::sorted_children(&obs, &path).await.len(), 1, "node kept until the last release");
    m.release().await.unwrap();
    assert!(!m.is_acquired_in_this_process());
    assert!(!m.is_owned_by_current_task());
    assert!(
        support::sorted_children(&obs, &path).await.is_empty(),
        "the last release deleted the node before returning"
    );
}

/// Curator `testReentrant2Threads` (item 7): A holds at depth 2; B on the same instance cannot get
/// it; after A unwinds, B can.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reentrant_two_tasks() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let client = support::client(&connect).await;
    let path = support::unique_path("reentrant2");
    let m = InterProcessMutex::new(&client, &path).unwrap();

    let (at_depth_2_tx, at_depth_2) = oneshot::channel();
    let (unwind_tx, unwind) = oneshot::channel::<()>();
    let ma = m.clone();
    let task_a = crate::support::spawn(async move {
        ma.acquire().await.unwrap();
        assert!(ma.is_acquired_in_this_process());
        ma.acquire().await.unwrap();
        assert!(ma.is_acquired_in_this_process());
        at_depth_2_tx.send(ma.lock_node_path().unwrap()).unwrap();
        unwind.await.unwrap();
        ma.acquire().await.unwrap();
        assert!(ma.is_acquired_in_this_process());
        for _ in 0..3 {
            assert!(ma.is_acquired_in_this_process());
            ma.release().await.unwrap();
        }
        assert!(!ma.is_owned_by_current_task());
    });
    let a_node = at_depth_2.await.unwrap();

    let mb = m.clone();
    let b_try = crate::support::spawn(async move {
        let started = Instant::now();
        let got = mb.acquire_timeout(Duration::from_secs(1)).await.unwrap();
        assert!(!mb.is_owned_by_current_task());
        (got, started.elapsed())
    });
    let (got, took) = support::join("B's timed acquire", Duration::from_secs(10), b_try).await;
    assert!(!got, "task B must not get the lock task A holds, even on the same instance");
    assert!(took >= Duration::from_millis(900), "B gave up too early: {took:?}");
    assert!(m.is_acquired_in_this_process(), "A still holds it");
    assert_eq!(
        support::sorted_children(&obs, &path).await,
        vec![support::node_name(&a_node).to_string()],
        "B's timed-out node is gone"
    );

    unwind_tx.send(()).unwrap();
    support::join("task A", Duration::from_secs(10), task_a).await;
    assert!(!m.is_acquired_in_this_process(), "after A unwound completely");

    let mb = m.clone();
    let b_again = crate::support::spawn(async move {
        let got = mb.acquire_timeout(Duration::from_secs(5)).await.unwrap();
        assert!(mb.is_acquired_in_this_process());
        mb.release().await.unwrap();
        got
    });
    assert!(
        support::join("B's second acquire", Duration::from_secs(10), b_again).await,
        "B gets the lock after A unwound"
    );
    assert!(!m.is_acquired_in_this_process());
    assert!(support::sorted_children(&obs, &path).await.is_empty());
}

/// Curator `testReentrantSingleLock` (item 6): ten tasks on ONE instance exclude each other; the
/// first holder waits until everybody is queued.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reentrant_single_lock_many_tasks() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let client = support::client(&connect).await;
    let path = support::unique_path("single-lock");
    let m = InterProcessMutex::new(&client, &path).unwrap();
    let log = HoldLog::default();
    let entered = Arc::new(AtomicUsize::new(0));
    let token = |m: &InterProcessMutex| m.current_hold().expect("held").fencing_token().as_u128();

    // The first holder is the test's own task.
    m.acquire().await.unwrap();
    let first = log.start("test task", token(&m));

    let mut tasks = Vec::new();
    for i in 0..10 {
        let (m, log, entered) = (m.clone(), log.clone(), entered.clone());
        tasks.push(crate::support::spawn(async move {
            m.acquire().await.unwrap();
            let holding = log.start(format!("task {i}"), token(&m));
            // re-entry inside the critical section costs nothing and keeps exclusion
            m.acquire().await.unwrap();
            tokio::time::sleep(Duration::from_millis(5)).await;
            m.release().await.unwrap();
            assert!(m.is_owned_by_current_task());
            entered.fetch_add(1, Ordering::SeqCst);
            holding.end();
            m.release().await.unwrap();
        }));
    }
    support::eventually(Duration::from_secs(10), "all 10 tasks queued behind the first holder", || async {
        m.participant_nodes().await.unwrap().len() == 11
    })
    .await;
    assert_eq!(entered.load(Ordering::SeqCst), 0, "nobody got in while the first holder held it");
    first.end();
    m.release().await.unwrap();
    for t in tasks {
        support::join("contender", Duration::from_secs(20), t).await;
    }
    assert_eq!(entered.load(Ordering::SeqCst), 10);
    assert_eq!(log.assert_exclusive("ten tasks on one instance").len(), 11);
    assert!(!m.is_acquired_in_this_process());
    assert!(support::sorted_children(&obs, &path).await.is_empty());
}

/// Curator `test2Clients` (item 9): exactly one of two clients holds; the other gets it promptly
/// after the release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clients() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("two-clients");
    let a = support::client(&connect).await;
    let b = support::client(&connect).await;
    let ma = InterProcessMutex::new(&a, &path).unwrap();
    let mb = InterProcessMutex::new(&b, &path).unwrap();
    let log = HoldLog::default();

    let spawn = |m: InterProcessMutex, who: &'static str, log: HoldLog| {
        crate::support::spawn(async move {
            assert!(m.acquire_timeout(Duration::from_secs(10)).await.unwrap(), "acquire within 10 s");
            let acquired = Instant::now();
            let holding = log.start(who, m.current_hold().expect("held").fencing_token().as_u128());
            tokio::time::sleep(Duration::from_millis(500)).await;
            holding.end();
            let released = Instant::now();
            m.release().await.unwrap();
            (acquired, released)
        })
    };
    let ta = spawn(ma.clone(), "a", log.clone());
    let tb = spawn(mb.clone(), "b", log.clone());

    support::eventually(Duration::from_secs(5), "one holder and one waiter", || async {
        support::sorted_children(&obs, &path).await.len() == 2
            && (ma.is_acquired_in_this_process() || mb.is_acquired_in_this_process())
    })
    .await;
    assert!(ma.is_acquired_in_this_process() ^ mb.is_acquired_in_this_process(), "exactly one client holds the lock");

    let (a_acq, a_rel) = support::join("client a", Duration::from_secs(15), ta).await;
    let (b_acq, b_rel) = support::join("client b", Duration::from_secs(15), tb).await;
    log.assert_exclusive("two clients");
    let (first_rel, second_acq) = if a_acq < b_acq { (a_rel, b_acq) } else { (b_rel, a_acq) };
    assert!(second_acq >= first_rel, "the second client got the lock before the first released it");
    let handover = second_acq - first_rel;
    println!("two_clients: hand-over took {handover:?}");
    assert!(handover < Duration::from_secs(2), "hand-over too slow: {handover:?}");
    assert!(support::sorted_children(&obs, &path).await.is_empty());
}

/// Curator `testKilledSession` (item 3): the holder's session is killed server-side; the waiter
/// gets the lock within a few seconds and the holder's client opens a new session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_session_while_waiting() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("killed-session");
    let a = support::client(&connect).await;
    let b = support::client(&connect).await;
    let ma = InterProcessMutex::new(&a, &path).unwrap();
    let mb = InterProcessMutex::new(&b, &path).unwrap();

    ma.acquire().await.unwrap();
    let a_node = ma.lock_node_path().unwrap();
    let (b_got_tx, b_got) = oneshot::channel();
    let (b_release_tx, b_release) = oneshot::channel::<()>();
    let mb2 = mb.clone();
    let waiter = crate::support::spawn(async move {
        let got = mb2.acquire_timeout(Duration::from_secs(30)).await.unwrap();
        b_got_tx.send((got, Instant::now(), mb2.lock_node_path())).unwrap();
        b_release.await.unwrap();
        mb2.release().await.unwrap();
    });
    support::eventually_queued(&obs, &path, 2, "B queued behind A").await;

    let old_session = a.session_id();
    let mut states = a.connection_states();
    assert_eq!(states.next().await, Some(ConnectionState::Connected), "a subscription starts with the current state");
    let info = zk_curator::raw::client(&a).unwrap().session().clone();
    let killed = Instant::now();
    zk_curator::raw::expire_session(&connect, &info).await.expect("expire A's session");
    let (got, at, b_node) = tokio::time::timeout(Duration::from_secs(10), b_got).await.expect("B acquires").unwrap();
    assert!(got, "B must get the lock once A's session is gone");
    println!("killed_session_while_waiting: B acquired {:?} after the kill", at - killed);
    assert!(at - killed < Duration::from_secs(5));
    let b_node = b_node.unwrap();
    assert_eq!(
        support::sorted_children(&obs, &path).await,
        vec![support::node_name(&b_node).to_string()],
        "A's ephemeral node died with it"
    );

    new_session(&a, old_session, Duration::from_secs(10)).await;
    assert_eq!(a.session().epoch, 2);
    let mut seen = Vec::new();
    while let Some(s) = states.try_next() {
        seen.push(s);
    }
    assert!(seen.contains(&ConnectionState::Lost), "A's client reported LOST: {seen:?}");
    assert_eq!(seen.last(), Some(&ConnectionState::Reconnected), "then RECONNECTED: {seen:?}");

    // As in Curator, nothing happens locally to A's hold; it is only reported lost. Release works.
    assert!(ma.is_acquired_in_this_process());
    assert_eq!(ma.current_hold().unwrap().hold_state(), HoldState::Lost);
    assert_eq!(ma.lock_node_path().as_deref(), Some(a_node.as_str()));
    ma.release().await.expect("release after the session died");
    assert!(!ma.is_acquired_in_this_process());

    b_release_tx.send(()).unwrap();
    support::join("B", Duration::from_secs(10), waiter).await;
    assert!(support::sorted_children(&obs, &path).await.is_empty());
    // A's client works on its new session.
    assert!(ma.acquire_timeout(Duration::from_secs(5)).await.unwrap());
    ma.release().await.unwrap();
}

/// Curator `testWaitingProcessKilledServer` (item 2): holder and waiter (two tasks, one client);
/// the holder stops the server, waits for the disconnect, restarts it; both complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_while_server_restarted() {
    support::init_tracing();
    let mut server = support::owned_server().await;
    let connect = server.connect_string();
    let path = support::unique_path("server-restart");
    let client = support::client(&connect).await;
    let holder = InterProcessMutex::new(&client, &path).unwrap();
    let waiter = InterProcessMutex::new(&client, &path).unwrap();

    holder.acquire().await.unwrap();
    let w = waiter.clone();
    let waiting = crate::support::spawn(async move {
        let got = w.acquire_timeout(Duration::from_secs(40)).await.unwrap();
        assert!(got, "the waiter never got the lock after the restart");
        let release = w.release().await;
        // Curator tolerates SessionExpired here; our session survives the short outage.
        support::assert_ok_or_kind(&release, &[ErrorKind::SessionLost], "release after the session was killed");
    });
    {
        let obs = support::observer(&connect).await;
        support::eventually_queued(&obs, &path, 2, "the waiter is queued").await;
    }

    let mut states = client.connection_states();
    assert_eq!(states.next().await, Some(ConnectionState::Connected), "a subscription starts with the current state");
    server.stop().await.expect("stop the server");
    tokio::time::timeout(Duration::from_secs(10), async {
        while states.next().await != Some(ConnectionState::Suspended) {}
    })
    .await
    .expect("the client notices the server is down");
    assert!(!client.is_connected());
    tokio::time::sleep(Duration::from_millis(500)).await;
    server.restart().await.expect("restart the server");
    support::eventually(Duration::from_secs(15), "reconnected", || async { client.is_connected() }).await;

    support::assert_ok_or_kind(&holder.release().await, &[ErrorKind::SessionLost], "release across a restart");
    assert!(!holder.is_acquired_in_this_process());
    support::join("waiter", Duration::from_secs(30), waiting).await;
    assert!(!waiter.is_acquired_in_this_process());

    let obs = support::observer(&connect).await;
    support::eventually(Duration::from_secs(5), "no stray lock node after the restart", || async {
        support::sorted_children(&obs, &path).await.is_empty()
    })
    .await;
}

/// Curator `testContainerCleanup` (item 4): the lock's parent is a container that the server
/// deletes once the lock is idle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn container_cleanup() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("container");
    let client = support::client(&connect).await;
    let log = HoldLog::default();

    let mut tasks = Vec::new();
    for i in 0..10 {
        let m = InterProcessMutex::new(&client, &path).unwrap();
        let log = log.clone();
        tasks.push(crate::support::spawn(async move {
            assert!(m.acquire_timeout(Duration::from_secs(20)).await.unwrap());
            let holding = log.start(format!("instance {i}"), m.current_hold().expect("held").fencing_token().as_u128());
            tokio::time::sleep(Duration::from_millis(10)).await;
            holding.end();
            m.release().await.unwrap();
        }));
    }
    for t in tasks {
        support::join("contender", Duration::from_secs(30), t).await;
    }
    log.assert_exclusive("ten instances on one path");
    let stat = support::stat(&obs, &path).await;
    assert!(stat.is_none_or(|s| s.ephemeral_owner == 0), "the lock path is a container (or reaped): {stat:?}");
    support::eventually(
        Duration::from_secs(5),
        "the idle lock path (a container) is deleted by the server",
        || async { !support::exists(&obs, &path).await },
    )
    .await;
    // and a later acquire re-creates it transparently
    let m = InterProcessMutex::new(&client, &path).unwrap();
    assert!(m.acquire_timeout(Duration::from_secs(5)).await.unwrap());
    m.release().await.unwrap();
}

/// Regression: acquiring right when the server reaps the idle lock path (a container) and then its
/// parent (also a container) must not fail with NoNode. The create found the lock path gone, made
/// the parents again, and the reaper deleted an ancestor in between; the create used to get only
/// one round of parent creation. Six locks, acquired at varying offsets to the 100 ms reaper tick.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn container_reaped_between_acquires() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let client = support::client(&connect).await;
    let mut tasks = Vec::new();
    for t in 0..6u64 {
        let m = InterProcessMutex::new(&client, &format!("{}/lock", support::unique_path("reaped"))).unwrap();
        tasks.push(crate::support::spawn(async move {
            let mut failures = Vec::new();
            for i in 0..60u64 {
                match m.acquire_timeout(Duration::from_secs(5)).await {
                    Ok(true) => m.release().await.unwrap(),
                    other => failures.push(format!("lock {t} round {i}: {other:?}")),
                }
                tokio::time::sleep(Duration::from_millis(80 + (i * 37 + t * 11) % 140)).await;
            }
            failures
        }));
    }
    let mut failures = Vec::new();
    for t in tasks {
        failures.extend(support::join("acquirer", Duration::from_secs(60), t).await);
    }
    assert!(failures.is_empty(), "acquires failed while containers were reaped: {failures:#?}");
}

/// Curator `testWithNamespace` (item 5).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_namespace() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("namespace");
    let client = support::namespaced_client(&connect, "test").await;
    let m = InterProcessMutex::new(&client, &path).unwrap();
    assert!(m.acquire_timeout(Duration::from_secs(10)).await.unwrap());
    let node = m.lock_node_path().unwrap();
    assert!(node.starts_with(&format!("{path}/")), "paths are reported without the namespace: {node}");
    let real = format!("/test{path}");
    assert_eq!(
        support::sorted_children(&obs, &real).await,
        vec![support::node_name(&node).to_string()],
        "the node lives under /test{path}"
    );
    assert!(support::sorted_children(&obs, &path).await.is_empty(), "nothing outside the namespace");
    assert_eq!(m.participant_nodes().await.unwrap(), vec![node.clone()]);
    tokio::time::sleep(Duration::from_millis(100)).await;
    m.release().await.unwrap();
    assert!(support::sorted_children(&obs, &real).await.is_empty());
}

/// `getParticipantNodes` / `getLockPath`: full paths in lock order, holder first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn participants() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("participants");
    let clients = [support::client(&connect).await, support::client(&connect).await, support::client(&connect).await];
    let m: Vec<_> = clients.iter().map(|c| InterProcessMutex::new(c, &path).unwrap()).collect();
    assert!(m[0].participant_nodes().await.unwrap().is_empty(), "no base path yet: empty");

    m[0].acquire().await.unwrap();
    let mut waiters = Vec::new();
    for (i, mi) in m.iter().enumerate().skip(1) {
        let (got_tx, got) = oneshot::channel();
        let (go_tx, go) = oneshot::channel::<()>();
        let mi = mi.clone();
        let task = crate::support::spawn(async move {
            mi.acquire().await.unwrap();
            got_tx.send(mi.lock_node_path().unwrap()).unwrap();
            go.await.unwrap();
            mi.release().await.unwrap();
        });
        support::eventually_queued(&obs, &path, i + 1, "contender queued").await;
        waiters.push((got, go_tx, task));
    }

    let parts = m[0].participant_nodes().await.unwrap();
    assert_eq!(parts.len(), 3, "{parts:?}");
    assert_eq!(Some(&parts[0]), m[0].lock_node_path().as_ref(), "holder first");
    for p in &parts {
        assert!(p.starts_with(&format!("{path}/_c_")), "full protected paths: {p}");
        assert!(support::node_name(p).contains("-lock-"), "{p}");
    }
    let seqs: Vec<u64> = parts.iter().map(|p| sequence(p)).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "lock order = sequence order: {parts:?}");
    assert_eq!(m[2].participant_nodes().await.unwrap(), parts, "every instance sees the same list");
    assert!(m[1].lock_node_path().is_none(), "a waiter has no lock path");

    m[0].release().await.unwrap();
    for (k, (got, go_tx, task)) in waiters.into_iter().enumerate() {
        let node = tokio::time::timeout(Duration::from_secs(5), got).await.expect("next in line acquires").unwrap();
        assert_eq!(node, parts[k + 1], "the lock passes in participant order");
        assert_eq!(m[0].participant_nodes().await.unwrap(), parts[k + 1..].to_vec());
        go_tx.send(()).unwrap();
        support::join("waiter", Duration::from_secs(5), task).await;
    }
    assert!(m[0].participant_nodes().await.unwrap().is_empty());
}

/// A driver that makes PERSISTENT_SEQUENTIAL lock nodes (Curator `testPersistentLock`, item 12).
struct PersistentDriver;

impl LockDriver for PersistentDriver {
    fn lock_name(&self) -> &str {
        StandardLockDriver::MUTEX_LOCK_NAME
    }

    fn node_spec(&self, _caller_holds: &[String]) -> NodeSpec {
        NodeSpec::new(self.lock_name(), zk_curator::CreateMode::PersistentSequential)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persistent_lock_with_custom_driver() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("persistent");
    let client = support::client(&connect).await;
    let m = InterProcessMutex::with_driver(&client, &path, PersistentDriver).unwrap();

    m.acquire().await.unwrap();
    let node = m.lock_node_path().unwrap();
    let stat = support::stat(&obs, &node).await.expect("lock node exists");
    assert_eq!(stat.ephemeral_owner, 0, "the custom driver's node is persistent");

    let old = client.session_id();
    let info = zk_curator::raw::client(&client).unwrap().session().clone();
    zk_curator::raw::expire_session(&connect, &info).await.expect("expire the session");
    new_session(&client, old, Duration::from_secs(10)).await;

    assert!(support::exists(&obs, &path).await, "the base path survives");
    assert!(support::exists(&obs, &node).await, "a persistent node survives its session");
    assert!(m.is_acquired_in_this_process(), "nothing happens locally (Curator semantics)");
    assert_eq!(m.lock_node_path().as_deref(), Some(node.as_str()));

    m.release().await.expect("release after the session changed");
    assert!(!m.is_acquired_in_this_process());
    assert!(!support::exists(&obs, &node).await, "release must delete a persistent node even after a session change");
    assert!(support::sorted_children(&obs, &path).await.is_empty());

    // The lock is free for anyone again.
    let other = support::client(&connect).await;
    let m2 = InterProcessMutex::new(&other, &path).unwrap();
    assert!(m2.acquire_timeout(Duration::from_secs(2)).await.unwrap());
    m2.release().await.unwrap();

    // Same with a guard dropped after the session changed: the background release deletes it.
    let guard = m.lock().await.unwrap();
    let node = guard.node_path().to_string();
    let old = client.session_id();
    let info = zk_curator::raw::client(&client).unwrap().session().clone();
    zk_curator::raw::expire_session(&connect, &info).await.expect("expire the session again");
    new_session(&client, old, Duration::from_secs(10)).await;
    assert!(support::exists(&obs, &node).await, "a persistent node survives its session");
    drop(guard);
    support::eventually(
        Duration::from_secs(5),
        "a dropped guard deletes its persistent node after a session change",
        || async { !support::exists(&obs, &node).await },
    )
    .await;
}

// ---------------------------------------------------------------------------------------------
// Release semantics and arguments (the Rust side)
// ---------------------------------------------------------------------------------------------

fn assert_send_static<T: Send + 'static>() {}
fn assert_send<T: Send>(_: &T) {}

#[test]
fn guard_is_send_and_static() {
    assert_send_static::<MutexGuard>();
    assert_send_static::<MutexGuard<PersistentDriver>>();
    assert_send_static::<InterProcessMutex>();
}

fn assert_not_owner(result: zk_curator::Result<()>, path: &str, what: &str) {
    match result {
        Err(e @ Error::NotOwner { .. }) => {
            assert_eq!(e.kind(), ErrorKind::NotOwner, "{what}");
            let Error::NotOwner { path: p, .. } = &e else { unreachable!() };
            assert_eq!(p, path, "{what}: the error names the lock");
        }
        other => panic!("{what}: expected NotOwner, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_semantics() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("release");
    let a = support::client(&connect).await;
    let b = support::client(&connect).await;
    let m = InterProcessMutex::new(&a, &path).unwrap();

    // the futures can be spawned
    let f = m.acquire();
    assert_send(&f);
    drop(f);
    let f = m.lock();
    assert_send(&f);
    drop(f);

    // release without acquire
    assert_not_owner(m.release().await, &path, "release without acquire");

    // release from another task than the holder
    m.acquire().await.unwrap();
    let m2 = m.clone();
    let other = crate::support::spawn(async move { m2.release().await });
    assert_not_owner(
        support::join("releaser", Duration::from_secs(5), other).await,
        &path,
        "release from another task",
    );
    let m3 = m.clone();
    let from_thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(m3.release())
    });
    assert_not_owner(from_thread.join().unwrap(), &path, "release from another thread");
    assert!(m.is_owned_by_current_task(), "a foreign release changes nothing");
    assert_eq!(support::sorted_children(&obs, &path).await.len(), 1);

    // double release
    m.release().await.unwrap();
    assert_not_owner(m.release().await, &path, "double release");
    assert!(support::sorted_children(&obs, &path).await.is_empty());

    // guard dropped: released in the background
    let g = m.lock().await.unwrap();
    let node = g.node_path().to_string();
    assert_eq!(m.lock_node_path(), None, "a guard is not the task's Curator-style hold");
    assert!(!m.is_owned_by_current_task());
    assert!(m.is_acquired_in_this_process(), "a live guard holds the instance");
    assert_not_owner(m.release().await, &path, "Curator-style release of a guard's hold");
    drop(g);
    assert!(!m.is_acquired_in_this_process(), "the hold ends at drop");
    support::eventually(Duration::from_secs(5), "dropped guard's node deleted", || async {
        !support::exists(&obs, &node).await
    })
    .await;

    // guard dropped in a plain thread without a runtime
    let g = m.lock().await.unwrap();
    let node = g.node_path().to_string();
    std::thread::spawn(move || drop(g)).join().expect("dropping a guard outside a runtime must not panic");
    assert!(!m.is_acquired_in_this_process());
    support::eventually(Duration::from_secs(5), "guard dropped in a std::thread: node deleted", || async {
        !support::exists(&obs, &node).await
    })
    .await;

    // guard moved to another task and released there
    let g = m.lock().await.unwrap();
    let node = g.node_path().to_string();
    support::join(
        "guard mover",
        Duration::from_secs(5),
        crate::support::spawn(async move { g.release().await.unwrap() }),
    )
    .await;
    assert!(!support::exists(&obs, &node).await);
    assert!(!m.is_acquired_in_this_process());

    // acquire_timeout(ZERO) when held elsewhere: false, no node left behind
    let mb = InterProcessMutex::new(&b, &path).unwrap();
    mb.acquire().await.unwrap();
    let held = support::sorted_children(&obs, &path).await;
    assert_eq!(held.len(), 1);
    let started = Instant::now();
    assert!(!m.acquire_timeout(Duration::ZERO).await.unwrap());
    println!("release_semantics: acquire_timeout(ZERO) took {:?}", started.elapsed());
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(support::sorted_children(&obs, &path).await, held, "acquire_timeout(ZERO) leaves no node");
    assert!(m.try_lock().await.unwrap().is_none());
    assert_eq!(support::sorted_children(&obs, &path).await, held, "try_lock leaves no node");
    assert!(!m.is_acquired_in_this_process());
    mb.release().await.unwrap();
    assert!(m.acquire_timeout(Duration::ZERO).await.unwrap(), "ZERO acquires a free lock");
    m.release().await.unwrap();
    assert!(support::sorted_children(&obs, &path).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input() {
    support::init_tracing();
    let server = support::server().await;
    let client = support::client(&server.connect_string()).await;
    for bad in ["", "relative", "/trailing/", "/", "/a//b", "/a/./b", "/a/../b", "/nul\0"] {
        match InterProcessMutex::new(&client, bad) {
            Err(e @ Error::InvalidPath { .. }) => {
                assert_eq!(e.kind(), ErrorKind::BadArgument, "{bad:?}");
                let Error::InvalidPath { path, .. } = &e else { unreachable!() };
                assert_eq!(path, bad, "the error names the path");
                assert!(e.to_string().contains(&format!("{bad:?}")), "message names the path: {e}");
            }
            other => panic!("{bad:?}: expected InvalidPath, got {other:?}"),
        }
        assert!(InterProcessMutex::with_driver(&client, bad, PersistentDriver).is_err(), "{bad:?}");
    }
    // a lock name that is not a node name is refused too
    struct BadName;
    impl LockDriver for BadName {
        fn lock_name(&self) -> &str {
            "a/b"
        }
    }
    let e = InterProcessMutex::with_driver(&client, "/ok", BadName).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BadArgument, "{e}");
}
