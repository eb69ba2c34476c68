//! `inspect` of a queue (Curator's `DistributedQueue` layout): its depth and its items in flight
//! (an item node with a lock node under the lock path), each with the consumer's session — the
//! library's `inspect_queue` and `zk-curator inspect ROOT --lock-path L`.

use std::process::Command;

use zk_curator::inspect::inspect_queue;
use zk_curator::queue::DistributedQueue;

use crate::support;

/// A hang guard, never a performance bound.
const WITHIN: std::time::Duration = std::time::Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queues_depth_and_its_items_in_flight_with_their_consumers_are_shown() {
    const BIN: &str = env!("CARGO_BIN_EXE_zk-curator");
    let (server, clients) = support::server_and_clients(1).await;
    let connect = server.connect_string();
    let path = support::unique_path("inspect-queue");
    let lock = format!("{path}-locks");
    // One node in flight at a time: the other two wait in the queue.
    let queue = DistributedQueue::builder(&clients[0], &path)
        .lock_path(&lock)
        .put_in_background(false)
        .max_in_flight(1)
        .build()
        .unwrap();
    for k in 0..3 {
        queue.put(format!("job-{k}").into_bytes()).await.unwrap();
    }
    let mut items = queue.consume().unwrap();
    let taken = tokio::time::timeout(WITHIN, items.next()).await.unwrap().unwrap().unwrap();
    assert_eq!(support::children(&connect, &lock).await.len(), 1, "one item in flight");
    let session = clients[0].session_id();

    let found = inspect_queue(&clients[0], &path, Some(&lock)).await.unwrap().expect("the queue");
    assert_eq!(found.depth, 3);
    assert_eq!(found.in_flight.len(), 1);
    assert_eq!(found.in_flight[0].item, taken.path(), "oldest first");
    assert_eq!(found.in_flight[0].lock.session, session, "the consumer's session");
    let unlocked = inspect_queue(&clients[0], &path, None).await.unwrap().unwrap();
    assert_eq!((unlocked.depth, unlocked.in_flight.len()), (3, 0));
    assert!(inspect_queue(&clients[0], &format!("{path}-none"), None).await.unwrap().is_none());

    let out = Command::new(BIN).args(["--connect", &connect, "inspect", &path, "--lock-path", &lock]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let line =
        text.lines().find(|l| l.starts_with(&format!("{path} "))).unwrap_or_else(|| panic!("no queue line: {text}"));
    let cells: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(&cells[1..3], ["3", "1"], "depth and in flight: {line}");
    assert!(cells.contains(&taken.node()) && cells.contains(&format!("{session:#x}").as_str()), "{line}");

    let out = Command::new(BIN)
        .args(["--connect", &connect, "inspect", &path, "--lock-path", &lock, "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let queue_json = json.as_array().unwrap().iter().find(|i| i["kind"] == "queue").unwrap_or_else(|| panic!("{json}"));
    assert_eq!(queue_json["path"], path);
    assert_eq!(queue_json["depth"], 3);
    assert_eq!(queue_json["in_flight"][0]["item"], taken.path());
    assert_eq!(queue_json["in_flight"][0]["lock"]["session"], format!("{session:#x}"));

    drop(taken);
    drop(items);
    queue.close().await;
}
