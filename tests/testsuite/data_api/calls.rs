//! The data API of `CuratorClient` (create / get_data / set_data / exists / get_children / delete /
//! watch / commit) against a real ZooKeeper: every assertion is a property the server can show,
//! read back through a separate plain observer session where the client's own answer is not proof.
//!
//! Each test starts its own server, so the tests group related properties to keep the file fast.

use crate::support;

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::time::{Duration, Instant};

use zk_curator::framework::{is_protected, strip_protection};
use zk_curator::testing::{expire_session, FaultProxy, ProxyMode};
use zk_curator::{
    Acl, CreateMode, CuratorClient, Error, ErrorCode, ErrorKind, EventType, Id, OpResult, Permissions, RetryNTimes,
    Transaction,
};

/// Hang guard for awaits that must finish (never a timing assertion).
const HANG: Duration = Duration::from_secs(20);

// ---------------------------------------------------------------------------------------------
// helpers

/// Awaits `fut`, failing the test (naming `what`) if it hangs.
async fn within<F: IntoFuture>(what: &str, fut: F) -> F::Output {
    tokio::time::timeout(HANG, fut.into_future()).await.unwrap_or_else(|_| panic!("{what}: hung for {HANG:?}"))
}

/// Asserts `result` is a ZooKeeper error with `code` (and returns it).
#[track_caller]
fn assert_code<T: std::fmt::Debug>(result: zk_curator::Result<T>, code: ErrorCode, what: &str) -> Error {
    match result {
        Err(e) if e.code() == Some(code) => e,
        other => panic!("{what}: expected an error with code {code:?}, got {other:?}"),
    }
}

/// The sequence suffix of a sequential node created as `prefix`: asserts it is exactly 10 digits.
#[track_caller]
fn sequence_of(created: &str, prefix: &str) -> i64 {
    let suffix = created
        .strip_prefix(prefix)
        .unwrap_or_else(|| panic!("created path {created:?} does not start with {prefix:?}"));
    assert!(
        suffix.len() == 10 && suffix.bytes().all(|b| b.is_ascii_digit()),
        "sequence suffix of {created:?} is not 10 digits: {suffix:?}"
    );
    suffix.parse().expect("digits")
}

/// The observer's stat of `path`, which must exist.
async fn observed_stat(zk: &zookeeper_client::Client, path: &str) -> zookeeper_client::Stat {
    support::stat(zk, path).await.unwrap_or_else(|| panic!("{path} does not exist on the server"))
}

/// A watch must not have fired yet: polling it briefly times out.
async fn assert_not_fired(watch: &mut zk_curator::framework::Watch, what: &str) {
    let early = tokio::time::timeout(Duration::from_millis(100), &mut *watch).await;
    assert!(early.is_err(), "{what}: fired before anything changed: {early:?}");
}

/// A client whose retries are short, through `connect` (a proxy, usually).
async fn short_client(connect: &str) -> CuratorClient {
    CuratorClient::builder(connect)
        .session_timeout(Duration::from_secs(10))
        .connection_timeout(Duration::from_secs(2))
        .retry_policy(RetryNTimes::new(3, Duration::from_millis(100)))
        .connect()
        .await
        .expect("connect")
}

