//! The atomic counters: formats, totals, compare-and-set, corruption, promotion, deadlines, and
//! interop with real Curator.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use zk_curator::atomic::{DistributedAtomicInteger, DistributedAtomicLong, DistributedAtomicValue, PromotedToLock};
use zk_curator::testing::{FaultProxy, ProxyMode};
use zk_curator::{Error, ErrorCode, ErrorKind, RetryNTimes};

use crate::support::{self, curator_peer::CuratorPeer};

const HANG: Duration = Duration::from_secs(60);

async fn raw(zk: &zookeeper_client::Client, path: &str) -> Vec<u8> {
    zk.get_data(path).await.expect("read the node").0
}

#[tokio::test]
async fn counters_store_curators_big_endian_bytes_and_read_a_missing_or_empty_node_as_zero() {
    let (server, clients) = support::server_and_clients(1).await;
    let zk = support::observer(&server.connect_string()).await;
    let client = &clients[0];
    let base = support::unique_path("atomic-format");

    let long = DistributedAtomicLong::new(client, &format!("{base}/long")).unwrap();
    assert_eq!(*long.get().await.unwrap().post_value(), 0, "a missing node reads as 0");
    let r = long.add(0x0102_0304_0506_0708).await.unwrap();
    assert!(r.succeeded());
    assert_eq!((*r.pre_value(), *r.post_value()), (0, 0x0102_0304_0506_0708));
    assert_eq!(raw(&zk, long.path()).await, vec![1, 2, 3, 4, 5, 6, 7, 8], "8 bytes, big-endian");
    assert_eq!(*long.subtract(0x0102_0304_0506_0700).await.unwrap().post_value(), 8);
    assert_eq!(*long.decrement().await.unwrap().post_value(), 7);

    let int = DistributedAtomicInteger::new(client, &format!("{base}/int")).unwrap();
    assert!(int.try_initialize(-2).await.unwrap());
    assert!(!int.try_initialize(5).await.unwrap(), "initialize only creates");
    assert_eq!(raw(&zk, int.path()).await, (-2i32).to_be_bytes().to_vec(), "4 bytes, big-endian");
    assert_eq!(*int.increment().await.unwrap().post_value(), -1);

    // An empty node (a parent someone made) reads as 0 and is counted from 0.
    let empty = format!("{base}/empty");
    client.create(&empty).await.unwrap();
    let counter = DistributedAtomicLong::new(client, &empty).unwrap();
    assert_eq!(*counter.get().await.unwrap().post_value(), 0);
    let r = counter.increment().await.unwrap();
    assert_eq!((*r.pre_value(), *r.post_value(), r.stats().optimistic_tries), (0, 1, 1));
    assert_eq!(raw(&zk, &empty).await, 1i64.to_be_bytes().to_vec());

    // The byte value: whatever bytes were written are read back.
    let value = DistributedAtomicValue::new(client, &format!("{base}/bytes")).unwrap();
    assert!(value.get().await.unwrap().post_value().is_empty());
    assert!(value.try_set(b"abc".to_vec()).await.unwrap().succeeded());
    assert_eq!(value.get().await.unwrap().post_value(), b"abc");
}

#[tokio::test]
async fn a_corrupted_counter_is_a_typed_error_naming_the_path_and_length_and_nothing_is_written() {
    let (_server, clients) = support::server_and_clients(1).await;
    let client = &clients[0];
    let path = support::unique_path("atomic-corrupt");
    client.create(&path).data(vec![1, 2, 3]).creating_parents_if_needed().await.unwrap();
    let counter = DistributedAtomicLong::new(client, &path).unwrap();
    for result in [counter.get().await, counter.increment().await, counter.compare_and_set(0, 1).await] {
        match result {
            Err(Error::CorruptedValue { path: p, len: 3, .. }) => assert_eq!(p, path),
            other => panic!("expected CorruptedValue for {path}, got {other:?}"),
        }
    }
    assert_eq!(client.get_data(&path).await.unwrap().0, vec![1, 2, 3], "nothing written");
    // An integer counter refuses a long's 8 bytes.
    counter.force_set(5).await.unwrap();
    let int = DistributedAtomicInteger::new(client, &path).unwrap();
    assert!(matches!(int.get().await, Err(Error::CorruptedValue { len: 8, .. })));
    assert!(matches!(DistributedAtomicLong::new(client, "no-slash"), Err(Error::InvalidPath { .. })));
}

