//! The data API, its own public types and the blocking facade under bad input and faults: absurd
//! arguments, data over the server's limit, big trees, timed and untimed calls on a paused or
//! silent link, guaranteed deletes, watches across session ends, close and dropped runtimes, and
//! namespaces — each promise tried to break against a real server.

use crate::support;

use std::time::{Duration, Instant};

use zk_curator::testing::{FaultProxy, ProxyMode, TestingServer};
use zk_curator::{Acl, CreateMode, CuratorClient, Error, ErrorCode, ErrorKind, EventType, OpResult, Transaction};

/// A call under test, resolving to whether it failed.
type Call<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send + 'a>>;

const SLACK: Duration = Duration::from_millis(700);

async fn timed<T>(f: impl std::future::IntoFuture<Output = T>) -> (T, Duration) {
    let start = Instant::now();
    let v = f.into_future().await;
    (v, start.elapsed())
}

fn assert_bad_argument<T: std::fmt::Debug>(r: zk_curator::Result<T>, what: &str, names: &str) {
    let e = r.expect_err(what);
    assert_eq!(e.kind(), ErrorKind::BadArgument, "{what}: {e:?}");
    assert!(e.to_string().contains(names), "{what}: the error names {names:?}: {e}");
}

// ---------------------------------------------------------------------------------------------
// (1) absurd input: typed errors, no panic, no node left

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absurd_input_gets_typed_errors_and_leaves_nothing() {
    support::init_tracing();
    // A server of its own: it touches the server's own `/zookeeper`, which a chroot would hide.
    let server = support::owned_server().await;
    let connect = server.connect_string();
    let client = support::client(&connect).await;
    let zk = support::observer(&connect).await;
    let base = support::unique_path("absurd");
    client.create(&base).creating_parents_if_needed().await.expect("base");

    // Duration::MAX everywhere: no overflow panic, the calls just work.
    let a = format!("{base}/a");
    let max = Duration::MAX;
    assert_eq!(client.create(&a).data(b"1".to_vec()).timeout(max).await.unwrap(), a);
    assert_eq!(client.get_data(&a).timeout(max).await.unwrap().0, b"1".to_vec());
    client.set_data(&a, b"2".to_vec()).timeout(max).await.unwrap();
    assert!(client.exists(&a).timeout(max).await.unwrap().is_some());
    assert!(client.get_children(&a).timeout(max).await.unwrap().is_empty());
    let (_, _, _watch) = client.get_data(&a).watch().timeout(max).await.unwrap();
    let _stream = client.watch(&a).timeout(max).await.unwrap();
    client.delete(&a).timeout(max).await.unwrap();
    client.delete(&a).guaranteed().quietly().timeout(max).await.unwrap();
    let seq = client.create(&format!("{base}/s-")).mode(CreateMode::PersistentSequential).timeout(max).await.unwrap();
    // A deadline already passed: a deadline error, and nothing is sent (no node made or deleted).
    let e = client.delete(&seq).timeout(Duration::ZERO).await.expect_err("zero timeout");
    assert_eq!(e.kind(), ErrorKind::DeadlineExceeded, "{e:?}");
    let e = client.create(&format!("{base}/zero")).timeout(Duration::ZERO).await.expect_err("zero timeout");
    assert_eq!(e.kind(), ErrorKind::DeadlineExceeded, "{e:?}");
    let e = client.create(&format!("{base}/zero-")).mode(CreateMode::EphemeralSequential).timeout(Duration::ZERO).await;
    assert_eq!(e.expect_err("zero timeout").kind(), ErrorKind::DeadlineExceeded);
    let e = client.set_data(&seq, b"zero".to_vec()).timeout(Duration::ZERO).await.expect_err("zero timeout");
    assert_eq!(e.kind(), ErrorKind::DeadlineExceeded, "{e:?}");
    assert_eq!(client.get_data(&seq).await.unwrap().0, Vec::<u8>::new(), "the zero-timeout set_data was not sent");

    // TTL 0 and over the maximum: typed, naming the ttl, nothing sent.
    for ttl in [Duration::ZERO, Duration::MAX, Duration::from_millis(0x0100_0000_0000)] {
        for mode in [CreateMode::PersistentWithTtl(ttl), CreateMode::PersistentSequentialWithTtl(ttl)] {
            assert_bad_argument(client.create(&format!("{base}/ttl")).mode(mode).await, "bad ttl", "ttl");
            assert_bad_argument(
                client.create(&format!("{base}/ttl")).mode(mode).with_protection().await,
                "bad ttl (protected)",
                "ttl",
            );
            assert_bad_argument(
                client.commit(Transaction::new().create(&format!("{base}/ttl"), b"", mode)).await,
                "bad ttl in a transaction",
                "ttl",
            );
        }
    }
    // Empty ACL, plain and protected.
    assert_bad_argument(client.create(&format!("{base}/noacl")).with_acl(Vec::<Acl>::new()).await, "empty acl", "acl");
    assert_bad_argument(
        client.create(&format!("{base}/noacl")).with_acl(Vec::new()).with_protection().await,
        "empty acl (protected)",
        "acl",
    );
    // The root and bad paths.
    for bad in ["", "a", "/a/", "//", "/a/./b", "/\u{0}"] {
        assert_bad_argument(client.get_data(bad).await, "bad path", "path");
        assert_bad_argument(client.create(bad).await, "bad path", "path");
        assert_bad_argument(client.delete(bad).await, "bad path", "path");
    }
    assert_bad_argument(client.create("/").await, "create /", "\"/\"");
    assert_bad_argument(client.delete("/").deleting_children_if_needed().await, "delete /", "\"/\"");
    assert_bad_argument(client.delete("/").guaranteed().await, "guaranteed delete /", "\"/\"");
    assert_bad_argument(client.commit(Transaction::new().create("/", b"", CreateMode::Persistent)).await, "tx /", "/");
    assert_bad_argument(client.delete(&base).guaranteed().version(0).await, "guaranteed + version", "version");

    // /zookeeper: the server's own subtree; typed server errors, and nothing of it deleted.
    let quota_before = support::exists(&zk, "/zookeeper/quota").await;
    let e = client.create("/zookeeper").await.expect_err("create /zookeeper");
    assert_eq!(e.code(), Some(ErrorCode::NodeExists), "{e:?}");
    let e = client.delete("/zookeeper").deleting_children_if_needed().await.expect_err("delete /zookeeper");
    assert!(e.code().is_some(), "a server error: {e:?}");
    assert_eq!(support::exists(&zk, "/zookeeper/quota").await, quota_before, "/zookeeper/quota untouched");

    // A transaction of 0 ops: a no-op, not an error or a hang.
    let (r, took) = timed(client.commit(Transaction::new())).await;
    assert_eq!(r.expect("empty transaction"), Vec::<OpResult>::new());
    assert!(took < Duration::from_secs(2), "empty transaction took {took:?}");

    // Nothing was left behind by any of that.
    assert_eq!(support::sorted_children(&zk, &base).await, vec![node(&seq)], "only the sequential node");
    client.delete(&base).deleting_children_if_needed().await.unwrap();
    client.close().await;
}

