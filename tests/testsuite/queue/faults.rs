//! Faults: a consumer's session expiring mid-item (lock path: the item is delivered again, the
//! late ack refused), the queue path deleted under a running consumer.

use std::time::Duration;

use zk_curator::{Error, ErrorCode};

use super::{bytes_queue, next_item, take_acked, WITHIN};
use crate::support;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_item_whose_consumers_session_expires_mid_item_is_delivered_again() {
    let server = support::server().await;
    let connect = server.connect_string();
    let path = support::unique_path("queue-expiry");
    let lock = format!("{path}-locks");
    let victim = support::client_with(&connect, Duration::from_secs(2)).await;
    let other = support::client(&connect).await;
    let queue = bytes_queue(&victim, &path, Some(&lock));
    queue.put(b"job".to_vec()).await.unwrap();
    let mut items = queue.consume().unwrap();
    let item = next_item(&mut items).await;

    let rescuer = bytes_queue(&other, &path, Some(&lock));
    let mut rescued = rescuer.consume().unwrap();
    // Held: the other consumer gets nothing while the victim's session lives.
    assert!(tokio::time::timeout(Duration::from_millis(300), rescued.next()).await.is_err(), "delivered twice at once");
    zk_curator::testing::expire_session(&connect, &victim).await.unwrap();
    assert_eq!(take_acked(&mut rescued, 1).await, ["job"]);
    assert!(matches!(item.ack().await, Err(Error::LockLost { .. })), "the victim's late ack must be refused");
    assert_eq!(rescuer.len().await.unwrap(), 0);
    assert!(support::children(&connect, &lock).await.is_empty());
    queue.close().await;
    rescuer.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_path_deleted_under_a_running_consumer_is_reported_and_consuming_goes_on() {
    let (_server, clients) = support::server_and_clients(1).await;
    let path = support::unique_path("queue-deleted");
    let queue = bytes_queue(&clients[0], &path, None);
    queue.put(b"first".to_vec()).await.unwrap();
    let mut items = queue.consume().unwrap();
    assert_eq!(take_acked(&mut items, 1).await, ["first"]);
    clients[0].delete(&path).await.unwrap();
    match tokio::time::timeout(WITHIN, items.next()).await.unwrap().unwrap() {
        Err(e) => assert_eq!(e.code(), Some(ErrorCode::NoNode), "{e}"),
        Ok(item) => panic!("an item from a deleted queue: {item:?}"),
    }
    queue.put(b"second".to_vec()).await.unwrap();
    assert_eq!(take_acked(&mut items, 1).await, ["second"]);
    queue.close().await;
}
