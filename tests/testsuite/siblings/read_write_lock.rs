//! `InterProcessReadWriteLock` against a real ZooKeeper: Curator's `TestInterProcessReadWriteLock`
//! scenarios, guards and the guard downgrade, revocation, the common
//! lock trait, and random cancellation. Exclusion is checked by the shared checker (readers may
//! overlap each other, never a writer).

use crate::support;

use std::time::{Duration, Instant};

use crate::support::exclusion::HoldLog;
use rand::{Rng, SeedableRng};
use zk_curator::locks::{
    HoldState, InterProcessLock, InterProcessMutex, InterProcessReadWriteLock, Revoker, READ_LOCK_NAME, WRITE_LOCK_NAME,
};
use zk_curator::testing::expire_session;
use zk_curator::ErrorKind;

fn kind_of(node: &str) -> &'static str {
    if node.contains(WRITE_LOCK_NAME) {
        "write"
    } else if node.contains(READ_LOCK_NAME) {
        "read"
    } else {
        "foreign"
    }
}

/// Curator item 15: 20 readers hold, then 8 writers queue; each half lists its own kind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn participants_of_each_kind() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let client = support::client(&connect).await;
    let path = support::unique_path("rw-participants");
    let lock = InterProcessReadWriteLock::new(&client, &path).unwrap().with_node_per_task();

    let mut readers = Vec::new();
    for _ in 0..20 {
        readers.push(lock.read_lock().lock().await.unwrap());
    }
    let mut writers = Vec::new();
    for _ in 0..8 {
        let write = lock.write_lock().clone();
        writers.push(crate::support::spawn(async move { write.lock().await.unwrap().release().await.unwrap() }));
    }
    let obs = support::observer(&connect).await;
    support::eventually_queued(&obs, &path, 28, "20 readers and 8 queued writers").await;
    let read = lock.read_lock().participant_nodes().await.unwrap();
    let write = lock.write_lock().participant_nodes().await.unwrap();
    assert_eq!(read.len(), 20);
    assert_eq!(write.len(), 8);
    assert!(read.iter().all(|n| kind_of(n) == "read") && write.iter().all(|n| kind_of(n) == "write"));
    assert!(read.iter().all(|n| n.starts_with(&format!("{path}/_c_"))), "full paths, protected names");
    for reader in readers {
        reader.release().await.unwrap();
    }
    for w in writers {
        support::join("writer", Duration::from_secs(20), w).await;
    }
    assert!(support::sorted_children(&obs, &path).await.is_empty());
}

/// Curator item 16, made safe: an upgrade is refused at once with a typed error (Curator's untimed
/// acquire deadlocks).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrading_is_refused_at_once() {
    support::init_tracing();
    let server = support::server().await;
    let client = support::client(&server.connect_string()).await;
    let path = support::unique_path("rw-upgrade");
    let lock = InterProcessReadWriteLock::new(&client, &path).unwrap();

    lock.read_lock().acquire().await.unwrap();
    let started = Instant::now();
    let e = tokio::time::timeout(Duration::from_secs(5), lock.write_lock().acquire()).await.expect("no deadlock");
    let e = e.expect_err("upgrade refused");
    assert_eq!(e.kind(), ErrorKind::BadArgument, "{e}");
    assert!(matches!(&e, zk_curator::Error::WouldDeadlock { path: p, .. } if p == &path), "{e:?}");
    assert!(started.elapsed() < Duration::from_secs(1), "refused without waiting");
    assert_eq!(lock.write_lock().lock().await.map(|_| ()).map_err(|e| e.kind()), Err(ErrorKind::BadArgument));
    assert_eq!(
        lock.write_lock().acquire_timeout(Duration::from_secs(1)).await.map_err(|e| e.kind()),
        Err(ErrorKind::BadArgument)
    );
    lock.read_lock().release().await.unwrap();
    // Once the read lock is released the same task may write.
    assert!(lock.write_lock().acquire_timeout(Duration::from_secs(5)).await.unwrap());
    lock.write_lock().release().await.unwrap();
}

