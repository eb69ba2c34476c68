//! `inspect` on trees and input made to break it: tricky layouts, ACL-restricted lock nodes, limits,
//! churn, hostile node data in `--json`, absurd CLI input — against a real ZooKeeper.

use crate::support;

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use zk_curator::inspect::{inspect, inspect_lock, inspect_with, InspectOptions, LockKind};
use zk_curator::locks::{InterProcessMutex, InterProcessReadWriteLock, InterProcessSemaphoreV2};
use zk_curator::raw::{self as zkc, Acl, Acls, AuthId, Permission};

const BIN: &str = env!("CARGO_BIN_EXE_zk-curator");
/// Hang guard.
const WITHIN: Duration = Duration::from_secs(30);

fn open() -> zkc::CreateOptions<'static> {
    zkc::CreateMode::Persistent.with_acls(Acls::anyone_all())
}

/// Creates `path` and its missing parents (persistent, open).
async fn mkdirs(zk: &zkc::Client, path: &str) {
    let mut at = String::new();
    for part in path.split('/').filter(|p| !p.is_empty()) {
        at.push('/');
        at.push_str(part);
        match zk.create(&at, b"", &open()).await {
            Ok(_) | Err(zkc::Error::NodeExists) => {}
            Err(e) => panic!("create {at}: {e}"),
        }
    }
}

/// An ephemeral sequential `lock-` node under `dir` with `data` (a hand-made mutex holder).
async fn lock_node(zk: &zkc::Client, dir: &str, data: &[u8], acls: Acls<'_>) -> String {
    let mode = zkc::CreateMode::EphemeralSequential.with_acls(acls);
    let (_, seq) = zk.create(&format!("{dir}/lock-"), data, &mode).await.expect("create lock node");
    format!("{dir}/lock-{seq}")
}

