//! Rust conventions against a real ZooKeeper: the state streams are `futures::Stream`s, and a
//! Curator-style hold whose task ended without its release is never reachable by another task,
//! and is released and reported once its lock instance is dropped.

use crate::support;

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use zk_curator::locks::{HoldState, InterProcessMutex};
use zk_curator::testing::expire_session;
use zk_curator::{ConnectionState, Error};

const PROMPT: Duration = Duration::from_secs(3);

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
    expire_session(&connect, &client).await.expect("expire the session");
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

/// A `tracing` writer into a buffer.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Tasks that end without their release — by an early `?` or a panic — leave holds that no other
/// task can re-enter or release, however many tasks come after them (tokio task ids of ended tasks
/// never come back). Dropping the lock instance deletes their nodes and warns about each.
#[tokio::test(flavor = "current_thread")]
async fn a_hold_of_an_ended_task_is_never_reachable_and_is_released_loudly_with_its_instance() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let client = support::client(&connect).await;
    let path = support::unique_path("orphan");
    let mutex = InterProcessMutex::new(&client, &path).unwrap();

    // One task returns early with `?` between acquire and release; one panics.
    let m = mutex.clone();
    let early = crate::support::spawn(async move {
        m.acquire().await?;
        Err::<(), Error>(Error::Closed { path: "an early `?`".into() })?;
        m.release().await
    });
    assert!(early.await.unwrap().is_err());
    let orphan = support::sorted_children(&obs, &path).await;
    assert_eq!(orphan.len(), 1, "the ended task's node is still there");
    // A later task queues behind the orphan (it does not re-enter it), and is aborted while waiting.
    let m = mutex.clone();
    let waiting = crate::support::spawn(async move {
        let acquired = m.acquire_timeout(Duration::from_millis(200)).await.unwrap();
        assert!(!acquired, "a later task re-entered the ended task's hold");
        m.acquire().await.unwrap();
    });
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(!waiting.is_finished(), "a later task got the lock while the orphan holds it");
    waiting.abort();
    assert!(waiting.await.unwrap_err().is_cancelled());

    // Many later tasks on the same thread: none owns, re-enters or releases the orphaned hold.
    for i in 0..2_000 {
        let m = mutex.clone();
        let verdict = crate::support::spawn(async move {
            assert!(!m.is_owned_by_current_task(), "task {i} owns an ended task's hold");
            assert!(m.current_hold().is_none(), "task {i} sees an ended task's hold");
            match m.release().await {
                Err(Error::NotOwner { .. }) => {}
                other => panic!("task {i} released an ended task's hold: {other:?}"),
            }
        });
        verdict.await.unwrap();
    }
    let m = mutex.clone();
    let reentered = crate::support::spawn(async move { m.acquire_timeout(Duration::from_millis(300)).await.unwrap() });
    assert!(!reentered.await.unwrap(), "a later task re-entered an ended task's hold");
    assert_eq!(support::sorted_children(&obs, &path).await, orphan, "the orphan is still held, nothing else");
    assert!(mutex.is_acquired_in_this_process());

    // A task that panics while holding: its hold is as unreachable, and released with the rest.
    let other = InterProcessMutex::new(&client, &format!("{path}-b")).unwrap();
    let o = other.clone();
    let panicked = crate::support::spawn(async move {
        o.acquire().await.unwrap();
        panic!("between acquire and release");
    });
    assert!(panicked.await.unwrap_err().is_panic());
    let o = other.clone();
    let verdict = crate::support::spawn(async move { o.release().await });
    assert!(matches!(verdict.await.unwrap(), Err(Error::NotOwner { .. })), "released a panicked task's hold");
    assert_eq!(support::sorted_children(&obs, &format!("{path}-b")).await.len(), 1);

    // Dropping the instances (every clone) releases the orphans, with a warning naming each node.
    let log = Captured::default();
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt().with_writer(move || writer.clone()).with_ansi(false).finish();
    tracing::subscriber::with_default(subscriber, || {
        drop(mutex);
        drop(other);
    });
    let left = support::eventually_no_children(&connect, &path, PROMPT).await;
    assert!(left.is_empty(), "the orphaned node was not deleted: {left:?}");
    let left = support::eventually_no_children(&connect, &format!("{path}-b"), PROMPT).await;
    assert!(left.is_empty(), "the panicked task's node was not deleted: {left:?}");
    let log = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    assert_eq!(log.matches("WARN").count(), 2, "one warning per orphaned hold: {log}");
    assert!(log.contains(&orphan[0]), "the warning names the node: {log}");
}