/// Curator items 17 and 18: a write holder takes the read lock at once (downgrade), at its own
/// place (a plain EPHEMERAL `__READ__<writer's seq>`); another task of the same instance does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downgrading_is_per_task_and_takes_the_writers_place() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let client = support::client(&connect).await;
    let path = support::unique_path("rw-downgrade");
    let lock = InterProcessReadWriteLock::new(&client, &path).unwrap();

    lock.write_lock().acquire().await.unwrap();
    let other = lock.clone();
    let other_task =
        crate::support::spawn(async move { other.read_lock().acquire_timeout(Duration::from_secs(1)).await });
    assert!(!support::join("other task", Duration::from_secs(10), other_task).await.unwrap(), "item 17");

    assert!(lock.read_lock().acquire_timeout(Duration::from_secs(5)).await.unwrap(), "item 18: downgrade");
    let write_node = lock.write_lock().lock_node_path().unwrap();
    let read_node = lock.read_lock().lock_node_path().unwrap();
    let seq = zk_curator::locks::driver::read_write_sort_key(&write_node);
    assert!(read_node.ends_with(&format!("{READ_LOCK_NAME}{seq}")), "{read_node} takes {write_node}'s place");
    let stat = support::stat(&obs, &read_node).await.expect("read node");
    assert_ne!(stat.ephemeral_owner, 0, "ephemeral");
    lock.write_lock().release().await.unwrap();
    assert_eq!(lock.read_lock().current_hold().unwrap().hold_state(), HoldState::Held);
    lock.read_lock().release().await.unwrap();
    assert!(support::sorted_children(&obs, &path).await.is_empty());
}

/// Curator item 19 (CURATOR-621): a writer queued behind a downgrading writer stays behind; also
/// with guards (`lock_while_writing`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_writer_stays_behind_a_downgrade() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let client = support::client(&connect).await;
    let path = support::unique_path("rw-contending-downgrade");
    let lock1 = InterProcessReadWriteLock::new(&client, &path).unwrap();
    // Another contender with a node of its own (the local queue would keep lock2's writer in the process).
    let lock2 = InterProcessReadWriteLock::new(&client, &path).unwrap().with_node_per_task();

    for guards in [false, true] {
        let writer = if guards { Some(lock1.write_lock().lock().await.unwrap()) } else { None };
        if !guards {
            lock1.write_lock().acquire().await.unwrap();
        }
        let queued = {
            let lock2 = lock2.clone();
            crate::support::spawn(async move {
                let guard = lock2.write_lock().lock().await.unwrap();
                let at = Instant::now();
                guard.release().await.unwrap();
                at
            })
        };
        support::eventually_queued(&obs, &path, 2, "lock2's writer queued").await;
        let reader = match &writer {
            Some(writer) => Some(lock1.read_lock().lock_while_writing(writer).await.unwrap()),
            None => {
                assert!(lock1.read_lock().acquire_timeout(Duration::from_secs(5)).await.unwrap());
                None
            }
        };
        match writer {
            Some(writer) => writer.release().await.unwrap(),
            None => lock1.write_lock().release().await.unwrap(),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(!queued.is_finished(), "guards={guards}: the queued writer overtook the downgraded reader");
        let released = Instant::now();
        match reader {
            Some(reader) => reader.release().await.unwrap(),
            None => lock1.read_lock().release().await.unwrap(),
        }
        let acquired_at = support::join("queued writer", Duration::from_secs(10), queued).await;
        assert!(acquired_at >= released, "guards={guards}: the writer got in before the reader released");
    }
    assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(5)).await.is_empty());
}

