//! Interoperability with real Apache Curator 5.4 (Debian's jars in /usr/share/java): a Java peer
//! (`tests/java/CuratorPeer.java`, one JVM per test, driven line by line over stdin/stdout) and this
//! crate contend for the same lock paths on a real ZooKeeper: the mutex, both halves of the
//! read-write lock, revocation, the semaphore (shared lease limit) and the semaphore mutex.
//!
//! What makes these tests fail if interop breaks:
//! * Curator decides with ITS rules about OUR nodes (`rust_holds_curator_times_out`): if Rust's node
//!   did not end in `lock-<seq>`, Curator's sort key for it would be its whole name (`_c_...`),
//!   which sorts after every digit key, so Curator would take the lock while Rust holds it.
//! * We decide with OUR rules about Curator's nodes (`curator_holds_rust_times_out`,
//!   `alternate_many_times_no_overlap`): sorting by anything but the sequence (e.g. the whole name,
//!   whose random UUID comes first) would let Rust in while Curator holds in about half of the
//!   attempts; the tests make many attempts.
//! * `participants_agree` compares both orders on a six-deep mixed queue and follows the hand-offs.
//!
//! Needs `javac`/`java` (`apt-get install default-jdk-headless`) and the Curator jars
//! (`apt-get install libcurator-recipes-java zookeeper`).

use crate::support;

use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::Command;
use zk_curator::locks::{
    InterProcessMutex, InterProcessReadWriteLock, InterProcessSemaphoreMutex, InterProcessSemaphoreV2, Revoker,
};
use zk_curator::CuratorClient;
use zookeeper_client as zk;

use crate::support::curator_peer::{compiled_peer, parse_acquired, CuratorPeer};

// ---------------------------------------------------------------------------------------------
// The Java peer's commands used here
// ---------------------------------------------------------------------------------------------

impl CuratorPeer {
    /// Curator `acquire(timeout)` with a handle named `path`: the node path, or None.
    async fn acquire(&mut self, path: &str, timeout: Duration) -> Option<String> {
        let answer = self.cmd(&format!("acquire {path} {}", timeout.as_millis())).await;
        parse_acquired(&answer)
    }

    async fn release(&mut self, handle: &str) {
        assert_eq!(self.cmd(&format!("release {handle}")).await, "RELEASED");
    }

    /// Curator's `getParticipantNodes()`, in Curator's order.
    async fn participants(&mut self, path: &str) -> Vec<String> {
        let answer = self.cmd(&format!("participants {path}")).await;
        let list = answer.strip_prefix("PARTICIPANTS").unwrap_or_else(|| panic!("bad answer {answer}")).trim();
        if list.is_empty() {
            Vec::new()
        } else {
            list.split(',').map(str::to_string).collect()
        }
    }

    /// Starts an untimed Curator `acquire()` on its own thread (handle `handle`).
    async fn spawn_acquire(&mut self, handle: &str, path: &str) {
        assert_eq!(self.cmd(&format!("spawn {handle} {path}")).await, "SPAWNED");
    }

    /// Waits up to `timeout` for a spawned acquire: the node path, or None if still pending.
    async fn await_acquired(&mut self, handle: &str, timeout: Duration) -> Option<String> {
        let answer = self.cmd(&format!("await {handle} {}", timeout.as_millis())).await;
        if answer == "PENDING" {
            None
        } else {
            Some(parse_acquired(&answer).unwrap_or_else(|| panic!("bad answer {answer}")))
        }
    }

    /// The data of the node held by `handle`.
    async fn held_node_data(&mut self, handle: &str) -> Vec<u8> {
        let answer = self.cmd(&format!("data {handle}")).await;
        let hex = answer.strip_prefix("DATA").unwrap_or_else(|| panic!("bad answer {answer}")).trim();
        (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect()
    }

    /// Curator runs `n` guarded increments of `counter` under the lock; returns the overlaps seen.
    async fn critical(&mut self, path: &str, n: usize, counter: &str) -> usize {
        let answer = self.cmd(&format!("critical {path} {n} {counter}")).await;
        answer
            .strip_prefix("DONE overlaps=")
            .and_then(|k| k.parse().ok())
            .unwrap_or_else(|| panic!("bad answer {answer}"))
    }
}

impl CuratorPeer {
    /// A handle `name` on its own Curator lock instance of `kind` (`mutex`, `read`, `write`),
    /// revocable (the listener releases) if asked.
    async fn make(&mut self, name: &str, path: &str, kind: &str, revocable: bool) {
        assert_eq!(self.cmd(&format!("make {name} {path} {kind} {}", u8::from(revocable))).await, "MADE");
    }

    /// Timed acquire of a made handle: the node path, or None.
    async fn lock(&mut self, name: &str, timeout: Duration) -> Option<String> {
        let answer = self.cmd(&format!("lock {name} {}", timeout.as_millis())).await;
        parse_acquired(&answer)
    }