fn node(path: &str) -> String {
    support::node_name(path).to_string()
}

/// The default max data size: 1 MiB - 4 KiB (`zk_curator::framework::DEFAULT_MAX_DATA_SIZE`).
const MAX_DATA: usize = 1024 * 1024 - 4096;

/// Asserts `r` is `InvalidArgument` for the data, naming its size and `path`.
#[track_caller]
fn assert_too_big<T: std::fmt::Debug>(r: zk_curator::Result<T>, what: &str, size: usize, path: &str) {
    match r {
        Err(Error::InvalidArgument { name: "data", value, .. }) => {
            assert!(value.contains(&format!("{size} bytes")), "{what}: names the size {size}: {value}");
            assert!(value.contains(path), "{what}: names the path {path}: {value}");
        }
        other => panic!("{what}: expected InvalidArgument for the data, got {other:?}"),
    }
}

/// Data over the client's max data size (by default 1 MiB - 4 KiB: the server's default
/// jute.maxbuffer less room for the rest of the request) is refused with `InvalidArgument`
/// naming its size and path, before anything is sent: with the link up, the connection is never
/// dropped (no SUSPENDED, the same session) and no node is made; with the link blackholed, the
/// refusal comes instead of a connection error. Data of exactly the limit is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_over_the_max_data_size_is_refused_before_anything_is_sent() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let proxy = FaultProxy::start(&connect).await.expect("proxy");
    let client = support::client(&proxy.connect_string()).await;
    let base = support::unique_path("big");
    client.create(&base).creating_parents_if_needed().await.expect("base");
    let half = vec![7u8; MAX_DATA / 2 + 1];
    let session = client.session();
    let mut states = client.connection_states();
    assert_eq!(states.try_next(), Some(zk_curator::ConnectionState::Connected));
    let (c, p) = (format!("{base}/c"), format!("{base}/p"));

    // Just over the limit, and over the server's jute.maxbuffer (which would drop the connection).
    for (blackholed, n) in [(false, MAX_DATA + 1), (false, 1024 * 1024 + 1), (true, MAX_DATA + 1)] {
        if blackholed {
            proxy.set_mode(ProxyMode::Blackhole);
        }
        let t = Duration::from_secs(2);
        let big = vec![7u8; n];
        assert_too_big(client.create(&c).data(big.clone()).timeout(t).await, "create", n, &c);
        let sequential = client.create(&c).data(big.clone()).mode(CreateMode::EphemeralSequential).timeout(t);
        assert_too_big(sequential.await, "sequential create", n, &c);
        assert_too_big(client.create(&p).data(big.clone()).with_protection().timeout(t).await, "protected", n, &p);
        assert_too_big(client.set_data(&base, big.clone()).timeout(t).await, "set_data", n, &base);
        let one = Transaction::new().check(&base, 0).set_data(&base, &big, None);
        assert_too_big(client.commit(one).timeout(t).await, "transaction", n, &base);
        // Two operations under the limit each, over it together: the request carries both.
        let two = Transaction::new().create(&c, &half, CreateMode::Persistent).set_data(&base, &half, None);
        assert_too_big(client.commit(two).timeout(t).await, "transaction of two", 2 * half.len(), &base);
    }
    proxy.set_mode(ProxyMode::Pass);
    // The blackhole was too short to suspend a 10 s session; nothing oversized ever reached the
    // server, so the connection was never dropped.
    assert!(support::queued_states(&mut states).is_empty(), "the connection stayed up");
    assert_eq!(client.session(), session, "the same session");
    assert!(client.exists(&c).await.unwrap().is_none(), "no node");
    assert!(client.get_children(&base).await.unwrap().is_empty(), "no protected node either");
    // Exactly the limit still fits into a request the server reads.
    client.set_data(&base, vec![1u8; MAX_DATA]).await.expect("the max data size is accepted");
    client.create(&c).data(vec![2u8; MAX_DATA]).await.expect("a create of the max data size");
    assert_eq!(client.get_data(&c).await.unwrap().0.len(), MAX_DATA);
    assert!(support::queued_states(&mut states).is_empty(), "the connection stayed up");
    client.delete(&base).deleting_children_if_needed().await.unwrap();
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_children_of_a_big_tree() {
    let server = support::server().await;
    let connect = server.connect_string();
    let client = support::client(&connect).await;
    let base = support::unique_path("tree");
    client.create(&base).creating_parents_if_needed().await.unwrap();
    let mut tx = Transaction::new();
    for i in 0..20 {
        let dir = format!("{base}/d{i}");
        tx = tx.create(&dir, b"", CreateMode::Persistent);
        for j in 0..20 {
            tx = tx.create(&format!("{dir}/n{j}"), b"", CreateMode::Persistent);
        }
    }
    let results = client.commit(tx).await.expect("420 creates in one transaction");
    assert_eq!(results.len(), 420);
    let (r, took) = timed(client.delete(&base).deleting_children_if_needed().timeout(Duration::from_secs(30))).await;
    r.expect("recursive delete");
    println!("deleted 421 nodes in {took:?}");
    assert!(client.exists(&base).await.unwrap().is_none());
    client.close().await;
}

