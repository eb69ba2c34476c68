//! `LeaderSelector`, the leadership state stream and the latch's close modes and guarded writes
//! at the edges, against a real ZooKeeper: lost holds, sessions replaced mid-call,
//! cancelled futures, silent links and flapping, absurd input, stream semantics.

use crate::support;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use zk_curator::leader::{CloseMode, LatchState, LeaderLatch, LeaderSelector, Leadership, LeadershipState};
use zk_curator::locks::HoldState;
use zk_curator::testing::{Direction, FaultProxy, Latency, ProxyMode};
use zk_curator::{CuratorClient, Error};

const WITHIN: Duration = Duration::from_secs(10);

/// How many works run now, the most ever at once, how many started and how many ended (returned
/// or cancelled).
#[derive(Default)]
struct Works {
    running: AtomicUsize,
    most: AtomicUsize,
    started: AtomicUsize,
    ended: AtomicUsize,
    cancelled: AtomicUsize,
    holds: parking_lot::Mutex<Vec<Arc<zk_curator::locks::Hold>>>,
}

/// Marks the end of a work when dropped (returned or cancelled at an await).
struct WorkGuard {
    works: Arc<Works>,
    returned: bool,
}

impl Works {
    fn begin(self: &Arc<Self>, leadership: &Leadership) -> WorkGuard {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        self.started.fetch_add(1, Ordering::SeqCst);
        self.holds.lock().push(leadership.hold().clone());
        WorkGuard { works: self.clone(), returned: false }
    }
    fn started(&self) -> usize {
        self.started.load(Ordering::SeqCst)
    }
    fn ended(&self) -> usize {
        self.ended.load(Ordering::SeqCst)
    }
    fn running(&self) -> usize {
        self.running.load(Ordering::SeqCst)
    }
    fn cancelled(&self) -> usize {
        self.cancelled.load(Ordering::SeqCst)
    }
    fn last_hold(&self) -> Option<Arc<zk_curator::locks::Hold>> {
        self.holds.lock().last().cloned()
    }
}

impl WorkGuard {
    fn returned(mut self) {
        self.returned = true;
    }
}

impl Drop for WorkGuard {
    fn drop(&mut self) {
        if !self.returned {
            self.works.cancelled.fetch_add(1, Ordering::SeqCst);
        }
        self.works.ended.fetch_add(1, Ordering::SeqCst);
        self.works.running.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A selector whose work runs forever (until cancelled).
fn forever(client: &CuratorClient, path: &str, id: &str, works: &Arc<Works>) -> LeaderSelector {
    let works = works.clone();
    LeaderSelector::new(client, path, id, move |leadership: Leadership| {
        let works = works.clone();
        async move {
            let guard = works.begin(&leadership);
            std::future::pending::<()>().await;
            guard.returned();
        }
    })
    .expect("a selector")
}

/// A selector whose work blocks its thread in `chunk` steps, awaiting between them, forever.
fn blocking(client: &CuratorClient, path: &str, id: &str, works: &Arc<Works>, chunk: Duration) -> LeaderSelector {
    let works = works.clone();
    LeaderSelector::new(client, path, id, move |leadership: Leadership| {
        let works = works.clone();
        async move {
            let _guard = works.begin(&leadership);
            loop {
                std::thread::sleep(chunk);
                tokio::task::yield_now().await;
            }
        }
    })
    .expect("a selector")
}

/// Whether the selector reports leadership in any of its three ways.
fn reports(selector: &LeaderSelector) -> bool {
    selector.has_leadership()
        || selector.leadership_state() == LeadershipState::Leader
        || selector.fencing_token().is_some()
}

// ---------------------------------------------------------------------------------------------
// cancelled futures
// ---------------------------------------------------------------------------------------------

/// `close()` is cancel safe and the work and node cleanup "continue in the background" — but a
/// caller that retries `close()` after a cancelled one (or closes from two tasks) must still be
/// told only once the work has stopped and the node is gone: `close` promises to wait for both.
#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn close_again_after_a_cancelled_close_still_waits_for_work_and_node() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("review-close-twice");
    let client = support::client(&connect).await;
    let works = Arc::new(Works::default());
    // The work awaits only every 400 ms, so its cancellation takes a while.
    let a = blocking(&client, &path, "a", &works, Duration::from_millis(400));
    a.start().unwrap();
    support::eventually(WITHIN, "a leads", || async { works.started() == 1 }).await;

    let first = tokio::time::timeout(Duration::from_millis(20), a.close()).await;
    assert!(first.is_err(), "the first close is still waiting for the work when dropped");
    assert!(!reports(&a), "closed at the first poll");
    tokio::time::timeout(WITHIN, a.close()).await.expect("hang guard").expect("close");
    assert_eq!(works.running(), 0, "the second close returned only after the work stopped");
    assert!(support::sorted_children(&obs, &path).await.is_empty(), "and after our node was deleted");
}

/// Two concurrent `close()` calls: each returns only after the work stopped and the node is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn concurrent_closes_both_wait() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("review-close-concurrent");
    let client = support::client(&connect).await;
    let works = Arc::new(Works::default());
    let a = Arc::new(blocking(&client, &path, "a", &works, Duration::from_millis(400)));
    a.start().unwrap();
    support::eventually(WITHIN, "a leads", || async { works.started() == 1 }).await;
    let one = crate::support::spawn({
        let a = a.clone();
        async move { a.close().await }
    });
    tokio::time::sleep(Duration::from_millis(20)).await;
    tokio::time::timeout(WITHIN, a.close()).await.expect("hang guard").expect("close");
    assert_eq!(works.running(), 0, "the later close returned only after the work stopped");
    assert!(support::sorted_children(&obs, &path).await.is_empty(), "and after our node was deleted");
    support::join("first close", WITHIN, one).await.expect("close");
}

/// A selector dropped while leading cancels its work and deletes its node; one dropped while
/// queued leaves no node either; the next participant leads only after the work stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_selectors_leave_nothing_behind() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("review-drop");
    let client = support::client(&connect).await;
    let works = Arc::new(Works::default());
    let a = forever(&client, &path, "a", &works);
    a.start().unwrap();
    support::eventually(WITHIN, "a leads", || async { a.has_leadership() }).await;
    let queued = forever(&client, &path, "queued", &works);
    queued.start().unwrap();
    support::eventually_queued(&obs, &path, 2, "queued in line").await;
    drop(queued);
    support::eventually_queued(&obs, &path, 1, "the queued node is deleted").await;
    let c_works = Arc::new(Works::default());
    let c = {
        let (works, c_works) = (works.clone(), c_works.clone());
        LeaderSelector::new(&client, &path, "c", move |leadership: Leadership| {
            let (works, c_works) = (works.clone(), c_works.clone());
            async move {
                assert_eq!(works.running(), 0, "a's work stopped before c leads");
                let _g = c_works.begin(&leadership);
                std::future::pending::<()>().await;
            }
        })
        .unwrap()
    };
    c.start().unwrap();
    support::eventually_queued(&obs, &path, 2, "c in line").await;
    drop(a);
    support::eventually(WITHIN, "c leads", || async { c.has_leadership() }).await;
    assert_eq!(works.cancelled(), 1, "a's work was cancelled");
    assert_eq!(c_works.running(), 1, "c's work runs (its assertion held)");
    drop(c);
    assert!(support::eventually_no_children(&connect, &path, WITHIN).await.is_empty());
    support::eventually(WITHIN, "c's work cancelled", || async { c_works.running() == 0 }).await;
}

