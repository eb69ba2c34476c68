//! `LeaderLatch` against a real ZooKeeper: one leader at a time, hand-over on close, node names and
//! data as Curator's, participants, timed waits, session expiry, an operator's delete, and a real
//! Curator `LeaderLatch` on the same path.

use crate::support;

use crate::support::curator_hold::CuratorHold;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_curator::leader::{LatchState, LeaderLatch, Participant};
use zk_curator::locks::HoldState;

const WITHIN: Duration = Duration::from_secs(10);

/// `_c_<uuid>-latch-<10 digits>`.
fn assert_latch_name(name: &str) {
    let rest = name.strip_prefix("_c_").unwrap_or_else(|| panic!("{name}: no _c_ prefix"));
    let (uuid, seq) = rest.split_once("-latch-").unwrap_or_else(|| panic!("{name}: no -latch-"));
    assert_eq!(uuid.len(), 36, "{name}: uuid");
    assert_eq!(uuid.matches('-').count(), 4, "{name}: uuid");
    assert_eq!(seq.len(), 10, "{name}: sequence");
    assert!(seq.bytes().all(|b| b.is_ascii_digit()), "{name}: sequence");
}

fn leaders(latches: &[&LeaderLatch]) -> Vec<String> {
    latches.iter().filter(|l| l.has_leadership()).map(|l| l.id().to_string()).collect()
}

/// Polls every latch's `has_leadership` every millisecond in the background and remembers the
/// largest number reporting leadership at once.
struct Checker {
    max: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Duration>,
}

/// What the checker saw.
struct Seen {
    /// The most latches reporting leadership at once.
    max: usize,
    /// The longest stretch with more than one reporting leadership.
    longest_overlap: Duration,
}

impl Checker {
    fn start(latches: Vec<Arc<LeaderLatch>>) -> Self {
        let max = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let task = {
            let (max, stop) = (max.clone(), stop.clone());
            crate::support::spawn(async move {
                let (mut since, mut longest) = (None, Duration::ZERO);
                while !stop.load(Ordering::SeqCst) {
                    let now = latches.iter().filter(|l| l.has_leadership()).count();
                    max.fetch_max(now, Ordering::SeqCst);
                    if now > 1 {
                        let start = *since.get_or_insert_with(Instant::now);
                        longest = longest.max(start.elapsed());
                    } else {
                        since = None;
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                longest
            })
        };
        Self { max, stop, task }
    }

    async fn finish(self) -> Seen {
        self.stop.store(true, Ordering::SeqCst);
        let longest_overlap = support::join("checker", WITHIN, self.task).await;
        Seen { max: self.max.load(Ordering::SeqCst), longest_overlap }
    }
}

async fn exactly_one_leader(latches: &[&LeaderLatch], what: &str) -> String {
    support::eventually(WITHIN, what, || async { leaders(latches).len() == 1 }).await;
    let now = leaders(latches);
    assert_eq!(now.len(), 1, "{what}: {now:?}");
    now[0].clone()
}

// ---------------------------------------------------------------------------------------------
// (1) one leader at a time, hand-over, node names and data, nothing left
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_hands_over_on_close() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("latch-handover");
    let mut clients = Vec::new();
    let mut latches = Vec::new();
    for id in ["p0", "p1", "p2"] {
        let client = support::client(&connect).await;
        latches.push(Arc::new(LeaderLatch::new(&client, &path, id).unwrap()));
        clients.push(client);
    }
    assert_eq!(latches[0].state(), LatchState::Latent);
    assert!(!latches[0].has_leadership());
    // Started one after the other, so the order of the queue is known.
    for (n, latch) in latches.iter().enumerate() {
        latch.start().unwrap();
        support::eventually_queued(&obs, &path, n + 1, "the latch queued its node").await;
    }
    assert!(latches[0].start().is_err(), "a latch starts once");
    let checker = Checker::start(latches.clone());

    // Node names and data.
    let names = support::sorted_children(&obs, &path).await;
    let mut ids = Vec::new();
    for name in &names {
        assert_latch_name(name);
        let (data, stat) = obs.get_data(&format!("{path}/{name}")).await.unwrap();
        assert_ne!(stat.ephemeral_owner, 0, "{name} is ephemeral");
        ids.push(String::from_utf8(data).unwrap());
    }
    ids.sort();
    assert_eq!(ids, ["p0", "p1", "p2"], "node data is the participant id");

    let refs: Vec<&LeaderLatch> = latches.iter().map(|l| l.as_ref()).collect();
    let mut order = Vec::new();
    let mut tokens = Vec::new();
    for round in 0..3 {
        let leader = exactly_one_leader(&refs, "one leader").await;
        let latch = latches.iter().find(|l| l.id() == leader).unwrap();
        latch.await_leadership().await.unwrap();
        let hold = latch.hold().expect("the leader's hold");
        assert_eq!(hold.hold_state(), HoldState::Held);
        assert_eq!(latch.fencing_token(), Some(hold.fencing_token()));
        assert_latch_name(hold.name());
        tokens.push(hold.fencing_token());
        // Stays leader while nothing happens.
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(leaders(&refs), vec![leader.clone()], "round {round}");
        latch.close().await.unwrap();
        assert_eq!(latch.state(), LatchState::Closed);
        assert!(!latch.has_leadership());
        assert_eq!(hold.hold_state(), HoldState::Lost, "closing ends the hold");
        assert!(!support::exists(&obs, hold.path()).await, "close deleted the leader's node");
        order.push(leader);
    }
    assert_eq!(order, ["p0", "p1", "p2"], "leadership passes in queue order");
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "fencing tokens increase: {tokens:?}");
    // A leader that closes stops reporting before its node goes: strictly one at a time.
    assert_eq!(checker.finish().await.max, 1, "never two leaders at once");
    assert!(support::sorted_children(&obs, &path).await.is_empty(), "no node left after every latch closed");
    // Closing again, and waiting on a closed latch.
    latches[0].close().await.unwrap();
    assert!(latches[0].await_leadership().await.is_err());
}