// ---------------------------------------------------------------------------------------------
// (2)/(3) deadlines while the server is paused; nothing left behind

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequential_create_with_timeout_while_paused() {
    support::init_tracing();
    let server = support::owned_server().await;
    let connect = server.connect_string();
    let client = support::client(&connect).await;
    let base = support::unique_path("paused");
    client.create(&base).creating_parents_if_needed().await.unwrap();
    let zk = support::observer(&connect).await;
    let timeout = Duration::from_secs(1);

    server.pause().expect("pause");
    let (plain, took_plain) =
        timed(client.create(&format!("{base}/plain-")).mode(CreateMode::PersistentSequential).timeout(timeout)).await;
    let (protected, took_protected) = timed(
        client
            .create(&format!("{base}/prot-"))
            .mode(CreateMode::PersistentSequential)
            .with_protection()
            .timeout(timeout),
    )
    .await;
    // The same limit as an instant: a request's `.timeout` takes any deadline.
    let (read, took_read) = timed(client.get_data(&base).timeout(Instant::now() + timeout)).await;
    server.resume().expect("resume");
    assert!(took_read <= timeout + SLACK, "a read with an instant deadline returned after {took_read:?}");
    assert_eq!(read.expect_err("paused server").kind(), ErrorKind::DeadlineExceeded);
    for (r, took, what) in [(&plain, took_plain, "plain"), (&protected, took_protected, "protected")] {
        assert!(took <= timeout + SLACK, "{what} create returned after {took:?}");
        let e = r.as_ref().expect_err("paused server");
        assert_eq!(e.kind(), ErrorKind::DeadlineExceeded, "{what}: {e:?}");
    }
    // The protected create cleans up after itself; the plain one may still have been applied (it
    // is documented as not cancel safe: its name is unknown).
    let left = support::children_become(&zk, &base, &[], Duration::from_secs(5)).await;
    let protected_left: Vec<_> = left.iter().filter(|n| n.contains("prot-")).collect();
    assert!(protected_left.is_empty(), "a timed-out protected create left {protected_left:?}");
    println!("after the timed-out plain sequential create: {left:?} (documented: may be applied)");
    client.delete(&base).deleting_children_if_needed().await.unwrap();
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_timed_call_returns_within_its_timeout_while_blackholed() {
    support::init_tracing();
    let server = support::server().await;
    let proxy = FaultProxy::start(&server.connect_string()).await.expect("proxy");
    let client = support::client(&proxy.connect_string()).await;
    let base = support::unique_path("timed");
    client.create(&base).creating_parents_if_needed().await.unwrap();
    let t = Duration::from_millis(800);
    proxy.set_mode(ProxyMode::Blackhole);
    let p = format!("{base}/x");
    let calls: Vec<(&str, Call<'_>)> = vec![
        ("create", Box::pin(async { client.create(&p).timeout(t).await.is_err() })),
        (
            "create seq",
            Box::pin(async { client.create(&p).mode(CreateMode::EphemeralSequential).timeout(t).await.is_err() }),
        ),
        (
            "create parents",
            Box::pin(async {
                client.create(&format!("{p}/a/b")).creating_parents_if_needed().timeout(t).await.is_err()
            }),
        ),
        ("get_data", Box::pin(async { client.get_data(&base).timeout(t).await.is_err() })),
        ("get_data watch", Box::pin(async { client.get_data(&base).watch().timeout(t).await.is_err() })),
        ("set_data", Box::pin(async { client.set_data(&base, b"1".to_vec()).timeout(t).await.is_err() })),
        ("exists", Box::pin(async { client.exists(&base).timeout(t).await.is_err() })),
        ("children", Box::pin(async { client.get_children(&base).timeout(t).await.is_err() })),
        ("delete", Box::pin(async { client.delete(&p).timeout(t).await.is_err() })),
        (
            "delete children",
            Box::pin(async { client.delete(&p).deleting_children_if_needed().timeout(t).await.is_err() }),
        ),
        ("watch", Box::pin(async { client.watch(&base).timeout(t).await.is_err() })),
        (
            "commit",
            Box::pin(async {
                let tx = zk_curator::Transaction::new().create(&p, b"", CreateMode::Persistent);
                client.commit(tx).timeout(t).await.is_err()
            }),
        ),
    ];
    for (what, call) in calls {
        let (failed, took) = timed(call).await;
        assert!(took <= t + SLACK, "{what} returned after {took:?} with timeout {t:?}");
        assert!(failed, "{what} cannot succeed while blackholed");
    }
    proxy.set_mode(ProxyMode::Pass);
    client.delete(&base).deleting_children_if_needed().timeout(Duration::from_secs(15)).await.unwrap();
    client.close().await;
}

/// `delete().guaranteed()` whose foreground attempt fails for lack of a connection (here: its
/// timeout, while the link is silent) must hand the delete to the background queue; so must one
/// that is dropped mid-call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guaranteed_delete_keeps_trying_after_a_timeout_or_a_drop_while_blackholed() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let proxy = FaultProxy::start(&connect).await.expect("proxy");
    let client = support::client(&proxy.connect_string()).await;
    let zk = support::observer(&connect).await;
    let base = support::unique_path("gdel");
    let (timed_out, dropped, quiet) = (format!("{base}/timed-out"), format!("{base}/dropped"), format!("{base}/quiet"));
    for p in [&timed_out, &dropped, &quiet] {
        client.create(p).creating_parents_if_needed().await.unwrap();
    }

    proxy.set_mode(ProxyMode::Blackhole);
    let t = Duration::from_millis(800);
    let (r, took) = timed(client.delete(&timed_out).guaranteed().timeout(t)).await;
    assert!(took <= t + SLACK, "returned after {took:?}");
    assert!(r.is_err(), "cannot delete while blackholed: {r:?}");
    let (r, _) = timed(client.delete(&quiet).guaranteed().quietly().timeout(t)).await;
    assert!(r.is_err(), "cannot delete while blackholed: {r:?}");
    {
        let c = client.clone();
        let d = dropped.clone();
        let task = crate::support::spawn(async move { c.delete(&d).guaranteed().await });
        tokio::time::sleep(Duration::from_millis(300)).await;
        task.abort();
        let _ = task.await;
    }
    let pending = client.pending_background_deletes();
    proxy.set_mode(ProxyMode::Pass);
    for p in [&quiet, &timed_out, &dropped] {
        support::eventually(Duration::from_secs(15), &format!("{p} deleted in the background"), || async {
            !support::exists(&zk, p).await
        })
        .await;
    }
    assert!(pending >= 3, "three deletes were queued, saw {pending}");
    client.delete(&base).deleting_children_if_needed().quietly().await.unwrap();
    client.close().await;
}

