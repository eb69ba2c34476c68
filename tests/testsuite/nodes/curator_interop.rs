//! Interop with a real Curator 5.4 (tests/java/CuratorPeer.java): a Curator `PersistentNode` and
//! ours side by side, and a group with Curator and Rust `GroupMember`s that see each other.

use zk_curator::nodes::{GroupMember, PersistentNode, Protection};
use zk_curator::CreateMode;

use super::WITHIN;
use crate::support;
use crate::support::curator_peer::CuratorPeer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_curator_persistent_node_and_ours_live_side_by_side_and_close_only_their_own() {
    let (server, clients) = support::server_and_clients(1).await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let mut peer = CuratorPeer::start(&connect).await;
    let parent = support::unique_path("pnode-interop");
    let theirs = peer.cmd(&format!("pnode c {parent}/node- EPHEMERAL_SEQUENTIAL 1 curator")).await;
    let theirs = theirs.strip_prefix("PNODE ").expect("PNODE answer").to_string();
    let ours = PersistentNode::new(
        &clients[0],
        &format!("{parent}/node-"),
        CreateMode::EphemeralSequential,
        Protection::Protected,
        b"rust".to_vec(),
    )
    .unwrap();
    ours.start().unwrap();
    assert!(ours.wait_for_initial_create(WITHIN).await.unwrap());
    let actual = ours.actual_path().unwrap();
    let children = support::sorted_children(&obs, &parent).await;
    assert_eq!(children.len(), 2, "one node each: {children:?}");
    // The same layout: `_c_<uuid>-node-<seq>`, both protected.
    for name in &children {
        assert!(zk_curator::framework::is_protected(name), "{name} is protected");
        assert!(zk_curator::framework::strip_protection(name).starts_with("node-"), "{name}");
    }
    assert_eq!(obs.get_data(&theirs).await.unwrap().0, b"curator");
    assert_eq!(obs.get_data(&actual).await.unwrap().0, b"rust");
    ours.close().await.unwrap();
    assert_eq!(support::sorted_children(&obs, &parent).await, [support::node_name(&theirs).to_string()], "ours only");
    assert_eq!(peer.cmd("pnodeclose c").await, "CLOSED");
    assert!(support::eventually_no_children(&connect, &parent, WITHIN).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_and_rust_group_members_see_each_other_and_each_others_data() {
    let (server, clients) = support::server_and_clients(1).await;
    let connect = server.connect_string();
    let mut peer = CuratorPeer::start(&connect).await;
    let path = support::unique_path("group-interop");
    assert_eq!(peer.cmd(&format!("member c {path} java from-curator")).await, "MEMBER");
    let ours = GroupMember::new(&clients[0], &path, "rust", b"from-rust".to_vec()).unwrap();
    ours.start().unwrap();
    assert!(ours.wait_for_initial_create(WITHIN).await.unwrap());
    support::eventually(WITHIN, "ours sees the Curator member", || async {
        ours.current_members().get("java").map(Vec::as_slice) == Some(&b"from-curator"[..])
    })
    .await;
    let seen = curator_members_become(&mut peer, "MEMBERS java=from-curator,rust=from-rust").await;
    assert_eq!(seen, "MEMBERS java=from-curator,rust=from-rust", "Curator sees ours");
    ours.set_this_data(b"changed".to_vec()).unwrap();
    let seen = curator_members_become(&mut peer, "MEMBERS java=from-curator,rust=changed").await;
    assert_eq!(seen, "MEMBERS java=from-curator,rust=changed", "Curator sees our new data");
    ours.close().await.unwrap();
    assert_eq!(peer.cmd("memberclose c").await, "CLOSED");
}

/// Asks the Curator member `c` for its members until it answers `expected` (or the hang guard
/// passes); returns the last answer.
async fn curator_members_become(peer: &mut CuratorPeer, expected: &str) -> String {
    let deadline = std::time::Instant::now() + WITHIN;
    loop {
        let seen = peer.cmd("members c").await;
        if seen == expected || std::time::Instant::now() >= deadline {
            return seen;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