    /// Untimed acquire of a made handle, in the background (see `await_acquired`).
    async fn spawn_lock(&mut self, name: &str) {
        assert_eq!(self.cmd(&format!("spawnlock {name}")).await, "SPAWNED");
    }

    /// Whether the handle's revocation listener ran (and released).
    async fn revoked(&mut self, name: &str) -> bool {
        self.cmd(&format!("revoked {name}")).await == "REVOKED true"
    }

    /// Curator's `Revoker.attemptRevoke` on a node.
    async fn revoke(&mut self, node: &str) {
        assert_eq!(self.cmd(&format!("revoke {node}")).await, "REVOKE_SENT");
    }
}

impl CuratorPeer {
    /// A Curator `InterProcessSemaphoreV2` of `leases` leases on `path`, named `name`.
    async fn semaphore(&mut self, name: &str, path: &str, leases: usize) {
        assert_eq!(self.cmd(&format!("sem {name} {path} {leases}")).await, "MADE");
    }

    /// Curator's timed `acquire`: the lease node's path (the peer keeps the lease), or None.
    async fn sem_acquire(&mut self, name: &str, timeout: Duration) -> Option<String> {
        let answer = self.cmd(&format!("semacquire {name} {}", timeout.as_millis())).await;
        parse_acquired(&answer)
    }

    /// Closes the oldest lease the peer keeps for `name`.
    async fn sem_release(&mut self, name: &str) {
        assert_eq!(self.cmd(&format!("semrelease {name}")).await, "RELEASED");
    }

    /// Starts `threads` Curator threads taking `n` leases each, recording occupancy under
    /// `markers` (see [`occupy`]); [`CuratorPeer::sem_await`] gives the result.
    async fn sem_critical(&mut self, name: &str, threads: usize, n: usize, markers: &str, hold: Duration) {
        let line = format!("semcritical {name} {threads} {n} {markers} {}", hold.as_millis());
        assert_eq!(self.cmd(&line).await, "SPAWNED");
    }

    /// The result of `sem_critical`: (most markers Curator saw, times it saw a Rust marker).
    async fn sem_await(&mut self, name: &str, timeout: Duration) -> (usize, usize) {
        let answer = self.cmd(&format!("semawait {name} {}", timeout.as_millis())).await;
        let fields: Vec<usize> = answer
            .strip_prefix("DONE ")
            .unwrap_or_else(|| panic!("bad answer {answer}"))
            .split(' ')
            .map(|f| f.split_once('=').and_then(|(_, v)| v.parse().ok()).unwrap_or_else(|| panic!("bad {answer}")))
            .collect();
        (fields[0], fields[1])
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// A ZooKeeper server, a Curator peer and a Rust client, the slow parts started concurrently.
async fn setup() -> (zk_curator::testing::TestingServer, CuratorPeer, CuratorClient) {
    support::init_tracing();
    let compile = tokio::task::spawn_blocking(compiled_peer);
    let server = support::server().await;
    compile.await.expect("compile the Curator peer");
    let connect = server.connect_string();
    let (peer, client) = tokio::join!(CuratorPeer::start(&connect), support::client(&connect));
    (server, peer, client)
}

/// Curator's mutex node name: `_c_` + canonical lowercase UUID + `-lock-` + 10-digit sequence.
fn assert_curator_lock_name(name: &str) {
    let ok = name.len() == 3 + 36 + 1 + 5 + 10
        && name.starts_with("_c_")
        && {
            let id = &name[3..39];
            uuid::Uuid::parse_str(id).is_ok()
                && id.chars().all(|c| c == '-' || c.is_ascii_digit() || c.is_ascii_lowercase())
                && [8, 13, 18, 23].iter().all(|&i| id.as_bytes()[i] == b'-')
        }
        && &name[39..45] == "-lock-"
        && name[45..].bytes().all(|b| b.is_ascii_digit());
    assert!(ok, "{name:?} is not shaped like `_c_<uuid>-lock-<10 digits>`");
}

/// Polls the children of `path` until one not in `known` appears; records and returns it.
async fn new_child(connect: &str, path: &str, known: &mut Vec<String>) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let children = support::children(connect, path).await;
        let fresh: Vec<_> = children.iter().filter(|c| !known.contains(c)).cloned().collect();
        assert!(fresh.len() <= 1, "more than one new contender appeared: {fresh:?}");
        if let Some(child) = fresh.into_iter().next() {
            known.push(child.clone());
            return child;
        }
        assert!(Instant::now() < deadline, "no new contender under {path} within 10 s (have {children:?})");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

/// Curator holds: Rust's timed and zero-timeout attempts all fail and leave no node; once Curator
/// releases, Rust gets the lock and Curator is excluded in turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_holds_rust_times_out() {
    let (server, mut peer, client) = setup().await;
    let connect = server.connect_string();
    let path = support::unique_path("curator-holds");
    let curator_node = peer.acquire(&path, Duration::from_secs(5)).await.expect("Curator acquires a free lock");
    assert_eq!(support::children(&connect, &path).await, [support::node_name(&curator_node)]);

    let mutex = InterProcessMutex::new(&client, &path).unwrap();
    let started = Instant::now();
    assert!(!mutex.acquire_timeout(Duration::from_millis(300)).await.unwrap(), "Rust got the lock Curator holds");
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(290), "gave up after {waited:?}, before the 300 ms timeout");
    assert!(!mutex.is_owned_by_current_task());
    assert_eq!(
        support::children(&connect, &path).await,
        [support::node_name(&curator_node)],
        "Rust's node was left behind"
    );

