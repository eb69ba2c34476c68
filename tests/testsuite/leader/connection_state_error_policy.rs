//! The client's `ConnectionStateErrorPolicy` as the leader recipes honour it on a cut link:
//! `Standard` (Curator's default) gives a suspended leadership up, `Session` (ours) waits the
//! suspension out on the same node.

use crate::support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use zk_curator::framework::ConnectionStateErrorPolicy;
use zk_curator::leader::{LeaderLatch, LeaderSelector, Leadership, LeadershipState};
use zk_curator::testing::{FaultProxy, ProxyMode};
use zk_curator::{CuratorClient, RetryNTimes};

const WITHIN: Duration = Duration::from_secs(10);

/// A client through `proxy` with `policy`; its 10 s session outlasts the cuts of these tests.
async fn client_with_policy(proxy: &FaultProxy, policy: ConnectionStateErrorPolicy) -> CuratorClient {
    CuratorClient::builder(&proxy.connect_string())
        .session_timeout(Duration::from_secs(10))
        .connection_timeout(Duration::from_secs(1))
        .retry_policy(RetryNTimes::new(100, Duration::from_millis(100)))
        .connection_state_error_policy(policy)
        .connect()
        .await
        .expect("connect")
}

/// Counts the selector's terms that started and those that were cancelled (their future dropped
/// before it returned: the work never returns by itself).
#[derive(Default)]
struct Works {
    started: AtomicUsize,
    cancelled: AtomicUsize,
}

struct CancelledOnDrop(Arc<Works>);

impl Drop for CancelledOnDrop {
    fn drop(&mut self) {
        self.0.cancelled.fetch_add(1, Ordering::SeqCst);
    }
}

fn endless_selector(client: &CuratorClient, path: &str, works: &Arc<Works>) -> LeaderSelector {
    let works = works.clone();
    let selector = LeaderSelector::new(client, path, "selector", move |_leadership: Leadership| {
        let works = works.clone();
        async move {
            works.started.fetch_add(1, Ordering::SeqCst);
            let _cancelled = CancelledOnDrop(works);
            std::future::pending::<()>().await;
        }
    })
    .expect("selector");
    selector.auto_requeue();
    selector
}

/// Under `Standard`, a cut (far shorter than the session) ends both leaderships at SUSPENDED, as
/// Curator's latch and `LeaderSelectorListenerAdapter` do: the latch says `NotLeader` (never
/// `Suspended`) and, once reconnected, leads again on a new node, the old one deleted; the
/// selector's work is cancelled and a new term starts on a new node. The session survives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_standard_policy_gives_a_suspended_leadership_up() {
    support::init_tracing();
    let server = support::server().await;
    let proxy = FaultProxy::start(&server.connect_string()).await.expect("proxy");
    let client = client_with_policy(&proxy, ConnectionStateErrorPolicy::Standard).await;
    assert_eq!(client.connection_state_error_policy(), ConnectionStateErrorPolicy::Standard);
    let latch_path = support::unique_path("policy-standard-latch");
    let selector_path = support::unique_path("policy-standard-selector");

    let latch = LeaderLatch::new(&client, &latch_path, "latch").unwrap();
    latch.start().unwrap();
    let works = Arc::new(Works::default());
    let selector = endless_selector(&client, &selector_path, &works);
    selector.start().unwrap();
    support::eventually(WITHIN, "both lead", || async { latch.has_leadership() && selector.has_leadership() }).await;
    let latch_token = latch.fencing_token().unwrap();
    let selector_token = selector.fencing_token().unwrap();
    let changes = support::record_leadership(latch.leadership_changes());
    let session = client.session();

    support::cut_off(&proxy, &client).await;
    support::eventually(WITHIN, "the selector's work is cancelled while cut off", || async {
        works.cancelled.load(Ordering::SeqCst) == 1
    })
    .await;
    support::eventually(WITHIN, "the latch gives leadership up while cut off", || async {
        latch.leadership_state() == LeadershipState::NotLeader
    })
    .await;
    proxy.set_mode(ProxyMode::Pass);

    support::eventually(WITHIN, "both lead again", || async { latch.has_leadership() && selector.has_leadership() })
        .await;
    assert_eq!(client.session(), session, "the cut cost no session: the policy gave leadership up");
    assert!(latch.fencing_token().unwrap() > latch_token, "the latch leads on a new node");
    assert!(selector.fencing_token().unwrap() > selector_token, "the selector leads on a new node");
    assert_eq!(works.started.load(Ordering::SeqCst), 2, "a new term");
    let obs = support::observer(&server.connect_string()).await;
    support::eventually(WITHIN, "the latch's old node is deleted", || async {
        support::sorted_children(&obs, &latch_path).await.len() == 1
    })
    .await;

    latch.close().await.unwrap();
    selector.close().await.unwrap();
    let seen = support::join("latch stream", WITHIN, changes).await;
    assert_eq!(
        seen,
        [LeadershipState::Leader, LeadershipState::NotLeader, LeadershipState::Leader],
        "given up at SUSPENDED, never suspended"
    );
    assert!(support::eventually_no_children(&server.connect_string(), &latch_path, WITHIN).await.is_empty());
    assert!(support::eventually_no_children(&server.connect_string(), &selector_path, WITHIN).await.is_empty());
    client.close().await;
}

