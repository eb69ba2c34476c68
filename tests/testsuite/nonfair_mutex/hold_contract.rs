//! The non-fair mutex keeps the hold contract of every lock: its node layout, guards and
//! Curator-style re-entrancy, fencing tokens in hold order, strict deadlines, bad input.

use std::time::{Duration, Instant};

use crate::support;
use zk_curator::locks::{GuardedWrite, HoldState, InterProcessNonFairMutex, NONFAIR_LOCK_NAME};
use zk_curator::testing::{FaultProxy, ProxyMode};
use zk_curator::{Error, ErrorKind};

/// A generous bound against a hang, not a performance assertion.
const PROMPT: Duration = Duration::from_secs(3);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_free_lock_is_one_ephemeral_node_of_a_fixed_name_owned_by_the_holder() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let client = support::client(&connect).await;
    let obs = support::observer(&connect).await;
    let path = support::unique_path("nonfair-layout");
    let m = InterProcessNonFairMutex::new(&client, &path).unwrap();
    assert_eq!(m.node_path(), format!("{path}/{NONFAIR_LOCK_NAME}"));

    let guard = m.lock().await.unwrap();
    assert_eq!(support::sorted_children(&obs, &path).await, vec![NONFAIR_LOCK_NAME.to_string()]);
    let stat = support::stat(&obs, &m.node_path()).await.expect("the lock node");
    assert_eq!(stat.ephemeral_owner, client.session_id(), "EPHEMERAL, owned by the holder's session");
    assert_eq!(guard.node_path(), m.node_path());
    assert_eq!(guard.fencing_token().zxid(), stat.czxid, "the token is the node's czxid");
    assert_eq!(guard.hold_state(), HoldState::Held);
    // A guarded write passes while held.
    let resource = format!("{path}-resource");
    client.create(&resource).creating_parent_containers_if_needed().await.unwrap();
    guard.guarded_write(GuardedWrite::new().set_data(&resource, b"x", None)).await.expect("guarded write");
    guard.release().await.unwrap();
    assert!(!support::exists(&obs, &m.node_path()).await, "released: the node is gone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_style_holds_are_reentrant_per_task_and_guards_are_not() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let client = support::client(&connect).await;
    let obs = support::observer(&connect).await;
    let path = support::unique_path("nonfair-reentrant");
    let m = InterProcessNonFairMutex::new(&client, &path).unwrap();

    m.acquire().await.unwrap();
    let token = m.current_hold().unwrap().fencing_token();
    assert!(m.acquire_timeout(Duration::from_millis(100)).await.unwrap(), "re-entered");
    assert_eq!(m.current_hold().unwrap().fencing_token(), token, "the same hold");
    let other = {
        let m = m.clone();
        crate::support::spawn(async move { m.acquire_timeout(Duration::from_millis(200)).await.unwrap() })
    };
    assert!(!support::join("another task", PROMPT * 10, other).await, "another task does not get it");
    m.release().await.unwrap();
    assert!(support::exists(&obs, &m.node_path()).await, "still held once");
    m.release().await.unwrap();
    assert!(!support::exists(&obs, &m.node_path()).await);
    let e = m.release().await.expect_err("nothing held");
    assert!(matches!(&e, Error::NotOwner { path: p, .. } if *p == path), "{e:?}");

    let guard = m.lock().await.unwrap();
    assert!(m.try_lock().await.unwrap().is_none(), "a guard is never re-entered");
    assert!(m.try_lock_for(Duration::from_millis(100)).await.unwrap().is_none());
    drop(guard);
    support::eventually(PROMPT, "a dropped guard releases", || async { !support::exists(&obs, &m.node_path()).await })
        .await;
}