    // Every attempt creates a node with a fresh random UUID: a sort on anything but the sequence
    // would put it before Curator's about half the time.
    for attempt in 0..12 {
        let timeout = if attempt % 2 == 0 { Duration::ZERO } else { Duration::from_millis(20) };
        assert!(mutex.try_lock_for(timeout).await.unwrap().is_none(), "attempt {attempt}: Rust got Curator's lock");
    }
    assert_eq!(
        support::children(&connect, &path).await,
        [support::node_name(&curator_node)],
        "Rust's nodes were left behind"
    );

    peer.release(&path).await;
    assert!(mutex.acquire_timeout(Duration::from_secs(5)).await.unwrap(), "Rust acquires after Curator released");
    let rust_node = mutex.lock_node_path().unwrap();
    assert_eq!(support::children(&connect, &path).await, [support::node_name(&rust_node)]);
    assert_eq!(peer.acquire(&path, Duration::ZERO).await, None, "Curator got the lock Rust holds");
    mutex.release().await.unwrap();
    assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(2)).await.is_empty());
}

/// Rust holds: Curator's timed attempts fail (Curator judges our node by its own rules) and leave no
/// node; once Rust releases, Curator gets the lock and Rust is excluded in turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_holds_curator_times_out() {
    let (server, mut peer, client) = setup().await;
    let connect = server.connect_string();
    let path = support::unique_path("rust-holds");
    let mutex = InterProcessMutex::new(&client, &path).unwrap();
    mutex.acquire().await.unwrap();
    let rust_node = mutex.lock_node_path().unwrap();

    let started = Instant::now();
    assert_eq!(peer.acquire(&path, Duration::from_millis(300)).await, None, "Curator got the lock Rust holds");
    assert!(started.elapsed() >= Duration::from_millis(300), "Curator gave up early: {:?}", started.elapsed());
    assert_eq!(
        support::children(&connect, &path).await,
        [support::node_name(&rust_node)],
        "Curator's node was left behind"
    );
    for _ in 0..5 {
        assert_eq!(peer.acquire(&path, Duration::ZERO).await, None, "Curator got the lock Rust holds");
    }
    assert_eq!(support::children(&connect, &path).await, [support::node_name(&rust_node)]);

    mutex.release().await.unwrap();
    let curator_node = peer.acquire(&path, Duration::from_secs(5)).await.expect("Curator acquires after Rust released");
    assert_eq!(support::children(&connect, &path).await, [support::node_name(&curator_node)]);
    assert!(!mutex.acquire_timeout(Duration::from_millis(100)).await.unwrap(), "Rust got the lock Curator holds");
    peer.release(&path).await;
    assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(2)).await.is_empty());
}

/// Rust's half of the `critical` workload, with the same lock-independent overlap detector as the
/// Java peer (an EPHEMERAL marker node whose create fails if someone else is inside, and a
/// versioned counter write). Returns (overlaps, counter values read).
async fn rust_critical(mutex: InterProcessMutex, zk: zk::Client, n: usize, counter: String) -> (usize, Vec<u64>) {
    let marker = format!("{counter}-inside");
    let ephemeral = zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all());
    let mut overlaps = 0;
    let mut seen = Vec::with_capacity(n);
    for i in 0..n {
        assert!(
            mutex.acquire_timeout(Duration::from_secs(30)).await.unwrap(),
            "iteration {i}: lock not acquired within 30 s"
        );
        let mine = match zk.create(&marker, b"", &ephemeral).await {
            Ok(_) => true,
            Err(zk::Error::NodeExists) => {
                overlaps += 1;
                false
            }
            Err(e) => panic!("create {marker}: {e}"),
        };
        let (data, stat) = zk.get_data(&counter).await.expect("read counter");
        let value: u64 = std::str::from_utf8(&data).unwrap().trim().parse().unwrap();
        seen.push(value);
        tokio::time::sleep(Duration::from_millis(1)).await;
        let next = (value + 1).to_string();
        match zk.set_data(&counter, next.as_bytes(), Some(stat.version)).await {
            Ok(_) => {}
            Err(zk::Error::BadVersion) => {
                overlaps += 1;
                zk.set_data(&counter, next.as_bytes(), None).await.expect("write counter");
            }
            Err(e) => panic!("write {counter}: {e}"),
        }
        if mine {
            zk.delete(&marker, None).await.expect("delete marker");
        }
        mutex.release().await.unwrap();
    }
    (overlaps, seen)
}

