//! The crate as a user crate sees it: everything here goes through zk-curator's own public types
//! (and tokio); nothing is imported from the ZooKeeper client crate underneath, nor from the
//! escape-hatch module, nor from the shared test helpers. The last test checks that this file
//! keeps it that way.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use zk_curator::framework::{SaslOptions, TlsOptions};
use zk_curator::locks::{FencingToken, GuardedWrite, HoldState, InterProcessMutex};
use zk_curator::testing::TestingServer;
use zk_curator::{
    blocking, Acl, CreateMode, CuratorClient, Error, ErrorCode, ErrorKind, EventType, Id, OpResult, Permissions,
    RetryNTimes, Stat, Transaction, WatchedEvent,
};

/// Hang guard for awaits that must finish.
const HANG: Duration = Duration::from_secs(15);

/// A ZooKeeper for this test, started with the public harness.
async fn start_server() -> TestingServer {
    TestingServer::start().await.unwrap_or_else(|e| panic!("cannot start ZooKeeper for tests: {e}"))
}

async fn connect(connect_string: &str) -> zk_curator::Result<CuratorClient> {
    CuratorClient::builder(connect_string)
        .session_timeout(Duration::from_secs(10))
        .connection_timeout(Duration::from_secs(5))
        .retry_policy(RetryNTimes::new(10, Duration::from_millis(100)))
        .connect()
        .await
}

fn unique(name: &str) -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    format!("/public-api/{name}-{nanos:x}-{}", std::process::id())
}

