//! `InterProcessSemaphoreV2`, `InterProcessSemaphoreMutex` and `InterProcessMultiLock` against a
//! real ZooKeeper: Curator's `TestInterProcessSemaphore`, `TestInterProcessSemaphoreMutex` and
//! `TestInterProcessMultiMutex` scenarios, asserting the property each checks with
//! a counter that does not trust the library (never more than max leases), all-or-nothing, and no
//! orphan node.

use crate::support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use zk_curator::locks::{
    HoldState, HolderId, InterProcessLock, InterProcessMultiLock, InterProcessMutex, InterProcessSemaphoreMutex,
    InterProcessSemaphoreV2, LockFuture,
};
use zk_curator::testing::{FaultProxy, Latency, ProxyMode};
use zk_curator::{Error, ErrorKind};

/// Holders in and out, and the most seen at once.
#[derive(Default)]
struct Occupancy {
    inside: AtomicUsize,
    max: AtomicUsize,
}

impl Occupancy {
    fn enter(&self) {
        let now = self.inside.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(now, Ordering::SeqCst);
    }
    fn leave(&self) {
        self.inside.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Six sessions take leases of a 2-lease semaphore 10 times each (one, or sometimes two at a time
/// with a timeout — two callers each holding one lease and waiting for a second would wait for
/// each other forever, as in Curator): never more than 2 holders, and 2 at some moment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_more_than_max_leases() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let path = support::unique_path("semaphore");
    let occupancy = Arc::new(Occupancy::default());
    let mut tasks = Vec::new();
    for c in 0..6u64 {
        let client = support::client(&connect).await;
        let semaphore = InterProcessSemaphoreV2::new(&client, &path, 2).unwrap();
        let occupancy = occupancy.clone();
        tasks.push(crate::support::spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(c);
            for _ in 0..10 {
                let many = if rng.gen_bool(0.2) {
                    semaphore.acquire_many_timeout(2, Duration::from_millis(200)).await.unwrap()
                } else {
                    None
                };
                let leases = match many {
                    Some(leases) => leases,
                    None => vec![semaphore.acquire().await.unwrap()],
                };
                for _ in &leases {
                    occupancy.enter();
                }
                // Held long enough that another holder's acquire (tens of ms on a loaded machine)
                // can overlap it: the run must show both leases in use at once.
                tokio::time::sleep(Duration::from_millis(rng.gen_range(10..50))).await;
                for _ in &leases {
                    occupancy.leave();
                }
                zk_curator::locks::return_all(leases).await.unwrap();
            }
            client.close().await;
        }));
    }
    for t in tasks {
        support::join("semaphore user", Duration::from_secs(60), t).await;
    }
    let max = occupancy.max.load(Ordering::SeqCst);
    println!("semaphore: at most {max} leases held at once");
    assert!(max <= 2, "{max} leases held at once with 2 allowed");
    assert_eq!(max, 2, "both leases were used at once at some moment");
    let obs = support::observer(&connect).await;
    assert!(support::sorted_children(&obs, &format!("{path}/leases")).await.is_empty(), "no lease left");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_leases_all_or_none_and_typed_errors() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let client = support::client(&connect).await;
    let path = support::unique_path("semaphore-many");
    let leases_path = format!("{path}/leases");
    let semaphore = InterProcessSemaphoreV2::with_data(&client, &path, 3, b"job".to_vec()).unwrap();

    let two = semaphore.acquire_many(2).await.unwrap();
    assert_eq!(two.len(), 2);
    assert_eq!(two[0].data(), b"job");
    assert!(two[0].node_name().starts_with("_c_") && two[0].node_name().contains("-lease-"), "{}", two[0].node_name());
    let (data, _) = obs.get_data(two[1].node_path()).await.unwrap();
    assert_eq!(data, b"job");
    assert_eq!(semaphore.participant_nodes().await.unwrap().len(), 2);
    // Two more do not fit: the one that did is given back, and the call keeps its deadline.
    let started = Instant::now();
    assert!(semaphore.acquire_many_timeout(2, Duration::from_millis(500)).await.unwrap().is_none());
    assert!(started.elapsed() < Duration::from_secs(3), "one deadline for the whole set");
    // The give-back is bounded by the spent deadline: its delete may finish in the background.
    let mut held: Vec<String> = two.iter().map(|l| l.node_name().to_string()).collect();
    held.sort();
    let left = support::children_become(&obs, &leases_path, &held, Duration::from_secs(5)).await;
    assert_eq!(left, held, "the lease taken before the timeout was given back");
    let third = semaphore.acquire_timeout(Duration::from_secs(5)).await.unwrap().expect("the third lease");
    assert!(semaphore.acquire_timeout(Duration::ZERO).await.unwrap().is_none(), "a fourth does not fit");
    zk_curator::locks::return_all(two).await.unwrap();
    third.release().await.unwrap();

