//! `inspect` recognises a group: its members (ephemeral children) with their data, Curator's and
//! ours alike.

use zk_curator::inspect::{inspect, LockKind};
use zk_curator::nodes::GroupMember;

use super::WITHIN;
use crate::support;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_lists_a_groups_members_with_their_data() {
    let (_server, clients) = support::server_and_clients(2).await;
    let root = support::unique_path("inspect-group");
    let path = format!("{root}/workers");
    let a = GroupMember::new(&clients[0], &path, "a", b"host-a".to_vec()).unwrap();
    let b = GroupMember::new(&clients[1], &path, "b", b"host-b".to_vec()).unwrap();
    for member in [&a, &b] {
        member.start().unwrap();
        assert!(member.wait_for_initial_create(WITHIN).await.unwrap());
    }
    let found = inspect(&clients[0], &root).await.unwrap();
    let groups: Vec<_> = found.locks.iter().filter(|l| l.kind == LockKind::Membership).collect();
    assert_eq!(groups.len(), 1, "one group: {found:?}");
    assert_eq!(groups[0].path, path);
    let members: Vec<(String, String)> = groups[0].holders.iter().map(|h| (h.node.clone(), h.data_lossy())).collect();
    assert_eq!(members, [(format!("{path}/a"), "host-a".to_string()), (format!("{path}/b"), "host-b".to_string())]);
    assert_eq!(groups[0].holders[0].session, clients[0].session_id());
    assert_eq!(LockKind::Membership.as_str(), "membership");
    a.close().await.unwrap();
    b.close().await.unwrap();
}
