//! `LeaderSelector` against a real ZooKeeper: one term at a time, auto-requeue and requeue, the work
//! cancelled on loss (expiry, an operator's delete, interrupt, close) before anyone else leads, told
//! on suspension, node names and data as Curator's, and a real Curator `LeaderSelector` on the same
//! path.

use crate::support;

use crate::support::curator_hold::CuratorHold;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_curator::leader::{CloseMode, LatchState, LeaderSelector, Leadership, LeadershipState};
use zk_curator::locks::{FencingToken, HoldState};
use zk_curator::testing::{FaultProxy, ProxyMode};
use zk_curator::CuratorClient;

const WITHIN: Duration = Duration::from_secs(10);

/// One term as the work saw it: from the work's start until it returned or was dropped.
#[derive(Clone, Debug)]
struct Term {
    id: String,
    token: FencingToken,
    start: Instant,
    end: Option<Instant>,
    cancelled: bool,
}

/// Every term of every participant, and how many works run at this instant.
#[derive(Default)]
struct Terms {
    terms: parking_lot::Mutex<Vec<Term>>,
    running: AtomicUsize,
    most_running: AtomicUsize,
}

/// Ends its term when dropped: by returning, or by being cancelled (dropped at an await).
struct TermGuard {
    terms: Arc<Terms>,
    index: usize,
    returned: bool,
}

impl Terms {
    fn begin(self: &Arc<Self>, leadership: &Leadership) -> TermGuard {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_running.fetch_max(now, Ordering::SeqCst);
        let mut terms = self.terms.lock();
        terms.push(Term {
            id: leadership.id().to_string(),
            token: leadership.fencing_token(),
            start: Instant::now(),
            end: None,
            cancelled: false,
        });
        TermGuard { terms: self.clone(), index: terms.len() - 1, returned: false }
    }

    fn all(&self) -> Vec<Term> {
        self.terms.lock().clone()
    }

    fn count(&self) -> usize {
        self.terms.lock().len()
    }

    fn ended(&self) -> usize {
        self.terms.lock().iter().filter(|t| t.end.is_some()).count()
    }

    /// No two terms overlap, tokens increase term by term, and never two works ran at once.
    fn assert_one_at_a_time(&self) {
        assert_eq!(self.most_running.load(Ordering::SeqCst), 1, "never two leadership works at once");
        let terms = self.all();
        for pair in terms.windows(2) {
            let end = pair[0].end.unwrap_or_else(|| panic!("{:?} ended before the next began", pair[0]));
            assert!(end <= pair[1].start, "terms overlap: {pair:?}");
            assert!(pair[0].token < pair[1].token, "fencing tokens increase: {pair:?}");
        }
    }
}

impl TermGuard {
    fn returned(mut self) {
        self.returned = true;
    }
}

