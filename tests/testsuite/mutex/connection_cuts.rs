//! A hold across a connection cut: a guarded write (sent once) waits for the connection under the
//! client's retry policy, riding out a cut longer than the connection timeout on the hold's session.

use zk_curator::locks::{GuardedWrite, HoldState, InterProcessMutex};
use zk_curator::testing::FaultProxy;
use zk_curator::CreateMode;

use crate::support::{self, during_a_cut, riding_client};

#[tokio::test]
async fn a_guarded_write_during_a_cut_longer_than_the_connection_timeout_rides_it_out() {
    let server = support::server().await;
    let proxy = FaultProxy::start(&server.connect_string()).await.expect("proxy");
    let client = riding_client(&proxy.connect_string()).await;
    let path = support::unique_path("mutex-cut-guarded");
    let target = format!("{path}-written");
    let mutex = InterProcessMutex::new(&client, &path).expect("mutex");
    let guard = mutex.lock().await.expect("lock");
    let session = client.session_id();

    let written = during_a_cut(&proxy, &client, {
        let (hold, target) = (guard.hold().clone(), target.clone());
        async move { hold.guarded_write(GuardedWrite::new().create(&target, b"v", CreateMode::Persistent)).await }
    })
    .await
    .expect("a guarded write during a cut the retry policy outlasts");

    assert_eq!(written.len(), 1);
    assert_eq!(client.session_id(), session, "the session survived the cut");
    assert!(support::poll_until(support::CUT, || async { guard.hold().hold_state() == HoldState::Held }).await);
    let zk = support::observer(&server.connect_string()).await;
    assert!(support::exists(&zk, &target).await, "written");
    guard.release().await.expect("release");
}