/// Closing a latch that is queued (not leader) deletes its node and leaves the leader alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_a_queued_latch_removes_its_node() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("latch-close-queued");
    let client = support::client(&connect).await;
    let a = LeaderLatch::new(&client, &path, "a").unwrap();
    let b = LeaderLatch::new(&client, &path, "b").unwrap();
    a.start().unwrap();
    a.await_leadership().await.unwrap();
    b.start().unwrap();
    support::eventually_queued(&obs, &path, 2, "b queued").await;
    b.close().await.unwrap();
    let left = support::children_become(&obs, &path, &[a.hold().unwrap().name().to_string()], WITHIN).await;
    assert_eq!(left.len(), 1, "only the leader's node is left: {left:?}");
    assert!(a.has_leadership());
    a.close().await.unwrap();
    assert!(support::sorted_children(&obs, &path).await.is_empty());
}

// ---------------------------------------------------------------------------------------------
// (2) leader() and participants() agree across participants
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn participants_agree() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("latch-participants");
    let a = support::client(&connect).await;
    let b = support::client(&connect).await;
    let latches = [
        LeaderLatch::new(&a, &path, "alpha").unwrap(),
        LeaderLatch::new(&b, &path, "beta").unwrap(),
        LeaderLatch::new(&a, &path, "gamma").unwrap(),
    ];
    assert_eq!(latches[0].leader().await.unwrap(), None, "nobody takes part yet");
    for (n, latch) in latches.iter().enumerate() {
        latch.start().unwrap();
        support::eventually_queued(&obs, &path, n + 1, "queued").await;
    }
    latches[0].await_leadership().await.unwrap();
    let expected = vec![
        Participant { id: "alpha".into(), is_leader: true },
        Participant { id: "beta".into(), is_leader: false },
        Participant { id: "gamma".into(), is_leader: false },
    ];
    for latch in &latches {
        assert_eq!(latch.participants().await.unwrap(), expected, "seen by {}", latch.id());
        assert_eq!(latch.leader().await.unwrap(), Some(expected[0].clone()));
    }
    latches[0].close().await.unwrap();
    latches[1].await_leadership().await.unwrap();
    for latch in &latches {
        let seen = latch.participants().await.unwrap();
        assert_eq!(
            seen,
            expected[1..]
                .iter()
                .cloned()
                .map(|mut p| {
                    p.is_leader = p.id == "beta";
                    p
                })
                .collect::<Vec<_>>()
        );
        assert_eq!(latch.leader().await.unwrap().map(|p| p.id), Some("beta".to_string()));
    }
    latches[1].close().await.unwrap();
    latches[2].close().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// (3) timed waits and dropped waits
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timed_wait_gives_up_and_a_dropped_wait_changes_nothing() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("latch-timeout");
    let client = support::client(&connect).await;
    let leader = LeaderLatch::new(&client, &path, "leader").unwrap();
    let other = LeaderLatch::new(&client, &path, "other").unwrap();
    leader.start().unwrap();
    leader.await_leadership().await.unwrap();
    other.start().unwrap();
    support::eventually_queued(&obs, &path, 2, "other queued").await;

    for timeout in [Duration::ZERO, Duration::from_millis(300), Duration::from_secs(1)] {
        let started = Instant::now();
        assert!(!other.await_leadership_timeout(timeout).await.unwrap());
        let took = started.elapsed();
        assert!(took < timeout + Duration::from_millis(500), "timeout {timeout:?} took {took:?}");
    }
    // A dropped wait (select!, timeout) leaves the latch started and queued.
    let dropped = tokio::time::timeout(Duration::from_millis(200), other.await_leadership()).await;
    assert!(dropped.is_err());
    assert_eq!(other.state(), LatchState::Started);
    assert_eq!(support::sorted_children(&obs, &path).await.len(), 2, "both nodes are still there");
    // ... and it still takes over once the leader closes.
    leader.close().await.unwrap();
    assert!(other.await_leadership_timeout(WITHIN).await.unwrap());
    other.close().await.unwrap();
    assert!(support::sorted_children(&obs, &path).await.is_empty());

    let never_started = LeaderLatch::new(&client, &path, "idle").unwrap();
    assert!(never_started.await_leadership_timeout(Duration::from_millis(10)).await.is_err(), "not started");
}

