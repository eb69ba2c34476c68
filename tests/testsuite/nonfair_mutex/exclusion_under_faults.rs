//! Exclusion of the non-fair mutex, checked by the one checker (support/exclusion.rs) that does not
//! trust the library: every holder records `(token, start, end)`, `end` taken before release or
//! when it observed `Lost`.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support;
use crate::support::exclusion::HoldLog;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use zk_curator::locks::{Hold, HoldState, InterProcessNonFairMutex, MutexGuard, NONFAIR_LOCK_NAME};
use zk_curator::testing::{FaultProxy, Latency, ProxyMode, TestingServer};

/// Runs until `done` or until the hold is observed `Lost`, then records the interval.
async fn work(log: &HoldLog, who: &str, hold: &Arc<Hold>, start: Instant, done: impl Future<Output = ()>) -> bool {
    let mut rx = hold.watch_state();
    tokio::pin!(done);
    let lost = loop {
        if *rx.borrow_and_update() == HoldState::Lost {
            break true;
        }
        tokio::select! {
            biased;
            changed = rx.changed() => if changed.is_err() { break false },
            () = &mut done => break false,
        }
    };
    log.record(who, hold.fencing_token().as_u128(), start, Instant::now(), lost);
    lost
}

/// Timed, cancelled, aborted, Curator-style and one-attempt acquires; holds briefly when it wins.
async fn hammer(m: InterProcessNonFairMutex, who: String, log: HoldLog, seed: u64, attempts: usize) -> (usize, usize) {
    let mut rng = StdRng::seed_from_u64(seed);
    let (mut won, mut gave_up) = (0, 0);
    for _ in 0..attempts {
        let wait = Duration::from_micros(rng.gen_range(0..20_000));
        let hold_for = Duration::from_micros(rng.gen_range(0..3_000));
        let guard: Option<MutexGuard> = match rng.gen_range(0..5) {
            0 => m.try_lock_for(wait).await.expect("try_lock_for"),
            1 => match tokio::time::timeout(wait, m.lock()).await {
                Ok(guard) => Some(guard.expect("lock")),
                Err(_) => None,
            },
            2 => {
                let (tx, rx) = tokio::sync::oneshot::channel();
                let m2 = m.clone();
                let task = crate::support::spawn(async move {
                    let _ = tx.send(m2.lock().await.expect("lock in an aborted task"));
                });
                tokio::time::sleep(wait).await;
                task.abort();
                rx.await.ok()
            }
            3 => {
                if m.acquire_timeout(wait).await.expect("acquire_timeout") {
                    won += 1;
                    let hold = m.current_hold().expect("a hold after acquire");
                    work(&log, &who, &hold, Instant::now(), tokio::time::sleep(hold_for)).await;
                    m.release().await.expect("release");
                } else {
                    gave_up += 1;
                }
                continue;
            }
            _ => m.try_lock().await.expect("try_lock"),
        };
        let Some(guard) = guard else {
            gave_up += 1;
            continue;
        };
        won += 1;
        work(&log, &who, guard.hold(), Instant::now(), tokio::time::sleep(hold_for)).await;
        if rng.gen_bool(0.2) {
            drop(guard);
        } else {
            guard.release().await.expect("release");
        }
    }
    (won, gave_up)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_cancellation_keeps_exclusion_and_leaves_no_node() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("nonfair-cancel");
    let log = HoldLog::default();
    let seed: u64 = rand::random();
    println!("nonfair random cancellation: seed {seed}");
    let mut tasks = Vec::new();
    for c in 0..3u64 {
        // Two tasks per client: they share the client's local queue (one racer per process).
        let client = support::client(&connect).await;
        let m = InterProcessNonFairMutex::new(&client, &path).unwrap();
        for t in 0..2u64 {
            let seed = seed.wrapping_add(c * 10 + t);
            tasks.push(crate::support::spawn(hammer(m.clone(), format!("c{c}t{t}"), log.clone(), seed, 150)));
        }
    }
    let (mut won, mut gave_up) = (0, 0);
    for (i, task) in tasks.into_iter().enumerate() {
        let (w, g) = support::join(&format!("contender {i}"), Duration::from_secs(120), task).await;
        won += w;
        gave_up += g;
    }
    let holds = log.assert_exclusive("non-fair random cancellation");
    assert_eq!(holds.len(), won);
    // Both outcomes many times over (a loaded machine wins fewer: short random waits time out).
    assert!(won >= 40 && gave_up >= 20, "the scenario did not happen often enough: won {won}, gave up {gave_up}");
    let left = support::children_become(&obs, &path, &[], Duration::from_secs(5)).await;
    assert!(left.is_empty(), "stray nodes under {path}: {left:?}");
}