// ---------------------------------------------------------------------------------------------
// create: modes, parents, protection, ACLs

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_modes_parents_protection_and_acls() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let client = support::client(&connect).await;
    let zk = support::observer(&connect).await;
    let base = support::unique_path("modes");
    assert_eq!(client.create(&base).creating_parents_if_needed().await.expect("base"), base);

    // PERSISTENT: the given path, the given data, no owner.
    let p = format!("{base}/persistent");
    assert_eq!(client.create(&p).data(b"pd".to_vec()).await.expect("persistent"), p);
    let (data, stat) = zk.get_data(&p).await.expect("persistent node exists");
    assert_eq!(data, b"pd");
    assert_eq!(stat.ephemeral_owner, 0, "a persistent node has no owner");
    let err = assert_code(client.create(&p).await, ErrorCode::NodeExists, "second create of the same path");
    assert_eq!(err.kind(), ErrorKind::Other);

    // PERSISTENT_SEQUENTIAL: a 10-digit suffix, increasing, and the node is there.
    let prefix = format!("{base}/seq-");
    let s1 = client.create(&prefix).mode(CreateMode::PersistentSequential).await.expect("sequential");
    let s2 = client.create(&prefix).mode(CreateMode::PersistentSequential).await.expect("sequential 2");
    assert!(sequence_of(&s2, &prefix) > sequence_of(&s1, &prefix), "{s1} then {s2}");
    for s in [&s1, &s2] {
        assert_eq!(observed_stat(&zk, s).await.ephemeral_owner, 0, "{s} is persistent");
    }

    // EPHEMERAL and EPHEMERAL_SEQUENTIAL: owned by the client's session.
    let e = format!("{base}/ephemeral");
    assert_eq!(client.create(&e).mode(CreateMode::Ephemeral).await.expect("ephemeral"), e);
    let session = client.session_id();
    assert_ne!(session, 0);
    assert_eq!(observed_stat(&zk, &e).await.ephemeral_owner, session, "the ephemeral node's owner");
    let own = client.exists(&e).await.expect("exists").expect("the ephemeral node exists");
    assert_eq!(own.ephemeral_owner, session, "the client's own stat agrees");
    let eprefix = format!("{base}/eseq-");
    let es = client.create(&eprefix).mode(CreateMode::EphemeralSequential).await.expect("ephemeral sequential");
    sequence_of(&es, &eprefix);
    assert_eq!(observed_stat(&zk, &es).await.ephemeral_owner, session);
    let err = assert_code(
        client.create(&format!("{e}/child")).await,
        ErrorCode::NoChildrenForEphemerals,
        "a child of an ephemeral node",
    );
    assert_eq!(err.kind(), ErrorKind::Other);

    // CONTAINER: reaped by the server once its last child is gone. (The server reports the
    // `ephemeralOwner` of container and TTL nodes as 0, so only their behaviour tells them apart.)
    let c = format!("{base}/container");
    assert_eq!(client.create(&c).mode(CreateMode::Container).await.expect("container"), c);
    client.create(&format!("{c}/child")).await.expect("container child");
    client.delete(&format!("{c}/child")).await.expect("delete container child");
    support::eventually(Duration::from_secs(10), "the emptied container is reaped", || async {
        !support::exists(&zk, &c).await
    })
    .await;

    // PERSISTENT with TTL: readable, and deleted by the server after the TTL.
    let ttl = Duration::from_millis(800);
    let t = format!("{base}/ttl");
    assert_eq!(client.create(&t).data(b"t".to_vec()).mode(CreateMode::PersistentWithTtl(ttl)).await.expect("ttl"), t);
    let (data, stat) = client.get_data(&t).await.expect("the TTL node reads back");
    assert_eq!((data.as_slice(), stat.version, stat.ephemeral_owner), (b"t".as_slice(), 0, 0));
    let tprefix = format!("{base}/tseq-");
    let ts = client
        .create(&tprefix)
        .mode(CreateMode::PersistentSequentialWithTtl(Duration::from_secs(3600)))
        .await
        .expect("sequential TTL");
    sequence_of(&ts, &tprefix);
    assert!(support::exists(&zk, &ts).await);
    support::eventually(Duration::from_secs(10), "the TTL node is deleted after its TTL", || async {
        !support::exists(&zk, &t).await
    })
    .await;
    assert!(support::exists(&zk, &ts).await, "a node with a long TTL stays");
    let zero = client.create(&format!("{base}/ttl0")).mode(CreateMode::PersistentWithTtl(Duration::ZERO)).await;
    assert!(matches!(zero, Err(Error::InvalidArgument { name: "ttl", .. })), "zero TTL: {zero:?}");
    assert!(!support::exists(&zk, &format!("{base}/ttl0")).await, "nothing sent for a zero TTL");

    // Parents: missing without the option is NoNode and creates nothing.
    let orphan = format!("{base}/missing/a/leaf");
    let err = assert_code(client.create(&orphan).await, ErrorCode::NoNode, "create under a missing parent");
    assert_eq!(err.kind(), ErrorKind::Other);
    assert!(!support::exists(&zk, &format!("{base}/missing")).await);

    // creating_parents_if_needed: persistent parents, which outlive the child; and
    // creating_parent_containers_if_needed: container parents, reaped once the child is gone.
    let pleaf = format!("{base}/pp/a/b/leaf");
    let cleaf = format!("{base}/cp/a/b/leaf");
    assert_eq!(client.create(&pleaf).data(b"l".to_vec()).creating_parents_if_needed().await.expect("pleaf"), pleaf);
    assert_eq!(client.create(&cleaf).creating_parent_containers_if_needed().await.expect("cleaf"), cleaf);
    assert_eq!(zk.get_data(&pleaf).await.expect("leaf").0, b"l", "the data goes to the leaf");
    for dir in [format!("{base}/pp"), format!("{base}/pp/a"), format!("{base}/pp/a/b")] {
        let (data, stat) = zk.get_data(&dir).await.expect("persistent parent exists");
        assert_eq!(stat.ephemeral_owner, 0, "{dir} is a plain persistent node");
        assert!(data.is_empty(), "{dir} has no data");
    }
    client.delete(&pleaf).await.expect("delete pleaf");
    client.delete(&cleaf).await.expect("delete cleaf");
    support::eventually(Duration::from_secs(10), "container parents are reaped after the child is deleted", || {
        let zk = zk.clone();
        let top = format!("{base}/cp");
        async move { !support::exists(&zk, &top).await }
    })
    .await;
    assert!(support::exists(&zk, &format!("{base}/pp/a/b")).await, "persistent parents stay after the child");

    // with_protection: `_c_<uuid>-name`, also ephemeral-sequential, and parents made as needed.
    let prot = client.create(&format!("{base}/prot/node")).with_protection().await.expect("protected");
    let name = support::node_name(&prot).to_string();
    assert_eq!(prot, format!("{base}/prot/{name}"), "the created path is under the given parent");
    assert!(name.starts_with("_c_") && is_protected(&name), "protected name {name:?}");
    assert!(uuid_like(&name[3..39]), "the protection id is a UUID: {name:?}");
    assert_eq!(strip_protection(&name), "node");
    assert!(support::exists(&zk, &prot).await);
    let lock = client
        .create(&format!("{base}/prot/lock-"))
        .with_protection()
        .mode(CreateMode::EphemeralSequential)
        .data(b"me".to_vec())
        .await
        .expect("protected ephemeral sequential");
    let lname = support::node_name(&lock).to_string();
    assert!(is_protected(&lname), "{lname:?}");
    assert!(lname.contains("_c_"));
    let stripped = strip_protection(&lname);
    sequence_of(stripped, "lock-");
    let (data, stat) = zk.get_data(&lock).await.expect("protected ephemeral node exists");
    assert_eq!((data.as_slice(), stat.ephemeral_owner), (b"me".as_slice(), session));

    // with_acl: the ACL the server stores is exactly the one given, and it is enforced.
    let guarded = format!("{base}/acl");
    let acl = vec![Acl::new(Permissions::READ | Permissions::WRITE, Id::anyone())];
    assert_eq!(client.create(&guarded).with_acl(acl.clone()).await.expect("create with ACL"), guarded);
    let (stored, _) = zk.get_acl(&guarded).await.expect("get_acl");
    assert_eq!(zk_curator::raw::acls_from_raw(&stored), acl, "the stored ACL");
    let err = assert_code(client.create(&format!("{guarded}/child")).await, ErrorCode::NoAuth, "create without CREATE");
    assert_eq!(err.kind(), ErrorKind::NotAuthorized);
    client.set_data(&guarded, b"w".to_vec()).await.expect("WRITE is granted");
    let (default_acl, _) = zk.get_acl(&p).await.expect("get_acl");
    assert_eq!(zk_curator::raw::acls_from_raw(&default_acl), Acl::open_unsafe(), "the default ACL");
    let empty = client.create(&format!("{base}/noacl")).with_acl(Vec::new()).await;
    assert!(matches!(empty, Err(Error::InvalidArgument { name: "acl", .. })), "empty ACL: {empty:?}");

    client.close().await;
}

