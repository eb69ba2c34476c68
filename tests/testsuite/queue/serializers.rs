//! Item types through serializers: JSON items round trip and JSON of another shape is reported
//! (left in place); an item its serializer refuses fails the put naming the path, and nothing of
//! that put is written; an item put back goes back with the bytes it was read with.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use zk_curator::queue::{DistributedQueue, JsonSerializer, QueueBuilder, QueueSerializer};
use zk_curator::Error;

use super::{bytes_queue, WITHIN};
use crate::support;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Job {
    id: u64,
    url: String,
}

fn json_queue<T>(client: &zk_curator::CuratorClient, path: &str) -> DistributedQueue<T>
where
    T: Serialize + for<'de> Deserialize<'de> + Send + 'static,
{
    QueueBuilder::with_serializer(client, path, JsonSerializer::<T>::new()).put_in_background(false).build().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_items_round_trip_and_json_of_another_shape_is_reported_and_left_in_place() {
    let (_server, clients) = support::server_and_clients(1).await;
    let path = support::unique_path("queue-json");
    let jobs = json_queue::<Job>(&clients[0], &path);
    let raw = bytes_queue(&clients[0], &path, None);
    let job = Job { id: 7, url: "https://example.com/a".into() };
    jobs.put(job.clone()).await.unwrap();
    // Another writer's item on the same path: JSON, but not a Job.
    raw.put(br#"{"name":"not a job"}"#.to_vec()).await.unwrap();
    jobs.put_multi(vec![Job { id: 8, url: "b".into() }, Job { id: 9, url: "c".into() }]).await.unwrap();

    let mut items = jobs.consume().unwrap();
    let (mut got, mut reported) = (Vec::new(), Vec::new());
    while got.len() < 3 {
        match tokio::time::timeout(WITHIN, items.next()).await.expect("no item in time").expect("stream ended") {
            Ok(item) => {
                got.push(item.value().clone());
                item.ack().await.unwrap();
            }
            Err(Error::MalformedData { path, .. }) => reported.push(path),
            Err(e) => panic!("unexpected report {e}"),
        }
    }
    assert_eq!(got, [job, Job { id: 8, url: "b".into() }, Job { id: 9, url: "c".into() }]);
    assert_eq!(reported.len(), 1, "the item of another shape is reported once: {reported:?}");
    assert_eq!(jobs.len().await.unwrap(), 1, "and left in place for whoever can read it");
    jobs.close().await;
    raw.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_item_the_serializer_refuses_fails_its_put_naming_the_path_and_nothing_is_written() {
    let (_server, clients) = support::server_and_clients(1).await;
    let path = support::unique_path("queue-json-refused");
    // JSON has no map keys other than strings: serde_json refuses a map keyed by tuples.
    let queue = json_queue::<BTreeMap<(u8, u8), u8>>(&clients[0], &path);
    let fine = BTreeMap::new();
    let refused = BTreeMap::from([((1, 2), 3)]);
    let err = queue.put_multi(vec![fine, refused]).await.unwrap_err();
    match &err {
        Error::InvalidArgument { name: "item", value, .. } => {
            assert!(value.contains(&path) && value.starts_with("#1 "), "names the path and the item: {err}")
        }
        other => panic!("expected InvalidArgument for the item, got {other:?}"),
    }
    assert_eq!(queue.len().await.unwrap(), 0, "nothing of the refused put is written");
    queue.close().await;
}

/// Reads items as lower case: a serializer whose way in is not the inverse of its way out, so
/// serializing the value again would write other bytes than the producer's.
struct LowerCase;
impl QueueSerializer<String> for LowerCase {
    fn serialize(&self, item: &String) -> Result<Vec<u8>, String> {
        Ok(item.as_bytes().to_vec())
    }
    fn deserialize(&self, bytes: &[u8]) -> Result<String, String> {
        String::from_utf8(bytes.to_ascii_lowercase()).map_err(|e| e.to_string())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_requeued_item_goes_back_with_the_bytes_it_was_read_with() {
    let (_server, clients) = support::server_and_clients(1).await;
    let path = support::unique_path("queue-requeue-bytes");
    let raw = bytes_queue(&clients[0], &path, None);
    raw.put(b"MixedCase".to_vec()).await.unwrap();
    let lower: DistributedQueue<String> =
        QueueBuilder::with_serializer(&clients[0], &path, LowerCase).put_in_background(false).build().unwrap();
    let mut items = lower.consume().unwrap();
    let item = tokio::time::timeout(WITHIN, items.next()).await.unwrap().unwrap().unwrap();
    assert_eq!(item.value(), "mixedcase");
    item.requeue().await.unwrap();
    drop(items);
    lower.close().await;

    let mut again = raw.consume().unwrap();
    assert_eq!(super::take_acked(&mut again, 1).await, ["MixedCase"], "the producer's bytes, not re-serialized");
    raw.close().await;
}