/// Locks, data, error codes, ACLs and watches through the async API, written as an application
/// would (`?` on `zk_curator::Result`).
async fn async_user(connect_string: &str, base: &str) -> zk_curator::Result<()> {
    let client = connect(connect_string).await?;

    // Data: create / get / set / exists / children.
    let config = format!("{base}/config");
    assert_eq!(client.create(&config).data("v1").creating_parents_if_needed().await?, config);
    let (data, stat): (Vec<u8>, Stat) = client.get_data(&config).await?;
    assert_eq!((data.as_slice(), stat.version), (b"v1".as_slice(), 0));
    let stat = client.set_data(&config, "v2").version(stat.version).await?;
    assert_eq!(stat.version, 1);
    assert_eq!(client.exists(&config).await?.map(|s| s.version), Some(1));
    assert_eq!(client.exists(&format!("{base}/absent")).await?, None);
    assert_eq!(client.get_children(base).await?, vec!["config".to_string()]);

    // Error codes: matched through code(), the variant, and kind().
    let exists = client.create(&config).await.expect_err("a second create of the same path");
    assert_eq!(exists.code(), Some(ErrorCode::NodeExists));
    assert_eq!(exists.kind(), ErrorKind::Other);
    assert!(
        matches!(&exists, Error::ZooKeeper { code: ErrorCode::NodeExists, path, .. } if *path == config),
        "{exists:?}"
    );
    assert_eq!(ErrorCode::NodeExists.as_i32(), Some(-110));
    match client.set_data(&config, "lost update").version(0).await {
        Err(e) if e.code() == Some(ErrorCode::BadVersion) => {}
        other => panic!("a stale versioned write: {other:?}"),
    }
    let missing = client.get_data(&format!("{base}/absent")).await.expect_err("missing node");
    assert_eq!((missing.code(), missing.kind()), (Some(ErrorCode::NoNode), ErrorKind::Other));
    let invalid = client.get_data("no-leading-slash").await.expect_err("invalid path");
    assert!(matches!(invalid, Error::InvalidPath { .. }) && invalid.kind() == ErrorKind::BadArgument);
    assert_eq!(invalid.code(), None, "not a server error");

    // A one-time watch.
    let (_, _, changed) = client.get_data(&config).watch().await?;
    client.set_data(&config, "v3").await?;
    let event: WatchedEvent = tokio::time::timeout(HANG, changed).await.expect("the watch fires");
    assert_eq!((event.event_type, event.path.as_str()), (EventType::NodeDataChanged, config.as_str()));

    // A transaction: all or nothing, one result per operation.
    let results = client
        .commit(
            Transaction::new()
                .create(&format!("{base}/job-"), b"j", CreateMode::PersistentSequential)
                .set_data(&config, b"v4", Some(2))
                .check(&config, 3),
        )
        .await?;
    match &results[..] {
        [OpResult::Created { path, .. }, OpResult::DataSet { stat }, OpResult::Checked] => {
            assert!(path.starts_with(&format!("{base}/job-")), "{path}");
            assert_eq!(stat.version, 3);
        }
        other => panic!("transaction results: {other:?}"),
    }
    let failed = client
        .commit(Transaction::new().set_data(&config, b"never", None).delete(&format!("{base}/absent"), None))
        .await
        .expect_err("op 1 fails");
    match failed {
        Error::TransactionFailed { index: 1, code: ErrorCode::NoNode, ref path }
            if *path == format!("{base}/absent") => {}
        other => panic!("expected TransactionFailed at 1: {other:?}"),
    }
    assert_eq!(client.get_data(&config).await?.0, b"v4", "nothing of the failed transaction applied");

    // ACLs: read and write only, for everyone; creating a child is refused.
    let rw = format!("{base}/read-write");
    let acl = vec![Acl::new(Permissions::READ | Permissions::WRITE, Id::anyone())];
    client.create(&rw).with_acl(acl).await?;
    client.set_data(&rw, "writable").await?;
    let denied = client.create(&format!("{rw}/child")).await.expect_err("no CREATE permission");
    assert_eq!((denied.code(), denied.kind()), (Some(ErrorCode::NoAuth), ErrorKind::NotAuthorized));

    // A lock: a guard with a fencing token, a write guarded by it, exclusion, release.
    let lock_path = format!("{base}/lock");
    let mutex = InterProcessMutex::new(&client, &lock_path)?;
    let guard = mutex.lock().await?;
    let first: FencingToken = guard.fencing_token();
    assert_eq!(guard.hold_state(), HoldState::Held);
    let write: GuardedWrite = Transaction::new().set_data(&config, b"by the holder", None);
    let written = guard.guarded_write(write).await?;
    assert!(matches!(written[..], [OpResult::DataSet { .. }]), "{written:?}");
    assert_eq!(client.get_data(&config).await?.0, b"by the holder");
    let other = connect(connect_string).await?;
    let contender = InterProcessMutex::new(&other, &lock_path)?;
    assert!(contender.try_lock().await?.is_none(), "the lock is held");
    let hold = guard.hold().clone();
    guard.release().await?;
    let stale = hold.guarded_write(Transaction::new().set_data(&config, b"stale", None)).await;
    match stale {
        Err(e @ Error::LockLost { .. }) => assert_eq!(e.kind(), ErrorKind::LockLost),
        other => panic!("a guarded write after release: {other:?}"),
    }
    assert_eq!(client.get_data(&config).await?.0, b"by the holder", "the stale write was refused");
    let next = contender.try_lock_for(Duration::from_secs(5)).await?.expect("free after the release");
    assert!(next.fencing_token() > first, "fencing tokens increase: {first} then {}", next.fencing_token());
    next.release().await?;

    // Delete: a subtree.
    let tree = format!("{base}/tree");
    client.create(&format!("{tree}/a/b")).creating_parents_if_needed().await?;
    let not_empty = client.delete(&tree).await.expect_err("has children");
    assert_eq!(not_empty.code(), Some(ErrorCode::NotEmpty));
    client.delete(&tree).deleting_children_if_needed().await?;
    assert_eq!(client.exists(&tree).await?, None);
    client.delete(&tree).quietly().await?;

    other.close().await;
    client.close().await;
    Ok(())
}