fn uuid_like(s: &str) -> bool {
    s.len() == 36
        && s.char_indices().all(|(i, c)| if [8, 13, 18, 23].contains(&i) { c == '-' } else { c.is_ascii_hexdigit() })
}

// ---------------------------------------------------------------------------------------------
// namespaced reads, writes and watches; session expiry ends watches

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaced_reads_writes_and_watches() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let ns = format!("dataapi-{}", support::node_name(&support::unique_path("ns")));
    let client = support::namespaced_client(&connect, &ns).await;
    let zk = support::observer(&connect).await;
    let full = |path: &str| format!("/{ns}{path}");

    // Create, read, children: paths without the namespace; the server has them under it.
    assert_eq!(client.create("/app/x").data(b"v0".to_vec()).creating_parents_if_needed().await.expect("x"), "/app/x");
    assert_eq!(zk.get_data(&full("/app/x")).await.expect("/ns/app/x").0, b"v0", "the observer sees /ns/app/x");
    assert!(!support::exists(&zk, "/app/x").await, "nothing outside the namespace");
    let seq = client.create("/app/s-").mode(CreateMode::PersistentSequential).await.expect("sequential");
    sequence_of(&seq, "/app/s-");
    assert!(support::exists(&zk, &full(&seq)).await);
    for name in ["c", "a", "b"] {
        client.create(&format!("/app/{name}")).await.expect("child");
    }
    let mut children = client.get_children("/app").await.expect("children");
    children.sort();
    let seq_name = support::node_name(&seq).to_string();
    let mut expected = vec!["a".to_string(), "b".into(), "c".into(), seq_name, "x".into()];
    expected.sort();
    assert_eq!(children, expected);
    assert_eq!(support::sorted_children(&zk, &full("/app")).await, expected, "the observer agrees");
    assert_eq!(client.get_children("/").await.expect("the namespace's children"), vec!["app".to_string()]);
    let prot = client.create("/app/p/node").with_protection().await.expect("protected, in the namespace");
    assert!(prot.starts_with("/app/p/_c_") && prot.ends_with("-node"), "{prot}");
    assert!(support::exists(&zk, &full(&prot)).await, "the observer sees {}", full(&prot));
    client.delete("/app/p").deleting_children_if_needed().await.expect("delete /app/p");
    assert_eq!(client.get_children("/app/a").await.expect("leaf children"), Vec::<String>::new());
    assert_code(client.get_children("/app/none").await, ErrorCode::NoNode, "children of a missing node");

    // get_data / set_data with versions.
    let (data, stat) = client.get_data("/app/x").await.expect("get x");
    assert_eq!((data.as_slice(), stat.version, stat.data_length), (b"v0".as_slice(), 0, 2));
    let stat1 = client.set_data("/app/x", b"v1".to_vec()).version(0).await.expect("set at version 0");
    assert_eq!(stat1.version, 1);
    assert_eq!(stat1.czxid, stat.czxid, "the same node");
    assert!(stat1.mzxid > stat.mzxid, "a new modification");
    let err = assert_code(
        client.set_data("/app/x", b"stale".to_vec()).version(0).await,
        ErrorCode::BadVersion,
        "set at a stale version",
    );
    assert_eq!(err.kind(), ErrorKind::Other);
    assert!(matches!(&err, Error::ZooKeeper { path, .. } if path == "/app/x"), "names the caller's path: {err:?}");
    let (data, stat) = zk.get_data(&full("/app/x")).await.expect("x");
    assert_eq!((data.as_slice(), stat.version), (b"v1".as_slice(), 1), "the stale write was not applied");
    let stat2 = client.set_data("/app/x", b"v2".to_vec()).await.expect("unconditional set");
    assert_eq!(stat2.version, 2);
    assert_eq!(client.get_data("/app/x").await.expect("x").0, b"v2");
    assert_code(client.get_data("/app/none").await, ErrorCode::NoNode, "get_data of a missing node");
    assert_code(client.set_data("/app/none", b"x".to_vec()).await, ErrorCode::NoNode, "set_data of a missing node");

    // exists.
    assert_eq!(client.exists("/app/none").await.expect("exists"), None);
    let seen = client.exists("/app/x").await.expect("exists").expect("x exists");
    assert_eq!((seen.version, seen.czxid), (2, stat.czxid));

    // One-time watches: each fires once, with the un-namespaced path, after the change only.
    let (data, _, mut data_watch) = client.get_data("/app/x").watch().await.expect("watch data");
    assert_eq!(data, b"v2");
    let (none, mut created_watch) = client.exists("/app/new").watch().await.expect("watch exists");
    assert!(none.is_none());
    let (_, mut children_watch) = client.get_children("/app").watch().await.expect("watch children");
    assert_not_fired(&mut data_watch, "data watch").await;
    assert_not_fired(&mut created_watch, "exists watch").await;
    assert_not_fired(&mut children_watch, "children watch").await;
    client.set_data("/app/x", b"v3".to_vec()).await.expect("set");
    let event = within("data watch", data_watch).await;
    assert_eq!((event.event_type, event.path.as_str()), (EventType::NodeDataChanged, "/app/x"));
    assert_not_fired(&mut created_watch, "exists watch after an unrelated set").await;
    client.create("/app/new").await.expect("create new");
    let event = within("exists watch", created_watch).await;
    assert_eq!((event.event_type, event.path.as_str()), (EventType::NodeCreated, "/app/new"));
    let event = within("children watch", children_watch).await;
    assert_eq!((event.event_type, event.path.as_str()), (EventType::NodeChildrenChanged, "/app"));
    let (_, deleted_watch) = client.exists("/app/new").watch().await.expect("watch existing");
    client.delete("/app/new").await.expect("delete new");
    let event = within("exists watch on delete", deleted_watch).await;
    assert_eq!((event.event_type, event.path.as_str()), (EventType::NodeDeleted, "/app/new"));

    // A persistent recursive watch: creation, change and deletion of a descendant, in order.
    client.create("/app/r").await.expect("r");
    let mut stream = client.watch("/app/r").recursive().await.expect("persistent watch");
    client.create("/app/r/d1").await.expect("d1");
    client.create("/app/r/d1/deep").await.expect("deep");
    client.set_data("/app/r/d1/deep", b"x".to_vec()).await.expect("set deep");
    client.delete("/app/r/d1/deep").await.expect("delete deep");
    client.set_data("/app/r", b"self".to_vec()).await.expect("set r");
    let mut events = Vec::new();
    for _ in 0..5 {
        events.push(within("persistent watch event", stream.next()).await.expect("the stream goes on"));
    }
    let expected_events = [
        (EventType::NodeCreated, "/app/r/d1"),
        (EventType::NodeCreated, "/app/r/d1/deep"),
        (EventType::NodeDataChanged, "/app/r/d1/deep"),
        (EventType::NodeDeleted, "/app/r/d1/deep"),
        (EventType::NodeDataChanged, "/app/r"),
    ];
    let got: Vec<(EventType, &str)> = events.iter().map(|e| (e.event_type, e.path.as_str())).collect();
    assert_eq!(got, expected_events, "recursive watch events, un-namespaced, in order");

    // Session expiry: pending one-time watches resolve with SessionEnded, the stream ends.
    let (_, _, pending_data) = client.get_data("/app/x").watch().await.expect("watch data");
    let (_, pending_exists) = client.exists("/app/never").watch().await.expect("watch exists");
    let old_session = client.session_id();
    expire_session(&connect, &client).await.expect("expire the session");
    let event = within("a data watch of an expired session", pending_data).await;
    assert_eq!(event.event_type, EventType::SessionEnded, "{event:?}");
    assert_eq!(event.path, "", "a session event has no path");
    let event = within("an exists watch of an expired session", pending_exists).await;
    assert_eq!(event.event_type, EventType::SessionEnded, "{event:?}");
    let mut tail = Vec::new();
    while let Some(event) = within("the stream of an expired session", stream.next()).await {
        tail.push(event);
    }
    assert_eq!(tail.last().map(|e| e.event_type), Some(EventType::SessionEnded), "the stream ends with it: {tail:?}");
    assert!(
        tail.iter().all(|e| matches!(
            e.event_type,
            EventType::Disconnected | EventType::Reconnected | EventType::SessionEnded
        )),
        "only session events after expiry: {tail:?}"
    );
    assert_eq!(within("a finished stream", stream.next()).await, None, "a finished stream stays finished");

    // The client goes on with a new session, where the data API works again.
    support::session_replaced(&client, old_session).await;
    assert_eq!(within("get after expiry", client.get_data("/app/x")).await.expect("get").0, b"v3");
    client.close().await;
}