/// Curator and Rust each run 100 lock-guarded read-sleep-increment cycles on one counter at the same
/// time: no overlap by either detector, no lost update, and the lock really changed hands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alternate_many_times_no_overlap() {
    const N: usize = 100;
    let (server, mut peer, client) = setup().await;
    let connect = server.connect_string();
    let path = support::unique_path("alternate");
    let counter = format!("{path}-counter");
    let zk = support::observer(&connect).await;
    zk.mkdir(&counter, &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())).await.unwrap();
    zk.set_data(&counter, b"0", None).await.unwrap();

    let started = Instant::now();
    let mutex = InterProcessMutex::new(&client, &path).unwrap();
    let rust = crate::support::spawn(rust_critical(mutex, zk.clone(), N, counter.clone()));
    let curator_overlaps = peer.critical(&path, N, &counter).await;
    let (rust_overlaps, seen) = rust.await.unwrap();
    let took = started.elapsed();

    let (data, _) = zk.get_data(&counter).await.unwrap();
    let total: u64 = std::str::from_utf8(&data).unwrap().parse().unwrap();
    // A value Rust read that is not one more than its previous read means Curator held the lock
    // in between: count those hand-overs so the test cannot pass without real contention.
    let handovers = seen.windows(2).filter(|w| w[1] != w[0] + 1).count() + usize::from(seen[0] != 0);
    println!(
        "alternate: {} cycles in {took:?}, Rust saw {handovers} hand-overs from Curator, overlaps curator={curator_overlaps} rust={rust_overlaps}",
        2 * N
    );
    assert_eq!(curator_overlaps, 0, "Curator was inside the critical section together with Rust");
    assert_eq!(rust_overlaps, 0, "Rust was inside the critical section together with Curator");
    assert_eq!(total, 2 * N as u64, "lost updates: the lock did not exclude");
    assert!(handovers >= 10, "only {handovers} hand-overs from Curator to Rust: no real contention");
    assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(2)).await.is_empty());
}

/// A mixed queue (Rust holds; then Curator, Rust, Curator, Rust, Curator wait): Rust's
/// `participant_nodes()` equals Curator's `getParticipantNodes()` exactly, in creation order with
/// the holder first, and the lock is handed down the queue in that order across implementations.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn participants_agree() {
    let (server, mut peer, client) = setup().await;
    let connect = server.connect_string();
    let path = support::unique_path("participants");
    let full = |name: &str| format!("{path}/{name}");

    let holder = InterProcessMutex::new(&client, &path).unwrap();
    holder.acquire().await.unwrap();
    let mut known = support::children(&connect, &path).await;
    let mut queue = vec![holder.lock_node_path().unwrap()];
    assert_eq!(known, [support::node_name(&queue[0])]);

    // Queue alternately: Curator c1, Rust r2, Curator c3, Rust r4, Curator c5 (index in the queue).
    let mut waiters = vec![Waiter::Done];
    for i in 1..=5 {
        if i % 2 == 1 {
            let handle = format!("c{i}");
            peer.spawn_acquire(&handle, &path).await;
            waiters.push(Waiter::Curator(handle));
        } else {
            // One node per waiting task, as Curator's threads (the local queue would share one).
            let mutex = InterProcessMutex::new(&client, &path).unwrap().with_node_per_task();
            waiters.push(Waiter::Rust(crate::support::spawn(async move { mutex.lock().await.unwrap() })));
        }
        let child = new_child(&connect, &path, &mut known).await;
        queue.push(full(&child));
    }
    for node in &queue {
        assert_curator_lock_name(support::node_name(node));
    }

    let curator_order = peer.participants(&path).await;
    let rust_order = holder.participant_nodes().await.unwrap();
    assert_eq!(rust_order, curator_order, "Rust and Curator order the contenders differently");
    assert_eq!(rust_order, queue, "participants are not in queueing order");
    assert_eq!(rust_order[0], holder.lock_node_path().unwrap(), "the holder is not first");
    assert_still_waiting(&mut peer, &waiters[1..]).await;

    // Hand the lock down the queue: each contender gets it exactly when its predecessor releases.
    holder.release().await.unwrap();
    for (i, expected) in queue.iter().enumerate().skip(1) {
        let now = match std::mem::replace(&mut waiters[i], Waiter::Done) {
            Waiter::Curator(handle) => {
                let node = peer.await_acquired(&handle, Duration::from_secs(10)).await;
                assert_eq!(node.as_deref(), Some(expected.as_str()), "Curator waiter {handle}");
                Holder::Curator(handle)
            }
            Waiter::Rust(task) => {
                let guard = tokio::time::timeout(Duration::from_secs(10), task)
                    .await
                    .expect("Rust waiter did not get the lock")
                    .unwrap();
                assert_eq!(guard.node_path(), expected, "Rust waiter");
                Holder::Rust(guard)
            }
            Waiter::Done => unreachable!(),
        };
        // The rest of the queue agrees and is still waiting.
        let remaining = &queue[i..];
        assert_eq!(holder.participant_nodes().await.unwrap(), remaining);
        assert_eq!(peer.participants(&path).await, remaining);
        assert_still_waiting(&mut peer, &waiters[i + 1..]).await;
        match now {
            Holder::Curator(handle) => peer.release(&handle).await,
            Holder::Rust(guard) => guard.release().await.unwrap(),
        }
    }
    assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(2)).await.is_empty());
}