/// Fencing tokens follow hold order across a downgrade: the write hold, then its downgraded read
/// hold (which begins as the write hold ends, at the writer's place in line), then a writer that
/// queued before the downgrade and holds after the reader — though the read node is created after
/// that writer's node. Curator-style and with guards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_increase_in_hold_order_across_a_downgrade() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let client = support::client(&connect).await;
    let other = support::client(&connect).await;
    let path = support::unique_path("rw-downgrade-tokens");
    let lock = InterProcessReadWriteLock::new(&client, &path).unwrap();
    let queued_lock = InterProcessReadWriteLock::new(&other, &path).unwrap();
    for guards in [false, true] {
        let writer = if guards { Some(lock.write_lock().lock().await.unwrap()) } else { None };
        if !guards {
            lock.write_lock().acquire().await.unwrap();
        }
        let write_token = match &writer {
            Some(writer) => writer.fencing_token(),
            None => lock.write_lock().current_hold().unwrap().fencing_token(),
        };
        let queued = {
            let queued_lock = queued_lock.clone();
            crate::support::spawn(async move {
                let guard = queued_lock.write_lock().lock().await.unwrap();
                let token = guard.fencing_token();
                guard.release().await.unwrap();
                token
            })
        };
        support::eventually_queued(&obs, &path, 2, "the other writer queued").await;
        let reader = match &writer {
            Some(writer) => Some(lock.read_lock().lock_while_writing(writer).await.unwrap()),
            None => {
                assert!(lock.read_lock().acquire_timeout(Duration::from_secs(5)).await.unwrap());
                None
            }
        };
        let read_token = match &reader {
            Some(reader) => reader.fencing_token(),
            None => lock.read_lock().current_hold().unwrap().fencing_token(),
        };
        match writer {
            Some(writer) => writer.release().await.unwrap(),
            None => lock.write_lock().release().await.unwrap(),
        }
        match reader {
            Some(reader) => reader.release().await.unwrap(),
            None => lock.read_lock().release().await.unwrap(),
        }
        let queued_token = support::join("the queued writer", Duration::from_secs(10), queued).await;
        assert!(read_token > write_token, "guards={guards}: reader {read_token} is not above its writer {write_token}");
        assert!(
            queued_token > read_token,
            "guards={guards}: the writer queued before the downgrade holds after the reader with a smaller \
             token ({queued_token} after {read_token})"
        );
    }
    assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(5)).await.is_empty());
}

/// Curator item 20: 8 clients × 25 iterations, ~20 % writes, Curator-style and guards mixed; the
/// checker sees readers overlapping and no writer overlapping anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_share_writers_exclude() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let path = support::unique_path("rw-basic");
    let log = HoldLog::default();
    let mut tasks = Vec::new();
    for c in 0..8u64 {
        let client = support::client(&connect).await;
        let lock = InterProcessReadWriteLock::new(&client, &path).unwrap();
        let log = log.clone();
        tasks.push(crate::support::spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(c);
            let (mut reads, mut writes) = (0, 0);
            for i in 0..25 {
                let who = format!("client {c} #{i}");
                let hold_for = Duration::from_millis(rng.gen_range(1..15));
                if rng.gen_range(0..10) < 2 {
                    writes += 1;
                    let guard = lock.write_lock().lock().await.unwrap();
                    let holding = log.start(&who, guard.fencing_token().as_u128());
                    tokio::time::sleep(hold_for).await;
                    holding.end();
                    guard.release().await.unwrap();
                } else if i % 2 == 0 {
                    reads += 1;
                    lock.read_lock().acquire().await.unwrap();
                    let token = lock.read_lock().current_hold().unwrap().fencing_token().as_u128();
                    let holding = log.start_shared(&who, token);
                    tokio::time::sleep(hold_for).await;
                    holding.end();
                    lock.read_lock().release().await.unwrap();
                } else {
                    reads += 1;
                    let guard = lock.read_lock().lock().await.unwrap();
                    let holding = log.start_shared(&who, guard.fencing_token().as_u128());
                    tokio::time::sleep(hold_for).await;
                    holding.end();
                    guard.release().await.unwrap();
                }
            }
            client.close().await;
            (reads, writes)
        }));
    }
    let (mut reads, mut writes) = (0, 0);
    for t in tasks {
        let (r, w) = support::join("client", Duration::from_secs(60), t).await;
        reads += r;
        writes += w;
    }
    log.assert_exclusive("readers and writers");
    let concurrent = log.max_concurrent();
    println!("rw basic: {reads} reads, {writes} writes, up to {concurrent} holders at once");
    assert!(reads > 0 && writes > 0, "both kinds occurred");
    assert!(concurrent > 1, "readers shared the lock at some moment");
    assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(5)).await.is_empty());
}

