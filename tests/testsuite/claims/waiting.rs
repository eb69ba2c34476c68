//! Waiting for work: a watch, re-used across timed waits, woken by new or released items.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{claims, HANG};
use crate::support;

/// The server's total watch count (`wchs`).
async fn server_watches(port: u16) -> usize {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.expect("connect for wchs");
    stream.write_all(b"wchs").await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    answer
        .lines()
        .find_map(|l| l.strip_prefix("Total watches:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no watch count in {answer:?}"))
}

#[tokio::test]
async fn repeated_timed_waits_for_work_add_no_watches_and_a_new_item_wakes_the_waiter() {
    // A server of its own: the watch count it reads is server-wide.
    let server = support::owned_server().await;
    let clients = [support::client(&server.connect_string()).await, support::client(&server.connect_string()).await];
    let path = support::unique_path("claims-wait");
    let work = claims(&clients[0], &path, "waiter");
    let feeder = claims(&clients[1], &path, "feeder");

    assert!(!work.wait_for_work(Duration::from_millis(5)).await.unwrap(), "no work yet");
    let metrics = tokio::runtime::Handle::current().metrics();
    let tasks_before = metrics.num_alive_tasks();
    let watches_before = server_watches(server.port()).await;
    // A leak of one watch or task per wait shows as a thousand more: far past the slack below.
    let waits = 1_000;
    for _ in 0..waits {
        assert!(!work.wait_for_work(Duration::from_millis(1)).await.unwrap());
    }
    let tasks_after = metrics.num_alive_tasks();
    let watches_after = server_watches(server.port()).await;
    assert!(watches_after <= watches_before, "server watches grew from {watches_before} to {watches_after}");
    assert!(
        tasks_after <= tasks_before + 2,
        "watch tasks grew from {tasks_before} to {tasks_after} over {waits} waits"
    );

    let waiter = {
        let work = work.clone();
        crate::support::spawn(async move { work.wait_for_work(HANG).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    feeder.add("job", b"").await.unwrap();
    assert!(support::join("waiter", HANG, waiter).await.unwrap(), "a new item wakes the waiter");

    // A released claim is work again.
    let held = feeder.claim(1).await.unwrap();
    assert!(!work.wait_for_work(Duration::from_millis(50)).await.unwrap(), "the only item is claimed");
    let waiter = {
        let work = work.clone();
        crate::support::spawn(async move { work.wait_for_work(HANG).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    feeder.release(held[0].item()).await.unwrap();
    assert!(support::join("waiter", HANG, waiter).await.unwrap(), "a released item wakes the waiter");
}