enum Waiter {
    Curator(String),
    Rust(tokio::task::JoinHandle<zk_curator::locks::MutexGuard>),
    Done,
}

enum Holder {
    Curator(String),
    Rust(zk_curator::locks::MutexGuard),
}

/// Fails if any of `waiters` already holds the lock (it jumped the queue).
async fn assert_still_waiting(peer: &mut CuratorPeer, waiters: &[Waiter]) {
    for waiter in waiters {
        match waiter {
            Waiter::Curator(handle) => {
                assert_eq!(peer.await_acquired(handle, Duration::ZERO).await, None, "Curator {handle} jumped the queue")
            }
            Waiter::Rust(task) => assert!(!task.is_finished(), "a Rust waiter jumped the queue"),
            Waiter::Done => {}
        }
    }
}

/// Rust's node has Curator's name shape and Curator's default data (the local IP as text), byte
/// for byte as a Curator node written on the same machine; both are ephemeral.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_names_and_data_match_curator() {
    let (server, mut peer, client) = setup().await;
    let connect = server.connect_string();
    let path = support::unique_path("names");
    let curator_node = peer.acquire(&path, Duration::from_secs(5)).await.unwrap();
    let mutex = InterProcessMutex::new(&client, &path).unwrap();
    let waiter = mutex.clone();
    let waiting = crate::support::spawn(async move { waiter.lock().await.unwrap() });
    let mut known = vec![support::node_name(&curator_node).to_string()];
    let rust_name = new_child(&connect, &path, &mut known).await;

    assert_curator_lock_name(support::node_name(&curator_node));
    assert_curator_lock_name(&rust_name);
    // One sequence counter per parent: Rust's node is numbered right after Curator's.
    let seq = |name: &str| name[name.len() - 10..].parse::<u64>().unwrap();
    assert_eq!(seq(&rust_name), seq(support::node_name(&curator_node)) + 1);

    let zk = support::observer(&connect).await;
    let (curator_data, curator_stat) = zk.get_data(&curator_node).await.unwrap();
    let (rust_data, rust_stat) = zk.get_data(&format!("{path}/{rust_name}")).await.unwrap();
    println!(
        "curator data {:?}, rust data {:?}",
        String::from_utf8_lossy(&curator_data),
        String::from_utf8_lossy(&rust_data)
    );
    assert_eq!(peer.held_node_data(&path).await, curator_data);
    assert!(!curator_data.is_empty(), "Curator wrote no default data");
    assert_eq!(rust_data, curator_data, "Rust's default node data differs from Curator's");
    assert_eq!(client.default_data(), curator_data.as_slice());
    assert!(std::str::from_utf8(&rust_data).unwrap().parse::<std::net::IpAddr>().is_ok(), "data is not an IP address");
    assert_ne!(curator_stat.ephemeral_owner, 0, "Curator's node is not ephemeral");
    assert_ne!(rust_stat.ephemeral_owner, 0, "Rust's node is not ephemeral");
    assert_eq!(rust_stat.ephemeral_owner, client.session_id());

    peer.release(&path).await;
    let guard = tokio::time::timeout(Duration::from_secs(10), waiting).await.unwrap().unwrap();
    assert_eq!(support::node_name(guard.node_path()), rust_name);
    guard.release().await.unwrap();
    assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(2)).await.is_empty());
}

// ---------------------------------------------------------------------------------------------
// Read-write lock and revocation, both directions
// ---------------------------------------------------------------------------------------------

const SHORT: Duration = Duration::from_millis(300);
const LONG: Duration = Duration::from_secs(10);

