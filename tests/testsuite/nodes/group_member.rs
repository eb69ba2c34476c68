//! `GroupMember`: members see each other join, change data and leave; a member is back after
//! its session is replaced.

use zk_curator::nodes::{GroupMember, MembershipEvent};
use zk_curator::testing::expire_session;

use super::WITHIN;
use crate::support;

async fn next_event(stream: &mut zk_curator::nodes::MembershipStream) -> MembershipEvent {
    tokio::time::timeout(WITHIN, stream.next()).await.expect("an event in time").expect("stream open")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_see_each_other_join_change_their_data_and_leave() {
    let (server, clients) = support::server_and_clients(2).await;
    let obs = support::observer(&server.connect_string()).await;
    let path = support::unique_path("group");
    let a = GroupMember::new(&clients[0], &path, "a", b"a1".to_vec()).unwrap();
    a.start().unwrap();
    assert!(a.wait_for_initial_create(WITHIN).await.unwrap());
    let mut changes = a.changes();
    let b = GroupMember::new(&clients[1], &path, "b", b"b1".to_vec()).unwrap();
    b.start().unwrap();
    assert!(b.wait_for_initial_create(WITHIN).await.unwrap());
    assert_eq!(next_event(&mut changes).await, MembershipEvent::Joined { id: "b".into(), data: b"b1".to_vec() });
    assert_eq!(b.current_members().get("a").map(Vec::as_slice), Some(&b"a1"[..]), "b sees a");
    assert_eq!(b.current_members().len(), 2);
    b.set_this_data(b"b2".to_vec()).unwrap();
    assert_eq!(next_event(&mut changes).await, MembershipEvent::DataChanged { id: "b".into(), data: b"b2".to_vec() });
    assert_eq!(obs.get_data(&format!("{path}/b")).await.unwrap().0, b"b2");
    b.close().await.unwrap();
    assert_eq!(next_event(&mut changes).await, MembershipEvent::Left { id: "b".into() });
    assert_eq!(a.current_members().keys().collect::<Vec<_>>(), ["a"]);
    a.close().await.unwrap();
    assert!(support::sorted_children(&obs, &path).await.is_empty(), "no member left");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_whose_session_is_replaced_is_back_in_the_group_with_its_latest_data() {
    let (server, clients) = support::server_and_clients(2).await;
    let connect = server.connect_string();
    let path = support::unique_path("group-expiry");
    let a = GroupMember::new(&clients[0], &path, "a", b"a1".to_vec()).unwrap();
    let watcher = GroupMember::new(&clients[1], &path, "w", vec![]).unwrap();
    a.start().unwrap();
    watcher.start().unwrap();
    assert!(a.wait_for_initial_create(WITHIN).await.unwrap());
    assert!(watcher.wait_for_initial_create(WITHIN).await.unwrap());
    a.set_this_data(b"a2".to_vec()).unwrap();
    let session = clients[0].session_id();
    expire_session(&connect, &clients[0]).await.expect("expire");
    support::session_replaced(&clients[0], session).await;
    support::eventually(WITHIN, "the watcher sees a back with its latest data", || async {
        watcher.current_members().get("a").map(Vec::as_slice) == Some(&b"a2"[..])
    })
    .await;
    let obs = support::observer(&connect).await;
    let stat = support::stat(&obs, &format!("{path}/a")).await.expect("a's node");
    assert_eq!(stat.ephemeral_owner, clients[0].session_id(), "on the new session");
    a.close().await.unwrap();
    watcher.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_member_no_longer_lists_itself_and_its_stream_says_it_left() {
    let (server, clients) = support::server_and_clients(1).await;
    let obs = support::observer(&server.connect_string()).await;
    let path = support::unique_path("group-closed");
    let a = GroupMember::new(&clients[0], &path, "a", b"a1".to_vec()).unwrap();
    a.start().unwrap();
    assert!(a.wait_for_initial_create(WITHIN).await.unwrap());
    let mut changes = a.changes();
    a.close().await.unwrap();
    assert!(support::sorted_children(&obs, &path).await.is_empty(), "our node is deleted");
    assert!(!a.current_members().contains_key("a"), "a closed member is not listed: {:?}", a.current_members());
    assert_eq!(next_event(&mut changes).await, MembershipEvent::Left { id: "a".into() });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn membership_changes_drain_as_a_stream_with_stream_combinators() {
    use futures::StreamExt;

    let (_server, clients) = support::server_and_clients(2).await;
    let path = support::unique_path("group-stream");
    let a = GroupMember::new(&clients[0], &path, "a", b"a".to_vec()).unwrap();
    a.start().unwrap();
    assert!(a.wait_for_initial_create(WITHIN).await.unwrap());
    let mut ids = a.changes().filter_map(|e| {
        std::future::ready(match e {
            MembershipEvent::Joined { id, .. } => Some(format!("+{id}")),
            MembershipEvent::Left { id } => Some(format!("-{id}")),
            _ => None,
        })
    });
    let b = GroupMember::new(&clients[1], &path, "b", b"b".to_vec()).unwrap();
    b.start().unwrap();
    assert_eq!(tokio::time::timeout(WITHIN, ids.next()).await.expect("b joins in time"), Some("+b".to_string()));
    b.close().await.unwrap();
    assert_eq!(tokio::time::timeout(WITHIN, ids.next()).await.expect("b leaves in time"), Some("-b".to_string()));
    a.close().await.unwrap();
}