// ---------------------------------------------------------------------------------------------
// lost holds, silent links, flapping
// ---------------------------------------------------------------------------------------------

/// Watches `selector` until stopped: a violation is leadership reported (in any of its three
/// ways) after the hold of the current term was seen `Lost`. Returns the number of violations.
fn sample_reports_after_loss(
    selector: Arc<LeaderSelector>,
    works: Arc<Works>,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<(usize, usize)> {
    crate::support::spawn(async move {
        let (mut violations, mut lost_samples) = (0, 0);
        while !stop.load(Ordering::SeqCst) {
            if let Some(hold) = works.last_hold() {
                // Lost first: it is final, so anything reported on it afterwards is a violation.
                if hold.hold_state() == HoldState::Lost {
                    lost_samples += 1;
                    // The term a report belongs to is named by its token. A next term may begin
                    // (and be reported) before its work records its hold; a sample across that
                    // start cannot tell which term it saw, so it is not judged.
                    let before = selector.fencing_token();
                    let reported = reports(&selector);
                    let after = selector.fencing_token();
                    let on_lost_hold = after.is_none_or(|token| token == hold.fencing_token());
                    if reported
                        && before == after
                        && on_lost_hold
                        && works.last_hold().is_some_and(|h| Arc::ptr_eq(&h, &hold))
                    {
                        violations += 1;
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        (violations, lost_samples)
    })
}

/// A partition of the leader (its link goes silent, the server expires its session): no
/// leadership is reported once its hold is lost, and the next leader's work starts strictly after
/// the old work stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blackholed_leader_never_reports_a_lost_hold_and_stops_first() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let proxy = FaultProxy::start(&connect).await.unwrap();
    let path = support::unique_path("review-blackhole-leader");
    let client_a = support::client_with(&proxy.connect_string(), Duration::from_secs(4)).await;
    let client_b = support::client(&connect).await;
    let works = Arc::new(Works::default());
    let a = Arc::new(forever(&client_a, &path, "a", &works));
    a.start().unwrap();
    support::eventually(WITHIN, "a leads", || async { a.has_leadership() }).await;
    let overlaps = Arc::new(AtomicUsize::new(0));
    let b_works = Arc::new(Works::default());
    let b = {
        let (works, overlaps, b_works) = (works.clone(), overlaps.clone(), b_works.clone());
        LeaderSelector::new(&client_b, &path, "b", move |leadership: Leadership| {
            let (works, overlaps, b_works) = (works.clone(), overlaps.clone(), b_works.clone());
            async move {
                if works.running() != 0 {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                let _g = b_works.begin(&leadership);
                std::future::pending::<()>().await;
            }
        })
        .unwrap()
    };
    b.start().unwrap();
    let obs = support::observer(&connect).await;
    support::eventually_queued(&obs, &path, 2, "b in line").await;
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = sample_reports_after_loss(a.clone(), works.clone(), stop.clone());

    proxy.set_mode(ProxyMode::Blackhole);
    support::eventually(Duration::from_secs(30), "b leads", || async { b.has_leadership() }).await;
    assert_eq!(overlaps.load(Ordering::SeqCst), 0, "b's work started while a's still ran");
    assert_eq!(works.cancelled(), 1, "a's work was cancelled");
    assert!(!reports(&a));
    stop.store(true, Ordering::SeqCst);
    let (violations, lost_samples) = support::join("sampler", WITHIN, sampler).await;
    assert!(lost_samples > 0, "the sampler saw the hold lost");
    assert_eq!(violations, 0, "leadership reported after the hold was lost");
    proxy.set_mode(ProxyMode::Pass);
    a.close().await.unwrap();
    b.close().await.unwrap();
    assert!(support::eventually_no_children(&connect, &path, WITHIN).await.is_empty());
}

/// A queued participant whose link goes silent until its session is given up: it never leads
/// meanwhile, and once the link is back it queues again on its new session (one node) and leads
/// when the leader leaves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blackholed_queued_participant_requeues_on_its_new_session() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let proxy = FaultProxy::start(&connect).await.unwrap();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("review-blackhole-queued");
    let client_a = support::client(&connect).await;
    let client_b = support::client_with(&proxy.connect_string(), Duration::from_secs(4)).await;
    let works = Arc::new(Works::default());
    let a = forever(&client_a, &path, "a", &works);
    a.start().unwrap();
    support::eventually(WITHIN, "a leads", || async { a.has_leadership() }).await;
    let b_works = Arc::new(Works::default());
    let b = forever(&client_b, &path, "b", &b_works);
    b.start().unwrap();
    support::eventually_queued(&obs, &path, 2, "b in line").await;
    let old_session = client_b.session_id();

    proxy.set_mode(ProxyMode::Blackhole);
    // The server expires b's session: b's node goes; a still leads.
    support::eventually_queued(&obs, &path, 1, "b's node expired with its session").await;
    a.close().await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(b_works.started(), 0, "b never leads while cut off");
    assert!(!b.has_leadership());
    proxy.set_mode(ProxyMode::Pass);
    support::session_replaced(&client_b, old_session).await;
    support::eventually(WITHIN, "b leads on its new session", || async { b.has_leadership() }).await;
    // Its work starts on a task of its own, a moment after the leadership is taken.
    support::eventually(WITHIN, "b's work starts", || async { b_works.started() >= 1 }).await;
    assert_eq!(b_works.started(), 1, "b's work started once");
    assert_eq!(support::sorted_children(&obs, &path).await.len(), 1, "one node of b");
    b.close().await.unwrap();
    assert!(support::sorted_children(&obs, &path).await.is_empty());
}

/// Many short cuts while the session survives: the leader's work is told, never cancelled, no
/// node is created or deleted (the parent's child version does not move), the same nodes stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flapping_links_recreate_no_node() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let proxy_a = FaultProxy::start(&connect).await.unwrap();
    let proxy_b = FaultProxy::start(&connect).await.unwrap();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("review-flap");
    let client_a = support::client(&proxy_a.connect_string()).await;
    let client_b = support::client(&proxy_b.connect_string()).await;
    let works = Arc::new(Works::default());
    let a = forever(&client_a, &path, "a", &works);
    a.auto_requeue();
    a.start().unwrap();
    support::eventually(WITHIN, "a leads", || async { a.has_leadership() }).await;
    let b = forever(&client_b, &path, "b", &works);
    b.auto_requeue();
    b.start().unwrap();
    support::eventually_queued(&obs, &path, 2, "b in line").await;
    let before = support::sorted_children(&obs, &path).await;
    let cversion = support::stat(&obs, &path).await.unwrap().cversion;
    let changes = support::record_leadership(a.leadership_changes());

    for _ in 0..12 {
        proxy_a.set_mode(ProxyMode::Cut);
        proxy_b.set_mode(ProxyMode::Cut);
        tokio::time::sleep(Duration::from_millis(60)).await;
        proxy_a.set_mode(ProxyMode::Pass);
        proxy_b.set_mode(ProxyMode::Pass);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    support::eventually(WITHIN, "both reconnected", || async { client_a.is_connected() && client_b.is_connected() })
        .await;
    support::eventually(WITHIN, "a leads again", || async { a.has_leadership() }).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(works.started(), 1, "one term only");
    assert_eq!(works.cancelled(), 0, "the work was told, never cancelled");
    assert_eq!(support::sorted_children(&obs, &path).await, before, "the same nodes");
    assert_eq!(support::stat(&obs, &path).await.unwrap().cversion, cversion, "no node created or deleted");
    a.close().await.unwrap();
    b.close().await.unwrap();
    let seen = support::join("stream", WITHIN, changes).await;
    assert!(!seen.contains(&LeadershipState::Lost), "{seen:?}");
    assert!(!seen.contains(&LeadershipState::NotLeader), "{seen:?}");
}

// ---------------------------------------------------------------------------------------------
// sessions replaced mid-call
// ---------------------------------------------------------------------------------------------

/// The session of a queued participant is expired: it queues again on its new session (its old
/// node went with the old session, one node of it remains) and leads after the leader leaves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_while_queued_requeues() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("review-expire-queued");
    let client_a = support::client(&connect).await;
    let client_b = support::client(&connect).await;
    let works = Arc::new(Works::default());
    let a = forever(&client_a, &path, "a", &works);
    a.start().unwrap();
    support::eventually(WITHIN, "a leads", || async { a.has_leadership() }).await;
    let b_works = Arc::new(Works::default());
    let b = forever(&client_b, &path, "b", &b_works);
    b.start().unwrap();
    support::eventually_queued(&obs, &path, 2, "b in line").await;
    let before = support::sorted_children(&obs, &path).await;
    let old = client_b.session_id();
    zk_curator::testing::expire_session(&connect, &client_b).await.unwrap();
    support::session_replaced(&client_b, old).await;
    support::eventually(WITHIN, "b queued again on a new node", || async {
        let now = support::sorted_children(&obs, &path).await;
        now.len() == 2 && now != before
    })
    .await;
    assert_eq!(b_works.started(), 0);
    a.close().await.unwrap();
    support::eventually(WITHIN, "b leads", || async { b.has_leadership() }).await;
    assert_eq!(b_works.started(), 1);
    b.close().await.unwrap();
    assert!(support::sorted_children(&obs, &path).await.is_empty());
}

/// The session ends while the work is just starting (before its first step): the work is
/// cancelled, leadership is never reported on the lost hold, and with auto-requeue the participant
/// leads again on its new session, one work at a time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_while_the_work_starts() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("review-expire-start");
    let client = support::client(&connect).await;
    let works = Arc::new(Works::default());
    let (go_tx, go_rx) = tokio::sync::watch::channel(false);
    let steps = Arc::new(AtomicUsize::new(0));
    let a = {
        let (works, steps) = (works.clone(), steps.clone());
        Arc::new(
            LeaderSelector::new(&client, &path, "a", move |leadership: Leadership| {
                let (works, steps, mut go) = (works.clone(), steps.clone(), go_rx.clone());
                async move {
                    let _g = works.begin(&leadership);
                    let _ = go.wait_for(|go| *go).await;
                    steps.fetch_add(1, Ordering::SeqCst);
                    std::future::pending::<()>().await;
                }
            })
            .unwrap(),
        )
    };
    a.auto_requeue();
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = sample_reports_after_loss(a.clone(), works.clone(), stop.clone());
    a.start().unwrap();
    support::eventually(WITHIN, "the work starts", || async { works.started() == 1 }).await;
    let old = client.session_id();
    zk_curator::testing::expire_session(&connect, &client).await.unwrap();
    support::session_replaced(&client, old).await;
    support::eventually(WITHIN, "a second term", || async { works.started() == 2 }).await;
    assert_eq!(works.cancelled(), 1, "the first work was cancelled");
    go_tx.send_replace(true);
    support::eventually(WITHIN, "the second work steps", || async { steps.load(Ordering::SeqCst) == 1 }).await;
    assert_eq!(works.most.load(Ordering::SeqCst), 1, "one work at a time");
    assert!(a.has_leadership());
    stop.store(true, Ordering::SeqCst);
    let (violations, _) = support::join("sampler", WITHIN, sampler).await;
    assert_eq!(violations, 0, "leadership reported on a lost hold");
    a.close().await.unwrap();
    assert!(support::sorted_children(&obs, &path).await.is_empty());
}

/// The session ends while `close()` waits for a slow work to stop: close still finishes, the
/// work is stopped and no node is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn expired_while_closing() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("review-expire-close");
    let _ = &obs;
    let client = support::client(&connect).await;
    let works = Arc::new(Works::default());
    let a = Arc::new(blocking(&client, &path, "a", &works, Duration::from_millis(300)));
    a.start().unwrap();
    support::eventually(WITHIN, "a leads", || async { works.started() == 1 }).await;
    let closing = crate::support::spawn({
        let a = a.clone();
        async move { a.close().await }
    });
    zk_curator::testing::expire_session(&connect, &client).await.unwrap();
    let closed = support::join("close", Duration::from_secs(20), closing).await;
    support::assert_ok_or_kind(
        &closed,
        &[zk_curator::ErrorKind::Retryable, zk_curator::ErrorKind::SessionLost],
        "close",
    );
    assert_eq!(works.running(), 0, "the work stopped");
    assert!(support::eventually_no_children(&connect, &path, WITHIN).await.is_empty());
    assert!(!reports(&a));
}

// ---------------------------------------------------------------------------------------------
// absurd input
// ---------------------------------------------------------------------------------------------

/// Bad paths are typed errors naming the path; start twice, start after close, requeue before
/// start and after close are typed errors; interrupt and close in any state never panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absurd_calls_are_typed_errors() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let client = support::client(&connect).await;
    for bad in ["", "relative", "/", "/trailing/", "/a//b", "/a/./b", "/a/../b", "/nul\u{0}"] {
        match LeaderSelector::new(&client, bad, "x", |_l: Leadership| async {}) {
            Err(Error::InvalidPath { path, .. }) => assert_eq!(path, bad),
            other => panic!("{bad:?}: expected InvalidPath, got {other:?}"),
        }
    }
    let path = support::unique_path("review-absurd");
    let works = Arc::new(Works::default());
    let a = forever(&client, &path, "a", &works);
    a.interrupt_leadership();
    assert!(matches!(a.requeue(), Err(Error::InvalidArgument { .. })), "requeue before start");
    assert_eq!(a.state(), LatchState::Latent);
    a.start().unwrap();
    match a.start() {
        Err(Error::InvalidArgument { .. }) => {}
        other => panic!("start twice: {other:?}"),
    }
    support::eventually(WITHIN, "a leads", || async { a.has_leadership() }).await;
    assert!(!a.requeue().unwrap(), "leading: already queued");
    a.close().await.unwrap();
    a.close().await.unwrap();
    a.interrupt_leadership();
    assert!(matches!(a.requeue(), Err(Error::Closed { .. })), "requeue after close");
    assert!(a.start().is_err(), "start after close");
    assert_eq!(a.state(), LatchState::Closed);
    assert!(!reports(&a));
    assert_eq!(*a.watch_leadership().borrow(), LeadershipState::NotLeader);

    // Closed before it ever started: start refuses, nothing is created.
    let never = forever(&client, &path, "never", &works);
    never.close().await.unwrap();
    assert!(never.start().is_err());
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(support::children(&connect, &path).await.is_empty());
    assert_eq!(works.started(), 1);
}