/// Curator item 21: the lock's data goes into its nodes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_data() {
    let server = support::server().await;
    let connect = server.connect_string();
    let client = support::client(&connect).await;
    let path = support::unique_path("rw-data");
    let lock = InterProcessReadWriteLock::with_data(&client, &path, vec![1u8, 2, 3, 4]).unwrap();
    let guard = lock.write_lock().lock().await.unwrap();
    let obs = support::observer(&connect).await;
    let children = support::sorted_children(&obs, &path).await;
    assert_eq!(children.len(), 1);
    let (data, _) = obs.get_data(guard.node_path()).await.unwrap();
    assert_eq!(data, [1, 2, 3, 4]);
    guard.release().await.unwrap();
}

/// Curator item 22: a writer's session is killed; a reader gets in; the writer's node is gone, its
/// hold is lost and its release still succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_writer_session() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let c1 = support::client(&connect).await;
    let c2 = support::client(&connect).await;
    let path = support::unique_path("rw-killed");
    let l1 = InterProcessReadWriteLock::new(&c1, &path).unwrap();
    let l2 = InterProcessReadWriteLock::new(&c2, &path).unwrap();
    l1.write_lock().acquire().await.unwrap();
    let node = l1.write_lock().lock_node_path().unwrap();
    assert!(l2.read_lock().try_lock_for(Duration::from_millis(300)).await.unwrap().is_none(), "the writer excludes");
    expire_session(&connect, &c1).await.unwrap();
    let reader = l2.read_lock().try_lock_for(Duration::from_secs(10)).await.unwrap().expect("reader after expiry");
    let obs = support::observer(&connect).await;
    assert!(!support::exists(&obs, &node).await);
    // The reader may get in before the writer's client has heard of the expiry: it turns Lost.
    let hold = l1.write_lock().current_hold().unwrap();
    support::eventually(Duration::from_secs(10), "the expired writer's hold is Lost", || async {
        hold.hold_state() == HoldState::Lost
    })
    .await;
    l1.write_lock().release().await.unwrap();
    reader.release().await.unwrap();
}