/// A guaranteed recursive delete is guaranteed while it deletes the children too: one that times
/// out (or is dropped) with the link blackholed leaves the whole subtree to the background
/// queue, which deletes it, children first, once the link heals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guaranteed_recursive_delete_cut_off_while_deleting_children_finishes_the_subtree_after_the_heal() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let proxy = FaultProxy::start(&connect).await.expect("proxy");
    let client = support::client(&proxy.connect_string()).await;
    let zk = support::observer(&connect).await;
    let base = support::unique_path("gdel-tree");
    let (timed_out, dropped) = (format!("{base}/timed-out"), format!("{base}/dropped"));
    for tree in [&timed_out, &dropped] {
        for leaf in ["a/b/c", "a/b/c2", "a/b2", "x"] {
            client.create(&format!("{tree}/{leaf}")).creating_parents_if_needed().await.unwrap();
        }
    }

    proxy.set_mode(ProxyMode::Blackhole);
    let t = Duration::from_millis(500);
    let (r, took) = timed(client.delete(&timed_out).deleting_children_if_needed().guaranteed().timeout(t)).await;
    assert!(took <= t + SLACK, "returned after {took:?}");
    assert!(r.is_err(), "cannot delete while blackholed: {r:?}");
    {
        let c = client.clone();
        let d = dropped.clone();
        let task = crate::support::spawn(async move { c.delete(&d).deleting_children_if_needed().guaranteed().await });
        tokio::time::sleep(Duration::from_millis(300)).await;
        task.abort();
        let _ = task.await;
    }
    assert!(client.pending_background_deletes() >= 2, "both subtrees were handed to the background queue");
    assert!(support::exists(&zk, &format!("{timed_out}/a/b/c")).await, "nothing could be deleted while blackholed");
    proxy.set_mode(ProxyMode::Pass);
    for tree in [&timed_out, &dropped] {
        support::eventually(Duration::from_secs(15), &format!("{tree} deleted in the background"), || async {
            !support::exists(&zk, tree).await
        })
        .await;
    }
    assert!(support::sorted_children(&zk, &base).await.is_empty(), "nothing of either subtree is left");
    client.delete(&base).quietly().await.unwrap();
    client.close().await;
}