/// A Curator writer keeps Rust readers and writers out and the reverse; Curator and Rust readers
/// share the lock while a writer of either library waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_write_lock_excludes_both_ways() {
    let (server, mut peer, client) = setup().await;
    let path = support::unique_path("interop-rw");
    let rw = InterProcessReadWriteLock::new(&client, &path).unwrap();

    // Curator writer vs Rust reader and writer.
    peer.make("w", &path, "write", false).await;
    let node = peer.lock("w", LONG).await.expect("Curator writer");
    assert!(node.contains("__WRIT__"), "{node}");
    assert!(rw.read_lock().try_lock_for(SHORT).await.unwrap().is_none(), "Rust reader got in past a Curator writer");
    assert!(rw.write_lock().try_lock_for(SHORT).await.unwrap().is_none(), "Rust writer got in past a Curator writer");
    peer.release("w").await;

    // Rust writer vs Curator reader and writer.
    let guard = rw.write_lock().lock().await.unwrap();
    peer.make("r", &path, "read", false).await;
    assert_eq!(peer.lock("r", SHORT).await, None, "Curator reader got in past a Rust writer");
    assert_eq!(peer.lock("w", SHORT).await, None, "Curator writer got in past a Rust writer");
    guard.release().await.unwrap();

    // Readers of both libraries share; writers of both wait until both readers are gone.
    let curator_read = peer.lock("r", LONG).await.expect("Curator reader");
    let rust_read = rw.read_lock().try_lock_for(LONG).await.unwrap().expect("Rust reader shares with Curator's");
    assert!(rw.write_lock().try_lock_for(SHORT).await.unwrap().is_none());
    peer.spawn_lock("w").await;
    assert_eq!(peer.await_acquired("w", SHORT).await, None, "Curator writer got in past two readers");
    rust_read.release().await.unwrap();
    assert_eq!(peer.await_acquired("w", SHORT).await, None, "Curator writer got in past Curator's reader");
    assert!(curator_read.contains("__READ__"), "{curator_read}");
    peer.release("r").await;
    let writer_node = peer.await_acquired("w", LONG).await.expect("Curator writer after both readers");
    let rust_writer = crate::support::spawn({
        let rw = rw.clone();
        async move { rw.write_lock().lock().await.unwrap() }
    });
    tokio::time::sleep(SHORT).await;
    assert!(!rust_writer.is_finished(), "Rust writer got in past Curator's writer {writer_node}");
    peer.release("w").await;
    let guard = support::join("Rust writer", LONG, rust_writer).await;
    guard.release().await.unwrap();
    assert!(support::eventually_no_children(&server.connect_string(), &path, LONG).await.is_empty());
}

/// Rust's downgrade node (`__READ__<writer's seq>`, plain EPHEMERAL) keeps a queued Curator 5.4
/// writer behind it, and Curator lists it as a reader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_downgrade_holds_back_a_queued_curator_writer() {
    let (_server, mut peer, client) = setup().await;
    let path = support::unique_path("interop-downgrade");
    let rw = InterProcessReadWriteLock::new(&client, &path).unwrap();
    let writer = rw.write_lock().lock().await.unwrap();
    peer.make("w", &path, "write", false).await;
    peer.spawn_lock("w").await;
    assert_eq!(peer.await_acquired("w", SHORT).await, None);
    let reader = rw.read_lock().lock_while_writing(&writer).await.unwrap();
    writer.release().await.unwrap();
    assert_eq!(
        peer.await_acquired("w", Duration::from_millis(700)).await,
        None,
        "Curator's writer overtook the downgrade"
    );
    let listed = peer.participants(&path).await;
    assert!(listed.iter().any(|n| n == reader.node_path()), "Curator sees the downgrade node: {listed:?}");
    reader.release().await.unwrap();
    assert!(peer.await_acquired("w", LONG).await.is_some());
    peer.release("w").await;
}