    // Bad counts: typed errors at once, nothing sent.
    let e = InterProcessSemaphoreV2::new(&client, &path, 0).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BadArgument, "{e}");
    assert_eq!(semaphore.acquire_many(0).await.map(|_| ()).map_err(|e| e.kind()), Err(ErrorKind::BadArgument));
    let e = semaphore.acquire_many(4).await.map(|_| ()).unwrap_err();
    assert!(e.to_string().contains('4') && e.kind() == ErrorKind::BadArgument, "{e}");
    assert_eq!(
        InterProcessSemaphoreV2::new(&client, "bad", 1).map(|_| ()).map_err(|e| e.kind()),
        Err(ErrorKind::BadArgument)
    );
    for seed in [0, -1] {
        let e = InterProcessSemaphoreV2::with_shared_count(&client, &path, &format!("{path}-count"), seed)
            .await
            .unwrap_err();
        assert!(e.kind() == ErrorKind::BadArgument && e.to_string().contains(&seed.to_string()), "{e}");
    }
    // A counter node that is not Curator's 4-byte integer: a typed error naming it.
    let garbage = format!("{path}-garbage");
    let persistent = zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    obs.create(&garbage, b"two", &persistent).await.unwrap();
    let e = InterProcessSemaphoreV2::with_shared_count(&client, &path, &garbage, 2).await.unwrap_err();
    assert!(matches!(&e, Error::CorruptedValue { path, len: 3, .. } if *path == garbage), "{e}");
    assert!(support::eventually_no_children(&connect, &leases_path, Duration::from_secs(5)).await.is_empty());
}

/// Curator's `testThreadedLeaseIncrease`: the maximum follows a shared count changed at run time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_leases_follow_a_shared_count() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let client = support::client(&connect).await;
    let path = support::unique_path("semaphore-count");
    let count_path = format!("{path}-count");
    let semaphore = InterProcessSemaphoreV2::with_shared_count(&client, &path, &count_path, 1).await.unwrap();
    assert_eq!(semaphore.max_leases(), 1);
    let first = semaphore.acquire().await.unwrap();
    let second = {
        let semaphore = semaphore.clone();
        crate::support::spawn(async move { semaphore.acquire().await.unwrap() })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!second.is_finished(), "a second lease with a count of 1");
    // Another process raises the count (Curator's SharedCount: 4 bytes, big-endian).
    let obs = support::observer(&connect).await;
    obs.set_data(&count_path, &2i32.to_be_bytes(), None).await.unwrap();
    let second = support::join("second lease after the count went up", Duration::from_secs(5), second).await;
    assert_eq!(semaphore.max_leases(), 2);
    zk_curator::locks::return_all(vec![first, second]).await.unwrap();
}

/// Acquires cancelled at random points, while the leases are taken, leave no lease and no
/// internal-mutex node behind (CURATOR-315, CURATOR-462).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_acquires_leave_no_orphan() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let holder_client = support::client(&connect).await;
    let client = support::client(&connect).await;
    let path = support::unique_path("semaphore-cancel");
    let held = InterProcessSemaphoreV2::new(&holder_client, &path, 2).unwrap().acquire_many(2).await.unwrap();
    let semaphore = InterProcessSemaphoreV2::new(&client, &path, 2).unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(support::seed("SEMAPHORE_CANCEL_SEED"));
    let leases_path = format!("{path}/leases");
    let before = support::sorted_children(&obs, &leases_path).await;
    for _ in 0..150 {
        let delay = Duration::from_micros(rng.gen_range(0..4000));
        let got = tokio::time::timeout(delay, semaphore.acquire()).await;
        assert!(!matches!(got, Ok(Ok(_))), "a lease beyond the maximum");
    }
    assert_eq!(support::children_become(&obs, &leases_path, &before, Duration::from_secs(10)).await, before);
    assert!(support::eventually_no_children(&connect, &format!("{path}/locks"), Duration::from_secs(10))
        .await
        .is_empty());
    zk_curator::locks::return_all(held).await.unwrap();
    let lease = semaphore.acquire_timeout(Duration::from_secs(5)).await.unwrap().expect("free again");
    lease.release().await.unwrap();
}

