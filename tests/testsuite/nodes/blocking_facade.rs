//! The blocking `PersistentNode` and `GroupMember`, used from plain threads: registered, seen by
//! the group, closed with nothing left.

use std::time::Duration;

use zk_curator::nodes::{MembershipEvent, Protection};
use zk_curator::{blocking, CreateMode, RetryNTimes};

use super::WITHIN;
use crate::support;

fn blocking_client(connect: &str) -> blocking::CuratorClient {
    let builder = zk_curator::CuratorClient::builder(connect)
        .session_timeout(Duration::from_secs(10))
        .connection_timeout(Duration::from_secs(5))
        .retry_policy(RetryNTimes::new(10, Duration::from_millis(100)));
    blocking::CuratorClient::from_builder(builder).expect("connect")
}

#[test]
fn blocking_nodes_and_members_work_from_plain_threads_and_leave_nothing() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let server = rt.block_on(support::server());
    let connect = server.connect_string();
    let (a, b) = (blocking_client(&connect), blocking_client(&connect));
    let parent = support::unique_path("blocking-nodes");
    let node = blocking::PersistentNode::new(
        &a,
        &format!("{parent}/reg-"),
        CreateMode::EphemeralSequential,
        Protection::Protected,
        b"x".to_vec(),
    )
    .unwrap();
    node.start().unwrap();
    assert!(node.wait_for_initial_create(WITHIN).unwrap());
    assert_eq!(rt.block_on(support::children(&connect, &parent)).len(), 1);
    node.close().unwrap();
    assert!(rt.block_on(support::children(&connect, &parent)).is_empty());

    let group = support::unique_path("blocking-group");
    let first = blocking::GroupMember::new(&a, &group, "a", b"1".to_vec()).unwrap();
    first.start().unwrap();
    assert!(first.wait_for_initial_create(WITHIN).unwrap());
    let mut changes = first.changes();
    let second = std::thread::spawn(move || {
        let member = blocking::GroupMember::new(&b, &group, "b", b"2".to_vec()).unwrap();
        member.start().unwrap();
        assert!(member.wait_for_initial_create(WITHIN).unwrap());
        member
    })
    .join()
    .unwrap();
    assert_eq!(
        changes.next_timeout(WITHIN).unwrap(),
        Some(MembershipEvent::Joined { id: "b".into(), data: b"2".to_vec() })
    );
    // Dropped on a plain thread: it leaves the group in the background.
    std::thread::spawn(move || drop(second)).join().unwrap();
    assert_eq!(changes.next_timeout(WITHIN).unwrap(), Some(MembershipEvent::Left { id: "b".into() }));
    first.close().unwrap();
}