/// Asks for `hold`'s node through `asker` and waits until the holder is told.
async fn revoke(asker: &zk_curator::CuratorClient, hold: &std::sync::Arc<zk_curator::locks::Hold>, what: &str) {
    let told = {
        let hold = hold.clone();
        crate::support::spawn(async move { hold.revocation_requested().await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!told.is_finished(), "{what}: told before anyone asked");
    Revoker::attempt_revoke(asker, hold.path()).await.unwrap();
    support::join(&format!("{what}: revocation request reaches the holder"), Duration::from_secs(5), told).await;
}

/// Revocation (Curator's `testRevoking`, for the mutex and both halves): a revocable holder is told
/// when someone asks, releases, and the asker gets the lock. Revocable nodes carry no data.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revocation_reaches_the_holder() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let a = support::client(&connect).await;
    let b = support::client(&connect).await;
    let obs = support::observer(&connect).await;
    let empty_data = |hold: std::sync::Arc<zk_curator::locks::Hold>| {
        let obs = obs.clone();
        async move { obs.get_data(hold.path()).await.unwrap().0.is_empty() }
    };

    // The mutex, with a guard; the asker finds the node among the participants, as in Curator.
    let path = support::unique_path("revoke-mutex");
    let mutex = InterProcessMutex::new(&a, &path).unwrap();
    mutex.make_revocable();
    let guard = mutex.lock().await.unwrap();
    assert!(empty_data(guard.hold().clone()).await, "a revocable node carries no data, as Curator's");
    let asker = InterProcessMutex::new(&b, &path).unwrap();
    assert_eq!(asker.participant_nodes().await.unwrap(), [guard.node_path().to_string()]);
    revoke(&b, guard.hold(), "mutex guard").await;
    guard.release().await.unwrap();
    assert!(asker.acquire_timeout(Duration::from_secs(5)).await.unwrap());
    asker.release().await.unwrap();

    // Both halves, Curator-style.
    let path = support::unique_path("revoke-rw");
    let rw = InterProcessReadWriteLock::new(&a, &path).unwrap();
    let asker = InterProcessReadWriteLock::new(&b, &path).unwrap();
    rw.read_lock().make_revocable();
    rw.write_lock().make_revocable();
    rw.read_lock().acquire().await.unwrap();
    let read_hold = rw.read_lock().current_hold().unwrap();
    assert!(empty_data(read_hold.clone()).await);
    revoke(&b, &read_hold, "read lock").await;
    rw.read_lock().release().await.unwrap();
    rw.write_lock().acquire().await.unwrap();
    let write_hold = rw.write_lock().current_hold().unwrap();
    assert!(empty_data(write_hold.clone()).await);
    revoke(&b, &write_hold, "write lock").await;
    rw.write_lock().release().await.unwrap();
    assert!(asker.write_lock().acquire_timeout(Duration::from_secs(5)).await.unwrap());
    asker.write_lock().release().await.unwrap();

    // Revoking a node that is gone is not an error; a bad path is a typed one.
    Revoker::attempt_revoke(&b, "/zkc-test/no-such-lock/_c_x-lock-0000000001").await.unwrap();
    assert_eq!(Revoker::attempt_revoke(&b, "relative").await.map_err(|e| e.kind()), Err(ErrorKind::BadArgument));
}

/// The common trait: the mutex and both halves in one `Vec<Box<dyn InterProcessLock>>`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_trait_for_every_lock() {
    let server = support::server().await;
    let connect = server.connect_string();
    let client = support::client(&connect).await;
    let base = support::unique_path("trait");
    let rw = InterProcessReadWriteLock::new(&client, &format!("{base}-rw")).unwrap();
    let other_rw = InterProcessReadWriteLock::new(&client, &format!("{base}-rw2")).unwrap();
    let locks: Vec<Box<dyn InterProcessLock>> = vec![
        Box::new(InterProcessMutex::new(&client, &format!("{base}-m")).unwrap()),
        Box::new(rw.read_lock().clone()),
        Box::new(other_rw.write_lock().clone()),
    ];
    for lock in &locks {
        assert!(lock.acquire_timeout(Duration::from_secs(5)).await.unwrap(), "{}", lock.path());
        lock.acquire().await.unwrap(); // re-entrant
        assert!(lock.is_acquired_in_this_process());
    }
    for lock in locks.iter().rev() {
        lock.release().await.unwrap();
        lock.release().await.unwrap();
        assert!(!lock.is_acquired_in_this_process());
        assert_eq!(lock.release().await.map_err(|e| e.kind()), Err(ErrorKind::NotOwner));
    }
}

/// Acquires of both kinds cancelled at random points while the other kind holds leave no node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_cancellation_leaves_nothing_behind() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let holder_client = support::client(&connect).await;
    let client = support::client(&connect).await;
    let path = support::unique_path("rw-cancel");
    let holder = InterProcessReadWriteLock::new(&holder_client, &path).unwrap();
    let lock = InterProcessReadWriteLock::new(&client, &path).unwrap();
    let obs = support::observer(&connect).await;
    let mut rng = rand::rngs::StdRng::seed_from_u64(support::seed("RW_CANCEL_SEED"));
    let mut completed = 0;
    for round in 0..2 {
        // Round 0: a writer holds, so both kinds wait; round 1: a reader holds, so readers may get in.
        let writer = holder.write_lock().lock().await.unwrap();
        let (writer, reader) = if round == 0 {
            (Some(writer), None)
        } else {
            let reader = holder.read_lock().lock_while_writing(&writer).await.unwrap();
            writer.release().await.unwrap();
            (None, Some(reader))
        };
        let holder_nodes = support::sorted_children(&obs, &path).await;
        for _ in 0..100 {
            let delay = Duration::from_micros(rng.gen_range(0..3000));
            let write = rng.gen_bool(0.5);
            let attempt = async {
                if write {
                    lock.write_lock().lock().await.map(|guard| guard.node_path().to_string())
                } else {
                    lock.read_lock().lock().await.map(|guard| guard.node_path().to_string())
                }
            };
            // A guard that got in is dropped at once (released in the background).
            let got_in = matches!(tokio::time::timeout(delay, attempt).await, Ok(Ok(_)));
            assert!(!got_in || (round == 1 && !write), "round {round}: a write={write} acquire got in past the holder");
            completed += usize::from(got_in);
        }
        let left = support::children_become(&obs, &path, &holder_nodes, Duration::from_secs(10)).await;
        assert_eq!(left, holder_nodes, "round {round}: cancelled acquires left nodes behind");
        if let Some(writer) = writer {
            writer.release().await.unwrap();
        }
        if let Some(reader) = reader {
            reader.release().await.unwrap();
        }
    }
    println!("rw cancellation: {completed} reads completed while a reader held");
    assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(10)).await.is_empty());
    assert_eq!(client.pending_background_deletes(), 0);
}

