//! DistributedIdQueue (Curator's), against a real ZooKeeper and real Curator 5.4: items are taken
//! in put order whatever their ids, under Curator's node names; `remove(id)` removes (and counts)
//! the items with that id no consumer holds; ids written by Curator are honoured by ours and the
//! reverse.

use zk_curator::queue::{DistributedIdQueue, DistributedQueue};
use zk_curator::Error;

use super::interop::peer_got;
use super::{next_item, take_acked};
use crate::support;
use crate::support::curator_peer::CuratorPeer;

fn id_queue(client: &zk_curator::CuratorClient, path: &str, lock: Option<&str>) -> DistributedIdQueue<Vec<u8>> {
    let mut builder = DistributedQueue::builder(client, path).put_in_background(false);
    if let Some(lock) = lock {
        builder = builder.lock_path(lock);
    }
    builder.build_id().expect("build the id queue")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_are_taken_in_put_order_whatever_their_ids() {
    let (_server, clients) = support::server_and_clients(1).await;
    let path = support::unique_path("id-order");
    let queue = id_queue(&clients[0], &path, None);
    for (item, id) in [("one", "z"), ("two", "a"), ("three", "m"), ("four", "a")] {
        queue.put(item.as_bytes().to_vec(), id).await.unwrap();
    }
    let mut items = queue.consume().unwrap();
    assert_eq!(take_acked(&mut items, 4).await, ["one", "two", "three", "four"]);
    queue.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remove_takes_out_every_item_with_the_id_and_counts_them() {
    let (server, clients) = support::server_and_clients(1).await;
    let path = support::unique_path("id-remove");
    let queue = id_queue(&clients[0], &path, None);
    for (item, id) in [("a1", "a"), ("b", "b"), ("a2", "a"), ("slash", "x/y"), ("pipe", "x|y")] {
        queue.put(item.as_bytes().to_vec(), id).await.unwrap();
    }
    // Curator's names: `queue-|<id, / and | as _>|<sequence>`.
    let names = support::children(&server.connect_string(), &path).await;
    assert_eq!(names.iter().filter(|n| n.starts_with("queue-|x_y|")).count(), 2, "{names:?}");
    assert_eq!(names.iter().filter(|n| n.starts_with("queue-|a|")).count(), 2, "{names:?}");

    assert_eq!(queue.remove("a").await.unwrap(), 2);
    assert_eq!(queue.remove("a").await.unwrap(), 0, "already removed");
    assert_eq!(queue.remove("nobody").await.unwrap(), 0);
    // Fixed as put fixes it: "x/y" and "x|y" are one id.
    assert_eq!(queue.remove("x/y").await.unwrap(), 2);
    let mut items = queue.consume().unwrap();
    assert_eq!(take_acked(&mut items, 1).await, ["b"]);
    assert_eq!(queue.len().await.unwrap(), 0);
    queue.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_id_curator_refuses_is_a_typed_error_naming_it_and_nothing_is_put() {
    let (server, clients) = support::server_and_clients(1).await;
    let path = support::unique_path("id-bad");
    let queue = id_queue(&clients[0], &path, None);
    for bad in ["", "bell\u{7}"] {
        match queue.put(b"x".to_vec(), bad).await {
            Err(Error::InvalidArgument { name: "id", value, .. }) => assert_eq!(value, format!("{bad:?}")),
            other => panic!("{bad:?}: {other:?}"),
        }
        assert!(matches!(queue.remove(bad).await, Err(Error::InvalidArgument { name: "id", .. })));
    }
    assert!(support::children(&server.connect_string(), &path).await.is_empty());
    queue.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_lock_path_an_item_a_consumer_holds_is_not_removed() {
    let (server, clients) = support::server_and_clients(1).await;
    let path = support::unique_path("id-locked");
    let lock = format!("{path}-locks");
    let queue = id_queue(&clients[0], &path, Some(&lock));
    queue.put(b"held".to_vec(), "job").await.unwrap();
    let mut items = queue.consume().unwrap();
    let item = next_item(&mut items).await;
    assert_eq!(queue.remove("job").await.unwrap(), 0, "a held item is not removed");
    drop(item);
    drop(items);
    super::locks_released(&server.connect_string(), &lock).await;
    assert_eq!(queue.remove("job").await.unwrap(), 1);
    assert_eq!(queue.len().await.unwrap(), 0);
    assert!(support::children(&server.connect_string(), &lock).await.is_empty(), "no lock node left");
    queue.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_curator_puts_are_taken_in_order_and_removed_by_ours() {
    let (server, clients) = support::server_and_clients(1).await;
    let path = support::unique_path("id-from-curator");
    let mut peer = CuratorPeer::start(&server.connect_string()).await;
    for (item, id) in [("one", "z"), ("gone", "x/y"), ("two", "a"), ("three", "m")] {
        peer.cmd(&format!("iqput {path} {id} {item}")).await;
    }
    let queue = id_queue(&clients[0], &path, None);
    assert_eq!(queue.remove("x/y").await.unwrap(), 1);
    let mut items = queue.consume().unwrap();
    assert_eq!(take_acked(&mut items, 3).await, ["one", "two", "three"]);
    queue.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_ours_puts_are_removed_and_taken_in_order_by_curator_with_a_lock_path() {
    let (server, clients) = support::server_and_clients(1).await;
    let path = support::unique_path("id-to-curator");
    let lock = format!("{path}-locks");
    let queue = id_queue(&clients[0], &path, Some(&lock));
    for (item, id) in [("one", "z"), ("gone", "x/y"), ("two", "a"), ("three", "m")] {
        queue.put(item.as_bytes().to_vec(), id).await.unwrap();
    }
    let mut peer = CuratorPeer::start(&server.connect_string()).await;
    // Curator compares the id as given with the fixed one in the name.
    assert_eq!(peer.cmd(&format!("iqremove {path} x_y")).await, "REMOVED 1");
    peer.cmd(&format!("iqconsume c {path} {lock}")).await;
    let got: Vec<String> = peer_got(&mut peer, "c", 3).await.into_iter().map(|(i, _, _)| i).collect();
    peer.cmd("kqclose c").await;
    assert_eq!(got, ["one", "two", "three"]);
    assert_eq!(queue.len().await.unwrap(), 0);
    queue.close().await;
}