/// The blocking facade from a plain thread: connect, lock, and the data API through block_on.
fn blocking_user(connect_string: &str, base: &str) -> zk_curator::Result<()> {
    let client = blocking::CuratorClient::from_builder(
        CuratorClient::builder(connect_string).session_timeout(Duration::from_secs(10)),
    )?;
    let mutex = blocking::InterProcessMutex::new(&client, &format!("{base}/blocking-lock"))?;
    let guard = mutex.lock()?;
    assert_eq!(guard.hold_state(), HoldState::Held);
    assert!(guard.fencing_token().as_u128() > 0);
    let config = format!("{base}/config");
    let (data, _) = client.block_on(client.async_client().get_data(&config))??;
    assert_eq!(data, b"by the holder");
    let write = Transaction::new().set_data(&config, b"from a thread", None);
    client.block_on(guard.hold().guarded_write(write))??;
    let (data, _) = client.block_on(client.async_client().get_data(&config))??;
    assert_eq!(data, b"from a thread");
    guard.release()?;
    assert!(mutex.try_lock_for(Duration::from_secs(5))?.is_some(), "free again");

    // Inside a runtime, a blocking call is refused rather than blocking it.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let refused = runtime.block_on(async { client.block_on(async {}) });
    assert!(matches!(refused, Err(Error::InvalidArgument { name: "runtime", .. })), "{refused:?}");
    drop(runtime);

    client.close()
}

#[test]
fn a_user_crate_locks_reads_writes_and_blocks() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let server = runtime.block_on(start_server());
    let connect_string = server.connect_string();
    let base = unique("app");
    runtime.block_on(async_user(&connect_string, &base)).expect("the async user");
    let thread = {
        let (connect_string, base) = (connect_string.clone(), base.clone());
        std::thread::spawn(move || blocking_user(&connect_string, &base))
    };
    thread.join().expect("the blocking user panicked").expect("the blocking user");
    drop(server);
}

#[test]
fn options_acls_and_codes_without_a_server() {
    // ACLs.
    let rw = Permissions::READ | Permissions::WRITE;
    assert!(rw.contains(Permissions::READ) && rw.contains(Permissions::WRITE) && !rw.contains(Permissions::CREATE));
    let acl = Acl::new(rw, Id::anyone());
    assert_eq!((acl.permissions(), acl.id().scheme(), acl.id().id()), (rw, "world", "anyone"));
    assert_eq!(acl.to_string(), "world:anyone:rw");
    assert_eq!(Acl::open_unsafe(), vec![Acl::new(Permissions::ALL, Id::anyone())]);
    assert_eq!(Acl::read_unsafe(), vec![Acl::new(Permissions::READ, Id::anyone())]);
    assert_eq!(Id::new("ip", "10.0.0.0/8").to_string(), "ip:10.0.0.0/8");

    // TLS options: unusable PEM is an InvalidArgument naming the option, without echoing it.
    let garbage = "-----BEGIN CERTIFICATE-----\nhunter2 is not base64!\n-----END CERTIFICATE-----\n";
    let err = TlsOptions::new().with_pem_ca(garbage).expect_err("garbage CA");
    assert!(matches!(&err, Error::InvalidArgument { name: "tls ca", .. }), "{err:?}");
    assert_eq!(err.kind(), ErrorKind::BadArgument);
    assert!(err.to_string().contains("tls ca") && !err.to_string().contains("hunter2"), "{err}");
    let err = TlsOptions::new().with_pem_ca("no PEM at all").expect_err("no certificate");
    assert!(matches!(&err, Error::InvalidArgument { name: "tls ca", .. }), "{err:?}");
    let key = "-----BEGIN PRIVATE KEY-----\nsecret-key-material\n-----END PRIVATE KEY-----\n";
    let err = TlsOptions::new().with_pem_identity(garbage, key).expect_err("garbage identity");
    assert!(matches!(&err, Error::InvalidArgument { name: "tls identity", .. }), "{err:?}");
    assert!(!format!("{err} {err:?}").contains("secret-key-material"), "the key is never printed");

    // SASL options: credentials never in Debug, also through the builder.
    let sasl = SaslOptions::digest_md5("alice", "s3cr3t-password");
    assert!(!format!("{sasl:?}").contains("s3cr3t-password"), "{sasl:?}");
    let builder = CuratorClient::builder("127.0.0.1:2181").sasl(sasl).authorization("digest", "bob:other-s3cr3t");
    let shown = format!("{builder:?}");
    assert!(!shown.contains("s3cr3t"), "builder Debug leaks credentials: {shown}");

    // Error codes and kinds are plain values.
    assert_eq!(ErrorCode::NoNode.kind(), ErrorKind::Other);
    assert_eq!(ErrorCode::ConnectionLoss.kind(), ErrorKind::Retryable);
    assert_eq!(ErrorCode::SessionExpired.kind(), ErrorKind::SessionLost);
    assert_eq!(ErrorCode::NoAuth.kind(), ErrorKind::NotAuthorized);
    assert_eq!(ErrorCode::BadVersion.as_i32(), Some(-103));
    let bad = zk_curator::framework::validate_path("/a//b").expect_err("empty segment");
    assert!(matches!(bad, Error::InvalidPath { .. }) && bad.code().is_none());
    assert_eq!(CreateMode::default(), CreateMode::Persistent);
    assert!(CreateMode::EphemeralSequential.is_sequential() && CreateMode::EphemeralSequential.is_ephemeral());
    assert_eq!(CreateMode::PersistentWithTtl(Duration::from_secs(5)).ttl(), Some(Duration::from_secs(5)));
}