/// Curator's `testContainerCleanup` for the read-write lock: ten tasks of both kinds come and go;
/// afterwards the lock path (a container) is reaped by the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn container_cleanup() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let client = support::client(&connect).await;
    let path = support::unique_path("rw-container");
    let log = HoldLog::default();
    let mut tasks = Vec::new();
    for i in 0..10 {
        let lock = InterProcessReadWriteLock::new(&client, &path).unwrap();
        let log = log.clone();
        tasks.push(crate::support::spawn(async move {
            if i % 3 == 0 {
                let guard = lock.write_lock().lock().await.unwrap();
                let holding = log.start(format!("writer {i}"), guard.fencing_token().as_u128());
                tokio::time::sleep(Duration::from_millis(10)).await;
                holding.end();
                guard.release().await.unwrap();
            } else {
                let guard = lock.read_lock().lock().await.unwrap();
                let holding = log.start_shared(format!("reader {i}"), guard.fencing_token().as_u128());
                tokio::time::sleep(Duration::from_millis(10)).await;
                holding.end();
                guard.release().await.unwrap();
            }
        }));
    }
    for t in tasks {
        support::join("contender", Duration::from_secs(20), t).await;
    }
    log.assert_exclusive("container cleanup");
    let obs = support::observer(&connect).await;
    support::eventually(Duration::from_secs(10), "the idle lock path is reaped", || async {
        !support::exists(&obs, &path).await
    })
    .await;
}

/// Curator's `testWaitingProcessKilledServer` for the read-write lock: a writer holds, a reader
/// waits, the server restarts within the session timeout; both finish and exclusion holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_restart_while_a_reader_waits() {
    support::init_tracing();
    let mut server = support::owned_server().await;
    let connect = server.connect_string();
    let a = support::client_with(&connect, Duration::from_secs(20)).await;
    let b = support::client_with(&connect, Duration::from_secs(20)).await;
    let path = support::unique_path("rw-restart");
    let writer_lock = InterProcessReadWriteLock::new(&a, &path).unwrap();
    let reader_lock = InterProcessReadWriteLock::new(&b, &path).unwrap();
    let log = HoldLog::default();

    let writer = writer_lock.write_lock().lock().await.unwrap();
    let writing = log.start("writer", writer.fencing_token().as_u128());
    let reader = {
        let (reader_lock, log) = (reader_lock.clone(), log.clone());
        crate::support::spawn(async move {
            let guard = reader_lock.read_lock().lock().await.unwrap();
            let reading = log.start_shared("reader", guard.fencing_token().as_u128());
            reading.end();
            guard.release().await.unwrap();
        })
    };
    let obs = support::observer(&connect).await;
    support::eventually_queued(&obs, &path, 2, "the reader queued").await;
    drop(obs);
    server.stop().await.unwrap();
    server.restart().await.unwrap();
    support::eventually(Duration::from_secs(20), "the writer's hold is Held again", || async {
        writer.hold_state() == HoldState::Held
    })
    .await;
    assert!(!reader.is_finished(), "the reader got in while the writer held");
    writing.end();
    writer.release().await.unwrap();
    support::join("reader", Duration::from_secs(20), reader).await;
    log.assert_exclusive("server restart");
    assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(10)).await.is_empty());
}