fn cli(connect: &str, args: &[&str]) -> Output {
    Command::new(BIN).args(["--connect", connect, "inspect"]).args(args).output().expect("run inspect")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A lock node that only its creator may read (a Curator client with a creator-only ACL
/// provider) in a world-listable directory: the walk must not fail on it — the holder is still
/// reported (session and age come from `exists`, which needs no permission), and the other locks
/// are listed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_node_nobody_else_may_read_does_not_fail_the_walk() {
    let server = support::server().await;
    let connect = server.connect_string();
    let base = support::unique_path("review-noauth");
    let obs = support::observer(&connect).await;
    let secret = format!("{base}/secret");
    let plain = format!("{base}/plain");
    mkdirs(&obs, &secret).await;
    mkdirs(&obs, &plain).await;
    let alice = support::observer(&connect).await;
    alice.auth("digest", b"alice:s3cret").await.expect("auth");
    let creator_acl = [Acl::new(Permission::ALL, AuthId::authed())];
    let creator_only = Acls::new(&creator_acl);
    let hidden = lock_node(&alice, &secret, b"alice-host:1", creator_only).await;
    let _visible = lock_node(&obs, &plain, b"plain-host:2", Acls::anyone_all()).await;
    assert!(matches!(obs.get_data(&hidden).await, Err(zkc::Error::NoAuth)), "the setup: the node is unreadable");

    let client = support::client(&connect).await;
    let found = tokio::time::timeout(WITHIN, inspect(&client, &base)).await.expect("hang").expect("inspect");
    let paths: Vec<&str> = found.locks.iter().map(|l| l.path.as_str()).collect();
    assert_eq!(paths, [plain.as_str(), secret.as_str()], "{found:#?}");
    let s = &found.locks[1];
    assert_eq!((s.kind, s.holders.len()), (LockKind::Mutex, 1), "{s:#?}");
    assert_eq!(s.holders[0].node, hidden);
    assert_eq!(s.holders[0].session, alice.session_id().0, "{s:#?}");
    assert!(found.unreadable.contains(&hidden), "the unreadable node is reported: {found:#?}");

    // The CLI lists both and still exits 0 (with a word on stderr).
    let out = cli(&connect, &[&base, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(json.as_array().map(Vec::len), Some(2), "{json}");
    assert!(stderr(&out).contains(&hidden), "{}", stderr(&out));
    // inspect_lock (`participants`) too.
    let one = inspect_lock(&client, &secret).await.expect("inspect_lock").expect("a lock");
    assert_eq!(one.holders.len(), 1, "{one:#?}");
    client.close().await;
}

/// A mutex whose path also has a persistent child named `locks` (or `leases`) — e.g. a second
/// lock nested below it, `/app/locks/x` under `/app` — is still a mutex, for `inspect` and for
/// `inspect_lock` (`participants`) alike; the nested lock is found too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mutex_with_a_locks_or_leases_subdirectory_stays_a_mutex() {
    let server = support::server().await;
    let connect = server.connect_string();
    let base = support::unique_path("review-nested");
    let client = support::client(&connect).await;
    let mut guards = Vec::new();
    for sub in ["locks", "leases"] {
        let app = format!("{base}/{sub}-app");
        let nested = format!("{app}/{sub}/x");
        guards.push(InterProcessMutex::new(&client, &app).unwrap().lock().await.expect("outer"));
        guards.push(InterProcessMutex::new(&client, &nested).unwrap().lock().await.expect("nested"));
        let found = tokio::time::timeout(WITHIN, inspect(&client, &base)).await.expect("hang").expect("inspect");
        for path in [&app, &nested] {
            let l = found
                .locks
                .iter()
                .find(|l| &l.path == path)
                .unwrap_or_else(|| panic!("inspect: no lock {path}: {:#?}", found.locks));
            assert_eq!((l.kind, l.holders.len(), l.waiters.len()), (LockKind::Mutex, 1, 0), "inspect {path}: {l:#?}");
        }
        let one = inspect_lock(&client, &app).await.expect("inspect_lock").unwrap_or_else(|| panic!("{app}: none"));
        assert_eq!((one.kind, one.holders.len()), (LockKind::Mutex, 1), "inspect_lock {app}: {one:#?}");
    }
    drop(guards);
    client.close().await;
}

/// `max_listings` is exact (one `getChildren` per listing, nothing else on empty directories),
/// `truncated` is set iff something was left unlisted, `max_depth` 0 lists the root only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listing_limits_are_exact() {
    let server = support::server().await;
    let connect = server.connect_string();
    let base = support::unique_path("review-limits");
    let obs = support::observer(&connect).await;
    for i in 0..30 {
        mkdirs(&obs, &format!("{base}/d{i:02}")).await;
    }
    let client = support::client(&connect).await;
    let run = |listings: usize, depth: usize| {
        let client = client.clone();
        let base = base.clone();
        async move {
            let options = InspectOptions::new().max_listings(listings).max_depth(depth);
            tokio::time::timeout(WITHIN, inspect_with(&client, &base, &options)).await.expect("hang").expect("inspect")
        }
    };
    for (listings, requests, truncated) in
        [(1, 1, true), (10, 10, true), (30, 30, true), (31, 31, false), (100, 31, false)]
    {
        let found = run(listings, 32).await;
        assert_eq!((found.requests, found.truncated), (requests, truncated), "max_listings {listings}: {found:#?}");
    }
    let found = run(100, 0).await;
    assert_eq!((found.requests, found.truncated), (1, true), "max_depth 0: {found:#?}");
    assert!(inspect_with(&client, &base, &InspectOptions::new().max_listings(0)).await.is_err());
    // A ROOT that does not exist: nothing, not an error (as documented: nothing is held there).
    let none = inspect(&client, &format!("{base}/missing")).await.expect("a missing root");
    assert!(none.locks.is_empty() && !none.truncated, "{none:#?}");
    // A ROOT that is a lock node: it has no children, so nothing.
    let dir = format!("{base}/m");
    mkdirs(&obs, &dir).await;
    let node = lock_node(&obs, &dir, b"x", Acls::anyone_all()).await;
    assert!(inspect(&client, &node).await.expect("a lock node as root").locks.is_empty());
    // Bad paths: a typed error naming the path.
    for bad in ["", "a", "/a/", "/a//b", "/a/./b"] {
        let e = inspect(&client, bad).await.expect_err(bad);
        assert!(matches!(e, zk_curator::Error::InvalidPath { .. }), "{bad:?}: {e}");
        assert!(e.to_string().contains(bad), "{bad:?}: {e}");
    }
    client.close().await;
}

/// Many acquire/release cycles of a mutex, a read-write lock and a semaphore of one lease while
/// inspecting in a loop: never an error, never an impossible state (two mutex holders; a writer
/// holding with anybody else; two holders of the one lease).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn churn_never_errors_nor_shows_an_impossible_state() {
    let server = support::server().await;
    let connect = server.connect_string();
    let base = support::unique_path("review-churn");
    let mutex = format!("{base}/m");
    let rw = format!("{base}/rw");
    let sem = format!("{base}/sem");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut tasks = Vec::new();
    for i in 0..4 {
        let client = support::client(&connect).await;
        let (stop, mutex, rw, sem) = (stop.clone(), mutex.clone(), rw.clone(), sem.clone());
        tasks.push(crate::support::spawn(async move {
            let m = InterProcessMutex::new(&client, &mutex).unwrap();
            let lock = InterProcessReadWriteLock::new(&client, &rw).unwrap();
            let s = InterProcessSemaphoreV2::new(&client, &sem, 1).unwrap();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let g = m.lock().await.expect("mutex");
                drop(g);
                s.acquire().await.expect("lease").release().await.expect("release");
                if i % 2 == 0 {
                    let w = lock.write_lock().lock().await.expect("write");
                    drop(w);
                } else {
                    let r = lock.read_lock().lock().await.expect("read");
                    tokio::task::yield_now().await;
                    drop(r);
                }
            }
            client.close().await;
        }));
    }
    let client = support::client(&connect).await;
    let started = Instant::now();
    let mut seen = 0;
    while started.elapsed() < Duration::from_secs(4) {
        let found = tokio::time::timeout(WITHIN, inspect(&client, &base)).await.expect("hang").expect("never an error");
        for l in &found.locks {
            seen += 1;
            match l.kind {
                // While `sem/leases` does not exist (before the first lease; once the server
                // reaped the empty container) the semaphore is only `sem/locks`, which looks
                // exactly like a mutex there (documented).
                LockKind::Mutex => {
                    assert!(l.holders.len() <= 1 && (l.path == mutex || l.path == format!("{sem}/locks")), "{l:#?}")
                }
                LockKind::Semaphore => assert!(l.holders.len() <= 1 && l.path == sem, "{l:#?}"),
                LockKind::ReadWrite => {
                    let writers = l.holders.iter().filter(|h| h.node.contains("__WRIT__")).count();
                    assert!(writers == 0 || l.holders.len() == 1, "a writer shares: {l:#?}");
                }
                other => panic!("{other:?}: {l:#?}"),
            }
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for t in tasks {
        support::join("a churner", WITHIN, t).await;
    }
    assert!(seen > 0, "inspect never saw a lock");
    client.close().await;
}

/// Node data and names no terminal would like: control characters, quotes, backslashes, invalid
/// UTF-8, U+2028/U+2029, DEL, a NUL, and 1 MB — `--json` stays valid JSON and carries the data
/// (decoded lossily), the table stays one line per holder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_data_and_names_keep_json_valid() {
    let server = support::server().await;
    let connect = server.connect_string();
    let base = support::unique_path("review-json");
    let obs = support::observer(&connect).await;
    let mut nasty: Vec<u8> = b"a\"b\\c\n\r\t\x00\x01\x1f\x7f".to_vec();
    nasty.extend_from_slice(&[0xff, 0xfe, 0xc3]);
    nasty.extend_from_slice("\u{2028}\u{2029}é🔒</script>".as_bytes());
    let big = vec![b'\\'; 1_000_000];
    let dirs = [format!("{base}/ключ é\"q\\"), format!("{base}/big")];
    for d in &dirs {
        mkdirs(&obs, d).await;
    }
    lock_node(&obs, &dirs[0], &nasty, Acls::anyone_all()).await;
    lock_node(&obs, &dirs[1], &big, Acls::anyone_all()).await;

    let out = cli(&connect, &[&base, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("--json is JSON");
    let locks = json.as_array().expect("array");
    assert_eq!(locks.len(), 2, "{}", String::from_utf8_lossy(&out.stdout[..out.stdout.len().min(2000)]));
    let by_path = |p: &str| locks.iter().find(|l| l["path"] == p).unwrap_or_else(|| panic!("no {p}"));
    assert_eq!(by_path(&dirs[0])["holders"][0]["data"], String::from_utf8_lossy(&nasty).as_ref());
    assert_eq!(by_path(&dirs[1])["holders"][0]["data"].as_str().map(str::len), Some(1_000_000));
    // The output is ASCII-safe for line-oriented tools: one line.
    assert_eq!(out.stdout.iter().filter(|&&b| b == b'\n').count(), 1, "--json spans lines");

    let table = cli(&connect, &[&base]);
    assert_eq!(table.status.code(), Some(0), "{}", stderr(&table));
    let text = String::from_utf8_lossy(&table.stdout);
    assert_eq!(text.lines().count(), 3, "a header and one line per holder:\n{}", &text[..text.len().min(2000)]);
}

/// Absurd CLI input is a usage error (2) naming the value, never a panic; a server that is down is
/// 69, without hanging.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absurd_input_and_no_server() {
    let server = support::server().await;
    let connect = server.connect_string();
    for args in [
        &["/", "--older-than", "-1"][..],
        &["/", "--older-than", "NaN"],
        &["/", "--older-than", "inf"],
        &["/", "--older-than", "1e300"],
        &["/", "--older-than", "soon"],
        &["/", "--max-nodes", "0"],
        &["/", "--max-nodes", "-3"],
        &["/", "--max-depth", "-1"],
        &["/a/"],
        &["relative"],
        &["/a//b"],
        &["/a/../b"],
    ] {
        let out = cli(&connect, args);
        let value = args.last().unwrap().to_string();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(&value), "{args:?} does not name {value:?}: {}", stderr(&out));
        assert!(!stderr(&out).contains("panicked"), "{args:?}: {}", stderr(&out));
    }
    // --max-depth 0 is fine: the root alone.
    let out = cli(&connect, &["/", "--max-depth", "0", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    // Nobody listening: 69, within the connection timeout (hang guard only).
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let started = Instant::now();
    let out = cli(&format!("127.0.0.1:{port}"), &["/"]);
    assert_eq!(out.status.code(), Some(69), "{}", stderr(&out));
    assert!(started.elapsed() < Duration::from_secs(40), "hung: {:?}", started.elapsed());
}

/// Known blind spot (not fixed): a *persistent* child whose name looks like
/// a lock node (`job-lock-0000000001`, e.g. made by a `create -s` of the user's own) is taken for an
/// ephemeral lock node, so it is never listed: a lock below it is missed, and the walk does not
/// say it is incomplete (`truncated` stays false). Knowing it is persistent would cost one request
/// per lock-looking child.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "known blind spot: persistent nodes named like lock nodes are not walked"]
async fn a_lock_below_a_persistent_lock_lookalike_is_found_or_flagged() {
    let server = support::server().await;
    let connect = server.connect_string();
    let base = support::unique_path("review-lookalike");
    let obs = support::observer(&connect).await;
    mkdirs(&obs, &base).await;
    let mode = zkc::CreateMode::PersistentSequential.with_acls(Acls::anyone_all());
    let (_, seq) = obs.create(&format!("{base}/job-lock-"), b"", &mode).await.expect("create");
    let nested = format!("{base}/job-lock-{seq}/inner");
    let client = support::client(&connect).await;
    let _guard = InterProcessMutex::new(&client, &nested).unwrap().lock().await.expect("lock");
    let found = inspect(&client, &base).await.expect("inspect");
    assert!(found.truncated || found.locks.iter().any(|l| l.path == nested), "{nested} missed silently: {found:#?}");
    client.close().await;
}