// ---------------------------------------------------------------------------------------------
// delete

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletes() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let client = support::client(&connect).await;
    let zk = support::observer(&connect).await;
    let base = support::unique_path("delete");
    client.create(&base).creating_parents_if_needed().await.expect("base");

    // version: a wrong one leaves the node, the right one deletes it.
    let v = format!("{base}/versioned");
    client.create(&v).await.expect("create");
    client.set_data(&v, b"1".to_vec()).await.expect("version 1");
    let err = assert_code(client.delete(&v).version(0).await, ErrorCode::BadVersion, "delete at a stale version");
    assert_eq!(err.kind(), ErrorKind::Other);
    assert!(support::exists(&zk, &v).await, "a failed versioned delete leaves the node");
    client.delete(&v).version(1).await.expect("delete at the current version");
    assert!(!support::exists(&zk, &v).await);

    // Missing: NoNode, or Ok quietly.
    assert_code(client.delete(&v).await, ErrorCode::NoNode, "delete of a missing node");
    client.delete(&v).quietly().await.expect("a quiet delete of a missing node");
    client.delete(&format!("{base}/no/such/thing")).quietly().await.expect("quiet, missing parent too");

    // A subtree: NotEmpty without the option (nothing deleted), gone entirely with it.
    let tree = format!("{base}/tree");
    for leaf in ["a/b/c", "a/b/c2", "a/b2", "x"] {
        client.create(&format!("{tree}/{leaf}")).creating_parents_if_needed().await.expect("subtree");
    }
    let err = assert_code(client.delete(&tree).await, ErrorCode::NotEmpty, "delete of a non-empty node");
    assert_eq!(err.kind(), ErrorKind::Other);
    assert!(support::exists(&zk, &format!("{tree}/a/b/c")).await, "nothing of the subtree was deleted");
    client.delete(&format!("{tree}/a")).deleting_children_if_needed().await.expect("delete a 3-level subtree");
    assert!(!support::exists(&zk, &format!("{tree}/a")).await, "the subtree is gone");
    assert_eq!(support::sorted_children(&zk, &tree).await, vec!["x".to_string()], "its sibling stays");
    client.delete(&tree).deleting_children_if_needed().await.expect("the rest");
    assert!(!support::exists(&zk, &tree).await);
    assert!(support::exists(&zk, &base).await, "the parent of the deleted subtree stays");
    client.delete(&tree).deleting_children_if_needed().quietly().await.expect("quiet recursive of a missing node");
    assert!(matches!(client.delete("/").await, Err(Error::InvalidPath { .. })), "the root cannot be deleted");

    // guaranteed: while the connection is cut the call fails, and the node is deleted once it
    // is back.
    let proxy = FaultProxy::start(&connect).await.expect("proxy");
    let cut = short_client(&proxy.connect_string()).await;
    let g = format!("{base}/guaranteed");
    cut.create(&g).await.expect("create through the proxy");
    let gq = format!("{base}/guaranteed-quietly");
    cut.create(&gq).await.expect("create through the proxy");
    proxy.set_mode(ProxyMode::Cut);
    support::eventually(Duration::from_secs(5), "the client noticed the cut", || async { !cut.is_connected() }).await;
    for (path, quietly) in [(&g, false), (&gq, true)] {
        let delete = cut.delete(path).guaranteed().timeout(Duration::from_secs(1));
        let delete = if quietly { delete.quietly() } else { delete };
        let result = within("a guaranteed delete while cut", delete).await;
        support::assert_ok_or_kind(&result, &[ErrorKind::Retryable, ErrorKind::DeadlineExceeded], "guaranteed");
        assert!(result.is_err(), "the delete could not have reached the server: {result:?}");
        assert!(support::exists(&zk, path).await, "the node is still there while cut");
    }
    proxy.set_mode(ProxyMode::Pass);
    for path in [&g, &gq] {
        support::eventually(Duration::from_secs(10), &format!("{path} is deleted in the background"), || async {
            !support::exists(&zk, path).await
        })
        .await;
    }
    assert!(matches!(
        client.delete(&base).guaranteed().version(1).await,
        Err(Error::InvalidArgument { name: "version", .. })
    ));
    cut.close().await;
    client.close().await;
}