/// Curator's `TestInterProcessSemaphoreMutex`: not re-entrant (a second acquire of the same task
/// waits), releasable from another task; excludes another client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_mutex() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let a = support::client(&connect).await;
    let b = support::client(&connect).await;
    let path = support::unique_path("semaphore-mutex");
    let ma = InterProcessSemaphoreMutex::new(&a, &path).unwrap();
    let mb = InterProcessSemaphoreMutex::new(&b, &path).unwrap();

    ma.acquire().await.unwrap();
    assert!(ma.is_acquired_in_this_process());
    assert!(!ma.acquire_timeout(Duration::from_millis(300)).await.unwrap(), "not re-entrant");
    assert!(!mb.acquire_timeout(Duration::from_millis(300)).await.unwrap(), "excludes another client");
    let releaser = ma.clone();
    support::join(
        "release from another task",
        Duration::from_secs(5),
        crate::support::spawn(async move { releaser.release().await }),
    )
    .await
    .unwrap();
    assert!(!ma.is_acquired_in_this_process());
    assert_eq!(ma.release().await.map_err(|e| e.kind()), Err(ErrorKind::NotOwner));
    assert!(mb.acquire_timeout(Duration::from_secs(5)).await.unwrap());
    mb.release().await.unwrap();
}

/// A lock whose acquire or release fails (Curator's `testSomeLocksFailToLock` /
/// `testSomeReleasesFail`).
struct Faulty {
    inner: InterProcessMutex,
    fail_acquire: bool,
    fail_release: bool,
}

impl InterProcessLock for Faulty {
    fn path(&self) -> &str {
        self.inner.path()
    }
    fn acquire(&self) -> LockFuture<'_, ()> {
        Box::pin(async move {
            if self.fail_acquire {
                return Err(zk_curator::Error::LockLost { node: self.path().to_string(), reason: "injected" });
            }
            self.inner.acquire().await
        })
    }
    fn acquire_timeout(&self, timeout: Duration) -> LockFuture<'_, bool> {
        Box::pin(async move {
            if self.fail_acquire {
                return Err(zk_curator::Error::LockLost { node: self.path().to_string(), reason: "injected" });
            }
            self.inner.acquire_timeout(timeout).await
        })
    }
    fn release(&self) -> LockFuture<'_, ()> {
        Box::pin(async move {
            if self.fail_release {
                return Err(zk_curator::Error::LockLost { node: self.path().to_string(), reason: "injected" });
            }
            self.inner.release().await
        })
    }
    fn is_acquired_in_this_process(&self) -> bool {
        self.inner.is_acquired_in_this_process()
    }
    fn release_abandoned(&self, holder: HolderId) {
        InterProcessLock::release_abandoned(&self.inner, holder)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_lock_all_or_nothing() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let client = support::client(&connect).await;
    let other = support::client(&connect).await;
    let base = support::unique_path("multi");
    let (p1, p2, p3) = (format!("{base}-1"), format!("{base}-2"), format!("{base}-3"));

    // All free: all taken, re-entrant, released together.
    let multi = InterProcessMultiLock::from_paths(&client, &[&p1, &p2, &p3]).unwrap();
    multi.acquire().await.unwrap();
    assert!(multi.is_acquired_in_this_process());
    for p in [&p1, &p2, &p3] {
        assert_eq!(support::sorted_children(&obs, p).await.len(), 1, "{p} held");
    }
    multi.release().await.unwrap();
    assert!(!multi.is_acquired_in_this_process());

    // The third is held elsewhere: nothing is kept, and one deadline covers the set.
    let blocker = InterProcessMutex::new(&other, &p3).unwrap();
    blocker.acquire().await.unwrap();
    let started = Instant::now();
    assert!(!multi.acquire_timeout(Duration::from_millis(500)).await.unwrap());
    assert!(started.elapsed() < Duration::from_secs(3), "one deadline for the whole set");
    for p in [&p1, &p2] {
        assert!(
            support::eventually_no_children(&connect, p, Duration::from_secs(5)).await.is_empty(),
            "{p} given back"
        );
    }
    // Cancelled while waiting for the third: the first two are given back.
    assert!(tokio::time::timeout(Duration::from_millis(300), multi.acquire()).await.is_err());
    for p in [&p1, &p2] {
        assert!(
            support::eventually_no_children(&connect, p, Duration::from_secs(5)).await.is_empty(),
            "{p} given back after cancellation"
        );
    }
    blocker.release().await.unwrap();

    // A lock that fails to lock: the good one taken before it is released (Curator item 14).
    let good = InterProcessMutex::new(&client, &p1).unwrap();
    let failing =
        Faulty { inner: InterProcessMutex::new(&client, &p2).unwrap(), fail_acquire: true, fail_release: false };
    let multi = InterProcessMultiLock::new(vec![Box::new(good.clone()), Box::new(failing)]).unwrap();
    assert_eq!(multi.acquire().await.map_err(|e| e.kind()), Err(ErrorKind::LockLost));
    assert!(!good.is_acquired_in_this_process());

    // Releases that fail: every lock is attempted, every failure reported (Curator item 13).
    let bad1 = Faulty { inner: InterProcessMutex::new(&client, &p2).unwrap(), fail_acquire: false, fail_release: true };
    let bad2 = Faulty { inner: InterProcessMutex::new(&client, &p3).unwrap(), fail_acquire: false, fail_release: true };
    let multi = InterProcessMultiLock::new(vec![Box::new(good.clone()), Box::new(bad1), Box::new(bad2)]).unwrap();
    multi.acquire().await.unwrap();
    match multi.release().await {
        Err(zk_curator::Error::Multiple { errors }) => assert_eq!(errors.len(), 2, "{errors:?}"),
        other => panic!("two failures expected: {other:?}"),
    }
    assert!(!good.is_acquired_in_this_process(), "the good lock was released despite the others");
    assert!(InterProcessMultiLock::new(Vec::new()).map(|_| ()).map_err(|e| e.kind()) == Err(ErrorKind::BadArgument));
}