/// An empty id writes the client's default data into the node, as Curator does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_id_writes_the_default_data() {
    support::init_tracing();
    let server = support::server().await;
    let client = support::client(&server.connect_string()).await;
    let path = support::unique_path("review-empty-id");
    let works = Arc::new(Works::default());
    let a = forever(&client, &path, "", &works);
    assert_eq!(a.id(), "");
    a.start().unwrap();
    support::eventually(WITHIN, "a leads", || async { a.has_leadership() }).await;
    let expected = String::from_utf8_lossy(client.default_data()).into_owned();
    assert!(!expected.is_empty());
    assert_eq!(a.participants().await.unwrap()[0].id, expected);
    assert_eq!(works.last_hold().unwrap().data(), client.default_data());
    a.close().await.unwrap();
}

/// An id larger than the server accepts (1 MiB + 1 KiB): a typed error at construction, or a
/// selector that neither hangs `close()` nor disturbs the client's other work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_id_is_refused_or_harmless() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let client = support::client(&connect).await;
    let path = support::unique_path("review-huge-id");
    let id = "x".repeat(1024 * 1024 + 1024);
    let works = Arc::new(Works::default());
    let created = {
        let works = works.clone();
        LeaderSelector::new(&client, &path, id.clone(), move |leadership: Leadership| {
            let works = works.clone();
            async move {
                let _g = works.begin(&leadership);
                std::future::pending::<()>().await;
            }
        })
    };
    let a = match created {
        Err(Error::InvalidArgument { name, .. }) => return assert_eq!(name, "id"),
        Err(e) => panic!("an unexpected error for a huge id: {e:?}"),
        Ok(a) => a,
    };
    // A latch on the same client, which must keep its leadership meanwhile.
    let latch = LeaderLatch::new(&client, &support::unique_path("review-huge-id-latch"), "latch").unwrap();
    latch.start().unwrap();
    assert!(latch.await_leadership_timeout(WITHIN).await.unwrap());
    let mut latch_changes = latch.watch_leadership();
    latch_changes.borrow_and_update();
    a.start().unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let led = a.has_leadership();
    tokio::time::timeout(WITHIN, a.close()).await.expect("close hangs").ok();
    assert!(
        !latch_changes.has_changed().unwrap(),
        "the huge id disturbed the client's other recipes (latch now {:?}); the selector led: {led}",
        latch.leadership_state()
    );
    assert!(led || works.started() == 0);
    latch.close().await.unwrap();
    assert!(support::children(&connect, &path).await.is_empty());
}