/// When the leader's node is deleted from outside (an operator, or the server expiring a session
/// that is still connected), the old leader and the next one each learn it from their own
/// connection: the next one may report leadership a moment before the old one has processed its
/// event. Nothing in ZooKeeper can order those two notifications; the fencing token (strictly
/// larger for the new leader) is what protects a shared resource then. The checker bounds the
/// overlap of the reports instead of forbidding it — generously: it is a hang guard (an old
/// leader that never steps down), not a timing claim about the machine (161 ms seen here). (A partition that ends in expiry is the case
/// the hold model orders strictly: the old leader gives up at 0.85 of the session timeout, before
/// the server can expire it — see lock_safety.rs for the mutex.)
const OVERLAP_BOUND: Duration = Duration::from_secs(5);

fn assert_overlap_bounded(seen: Seen, scenario: &str) {
    println!("{scenario}: at most {} leaders at once, longest overlap {:?}", seen.max, seen.longest_overlap);
    assert!(seen.max <= 2, "{scenario}: {} leaders at once", seen.max);
    assert!(seen.longest_overlap < OVERLAP_BOUND, "{scenario}: two leaders for {:?}", seen.longest_overlap);
}

// ---------------------------------------------------------------------------------------------
// (4) session expiry of the leader
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_leader_steps_down_and_queues_again() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("latch-expiry");
    let a = support::client(&connect).await;
    let b = support::client(&connect).await;
    let la = Arc::new(LeaderLatch::new(&a, &path, "a").unwrap());
    let lb = Arc::new(LeaderLatch::new(&b, &path, "b").unwrap());
    la.start().unwrap();
    la.await_leadership().await.unwrap();
    lb.start().unwrap();
    support::eventually_queued(&obs, &path, 2, "b queued").await;
    let checker = Checker::start(vec![la.clone(), lb.clone()]);

    for round in 0..2 {
        let (leader, follower, client) = if round == 0 { (&la, &lb, &a) } else { (&lb, &la, &b) };
        let hold = leader.hold().expect("the leader's hold");
        let old_session = client.session_id();
        zk_curator::testing::expire_session(&connect, client).await.expect("expire the leader's session");
        // The follower takes over; the old leader never reports leadership meanwhile.
        assert!(follower.await_leadership_timeout(WITHIN).await.unwrap(), "round {round}: follower leads");
        // The old leader learns of the expiry on its own connection, possibly a moment after the
        // follower saw its node deleted (see OVERLAP_BOUND).
        support::eventually(OVERLAP_BOUND, "the expired leader steps down", || async { !leader.has_leadership() })
            .await;
        support::eventually(WITHIN, "the old hold is lost", || async { hold.hold_state() == HoldState::Lost }).await;
        // The expired one queues again on its new session.
        support::eventually(WITHIN, "new session", || async { client.session_id() != old_session }).await;
        support::eventually(WITHIN, "the expired leader queued again", || async {
            let children = support::sorted_children(&obs, &path).await;
            let mut owners = Vec::new();
            for child in &children {
                if let Ok((data, stat)) = obs.get_data(&format!("{path}/{child}")).await {
                    owners.push((String::from_utf8(data).unwrap(), stat.ephemeral_owner));
                }
            }
            owners.len() == 2 && owners.contains(&(leader.id().to_string(), client.session_id()))
        })
        .await;
        assert_eq!(leaders(&[&la, &lb]), vec![follower.id().to_string()], "round {round}");
        assert_eq!(
            follower.participants().await.unwrap().iter().map(|p| (p.id.as_str(), p.is_leader)).collect::<Vec<_>>(),
            vec![(follower.id(), true), (leader.id(), false)]
        );
    }
    assert_overlap_bounded(checker.finish().await, "expiry");
    la.close().await.unwrap();
    lb.close().await.unwrap();
    assert!(support::eventually_no_children(&connect, &path, WITHIN).await.is_empty());
}