// ---------------------------------------------------------------------------------------------
// a create whose reply is lost

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequential_creates_whose_reply_is_lost() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let zk = support::observer(&connect).await;
    let proxy = FaultProxy::start(&connect).await.expect("proxy");
    let client = short_client(&proxy.connect_string()).await;
    let base = support::unique_path("lost-reply");
    client.create(&base).creating_parents_if_needed().await.expect("base");
    for protected in [false, true] {
        let dir = format!("{base}/{}", if protected { "protected" } else { "plain" });
        client.create(&dir).await.expect("dir");
        // The server applies the create; its reply never arrives.
        proxy.set_mode(ProxyMode::DropReplies);
        let create = {
            let (client, prefix) = (client.clone(), format!("{dir}/seq-"));
            crate::support::spawn(async move {
                let create = client.create(&prefix).mode(CreateMode::PersistentSequential);
                if protected {
                    create.with_protection().await
                } else {
                    create.await
                }
            })
        };
        support::eventually(Duration::from_secs(5), "the create reached the server", || async {
            support::sorted_children(&zk, &dir).await.len() == 1
        })
        .await;
        // Passing again closes the connection that lost the reply; the client reconnects.
        proxy.set_mode(ProxyMode::Pass);
        let result = support::join("the create", HANG, create).await;
        let children = support::sorted_children(&zk, &dir).await;
        assert_eq!(children.len(), 1, "protected={protected}: never a second node: {children:?}");
        if protected {
            let path = result.expect("a protected create finds the node it made");
            assert_eq!(path, format!("{dir}/{}", children[0]));
            sequence_of(strip_protection(&children[0]), "seq-");
        } else {
            // Sent once per connection: the outcome is unknown, and said so.
            let err = result.expect_err("an unprotected sequential create is not retried");
            assert_eq!(err.kind(), ErrorKind::Retryable, "{err:?}");
        }
    }
    client.close().await;
}