/// The largest id the library accepts (1 MiB - 4 KiB) still fits into a node: the selector and
/// the latch lead with it, and their participants read it back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn largest_accepted_id_works() {
    support::init_tracing();
    let server = support::server().await;
    let client = support::client(&server.connect_string()).await;
    let id = "z".repeat(1024 * 1024 - 4096);
    let works = Arc::new(Works::default());
    let a = forever(&client, &support::unique_path("review-big-id"), &id, &works);
    a.start().unwrap();
    support::eventually(WITHIN, "a leads", || async { a.has_leadership() }).await;
    assert_eq!(a.participants().await.unwrap()[0].id, id);
    a.close().await.unwrap();
    let latch = LeaderLatch::new(&client, &support::unique_path("review-big-id-latch"), id.clone()).unwrap();
    latch.start().unwrap();
    assert!(latch.await_leadership_timeout(WITHIN).await.unwrap());
    assert_eq!(latch.participants().await.unwrap()[0].id, id);
    latch.close().await.unwrap();
}

/// Work that returns at once, with auto-requeue: terms follow each other one at a time (each
/// one a create and a delete: bounded by the server's round trips), and close stops it promptly,
/// leaving no node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instant_work_with_auto_requeue_closes_promptly() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let client = support::client(&connect).await;
    let path = support::unique_path("review-instant");
    let works = Arc::new(Works::default());
    let a = {
        let works = works.clone();
        LeaderSelector::new(&client, &path, "a", move |leadership: Leadership| {
            let works = works.clone();
            async move { works.begin(&leadership).returned() }
        })
        .unwrap()
    };
    a.auto_requeue();
    a.start().unwrap();
    support::eventually(WITHIN, "many terms", || async { works.started() >= 20 }).await;
    tokio::time::timeout(Duration::from_secs(5), a.close()).await.expect("close hangs").unwrap();
    let terms = works.started();
    println!("terms before close: {terms}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(works.started(), terms, "no term after close");
    assert_eq!(works.most.load(Ordering::SeqCst), 1);
    assert!(support::children(&connect, &path).await.is_empty());
    let holds = works.holds.lock().clone();
    assert!(holds.windows(2).all(|w| w[0].fencing_token() < w[1].fencing_token()));
    assert!(holds.iter().all(|h| h.hold_state() == HoldState::Lost), "every term's hold is given up");
}

/// Work that blocks its thread (never awaiting for a while): close waits for it, then finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn blocking_work_delays_close_but_close_finishes() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let client = support::client(&connect).await;
    let path = support::unique_path("review-blocking");
    let works = Arc::new(Works::default());
    let a = {
        let works = works.clone();
        LeaderSelector::new(&client, &path, "a", move |leadership: Leadership| {
            let works = works.clone();
            async move {
                let g = works.begin(&leadership);
                std::thread::sleep(Duration::from_millis(1500));
                g.returned();
            }
        })
        .unwrap()
    };
    a.auto_requeue();
    a.start().unwrap();
    support::eventually(WITHIN, "the work started", || async { works.started() == 1 }).await;
    tokio::time::timeout(WITHIN, a.close()).await.expect("close hangs").unwrap();
    assert_eq!(works.running(), 0);
    assert!(support::children(&connect, &path).await.is_empty());
}

/// Work that panics every time, with auto-requeue: each panic ends its term (one at a time), the
/// selector goes on, and close leaves nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn panicking_work_with_auto_requeue() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let client = support::client(&connect).await;
    let path = support::unique_path("review-panic");
    let works = Arc::new(Works::default());
    let a = {
        let works = works.clone();
        LeaderSelector::new(&client, &path, "a", move |leadership: Leadership| {
            let works = works.clone();
            async move {
                let _g = works.begin(&leadership);
                tokio::task::yield_now().await;
                panic!("the work panics (expected by the test)");
            }
        })
        .unwrap()
    };
    a.auto_requeue();
    let changes = support::record_leadership(a.leadership_changes());
    a.start().unwrap();
    support::eventually(WITHIN, "several terms", || async { works.ended() >= 5 }).await;
    tokio::time::timeout(WITHIN, a.close()).await.expect("close hangs").unwrap();
    assert_eq!(works.most.load(Ordering::SeqCst), 1);
    assert!(!reports(&a));
    assert!(support::children(&connect, &path).await.is_empty());
    let seen = support::join("stream", WITHIN, changes).await;
    assert!(seen.len() >= 5 && seen.windows(2).all(|w| w[0] != w[1]), "{seen:?}");
}

// ---------------------------------------------------------------------------------------------
// stream semantics
// ---------------------------------------------------------------------------------------------