/// A holder whose session the server expires (blackholed) sees `Lost` before the next holder gets
/// the node, and the next holder's token is larger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_holder_sees_lost_before_the_next_holder_acquires() {
    support::init_tracing();
    let server = support::server_with(TestingServer::builder().tick_time(Duration::from_millis(200))).await;
    let connect = server.connect_string();
    let proxy = FaultProxy::start(&connect).await.expect("proxy");
    let a =
        support::client_with_timeouts(&proxy.connect_string(), Duration::from_secs(2), Duration::from_secs(2)).await;
    let b = support::client(&connect).await;
    let path = support::unique_path("nonfair-expiry");
    let (ma, mb) =
        (InterProcessNonFairMutex::new(&a, &path).unwrap(), InterProcessNonFairMutex::new(&b, &path).unwrap());
    let log = HoldLog::default();
    for trial in 0..3 {
        // Latency, one more fault (trial 1): A's link delays each way, its replies by less than the
        // 0.15 T margin its Lost needs (300 ms of this 2 s session).
        if trial == 1 {
            let set = support::latency::set_random(&proxy, &mut rand::thread_rng(), 150);
            println!("non-fair expiry trial {trial}: latency {}", support::latency::describe(&set));
        }
        let ga = ma.lock().await.unwrap();
        let a_worker = {
            let (log, hold) = (log.clone(), ga.hold().clone());
            crate::support::spawn(async move { work(&log, "A", &hold, Instant::now(), std::future::pending()).await })
        };
        let b_task = {
            let (mb, log) = (mb.clone(), log.clone());
            crate::support::spawn(async move {
                let gb = mb.lock().await.expect("B lock");
                let lost =
                    work(&log, "B", gb.hold(), Instant::now(), tokio::time::sleep(Duration::from_millis(50))).await;
                assert!(!lost, "B's hold was lost");
                let token = gb.fencing_token();
                gb.release().await.expect("B release");
                token
            })
        };
        tokio::time::sleep(Duration::from_millis(200)).await;
        proxy.set_mode(ProxyMode::Blackhole);
        assert!(support::join("A observes Lost", Duration::from_secs(15), a_worker).await, "trial {trial}: A lost");
        let b_token = support::join("B", Duration::from_secs(15), b_task).await;
        assert!(b_token > ga.fencing_token(), "trial {trial}: B's token {b_token} after A's {}", ga.fencing_token());
        proxy.set_mode(ProxyMode::Pass);
        proxy.set_latency(Latency::NONE);
        support::eventually(Duration::from_secs(10), "A reconnected", || async { a.is_connected() }).await;
        let _ = ga.release().await;
    }
    log.assert_exclusive("non-fair session expiry");
}