// ---------------------------------------------------------------------------------------------
// transactions

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let ns = format!("dataapi-tx-{}", support::node_name(&support::unique_path("ns")));
    let client = support::namespaced_client(&connect, &ns).await;
    let zk = support::observer(&connect).await;
    let full = |path: &str| format!("/{ns}{path}");
    for (path, data) in [("/tx/set", "old"), ("/tx/del", ""), ("/tx/chk", "")] {
        client.create(path).data(data).creating_parents_if_needed().await.expect("setup");
    }

    // Success: one result per op, in order, with the sequence path (un-namespaced) and new stat.
    let results = client
        .commit(
            Transaction::new()
                .create("/tx/seq-", b"s", CreateMode::PersistentSequential)
                .set_data("/tx/set", b"new", Some(0))
                .delete("/tx/del", None)
                .check("/tx/chk", 0),
        )
        .await
        .expect("commit");
    assert_eq!(results.len(), 4, "{results:?}");
    let created = match &results[0] {
        // (Its stat is not checked: ZooKeeper before 3.9 returns none for a create in a multi,
        // ZOOKEEPER-4026.)
        OpResult::Created { path, .. } => {
            sequence_of(path, "/tx/seq-");
            path.clone()
        }
        other => panic!("op 0: expected Created, got {other:?}"),
    };
    assert!(matches!(&results[1], OpResult::DataSet { stat } if stat.version == 1), "op 1: {:?}", results[1]);
    assert_eq!(results[2], OpResult::Deleted, "op 2");
    assert_eq!(results[3], OpResult::Checked, "op 3");
    assert_eq!(zk.get_data(&full(&created)).await.expect("created under the namespace").0, b"s");
    assert_eq!(zk.get_data(&full("/tx/set")).await.expect("set").0, b"new");
    assert!(!support::exists(&zk, &full("/tx/del")).await, "deleted");

    // Failure at index 2: the error names it, and nothing of ops 0 and 1 was applied.
    let before = support::sorted_children(&zk, &full("/tx")).await;
    let failed = client
        .commit(
            Transaction::new()
                .create("/tx/never", b"n", CreateMode::Persistent)
                .set_data("/tx/set", b"overwritten", None)
                .check("/tx/chk", 7)
                .delete("/tx/chk", None),
        )
        .await;
    match &failed {
        Err(e @ Error::TransactionFailed { index, path, code }) => {
            assert_eq!((*index, path.as_str(), *code), (2, "/tx/chk", ErrorCode::BadVersion));
            assert_eq!(e.code(), Some(ErrorCode::BadVersion));
            assert_eq!(e.kind(), ErrorKind::Other);
        }
        other => panic!("expected TransactionFailed at 2, got {other:?}"),
    }
    assert!(!support::exists(&zk, &full("/tx/never")).await, "op 0 was not applied");
    let (data, stat) = zk.get_data(&full("/tx/set")).await.expect("set");
    assert_eq!((data.as_slice(), stat.version), (b"new".as_slice(), 1), "op 1 was not applied");
    assert!(support::exists(&zk, &full("/tx/chk")).await, "op 3 was not applied");
    assert_eq!(support::sorted_children(&zk, &full("/tx")).await, before);

    // A bad op is refused before anything is sent.
    let bad =
        client.commit(Transaction::new().create("/tx/ok", b"", CreateMode::Persistent).delete("no-slash", None)).await;
    assert!(matches!(bad, Err(Error::InvalidPath { .. })), "{bad:?}");
    assert!(!support::exists(&zk, &full("/tx/ok")).await);
    client.close().await;
}