/// The stream of a selector that leads, is interrupted and leads again (auto-requeue): the state
/// when made, then each change once, in order; `watch_leadership` follows; a close ends it (a
/// `NotifyLeader` close with a last `NotLeader`); a stream made after close ends at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_order_and_end() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let client = support::client(&connect).await;
    let path = support::unique_path("review-stream");
    let works = Arc::new(Works::default());
    let a = forever(&client, &path, "a", &works).with_close_mode(CloseMode::NotifyLeader);
    a.auto_requeue();
    let early = support::record_leadership(a.leadership_changes());
    let watch = a.watch_leadership();
    a.start().unwrap();
    support::eventually(WITHIN, "a leads", || async { a.has_leadership() }).await;
    support::eventually(WITHIN, "watch says Leader", || async { *watch.borrow() == LeadershipState::Leader }).await;
    let late = support::record_leadership(a.leadership_changes());
    a.interrupt_leadership();
    support::eventually(WITHIN, "a second term", || async { works.started() == 2 && a.has_leadership() }).await;
    support::eventually(WITHIN, "watch says Leader", || async { *watch.borrow() == LeadershipState::Leader }).await;
    a.close().await.unwrap();
    assert_eq!(*watch.borrow(), LeadershipState::NotLeader);
    use LeadershipState::*;
    assert_eq!(support::join("early", WITHIN, early).await, [NotLeader, Leader, NotLeader, Leader, NotLeader]);
    assert_eq!(support::join("late", WITHIN, late).await, [Leader, NotLeader, Leader, NotLeader]);
    let mut after = a.leadership_changes();
    assert_eq!(tokio::time::timeout(WITHIN, after.next()).await.expect("ends at once"), None);
}

/// A queued participant closed with `NotifyLeader` says nothing more (it did not lead); a
/// dropped selector ends its streams.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notify_leader_only_tells_a_leader_and_drop_ends_streams() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let client = support::client(&connect).await;
    let path = support::unique_path("review-stream-queued");
    let works = Arc::new(Works::default());
    let a = forever(&client, &path, "a", &works);
    a.start().unwrap();
    support::eventually(WITHIN, "a leads", || async { a.has_leadership() }).await;
    let b = forever(&client, &path, "b", &works).with_close_mode(CloseMode::NotifyLeader);
    let b_changes = support::record_leadership(b.leadership_changes());
    b.start().unwrap();
    support::eventually_queued(&obs, &path, 2, "b in line").await;
    b.close().await.unwrap();
    assert_eq!(support::join("b", WITHIN, b_changes).await, [LeadershipState::NotLeader]);
    let a_changes = support::record_leadership(a.leadership_changes());
    drop(a);
    assert_eq!(support::join("a", WITHIN, a_changes).await, [LeadershipState::Leader]);
    assert!(support::eventually_no_children(&connect, &path, WITHIN).await.is_empty());
}

/// A lost term's stream says `Lost` then `NotLeader`, and no `Leader` is ever heard for a hold
/// that is already lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_after_an_operator_delete() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let client = support::client(&connect).await;
    let path = support::unique_path("review-stream-delete");
    let works = Arc::new(Works::default());
    let a = forever(&client, &path, "a", &works);
    let changes = support::record_leadership(a.leadership_changes());
    a.start().unwrap();
    support::eventually(WITHIN, "a leads", || async { a.has_leadership() }).await;
    let node = support::sorted_children(&obs, &path).await.remove(0);
    obs.delete(&format!("{path}/{node}"), None).await.unwrap();
    support::eventually(WITHIN, "the work is cancelled", || async { works.cancelled() == 1 }).await;
    assert!(!reports(&a));
    // The term ends with the node's release (a round trip) before `NotLeader`.
    let watch = a.watch_leadership();
    support::eventually(WITHIN, "NotLeader", || async { *watch.borrow() == LeadershipState::NotLeader }).await;
    a.close().await.unwrap();
    use LeadershipState::*;
    assert_eq!(support::join("stream", WITHIN, changes).await, [NotLeader, Leader, Lost, NotLeader]);
}

// ---------------------------------------------------------------------------------------------
// the latch: close modes, leadership_changes, guarded_write, close of a queued latch
// ---------------------------------------------------------------------------------------------

/// `guarded_write` is `NotOwner` naming the path while queued and after close, applied while
/// leading; close modes decide the stream's last word (also for a dropped latch); a queued
/// latch's node is gone when `close()` returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latch_close_modes_and_guarded_writes() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let client = support::client(&connect).await;
    let path = support::unique_path("review-latch");
    let target = support::unique_path("review-latch-target");
    client.create(&target).creating_parents_if_needed().await.unwrap();

    let a = LeaderLatch::new(&client, &path, "a").unwrap().with_close_mode(CloseMode::NotifyLeader);
    let a_changes = support::record_leadership(a.leadership_changes());
    a.start().unwrap();
    assert!(a.await_leadership_timeout(WITHIN).await.unwrap());
    let b = LeaderLatch::new(&client, &path, "b").unwrap();
    let b_changes = support::record_leadership(b.leadership_changes());
    b.start().unwrap();
    support::eventually_queued(&obs, &path, 2, "b in line").await;

    let write = || zk_curator::Transaction::new().set_data(&target, b"v", None);
    match b.guarded_write(write()).await {
        Err(Error::NotOwner { path: named, .. }) => assert_eq!(named, path),
        other => panic!("queued: expected NotOwner, got {other:?}"),
    }
    a.guarded_write(write()).await.expect("the leader writes");

    b.close().await.unwrap();
    assert_eq!(support::sorted_children(&obs, &path).await.len(), 1, "b's node is gone when close returns");
    match b.guarded_write(write()).await {
        Err(Error::NotOwner { .. }) => {}
        other => panic!("closed: expected NotOwner, got {other:?}"),
    }
    drop(a);
    use LeadershipState::*;
    assert_eq!(support::join("a", WITHIN, a_changes).await, [NotLeader, Leader, NotLeader], "NotifyLeader on drop");
    assert_eq!(support::join("b", WITHIN, b_changes).await, [NotLeader]);
    assert!(support::eventually_no_children(&connect, &path, WITHIN).await.is_empty());

    // Silent (default) close of a leader: the stream just ends; close_with overrides the mode.
    let c = LeaderLatch::new(&client, &path, "c").unwrap();
    c.start().unwrap();
    assert!(c.await_leadership_timeout(WITHIN).await.unwrap());
    let c_watch = c.watch_leadership();
    support::eventually(WITHIN, "c: Leader", || async { *c_watch.borrow() == LeadershipState::Leader }).await;
    let c_changes = support::record_leadership(c.leadership_changes());
    let d = LeaderLatch::new(&client, &path, "d").unwrap().with_close_mode(CloseMode::NotifyLeader);
    d.start().unwrap();
    c.close().await.unwrap();
    assert!(d.await_leadership_timeout(WITHIN).await.unwrap());
    let d_watch = d.watch_leadership();
    support::eventually(WITHIN, "d: Leader", || async { *d_watch.borrow() == LeadershipState::Leader }).await;
    let d_changes = support::record_leadership(d.leadership_changes());
    d.close_with(CloseMode::Silent).await.unwrap();
    assert_eq!(support::join("c", WITHIN, c_changes).await, [Leader]);
    assert_eq!(support::join("d", WITHIN, d_changes).await, [Leader]);
    assert!(support::sorted_children(&obs, &path).await.is_empty());
}

/// A latch whose session is expired while leading: its stream says `Lost`, then `NotLeader`
/// (queued again), then `Leader` on the new session; its guarded writes on the lost hold fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latch_stream_across_expiry() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let client = support::client(&connect).await;
    let path = support::unique_path("review-latch-expiry");
    let a = LeaderLatch::new(&client, &path, "a").unwrap();
    a.start().unwrap();
    assert!(a.await_leadership_timeout(WITHIN).await.unwrap());
    // The stream's state may trail `has_leadership` by a moment.
    let watch = a.watch_leadership();
    support::eventually(WITHIN, "Leader", || async { *watch.borrow() == LeadershipState::Leader }).await;
    let changes = support::record_leadership(a.leadership_changes());
    let old_hold = a.hold().unwrap();
    let old = client.session_id();
    zk_curator::testing::expire_session(&connect, &client).await.unwrap();
    support::session_replaced(&client, old).await;
    support::eventually(WITHIN, "leads again", || async { a.has_leadership() }).await;
    assert_eq!(old_hold.hold_state(), HoldState::Lost);
    assert!(a.fencing_token().unwrap() > old_hold.fencing_token());
    a.close().await.unwrap();
    let mut seen: Vec<_> = support::join("stream", WITHIN, changes)
        .await
        .into_iter()
        .filter(|s| *s != LeadershipState::Suspended)
        .collect();
    seen.dedup();
    use LeadershipState::*;
    assert_eq!(seen, [Leader, Lost, NotLeader, Leader]);
}