// ---------------------------------------------------------------------------------------------
// (5) a silent link never hangs an untimed call forever

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn untimed_commit_and_reads_return_while_blackholed() {
    support::init_tracing();
    let server = support::server().await;
    let proxy = FaultProxy::start(&server.connect_string()).await.expect("proxy");
    let session_timeout = Duration::from_secs(2);
    let client = CuratorClient::builder(&proxy.connect_string())
        .session_timeout(session_timeout)
        .connection_timeout(Duration::from_secs(1))
        .retry_policy(zk_curator::RetryNTimes::new(2, Duration::from_millis(100)))
        .connect()
        .await
        .unwrap();
    let base = support::unique_path("silent");
    client.create(&base).creating_parents_if_needed().await.unwrap();
    proxy.set_mode(ProxyMode::Blackhole);
    let bound = Duration::from_secs(12);
    let tx = Transaction::new().create(&format!("{base}/a"), b"", CreateMode::Persistent);
    let (r, took) = timed(tokio::time::timeout(bound, client.commit(tx))).await;
    let r = r.unwrap_or_else(|_| panic!("commit hung past {bound:?} on a silent link"));
    let e = r.expect_err("commit cannot succeed");
    assert!(matches!(e.kind(), ErrorKind::Retryable | ErrorKind::SessionLost), "honest kind: {e:?}");
    println!("commit on a silent link: {e} after {took:?}");
    let (r, took) = timed(tokio::time::timeout(bound, client.get_data(&base))).await;
    let e = r.expect("get_data hung").expect_err("cannot read");
    assert!(matches!(e.kind(), ErrorKind::Retryable | ErrorKind::SessionLost), "honest kind: {e:?}");
    println!("get_data on a silent link: {e} after {took:?}");
    proxy.set_mode(ProxyMode::Pass);
    assert!(client.block_until_connected(Duration::from_secs(10)).await.unwrap());
    client.delete(&base).deleting_children_if_needed().quietly().await.unwrap();
    client.close().await;
}