impl Drop for TermGuard {
    fn drop(&mut self) {
        let mut terms = self.terms.terms.lock();
        terms[self.index].end = Some(Instant::now());
        terms[self.index].cancelled = !self.returned;
        self.terms.running.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A selector whose work holds leadership for `hold` (forever if `None`), then returns.
fn selector(
    client: &CuratorClient,
    path: &str,
    id: &str,
    terms: &Arc<Terms>,
    hold: Option<Duration>,
) -> LeaderSelector {
    let terms = terms.clone();
    LeaderSelector::new(client, path, id, move |leadership: Leadership| {
        let terms = terms.clone();
        async move {
            let term = terms.begin(&leadership);
            match hold {
                Some(hold) => tokio::time::sleep(hold).await,
                None => std::future::pending().await,
            }
            term.returned();
        }
    })
    .expect("a selector")
}

/// `_c_<uuid>-lock-<10 digits>`.
fn assert_selector_name(name: &str) {
    let rest = name.strip_prefix("_c_").unwrap_or_else(|| panic!("{name}: no _c_ prefix"));
    let (uuid, seq) = rest.split_once("-lock-").unwrap_or_else(|| panic!("{name}: no -lock-"));
    assert_eq!(uuid.len(), 36, "{name}: uuid");
    assert_eq!(seq.len(), 10, "{name}: sequence");
    assert!(seq.bytes().all(|b| b.is_ascii_digit()), "{name}: sequence");
}

// ---------------------------------------------------------------------------------------------

/// Three participants with auto-requeue take turns: one work at a time, tokens increase, every
/// participant leads, node names and data are Curator's, nothing is left after closing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terms_never_overlap_with_auto_requeue() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("selector-turns");
    let terms = Arc::new(Terms::default());
    let mut clients = Vec::new();
    let mut selectors = Vec::new();
    for id in ["s0", "s1", "s2"] {
        let client = support::client(&connect).await;
        let s = selector(&client, &path, id, &terms, Some(Duration::from_millis(30)));
        s.auto_requeue();
        selectors.push(s);
        clients.push(client);
    }
    assert_eq!(selectors[0].state(), LatchState::Latent);
    for s in &selectors {
        s.start().unwrap();
    }
    assert!(selectors[0].start().is_err(), "a selector starts once");
    // While all three are in line: Curator's names, the id as data.
    support::eventually(WITHIN, "three in line", || async { support::sorted_children(&obs, &path).await.len() == 3 })
        .await;
    for name in support::sorted_children(&obs, &path).await {
        assert_selector_name(&name);
    }
    // Terms of 30 ms: a participant may be between its term's end and its requeue at one read.
    support::eventually(WITHIN, "node data is the participant id", || async {
        let mut ids: Vec<String> = selectors[0].participants().await.unwrap().into_iter().map(|p| p.id).collect();
        ids.sort();
        ids == ["s0", "s1", "s2"]
    })
    .await;

    support::eventually(Duration::from_secs(60), "12 terms", || async { terms.ended() >= 12 }).await;
    for s in &selectors {
        s.close().await.unwrap();
        assert!(!s.has_leadership());
    }
    terms.assert_one_at_a_time();
    let terms = terms.all();
    for id in ["s0", "s1", "s2"] {
        assert!(terms.iter().any(|t| t.id == id), "{id} led at least once: {terms:?}");
    }
    assert!(support::sorted_children(&obs, &path).await.is_empty(), "no node left after closing");
}

/// Without auto-requeue a participant leads once per `start` / `requeue`; `requeue` while queued
/// is `false`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requeue_without_auto_requeue() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("selector-requeue");
    let client = support::client(&connect).await;
    let terms = Arc::new(Terms::default());
    let once = selector(&client, &path, "once", &terms, Some(Duration::from_millis(10)));
    let early = once.requeue().expect_err("requeue before start");
    assert_eq!(early.kind(), zk_curator::ErrorKind::BadArgument, "not started is not closed: {early:?}");
    once.start().unwrap();
    support::eventually(WITHIN, "one term", || async { terms.ended() == 1 }).await;
    support::eventually(WITHIN, "the node is gone after the term", || async {
        support::sorted_children(&obs, &path).await.is_empty()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(terms.count(), 1, "no second term without requeue");

    // A leader that never returns; `once` queues behind it.
    let other_client = support::client(&connect).await;
    let blocker = selector(&other_client, &path, "blocker", &terms, None);
    blocker.start().unwrap();
    support::eventually(WITHIN, "blocker leads", || async { blocker.has_leadership() }).await;
    assert!(once.requeue().unwrap(), "queued again");
    assert!(!once.requeue().unwrap(), "already queued");
    support::eventually_queued(&obs, &path, 2, "once in line").await;
    blocker.interrupt_leadership();
    support::eventually(WITHIN, "a second term for once", || async { terms.ended() == 3 }).await;
    once.close().await.unwrap();
    blocker.close().await.unwrap();
    terms.assert_one_at_a_time();
    let ids: Vec<String> = terms.all().into_iter().map(|t| t.id).collect();
    assert_eq!(ids, ["once", "blocker", "once"]);
    assert!(support::sorted_children(&obs, &path).await.is_empty());
}

/// The leader's session is expired by the server on request (as an operator or a test tool
/// would): its work is cancelled, it queues again on its new session, and its leadership stream
/// says `Leader`, then `Lost`, then `NotLeader`. (The server ends the session before the client
/// can know, so the next leader may start a moment before the old work is cancelled: that
/// moment is bounded here only as a hang guard; the natural expiry below is strictly ordered.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_leader_cancels_the_work_and_requeues() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("selector-expiry");
    let terms = Arc::new(Terms::default());
    let client_a = support::client(&connect).await;
    let client_b = support::client(&connect).await;
    let a = selector(&client_a, &path, "a", &terms, None);
    a.auto_requeue();
    a.start().unwrap();
    support::eventually(WITHIN, "a leads", || async { a.has_leadership() }).await;
    let changes = support::record_leadership(a.leadership_changes());
    let b = selector(&client_b, &path, "b", &terms, None);
    b.start().unwrap();
    support::eventually_queued(&obs, &path, 2, "b in line").await;

    zk_curator::testing::expire_session(&connect, &client_a).await.unwrap();
    support::eventually(WITHIN, "b leads", || async { b.has_leadership() }).await;
    support::eventually(WITHIN, "a queued again", || async {
        a.participants().await.unwrap().iter().map(|p| p.id.as_str()).collect::<Vec<_>>() == ["b", "a"]
    })
    .await;
    assert!(!a.has_leadership());
    let seen = terms.all();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(seen[0].cancelled, "a's work was cancelled, not left running: {seen:?}");
    assert_eq!(seen[1].id, "b");
    let overlap = seen[0].end.unwrap().saturating_duration_since(seen[1].start);
    assert!(overlap < Duration::from_secs(5), "the old work was cancelled at once (hang guard): {overlap:?}");
    a.close().await.unwrap();
    b.close().await.unwrap();
    // The expiry tool first takes the session over (a short suspension), then ends it.
    let mut changes: Vec<_> = support::join("stream", WITHIN, changes)
        .await
        .into_iter()
        .filter(|s| *s != LeadershipState::Suspended)
        .collect();
    changes.dedup();
    assert_eq!(changes, [LeadershipState::Leader, LeadershipState::Lost, LeadershipState::NotLeader]);
    assert!(support::sorted_children(&obs, &path).await.is_empty());
}

/// A partition: the leader's link goes silent and the server expires its session after the
/// session timeout. The leader gives up (and its work is cancelled) before the server could
/// expire the session, so the next leader's work starts strictly after the old one stopped
/// (CURATOR-460: tolerating a suspension must not make two leaders).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitioned_leader_stops_before_the_next_one_starts() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let proxy = FaultProxy::start(&connect).await.unwrap();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("selector-partition");
    let terms = Arc::new(Terms::default());
    let client_a = support::client_with(&proxy.connect_string(), Duration::from_secs(4)).await;
    let client_b = support::client(&connect).await;
    let a = selector(&client_a, &path, "a", &terms, None);
    a.start().unwrap();
    support::eventually(WITHIN, "a leads", || async { a.has_leadership() }).await;
    let b = selector(&client_b, &path, "b", &terms, None);
    b.start().unwrap();
    support::eventually_queued(&obs, &path, 2, "b in line").await;