/// A latch with an id larger than the server accepts: a typed error, or harmless to the client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latch_huge_id_is_refused_or_harmless() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let client = support::client(&connect).await;
    let path = support::unique_path("review-latch-huge");
    let huge = match LeaderLatch::new(&client, &path, "y".repeat(1024 * 1024 + 1024)) {
        Err(Error::InvalidArgument { name, .. }) => return assert_eq!(name, "id"),
        Err(e) => panic!("an unexpected error for a huge id: {e:?}"),
        Ok(latch) => latch,
    };
    let other = LeaderLatch::new(&client, &support::unique_path("review-latch-huge-other"), "o").unwrap();
    other.start().unwrap();
    assert!(other.await_leadership_timeout(WITHIN).await.unwrap());
    let mut watch = other.watch_leadership();
    watch.borrow_and_update();
    huge.start().unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    tokio::time::timeout(WITHIN, huge.close()).await.expect("close hangs").ok();
    assert!(!watch.has_changed().unwrap(), "the huge id disturbed the client's other latch");
    other.close().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// after a term
// ---------------------------------------------------------------------------------------------

/// `requeue()` promises `Ok(false)` only when already queued or leading. Called after the work
/// returned while the node's release is still in flight (here: its reply is lost, so the release
/// waits), the participant neither leads nor is queued: the call must queue it (`Ok(true)`), or at
/// least the participant must lead again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requeue_while_the_release_is_in_flight_is_not_lost() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let proxy = FaultProxy::start(&connect).await.unwrap();
    let client =
        support::client_with_timeouts(&proxy.connect_string(), Duration::from_secs(10), Duration::from_secs(2)).await;
    let path = support::unique_path("review-requeue-release");
    let works = Arc::new(Works::default());
    let (go_tx, go_rx) = tokio::sync::watch::channel(0usize);
    let a = {
        let works = works.clone();
        LeaderSelector::new(&client, &path, "a", move |leadership: Leadership| {
            let (works, mut go) = (works.clone(), go_rx.clone());
            async move {
                let g = works.begin(&leadership);
                let term = works.started();
                let _ = go.wait_for(|go| *go >= term).await;
                g.returned();
            }
        })
        .unwrap()
    };
    a.start().unwrap();
    support::eventually(WITHIN, "a leads", || async { a.has_leadership() }).await;
    proxy.set_mode(ProxyMode::DropReplies);
    go_tx.send_replace(1);
    support::eventually(WITHIN, "the work returned", || async { works.ended() == 1 }).await;
    assert!(!a.has_leadership(), "the term is over");
    let requeued = a.requeue().unwrap();
    proxy.set_mode(ProxyMode::Pass);
    let led_again = support::poll_until(WITHIN, || async { works.started() == 2 }).await;
    assert!(led_again, "requeue() after the work returned said {requeued} and the participant never led again");
    a.close().await.unwrap();
    assert!(support::eventually_no_children(&connect, &path, WITHIN).await.is_empty());
}

/// A `Leadership` kept past its term (interrupted) is harmless: not held, its guarded writes
/// fail with `LockLost`, `lost()` resolves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leadership_kept_past_its_term_is_harmless() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let client = support::client(&connect).await;
    let path = support::unique_path("review-kept");
    let target = support::unique_path("review-kept-target");
    client.create(&target).creating_parents_if_needed().await.unwrap();
    let kept = Arc::new(parking_lot::Mutex::new(None::<Leadership>));
    let a = {
        let kept = kept.clone();
        LeaderSelector::new(&client, &path, "a", move |leadership: Leadership| {
            let kept = kept.clone();
            async move {
                *kept.lock() = Some(leadership);
                std::future::pending::<()>().await;
            }
        })
        .unwrap()
    };
    a.start().unwrap();
    support::eventually(WITHIN, "a leads", || async { a.has_leadership() && kept.lock().is_some() }).await;
    let leadership = kept.lock().clone().unwrap();
    leadership.guarded_write(zk_curator::Transaction::new().set_data(&target, b"1", None)).await.expect("held");
    a.interrupt_leadership();
    tokio::time::timeout(WITHIN, leadership.lost()).await.expect("lost() resolves");
    assert!(!leadership.is_held());
    support::assert_lock_lost(
        leadership.guarded_write(zk_curator::Transaction::new().set_data(&target, b"2", None)).await,
        leadership.hold().path(),
        "a write after the term",
    );
    a.close().await.unwrap();
}

/// The client is closed under a leading selector: the work is cancelled, leadership is not
/// reported, and the selector's close returns promptly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_closed_under_a_leader() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let client = support::client(&connect).await;
    let path = support::unique_path("review-client-closed");
    let works = Arc::new(Works::default());
    let a = forever(&client, &path, "a", &works);
    a.auto_requeue();
    a.start().unwrap();
    support::eventually(WITHIN, "a leads", || async { a.has_leadership() }).await;
    tokio::time::timeout(WITHIN, client.close()).await.expect("client close hangs");
    support::eventually(WITHIN, "the work is cancelled", || async { works.cancelled() == 1 }).await;
    assert!(!reports(&a));
    tokio::time::timeout(WITHIN, a.close()).await.expect("close hangs").ok();
    assert_eq!(works.started(), 1, "no term on a closed client");
    assert!(support::eventually_no_children(&connect, &path, WITHIN).await.is_empty());
}

// ---------------------------------------------------------------------------------------------
// close right after start: the create may be in flight
// ---------------------------------------------------------------------------------------------

/// A queued latch or selector closed at once (its create in flight, or just done) leaves no node
/// by the time `close()` returns; a selector dropped at once leaves none eventually.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_right_after_start_leaves_no_node() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let client = support::client(&connect).await;
    let path = support::unique_path("review-close-at-once");
    let works = Arc::new(Works::default());
    let leader = forever(&client, &path, "leader", &works);
    leader.start().unwrap();
    support::eventually(WITHIN, "leader leads", || async { leader.has_leadership() }).await;
    let only_leader = support::sorted_children(&obs, &path).await;
    for round in 0..8u64 {
        let pause = Duration::from_micros(round * 700);
        let latch = LeaderLatch::new(&client, &path, format!("latch-{round}")).unwrap();
        latch.start().unwrap();
        tokio::time::sleep(pause).await;
        tokio::time::timeout(WITHIN, latch.close()).await.expect("latch close hangs").unwrap();
        assert_eq!(support::sorted_children(&obs, &path).await, only_leader, "latch, round {round}");

        let selector = forever(&client, &path, &format!("selector-{round}"), &works);
        selector.start().unwrap();
        tokio::time::sleep(pause).await;
        tokio::time::timeout(WITHIN, selector.close()).await.expect("selector close hangs").unwrap();
        assert_eq!(support::sorted_children(&obs, &path).await, only_leader, "selector, round {round}");

        let dropped = forever(&client, &path, &format!("dropped-{round}"), &works);
        dropped.start().unwrap();
        tokio::time::sleep(pause).await;
        drop(dropped);
        // Its node goes in the background, after the drop returns: wait for it here, so that the
        // next round's checks see only what that round left.
        assert_eq!(
            support::children_become(&obs, &path, &only_leader, WITHIN).await,
            only_leader,
            "dropped, round {round}"
        );
    }
    assert_eq!(works.started(), 1);
    leader.close().await.unwrap();
    assert!(support::sorted_children(&obs, &path).await.is_empty());
}