/// What an `anyhow` or `eyre` report prints: the error (`{}`), then each `source()` in turn.
fn report(error: &dyn std::error::Error) -> Vec<String> {
    let mut links = vec![error.to_string()];
    let mut cause = error.source();
    while let Some(c) = cause {
        links.push(c.to_string());
        cause = c.source();
    }
    links
}

/// Fails when a link of the report repeats the text of a link below it.
fn assert_each_cause_once(error: &Error) {
    let links = report(error);
    for (i, outer) in links.iter().enumerate() {
        for inner in &links[i + 1..] {
            assert!(!outer.contains(inner.as_str()), "{inner:?} is printed twice: {links:?}");
        }
    }
}

/// Real failures (a server's refusal, a failed transaction, a failed first connection) printed
/// as an error report say each cause once: `Display` names the path (or connect string) and the
/// code, the client's own error is the `source()` underneath.
#[test]
fn an_error_report_prints_each_cause_once() {
    use std::error::Error as _;
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let server = runtime.block_on(start_server());
    runtime.block_on(async {
        let client = connect(&server.connect_string()).await.expect("connect");
        let path = unique("absent");
        let missing = client.get_data(&path).await.expect_err("a missing node");
        assert_eq!(missing.code(), Some(ErrorCode::NoNode));
        let Error::ZooKeeper { detail, .. } = &missing else { panic!("a server error: {missing:?}") };
        assert!(!detail.is_empty(), "{missing:?}");
        assert!(missing.to_string().contains(&path), "Display names the path: {missing}");
        let source = missing.source().expect("the client's error is the source");
        assert_eq!(source.to_string(), detail.to_string());
        assert_each_cause_once(&missing);

        let parent = unique("parent");
        client.create(&format!("{parent}/child")).creating_parents_if_needed().await.expect("create");
        let not_empty = client.delete(&parent).await.expect_err("a parent with a child");
        assert_eq!(not_empty.code(), Some(ErrorCode::NotEmpty));
        assert_each_cause_once(&not_empty);
        client.delete(&parent).deleting_children_if_needed().await.expect("delete");
        client.close().await;
    });
    drop(server);

    let unreachable = runtime
        .block_on(CuratorClient::builder("127.0.0.1:1").connection_timeout(Duration::from_secs(1)).connect())
        .expect_err("nothing listens on port 1");
    assert!(matches!(unreachable, Error::Connect { .. }), "{unreachable:?}");
    assert!(unreachable.code().is_some(), "{unreachable:?}");
    assert!(unreachable.to_string().contains("127.0.0.1:1"), "{unreachable}");
    assert!(unreachable.source().is_some(), "the client's error is the source: {unreachable:?}");
    assert_each_cause_once(&unreachable);
}

/// This file stays a user crate's view: it names neither the client crate underneath nor the
/// escape hatch, and does not pull in the shared test helpers.
#[test]
fn this_file_uses_only_the_public_api() {
    let source = include_str!("public_api.rs");
    let forbidden = [
        concat!("zookeeper", "_client"),
        concat!("zookeeper", "-client"),
        concat!("r", "aw"),
        concat!("sup", "port"),
        concat!("mod", " "),
    ];
    for word in forbidden {
        assert!(!source.contains(word), "public_api.rs mentions {word:?}");
    }
}