// ---------------------------------------------------------------------------------------------
// (5) an operator deletes the leader's node
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_leader_node_steps_down() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("latch-deleted");
    let a = support::client(&connect).await;
    let b = support::client(&connect).await;
    let la = Arc::new(LeaderLatch::new(&a, &path, "a").unwrap());
    let lb = Arc::new(LeaderLatch::new(&b, &path, "b").unwrap());
    la.start().unwrap();
    la.await_leadership().await.unwrap();
    lb.start().unwrap();
    support::eventually_queued(&obs, &path, 2, "b queued").await;
    let checker = Checker::start(vec![la.clone(), lb.clone()]);

    // The leader alone: deleting its node makes it queue again, and (alone in line) lead again.
    let hold = la.hold().unwrap();
    obs.delete(hold.path(), None).await.expect("operator delete");
    assert!(lb.await_leadership_timeout(WITHIN).await.unwrap(), "b leads");
    support::eventually(OVERLAP_BOUND, "a steps down", || async { !la.has_leadership() }).await;
    assert_eq!(hold.hold_state(), HoldState::Lost);
    support::eventually_queued(&obs, &path, 2, "a queued again").await;
    assert_eq!(leaders(&[&la, &lb]), vec!["b".to_string()]);

    // With b closed, a (re-queued) leads again with a new node and a larger token.
    let b_token = lb.fencing_token().unwrap();
    lb.close().await.unwrap();
    assert!(la.await_leadership_timeout(WITHIN).await.unwrap());
    assert_ne!(la.hold().unwrap().path(), hold.path());
    assert!(la.fencing_token().unwrap() > b_token);

    // Alone: delete its node; it re-queues and leads again.
    let hold = la.hold().unwrap();
    obs.delete(hold.path(), None).await.expect("operator delete");
    support::eventually(WITHIN, "a leads again on a new node", || async {
        la.hold().is_some_and(|h| h.path() != hold.path()) && la.has_leadership()
    })
    .await;
    assert_overlap_bounded(checker.finish().await, "operator delete");
    la.close().await.unwrap();
    assert!(support::sorted_children(&obs, &path).await.is_empty());
}