// ---------------------------------------------------------------------------------------------
// strict deadlines, closed client, cancellation

/// One data-API call with a 1 s timeout, boxed, reporting `Err` or the unexpected success.
type Call<'a> = Pin<Box<dyn Future<Output = (&'static str, zk_curator::Result<()>, Duration)> + Send + 'a>>;

fn call<'a, T: Send + 'a>(
    name: &'static str,
    fut: impl IntoFuture<Output = zk_curator::Result<T>, IntoFuture: Send + 'a>,
) -> Call<'a> {
    let fut = fut.into_future();
    Box::pin(async move {
        let start = Instant::now();
        let result = fut.await.map(drop);
        (name, result, start.elapsed())
    })
}

/// Every data-API call on `client` with a 1 s timeout, on existing node `node` (under `dir`).
fn every_call_with_timeout<'a>(client: &'a CuratorClient, dir: &'a str, node: &'a str) -> Vec<Call<'a>> {
    let t = Duration::from_secs(1);
    vec![
        call("get_data", client.get_data(node).timeout(t)),
        call("get_data.watch", client.get_data(node).watch().timeout(t)),
        call("exists", client.exists(node).timeout(t)),
        call("exists.watch", client.exists(node).watch().timeout(t)),
        call("get_children", client.get_children(dir).timeout(t)),
        call("get_children.watch", client.get_children(dir).watch().timeout(t)),
        call("set_data", client.set_data(node, b"x".to_vec()).timeout(t)),
        call("create", client.create(&format!("{dir}/new")).timeout(t)),
        call(
            "create sequential",
            client.create(&format!("{dir}/s-")).mode(CreateMode::PersistentSequential).timeout(t),
        ),
        call(
            "create protected",
            client.create(&format!("{dir}/p-")).with_protection().mode(CreateMode::EphemeralSequential).timeout(t),
        ),
        call("create with parents", client.create(&format!("{dir}/q/r")).creating_parents_if_needed().timeout(t)),
        call("delete", client.delete(node).timeout(t)),
        call("delete children", client.delete(dir).deleting_children_if_needed().timeout(t)),
        call("watch", client.watch(dir).recursive().timeout(t)),
    ]
}

