//! A client that starts like Curator's (`start()` + `block_until_connected`): built while
//! ZooKeeper is down, it connects when the server comes up, and recipe calls made meanwhile wait
//! for the session within their deadlines.

use crate::support;

use std::time::{Duration, Instant};

use zk_curator::locks::InterProcessMutex;
use zk_curator::{ConnectionState, CuratorClient, ErrorKind};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_started_while_zookeeper_is_down_locks_once_it_is_up() {
    support::init_tracing();
    let mut server = support::owned_server().await;
    let connect = server.connect_string();
    server.stop().await.expect("stop the server");

    let client = CuratorClient::builder(&connect)
        .session_timeout(Duration::from_secs(10))
        .connection_timeout(Duration::from_secs(20))
        .start()
        .expect("start() does not need a server");
    assert_eq!(client.connection_state(), ConnectionState::Latent);
    let mut states = client.connection_states();
    assert_eq!(states.next().await, Some(ConnectionState::Latent));
    assert!(!client.block_until_connected(Duration::from_millis(300)).await.unwrap(), "connected to a stopped server");

    // A timed call keeps its deadline without a session; an untimed one waits for the session.
    let mutex = InterProcessMutex::new(&client, &support::unique_path("startup")).unwrap();
    let started = Instant::now();
    let early = mutex.try_lock_for(Duration::from_millis(300)).await;
    assert!(started.elapsed() < Duration::from_secs(5), "try_lock_for(300 ms) took {:?}", started.elapsed());
    match early {
        Ok(None) => {}
        Err(e) => assert_eq!(e.kind(), ErrorKind::Retryable, "{e}"),
        Ok(Some(_)) => panic!("a lock without a server"),
    }
    let pending = crate::support::spawn({
        let mutex = mutex.clone();
        async move { mutex.lock().await }
    });
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!pending.is_finished(), "lock() returned without a server");

    server.restart().await.expect("start the server");
    let guard =
        support::join("the pending lock", Duration::from_secs(30), pending).await.expect("lock once the server is up");
    assert!(client.block_until_connected(Duration::from_secs(1)).await.unwrap());
    assert_eq!(states.next().await, Some(ConnectionState::Connected), "the first session is CONNECTED");
    assert_eq!(guard.hold().session(), client.session());
    assert_ne!(client.session_id(), 0);
    guard.release().await.unwrap();
    client.close().await;
    // A closed client never connects again: an error, not a time-out (`Ok(false)`).
    let err = client.block_until_connected(Duration::from_millis(100)).await.expect_err("closed");
    assert_eq!(err.kind(), zk_curator::ErrorKind::Closed, "{err:?}");
}

/// Closing a client that never connected ends its background connecting, promptly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_a_latent_client_stops_it() {
    let client = CuratorClient::builder("127.0.0.1:1").start().unwrap();
    let started = Instant::now();
    client.close().await;
    assert!(started.elapsed() < Duration::from_secs(5), "close took {:?}", started.elapsed());
    let err = InterProcessMutex::new(&client, "/x").unwrap().try_lock_for(Duration::from_secs(1)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Closed, "{err}");
}

/// `start()` outside a tokio runtime is a typed error, never a panic.
#[test]
fn start_outside_a_runtime_is_an_error() {
    let err = CuratorClient::builder("127.0.0.1:2181").start().map(|_| ()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadArgument, "{err}");
    assert!(err.to_string().contains("runtime"), "{err}");
}