    proxy.set_mode(ProxyMode::Blackhole);
    support::eventually(Duration::from_secs(30), "b leads", || async { b.has_leadership() }).await;
    let seen = terms.all();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(seen[0].cancelled, "{seen:?}");
    terms.assert_one_at_a_time();
    proxy.set_mode(ProxyMode::Pass);
    a.close().await.unwrap();
    b.close().await.unwrap();
    assert!(support::eventually_no_children(&connect, &path, WITHIN).await.is_empty());
}

/// An operator deletes the leader's node (to force a failover): the work is cancelled and the
/// participant, alone, leads again on a new node with a larger token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_node_cancels_the_work_and_requeues() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("selector-delete");
    let client = support::client(&connect).await;
    let terms = Arc::new(Terms::default());
    let a = selector(&client, &path, "a", &terms, None);
    a.auto_requeue();
    a.start().unwrap();
    support::eventually(WITHIN, "a leads", || async { a.has_leadership() }).await;
    let first = a.fencing_token().unwrap();
    let node = support::sorted_children(&obs, &path).await.remove(0);
    obs.delete(&format!("{path}/{node}"), None).await.expect("operator delete");
    support::eventually(WITHIN, "a second term", || async { terms.count() == 2 }).await;
    let seen = terms.all();
    assert!(seen[0].cancelled, "the first work was cancelled: {seen:?}");
    assert!(seen[1].token > first);
    support::eventually(WITHIN, "a leads again", || async { a.has_leadership() }).await;
    assert_ne!(support::sorted_children(&obs, &path).await, [node]);
    terms.assert_one_at_a_time();
    a.close().await.unwrap();
    assert!(support::sorted_children(&obs, &path).await.is_empty());
}