/// A multi-lock whose first part is on a client behind `proxy` and whose second part is held by
/// `blocker` (on another client) is acquired in a task; returns the task, which yields the
/// acquire's result, the state and node of every part's hold when the acquire returned, and the result of
/// releasing the set (from the acquiring task, whose holds they are).
async fn multi_lock_waiting_on_its_second_part(
    obs: &zookeeper_client::Client,
    proxied: &zk_curator::CuratorClient,
    direct: &zk_curator::CuratorClient,
    blocker: &InterProcessMutex,
    first: &str,
    second: &str,
) -> (
    InterProcessMutex,
    tokio::task::JoinHandle<(zk_curator::Result<()>, Vec<(HoldState, String)>, Option<zk_curator::Result<()>>)>,
) {
    blocker.acquire().await.unwrap();
    let part_b = InterProcessMutex::new(direct, second).unwrap();
    let multi = InterProcessMultiLock::new(vec![
        Box::new(InterProcessMutex::new(proxied, first).unwrap()),
        Box::new(part_b.clone()),
    ])
    .unwrap();
    let task = crate::support::spawn(async move {
        let result = multi.acquire().await;
        let states = multi
            .holds_of(HolderId::current())
            .iter()
            .map(|hold| (hold.hold_state(), hold.path().to_string()))
            .collect();
        let released = match result {
            Ok(()) => Some(multi.release().await),
            Err(_) => None,
        };
        (result, states, released)
    });
    support::eventually(Duration::from_secs(30), "the multi-lock waits for its second part", || async {
        support::sorted_children(obs, first).await.len() == 1 && support::sorted_children(obs, second).await.len() == 2
    })
    .await;
    (part_b, task)
}