// ---------------------------------------------------------------------------------------------
// (4) session replaced mid-watch / mid-call

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_end_with_the_session_and_streams_end_without_panicking() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let client = support::namespaced_client(&connect, "review16").await;
    let base = format!("/w-{}", std::process::id());
    client.create(&base).creating_parents_if_needed().await.unwrap();
    let (_, _, data_watch) = client.get_data(&base).watch().await.unwrap();
    let (none, exists_watch) = client.exists(&format!("{base}/nope")).watch().await.unwrap();
    assert!(none.is_none());
    let (_, children_watch) = client.get_children(&base).watch().await.unwrap();
    let mut stream = client.watch(&base).recursive().await.unwrap();

    // An in-flight call across the expiry: it retries on the new session or fails typed.
    let c = client.clone();
    let b = base.clone();
    let inflight = crate::support::spawn(async move {
        let mut n = 0;
        loop {
            match c.set_data(&b, format!("{n}")).timeout(Duration::from_secs(5)).await {
                Ok(_) => n += 1,
                Err(e) => break Err(e),
            }
            if n > 50 {
                break Ok(n);
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    zk_curator::testing::expire_session(&connect, &client).await.expect("expire");
    match support::join("in-flight set_data", Duration::from_secs(20), inflight).await {
        Ok(_) => {}
        Err(e) => assert!(e.kind() != ErrorKind::Other, "typed retryable/session error: {e:?}"),
    }

    for (what, watch) in [("data", data_watch), ("exists", exists_watch), ("children", children_watch)] {
        let event = tokio::time::timeout(Duration::from_secs(10), watch)
            .await
            .unwrap_or_else(|_| panic!("{what} watch hangs after the session expired"));
        // The data watch may have seen the set_data first; else it must see the session end.
        if what == "data" && event.event_type == EventType::NodeDataChanged {
            assert_eq!(event.path, base, "namespace stripped");
        } else {
            assert_eq!(event.event_type, EventType::SessionEnded, "{what}: {event:?}");
        }
    }
    // The stream yields the data changes (namespace stripped) and then ends.
    let mut ended = false;
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        match tokio::time::timeout(Duration::from_secs(10), stream.next()).await.expect("stream hangs") {
            Some(e) if e.event_type == EventType::NodeDataChanged => assert_eq!(e.path, base, "namespace stripped"),
            Some(e) if e.event_type == EventType::SessionEnded => {}
            Some(e) => assert!(matches!(e.event_type, EventType::Disconnected | EventType::Reconnected), "{e:?}"),
            None => {
                ended = true;
                break;
            }
        }
    }
    assert!(ended, "the stream ends after SessionEnded");
    // Polled again (and again) after its end: None, no panic.
    assert!(stream.next().await.is_none());
    assert!(futures_util_next(&mut stream).await.is_none());
    // The client goes on, and a new watch works on the new session.
    let mut again = client.watch(&base).timeout(Duration::from_secs(10)).await.unwrap();
    client.set_data(&base, b"x".to_vec()).await.unwrap();
    let e = tokio::time::timeout(Duration::from_secs(5), again.next()).await.unwrap().unwrap();
    assert_eq!((e.event_type, e.path.as_str()), (EventType::NodeDataChanged, base.as_str()));
    client.delete(&base).deleting_children_if_needed().await.unwrap();
    client.close().await;
}

/// zookeeper-client 0.11.2 leaves persistent watches out of what it sets again when it reconnects
/// a session: without setting the watch again itself, a stream heard nothing after its first
/// `Reconnected`, ever.
#[tokio::test]
async fn a_persistent_watch_reports_changes_after_a_reconnect_of_its_session() {
    support::init_tracing();
    let server = support::server().await;
    let proxy = FaultProxy::start(&server.connect_string()).await.unwrap();
    let client =
        support::client_with_timeouts(&proxy.connect_string(), Duration::from_secs(10), Duration::from_secs(2)).await;
    let writer = support::client(&server.connect_string()).await;
    let base = support::unique_path("watch-reconnect");
    let watched = format!("{base}/node");
    writer.create(&watched).creating_parents_if_needed().await.unwrap();
    // Two paths: a 3.8 server keeps one watch mode per path and session (ZOOKEEPER-4466).
    let mut recursive = client.watch(&base).recursive().await.unwrap();
    let mut node = client.watch(&watched).await.unwrap();
    let session = client.session_id();

    proxy.set_mode(ProxyMode::Cut);
    tokio::time::sleep(Duration::from_millis(300)).await;
    proxy.set_mode(ProxyMode::Pass);
    for stream in [&mut recursive, &mut node] {
        loop {
            let event = tokio::time::timeout(Duration::from_secs(10), stream.next())
                .await
                .expect("the reconnect is reported")
                .expect("the stream goes on");
            assert!(matches!(event.event_type, EventType::Disconnected | EventType::Reconnected), "{event:?}");
            if event.event_type == EventType::Reconnected {
                break;
            }
        }
    }
    assert_eq!(client.session_id(), session, "the same session, reconnected");

    let child = format!("{base}/after");
    writer.create(&child).await.unwrap();
    writer.set_data(&watched, b"after".to_vec()).await.unwrap();
    let event = tokio::time::timeout(Duration::from_secs(5), recursive.next()).await;
    let event = event.expect("the recursive watch reports a creation after the reconnect").unwrap();
    assert_eq!((event.event_type, event.path.as_str()), (EventType::NodeCreated, child.as_str()));
    let event = tokio::time::timeout(Duration::from_secs(5), node.next()).await;
    let event = event.expect("the node's watch reports a change after the reconnect").unwrap();
    assert_eq!((event.event_type, event.path.as_str()), (EventType::NodeDataChanged, watched.as_str()));
    writer.delete(&base).deleting_children_if_needed().await.unwrap();
    client.close().await;
}

async fn futures_util_next(s: &mut zk_curator::framework::WatchStream) -> Option<zk_curator::WatchedEvent> {
    use futures_core::Stream;
    std::future::poll_fn(|cx| std::pin::Pin::new(&mut *s).poll_next(cx)).await
}

/// Closing the client ends watches set through it (SessionEnded), and the streams end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_ends_watches() {
    let server = support::server().await;
    let client = support::client(&server.connect_string()).await;
    let base = support::unique_path("closew");
    client.create(&base).creating_parents_if_needed().await.unwrap();
    let (_, _, w) = client.get_data(&base).watch().await.unwrap();
    let mut s = client.watch(&base).await.unwrap();
    client.delete(&base).await.unwrap();
    let _ = tokio::time::timeout(Duration::from_secs(5), w).await.expect("fires on delete");
    let (_, w2) = client.exists(&base).watch().await.unwrap();
    client.close().await;
    let e = tokio::time::timeout(Duration::from_secs(5), w2).await.expect("watch hangs after close");
    assert_eq!(e.event_type, EventType::SessionEnded);
    let mut n = 0;
    while let Some(_e) = tokio::time::timeout(Duration::from_secs(5), s.next()).await.expect("stream hangs after close")
    {
        n += 1;
        assert!(n < 10);
    }
    assert!(s.next().await.is_none());
    assert_eq!(client.get_data("/").await.unwrap_err().kind(), ErrorKind::Closed);
}

// ---------------------------------------------------------------------------------------------
// (6) namespacing in and out

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_is_applied_in_and_stripped_out() {
    let server = support::server().await;
    let connect = server.connect_string();
    let ns = format!("review16ns{}", std::process::id());
    let client = support::namespaced_client(&connect, &ns).await;
    let zk = support::observer(&connect).await;
    let seq =
        client.create("/q/item-").mode(CreateMode::PersistentSequential).creating_parents_if_needed().await.unwrap();
    assert!(seq.starts_with("/q/item-") && seq.len() == "/q/item-".len() + 10, "{seq}");
    assert!(support::exists(&zk, &format!("/{ns}{seq}")).await);
    let prot = client.create("/q/p-").mode(CreateMode::EphemeralSequential).with_protection().await.unwrap();
    assert!(prot.starts_with("/q/_c_"), "protected path without namespace: {prot}");
    assert!(support::exists(&zk, &format!("/{ns}{prot}")).await);
    let mut root_stream = client.watch("/").recursive().await.unwrap();
    let results = client
        .commit(
            Transaction::new()
                .create("/q/t-", b"", CreateMode::PersistentSequential)
                .set_data("/q", b"d", None)
                .check("/q", 1),
        )
        .await
        .unwrap();
    match &results[0] {
        OpResult::Created { path, .. } => assert!(path.starts_with("/q/t-") && !path.contains(&ns), "{path}"),
        other => panic!("{other:?}"),
    }
    let e = tokio::time::timeout(Duration::from_secs(5), root_stream.next()).await.unwrap().unwrap();
    assert!(e.path.starts_with("/q/t-"), "event path without namespace: {e:?}");
    let e = tokio::time::timeout(Duration::from_secs(5), root_stream.next()).await.unwrap().unwrap();
    assert_eq!((e.event_type, e.path.as_str()), (EventType::NodeDataChanged, "/q"));
    // The namespace root itself is "/".
    let (_, _, w) = client.get_data("/").watch().await.unwrap();
    client.set_data("/", b"root".to_vec()).await.unwrap();
    let e = tokio::time::timeout(Duration::from_secs(5), w).await.unwrap();
    assert_eq!(e.path, "/");
    assert_eq!(zk.get_data(&format!("/{ns}")).await.unwrap().0, b"root");
    // A failed transaction names the caller's path.
    match client.commit(Transaction::new().check("/q", 1).delete("/q/missing", None)).await {
        Err(Error::TransactionFailed { index: 1, path, code: ErrorCode::NoNode }) => assert_eq!(path, "/q/missing"),
        other => panic!("{other:?}"),
    }
    client.delete("/").quietly().await.expect_err("the namespace root cannot be deleted as /");
    client.delete("/q").deleting_children_if_needed().await.unwrap();
    client.close().await;
    let _ = zk.delete(&format!("/{ns}"), None).await;
}

// ---------------------------------------------------------------------------------------------
// Drop never panics, with or without a runtime

#[test]
fn watches_and_streams_dropped_outside_any_runtime() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let (server, client, watch, stream, pending) = rt.block_on(async {
        let server = support::server().await;
        let client = support::client(&server.connect_string()).await;
        let base = support::unique_path("dropout");
        client.create(&base).creating_parents_if_needed().await.unwrap();
        let (_, _, watch) = client.get_data(&base).watch().await.unwrap();
        let stream = client.watch(&base).await.unwrap();
        let c = client.clone();
        let pending = Box::pin(async move { c.delete(&base).guaranteed().await });
        (server, client, watch, stream, pending)
    });
    // Dropped on plain threads, with and without the runtime alive.
    std::thread::spawn(move || {
        drop(watch);
        drop(stream);
        drop(pending);
    })
    .join()
    .expect("drops outside a runtime do not panic");
    let c2 = client.clone();
    drop(rt);
    std::thread::spawn(move || drop(c2)).join().expect("client dropped after its runtime");
    drop(client);
    drop(server);
}