/// `interrupt_leadership` cancels the work and hands over; close cancels the work before it
/// returns and leaves no node; close modes decide the stream's last word.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupt_and_close_cancel_the_work() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("selector-interrupt");
    let client = support::client(&connect).await;
    let terms = Arc::new(Terms::default());
    let a = selector(&client, &path, "a", &terms, None);
    let b = selector(&client, &path, "b", &terms, None).with_close_mode(CloseMode::NotifyLeader);
    a.interrupt_leadership(); // not leading: nothing happens, not even later
    a.start().unwrap();
    support::eventually(WITHIN, "a leads", || async { a.has_leadership() }).await;
    b.start().unwrap();
    support::eventually_queued(&obs, &path, 2, "b in line").await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(a.has_leadership(), "an interrupt made while not leading does not end a later term");
    let a_changes = support::record_leadership(a.leadership_changes());

    a.interrupt_leadership();
    support::eventually(WITHIN, "b leads", || async { b.has_leadership() }).await;
    assert!(!a.has_leadership());
    assert_eq!(a.participants().await.unwrap().len(), 1, "a, without auto-requeue, is not in line");
    let b_changes = support::record_leadership(b.leadership_changes());

    b.close().await.unwrap();
    a.close().await.unwrap();
    let seen = terms.all();
    assert_eq!(seen.len(), 2);
    assert!(
        seen.iter().all(|t| t.cancelled && t.end.is_some()),
        "both works were cancelled by the time close returned: {seen:?}"
    );
    terms.assert_one_at_a_time();
    assert!(support::sorted_children(&obs, &path).await.is_empty(), "no node left");
    // a: Leader, NotLeader (interrupted), then the stream ends silently on close.
    assert_eq!(support::join("a", WITHIN, a_changes).await, [LeadershipState::Leader, LeadershipState::NotLeader]);
    // b closes while leading with NotifyLeader: its stream's last word is NotLeader.
    assert_eq!(support::join("b", WITHIN, b_changes).await, [LeadershipState::Leader, LeadershipState::NotLeader]);
    assert!(matches!(a.requeue(), Err(zk_curator::Error::Closed { .. })), "closed");
}

/// A silent close of a leader ends its stream without a `NotLeader`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_close_ends_the_stream_without_a_word() {
    support::init_tracing();
    let server = support::server().await;
    let client = support::client(&server.connect_string()).await;
    let path = support::unique_path("selector-silent");
    let terms = Arc::new(Terms::default());
    let a = selector(&client, &path, "a", &terms, None);
    a.start().unwrap();
    support::eventually(WITHIN, "a leads", || async { a.has_leadership() }).await;
    let changes = support::record_leadership(a.leadership_changes());
    a.close().await.unwrap();
    assert_eq!(support::join("stream", WITHIN, changes).await, [LeadershipState::Leader]);
}

/// A short connection cut: the work is told (`Suspended`, then `Held` on the same node), not
/// cancelled. With `cancel_on_suspended` the same cut ends the term, and the participant leads
/// again on a new node once reconnected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspension_is_told_or_cancels_as_configured() {
    support::init_tracing();
    let server = support::server().await;
    let proxy = FaultProxy::start(&server.connect_string()).await.unwrap();
    let client = support::client_with(&proxy.connect_string(), Duration::from_secs(10)).await;
    let path = support::unique_path("selector-suspend");

    let told = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let terms = Arc::new(Terms::default());
    let tolerant = {
        let (told, terms) = (told.clone(), terms.clone());
        LeaderSelector::new(&client, &path, "tolerant", move |leadership: Leadership| {
            let (told, terms) = (told.clone(), terms.clone());
            async move {
                let _term = terms.begin(&leadership);
                let mut changes = leadership.state_changes();
                while let Some(state) = changes.next().await {
                    told.lock().push(state);
                }
                std::future::pending::<()>().await;
            }
        })
        .unwrap()
    };
    tolerant.start().unwrap();
    support::eventually(WITHIN, "leads", || async { tolerant.has_leadership() }).await;
    let token = tolerant.fencing_token().unwrap();
    proxy.set_mode(ProxyMode::Cut);
    support::eventually(WITHIN, "suspended", || async {
        tolerant.leadership_state() == LeadershipState::Suspended && !tolerant.has_leadership()
    })
    .await;
    proxy.set_mode(ProxyMode::Pass);
    support::eventually(WITHIN, "leads again", || async { tolerant.has_leadership() }).await;
    assert_eq!(tolerant.fencing_token(), Some(token), "the same term");
    support::eventually(WITHIN, "the work was told", || async {
        told.lock().as_slice() == [HoldState::Suspended, HoldState::Held]
    })
    .await;
    assert_eq!(terms.count(), 1);
    assert!(terms.all()[0].end.is_none(), "the work still runs");
    tolerant.close().await.unwrap();

    let strict = selector(&client, &path, "strict", &terms, None);
    strict.auto_requeue();
    strict.cancel_on_suspended();
    strict.start().unwrap();
    support::eventually(WITHIN, "strict leads", || async { strict.has_leadership() }).await;
    let token = strict.fencing_token().unwrap();
    proxy.set_mode(ProxyMode::Cut);
    support::eventually(WITHIN, "the term ends on suspension", || async { terms.ended() == 2 }).await;
    assert!(terms.all()[1].cancelled);
    proxy.set_mode(ProxyMode::Pass);
    support::eventually(WITHIN, "a new term", || async { strict.has_leadership() }).await;
    assert!(strict.fencing_token().unwrap() > token, "a new node");
    strict.close().await.unwrap();
    terms.assert_one_at_a_time();
    let obs = support::observer(&server.connect_string()).await;
    assert!(support::eventually_no_children(&server.connect_string(), &path, WITHIN).await.is_empty());
    drop(obs);
}