#[tokio::test]
async fn concurrent_increments_from_several_clients_reach_the_exact_total() {
    const CLIENTS: usize = 4;
    const EACH: usize = 40;
    let (_server, clients) = support::server_and_clients(CLIENTS).await;
    let path = support::unique_path("atomic-total");
    let mut tasks = Vec::new();
    for client in &clients {
        let counter = DistributedAtomicLong::new(client, &path)
            .unwrap()
            .with_retry_policy(RetryNTimes::new(1000, Duration::from_millis(1)));
        tasks.push(crate::support::spawn(async move {
            let mut posts = Vec::new();
            while posts.len() < EACH {
                let r = counter.increment().await.expect("increment");
                if r.succeeded() {
                    assert_eq!(*r.post_value(), r.pre_value() + 1);
                    posts.push(*r.post_value());
                }
            }
            posts
        }));
    }
    let mut seen = HashSet::new();
    for task in tasks {
        for post in support::join("increments", HANG, task).await {
            assert!(seen.insert(post), "post value {post} reported twice");
        }
    }
    let total = (CLIENTS * EACH) as i64;
    assert_eq!(seen, (1..=total).collect::<HashSet<_>>(), "every success is one step of the count");
    assert_eq!(*DistributedAtomicLong::new(&clients[0], &path).unwrap().get().await.unwrap().post_value(), total);
}

#[tokio::test]
async fn compare_and_set_applies_only_from_the_expected_value_and_never_creates() {
    let (server, clients) = support::server_and_clients(1).await;
    let zk = support::observer(&server.connect_string()).await;
    let path = support::unique_path("atomic-cas");
    let counter = DistributedAtomicLong::new(&clients[0], &path).unwrap();
    // A missing node is neither created nor reported as a lost race (a loop from `get()`'s 0
    // would spin): NoNode, naming the path.
    match counter.compare_and_set(0, 1).await {
        Err(e) if e.code() == Some(ErrorCode::NoNode) => assert!(e.to_string().contains(&path), "{e}"),
        other => panic!("compare-and-set on a missing node: expected NoNode, got {other:?}"),
    }
    assert!(!support::exists(&zk, &path).await);
    counter.force_set(5).await.unwrap();
    let r = counter.compare_and_set(4, 9).await.unwrap();
    assert!(!r.succeeded());
    assert_eq!((*r.pre_value(), *r.post_value()), (5, 5));
    let r = counter.compare_and_set(5, 9).await.unwrap();
    assert!(r.succeeded());
    assert_eq!((*r.pre_value(), *r.post_value()), (5, 9));
    assert_eq!(raw(&zk, &path).await, 9i64.to_be_bytes().to_vec());
    let r = counter.try_set(-3).await.unwrap();
    assert!(r.succeeded() && *r.post_value() == -3);
}

#[tokio::test]
async fn increments_promoted_to_a_lock_after_their_optimistic_try_loses_still_reach_the_exact_total() {
    const CLIENTS: usize = 4;
    const EACH: usize = 30;
    let (server, clients) = support::server_and_clients(CLIENTS).await;
    let path = support::unique_path("atomic-promoted");
    let lock_path = format!("{path}-lock");
    let mut tasks = Vec::new();
    for client in &clients {
        // One optimistic try, then the mutex with up to 10 tries under it.
        let counter = DistributedAtomicLong::new(client, &path)
            .unwrap()
            .with_retry_policy(RetryNTimes::new(0, Duration::ZERO))
            .promoted_to_lock(
                PromotedToLock::new(&lock_path)
                    .max_lock_time(Duration::from_secs(20))
                    .retry_policy(RetryNTimes::new(10, Duration::from_millis(1))),
            )
            .unwrap();
        tasks.push(crate::support::spawn(async move {
            let (mut done, mut promoted) = (0, 0);
            while done < EACH {
                let r = counter.increment().await.expect("increment");
                promoted += r.stats().promoted_tries;
                if r.succeeded() {
                    done += 1;
                }
            }
            promoted
        }));
    }
    let mut promoted = 0;
    for task in tasks {
        promoted += support::join("increments", HANG, task).await;
    }
    assert!(promoted > 0, "some optimistic try lost and went to the lock");
    let final_value = *DistributedAtomicLong::new(&clients[0], &path).unwrap().get().await.unwrap().post_value();
    assert_eq!(final_value, (CLIENTS * EACH) as i64);
    assert!(support::children(&server.connect_string(), &lock_path).await.is_empty());
}