// ---------------------------------------------------------------------------------------------
// (6) a real Curator LeaderLatch on the same path
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interop_with_curator_latch() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("latch-interop");
    let client = support::client(&connect).await;
    let rust = LeaderLatch::new(&client, &path, "rust").unwrap();
    rust.start().unwrap();
    rust.await_leadership().await.unwrap();

    // Curator queues behind the Rust leader.
    let mut curator = CuratorHold::latch(&connect, &path, 3, "java");
    support::eventually(Duration::from_secs(120), "the Curator latch queued", || async {
        support::sorted_children(&obs, &path).await.len() == 2
    })
    .await;
    for name in support::sorted_children(&obs, &path).await {
        assert_latch_name(&name);
    }
    let ids = |ps: Vec<Participant>| ps.into_iter().map(|p| (p.id, p.is_leader)).collect::<Vec<_>>();
    assert_eq!(ids(rust.participants().await.unwrap()), [("rust".into(), true), ("java".into(), false)]);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(rust.has_leadership(), "still the leader");

    // The Rust leader closes: Curator leads; a new Rust latch queues behind it.
    rust.close().await.unwrap();
    let acquired = curator.expect("ACQUIRED", Duration::from_secs(30)).await;
    println!("Curator: {acquired}");
    let rust2 = LeaderLatch::new(&client, &path, "rust2").unwrap();
    rust2.start().unwrap();
    support::eventually_queued(&obs, &path, 2, "rust2 queued behind Curator").await;
    assert_eq!(ids(rust2.participants().await.unwrap()), [("java".into(), true), ("rust2".into(), false)]);
    assert!(!rust2.await_leadership_timeout(Duration::from_millis(1000)).await.unwrap(), "Curator leads");
    // Curator closes after its 3 s: the Rust latch leads (not before: checked just above while
    // Curator held it, without timing the JVM).
    curator.expect("RELEASED", Duration::from_secs(30)).await;
    assert!(rust2.await_leadership_timeout(WITHIN).await.unwrap());
    let _ = tokio::time::timeout(WITHIN, curator.child.wait()).await;
    rust2.close().await.unwrap();
    assert!(support::sorted_children(&obs, &path).await.is_empty());
}

/// `start()` outside a runtime is a typed error, not a panic; a latch dropped outside any
/// runtime (started or not) does not panic either.
#[test]
fn start_and_drop_outside_a_runtime_never_panic() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let (server, client) = rt.block_on(async {
        let server = support::server().await;
        let client = support::client(&server.connect_string()).await;
        (server, client)
    });
    let path = support::unique_path("latch-no-runtime");
    let idle = LeaderLatch::new(&client, &path, "idle").unwrap();
    let err = idle.start().expect_err("no runtime here");
    assert!(matches!(&err, zk_curator::Error::InvalidArgument { name: "runtime", .. }), "{err:?}");
    assert_eq!(idle.state(), zk_curator::leader::LatchState::Latent, "still unstarted");
    let running = {
        let _entered = rt.enter();
        let latch = LeaderLatch::new(&client, &path, "running").unwrap();
        latch.start().unwrap();
        latch
    };
    rt.block_on(running.await_leadership()).unwrap();
    drop(idle);
    drop(running);
    let connect = server.connect_string();
    assert!(rt.block_on(support::eventually_no_children(&connect, &path, WITHIN)).is_empty(), "the node is deleted");
    rt.block_on(client.close());
    drop(server);
}