/// A Rust `Revoker` makes a revocable Curator holder (mutex and write lock) release; a Curator
/// `Revoker` reaches a revocable Rust holder (mutex guard and read lock).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revocation_both_ways() {
    let (_server, mut peer, client) = setup().await;
    for kind in ["mutex", "write"] {
        let path = support::unique_path(&format!("interop-revoke-{kind}"));
        peer.make(kind, &path, kind, true).await;
        let node = peer.lock(kind, LONG).await.expect("Curator holder");
        assert!(!peer.revoked(kind).await);
        Revoker::attempt_revoke(&client, &node).await.unwrap();
        let mut released = false;
        for _ in 0..100 {
            if peer.revoked(kind).await {
                released = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(released, "{kind}: Curator's listener did not run on Rust's revocation request");
        let got = match kind {
            "mutex" => InterProcessMutex::new(&client, &path)
                .unwrap()
                .try_lock_for(LONG)
                .await
                .unwrap()
                .map(|g| g.hold().clone()),
            _ => InterProcessReadWriteLock::new(&client, &path)
                .unwrap()
                .write_lock()
                .try_lock_for(LONG)
                .await
                .unwrap()
                .map(|g| g.hold().clone()),
        };
        assert!(got.is_some(), "{kind}: Rust acquires after Curator released");
    }

    // Curator's Revoker → Rust holders.
    let path = support::unique_path("interop-revoke-rust");
    let mutex = InterProcessMutex::new(&client, &path).unwrap();
    mutex.make_revocable();
    let guard = mutex.lock().await.unwrap();
    peer.revoke(guard.node_path()).await;
    tokio::time::timeout(LONG, guard.revocation_requested()).await.expect("Rust mutex holder told");
    guard.release().await.unwrap();
    let rw = InterProcessReadWriteLock::new(&client, &format!("{path}-rw")).unwrap();
    rw.read_lock().make_revocable();
    rw.read_lock().acquire().await.unwrap();
    let hold = rw.read_lock().current_hold().unwrap();
    peer.revoke(hold.path()).await;
    tokio::time::timeout(LONG, hold.revocation_requested()).await.expect("Rust reader told");
    rw.read_lock().release().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// Semaphores, both directions
// ---------------------------------------------------------------------------------------------

/// Curator's lease node name: `_c_` + UUID + `-lease-` + 10-digit sequence.
fn assert_lease_name(name: &str) {
    let ok = name.len() == 3 + 36 + 7 + 10
        && name.starts_with("_c_")
        && uuid::Uuid::parse_str(&name[3..39]).is_ok()
        && &name[39..46] == "-lease-"
        && name[46..].bytes().all(|b| b.is_ascii_digit());
    assert!(ok, "{name:?} is not shaped like `_c_<uuid>-lease-<10 digits>`");
}

/// A 2-lease semaphore shared by Curator and Rust: leases of either library count against the
/// same limit, a waiter of either library gets in when the other returns one, both use
/// `<path>/leases` with Curator's names, and Rust lists Curator's leases as participants.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_leases_are_shared_with_curator() {
    let (server, mut peer, client) = setup().await;
    let path = support::unique_path("interop-sem");
    let semaphore = InterProcessSemaphoreV2::new(&client, &path, 2).unwrap();
    peer.semaphore("s", &path, 2).await;

    let curator_lease = peer.sem_acquire("s", LONG).await.expect("Curator's first lease");
    assert_eq!(curator_lease.rsplit_once('/').map(|(dir, _)| dir), Some(format!("{path}/leases").as_str()));
    assert_lease_name(support::node_name(&curator_lease));
    let rust_lease = semaphore.acquire_timeout(LONG).await.unwrap().expect("Rust's lease beside Curator's");
    assert_lease_name(rust_lease.node_name());
    let participants = semaphore.participant_nodes().await.unwrap();
    assert!(participants.contains(&curator_lease), "{participants:?} lacks Curator's {curator_lease}");

    // Full: neither library gets a third lease.
    assert!(semaphore.acquire_timeout(SHORT).await.unwrap().is_none(), "Rust took a third of 2 leases");
    assert_eq!(peer.sem_acquire("s", SHORT).await, None, "Curator took a third of 2 leases");

    // Curator returns its lease: a waiting Rust acquirer gets it.
    let waiter = crate::support::spawn({
        let semaphore = semaphore.clone();
        async move { semaphore.acquire().await.unwrap() }
    });
    tokio::time::sleep(SHORT).await;
    assert!(!waiter.is_finished(), "Rust's waiter got a lease of a full semaphore");
    peer.sem_release("s").await;
    let second_rust = support::join("Rust waiter", LONG, waiter).await;

    // Rust holds both: Curator waits until Rust returns one.
    assert_eq!(peer.sem_acquire("s", SHORT).await, None, "Curator took a third lease beside Rust's two");
    rust_lease.release().await.unwrap();
    peer.sem_acquire("s", LONG).await.expect("Curator's lease after Rust returned one");
    second_rust.release().await.unwrap();
    peer.sem_release("s").await;
    let connect = server.connect_string();
    assert!(support::eventually_no_children(&connect, &format!("{path}/leases"), LONG).await.is_empty());
    assert!(support::eventually_no_children(&connect, &format!("{path}/locks"), LONG).await.is_empty());
}

/// One pass of a holder: with a lease held, create an ephemeral-sequential marker `<markers>/rust-`,
/// list the markers (a lower bound of the holders at that moment: a marker lives only while its
/// lease does), hold, delete the marker. Returns (markers listed, whether a Curator one was among them).
async fn occupy(zk: &zk::Client, markers: &str, hold: Duration) -> (usize, bool) {
    let mode = zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
    let (_, sequence) = zk.create(&format!("{markers}/rust-"), b"", &mode).await.expect("create marker");
    let marker = format!("{markers}/rust-{sequence}");
    let (seen, _) = zk.get_children(markers).await.expect("list markers");
    tokio::time::sleep(hold).await;
    zk.delete(&marker, None).await.expect("delete marker");
    (seen.len(), seen.iter().any(|m| m.starts_with("curator-")))
}

/// Three Curator threads and three Rust sessions take leases of one 3-lease semaphore 20 times
/// each, at the same time: nobody ever sees more than 3 holders (by markers that do not trust
/// either library), and holders of both libraries were inside together.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_holders_of_both_libraries_never_exceed_the_limit() {
    const LEASES: usize = 3;
    const ROUNDS: usize = 20;
    let (server, mut peer, _client) = setup().await;
    let connect = server.connect_string();
    let path = support::unique_path("interop-sem-limit");
    // At the root: the semaphore's parents do not exist yet.
    let markers = format!("/{}-markers", path.trim_start_matches('/').replace('/', "-"));
    let zk = support::observer(&connect).await;
    let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    zk.create(&markers, b"", &persistent).await.expect("create the markers node");

    peer.semaphore("s", &path, LEASES).await;
    // Sessions first, so both sides start taking leases at about the same time.
    let mut holders = Vec::new();
    for _ in 0..LEASES {
        let client = support::client(&connect).await;
        let semaphore = InterProcessSemaphoreV2::new(&client, &path, LEASES).unwrap();
        holders.push((client, semaphore, support::observer(&connect).await));
    }
    peer.sem_critical("s", LEASES, ROUNDS, &markers, Duration::from_millis(10)).await;
    let mut tasks = Vec::new();
    for (client, semaphore, zk) in holders {
        let markers = markers.clone();
        tasks.push(crate::support::spawn(async move {
            let (mut most, mut mixed) = (0, 0);
            for _ in 0..ROUNDS {
                let lease = semaphore.acquire_timeout(Duration::from_secs(30)).await.unwrap().expect("a lease in 30 s");
                let (seen, with_curator) = occupy(&zk, &markers, Duration::from_millis(10)).await;
                most = most.max(seen);
                mixed += usize::from(with_curator);
                lease.release().await.unwrap();
            }
            drop(client);
            (most, mixed)
        }));
    }
    let (mut rust_most, mut rust_mixed) = (0, 0);
    for task in tasks {
        let (most, mixed) = support::join("Rust holder", Duration::from_secs(120), task).await;
        rust_most = rust_most.max(most);
        rust_mixed += mixed;
    }
    let (curator_most, curator_mixed) = peer.sem_await("s", Duration::from_secs(120)).await;
    assert!(rust_most <= LEASES, "Rust saw {rust_most} holders of a {LEASES}-lease semaphore");
    assert!(curator_most <= LEASES, "Curator saw {curator_most} holders of a {LEASES}-lease semaphore");
    assert!(
        rust_mixed > 0 && curator_mixed > 0,
        "the libraries never held leases together (Rust saw Curator {rust_mixed} times, Curator saw Rust {curator_mixed})"
    );
    assert!(support::eventually_no_children(&connect, &format!("{path}/leases"), LONG).await.is_empty());
}