// ---------------------------------------------------------------------------------------------
// configuration and resources
// ---------------------------------------------------------------------------------------------

/// `with_close_mode` on a latch that is already started must not be silently ignored: a
/// `NotifyLeader` close then ends the leader's stream with `NotLeader`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latch_close_mode_set_after_start_is_honoured() {
    support::init_tracing();
    let server = support::server().await;
    let client = support::client(&server.connect_string()).await;
    let path = support::unique_path("review-latch-mode-late");
    let latch = LeaderLatch::new(&client, &path, "a").unwrap();
    latch.start().unwrap();
    let latch = latch.with_close_mode(CloseMode::NotifyLeader);
    assert!(latch.await_leadership_timeout(WITHIN).await.unwrap());
    let watch = latch.watch_leadership();
    support::eventually(WITHIN, "Leader", || async { *watch.borrow() == LeadershipState::Leader }).await;
    let changes = support::record_leadership(latch.leadership_changes());
    latch.close().await.unwrap();
    assert_eq!(
        support::join("stream", WITHIN, changes).await,
        [LeadershipState::Leader, LeadershipState::NotLeader],
        "the close mode given after start was ignored"
    );
}

/// The resident memory of this process, in bytes.
fn resident_bytes() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: usize = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    pages * 4096
}

/// Streams made and dropped while the state does not change (a stream per request, say) must
/// not pile up: their queues are freed, not kept until the next change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_streams_do_not_pile_up() {
    support::init_tracing();
    let server = support::server().await;
    let client = support::client(&server.connect_string()).await;
    let path = support::unique_path("review-streams");
    let works = Arc::new(Works::default());
    let a = forever(&client, &path, "a", &works);
    a.start().unwrap();
    support::eventually(WITHIN, "a leads", || async { a.has_leadership() }).await;
    let latch = LeaderLatch::new(&client, &support::unique_path("review-streams-latch"), "l").unwrap();
    for _ in 0..1000 {
        drop(a.leadership_changes());
        drop(latch.leadership_changes());
    }
    let before = resident_bytes();
    for _ in 0..200_000 {
        drop(a.leadership_changes());
        drop(latch.leadership_changes());
    }
    let grown = resident_bytes().saturating_sub(before);
    assert!(grown < 16 << 20, "400 000 dropped streams kept {} MiB", grown >> 20);
    a.close().await.unwrap();
}

/// The work closes its own selector (it decided to stop taking part): no deadlock — the work is
/// cancelled, the node deleted, and an outside `close()` returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_work_closes_its_own_selector() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let client = support::client(&connect).await;
    let path = support::unique_path("review-self-close");
    let works = Arc::new(Works::default());
    let me: Arc<std::sync::OnceLock<Arc<LeaderSelector>>> = Arc::default();
    let a = {
        let (works, me) = (works.clone(), me.clone());
        Arc::new(
            LeaderSelector::new(&client, &path, "a", move |leadership: Leadership| {
                let (works, me) = (works.clone(), me.clone());
                async move {
                    let _g = works.begin(&leadership);
                    if let Some(me) = me.get() {
                        let _ = me.close().await;
                    }
                    std::future::pending::<()>().await;
                }
            })
            .unwrap(),
        )
    };
    assert!(me.set(a.clone()).is_ok());
    a.auto_requeue();
    a.start().unwrap();
    support::eventually(WITHIN, "the work ran", || async { works.started() == 1 }).await;
    support::eventually(WITHIN, "the work is cancelled", || async { works.running() == 0 }).await;
    assert_eq!(a.state(), LatchState::Closed);
    tokio::time::timeout(WITHIN, a.close()).await.expect("close hangs").unwrap();
    assert!(support::sorted_children(&support::observer(&connect).await, &path).await.is_empty());
    assert_eq!(works.started(), 1);
}

/// A work function that panics when called (before it returns its future) is a panicking work
/// too: the term ends, the node is released, the selector goes on (auto-requeue) and `close()`
/// neither panics nor leaves a node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_work_function_that_panics_when_called() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let client = support::client(&connect).await;
    let path = support::unique_path("review-panic-call");
    let calls = Arc::new(AtomicUsize::new(0));
    let works = Arc::new(Works::default());
    let a = {
        let (calls, works) = (calls.clone(), works.clone());
        LeaderSelector::new(&client, &path, "a", move |leadership: Leadership| {
            let works = works.clone();
            if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                panic!("the work function panics when called (expected by the test)");
            }
            async move {
                let _g = works.begin(&leadership);
                std::future::pending::<()>().await;
            }
        })
        .unwrap()
    };
    a.auto_requeue();
    a.start().unwrap();
    let led_again = support::poll_until(WITHIN, || async { works.started() == 1 && a.has_leadership() }).await;
    let nodes = support::sorted_children(&obs, &path).await;
    let closed = crate::support::spawn(async move { tokio::time::timeout(WITHIN, a.close()).await });
    let closed = closed.await;
    assert!(led_again, "the selector went on after the panic (nodes: {nodes:?})");
    assert!(matches!(closed, Ok(Ok(Ok(())))), "close after the panic: {closed:?}");
    assert!(support::sorted_children(&obs, &path).await.is_empty(), "no node left");
}