/// A create whose reply is lost made the node: once the connection is back on the same session,
/// the acquire recognises the node as its own (owner session and mark) instead of waiting for it
/// forever, and a second contender gets it only after the release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_whose_reply_was_lost_is_resolved_by_its_owner_session() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let proxy = FaultProxy::start(&connect).await.unwrap();
    let a =
        support::client_with_timeouts(&proxy.connect_string(), Duration::from_secs(30), Duration::from_secs(15)).await;
    let b = support::client(&connect).await;
    let obs = support::observer(&connect).await;
    let path = support::unique_path("nonfair-lost-reply");
    let node = format!("{path}/{NONFAIR_LOCK_NAME}");
    let ma = InterProcessNonFairMutex::new(&a, &path).unwrap();
    let mb = InterProcessNonFairMutex::new(&b, &path).unwrap();
    let log = HoldLog::default();
    // The lock path exists (a create under a missing parent makes nothing, and its NoNode reply
    // would be dropped): a persistent sibling keeps the container from being reaped once free.
    let held = ma.lock().await.unwrap();
    let keep = format!("{path}/keep");
    obs.create(&keep, b"", &zk_curator::raw::CreateMode::Persistent.with_acls(zk_curator::raw::Acls::anyone_all()))
        .await
        .unwrap();
    held.release().await.unwrap();

    proxy.set_mode(ProxyMode::DropReplies);
    let acquiring = {
        let ma = ma.clone();
        crate::support::spawn(async move { ma.lock().await })
    };
    support::eventually(Duration::from_secs(10), "A's create reached the server", || async {
        support::exists(&obs, &node).await
    })
    .await;
    let owner = support::stat(&obs, &node).await.expect("A's node").ephemeral_owner;
    assert_eq!(owner, a.session_id(), "the node is A's");
    let b_task = {
        let (mb, log) = (mb.clone(), log.clone());
        crate::support::spawn(async move {
            let gb = mb.lock().await.expect("B lock");
            work(&log, "B", gb.hold(), Instant::now(), async {}).await;
            gb.release().await.expect("B release");
        })
    };
    proxy.set_mode(ProxyMode::Pass);
    let ga = support::join("A's acquire resolves its own node", Duration::from_secs(20), acquiring).await.unwrap();
    let czxid = support::stat(&obs, &node).await.expect("A's node").czxid;
    assert_eq!(ga.fencing_token().zxid(), czxid, "A holds the node its lost create made");
    assert_eq!(ga.hold().session().id, owner);
    work(&log, "A", ga.hold(), Instant::now(), tokio::time::sleep(Duration::from_millis(200))).await;
    ga.release().await.unwrap();
    support::join("B", Duration::from_secs(10), b_task).await;
    log.assert_exclusive("lost create reply");
    let left = support::children_become(&obs, &path, &["keep".to_string()], Duration::from_secs(5)).await;
    assert_eq!(left, ["keep"], "stray nodes");
    obs.delete(&keep, None).await.unwrap();
}

/// Every holder re-creates the same path: a release of a holder whose session ended — queued while
/// it was cut off and run once its client is on a new session — must not delete the next holder's
/// node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_holders_release_never_deletes_the_next_holders_node() {
    support::init_tracing();
    let server = support::server_with(TestingServer::builder().tick_time(Duration::from_millis(200))).await;
    let connect = server.connect_string();
    let proxy = FaultProxy::start(&connect).await.unwrap();
    let a =
        support::client_with_timeouts(&proxy.connect_string(), Duration::from_secs(2), Duration::from_secs(1)).await;
    let b = support::client(&connect).await;
    let obs = support::observer(&connect).await;
    let path = support::unique_path("nonfair-stale-release");
    let node = format!("{path}/{NONFAIR_LOCK_NAME}");
    let ma = InterProcessNonFairMutex::new(&a, &path).unwrap();
    let mb = InterProcessNonFairMutex::new(&b, &path).unwrap();

    let ga = ma.lock().await.unwrap();
    let a_session = a.session();
    proxy.set_mode(ProxyMode::Blackhole);
    // The release cannot reach the server: it is queued for the background.
    let _ = ga.release().await;
    let gb = tokio::time::timeout(Duration::from_secs(20), mb.lock()).await.expect("B acquires").unwrap();
    let b_czxid = support::stat(&obs, &node).await.expect("B's node").czxid;
    assert_eq!(gb.fencing_token().zxid(), b_czxid);
    proxy.set_mode(ProxyMode::Pass);
    support::eventually(Duration::from_secs(15), "A is on a new session", || async {
        a.is_connected() && a.session().epoch > a_session.epoch
    })
    .await;
    support::eventually(Duration::from_secs(15), "A's queued delete ran", || async {
        a.pending_background_deletes() == 0
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(support::stat(&obs, &node).await.map(|s| s.czxid), Some(b_czxid), "B's node must survive A's release");
    assert_eq!(gb.hold_state(), HoldState::Held);
    gb.release().await.unwrap();
    assert!(!support::exists(&obs, &node).await);
}
