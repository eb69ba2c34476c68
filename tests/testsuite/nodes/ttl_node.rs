//! `PersistentTtlNode`: Curator's layout (a container with a `touch` TTL child), touched every
//! half TTL; a server without TTL nodes is a typed error.

use std::time::Duration;

use zk_curator::nodes::{PersistentTtlNode, TTL_TOUCH_NODE_NAME};
use zk_curator::testing::TestingServer;
use zk_curator::Error;

use super::WITHIN;
use crate::support;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ttl_node_touches_its_child_every_half_ttl_and_expires_after_close() {
    let (server, clients) = support::server_and_clients(1).await;
    let obs = support::observer(&server.connect_string()).await;
    let path = support::unique_path("ttl");
    let ttl = Duration::from_millis(1_000);
    let node = PersistentTtlNode::new(&clients[0], &path, ttl, b"data".to_vec()).unwrap();
    node.start().unwrap();
    assert!(node.wait_for_initial_create(WITHIN).await.unwrap());
    let touch = format!("{path}/{TTL_TOUCH_NODE_NAME}");
    let parent = support::stat(&obs, &path).await.expect("the container");
    assert_eq!(obs.get_data(&path).await.unwrap().0, b"data");
    assert_eq!(parent.ephemeral_owner, 0);
    let first = support::stat(&obs, &touch).await.expect("the touch child").mzxid;
    // Touched again (every ttl/2), and kept well past the TTL.
    tokio::time::sleep(ttl * 2).await;
    let later = support::stat(&obs, &touch).await.expect("still there past the TTL");
    assert!(later.mzxid > first, "touched again: {} > {first}", later.mzxid);
    node.close().await.unwrap();
    // Left to expire, as Curator does: the child after the TTL, then the empty container.
    support::eventually(WITHIN, "the TTL node expires after close", || async { !support::exists(&obs, &path).await })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ttl_node_on_a_server_without_ttl_nodes_is_an_invalid_argument_naming_ttl() {
    let server = support::server_with(TestingServer::builder().owned().extended_types(false)).await;
    let client = support::client(&server.connect_string()).await;
    let node =
        PersistentTtlNode::new(&client, &support::unique_path("no-ttl"), Duration::from_secs(2), vec![]).unwrap();
    node.start().unwrap();
    let waited = node.wait_for_initial_create(WITHIN).await;
    assert!(matches!(waited, Err(Error::InvalidArgument { name: "ttl", .. })), "{waited:?}");
    node.close().await.unwrap();
    let plain = zk_curator::nodes::PersistentNode::new(
        &client,
        &support::unique_path("no-ttl-plain"),
        zk_curator::CreateMode::PersistentWithTtl(Duration::from_secs(2)),
        zk_curator::nodes::Protection::Unprotected,
        vec![],
    )
    .unwrap();
    plain.start().unwrap();
    let waited = plain.wait_for_initial_create(WITHIN).await;
    assert!(matches!(waited, Err(Error::InvalidArgument { name: "ttl", .. })), "{waited:?}");
    plain.close().await.unwrap();
    client.close().await;
}