/// The leadership stream reports each change in order (`Leader`, `Lost`, `NotLeader` when an
/// operator deletes the node, `Leader` again); a `NotifyLeader` close ends it with `NotLeader`, a
/// silent one without a word. Leader-guarded writes apply only while leading.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leadership_stream_close_modes_and_guarded_writes() {
    use zk_curator::leader::{CloseMode, LeadershipState};
    use zk_curator::Transaction;
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("latch-stream");
    let client = support::client(&connect).await;
    let target = support::unique_path("latch-guarded-target");
    client.create(&target).creating_parents_if_needed().await.unwrap();

    let a = LeaderLatch::new(&client, &path, "a").unwrap().with_close_mode(CloseMode::NotifyLeader);
    let b = LeaderLatch::new(&client, &path, "b").unwrap();
    let a_changes = a.leadership_changes();
    assert_eq!(a.leadership_state(), LeadershipState::NotLeader);
    a.start().unwrap();
    a.await_leadership().await.unwrap();
    assert_eq!(a.leadership_state(), LeadershipState::Leader);
    b.start().unwrap();
    support::eventually_queued(&obs, &path, 2, "b in line").await;

    // Guarded writes: the leader's applies; the follower's is refused without sending anything.
    a.guarded_write(Transaction::new().set_data(&target, b"a", None)).await.unwrap();
    let err = b.guarded_write(Transaction::new().set_data(&target, b"b", None)).await.unwrap_err();
    assert!(matches!(&err, zk_curator::Error::NotOwner { path: p, .. } if *p == path), "{err:?}");
    assert_eq!(obs.get_data(&target).await.unwrap().0, b"a");

    // An operator deletes a's node: b leads; a queues again.
    let node = a.hold().unwrap().path().to_string();
    let b_changes = b.leadership_changes();
    obs.delete(&node, None).await.unwrap();
    b.await_leadership_timeout(WITHIN).await.unwrap();
    support::eventually(WITHIN, "a queued again", || async { support::sorted_children(&obs, &path).await.len() == 2 })
        .await;
    // b closes silently: a leads again, then closes with NotifyLeader.
    b.close().await.unwrap();
    assert!(a.await_leadership_timeout(WITHIN).await.unwrap());
    a.close().await.unwrap();
    let collect = |mut s: zk_curator::leader::LeadershipStream| async move {
        let mut seen = Vec::new();
        while let Some(state) = tokio::time::timeout(WITHIN, s.next()).await.expect("the stream ends on close") {
            seen.push(state);
        }
        seen
    };
    use LeadershipState::*;
    assert_eq!(collect(a_changes).await, [NotLeader, Leader, Lost, NotLeader, Leader, NotLeader]);
    assert_eq!(collect(b_changes).await, [NotLeader, Leader], "a silent close says nothing");
    assert!(support::sorted_children(&obs, &path).await.is_empty());
}

/// A leader's `close()` polled once and dropped: the latch is closed, and the delete of its node
/// goes on in the background — the next participant leads while the first latch object lives.
async fn a_cancelled_close_hands_leadership_on_while_the_latch_lives() {
    let (server, clients) = support::server_and_clients(2).await;
    let path = support::unique_path("latch-cancelled-close");
    let first = LeaderLatch::new(&clients[0], &path, "first").unwrap();
    first.start().unwrap();
    assert!(first.await_leadership_timeout(WITHIN).await.unwrap(), "the first latch leads");
    let next = LeaderLatch::new(&clients[1], &path, "next").unwrap();
    next.start().unwrap();
    let obs = support::observer(&server.connect_string()).await;
    support::eventually_queued(&obs, &path, 2, "the next latch queued").await;

    // Polled once (it cannot finish in one poll: the background task deletes the node), dropped.
    assert!(futures::FutureExt::now_or_never(first.close()).is_none(), "close finished at its first poll");
    assert_eq!(first.state(), LatchState::Closed);
    assert!(
        next.await_leadership_timeout(WITHIN).await.unwrap(),
        "the next latch never led while the first, closed by a cancelled close(), still lives"
    );
    assert!(!first.has_leadership());
    assert_eq!(support::sorted_children(&obs, &path).await.len(), 1, "only the next latch's node is left");
    drop(first);
    next.close().await.unwrap();
}

