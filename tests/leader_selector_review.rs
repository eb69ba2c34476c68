//! Adversarial review of `LeaderSelector`, the leadership state stream and the latch's new close
//! modes / guarded writes, against a real ZooKeeper: lost holds, sessions replaced mid-call,
//! cancelled futures, silent links and flapping, absurd input, stream semantics.

mod support;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use zk_curator::testing::{FaultProxy, ProxyMode};
use zk_curator::{
    CloseMode, CuratorClient, Error, HoldState, LatchState, LeaderLatch, LeaderSelector, Leadership, LeadershipState,
};

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
    holds: parking_lot::Mutex<Vec<Arc<zk_curator::Hold>>>,
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
    fn last_hold(&self) -> Option<Arc<zk_curator::Hold>> {
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

fn record(mut changes: zk_curator::LeadershipStream) -> tokio::task::JoinHandle<Vec<LeadershipState>> {
    tokio::spawn(async move {
        let mut seen = Vec::new();
        while let Some(state) = changes.next().await {
            seen.push(state);
        }
        seen
    })
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
    let one = tokio::spawn({
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
