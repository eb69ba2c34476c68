//! `PersistentNode` in an unprotected persistent (or TTL) mode when a create's reply is lost: close
//! deletes the node only when that create made it (the create's marker tells), never a node
//! someone else made at the path meanwhile (Curator's CURATOR-506), whether close runs after the
//! link came back or while the outcome is still unknown; and a node whose ACL refuses the marker
//! is created and deleted all the same.

use std::time::Duration;

use zk_curator::testing::{FaultProxy, ProxyMode, TestingServer};
use zk_curator::{CreateMode, CuratorClient, PersistentNode};

use super::WITHIN;
use crate::support;

const MODES: [CreateMode; 2] = [CreateMode::Persistent, CreateMode::PersistentWithTtl(Duration::from_secs(60))];

/// Starts `node` with the server's replies dropped: its create is applied, the reply lost. Its
/// parents are made first (persistent), so that the create itself reaches the server.
async fn start_with_the_reply_lost(proxy: &FaultProxy, obs: &zookeeper_client::Client, node: &PersistentNode) {
    let options = zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    let parent = &node.path()[..node.path().rfind('/').unwrap()];
    for (i, _) in parent.match_indices('/').skip(1).chain([(parent.len(), "")]) {
        match obs.create(&parent[..i], b"", &options).await {
            Ok(_) | Err(zookeeper_client::Error::NodeExists) => {}
            Err(e) => panic!("create {}: {e}", &parent[..i]),
        }
    }
    proxy.set_mode(ProxyMode::DropReplies);
    node.start().unwrap();
    support::eventually(WITHIN, "the create reached the server", || async { support::exists(obs, node.path()).await })
        .await;
}

/// Someone else deletes the node (and anything under it) and makes its own at the path: its czxid.
async fn replaced_by_someone_else(obs: &zookeeper_client::Client, path: &str) -> i64 {
    for child in support::sorted_children(obs, path).await {
        obs.delete(&format!("{path}/{child}"), None).await.unwrap();
    }
    obs.delete(path, None).await.unwrap();
    let options = zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    obs.create(path, b"someone else's", &options).await.unwrap().0.czxid
}

/// The link is back on the same session, and the client's background deletes are done.
async fn healed(proxy: &FaultProxy, client: &CuratorClient, session: i64) {
    proxy.set_mode(ProxyMode::Pass);
    support::eventually(WITHIN, "reconnected, background deletes done", || async {
        client.is_connected() && client.pending_background_deletes() == 0
    })
    .await;
    assert_eq!(client.session_id(), session, "the session was meant to survive");
}

/// A server, a client reaching it through a fault proxy (a session that outlives the faults, a
/// short connection timeout) and a direct observer.
struct Link {
    server: TestingServer,
    proxy: FaultProxy,
    client: CuratorClient,
    session: i64,
    obs: zookeeper_client::Client,
}

