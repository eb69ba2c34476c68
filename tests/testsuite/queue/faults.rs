//! Faults: a consumer's session expiring mid-item (lock path: the item is delivered again, the
//! late ack refused), the queue path deleted under a running consumer or under producers' puts,
//! puts (single creates and transactions) whose replies were lost.

use std::time::Duration;

use zk_curator::queue::DistributedQueue;
use zk_curator::testing::{Direction, FaultProxy, Latency, ProxyMode};
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

/// How many of the queue's item nodes hold `item` (the node data is Curator's format, which
/// carries the item's bytes as they are).
async fn nodes_holding(obs: &zookeeper_client::Client, path: &str, items: &[String]) -> Vec<usize> {
    let mut datas = Vec::new();
    for child in support::sorted_children(obs, path).await {
        datas.push(obs.get_data(&format!("{path}/{child}")).await.unwrap().0);
    }
    items
        .iter()
        .map(|item| datas.iter().filter(|d| d.windows(item.len()).any(|w| w == item.as_bytes())).count())
        .collect()
}

/// Puts whose creates reached the server while its replies were lost (sent as one create or as a
/// transaction of several, waited for or in the background) are reported with the retryable
/// error and never sent again: every item is in the queue exactly once (a create sent again after
/// the connection came back would put it twice).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn puts_whose_replies_were_lost_are_reported_and_never_put_twice() {
    let server = support::server().await;
    let obs = support::observer(&server.connect_string()).await;
    let proxy = FaultProxy::start(&server.connect_string()).await.expect("proxy");
    let client = support::client(&proxy.connect_string()).await;
    let path = support::unique_path("queue-lost-put-reply");
    let waited = bytes_queue(&client, &path, None);
    let background = DistributedQueue::builder(&client, &path).build().unwrap();
    waited.put(b"before".to_vec()).await.unwrap();

    proxy.set_mode(ProxyMode::DropReplies);
    let items: Vec<String> = (0..60).map(|k| format!("lost-{k:02}")).collect();
    let mut puts = Vec::new();
    for item in &items[..10] {
        let queue = waited.clone();
        let item = item.clone().into_bytes();
        puts.push(support::spawn(async move { queue.put(item).await }));
    }
    for item in &items[10..] {
        background.put(item.clone().into_bytes()).await.unwrap();
    }
    support::eventually(WITHIN, "every create reached the server", || async {
        support::sorted_children(&obs, &path).await.len() == 1 + items.len()
    })
    .await;
    // Still no reply: the creates are unanswered when the link closes.
    tokio::time::sleep(Duration::from_millis(300)).await;
    proxy.set_mode(ProxyMode::Pass);
    for put in puts {
        match support::join("a put whose reply was lost", WITHIN, put).await {
            Err(e) if e.is_retryable() || e.is_session_lost() => {}
            other => panic!("a put whose outcome is unknown was reported as {other:?}"),
        }
    }
    match background.flush_puts_timeout(WITHIN).await {
        Err(e) if e.is_retryable() || e.is_session_lost() => {}
        other => panic!("background puts whose outcome is unknown were reported as {other:?}"),
    }
    // Anything sent again would be made by now: the next put comes after it on the session.
    waited.put(b"after".to_vec()).await.unwrap();
    assert_eq!(nodes_holding(&obs, &path, &items).await, vec![1; items.len()], "each item exactly once");
    assert_eq!(support::sorted_children(&obs, &path).await.len(), 2 + items.len(), "nothing else");
    waited.close().await;
    background.close().await;
}

/// Puts sent (in transactions) while the queue path was deleted are refused by the server, which
/// made none of their nodes: the producer makes the path again and sends them again, so each
/// item is in the queue exactly once.
// One thread: the puts below are all handed over before the pipeline runs, so they go in
// transactions of many creates (a single create would not show a transaction's failure).
#[tokio::test]
async fn puts_refused_because_the_queue_path_was_deleted_are_each_made_once() {
    let (server, clients) = support::server_and_clients(1).await;
    let obs = support::observer(&server.connect_string()).await;
    let path = support::unique_path("queue-path-gone-puts");
    let producer = DistributedQueue::builder(&clients[0], &path).build().unwrap();
    producer.put(b"first".to_vec()).await.unwrap();
    assert!(producer.flush_puts_timeout(WITHIN).await.unwrap());
    for child in support::sorted_children(&obs, &path).await {
        obs.delete(&format!("{path}/{child}"), None).await.unwrap();
    }
    obs.delete(&path, None).await.unwrap();

    let items: Vec<String> = (0..300).map(|k| format!("again-{k:03}")).collect();
    for item in &items {
        producer.put(item.clone().into_bytes()).await.unwrap();
    }
    assert!(producer.flush_puts_timeout(WITHIN).await.expect("no put failed"), "the puts finished");
    assert_eq!(nodes_holding(&obs, &path, &items).await, vec![1; items.len()], "each item exactly once");
    assert_eq!(support::sorted_children(&obs, &path).await.len(), items.len(), "nothing else");
    producer.close().await;
}

/// Without a lock path, a consumer whose batched delete (one transaction) was applied but whose
/// reply was lost finds each node gone when it deletes them one by one: it cannot know whether
/// it took them (at most once: their items may be lost), so its stream reports the error rather
/// than only logging it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batched_delete_whose_reply_was_lost_is_reported_on_the_stream() {
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("queue-lost-delete-reply");
    let producer = bytes_queue(&support::client(&connect).await, &path, None);
    for k in 0..3 {
        producer.put(format!("item-{k}").into_bytes()).await.unwrap();
    }
    let proxy = FaultProxy::start(&connect).await.expect("proxy");
    let consumer_client = support::client_with(&proxy.connect_string(), Duration::from_secs(4)).await;
    // Replies come 500 ms late (the client gives up on a connection silent for 800 ms): the
    // transaction's reply is still held in the proxy when the observer sees its nodes gone, and
    // is dropped there.
    proxy.set_direction_latency(Direction::ToClient, Latency::fixed(Duration::from_millis(500)));
    let queue = bytes_queue(&consumer_client, &path, None);
    let mut items = queue.consume().unwrap();
    support::eventually(WITHIN, "the consumer's transaction deletes the nodes", || async {
        support::sorted_children(&obs, &path).await.is_empty()
    })
    .await;
    proxy.set_mode(ProxyMode::DropReplies);
    proxy.set_direction_latency(Direction::ToClient, Latency::NONE);
    tokio::time::sleep(Duration::from_millis(100)).await;
    proxy.set_mode(ProxyMode::Pass);
    match tokio::time::timeout(WITHIN, items.next()).await {
        Ok(Some(Err(e))) => assert!(e.is_retryable() || e.is_session_lost(), "reported as {e}"),
        Ok(Some(Ok(item))) => panic!("an item whose delete's outcome is unknown was handed out: {item:?}"),
        Ok(None) => panic!("the stream ended"),
        Err(_) => panic!("the possibly lost items were not reported within {WITHIN:?}"),
    }
    queue.close().await;
    producer.close().await;
}