// ---------------------------------------------------------------------------------------------
// (8) blocking facade

#[test]
fn blocking_guard_dropped_on_another_thread_releases_and_runtime_calls_are_typed() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let server: TestingServer = rt.block_on(support::server());
    let connect = server.connect_string();
    let client = zk_curator::blocking::CuratorClient::connect(&connect).unwrap();
    let path = support::unique_path("blocking");
    let mutex = zk_curator::blocking::InterProcessMutex::new(&client, &path).unwrap();
    let guard = mutex.try_lock_for(Duration::MAX).unwrap().expect("free lock");
    std::thread::spawn(move || drop(guard)).join().unwrap();
    let start = Instant::now();
    let other = zk_curator::blocking::InterProcessMutex::new(&client, &path).unwrap();
    let g = other.try_lock_for(Duration::from_secs(5)).unwrap().expect("released by the drop on another thread");
    assert!(start.elapsed() < Duration::from_secs(5));
    // Inside a runtime: a typed error naming the runtime, not a panic.
    let e = rt.block_on(async { other.try_lock_for(Duration::from_millis(10)) }).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BadArgument);
    assert!(e.to_string().contains("runtime"), "{e}");
    let e = rt.block_on(async { client.block_on(async {}) }).unwrap_err();
    assert!(e.to_string().contains("runtime"), "{e}");
    g.release().unwrap();
    client.close().unwrap();
    drop(server);
}

/// A request the server could not read because of its paths (not only its data) is refused with
/// a typed bad-argument error before anything is sent, never sent to make the server drop the
/// connection: a create of the max data size under a long path (long through the namespace too),
/// a transaction of many operations on long paths with little data, and a read of an absurdly
/// long path. The connection stays up and the session is the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_over_the_packet_limit_through_its_paths_is_refused_before_anything_is_sent() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let namespace = format!("ns-{}", "n".repeat(3000));
    let client = support::namespaced_client(&connect, &namespace).await;
    let base = support::unique_path("long-paths");
    client.create(&base).creating_parents_if_needed().await.expect("base");
    let session = client.session();
    let mut states = client.connection_states();
    assert_eq!(states.try_next(), Some(zk_curator::ConnectionState::Connected));
    let t = Duration::from_secs(5);
    let bad = |r: zk_curator::Result<String>, what: &str| {
        let e = r.expect_err(what);
        assert_eq!(e.kind(), ErrorKind::BadArgument, "{what}: a typed bad-argument error, got {e:?}");
    };

    // The max data size, under a path that with the namespace is over 4 KiB.
    let long = format!("{base}/{}", "l".repeat(2000));
    bad(client.create(&long).data(vec![1u8; MAX_DATA]).timeout(t).await, "create of the max data size, long path");
    let e = client.set_data(&base, vec![1u8; MAX_DATA]).timeout(t).await;
    e.expect("the max data size under a short path still fits");
    // 300 creates of 4,000-byte paths and no data: 1.2 MB of paths in one request.
    let mut tx = Transaction::new();
    for i in 0..300 {
        tx = tx.create(&format!("{base}/{i}-{}", "p".repeat(4000)), b"", CreateMode::Persistent);
    }
    let r = client.commit(tx).timeout(t).await;
    assert_eq!(r.expect_err("a transaction over the packet limit").kind(), ErrorKind::BadArgument);
    // A read of a path of 1.1 MB.
    let absurd = format!("/{}", "a".repeat(1100 * 1024));
    let r = client.get_data(&absurd).timeout(t).await;
    assert_eq!(r.expect_err("an absurd path").kind(), ErrorKind::BadArgument);
    let r = client.exists(&absurd).timeout(t).await;
    assert_eq!(r.expect_err("an absurd path").kind(), ErrorKind::BadArgument);

    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(support::queued_states(&mut states).is_empty(), "the connection stayed up");
    assert_eq!(client.session(), session, "the same session");
    client.delete(&base).deleting_children_if_needed().await.unwrap();
    client.close().await;
}