/// A work that panics ends its term like a return: the next participant leads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_work_gives_leadership_up() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let client = support::client(&connect).await;
    let path = support::unique_path("selector-panic");
    let panicky = LeaderSelector::new(&client, &path, "panicky", |_leadership: Leadership| async {
        panic!("the leadership work failed");
    })
    .unwrap();
    let terms = Arc::new(Terms::default());
    let next = selector(&client, &path, "next", &terms, None);
    panicky.start().unwrap();
    next.start().unwrap();
    support::eventually(WITHIN, "next leads", || async { next.has_leadership() }).await;
    assert!(!panicky.has_leadership());
    panicky.close().await.unwrap();
    next.close().await.unwrap();
    assert!(support::eventually_no_children(&connect, &path, WITHIN).await.is_empty());
}

/// A bad path is a typed error; start and drop outside a runtime never panic; dropping a leading
/// selector cancels its work and deletes its node.
#[test]
fn bad_input_and_drop_never_panic() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let (server, client) = rt.block_on(async {
        let server = support::server().await;
        let client = support::client(&server.connect_string()).await;
        (server, client)
    });
    let err = LeaderSelector::new(&client, "no-slash", "x", |_l: Leadership| async {}).unwrap_err();
    assert!(matches!(&err, zk_curator::Error::InvalidPath { path, .. } if path == "no-slash"), "{err:?}");
    let path = support::unique_path("selector-drop");
    let terms = Arc::new(Terms::default());
    let idle = selector(&client, &path, "idle", &terms, None);
    let err = idle.start().expect_err("no runtime here");
    assert!(matches!(&err, zk_curator::Error::InvalidArgument { name: "runtime", .. }), "{err:?}");
    let running = {
        let _entered = rt.enter();
        let s = selector(&client, &path, "running", &terms, None);
        s.start().unwrap();
        s
    };
    rt.block_on(support::eventually(WITHIN, "leads", || async { running.has_leadership() }));
    drop(idle);
    drop(running);
    let connect = server.connect_string();
    assert!(rt.block_on(support::eventually_no_children(&connect, &path, WITHIN)).is_empty(), "the node is deleted");
    rt.block_on(support::eventually(WITHIN, "the work was cancelled", || async { terms.ended() == 1 }));
    assert!(terms.all()[0].cancelled);
    rt.block_on(client.close());
    drop(server);
}