/// The first part is suspended (its link cut, well within its session) when the second is
/// granted: the multi-lock returns only once every part is Held again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_lock_returns_only_when_every_part_is_held() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let proxy = FaultProxy::start(&connect).await.expect("proxy");
    let proxied = support::riding_client(&proxy.connect_string()).await;
    let direct = support::client(&connect).await;
    let other = support::client(&connect).await;
    let base = support::unique_path("multi-suspended");
    let (first, second) = (format!("{base}-a"), format!("{base}-b"));
    let blocker = InterProcessMutex::new(&other, &second).unwrap();
    let (part_b, task) =
        multi_lock_waiting_on_its_second_part(&obs, &proxied, &direct, &blocker, &first, &second).await;

    support::cut_off(&proxy, &proxied).await;
    blocker.release().await.unwrap();
    // (A multi-lock that does not wait for its first part returns, and releases, at once.)
    support::eventually(Duration::from_secs(30), "the second part is taken", || async {
        part_b.is_acquired_in_this_process() || task.is_finished()
    })
    .await;
    // Gives a multi-lock that does not look at its first part again time to return while that
    // part is still suspended (the property does not depend on this pause).
    tokio::time::sleep(Duration::from_millis(300)).await;
    proxy.set_mode(ProxyMode::Pass);

    let (result, states, released) = support::join("the multi-lock acquire", Duration::from_secs(60), task).await;
    result.unwrap();
    let states: Vec<HoldState> = states.into_iter().map(|(state, _)| state).collect();
    assert_eq!(states, [HoldState::Held, HoldState::Held], "every part Held when acquire returned");
    released.expect("acquired").unwrap();
}

/// The first part's session ends (its link cut for longer than the session) while the multi-lock
/// waits for the second: the lost part is never handed out; the set is taken again, on the new
/// session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_lock_retakes_a_part_lost_while_it_waited() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let proxy = FaultProxy::start(&connect).await.expect("proxy");
    let session = Duration::from_secs(1);
    let proxied = support::client_with_timeouts(&proxy.connect_string(), session, Duration::from_millis(500)).await;
    let direct = support::client(&connect).await;
    let other = support::client(&connect).await;
    let base = support::unique_path("multi-lost");
    let (first, second) = (format!("{base}-a"), format!("{base}-b"));
    let blocker = InterProcessMutex::new(&other, &second).unwrap();
    let (_part_b, task) =
        multi_lock_waiting_on_its_second_part(&obs, &proxied, &direct, &blocker, &first, &second).await;
    let lost_node = support::sorted_children(&obs, &first).await;

    let old_session = proxied.session_id();
    proxy.set_mode(ProxyMode::Cut);
    // Long enough for the server to expire the 1 s session.
    tokio::time::sleep(session * 3).await;
    proxy.set_mode(ProxyMode::Pass);
    support::session_replaced(&proxied, old_session).await;
    blocker.release().await.unwrap();

    let (result, states, released) = support::join("the multi-lock acquire", Duration::from_secs(60), task).await;
    result.unwrap();
    let first_node = states[0].1.clone();
    let states: Vec<HoldState> = states.into_iter().map(|(state, _)| state).collect();
    assert_eq!(states, [HoldState::Held, HoldState::Held], "every part Held when acquire returned");
    assert!(
        !lost_node.iter().any(|lost| first_node.ends_with(lost.as_str())),
        "the first part was taken again on the new session: {first_node} (lost: {lost_node:?})"
    );
    released.expect("acquired").unwrap();
}

/// The session of `acquire_many`'s first lease ends while it waits for the second: the lost
/// lease is never handed out; the leases are taken again, on the new session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_leases_are_handed_out_only_when_each_is_held() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let proxy = FaultProxy::start(&connect).await.expect("proxy");
    let session = Duration::from_secs(1);
    let proxied = support::client_with_timeouts(&proxy.connect_string(), session, Duration::from_millis(500)).await;
    let other = support::client(&connect).await;
    let path = support::unique_path("semaphore-many-lost");
    let leases_path = format!("{path}/leases");
    let blocker = InterProcessSemaphoreV2::new(&other, &path, 2).unwrap().acquire().await.unwrap();
    let semaphore = InterProcessSemaphoreV2::new(&proxied, &path, 2).unwrap();
    let task = crate::support::spawn(async move { semaphore.acquire_many(2).await });
    support::eventually(Duration::from_secs(30), "the second lease waits", || async {
        support::sorted_children(&obs, &leases_path).await.len() == 3
    })
    .await;
    let before: Vec<String> = support::sorted_children(&obs, &leases_path).await;

    let old_session = proxied.session_id();
    proxy.set_mode(ProxyMode::Cut);
    // Long enough for the server to expire the 1 s session.
    tokio::time::sleep(session * 3).await;
    proxy.set_mode(ProxyMode::Pass);
    support::session_replaced(&proxied, old_session).await;
    // (A call that does not look at its first lease again has returned by now.)
    support::eventually(Duration::from_secs(30), "a lease is taken on the new session", || async {
        support::sorted_children(&obs, &leases_path).await.len() >= 2 || task.is_finished()
    })
    .await;
    blocker.release().await.unwrap();

    let leases = support::join("acquire_many", Duration::from_secs(60), task).await.unwrap();
    let states: Vec<HoldState> = leases.iter().map(|lease| lease.hold_state()).collect();
    assert_eq!(states, [HoldState::Held, HoldState::Held], "every lease Held when acquire_many returned");
    for lease in &leases {
        assert!(
            !before.iter().any(|old| lease.node_path().ends_with(old.as_str())),
            "{} is a lease of the old session",
            lease.node_path()
        );
    }
    zk_curator::locks::return_all(leases).await.unwrap();
    assert!(support::sorted_children(&obs, &format!("{path}/leases")).await.is_empty(), "no lease left behind");
}

