//! Calls sent once per connection (a sequential create, a transaction) across a connection cut:
//! waiting for the connection before sending rides out a cut longer than the connection timeout
//! under the client's retry policy, as every other data call does.

use zk_curator::testing::FaultProxy;
use zk_curator::{CreateMode, OpResult, Transaction};

use crate::support::{self, during_a_cut, riding_client};

#[tokio::test]
async fn a_sequential_create_and_a_commit_during_a_cut_longer_than_the_connection_timeout_ride_it_out() {
    let server = support::server().await;
    let proxy = FaultProxy::start(&server.connect_string()).await.expect("proxy");
    let client = riding_client(&proxy.connect_string()).await;
    let path = support::unique_path("data-cut");
    client.create(&path).creating_parents_if_needed().await.expect("parent");
    let session = client.session_id();

    let created = during_a_cut(&proxy, &client, {
        let (client, prefix) = (client.clone(), format!("{path}/seq-"));
        async move { client.create(&prefix).mode(CreateMode::PersistentSequential).await }
    })
    .await
    .expect("a sequential create during a cut the retry policy outlasts");
    let committed = during_a_cut(&proxy, &client, {
        let (client, node) = (client.clone(), format!("{path}/tx"));
        async move { client.commit(Transaction::new().create(&node, b"1", CreateMode::Persistent)).await }
    })
    .await
    .expect("a commit during a cut the retry policy outlasts");

    assert_eq!(client.session_id(), session, "the session survived the cuts");
    assert!(matches!(&committed[..], [OpResult::Created { .. }]), "{committed:?}");
    let zk = support::observer(&server.connect_string()).await;
    let mut expected = vec![support::node_name(&created).to_string(), "tx".to_string()];
    expected.sort();
    assert_eq!(support::sorted_children(&zk, &path).await, expected, "one node each");
}