// ---------------------------------------------------------------------------------------------
// A real Curator LeaderSelector on the same path
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interop_with_curator_selector() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("selector-interop");
    let client = support::client(&connect).await;
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    let released = Arc::new(tokio::sync::Mutex::new(Some(released)));
    let rust = LeaderSelector::new(&client, &path, "rust", move |_l: Leadership| {
        let released = released.clone();
        async move {
            if let Some(rx) = released.lock().await.take() {
                let _ = rx.await;
            }
        }
    })
    .unwrap();
    rust.start().unwrap();
    support::eventually(WITHIN, "rust leads", || async { rust.has_leadership() }).await;

    // Curator queues behind the Rust leader, and waits.
    let mut curator = CuratorHold::selector(&connect, &path, 3, "java");
    support::eventually(Duration::from_secs(120), "Curator queued", || async {
        support::sorted_children(&obs, &path).await.len() == 2
    })
    .await;
    for name in support::sorted_children(&obs, &path).await {
        assert_selector_name(&name);
    }
    let ids =
        |ps: Vec<zk_curator::leader::Participant>| ps.into_iter().map(|p| (p.id, p.is_leader)).collect::<Vec<_>>();
    assert_eq!(ids(rust.participants().await.unwrap()), [("rust".into(), true), ("java".into(), false)]);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(rust.has_leadership(), "still the leader");

    // The Rust work returns: Curator leads; a new Rust selector waits behind it.
    release.send(()).unwrap();
    curator.expect("ACQUIRED", Duration::from_secs(30)).await;
    let terms = Arc::new(Terms::default());
    let rust2 = selector(&client, &path, "rust2", &terms, None);
    rust2.start().unwrap();
    support::eventually_queued(&obs, &path, 2, "rust2 queued behind Curator").await;
    assert_eq!(ids(rust2.participants().await.unwrap()), [("java".into(), true), ("rust2".into(), false)]);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert!(!rust2.has_leadership(), "Curator leads");
    assert_eq!(terms.count(), 0, "no Rust work while Curator leads");
    curator.expect("RELEASED", Duration::from_secs(30)).await;
    support::eventually(WITHIN, "rust2 leads", || async { rust2.has_leadership() }).await;
    let _ = tokio::time::timeout(WITHIN, curator.child.wait()).await;
    rust.close().await.unwrap();
    rust2.close().await.unwrap();
    assert!(support::sorted_children(&obs, &path).await.is_empty());
}

/// A leader's `close()` polled once and dropped, then the selector dropped: the close goes on in
/// the background and the node goes only once the work has stopped — the next leader's work
/// starts after the old work stopped, also when stopping takes a while.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_close_then_drop_frees_the_node_only_after_the_work_stopped() {
    /// Stopping the work (dropping its future) takes 400 ms; the instant it is done is recorded.
    struct SlowStop(Arc<parking_lot::Mutex<Option<Instant>>>);
    impl Drop for SlowStop {
        fn drop(&mut self) {
            std::thread::sleep(Duration::from_millis(400));
            *self.0.lock() = Some(Instant::now());
        }
    }
    let (server, clients) = support::server_and_clients(2).await;
    let path = support::unique_path("selector-cancelled-close");
    let stopped = Arc::new(parking_lot::Mutex::new(None));
    let first = {
        let stopped = stopped.clone();
        LeaderSelector::new(&clients[0], &path, "first", move |_: Leadership| {
            let stop = SlowStop(stopped.clone());
            async move {
                let _stop = stop;
                std::future::pending::<()>().await
            }
        })
        .unwrap()
    };
    first.start().unwrap();
    support::eventually(WITHIN, "the first selector leads", || async { first.has_leadership() }).await;
    let started = Arc::new(parking_lot::Mutex::new(None));
    let next = {
        let started = started.clone();
        LeaderSelector::new(&clients[1], &path, "next", move |_: Leadership| {
            *started.lock() = Some(Instant::now());
            std::future::pending::<()>()
        })
        .unwrap()
    };
    next.start().unwrap();
    let obs = support::observer(&server.connect_string()).await;
    support::eventually_queued(&obs, &path, 2, "the next selector queued").await;

    // Both workers are kept busy while close() is polled and the selector dropped, so that its
    // background task reacts only after the drop (as on a loaded machine).
    let busy = Arc::new(AtomicUsize::new(0));
    for _ in 0..2 {
        let busy = busy.clone();
        crate::support::spawn(async move {
            busy.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(300));
        });
    }
    let since = Instant::now();
    while busy.load(Ordering::SeqCst) < 2 {
        assert!(since.elapsed() < WITHIN, "the workers never got busy");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(futures::FutureExt::now_or_never(first.close()).is_none(), "close finished at its first poll");
    drop(first);
    support::eventually(WITHIN, "the next selector leads", || async { started.lock().is_some() }).await;
    support::eventually(WITHIN, "the old work stopped", || async { stopped.lock().is_some() }).await;
    let (stopped, started) = (stopped.lock().unwrap(), started.lock().unwrap());
    eprintln!(
        "the next leader's work started {:?} after the old work stopped",
        started.checked_duration_since(stopped)
    );
    assert!(
        stopped <= started,
        "the next leader's work started {:?} before the old work stopped",
        stopped.duration_since(started)
    );
    next.close().await.unwrap();
}