impl Link {
    async fn start() -> Link {
        let (server, _) = support::server_and_clients(0).await;
        let connect = server.connect_string();
        let proxy = FaultProxy::start(&connect).await.expect("proxy");
        let client =
            support::client_with_timeouts(&proxy.connect_string(), Duration::from_secs(20), Duration::from_secs(1))
                .await;
        let session = client.session_id();
        let obs = support::observer(&connect).await;
        Link { server, proxy, client, session, obs }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_after_a_lost_create_reply_deletes_the_node_only_when_that_create_made_it() {
    let Link { server, proxy, client, session, obs } = Link::start().await;
    let connect = server.connect_string();
    for mode in MODES {
        // Ours: told ours once the link is back, deleted by close; nothing left.
        let path = format!("{}/n", support::unique_path("lost-reply-ours"));
        let node = PersistentNode::new(&client, &path, mode, false, b"ours".to_vec()).unwrap();
        start_with_the_reply_lost(&proxy, &obs, &node).await;
        healed(&proxy, &client, session).await;
        assert!(node.wait_for_initial_create(WITHIN).await.unwrap(), "{mode:?}: kept");
        let under = support::eventually_no_children(&connect, &path, WITHIN).await;
        assert!(under.is_empty(), "{mode:?}: the create marker stays: {under:?}");
        node.close().await.unwrap();
        assert!(!support::exists(&obs, &path).await, "{mode:?}: close left our own node");

        // Someone else's, made while our reply was lost: kept while started, left by close.
        let path = format!("{}/n", support::unique_path("lost-reply-theirs"));
        let node = PersistentNode::new(&client, &path, mode, false, b"ours".to_vec()).unwrap();
        start_with_the_reply_lost(&proxy, &obs, &node).await;
        let theirs = replaced_by_someone_else(&obs, &path).await;
        healed(&proxy, &client, session).await;
        assert!(node.wait_for_initial_create(WITHIN).await.unwrap(), "{mode:?}: kept");
        node.close().await.unwrap();
        let stat = support::stat(&obs, &path).await;
        assert_eq!(stat.map(|s| s.czxid), Some(theirs), "{mode:?}: close deleted someone else's node");
        obs.delete(&path, None).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_while_a_create_outcome_is_unknown_deletes_the_node_only_when_that_create_made_it() {
    let Link { server: _server, proxy, client, session, obs } = Link::start().await;
    for mode in MODES {
        for replaced in [false, true] {
            let path = format!("{}/n", support::unique_path("lost-reply-close"));
            let node = PersistentNode::new(&client, &path, mode, false, b"ours".to_vec()).unwrap();
            start_with_the_reply_lost(&proxy, &obs, &node).await;
            let theirs = if replaced { Some(replaced_by_someone_else(&obs, &path).await) } else { None };
            // Closed with no reply yet: the delete is left to the background queue.
            node.close().await.ok();
            healed(&proxy, &client, session).await;
            let stat = support::stat(&obs, &path).await;
            match theirs {
                Some(theirs) => {
                    assert_eq!(stat.map(|s| s.czxid), Some(theirs), "{mode:?}: close deleted someone else's node");
                    obs.delete(&path, None).await.unwrap();
                }
                None => assert!(stat.is_none(), "{mode:?}: close left our own node"),
            }
        }
    }
}

/// Everything for the loopback address, except creating children under the persistent nodes'
/// own paths (`.../pnode-*`): the create marker cannot be made there.
#[derive(Debug)]
struct NoChildrenUnderTheNode;

impl zk_curator::AclProvider for NoChildrenUnderTheNode {
    fn default_acl(&self) -> Vec<zk_curator::Acl> {
        vec![zk_curator::Acl::new(zk_curator::Permissions::ALL, zk_curator::Id::new("ip", "127.0.0.1"))]
    }

    fn acl_for_path(&self, path: &str) -> Vec<zk_curator::Acl> {
        if path.rsplit('/').next().is_some_and(|name| name.starts_with("pnode-")) {
            let all = zk_curator::Permissions::ALL.bits();
            let all_but_create = zk_curator::Permissions::from_bits(all & !zk_curator::Permissions::CREATE.bits());
            vec![zk_curator::Acl::new(all_but_create, zk_curator::Id::new("ip", "127.0.0.1"))]
        } else {
            Vec::new() // the default
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_acl_refuses_the_create_marker_is_still_created_and_deleted_on_close() {
    let (server, _) = support::server_and_clients(0).await;
    let connect = server.connect_string();
    let client = CuratorClient::builder(&connect).acl_provider(NoChildrenUnderTheNode).connect().await.unwrap();
    let obs = support::observer(&connect).await;
    for (i, mode) in MODES.into_iter().enumerate() {
        let path = format!("{}/pnode-{i}", support::unique_path("marker-acl"));
        let node = PersistentNode::new(&client, &path, mode, false, b"ours".to_vec()).unwrap();
        node.start().unwrap();
        assert!(node.wait_for_initial_create(WITHIN).await.unwrap(), "{mode:?}: never created");
        assert_eq!(obs.get_data(&path).await.unwrap().0, b"ours");
        node.close().await.unwrap();
        assert!(!support::exists(&obs, &path).await, "{mode:?}: close left the node");
    }
    client.close().await;
}

/// Everything for the loopback address, except deleting children under the persistent nodes'
/// own paths (`.../pnode-*`): a create marker made there could never be deleted again.
#[derive(Debug)]
struct NoDeletesUnderTheNode;

impl zk_curator::AclProvider for NoDeletesUnderTheNode {
    fn default_acl(&self) -> Vec<zk_curator::Acl> {
        vec![zk_curator::Acl::new(zk_curator::Permissions::ALL, zk_curator::Id::new("ip", "127.0.0.1"))]
    }

    fn acl_for_path(&self, path: &str) -> Vec<zk_curator::Acl> {
        if path.rsplit('/').next().is_some_and(|name| name.starts_with("pnode-")) {
            let all = zk_curator::Permissions::ALL.bits();
            let all_but_delete = zk_curator::Permissions::from_bits(all & !zk_curator::Permissions::DELETE.bits());
            vec![zk_curator::Acl::new(all_but_delete, zk_curator::Id::new("ip", "127.0.0.1"))]
        } else {
            Vec::new() // the default
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_acl_refuses_deleting_children_keeps_no_create_marker_and_is_deleted_on_close() {
    let (server, _) = support::server_and_clients(0).await;
    let connect = server.connect_string();
    let client = CuratorClient::builder(&connect).acl_provider(NoDeletesUnderTheNode).connect().await.unwrap();
    let obs = support::observer(&connect).await;
    for (i, mode) in MODES.into_iter().enumerate() {
        let path = format!("{}/pnode-{i}", support::unique_path("marker-acl-delete"));
        let node = PersistentNode::new(&client, &path, mode, false, b"ours".to_vec()).unwrap();
        node.start().unwrap();
        assert!(node.wait_for_initial_create(WITHIN).await.unwrap(), "{mode:?}: never created");
        // A marker that stays would keep the node from being deleted by anyone (NotEmpty) for as
        // long as this session lives.
        let under = support::eventually_no_children(&connect, &path, WITHIN).await;
        assert!(under.is_empty(), "{mode:?}: a create marker stays under the node: {under:?}");
        let closed = tokio::time::timeout(WITHIN, node.close()).await.expect("close hangs");
        assert!(closed.is_ok(), "{mode:?}: close failed: {closed:?}");
        assert!(!support::exists(&obs, &path).await, "{mode:?}: close left the node");
    }
    client.close().await;
}