/// The stream never trails the leadership it notifies: once `await_leadership` returned (latch)
/// or `has_leadership` is true (selector), a stream made now starts with `Leader`, and a
/// `NotifyLeader` close right then ends it with `NotLeader` (the main test
/// `leader_latch::leadership_stream_close_modes_and_guarded_writes` flaked on this).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stream_does_not_trail_leadership() {
    support::init_tracing();
    let server = support::server().await;
    let client = support::client(&server.connect_string()).await;
    let works = Arc::new(Works::default());
    use LeadershipState::*;
    for round in 0..6 {
        let path = support::unique_path("review-trail-latch");
        let latch = LeaderLatch::new(&client, &path, "l").unwrap().with_close_mode(CloseMode::NotifyLeader);
        let early = support::record_leadership(latch.leadership_changes());
        latch.start().unwrap();
        assert!(latch.await_leadership_timeout(WITHIN).await.unwrap());
        let late = support::record_leadership(latch.leadership_changes());
        latch.close().await.unwrap();
        assert_eq!(support::join("early", WITHIN, early).await, [NotLeader, Leader, NotLeader], "latch, round {round}");
        assert_eq!(support::join("late", WITHIN, late).await, [Leader, NotLeader], "latch, round {round}");

        let path = support::unique_path("review-trail-selector");
        let selector = forever(&client, &path, "s", &works).with_close_mode(CloseMode::NotifyLeader);
        selector.start().unwrap();
        tokio::time::timeout(WITHIN, async {
            while !selector.has_leadership() {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the selector leads");
        let late = support::record_leadership(selector.leadership_changes());
        selector.close().await.unwrap();
        assert_eq!(support::join("late", WITHIN, late).await, [Leader, NotLeader], "selector, round {round}");
    }
}

/// Busy-polls a participant's leadership on a thread of its own, so that it notices a change the
/// moment it is made: each time the stream or the watch says `Leader`, it checks then and there
/// that the participant shows the leadership (`has_leadership`, a fencing token, for a latch its
/// hold); each time `has_leadership` turns true, that the watch says `Leader`.
struct EagerListener {
    /// How many times the stream, and the watch, said `Leader`.
    told: Arc<[AtomicUsize; 2]>,
    violations: Arc<parking_lot::Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

/// What a participant shows now: whether it leads (`has_leadership`), and what is missing of a
/// leadership (`None` when nothing is).
struct Shows {
    leads: Box<dyn Fn() -> bool + Send>,
    missing: Box<dyn Fn() -> Option<String> + Send>,
}

impl EagerListener {
    fn start(
        mut stream: zk_curator::leader::LeadershipStream,
        mut watch: tokio::sync::watch::Receiver<LeadershipState>,
        shows: Shows,
    ) -> Self {
        let told = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
        let violations = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (told, violations, stop) = (told.clone(), violations.clone(), stop.clone());
            std::thread::spawn(move || {
                let heard = |by: usize| {
                    let missing = (shows.missing)();
                    let n = told[by].fetch_add(1, Ordering::SeqCst) + 1;
                    if let Some(missing) = missing {
                        violations.lock().push(format!("{} said Leader (#{n}): {missing}", ["stream", "watch"][by]));
                    }
                };
                let mut led = false;
                while !stop.load(Ordering::SeqCst) {
                    if stream.try_next() == Some(LeadershipState::Leader) {
                        heard(0);
                    }
                    if watch.has_changed().unwrap_or(false) && *watch.borrow_and_update() == LeadershipState::Leader {
                        heard(1);
                    }
                    let leads = (shows.leads)();
                    if leads && !led {
                        // `borrow` leaves the change unseen for the check above.
                        let said = *watch.borrow();
                        if said != LeadershipState::Leader {
                            violations.lock().push(format!("has_leadership true, the watch says {said:?}"));
                        }
                    }
                    led = leads;
                    std::hint::spin_loop();
                }
            })
        };
        Self { told, violations, stop, thread }
    }

    /// Whether both the stream and the watch said `Leader` `terms` times.
    fn told(&self, terms: usize) -> bool {
        self.told.iter().all(|told| told.load(Ordering::SeqCst) >= terms)
    }

    fn finish(self) -> Vec<String> {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().expect("the listener thread");
        std::mem::take(&mut *self.violations.lock())
    }
}

fn missing(leads: bool, token: bool, hold: bool) -> Option<String> {
    (!(leads && token && hold)).then(|| format!("has_leadership {leads}, fencing token {token}, hold {hold}"))
}

/// Leadership is shown and told together: a listener told `Leader` — by the stream or the watch,
/// the moment it is said — finds `has_leadership` true and a fencing token (a latch's hold too),
/// and one who sees `has_leadership` turn true finds the watch saying `Leader`; term after term,
/// for a latch (its node deleted each term) and a selector (interrupted each term).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leadership_is_shown_before_a_listener_is_told_and_told_once_shown() {
    const TERMS: usize = 30;
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let client = support::client(&connect).await;
    let obs = support::observer(&connect).await;

    let path = support::unique_path("eager-listener-latch");
    let latch = LeaderLatch::new(&client, &path, "l").unwrap();
    let shows = Shows {
        leads: Box::new({
            let latch = latch.clone();
            move || latch.has_leadership()
        }),
        missing: Box::new({
            let latch = latch.clone();
            move || missing(latch.has_leadership(), latch.fencing_token().is_some(), latch.hold().is_some())
        }),
    };
    let listener = EagerListener::start(latch.leadership_changes(), latch.watch_leadership(), shows);
    latch.start().unwrap();
    for term in 1..=TERMS {
        // Each term is heard before the next is ended, so the check is never late for its own term.
        support::eventually(WITHIN, &format!("latch term {term} heard"), || async {
            listener.told(term) && latch.has_leadership()
        })
        .await;
        if term < TERMS {
            let node = latch.hold().expect("leading").path().to_string();
            obs.delete(&node, None).await.unwrap();
        }
    }
    let latch_violations = listener.finish();
    latch.close().await.unwrap();
    assert!(support::sorted_children(&obs, &path).await.is_empty(), "no latch node left");

    let path = support::unique_path("eager-listener-selector");
    let works = Arc::new(Works::default());
    let selector = forever(&client, &path, "s", &works);
    selector.auto_requeue();
    let shows = Shows {
        leads: Box::new({
            let selector = selector.clone();
            move || selector.has_leadership()
        }),
        missing: Box::new({
            let selector = selector.clone();
            move || missing(selector.has_leadership(), selector.fencing_token().is_some(), true)
        }),
    };
    let listener = EagerListener::start(selector.leadership_changes(), selector.watch_leadership(), shows);
    selector.start().unwrap();
    for term in 1..=TERMS {
        support::eventually(WITHIN, &format!("selector term {term} heard"), || async {
            listener.told(term) && selector.has_leadership()
        })
        .await;
        if term < TERMS {
            selector.interrupt_leadership();
        }
    }
    let selector_violations = listener.finish();
    selector.close().await.unwrap();

    assert!(
        latch_violations.is_empty() && selector_violations.is_empty(),
        "latch: {latch_violations:#?}\nselector: {selector_violations:#?}"
    );
    assert!(support::sorted_children(&obs, &path).await.is_empty(), "no selector node left");
}

/// A term that ends (here interrupted) is announced to the selector's listeners before its node
/// is deleted, as the latch does: once another participant leads, no listener of ours still
/// reads `Leader`. The replies to our session are held back 2 s, so our delete's reply comes long
/// after the other participant took over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listeners_hear_a_term_end_before_another_participant_can_lead() {
    let server = support::server().await;
    let proxy = FaultProxy::start(&server.connect_string()).await.expect("proxy");
    let slow = support::client_with(&proxy.connect_string(), Duration::from_secs(20)).await;
    let other = support::client(&server.connect_string()).await;
    let path = support::unique_path("selector-told-before-release");
    let (ours_works, others_works) = (Arc::new(Works::default()), Arc::new(Works::default()));
    let ours = forever(&slow, &path, "ours", &ours_works);
    let theirs = forever(&other, &path, "theirs", &others_works);
    ours.start().unwrap();
    support::eventually(WITHIN, "ours leads", || async { ours.has_leadership() }).await;
    theirs.start().unwrap();
    let watch = ours.watch_leadership();
    let mut stream = ours.leadership_changes();
    assert_eq!(stream.try_next(), Some(LeadershipState::Leader));

    proxy.set_direction_latency(Direction::ToClient, Latency::fixed(Duration::from_secs(2)));
    ours.interrupt_leadership();
    support::eventually(WITHIN, "theirs leads", || async { others_works.started() == 1 }).await;
    let heard: Vec<_> = std::iter::from_fn(|| stream.try_next()).collect();
    assert_eq!(*watch.borrow(), LeadershipState::NotLeader, "our watch once theirs leads");
    assert_eq!(heard.last(), Some(&LeadershipState::NotLeader), "our stream once theirs leads: {heard:?}");

    proxy.set_direction_latency(Direction::ToClient, Latency::NONE);
    theirs.close().await.unwrap();
    ours.close().await.unwrap();
}
