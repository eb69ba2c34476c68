//! `PersistentNode` in an unprotected persistent (or TTL) mode when a create's reply is lost: close
//! deletes the node only when that create made it (the create's marker tells), never a node
//! someone else made at the path meanwhile (Curator's CURATOR-506), whether close runs after the
//! link came back or while the outcome is still unknown; and a node whose ACL refuses the marker
//! is created and deleted all the same.

use std::time::Duration;

use zk_curator::nodes::{PersistentNode, Protection};
use zk_curator::testing::{FaultProxy, ProxyMode, TestingServer};
use zk_curator::{CreateMode, CuratorClient};

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
        let node = PersistentNode::new(&client, &path, mode, Protection::Unprotected, b"ours".to_vec()).unwrap();
        start_with_the_reply_lost(&proxy, &obs, &node).await;
        healed(&proxy, &client, session).await;
        assert!(node.wait_for_initial_create(WITHIN).await.unwrap(), "{mode:?}: kept");
        let under = support::eventually_no_children(&connect, &path, WITHIN).await;
        assert!(under.is_empty(), "{mode:?}: the create marker stays: {under:?}");
        node.close().await.unwrap();
        assert!(!support::exists(&obs, &path).await, "{mode:?}: close left our own node");

        // Someone else's, made while our reply was lost: kept while started, left by close.
        let path = format!("{}/n", support::unique_path("lost-reply-theirs"));
        let node = PersistentNode::new(&client, &path, mode, Protection::Unprotected, b"ours".to_vec()).unwrap();
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
            let node = PersistentNode::new(&client, &path, mode, Protection::Unprotected, b"ours".to_vec()).unwrap();
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

impl zk_curator::framework::AclProvider for NoChildrenUnderTheNode {
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
        let node = PersistentNode::new(&client, &path, mode, Protection::Unprotected, b"ours".to_vec()).unwrap();
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

impl zk_curator::framework::AclProvider for NoDeletesUnderTheNode {
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
        let node = PersistentNode::new(&client, &path, mode, Protection::Unprotected, b"ours".to_vec()).unwrap();
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_namespace_a_lost_create_reply_is_told_ours_and_close_deletes_only_our_node() {
    let (server, _) = support::server_and_clients(0).await;
    let connect = server.connect_string();
    let proxy = FaultProxy::start(&connect).await.expect("proxy");
    let client = CuratorClient::builder(&proxy.connect_string())
        .namespace("lost-reply-ns")
        .session_timeout(Duration::from_secs(20))
        .connection_timeout(Duration::from_secs(1))
        .retry_policy(zk_curator::RetryNTimes::new(10, Duration::from_millis(100)))
        .connect()
        .await
        .expect("connect");
    let session = client.session_id();
    let obs = support::observer(&connect).await;
    let options = zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    for replaced in [false, true] {
        let dir = support::unique_path("lost-reply-ns");
        let full_dir = format!("/lost-reply-ns{dir}");
        for (i, _) in full_dir.match_indices('/').skip(1).chain([(full_dir.len(), "")]) {
            let made = &full_dir[..i];
            match obs.create(made, b"", &options).await {
                Ok(_) | Err(zookeeper_client::Error::NodeExists) => {}
                Err(e) => panic!("create {made}: {e}"),
            }
        }
        let path = format!("{dir}/n");
        let full = format!("/lost-reply-ns{path}");
        let node =
            PersistentNode::new(&client, &path, CreateMode::Persistent, Protection::Unprotected, b"ours".to_vec())
                .unwrap();
        proxy.set_mode(ProxyMode::DropReplies);
        node.start().unwrap();
        support::eventually(WITHIN, "the create reached the server", || async { support::exists(&obs, &full).await })
            .await;
        let theirs = if replaced { Some(replaced_by_someone_else(&obs, &full).await) } else { None };
        healed(&proxy, &client, session).await;
        assert!(node.wait_for_initial_create(WITHIN).await.unwrap(), "replaced {replaced}: kept");
        let under = support::eventually_no_children(&connect, &full, WITHIN).await;
        assert!(under.is_empty(), "replaced {replaced}: the create marker stays: {under:?}");
        node.close().await.unwrap();
        let stat = support::stat(&obs, &full).await;
        match theirs {
            Some(theirs) => {
                assert_eq!(stat.map(|s| s.czxid), Some(theirs), "close deleted someone else's node");
                obs.delete(&full, None).await.unwrap();
            }
            None => assert!(stat.is_none(), "close left our own node"),
        }
    }
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_refused_by_the_parents_acl_keeps_the_marker_so_a_later_lost_reply_never_deletes_someone_elses_node() {
    use zookeeper_client::{Acl, AuthId, Permission};
    let Link { server: _server, proxy, client, session, obs } = Link::start().await;
    // The parent refuses creates (its ACL, not the node's): the node cannot be made at all yet.
    let dir = support::unique_path("parent-refuses");
    let no_create =
        [Acl::new(Permission::READ | Permission::WRITE | Permission::DELETE | Permission::ADMIN, AuthId::anyone())];
    let top = &dir[..dir.rfind('/').unwrap()];
    let options = zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    match obs.create(top, b"", &options).await {
        Ok(_) | Err(zookeeper_client::Error::NodeExists) => {}
        Err(e) => panic!("create {top}: {e}"),
    }
    obs.create(&dir, b"", &zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::new(&no_create)))
        .await
        .unwrap();
    let path = format!("{dir}/n");
    let node =
        PersistentNode::new(&client, &path, CreateMode::Persistent, Protection::Unprotected, b"ours".to_vec()).unwrap();
    let mut errors = node.create_errors();
    node.start().unwrap();
    let refused = tokio::time::timeout(
        WITHIN,
        errors.wait_for(|e| e.as_ref().is_some_and(|e| e.kind() == zk_curator::ErrorKind::NotAuthorized)),
    );
    refused.await.expect("the create was never refused").unwrap();

    // The parent's ACL is fixed; the next create is applied and its reply lost; someone else
    // replaces the node before the link comes back.
    proxy.set_mode(ProxyMode::DropReplies);
    obs.set_acl(&dir, &[Acl::new(Permission::ALL, AuthId::anyone())], None).await.unwrap();
    support::eventually(WITHIN, "the create reached the server", || async { support::exists(&obs, &path).await }).await;
    let theirs = replaced_by_someone_else(&obs, &path).await;
    healed(&proxy, &client, session).await;
    // (`wait_for_initial_create` would answer the earlier refusal at once.)
    support::eventually(WITHIN, "kept", || async { node.actual_path().is_some() }).await;
    node.close().await.unwrap();
    let stat = support::stat(&obs, &path).await;
    assert_eq!(stat.map(|s| s.czxid), Some(theirs), "close deleted someone else's node");
}