#[tokio::test(flavor = "current_thread")]
async fn a_cancelled_close_hands_leadership_on_on_a_current_thread_runtime() {
    a_cancelled_close_hands_leadership_on_while_the_latch_lives().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_close_hands_leadership_on_on_a_multi_thread_runtime() {
    a_cancelled_close_hands_leadership_on_while_the_latch_lives().await;
}

/// A leader started on a runtime of its own: `close()` polled once and dropped, the latch dropped,
/// then that runtime shut down (before the delete ran, and while it is in flight) — the node is
/// still deleted, by the client's runtime, which lives on.
#[test]
fn a_cancelled_close_then_a_shut_down_runtime_still_frees_the_node() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let (server, client) = rt.block_on(async {
        let server = support::server().await;
        let client = support::client(&server.connect_string()).await;
        (server, client)
    });
    let connect = server.connect_string();
    for run_after_close in [Duration::ZERO, Duration::from_millis(1), Duration::from_millis(20)] {
        let path = support::unique_path("latch-runtime-gone");
        let own = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let latch = own.block_on(async {
            let latch = LeaderLatch::new(&client, &path, "short-lived").unwrap();
            latch.start().unwrap();
            assert!(latch.await_leadership_timeout(WITHIN).await.unwrap());
            assert!(futures::FutureExt::now_or_never(latch.close()).is_none());
            tokio::time::sleep(run_after_close).await;
            latch
        });
        drop(latch);
        drop(own);
        let left = rt.block_on(support::eventually_no_children(&connect, &path, WITHIN));
        assert!(left.is_empty(), "{run_after_close:?}: the leader's node outlived its runtime: {left:?}");
    }
    rt.block_on(client.close());
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leadership_changes_drain_as_a_stream_with_stream_combinators() {
    use futures::StreamExt;
    use zk_curator::leader::LeadershipState;

    let (_server, clients) = support::server_and_clients(1).await;
    let path = support::unique_path("latch-stream");
    let latch = LeaderLatch::new(&clients[0], &path, "a").unwrap();
    let changes = latch.leadership_changes();
    latch.start().unwrap();
    let terms = changes.filter(|s| std::future::ready(*s == LeadershipState::Leader)).take(1).collect::<Vec<_>>();
    let terms = tokio::time::timeout(WITHIN, terms).await.expect("leadership in time");
    assert_eq!(terms, [LeadershipState::Leader]);
    latch.close().await.unwrap();
}

/// A clone is the same participant (one node, one leadership); dropping a clone leaves the
/// participant running, closing through a clone closes it for every clone, and the node goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_latch_clone_is_the_same_participant_and_closing_one_closes_all() {
    let server = support::server().await;
    let connect = server.connect_string();
    let client = support::client(&connect).await;
    let obs = support::observer(&connect).await;
    let path = support::unique_path("latch-clone");
    let latch = LeaderLatch::new(&client, &path, "a").unwrap();
    let clone = latch.clone();
    latch.start().unwrap();
    assert!(clone.start().is_err(), "the clone is the started latch: it does not start twice");
    assert!(clone.await_leadership_timeout(WITHIN).await.unwrap(), "the clone sees the leadership");
    assert!(latch.has_leadership() && clone.has_leadership());
    assert_eq!(latch.fencing_token(), clone.fencing_token(), "one leadership");
    assert_eq!(support::sorted_children(&obs, &path).await.len(), 1, "one node for both handles");

    let third = clone.clone();
    drop(latch);
    assert_eq!(clone.state(), LatchState::Started, "dropping one clone leaves the latch started");
    assert!(clone.has_leadership(), "and leading");

    third.close().await.unwrap();
    assert_eq!(clone.state(), LatchState::Closed, "closing through one clone closes it for all");
    assert!(!clone.has_leadership());
    assert_eq!(support::sorted_children(&obs, &path).await, Vec::<String>::new(), "the node is gone");
    client.close().await;
}