/// The parts are on two clients. The multi-lock waits for its second part, suspended, and its
/// first part — Held when it was looked at — is cut off meanwhile: when the second part is Held
/// again the first is looked at again, and the set is handed out only once both are Held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_lock_looks_again_at_parts_it_found_held_before_it_waited() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let (proxy_a, proxy_b) = (FaultProxy::start(&connect).await.unwrap(), FaultProxy::start(&connect).await.unwrap());
    let client_a = support::riding_client(&proxy_a.connect_string()).await;
    let client_b = support::riding_client(&proxy_b.connect_string()).await;
    let direct = support::client(&connect).await;
    let other = support::client(&connect).await;
    let base = support::unique_path("multi-two-clients");
    let (first, second, third) = (format!("{base}-a"), format!("{base}-b"), format!("{base}-c"));
    let blocker = InterProcessMutex::new(&other, &third).unwrap();
    blocker.acquire().await.unwrap();
    let part_c = InterProcessMutex::new(&direct, &third).unwrap();
    let multi = InterProcessMultiLock::new(vec![
        Box::new(InterProcessMutex::new(&client_a, &first).unwrap()),
        Box::new(InterProcessMutex::new(&client_b, &second).unwrap()),
        Box::new(part_c.clone()),
    ])
    .unwrap();
    let task = crate::support::spawn(async move {
        let result = multi.acquire().await;
        let states: Vec<HoldState> = multi.holds_of(HolderId::current()).iter().map(|hold| hold.hold_state()).collect();
        let released = match result {
            Ok(()) => Some(multi.release().await),
            Err(_) => None,
        };
        (result, states, released)
    });
    support::eventually_queued(&obs, &third, 2, "the multi-lock waits for its third part").await;

    // The second part is suspended when the third is granted: the multi-lock waits for it.
    support::cut_off(&proxy_b, &client_b).await;
    blocker.release().await.unwrap();
    support::eventually(Duration::from_secs(30), "the third part is taken", || async {
        part_c.is_acquired_in_this_process() || task.is_finished()
    })
    .await;
    // The first part, found Held, is cut off while the multi-lock waits for the second.
    support::cut_off(&proxy_a, &client_a).await;
    proxy_b.set_mode(ProxyMode::Pass);
    support::eventually(Duration::from_secs(30), "the second part's client is back", || async {
        client_b.connection_state() != zk_curator::ConnectionState::Suspended
    })
    .await;
    // Gives a multi-lock that does not look at its first part again time to return while that
    // part is suspended (the property does not depend on this pause).
    tokio::time::sleep(Duration::from_millis(300)).await;
    proxy_a.set_mode(ProxyMode::Pass);

    let (result, states, released) = support::join("the multi-lock acquire", Duration::from_secs(60), task).await;
    result.unwrap();
    assert_eq!(states, [HoldState::Held; 3], "every part Held when acquire returned");
    released.expect("acquired").unwrap();
}