/// Curator's `InterProcessSemaphoreMutex` and ours exclude each other in both directions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_mutex_excludes_both_ways() {
    let (server, mut peer, client) = setup().await;
    let path = support::unique_path("interop-semmutex");
    let mutex = InterProcessSemaphoreMutex::new(&client, &path).unwrap();
    peer.make("m", &path, "semmutex", false).await;

    let node = peer.lock("m", LONG).await.expect("Curator's semaphore mutex");
    assert_lease_name(support::node_name(&node));
    assert!(!mutex.acquire_timeout(SHORT).await.unwrap(), "Rust got in past Curator's semaphore mutex");
    peer.release("m").await;

    assert!(mutex.acquire_timeout(LONG).await.unwrap(), "Rust after Curator released");
    assert_eq!(peer.lock("m", SHORT).await, None, "Curator got in past Rust's semaphore mutex");
    peer.spawn_lock("m").await;
    assert_eq!(peer.await_acquired("m", SHORT).await, None);
    mutex.release().await.unwrap();
    peer.await_acquired("m", LONG).await.expect("Curator after Rust released");
    peer.release("m").await;
    assert!(support::eventually_no_children(&server.connect_string(), &format!("{path}/leases"), LONG)
        .await
        .is_empty());
}

// ---------------------------------------------------------------------------------------------
// The `zk-curator lock -- COMMAND` tool against Curator
// ---------------------------------------------------------------------------------------------

/// A Curator holder keeps a `zk-curator lock` run out (the command does not run, the conflict
/// status comes back); once Curator releases, the run goes through; and a run holding the lock
/// keeps Curator out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_curator_holder_keeps_a_lock_run_out_and_the_reverse() {
    const BIN: &str = env!("CARGO_BIN_EXE_zk-curator");
    let (server, mut peer, _client) = setup().await;
    let connect = server.connect_string();
    let path = support::unique_path("interop-cli");
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let lock_run = |options: &[&str], command: &[&str]| {
        let mut cmd = Command::new(BIN);
        cmd.args(["--connect", &connect, "lock", &path]).args(options).arg("--").args(command);
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
        cmd
    };

    peer.acquire(&path, LONG).await.expect("Curator holds");
    let out = lock_run(&["--timeout", "0.5"], &["touch", marker.to_str().unwrap()]).output().await.unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!marker.exists(), "the command ran while Curator held the lock");
    peer.release(&path).await;
    let out = lock_run(&["--timeout", "10"], &["touch", marker.to_str().unwrap()]).output().await.unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(marker.exists());

    let started = dir.path().join("started");
    let script = format!("touch {}; sleep 2", started.display());
    let running = lock_run(&[], &["sh", "-c", &script]).spawn().unwrap();
    support::eventually(Duration::from_secs(20), "the command started", || async { started.exists() }).await;
    assert_eq!(peer.acquire(&path, SHORT).await, None, "Curator got in while a `lock` command ran");
    let out = tokio::time::timeout(LONG, running.wait_with_output()).await.unwrap().unwrap();
    assert!(out.status.success());
    assert!(peer.acquire(&path, LONG).await.is_some(), "Curator after the command ended");
    peer.release(&path).await;
}