/// Runs every call at once; each must fail within 5 s with a deadline or retryable error.
async fn assert_every_call_fails_in_time(calls: Vec<Call<'_>>, what: &str) {
    let outcomes = within(what, futures::future::join_all(calls)).await;
    for (name, result, took) in outcomes {
        println!("{what}: {name} -> {:?} after {took:?}", result.as_ref().err().map(Error::kind));
        match &result {
            Err(e) => assert!(
                matches!(e.kind(), ErrorKind::DeadlineExceeded | ErrorKind::Retryable),
                "{what}: {name} failed with {e:?}, expected DeadlineExceeded or Retryable"
            ),
            Ok(()) => panic!("{what}: {name} succeeded with no server to answer"),
        }
        assert!(took < Duration::from_secs(5), "{what}: {name} with a 1 s timeout took {took:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadlines_closed_clients_and_cancellation() {
    support::init_tracing();
    let mut server = support::owned_server().await;
    let connect = server.connect_string();
    let zk = support::observer(&connect).await;
    let client = support::client(&connect).await;
    let base = support::unique_path("strict");
    let node = format!("{base}/node");
    client.create(&node).creating_parents_if_needed().await.expect("node");

    // Cancellation: a protected ephemeral-sequential create dropped after one poll leaves no node,
    // although its request reached the server.
    let mut create = Box::pin(
        client.create(&format!("{base}/lock-")).with_protection().mode(CreateMode::EphemeralSequential).into_future(),
    );
    assert!(futures::poll!(create.as_mut()).is_pending(), "a create needs a round trip");
    support::eventually(Duration::from_secs(5), "the create reached the server", || async {
        support::sorted_children(&zk, &base).await.iter().any(|c| is_protected(c))
    })
    .await;
    drop(create);
    support::eventually(Duration::from_secs(5), "the dropped create's node is deleted", || async {
        support::sorted_children(&zk, &base).await == vec!["node".to_string()]
    })
    .await;

    // A closed client: every operation fails with Error::Closed, nothing reaches the server.
    let closed = support::client(&connect).await;
    closed.close().await;
    let dir = base.as_str();
    let calls: Vec<Call<'_>> = vec![
        call("create", closed.create(&format!("{dir}/c"))),
        call("create protected", closed.create(&format!("{dir}/c")).with_protection()),
        call("create sequential", closed.create(&format!("{dir}/c")).mode(CreateMode::PersistentSequential)),
        call("get_data", closed.get_data(&node)),
        call("get_data.watch", closed.get_data(&node).watch()),
        call("set_data", closed.set_data(&node, b"x".to_vec())),
        call("exists", closed.exists(&node)),
        call("exists.watch", closed.exists(&node).watch()),
        call("get_children", closed.get_children(dir)),
        call("get_children.watch", closed.get_children(dir).watch()),
        call("delete", closed.delete(&node)),
        call("delete quietly", closed.delete(&node).quietly()),
        call("delete guaranteed", closed.delete(&node).guaranteed()),
        call("delete children", closed.delete(dir).deleting_children_if_needed()),
        call("watch", closed.watch(dir)),
        call("commit", closed.commit(Transaction::new().set_data(&node, b"x", None))),
    ];
    for (name, result, _) in within("calls on a closed client", futures::future::join_all(calls)).await {
        match result {
            Err(e @ Error::Closed { .. }) => assert_eq!(e.kind(), ErrorKind::Closed),
            other => panic!("{name} on a closed client: expected Error::Closed, got {other:?}"),
        }
    }
    let (data, stat) = zk.get_data(&node).await.expect("node");
    assert!(data.is_empty() && stat.version == 0, "nothing reached the server");
    assert_eq!(support::sorted_children(&zk, &base).await, vec!["node".to_string()]);

    // Strict deadlines with a silent connection (blackholed proxy) ...
    let proxy = FaultProxy::start(&connect).await.expect("proxy");
    // A long session, so that the connection itself gives up on the silent server only far
    // beyond the 5 s bound (after a fifth of the session timeout): only the calls' own deadlines
    // can end them in time.
    let silent = CuratorClient::builder(&proxy.connect_string())
        .session_timeout(Duration::from_secs(60))
        .connection_timeout(Duration::from_secs(5))
        .retry_policy(RetryNTimes::new(3, Duration::from_millis(100)))
        .connect()
        .await
        .expect("connect through the proxy");
    proxy.set_mode(ProxyMode::Blackhole);
    assert_every_call_fails_in_time(every_call_with_timeout(&silent, &base, &node), "blackholed").await;
    proxy.set_mode(ProxyMode::Pass);
    assert_eq!(support::sorted_children(&zk, &base).await, vec!["node".to_string()], "nothing was written");

    // ... and with the server stopped.
    server.stop().await.expect("stop the server");
    assert_every_call_fails_in_time(every_call_with_timeout(&client, &base, &node), "server stopped").await;
    // Not closed: close() would wait (max_close_wait) for the background cleanups of the
    // protected creates that timed out, which cannot reach a stopped server.
    drop((silent, client));
}