/// Under `Session` (the default), the same cut only suspends leadership: the latch says
/// `Suspended`, then `Leader` again on the same node; the selector's work runs on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_policy_waits_a_suspended_leadership_out() {
    support::init_tracing();
    let server = support::server().await;
    let proxy = FaultProxy::start(&server.connect_string()).await.expect("proxy");
    let client = client_with_policy(&proxy, ConnectionStateErrorPolicy::default()).await;
    assert_eq!(client.connection_state_error_policy(), ConnectionStateErrorPolicy::Session, "the default");
    let latch_path = support::unique_path("policy-session-latch");
    let selector_path = support::unique_path("policy-session-selector");

    let latch = LeaderLatch::new(&client, &latch_path, "latch").unwrap();
    latch.start().unwrap();
    let works = Arc::new(Works::default());
    let selector = endless_selector(&client, &selector_path, &works);
    selector.start().unwrap();
    support::eventually(WITHIN, "both lead", || async { latch.has_leadership() && selector.has_leadership() }).await;
    let latch_token = latch.fencing_token().unwrap();
    let selector_token = selector.fencing_token().unwrap();
    let changes = support::record_leadership(latch.leadership_changes());

    support::cut_off(&proxy, &client).await;
    support::eventually(WITHIN, "the latch's leadership is suspended", || async {
        latch.leadership_state() == LeadershipState::Suspended
    })
    .await;
    proxy.set_mode(ProxyMode::Pass);

    support::eventually(WITHIN, "both lead again", || async { latch.has_leadership() && selector.has_leadership() })
        .await;
    assert_eq!(latch.fencing_token(), Some(latch_token), "the latch's same node");
    assert_eq!(selector.fencing_token(), Some(selector_token), "the selector's same term");
    assert_eq!(works.cancelled.load(Ordering::SeqCst), 0, "the work ran on");
    latch.close().await.unwrap();
    selector.close().await.unwrap();
    let seen = support::join("latch stream", WITHIN, changes).await;
    assert_eq!(seen, [LeadershipState::Leader, LeadershipState::Suspended, LeadershipState::Leader]);
    client.close().await;
}

/// Under `Standard`, a latch closed while cut off — its suspended leadership given up and a new
/// attempt queueing meanwhile — leaves no node once the link is back: neither the given-up node
/// (released in the background) nor the new attempt's, on a session that lives on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_latch_closed_while_its_suspended_leadership_is_given_up_leaves_no_node() {
    support::init_tracing();
    let server = support::server().await;
    let proxy = FaultProxy::start(&server.connect_string()).await.expect("proxy");
    let client = client_with_policy(&proxy, ConnectionStateErrorPolicy::Standard).await;
    let path = support::unique_path("policy-standard-closed-latch");
    let latch = LeaderLatch::new(&client, &path, "latch").unwrap();
    latch.start().unwrap();
    support::eventually(WITHIN, "the latch leads", || async { latch.has_leadership() }).await;
    let session = client.session();

    support::cut_off(&proxy, &client).await;
    support::eventually(WITHIN, "the latch gives leadership up while cut off", || async {
        latch.leadership_state() == LeadershipState::NotLeader
    })
    .await;
    let closed = tokio::time::timeout(WITHIN, latch.close()).await.expect("close returns while cut off");
    drop(closed);
    proxy.set_mode(ProxyMode::Pass);

    assert!(
        support::eventually_no_children(&server.connect_string(), &path, WITHIN).await.is_empty(),
        "nothing of the closed latch is left"
    );
    assert_eq!(client.session(), session, "the session lived on: its nodes were deleted, not expired");
    client.close().await;
}

/// Under `Standard`, the give-up and the new attempt race once the link is back: however they
/// interleave, the latch ends leading on exactly one node of its own, and one participant only
/// ever leads (a second latch on another client never sees two leaders in the participants).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_given_up_leadership_is_taken_again_on_one_node_only() {
    support::init_tracing();
    let server = support::server().await;
    let proxy = FaultProxy::start(&server.connect_string()).await.expect("proxy");
    let client = client_with_policy(&proxy, ConnectionStateErrorPolicy::Standard).await;
    let path = support::unique_path("policy-standard-one-node");
    let latch = LeaderLatch::new(&client, &path, "latch").unwrap();
    latch.start().unwrap();
    support::eventually(WITHIN, "the latch leads", || async { latch.has_leadership() }).await;
    let obs = support::observer(&server.connect_string()).await;
    for round in 0..3 {
        let token = latch.fencing_token().unwrap();
        support::cut_off(&proxy, &client).await;
        support::eventually(WITHIN, "the latch gives leadership up while cut off", || async {
            latch.leadership_state() == LeadershipState::NotLeader
        })
        .await;
        proxy.set_mode(ProxyMode::Pass);
        support::eventually(WITHIN, "the latch leads again", || async { latch.has_leadership() }).await;
        assert!(latch.fencing_token().unwrap() > token, "round {round}: a new node, a larger token");
        support::eventually(WITHIN, "one node of ours", || async {
            support::sorted_children(&obs, &path).await.len() == 1
        })
        .await;
        assert!(latch.has_leadership(), "round {round}: still leading on the one node left");
    }
    latch.close().await.unwrap();
    assert!(support::eventually_no_children(&server.connect_string(), &path, WITHIN).await.is_empty());
    client.close().await;
}
