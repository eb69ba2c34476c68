use crate::support;

use std::time::Duration;

use zk_curator::locks::InterProcessMutex;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let a = support::client(&connect).await;
    let b = support::client(&connect).await;
    let path = support::unique_path("smoke");
    let ma = InterProcessMutex::new(&a, &path).unwrap();
    let mb = InterProcessMutex::new(&b, &path).unwrap();
    ma.acquire().await.unwrap();
    assert!(ma.is_owned_by_current_task());
    ma.acquire().await.unwrap(); // re-entry
    assert_eq!(support::children(&connect, &path).await.len(), 1);
    assert!(!mb.acquire_timeout(Duration::from_millis(200)).await.unwrap());
    assert_eq!(support::children(&connect, &path).await.len(), 1);
    assert!(!mb.acquire_timeout(Duration::ZERO).await.unwrap());
    let mb2 = mb.clone();
    let waiter = crate::support::spawn(async move { mb2.lock().await.unwrap() });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(support::children(&connect, &path).await.len(), 2);
    ma.release().await.unwrap();
    assert!(ma.is_owned_by_current_task());
    ma.release().await.unwrap();
    let guard = tokio::time::timeout(Duration::from_secs(5), waiter).await.unwrap().unwrap();
    println!("guard {guard:?}");
    assert!(ma.release().await.is_err());
    guard.release().await.unwrap();
    assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(2)).await.is_empty());
}