/// Holders on two clients, several tasks each (local hand-offs included): tokens strictly increase
/// in hold order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_tokens_increase_from_holder_to_holder() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let path = support::unique_path("nonfair-tokens");
    let order = std::sync::Arc::new(tokio::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for _ in 0..2 {
        let client = support::client(&connect).await;
        let m = InterProcessNonFairMutex::new(&client, &path).unwrap();
        for _ in 0..3 {
            let (m, order) = (m.clone(), order.clone());
            tasks.push(crate::support::spawn(async move {
                for _ in 0..15 {
                    let guard = m.lock().await.unwrap();
                    // Recorded while held: the order of this list is the hold order.
                    order.lock().await.push(guard.fencing_token());
                    tokio::time::sleep(Duration::from_micros(300)).await;
                    guard.release().await.unwrap();
                }
            }));
        }
    }
    for task in tasks {
        support::join("holder", Duration::from_secs(60), task).await;
    }
    let order = order.lock().await;
    assert_eq!(order.len(), 90);
    for pair in order.windows(2) {
        assert!(pair[0] < pair[1], "tokens in hold order must increase: {} then {}", pair[0], pair[1]);
    }
    assert!(order.iter().any(|t| t.handoff() > 0), "some holds were local hand-offs");
}

/// Timed calls return by their deadline whatever the connection does, and a create whose reply
/// was lost leaves no node once the connection is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timed_calls_keep_their_deadline_and_leave_no_node() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let proxy = FaultProxy::start(&connect).await.unwrap();
    let client =
        support::client_with_timeouts(&proxy.connect_string(), Duration::from_secs(30), Duration::from_secs(15)).await;
    let other = support::client(&connect).await;
    let path = support::unique_path("nonfair-deadline");
    let m = InterProcessNonFairMutex::new(&client, &path).unwrap();

    // Held elsewhere: a timed acquire gives up by its deadline.
    let held = InterProcessNonFairMutex::new(&other, &path).unwrap().lock().await.unwrap();
    // A persistent sibling keeps the lock path from being reaped (a container) once it is free.
    let obs = support::observer(&connect).await;
    let keep = format!("{path}/keep");
    obs.create(&keep, b"", &zk_curator::raw::CreateMode::Persistent.with_acls(zk_curator::raw::Acls::anyone_all()))
        .await
        .unwrap();
    let start = Instant::now();
    assert!(!m.acquire_timeout(Duration::from_millis(300)).await.unwrap());
    assert!(m.try_lock_for(Duration::from_millis(300)).await.unwrap().is_none());
    assert!(m.try_lock().await.unwrap().is_none());
    assert!(start.elapsed() < PROMPT, "timed calls hung: {:?}", start.elapsed());
    held.release().await.unwrap();

    // A silent connection: the create reaches the server (`keep` holds the path), its reply
    // does not.
    proxy.set_mode(ProxyMode::DropReplies);
    let start = Instant::now();
    assert!(m.try_lock_for(Duration::from_millis(300)).await.unwrap().is_none());
    assert!(!m.acquire_timeout(Duration::from_millis(300)).await.unwrap());
    assert!(start.elapsed() < PROMPT, "timed calls on a silent connection hung: {:?}", start.elapsed());
    assert!(support::exists(&obs, &m.node_path()).await, "the lost create made the node");
    proxy.set_mode(ProxyMode::Pass);
    support::eventually(Duration::from_secs(20), "the node whose create reply was lost is deleted", || async {
        !support::exists(&obs, &m.node_path()).await
    })
    .await;
    obs.delete(&keep, None).await.unwrap();
    let guard = m.try_lock_for(Duration::from_secs(5)).await.unwrap().expect("free lock acquired");
    guard.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_paths_are_typed_errors_naming_the_path() {
    support::init_tracing();
    let server = support::server().await;
    let client = support::client(&server.connect_string()).await;
    for bad in ["", "relative", "/trailing/", "/", "/a//b", "/nul\0x"] {
        let e = InterProcessNonFairMutex::new(&client, bad).expect_err(bad);
        assert_eq!(e.kind(), ErrorKind::BadArgument, "{bad:?}: {e:?}");
        assert!(matches!(&e, Error::InvalidPath { path, .. } if path == bad), "{e:?}");
    }
}