/// The background queue finishes the subtree the call was deleting, not one created later at the
/// same path: a guaranteed recursive delete cut off mid-walk, whose path is then deleted and
/// re-created (with a child) by someone else while our link is down, leaves the new node and its
/// child alone once the link heals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guaranteed_recursive_delete_never_deletes_a_subtree_re_created_at_its_path_after_the_call() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let proxy = FaultProxy::start(&connect).await.expect("proxy");
    let client = support::client(&proxy.connect_string()).await;
    let zk = support::observer(&connect).await;
    let base = support::unique_path("gdel-recreated");
    let tree = format!("{base}/tree");
    client.create(&tree).creating_parents_if_needed().await.unwrap();
    let mut tx = Transaction::new();
    for i in 0..400 {
        tx = tx.create(&format!("{tree}/n{i}"), b"", CreateMode::Persistent);
    }
    client.commit(tx).await.unwrap();

    let c = client.clone();
    let t = tree.clone();
    let call = crate::support::spawn(async move {
        c.delete(&t).deleting_children_if_needed().guaranteed().timeout(Duration::from_secs(2)).await
    });
    // Cut the link once the walk has begun deleting.
    support::eventually(Duration::from_secs(10), "the walk began", || async {
        support::sorted_children(&zk, &tree).await.len() < 390
    })
    .await;
    proxy.set_mode(ProxyMode::Blackhole);
    let r = support::join("the cut-off delete", Duration::from_secs(10), call).await;
    assert!(r.is_err(), "cut off mid-walk: {r:?}");
    assert!(client.pending_background_deletes() >= 1, "the subtree was handed to the queue");

    // Someone else, with a working link, deletes what is left and makes a new node at the path.
    let left = support::sorted_children(&zk, &tree).await;
    for child in &left {
        zk.delete(&format!("{tree}/{child}"), None).await.unwrap();
    }
    zk.delete(&tree, None).await.unwrap();
    let acls = zookeeper_client::Acls::anyone_all();
    let opts = zookeeper_client::CreateMode::Persistent.with_acls(acls);
    zk.create(&tree, b"theirs", &opts).await.unwrap();
    zk.create(&format!("{tree}/theirs"), b"theirs", &opts).await.unwrap();

    proxy.set_mode(ProxyMode::Pass);
    support::eventually(Duration::from_secs(15), "the queue is done", || async {
        client.pending_background_deletes() == 0
    })
    .await;
    assert!(support::exists(&zk, &format!("{tree}/theirs")).await, "the new node's child is left alone");
    assert_eq!(zk.get_data(&tree).await.unwrap().0, b"theirs".to_vec(), "the new node is left alone");
    client.delete(&base).deleting_children_if_needed().await.unwrap();
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_instant_already_past_is_a_deadline_error_and_sends_nothing() {
    let (server, clients) = support::server_and_clients(1).await;
    let client = &clients[0];
    let base = support::unique_path("past-instant");
    client.create(&base).creating_parents_if_needed().await.unwrap();
    let kept = format!("{base}/kept");
    client.create(&kept).data(b"1".to_vec()).await.unwrap();
    let past = Instant::now() - Duration::from_millis(1).min(Instant::now().elapsed());
    let expect_deadline = |r: Result<(), Error>, what: &str| {
        let e = r.expect_err(what);
        assert_eq!(e.kind(), ErrorKind::DeadlineExceeded, "{what}: {e:?}");
    };
    expect_deadline(client.create(&format!("{base}/plain")).timeout(past).await.map(drop), "create");
    expect_deadline(
        client.create(&format!("{base}/seq-")).mode(CreateMode::PersistentSequential).timeout(past).await.map(drop),
        "sequential create",
    );
    expect_deadline(
        client.create(&format!("{base}/prot")).with_protection().timeout(past).await.map(drop),
        "protected create",
    );
    expect_deadline(client.set_data(&kept, b"2".to_vec()).timeout(past).await.map(drop), "set_data");
    expect_deadline(client.delete(&kept).timeout(past).await.map(drop), "delete");
    let tx = Transaction::new().create(&format!("{base}/tx"), b"", CreateMode::Persistent);
    expect_deadline(client.commit(tx).timeout(past).await.map(drop), "commit");
    let zk = support::observer(&server.connect_string()).await;
    assert_eq!(support::sorted_children(&zk, &base).await, ["kept"], "nothing created, nothing deleted");
    assert_eq!(client.get_data(&kept).await.unwrap().0, b"1".to_vec(), "nothing written");
}