#[tokio::test]
async fn a_counter_call_returns_within_its_timeout_when_the_server_is_silent() {
    let server = support::server().await;
    let proxy = FaultProxy::start(&server.connect_string()).await.expect("proxy");
    let client = support::client(&proxy.connect_string()).await;
    let path = support::unique_path("atomic-deadline");
    let counter = DistributedAtomicLong::new(&client, &path).unwrap().timeout(Duration::from_millis(500));
    assert_eq!(*counter.increment().await.unwrap().post_value(), 1);
    proxy.set_mode(ProxyMode::Blackhole);
    let start = Instant::now();
    let result = tokio::time::timeout(Duration::from_secs(5), counter.increment()).await.expect("hang");
    assert_eq!(result.as_ref().map_err(Error::kind).err(), Some(ErrorKind::DeadlineExceeded), "{result:?}");
    assert!(start.elapsed() < Duration::from_secs(2), "returned after {:?}", start.elapsed());
    proxy.set_mode(ProxyMode::Pass);
}

#[tokio::test]
async fn curator_and_rust_incrementing_one_counter_reach_the_exact_total() {
    const EACH: usize = 60;
    let server = support::server().await;
    let connect = server.connect_string();
    let (mut peer, client) = tokio::join!(CuratorPeer::start(&connect), support::client(&connect));
    let path = support::unique_path("atomic-interop");
    let counter = DistributedAtomicLong::new(&client, &path)
        .unwrap()
        .with_retry_policy(RetryNTimes::new(1000, Duration::from_millis(1)));
    let rust = async {
        let mut posts = Vec::new();
        while posts.len() < EACH {
            let r = counter.increment().await.expect("increment");
            if r.succeeded() {
                posts.push(*r.post_value());
            }
        }
        posts
    };
    let command = format!("increment {path} {EACH}");
    let (answer, mut posts) = tokio::join!(peer.cmd(&command), rust);
    let curator = answer.strip_prefix("INCREMENTED ").unwrap_or_else(|| panic!("bad answer {answer}"));
    posts.extend(curator.split(',').map(|p| p.parse::<i64>().unwrap()));
    posts.sort_unstable();
    assert_eq!(posts, (1..=2 * EACH as i64).collect::<Vec<_>>(), "each success one step, none twice");
    assert_eq!(peer.cmd(&format!("counter {path}")).await, format!("COUNTER {}", 2 * EACH), "Curator reads our bytes");
    assert_eq!(*counter.get().await.unwrap().post_value(), 2 * EACH as i64);
}

#[tokio::test]
async fn a_lost_race_is_retried_at_once_from_the_value_its_refused_set_brought_back() {
    const CLIENTS: usize = 4;
    const EACH: usize = 20;
    let (_server, clients) = support::server_and_clients(CLIENTS).await;
    let path = support::unique_path("atomic-lost-race");
    let mut tasks = Vec::new();
    for client in &clients {
        // A policy that sleeps an hour between attempts: an attempt that slept would hang the test.
        let counter = DistributedAtomicLong::new(client, &path)
            .unwrap()
            .with_retry_policy(RetryNTimes::new(1000, Duration::from_secs(3600)));
        tasks.push(crate::support::spawn(async move {
            let (mut done, mut retried) = (0, 0);
            while done < EACH {
                let r = counter.increment().await.expect("increment");
                assert!(r.succeeded(), "1000 attempts are plenty for {CLIENTS} clients");
                retried += usize::from(r.stats().optimistic_tries > 1);
                done += 1;
            }
            retried
        }));
    }
    let mut retried = 0;
    for task in tasks {
        retried += support::join("increments", HANG, task).await;
    }
    assert!(retried > 0, "no increment ever lost a race: the test did not test anything");
    let total = *DistributedAtomicLong::new(&clients[0], &path).unwrap().get().await.unwrap().post_value();
    assert_eq!(total, (CLIENTS * EACH) as i64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_of_one_client_take_turns_and_never_lose_a_race_to_each_other() {
    const TASKS: usize = 8;
    const EACH: usize = 25;
    let (_server, clients) = support::server_and_clients(1).await;
    let path = support::unique_path("atomic-one-client");
    let counter = DistributedAtomicLong::new(&clients[0], &path)
        .unwrap()
        .with_retry_policy(RetryNTimes::new(1000, Duration::from_millis(1)));
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        // Each task its own instance: the turn belongs to the client and the path.
        let counter = DistributedAtomicLong::new(&clients[0], &path)
            .unwrap()
            .with_retry_policy(RetryNTimes::new(1000, Duration::from_millis(1)));
        tasks.push(crate::support::spawn(async move {
            let mut tries = Vec::new();
            for _ in 0..EACH {
                let r = counter.increment().await.expect("increment");
                assert!(r.succeeded());
                tries.push(r.stats().optimistic_tries);
            }
            tries
        }));
    }
    for task in tasks {
        let tries = support::join("increments", HANG, task).await;
        assert!(tries.iter().all(|&t| t == 1), "a task lost a race to its own client's tasks: tries {tries:?}");
    }
    assert_eq!(*counter.get().await.unwrap().post_value(), (TASKS * EACH) as i64);
}