/// `acquire_many_timeout` with a zero timeout (one attempt) that gets its first lease but not
/// its second gives the first back and waits for its delete (the few ms of slack counted from
/// the give-back, not from the start of the call): the caller told "not acquired" finds no lease
/// of its own, even where each round trip takes a few ms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_attempt_acquire_many_leaves_no_lease_when_it_returns() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let proxy = FaultProxy::start(&connect).await.unwrap();
    let slow = support::client(&proxy.connect_string()).await;
    let other = support::client(&connect).await;
    let path = support::unique_path("semaphore-many-one-attempt");
    let leases_path = format!("{path}/leases");
    let taken = InterProcessSemaphoreV2::new(&other, &path, 2).unwrap().acquire().await.unwrap();
    let semaphore = InterProcessSemaphoreV2::new(&slow, &path, 2).unwrap();
    // A few ms each way: one lease's attempt (several round trips) outlasts the slack, one
    // delete does not.
    proxy.set_latency(Latency::fixed(Duration::from_millis(2)));
    let only_theirs = [support::node_name(taken.node_path())];
    // Up to three tries: on a loaded machine one delete may outlast the slack too (then it goes
    // on in the background). Counting the slack from the call's start leaves the node every time.
    let mut lefts = Vec::new();
    for _ in 0..3 {
        assert!(semaphore.acquire_many_timeout(2, Duration::ZERO).await.unwrap().is_none(), "one lease is taken");
        let left = support::sorted_children(&obs, &leases_path).await;
        if left == only_theirs {
            break;
        }
        lefts.push(left);
        support::eventually(Duration::from_secs(10), "the background delete", || async {
            support::sorted_children(&obs, &leases_path).await == only_theirs
        })
        .await;
    }
    assert!(lefts.len() < 3, "only the other client's lease is left when the call returns: {lefts:?}");
    proxy.set_latency(Latency::NONE);
    taken.release().await.unwrap();
}

/// The connection of a waiting acquirer breaks (cut, then replies dropped while it creates its
/// nodes) without its session expiring: once the connection is back it gets its lease, and its
/// live session keeps exactly one lease node and no internal-mutex node — nothing duplicated or
/// forgotten by a retried create (CURATOR-462), nothing left after the release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_loss_leaves_no_orphan_on_a_live_session() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let proxy = FaultProxy::start(&connect).await.unwrap();
    let holder = support::client(&connect).await;
    let path = support::unique_path("semaphore-connection-loss");
    let (leases_path, locks_path) = (format!("{path}/leases"), format!("{path}/locks"));
    for mode in [ProxyMode::Cut, ProxyMode::DropReplies] {
        let client =
            support::client_with_timeouts(&proxy.connect_string(), Duration::from_secs(30), Duration::from_secs(3))
                .await;
        let session = client.session_id();
        let held = InterProcessSemaphoreV2::new(&holder, &path, 1).unwrap().acquire().await.unwrap();
        let semaphore = InterProcessSemaphoreV2::new(&client, &path, 1).unwrap();
        let waiter = match mode {
            ProxyMode::Cut => {
                // Cut while it waits, holding the internal mutex, with its lease node queued.
                let waiter = crate::support::spawn(async move { semaphore.acquire().await });
                support::eventually_queued(&obs, &leases_path, 2, "the waiter's lease node").await;
                proxy.set_mode(mode);
                waiter
            }
            _ => {
                // Replies dropped while it sends its creates: the nodes exist, the client never
                // heard of them.
                proxy.set_mode(mode);
                crate::support::spawn(async move { semaphore.acquire().await })
            }
        };
        tokio::time::sleep(Duration::from_millis(1500)).await;
        proxy.set_mode(ProxyMode::Pass);
        support::eventually(Duration::from_secs(20), "reconnected", || async { client.is_connected() }).await;
        assert_eq!(client.session_id(), session, "{mode:?}: the session survived");
        held.release().await.unwrap();
        let lease = support::join("the waiter's lease", Duration::from_secs(20), waiter).await.unwrap();
        assert_eq!(lease.hold_state(), HoldState::Held);
        let leases = support::sorted_children(&obs, &leases_path).await;
        assert_eq!(leases, vec![lease.node_name().to_string()], "{mode:?}: one lease node, ours");
        let mut ours_in_locks = 0;
        for _ in 0..50 {
            ours_in_locks = 0;
            for child in support::sorted_children(&obs, &locks_path).await {
                let stat = support::stat(&obs, &format!("{locks_path}/{child}")).await;
                ours_in_locks += usize::from(stat.is_some_and(|s| s.ephemeral_owner == session));
            }
            if ours_in_locks == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(ours_in_locks, 0, "{mode:?}: an internal-mutex node of the live session was left behind");
        lease.release().await.unwrap();
        assert!(support::eventually_no_children(&connect, &leases_path, Duration::from_secs(10)).await.is_empty());
        client.close().await;
    }
}
