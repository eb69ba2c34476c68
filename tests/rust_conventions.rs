//! Issue 16 §3 against a real ZooKeeper: the state streams are `futures::Stream`s.

mod support;

use std::time::Duration;

use futures::StreamExt;
use zk_curator::testing::expire_session;
use zk_curator::{ConnectionState, HoldState, InterProcessMutex};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_state_streams_are_futures_streams_and_survive_a_cancelled_next() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let client = support::client(&connect).await;

    // Connection states: the current state first, then the changes an expiry brings.
    let mut states = client.connection_states();
    assert_eq!(StreamExt::next(&mut states).await, Some(ConnectionState::Connected));
    assert!(
        tokio::time::timeout(Duration::from_millis(50), StreamExt::next(&mut states)).await.is_err(),
        "nothing changed yet"
    );
    // The cancelled next left a receive in flight; the stream still delivers every change.
    expire_session(&connect, client.zookeeper().unwrap().session()).await.expect("expire the session");
    let lost = tokio::time::timeout(
        Duration::from_secs(30),
        states.by_ref().filter(|s| std::future::ready(*s == ConnectionState::Lost)).next(),
    )
    .await
    .expect("LOST within 30 s");
    assert_eq!(lost, Some(ConnectionState::Lost));
    let back = tokio::time::timeout(
        Duration::from_secs(30),
        states.by_ref().filter(|s| std::future::ready(*s == ConnectionState::Reconnected)).next(),
    )
    .await
    .expect("RECONNECTED within 30 s");
    assert_eq!(back, Some(ConnectionState::Reconnected));

    // Hold states: the stream ends after Lost.
    let path = support::unique_path("stream");
    let mutex = InterProcessMutex::new(&client, &path).unwrap();
    let guard = mutex.lock().await.unwrap();
    let mut changes = guard.state_changes();
    assert!(
        tokio::time::timeout(Duration::from_millis(50), StreamExt::next(&mut changes)).await.is_err(),
        "no change while held"
    );
    obs.delete(guard.node_path(), None).await.expect("delete the lock node under the holder");
    let rest: Vec<HoldState> =
        tokio::time::timeout(Duration::from_secs(10), changes.collect()).await.expect("the stream ends");
    assert_eq!(rest.last(), Some(&HoldState::Lost), "ends with Lost: {rest:?}");
    let _ = guard.release().await;
}
