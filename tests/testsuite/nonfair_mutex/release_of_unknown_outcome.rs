//! A release whose delete reply was lost: the node is gone, but the release does not know it and
//! retries (in the background) on the same session. If the same session has meanwhile raced for
//! the lock again and re-created the node, the retry must leave that new node alone.

use std::time::Duration;

use crate::support;
use zk_curator::locks::{HoldState, InterProcessNonFairMutex, NONFAIR_LOCK_NAME};
use zk_curator::testing::{FaultProxy, ProxyMode};
use zk_curator::{CuratorClient, RetryNTimes};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_release_never_deletes_the_node_our_session_made_since() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let b = support::client(&connect).await;
    for trial in 0..2 {
        let proxy = FaultProxy::start(&connect).await.unwrap();
        // A retry policy that sleeps longer than a reconnect takes (as Curator's usual 1 s base).
        let a = CuratorClient::builder(&proxy.connect_string())
            .session_timeout(Duration::from_secs(30))
            .connection_timeout(Duration::from_secs(2))
            .retry_policy(RetryNTimes::new(10, Duration::from_secs(1)))
            .connect()
            .await
            .expect("connect");
        let path = support::unique_path("nonfair-retried-release");
        let node = format!("{path}/{NONFAIR_LOCK_NAME}");
        let ma = InterProcessNonFairMutex::new(&a, &path).unwrap();
        let mb = InterProcessNonFairMutex::new(&b, &path).unwrap();

        let ga = ma.lock().await.unwrap();
        let session = a.session();
        // The delete reaches the server, its reply does not: the release's outcome is unknown,
        // so it is retried once the connection is back.
        proxy.set_mode(ProxyMode::DropReplies);
        drop(ga);
        support::eventually(Duration::from_secs(10), "the delete was applied", || async {
            !support::exists(&obs, &node).await
        })
        .await;
        // A short cut: the session survives, and the same session races for the lock again
        // while the release's retry backs off.
        proxy.set_mode(ProxyMode::Cut);
        tokio::time::sleep(Duration::from_millis(20)).await;
        proxy.set_mode(ProxyMode::Pass);
        let ga2 = tokio::time::timeout(Duration::from_secs(15), ma.lock()).await.expect("A re-acquires").unwrap();
        assert_eq!(a.session(), session, "trial {trial}: the session survived the cut");
        support::eventually(Duration::from_secs(20), "A's queued delete ran", || async {
            a.pending_background_deletes() == 0
        })
        .await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(
            support::stat(&obs, &node).await.map(|s| s.czxid),
            Some(ga2.fencing_token().zxid()),
            "trial {trial}: the retried release deleted the node of A's next hold"
        );
        assert!(mb.try_lock().await.unwrap().is_none(), "trial {trial}: B must not acquire while A holds");
        assert_eq!(ga2.hold_state(), HoldState::Held);
        ga2.release().await.unwrap();
        assert!(!support::exists(&obs, &node).await);
        a.close().await;
    }
}