/// A leader on a runtime of its own whose work stops slowly (it blocks its worker between awaits):
/// `close()` polled once and dropped, the selector dropped, then that runtime shut down while the
/// term waits for the work — the node is still deleted (the client's runtime lives on), and only
/// once the work was dropped: the next leader's work starts after that.
#[test]
fn a_cancelled_close_then_a_shut_down_runtime_frees_the_node_after_the_work() {
    /// Records the instant the work's future is dropped.
    struct Dropped(Arc<parking_lot::Mutex<Option<Instant>>>);
    impl Drop for Dropped {
        fn drop(&mut self) {
            *self.0.lock() = Some(Instant::now());
        }
    }
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let (server, first_client, next_client) = rt.block_on(async {
        let server = support::server().await;
        let first = support::client(&server.connect_string()).await;
        let next = support::client(&server.connect_string()).await;
        (server, first, next)
    });
    let path = support::unique_path("selector-runtime-gone");
    let own = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let dropped = Arc::new(parking_lot::Mutex::new(None));
    let first = {
        let dropped = dropped.clone();
        LeaderSelector::new(&first_client, &path, "first", move |_: Leadership| {
            let dropped = Dropped(dropped.clone());
            async move {
                let _dropped = dropped;
                loop {
                    // Busy between awaits: a cancel takes effect only at the next one.
                    std::thread::sleep(Duration::from_millis(300));
                    tokio::task::yield_now().await;
                }
            }
        })
        .unwrap()
    };
    {
        let _entered = own.enter();
        first.start().unwrap();
    }
    let since = Instant::now();
    while !first.has_leadership() {
        assert!(since.elapsed() < WITHIN, "the first selector never led");
        std::thread::sleep(Duration::from_millis(10));
    }
    let started = Arc::new(parking_lot::Mutex::new(None));
    let next = {
        let started = started.clone();
        LeaderSelector::new(&next_client, &path, "next", move |_: Leadership| {
            *started.lock() = Some(Instant::now());
            std::future::pending::<()>()
        })
        .unwrap()
    };
    rt.block_on(async {
        next.start().unwrap();
        let obs = support::observer(&server.connect_string()).await;
        support::eventually_queued(&obs, &path, 2, "the next selector queued").await;
    });
    own.block_on(async {
        assert!(futures::FutureExt::now_or_never(first.close()).is_none(), "close finished at its first poll");
        // The selector's task reacts on the free worker: the term waits for the work now.
        tokio::time::sleep(Duration::from_millis(100)).await;
    });
    drop(first);
    own.shutdown_timeout(WITHIN);
    rt.block_on(async {
        support::eventually(WITHIN, "the next selector leads (the first's node is deleted)", || async {
            started.lock().is_some()
        })
        .await;
    });
    let (dropped, started) = (dropped.lock().expect("the work was dropped"), started.lock().unwrap());
    assert!(dropped <= started, "the next leader's work started {:?} before the old work stopped", dropped - started);
    rt.block_on(async {
        next.close().await.unwrap();
        first_client.close().await;
        next_client.close().await;
    });
    drop(server);
}

/// A clone is the same participant: it sees the leadership; dropping a clone leaves the work
/// running; closing through a clone stops the work and deletes the node for every clone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selector_clone_is_the_same_participant_and_closing_one_closes_all() {
    let server = support::server().await;
    let connect = server.connect_string();
    let client = support::client(&connect).await;
    let obs = support::observer(&connect).await;
    let path = support::unique_path("selector-clone");
    let terms = Arc::new(Terms::default());
    let selector = selector(&client, &path, "a", &terms, None);
    let clone = selector.clone();
    selector.start().unwrap();
    support::eventually(WITHIN, "the clone sees the leadership", || async { clone.has_leadership() }).await;
    assert_eq!(selector.fencing_token(), clone.fencing_token(), "one leadership");

    let third = clone.clone();
    drop(selector);
    assert_eq!(clone.state(), LatchState::Started, "dropping one clone leaves the selector started");
    assert!(clone.has_leadership(), "and leading");

    third.close().await.unwrap();
    assert_eq!(clone.state(), LatchState::Closed, "closing through one clone closes it for all");
    assert_eq!(terms.running.load(Ordering::SeqCst), 0, "the work stopped");
    assert_eq!(support::sorted_children(&obs, &path).await, Vec::<String>::new(), "the node is gone");
    client.close().await;
}
