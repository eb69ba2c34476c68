//! The per-process local queue (lock cohorting) of guard-style acquires, against a real
//! ZooKeeper and a real Apache Curator.
//!
//! All guard waiters of one client on one lock path queue in-process behind ONE ZooKeeper node; a
//! process passes the lock locally only to the waiters queued when its node was granted (a turn);
//! later arrivals queue behind a new node (the next turn). What is checked here, each by a checker
//! that does not trust the library:
//!
//! 1. exclusion across local and remote (Rust and Curator) holders, and at most two nodes per
//!    client (current turn + next turn) however many local waiters;
//! 2. fairness: a late remote contender is granted before any local waiter that arrived after it;
//! 3. fencing tokens strictly increase in grant order, local hand-offs included;
//! 4. a local holder's guarded write after its release is refused, though the node lives on;
//! 5. cancellation storms leave nothing behind and never break exclusion;
//! 6. session expiry with a local queue: no waiter is granted a hold that is not Held on the
//!    current session;
//! 7. readers of one turn share one read node; a writer queued meanwhile goes before later readers;
//! 8. `with_node_per_task()` keeps Curator's one node per waiter;
//! 9. strict deadlines, and `try_lock` with a local holder sends nothing;
//!
//! and around them: downgrade with local writers in the turn, a suspended or revoked holder never
//! hands its node on, a turn's node deleted together with its predecessor is never granted, client
//! close, and a cancellation storm on both halves of a read-write lock.
//!
//! Break-the-property checks were made for each (temporary patches to `src/locks/local_queue.rs`
//! and friends: two exclusive grants at once, no joining of turns, hand-off count always 0, no
//! released check in guarded writes, no cancel of an abandoned acquisition, granted holds of gone
//! waiters forgotten, nodes handed on while not Held or after a revocation, `with_node_per_task`
//! a no-op, `try_lock` with a round trip, deadlines ignored, late readers joining a held read turn,
//! newcomers joining a turn whose node is already in line, a downgrade not closing its turn); each
//! made the matching test here fail.

use crate::support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::task::JoinHandle;
use zk_curator::locks::{FencingToken, HoldState, InterProcessMutex, InterProcessReadWriteLock, MutexGuard};
use zk_curator::testing::expire_session;
use zk_curator::{CuratorClient, Error, Transaction};
use zookeeper_client as zk;

use crate::support::curator_peer::{compiled_peer, parse_acquired, CuratorPeer};

/// Hang guard for one acquire or one scenario step (never a performance bound).
const HANG: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// The children of `path` whose ephemeral owner is `session` (a client's nodes), sorted.
async fn nodes_of(zk: &zk::Client, path: &str, session: i64) -> Vec<String> {
    let mut mine = Vec::new();
    for child in support::sorted_children(zk, path).await {
        // A node may be deleted between the listing and the stat.
        if let Ok(Some(stat)) = zk.check_stat(&format!("{path}/{child}")).await {
            if stat.ephemeral_owner == session {
                mine.push(child);
            }
        }
    }
    mine
}

/// The children of `path` whose ephemeral owner is not `session`.
async fn nodes_not_of(zk: &zk::Client, path: &str, session: i64) -> Vec<String> {
    let mut others = Vec::new();
    for child in support::sorted_children(zk, path).await {
        if let Ok(Some(stat)) = zk.check_stat(&format!("{path}/{child}")).await {
            if stat.ephemeral_owner != session {
                others.push(child);
            }
        }
    }
    others
}

/// An in-process overlap witness for every Rust holder of the test (all clients of the test live
/// in this process, so one counter sees them all). `enter` returns a token that leaves on drop, so
/// a holder aborted mid-hold leaves before its guard is dropped (locals drop in reverse order).
#[derive(Default)]
struct Witness {
    exclusive: AtomicUsize,
    shared: AtomicUsize,
    violations: Mutex<Vec<String>>,
    holds: AtomicUsize,
}

struct Inside<'a> {
    witness: &'a Witness,
    shared: bool,
}

impl Witness {
    fn enter(&self, who: &str) -> Inside<'_> {
        let before = self.exclusive.fetch_add(1, Ordering::SeqCst);
        let readers = self.shared.load(Ordering::SeqCst);
        if before != 0 || readers != 0 {
            self.violate(format!("{who} was granted while {before} exclusive and {readers} shared holders held"));
        }
        self.holds.fetch_add(1, Ordering::SeqCst);
        Inside { witness: self, shared: false }
    }

    fn enter_shared(&self, who: &str) -> Inside<'_> {
        self.shared.fetch_add(1, Ordering::SeqCst);
        let writers = self.exclusive.load(Ordering::SeqCst);
        if writers != 0 {
            self.violate(format!("reader {who} was granted while {writers} exclusive holders held"));
        }
        self.holds.fetch_add(1, Ordering::SeqCst);
        Inside { witness: self, shared: true }
    }

    fn violate(&self, what: String) {
        self.violations.lock().unwrap_or_else(|e| e.into_inner()).push(what);
    }

    #[track_caller]
    fn assert_clean(&self, scenario: &str) {
        let violations = self.violations.lock().unwrap_or_else(|e| e.into_inner()).clone();
        assert!(violations.is_empty(), "{scenario}: mutual exclusion violated: {violations:#?}");
    }
}

impl Drop for Inside<'_> {
    fn drop(&mut self) {
        if self.shared {
            self.witness.shared.fetch_sub(1, Ordering::SeqCst);
        } else {
            self.witness.exclusive.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// `lock()` with the hang guard.
async fn lock(mutex: &InterProcessMutex, what: &str) -> MutexGuard {
    support::lock_within(mutex, what, HANG).await
}

async fn join_all<T>(what: &str, handles: Vec<JoinHandle<T>>) -> Vec<T> {
    let mut out = Vec::with_capacity(handles.len());
    for (i, handle) in handles.into_iter().enumerate() {
        out.push(support::join(&format!("{what} #{i}"), HANG, handle).await);
    }
    out
}

/// A server, a Curator peer and `n` Rust clients, the slow parts started concurrently.
async fn setup_with_curator(n: usize) -> (zk_curator::testing::TestingServer, CuratorPeer, Vec<CuratorClient>) {
    support::init_tracing();
    let compile = tokio::task::spawn_blocking(compiled_peer);
    let server = support::server().await;
    compile.await.expect("compile the Curator peer");
    let connect = server.connect_string();
    let peer = CuratorPeer::start(&connect);
    let clients = async {
        let mut clients = Vec::new();
        for _ in 0..n {
            clients.push(support::client(&connect).await);
        }
        clients
    };
    let (peer, clients) = tokio::join!(peer, clients);
    (server, peer, clients)
}

async fn setup(n: usize) -> (zk_curator::testing::TestingServer, Vec<CuratorClient>) {
    support::server_and_clients(n).await
}

/// The Curator peer's commands used here.
async fn curator_critical(peer: &mut CuratorPeer, path: &str, n: usize, counter: &str) -> usize {
    let answer = peer.cmd(&format!("critical {path} {n} {counter}")).await;
    answer.strip_prefix("DONE overlaps=").and_then(|k| k.parse().ok()).unwrap_or_else(|| panic!("bad answer {answer}"))
}

async fn curator_spawn_acquire(peer: &mut CuratorPeer, handle: &str, path: &str) {
    assert_eq!(peer.cmd(&format!("spawn {handle} {path}")).await, "SPAWNED");
}

async fn curator_await(peer: &mut CuratorPeer, handle: &str, timeout: Duration) -> Option<String> {
    let answer = peer.cmd(&format!("await {handle} {}", timeout.as_millis())).await;
    if answer == "PENDING" {
        None
    } else {
        Some(parse_acquired(&answer).unwrap_or_else(|| panic!("bad answer {answer}")))
    }
}

async fn curator_release(peer: &mut CuratorPeer, handle: &str) {
    assert_eq!(peer.cmd(&format!("release {handle}")).await, "RELEASED");
}

/// One lock-guarded critical section checked by ZooKeeper itself, as the Curator peer's
/// `critical`: an EPHEMERAL marker whose create fails if someone else is inside, and a counter
/// written with the version read (an interleaved write shows as BadVersion; the increment is then
/// written blindly, so a lost update also shows in the final count). Returns the overlaps seen.
async fn guarded_increment(zk: &zk::Client, counter: &str) -> usize {
    let marker = format!("{counter}-inside");
    let ephemeral = zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all());
    let mut overlaps = 0;
    let mine = match zk.create(&marker, b"", &ephemeral).await {
        Ok(_) => true,
        Err(zk::Error::NodeExists) => {
            overlaps += 1;
            false
        }
        Err(e) => panic!("create {marker}: {e}"),
    };
    let (data, stat) = zk.get_data(counter).await.expect("read counter");
    let value: u64 = std::str::from_utf8(&data).unwrap().trim().parse().unwrap();
    tokio::task::yield_now().await;
    let next = (value + 1).to_string();
    match zk.set_data(counter, next.as_bytes(), Some(stat.version)).await {
        Ok(_) => {}
        Err(zk::Error::BadVersion) => {
            overlaps += 1;
            zk.set_data(counter, next.as_bytes(), None).await.expect("write counter");
        }
        Err(e) => panic!("write {counter}: {e}"),
    }
    if mine {
        zk.delete(&marker, None).await.expect("delete marker");
    }
    overlaps
}

// ---------------------------------------------------------------------------------------------
// 1. Exclusion across local and remote holders; at most two nodes per client
// ---------------------------------------------------------------------------------------------

/// Two clients (two processes) with 20 local tasks each and a real Curator loop contend for one
/// mutex; every holder runs a ZooKeeper-checked increment (marker node + versioned counter) and the
/// Rust holders also pass an in-process witness. No overlap, no lost update; and while many local
/// tasks wait, a client never has more than two nodes under the path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exclusion_across_local_and_remote_holders() {
    const TASKS: usize = 20;
    const ROUNDS: usize = 4;
    const CURATOR_ROUNDS: usize = 40;
    let (server, mut peer, clients) = setup_with_curator(2).await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("lq-exclusion");
    let counter = format!("{path}-counter");
    obs.mkdir(&counter, &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())).await.unwrap();
    obs.set_data(&counter, b"0", None).await.unwrap();
    let witness = Arc::new(Witness::default());
    let mutexes: Vec<InterProcessMutex> = clients.iter().map(|c| InterProcessMutex::new(c, &path).unwrap()).collect();
    let sessions: Vec<i64> = clients.iter().map(CuratorClient::session_id).collect();

    // Deterministic phase: client 1 holds; the 20 tasks of client 0 queue. Client 0 has at least
    // one node (its turn waits in ZooKeeper) and never more than two.
    let blocker = lock(&mutexes[1], "blocker").await;
    let started = Arc::new(AtomicUsize::new(0));
    let mut queued = Vec::new();
    for t in 0..TASKS {
        let (mutex, witness, started) = (mutexes[0].clone(), witness.clone(), started.clone());
        queued.push(crate::support::spawn(async move {
            started.fetch_add(1, Ordering::SeqCst);
            let guard = lock(&mutex, &format!("queued task {t}")).await;
            let inside = witness.enter(&format!("queued task {t}"));
            tokio::task::yield_now().await;
            drop(inside);
            guard.release().await.unwrap();
        }));
    }
    support::eventually(HANG, "the 20 tasks of client 0 started waiting", || async {
        started.load(Ordering::SeqCst) == TASKS
    })
    .await;
    support::eventually(HANG, "client 0 has a node queued", || async {
        !nodes_of(&obs, &path, sessions[0]).await.is_empty()
    })
    .await;
    for _ in 0..10 {
        let nodes = nodes_of(&obs, &path, sessions[0]).await;
        assert!(nodes.len() <= 2, "20 local waiters of one client hold {} nodes: {nodes:?}", nodes.len());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(blocker);
    join_all("queued task", queued).await;

    // Churn phase: 2 clients x 20 tasks x ROUNDS increments, Curator loops meanwhile; a sampler
    // records the most nodes one client had at once.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let (obs, path, stop, sessions) = (obs.clone(), path.clone(), stop.clone(), sessions.clone());
        crate::support::spawn(async move {
            let mut most = vec![(0usize, Vec::new()); sessions.len()];
            while !stop.load(Ordering::SeqCst) {
                for (i, session) in sessions.iter().enumerate() {
                    let nodes = nodes_of(&obs, &path, *session).await;
                    if nodes.len() > most[i].0 {
                        most[i] = (nodes.len(), nodes);
                    }
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            most
        })
    };
    let mut tasks = Vec::new();
    for (c, mutex) in mutexes.iter().enumerate() {
        for t in 0..TASKS {
            let (mutex, witness, obs, counter) = (mutex.clone(), witness.clone(), obs.clone(), counter.clone());
            tasks.push(crate::support::spawn(async move {
                let mut overlaps = 0;
                for r in 0..ROUNDS {
                    let who = format!("client {c} task {t} round {r}");
                    let guard = lock(&mutex, &who).await;
                    let inside = witness.enter(&who);
                    overlaps += guarded_increment(&obs, &counter).await;
                    drop(inside);
                    guard.release().await.unwrap();
                }
                overlaps
            }));
        }
    }
    let curator_overlaps = curator_critical(&mut peer, &path, CURATOR_ROUNDS, &counter).await;
    let rust_overlaps: usize = join_all("critical task", tasks).await.into_iter().sum();
    stop.store(true, Ordering::SeqCst);
    let most = support::join("sampler", HANG, sampler).await;

    let (data, _) = obs.get_data(&counter).await.unwrap();
    let total: usize = std::str::from_utf8(&data).unwrap().parse().unwrap();
    let expected = 2 * TASKS * ROUNDS + CURATOR_ROUNDS;
    println!(
        "exclusion: counter {total}, overlaps curator={curator_overlaps} rust={rust_overlaps}, most nodes {most:?}"
    );
    witness.assert_clean("local and remote holders");
    assert_eq!(curator_overlaps, 0, "Curator was inside the critical section together with a Rust holder");
    assert_eq!(rust_overlaps, 0, "a Rust holder was inside the critical section together with another holder");
    assert_eq!(total, expected, "lost updates: the lock did not exclude");
    for (c, (n, nodes)) in most.iter().enumerate() {
        assert!(*n <= 2, "client {c} had {n} nodes at once with 20 local tasks: {nodes:?}");
    }
    assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(5)).await.is_empty());
}

// ---------------------------------------------------------------------------------------------
// 2. Fairness with a late Curator contender
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Arrival {
    Early(usize),
    Late(usize),
}

/// One client has 200 local waiters queued behind its holder; a Curator contender arrives; then
/// 50 more local waiters arrive (after Curator's node is in the listing). Curator must get the lock
/// before any of those 50: a remote contender waits at most the batch queued before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_curator_contender_goes_before_later_local_waiters() {
    fairness_scenario(false, false).await;
}

/// As [`late_curator_contender_goes_before_later_local_waiters`], the holder in another process
/// (a second client): our first waiter's node is in line (being acquired) when Curator arrives, so
/// this checks that a turn whose node is already in line takes no later arrival.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_curator_contender_behind_a_remote_holder() {
    fairness_scenario(false, true).await;
}

/// The control of [`late_curator_contender_goes_before_later_local_waiters`]: with
/// `with_node_per_task()` (Curator's shape, strict FIFO by node) the same checker passes — and so
/// the scenario really distinguishes fair from unfair orders.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_curator_contender_per_task_control() {
    fairness_scenario(true, false).await;
}

/// `remote_holder`: the first holder is another client (else a local guard).
async fn fairness_scenario(per_task: bool, remote_holder: bool) {
    const EARLY: usize = 200;
    const LATE: usize = 50;
    let (server, mut peer, clients) = setup_with_curator(2).await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("lq-fair");
    let client = &clients[0];
    let session = client.session_id();
    let mutex = InterProcessMutex::new(client, &path).unwrap();
    let mutex = if per_task { mutex.with_node_per_task() } else { mutex };
    let witness = Arc::new(Witness::default());
    let order: Arc<Mutex<Vec<Arrival>>> = Arc::default();
    let started = Arc::new(AtomicUsize::new(0));

    let spawn_waiter = |arrival: Arrival| {
        let (mutex, witness, order, started) = (mutex.clone(), witness.clone(), order.clone(), started.clone());
        crate::support::spawn(async move {
            started.fetch_add(1, Ordering::SeqCst);
            let who = format!("{arrival:?}");
            let guard = lock(&mutex, &who).await;
            let inside = witness.enter(&who);
            order.lock().unwrap().push(arrival);
            tokio::task::yield_now().await;
            drop(inside);
            guard.release().await.unwrap();
        })
    };

    let holder = if remote_holder {
        lock(&InterProcessMutex::new(&clients[1], &path).unwrap(), "remote holder").await
    } else {
        lock(&mutex, "holder").await
    };
    let mut tasks: Vec<_> = (0..EARLY).map(|i| spawn_waiter(Arrival::Early(i))).collect();
    support::eventually(HANG, "the early waiters started", || async { started.load(Ordering::SeqCst) == EARLY }).await;
    // Per task, the early waiters' nodes are in line before Curator arrives; through the local
    // queue they gather in a turn that makes its node once the holder's is gone.
    support::eventually(HANG, "our nodes are in line", || async {
        nodes_of(&obs, &path, session).await.len()
            >= match (per_task, remote_holder) {
                (true, false) => EARLY + 1,
                (true, true) => EARLY,
                (false, _) => 1,
            }
    })
    .await;

    curator_spawn_acquire(&mut peer, "curator", &path).await;
    let curator_node = {
        let deadline = std::time::Instant::now() + HANG;
        loop {
            let mut found = nodes_not_of(&obs, &path, session).await;
            found.retain(|n| !holder.node_path().ends_with(n.as_str()));
            if let Some(node) = found.into_iter().next() {
                break node;
            }
            assert!(std::time::Instant::now() < deadline, "Curator's node did not appear within {HANG:?}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    // Only now do the late waiters arrive.
    tasks.extend((0..LATE).map(|i| spawn_waiter(Arrival::Late(i))));
    support::eventually(HANG, "the late waiters started", || async { started.load(Ordering::SeqCst) == EARLY + LATE })
        .await;
    // Give a wrong implementation the chance to let late waiters in early (not a timing bound).
    tokio::time::sleep(Duration::from_millis(100)).await;
    holder.release().await.unwrap();

    let acquired = curator_await(&mut peer, "curator", HANG).await.expect("Curator gets the lock");
    // While Curator holds, no Rust holder can be granted: this is Curator's place in the order.
    let before_curator = order.lock().unwrap().clone();
    curator_release(&mut peer, "curator").await;
    join_all("waiter", tasks).await;
    let order = order.lock().unwrap().clone();

    assert_eq!(support::node_name(&acquired), curator_node, "Curator held the node it queued");
    witness.assert_clean("fairness");
    let late_before: Vec<_> = before_curator.iter().filter(|a| matches!(a, Arrival::Late(_))).collect();
    println!(
        "fairness: {} local grants before Curator ({} late), {} in all",
        before_curator.len(),
        late_before.len(),
        order.len()
    );
    assert!(
        late_before.is_empty(),
        "{} local waiters that arrived after Curator's node {curator_node} was created were granted before \
         Curator: {late_before:?}",
        late_before.len()
    );
    assert_eq!(order.len(), EARLY + LATE);
    assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(5)).await.is_empty());
}

// ---------------------------------------------------------------------------------------------
// 3. Fencing tokens across local hand-offs
// ---------------------------------------------------------------------------------------------

/// 50 local waiters on one client and 20 on another, two rounds each: the tokens recorded at grant
/// (under one std mutex, so in grant order) strictly increase, across clients too; a local hand-off
/// keeps the node's zxid and counts `handoff()` up by one; a new node starts at hand-off 0 with the
/// node's czxid.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_tokens_increase_across_local_hand_offs() {
    let (server, clients) = setup(2).await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("lq-tokens");
    let witness = Arc::new(Witness::default());
    type Grant = (usize, String, FencingToken);
    let grants: Arc<Mutex<Vec<Grant>>> = Arc::default();
    let mut tasks = Vec::new();
    for (c, waiters) in [(0usize, 50usize), (1, 20)] {
        let mutex = InterProcessMutex::new(&clients[c], &path).unwrap();
        for t in 0..waiters {
            let (mutex, witness, grants) = (mutex.clone(), witness.clone(), grants.clone());
            tasks.push(crate::support::spawn(async move {
                for r in 0..2 {
                    let who = format!("client {c} task {t} round {r}");
                    let guard = lock(&mutex, &who).await;
                    let inside = witness.enter(&who);
                    grants.lock().unwrap().push((c, guard.node_path().to_string(), guard.fencing_token()));
                    tokio::task::yield_now().await;
                    drop(inside);
                    guard.release().await.unwrap();
                }
            }));
        }
    }
    join_all("token task", tasks).await;
    witness.assert_clean("tokens");
    let grants = grants.lock().unwrap().clone();
    assert_eq!(grants.len(), 140);

    let (mut handoffs, mut switches) = (0, 0);
    for (i, (c, node, token)) in grants.iter().enumerate() {
        assert_eq!(token.value(), token.zxid(), "value() is the zxid");
        assert_eq!(
            token.as_u128(),
            ((token.zxid() as u128) << 64) | token.handoff() as u128,
            "as_u128 packs zxid and hand-off"
        );
        let Some((pc, pnode, prev)) = i.checked_sub(1).map(|p| &grants[p]) else {
            assert_eq!(token.handoff(), 0, "the first grant of a node is hand-off 0");
            continue;
        };
        assert!(token > prev, "grant {i}: token {token:?} (client {c}) after {prev:?} (client {pc}): not increasing");
        assert!(token.as_u128() > prev.as_u128(), "grant {i}: as_u128 not increasing");
        if token.zxid() == prev.zxid() {
            handoffs += 1;
            assert_eq!((c, node), (pc, pnode), "grant {i}: one zxid, one client, one node");
            assert_eq!(token.handoff(), prev.handoff() + 1, "grant {i}: a local hand-off counts up by one");
        } else {
            assert_eq!(token.handoff(), 0, "grant {i}: the first grant of node {node} is hand-off 0");
            switches += usize::from(c != pc);
        }
    }
    // The node's czxid is the token's zxid (checked once per node, after the fact: ZooKeeper's
    // czxid of a deleted node is gone, so check through the sequence order instead).
    let mut zxids: Vec<i64> = grants.iter().map(|(_, _, t)| t.zxid()).collect();
    zxids.dedup();
    let mut by_node: Vec<(String, i64)> = grants.iter().map(|(_, n, t)| (n.clone(), t.zxid())).collect();
    by_node.dedup();
    assert_eq!(by_node.len(), zxids.len(), "each node has one zxid and each zxid one node");
    println!(
        "tokens: {} grants, {} local hand-offs, {} nodes, {switches} client switches",
        grants.len(),
        handoffs,
        zxids.len()
    );
    assert!(handoffs > 0, "no local hand-off happened: the test proves nothing");
    assert!(switches > 0, "the lock never went from one client to the other");
    assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(5)).await.is_empty());
    drop(obs);
}

/// The token's zxid is the czxid of the node that grants it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_zxid_is_the_nodes_czxid() {
    let (server, clients) = setup(1).await;
    let obs = support::observer(&server.connect_string()).await;
    let path = support::unique_path("lq-czxid");
    let mutex = InterProcessMutex::new(&clients[0], &path).unwrap();
    let first = lock(&mutex, "first").await;
    let second = crate::support::spawn({
        let mutex = mutex.clone();
        async move { lock(&mutex, "second").await }
    });
    let czxid = support::stat(&obs, first.node_path()).await.expect("the held node").czxid;
    assert_eq!(first.fencing_token().zxid(), czxid);
    let first_token = first.fencing_token();
    first.release().await.unwrap();
    let second = support::join("second", HANG, second).await;
    let token = second.fencing_token();
    let czxid = support::stat(&obs, second.node_path()).await.expect("the held node").czxid;
    assert_eq!(token.zxid(), czxid, "the second holder's zxid is its node's czxid");
    assert!(token > first_token);
    second.release().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// 4. Guarded writes after a local hand-off
// ---------------------------------------------------------------------------------------------

/// A holds; B waits locally. A keeps its `Arc<Hold>` and releases; B is handed the lock on the same
/// node. A's guarded write through the kept hold is refused (LockLost) though the node exists; B's
/// succeeds; only B's write is applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guarded_write_after_local_release_is_refused() {
    let (server, clients) = setup(2).await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("lq-guarded");
    let target = format!("{path}-target");
    obs.mkdir(&target, &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())).await.unwrap();
    let mutex = InterProcessMutex::new(&clients[0], &path).unwrap();

    // A and B gather in one turn while a local holder holds (its node in line): A (first in line)
    // gets the turn's node, B is handed it locally.
    let blocker = lock(&mutex, "blocker").await;
    let started = Arc::new(AtomicUsize::new(0));
    let spawn_waiter = |name: &'static str| {
        let (mutex, started) = (mutex.clone(), started.clone());
        crate::support::spawn(async move {
            started.fetch_add(1, Ordering::SeqCst);
            lock(&mutex, name).await
        })
    };
    let a = spawn_waiter("A");
    support::eventually(HANG, "A is waiting", || async { started.load(Ordering::SeqCst) == 1 }).await;
    let b = spawn_waiter("B");
    support::eventually(HANG, "B is waiting", || async { started.load(Ordering::SeqCst) == 2 }).await;
    blocker.release().await.unwrap();
    let a = support::join("A", HANG, a).await;
    let a_node = a.node_path().to_string();
    let a_hold = a.hold().clone();
    let a_state = a.watch_state();
    a.guarded_write(Transaction::new().set_data(&target, b"a-while-held", None)).await.expect("A's write while held");
    assert!(!b.is_finished(), "B holds together with A");
    a.release().await.unwrap();
    let b = support::join("B", HANG, b).await;

    assert_eq!(b.node_path(), a_node, "a local hand-off keeps the node");
    assert!(support::exists(&obs, &a_node).await, "the node lives on for B");
    assert_eq!(a_hold.hold_state(), HoldState::Lost, "A's hold is over once released");
    assert_eq!(*a_state.borrow(), HoldState::Lost, "A's state receiver says Lost");
    assert_eq!(b.hold_state(), HoldState::Held);
    assert!(b.fencing_token() > a_hold.fencing_token(), "B's token is above A's");

    support::assert_lock_lost(
        a_hold.guarded_write(Transaction::new().set_data(&target, b"a-stale", None)).await,
        &a_node,
        "A's guarded write after its release",
    );
    b.guarded_write(Transaction::new().set_data(&target, b"b", None)).await.expect("B's guarded write");
    let (data, _) = obs.get_data(&target).await.unwrap();
    assert_eq!(data, b"b", "only B's write is applied");
    // A later stale write is still refused, and still nothing applied.
    support::assert_lock_lost(
        a_hold.guarded_write(Transaction::new().set_data(&target, b"a-stale-2", None)).await,
        &a_node,
        "A's second guarded write after its release",
    );
    assert_eq!(obs.get_data(&target).await.unwrap().0, b"b");

    // B's kept hold after B's release (no more waiters): refused too, and the node is gone.
    let b_hold = b.hold().clone();
    b.release().await.unwrap();
    assert!(matches!(
        b_hold.guarded_write(Transaction::new().set_data(&target, b"b-stale", None)).await,
        Err(Error::LockLost { .. })
    ));
    assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(5)).await.is_empty());
    assert_eq!(obs.get_data(&target).await.unwrap().0, b"b");
}

// ---------------------------------------------------------------------------------------------
// 5. Cancellation storms
// ---------------------------------------------------------------------------------------------

/// Holds the lock briefly under the witness, then releases or drops the guard.
async fn hold_briefly(guard: MutexGuard, witness: &Witness, who: &str, drop_it: bool) {
    let inside = witness.enter(who);
    tokio::task::yield_now().await;
    drop(inside);
    if drop_it {
        drop(guard);
    } else {
        guard.release().await.unwrap();
    }
}

/// 500 local acquires on one client, most cancelled at random points (timeouts, `select!`, aborted
/// tasks), mixed with `try_lock` / `try_lock_for`, while a second client contends: no overlap, no
/// node left, and a fresh `lock()` still works at once on both clients.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_storm_leaves_nothing_behind() {
    const N: usize = 500;
    let (server, clients) = setup(2).await;
    let connect = server.connect_string();
    let path = support::unique_path("lq-storm");
    let mut rng = StdRng::seed_from_u64(support::seed("LOCAL_QUEUE_SEED"));
    let witness = Arc::new(Witness::default());
    let local = InterProcessMutex::new(&clients[0], &path).unwrap();
    let remote = InterProcessMutex::new(&clients[1], &path).unwrap();

    let remote_task = {
        let (remote, witness) = (remote.clone(), witness.clone());
        let pauses: Vec<u64> = (0..15).map(|_| rng.gen_range(0..30)).collect();
        crate::support::spawn(async move {
            for (r, pause) in pauses.into_iter().enumerate() {
                let who = format!("remote round {r}");
                let guard = lock(&remote, &who).await;
                hold_briefly(guard, &witness, &who, false).await;
                tokio::time::sleep(Duration::from_millis(pause)).await;
            }
        })
    };

    let mut tasks = Vec::new();
    let mut aborters = Vec::new();
    for i in 0..N {
        let (mutex, witness) = (local.clone(), witness.clone());
        let delay = Duration::from_millis(rng.gen_range(0..200));
        let cancel_after = Duration::from_millis(rng.gen_range(0..40));
        let drop_it = rng.gen_bool(0.3);
        let kind = rng.gen_range(0..5);
        let who = format!("local {i} kind {kind}");
        let task = crate::support::spawn(async move {
            tokio::time::sleep(delay).await;
            match kind {
                0 => {
                    if let Ok(result) = tokio::time::timeout(cancel_after, mutex.lock()).await {
                        hold_briefly(result.unwrap(), &witness, &who, drop_it).await;
                    }
                }
                1 => {
                    tokio::select! {
                        result = mutex.lock() => hold_briefly(result.unwrap(), &witness, &who, drop_it).await,
                        _ = tokio::time::sleep(cancel_after) => {}
                    }
                }
                2 => {
                    // Aborted from outside at a random point (maybe while holding).
                    let guard = mutex.lock().await.unwrap();
                    hold_briefly(guard, &witness, &who, drop_it).await;
                }
                3 => {
                    if let Some(guard) = mutex.try_lock().await.unwrap() {
                        hold_briefly(guard, &witness, &who, drop_it).await;
                    }
                }
                _ => {
                    if let Some(guard) = mutex.try_lock_for(cancel_after).await.unwrap() {
                        hold_briefly(guard, &witness, &who, drop_it).await;
                    }
                }
            }
        });
        if kind == 2 {
            let abort = task.abort_handle();
            let after = delay + cancel_after;
            aborters.push(crate::support::spawn(async move {
                tokio::time::sleep(after).await;
                abort.abort();
            }));
        }
        tasks.push(task);
    }
    for (i, task) in tasks.into_iter().enumerate() {
        match tokio::time::timeout(HANG, task).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) if e.is_cancelled() => {}
            Ok(Err(e)) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Ok(Err(e)) => panic!("storm task {i}: {e}"),
            Err(_) => panic!("storm task {i} not finished within {HANG:?}"),
        }
    }
    join_all("aborter", aborters).await;
    support::join("remote", HANG, remote_task).await;
    witness.assert_clean("cancellation storm");
    println!("storm: {} holds", witness.holds.load(Ordering::SeqCst));
    assert!(witness.holds.load(Ordering::SeqCst) > 0, "nobody ever held: the storm proves nothing");

    let left = support::eventually_no_children(&connect, &path, Duration::from_secs(10)).await;
    assert!(left.is_empty(), "nodes left after the storm: {left:?}");
    // A fresh acquire on each client works at once (hang guard only).
    for (name, mutex) in [("local", &local), ("remote", &remote)] {
        let guard = tokio::time::timeout(Duration::from_secs(5), mutex.lock())
            .await
            .unwrap_or_else(|_| panic!("fresh {name} lock() hangs after the storm"))
            .unwrap();
        guard.release().await.unwrap();
    }
    assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(5)).await.is_empty());
}

/// Another client holds; our waiters all give up (aborted, timed out) while our turn's node waits in
/// ZooKeeper — also right after they started, while the create may be in flight: our node is
/// deleted; only the holder's stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_every_waiter_deletes_the_turns_node() {
    let (server, clients) = setup(2).await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("lq-cancel-all");
    let local = InterProcessMutex::new(&clients[0], &path).unwrap();
    let remote = InterProcessMutex::new(&clients[1], &path).unwrap();
    let session = clients[0].session_id();
    let holder = lock(&remote, "remote holder").await;
    let holder_node = support::node_name(holder.node_path()).to_string();
    let mut rng = StdRng::seed_from_u64(support::seed("LOCAL_QUEUE_SEED"));

    // Waiters aborted once our turn's node is there.
    let waiters: Vec<_> = (0..10)
        .map(|_| {
            let mutex = local.clone();
            crate::support::spawn(async move { mutex.lock().await.map(drop) })
        })
        .collect();
    support::eventually(HANG, "our turn's node is queued", || async {
        !nodes_of(&obs, &path, session).await.is_empty()
    })
    .await;
    for waiter in &waiters {
        waiter.abort();
    }
    support::eventually(Duration::from_secs(5), "the aborted turn's node is deleted", || async {
        nodes_of(&obs, &path, session).await.is_empty()
    })
    .await;

    // Waiters that time out.
    let timed: Vec<_> = (0..10)
        .map(|_| {
            let mutex = local.clone();
            crate::support::spawn(
                async move { mutex.try_lock_for(Duration::from_millis(300)).await.unwrap().is_none() },
            )
        })
        .collect();
    assert!(join_all("timed waiter", timed).await.into_iter().all(|none| none), "a timed waiter got the lock");
    support::eventually(Duration::from_secs(5), "the timed-out turn's node is deleted", || async {
        nodes_of(&obs, &path, session).await.is_empty()
    })
    .await;

    // Waiters aborted at random early points, the create possibly in flight.
    for _ in 0..20 {
        let waiters: Vec<_> = (0..5)
            .map(|_| {
                let mutex = local.clone();
                crate::support::spawn(async move { mutex.lock().await.map(drop) })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(rng.gen_range(0..6))).await;
        for waiter in &waiters {
            waiter.abort();
        }
    }
    support::eventually(Duration::from_secs(5), "no node of the aborted early turns is left", || async {
        nodes_of(&obs, &path, session).await.is_empty()
    })
    .await;
    // A create still in flight when the last look found none lands afterwards; its attempt
    // deletes it once the reply comes: wait for that too.
    let left = support::children_become(&obs, &path, std::slice::from_ref(&holder_node), Duration::from_secs(5)).await;
    assert_eq!(left, [holder_node], "only the holder's node is left");

    holder.release().await.unwrap();
    let guard = tokio::time::timeout(Duration::from_secs(5), local.lock()).await.expect("fresh lock() hangs").unwrap();
    guard.release().await.unwrap();
    assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(5)).await.is_empty());
}

// ---------------------------------------------------------------------------------------------
// 6. Session expiry with a local queue
// ---------------------------------------------------------------------------------------------

/// A holder and 20 local waiters; the session expires. The holder's hold goes Lost; no waiter is
/// ever handed a hold that is not Held on the client's current session; the waiters all get the
/// lock on the new session, excluding each other and a waiter of another client; nothing is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_expiry_with_a_local_queue() {
    expiry_scenario(false).await;
}

/// As [`session_expiry_with_a_local_queue`], the 20 waiters queued in the holder's own turn (they
/// joined while its node waited behind another client): the dead node is never handed on to them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_expiry_with_waiters_in_the_holders_turn() {
    expiry_scenario(true).await;
}

/// `same_turn`: the waiters joined the holder's turn (else they queue behind the next turn's node).
async fn expiry_scenario(same_turn: bool) {
    const WAITERS: usize = 20;
    let (server, clients) = setup(2).await;
    let connect = server.connect_string();
    let path = support::unique_path("lq-expiry");
    let client = clients[0].clone();
    let mutex = InterProcessMutex::new(&client, &path).unwrap();
    let other = InterProcessMutex::new(&clients[1], &path).unwrap();
    let witness = Arc::new(Witness::default());
    let bad_grants: Arc<Mutex<Vec<String>>> = Arc::default();
    let sessions: Arc<Mutex<Vec<i64>>> = Arc::default();

    let obs = support::observer(&connect).await;
    // same_turn: a local blocker holds, so the holder and the waiters gather in one turn.
    let blocker = if same_turn { Some(lock(&mutex, "blocker").await) } else { None };
    let holder_started = Arc::new(AtomicUsize::new(0));
    let holder = crate::support::spawn({
        let (mutex, holder_started) = (mutex.clone(), holder_started.clone());
        async move {
            holder_started.fetch_add(1, Ordering::SeqCst);
            lock(&mutex, "holder").await
        }
    });
    if same_turn {
        support::eventually(HANG, "the holder waits first in its turn", || async {
            holder_started.load(Ordering::SeqCst) == 1
        })
        .await;
    } else {
        support::eventually(HANG, "the holder holds", || async { holder.is_finished() }).await;
    }
    let old_session = client.session();
    let started = Arc::new(AtomicUsize::new(0));
    let mut waiters = Vec::new();
    for w in 0..WAITERS {
        let (mutex, client, witness, bad, sessions, started) =
            (mutex.clone(), client.clone(), witness.clone(), bad_grants.clone(), sessions.clone(), started.clone());
        waiters.push(crate::support::spawn(async move {
            started.fetch_add(1, Ordering::SeqCst);
            let who = format!("waiter {w}");
            let guard = lock(&mutex, &who).await;
            let (state, hold_session, now) = (guard.hold_state(), guard.hold().session(), client.session());
            if state != HoldState::Held || hold_session != now {
                bad.lock().unwrap().push(format!(
                    "{who}: granted {state:?} on session {hold_session:?} while the client is on {now:?}"
                ));
            }
            sessions.lock().unwrap().push(hold_session.id);
            let inside = witness.enter(&who);
            tokio::task::yield_now().await;
            drop(inside);
            guard.release().await.unwrap();
        }));
    }
    let remote = crate::support::spawn({
        let (other, witness) = (other.clone(), witness.clone());
        async move {
            let guard = lock(&other, "other client").await;
            let inside = witness.enter("other client");
            tokio::task::yield_now().await;
            drop(inside);
            guard.release().await.unwrap();
        }
    });
    support::eventually(HANG, "the waiters started", || async { started.load(Ordering::SeqCst) == WAITERS }).await;
    let holder = match blocker {
        Some(blocker) => {
            // The blocker's node and the other client's; our turn (holder and waiters) gathers.
            support::eventually_queued(&obs, &path, 2, "blocker, other client").await;
            blocker.release().await.unwrap();
            support::join("holder", HANG, holder).await
        }
        None => {
            let holder = support::join("holder", HANG, holder).await;
            // The holder's node and the other client's; the waiters gather in the next turn.
            support::eventually_queued(&obs, &path, 2, "holder, other client").await;
            holder
        }
    };

    let lost = holder.watch_state();
    expire_session(&connect, &client).await.expect("expire the session");
    tokio::time::timeout(HANG, holder.lost()).await.expect("the holder's hold goes Lost");
    assert_eq!(holder.hold_state(), HoldState::Lost);
    assert_eq!(*lost.borrow(), HoldState::Lost);
    support::assert_lock_lost(
        holder.guarded_write(Transaction::new().set_data(&path, b"x", None)).await,
        holder.node_path(),
        "the lost holder's guarded write",
    );
    support::session_replaced(&client, old_session.id).await;
    let _ = holder.release().await;

    join_all("waiter", waiters).await;
    support::join("other client", HANG, remote).await;
    witness.assert_clean("session expiry");
    let bad = bad_grants.lock().unwrap().clone();
    assert!(bad.is_empty(), "holds handed out not Held on the current session: {bad:#?}");
    let sessions = sessions.lock().unwrap().clone();
    assert_eq!(sessions.len(), WAITERS);
    assert!(sessions.iter().all(|s| *s != old_session.id), "a waiter was granted on the expired session: {sessions:?}");
    assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(5)).await.is_empty());
}

// ---------------------------------------------------------------------------------------------
// 7. Readers
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq, Eq)]
enum RwGrant {
    Writer,
    LateReader(usize),
}

/// 20 local readers of one client share one read node (at most two) and hold together; a writer of
/// another client queued meanwhile gets the lock before this client's readers that arrived after
/// it, and readers and the writer exclude each other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_readers_share_a_node_and_a_queued_writer_goes_first() {
    const READERS: usize = 20;
    const LATE: usize = 10;
    let (server, clients) = setup(2).await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("lq-readers");
    let ours = InterProcessReadWriteLock::new(&clients[0], &path).unwrap();
    let theirs = InterProcessReadWriteLock::new(&clients[1], &path).unwrap();
    let (session, their_session) = (clients[0].session_id(), clients[1].session_id());
    let witness = Arc::new(Witness::default());
    let order: Arc<Mutex<Vec<RwGrant>>> = Arc::default();
    let (let_go, go) = tokio::sync::watch::channel(false);
    let holding = Arc::new(AtomicUsize::new(0));

    let mut readers = Vec::new();
    for r in 0..READERS {
        let (lock, witness, holding, mut go) = (ours.clone(), witness.clone(), holding.clone(), go.clone());
        readers.push(crate::support::spawn(async move {
            let guard = tokio::time::timeout(HANG, lock.read_lock().lock()).await.expect("reader hangs").unwrap();
            let inside = witness.enter_shared(&format!("reader {r}"));
            holding.fetch_add(1, Ordering::SeqCst);
            let _ = go.wait_for(|go| *go).await;
            holding.fetch_sub(1, Ordering::SeqCst);
            drop(inside);
            guard.release().await.unwrap();
        }));
    }
    support::eventually(HANG, "the 20 readers hold together", || async { holding.load(Ordering::SeqCst) == READERS })
        .await;
    let read_nodes: Vec<_> =
        nodes_of(&obs, &path, session).await.into_iter().filter(|n| n.contains("__READ__")).collect();
    assert!(!read_nodes.is_empty() && read_nodes.len() <= 2, "20 local readers hold through {read_nodes:?}");

    let writer = crate::support::spawn({
        let (lock, witness, order) = (theirs.clone(), witness.clone(), order.clone());
        async move {
            let guard = tokio::time::timeout(HANG, lock.write_lock().lock()).await.expect("writer hangs").unwrap();
            let inside = witness.enter("writer");
            order.lock().unwrap().push(RwGrant::Writer);
            tokio::time::sleep(Duration::from_millis(50)).await;
            drop(inside);
            guard.release().await.unwrap();
        }
    });
    support::eventually(HANG, "the writer's node is queued", || async {
        nodes_of(&obs, &path, their_session).await.iter().any(|n| n.contains("__WRIT__"))
    })
    .await;
    let late_started = Arc::new(AtomicUsize::new(0));
    let late: Vec<_> = (0..LATE)
        .map(|r| {
            let (lock, witness, order, started) = (ours.clone(), witness.clone(), order.clone(), late_started.clone());
            crate::support::spawn(async move {
                started.fetch_add(1, Ordering::SeqCst);
                let guard =
                    tokio::time::timeout(HANG, lock.read_lock().lock()).await.expect("late reader hangs").unwrap();
                let inside = witness.enter_shared(&format!("late reader {r}"));
                order.lock().unwrap().push(RwGrant::LateReader(r));
                tokio::task::yield_now().await;
                drop(inside);
                guard.release().await.unwrap();
            })
        })
        .collect();
    support::eventually(HANG, "the late readers started", || async { late_started.load(Ordering::SeqCst) == LATE })
        .await;
    // Give a wrong implementation the chance to let late readers join the held read turn.
    tokio::time::sleep(Duration::from_millis(200)).await;
    // The late readers wait behind the writer with one read node (one turn in line).
    let seq = |n: &String| n.rsplit('_').next().unwrap_or_default().to_string();
    let writer_seq = nodes_of(&obs, &path, their_session)
        .await
        .iter()
        .find(|n| n.contains("__WRIT__"))
        .map(seq)
        .expect("the writer's node");
    let behind: Vec<_> = nodes_of(&obs, &path, session)
        .await
        .into_iter()
        .filter(|n| n.contains("__READ__") && seq(n) > writer_seq)
        .collect();
    assert!(behind.len() <= 1, "10 late local readers queue {} read nodes behind the writer: {behind:?}", behind.len());
    let_go.send(true).unwrap();

    join_all("reader", readers).await;
    support::join("writer", HANG, writer).await;
    join_all("late reader", late).await;
    witness.assert_clean("readers and a writer");
    let order = order.lock().unwrap().clone();
    assert_eq!(order.len(), LATE + 1);
    assert_eq!(order[0], RwGrant::Writer, "readers that arrived after the queued writer went first: {order:?}");
    assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(5)).await.is_empty());
}

// ---------------------------------------------------------------------------------------------
// 8. Opting out: one node per task
// ---------------------------------------------------------------------------------------------

/// `with_node_per_task()` keeps Curator's shape: N waiters, N nodes (mutex and read lock).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_per_task_keeps_curators_shape() {
    const N: usize = 8;
    let (server, clients) = setup(2).await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let session = clients[0].session_id();

    let path = support::unique_path("lq-per-task");
    let blocker = lock(&InterProcessMutex::new(&clients[1], &path).unwrap(), "blocker").await;
    let mutex = InterProcessMutex::new(&clients[0], &path).unwrap().with_node_per_task();
    let waiters: Vec<_> = (0..N)
        .map(|i| {
            let mutex = mutex.clone();
            crate::support::spawn(async move {
                lock(&mutex, &format!("per-task waiter {i}")).await.release().await.unwrap()
            })
        })
        .collect();
    support::eventually(HANG, "one node per waiting task", || async {
        nodes_of(&obs, &path, session).await.len() == N
    })
    .await;
    blocker.release().await.unwrap();
    join_all("per-task waiter", waiters).await;
    assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(5)).await.is_empty());

    let path = support::unique_path("lq-per-task-rw");
    let writer = InterProcessReadWriteLock::new(&clients[1], &path).unwrap();
    let blocker = tokio::time::timeout(HANG, writer.write_lock().lock()).await.unwrap().unwrap();
    let rw = InterProcessReadWriteLock::new(&clients[0], &path).unwrap().with_node_per_task();
    let readers: Vec<_> = (0..N)
        .map(|_| {
            let rw = rw.clone();
            crate::support::spawn(async move {
                tokio::time::timeout(HANG, rw.read_lock().lock()).await.unwrap().unwrap().release().await.unwrap()
            })
        })
        .collect();
    support::eventually(HANG, "one read node per waiting reader", || async {
        nodes_of(&obs, &path, session).await.iter().filter(|n| n.contains("__READ__")).count() == N
    })
    .await;
    blocker.release().await.unwrap();
    join_all("per-task reader", readers).await;
    assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(5)).await.is_empty());
}

// ---------------------------------------------------------------------------------------------
// 9. Strict deadlines; try_lock with a local holder
// ---------------------------------------------------------------------------------------------

/// `try_lock_for(200 ms)` while another client holds gives up (hang guard only) and leaves no node;
/// `try_lock()` while a local guard holds returns None without creating any node (the path's
/// child version does not move).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_deadline_and_local_try_lock() {
    let (server, clients) = setup(2).await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("lq-deadline");
    let session = clients[0].session_id();
    let local = InterProcessMutex::new(&clients[0], &path).unwrap();
    let remote = InterProcessMutex::new(&clients[1], &path).unwrap();

    let holder = lock(&remote, "remote holder").await;
    let attempt = tokio::time::timeout(Duration::from_secs(5), local.try_lock_for(Duration::from_millis(200)))
        .await
        .expect("try_lock_for(200 ms) hangs")
        .unwrap();
    assert!(attempt.is_none(), "try_lock_for got the lock while another client holds it");
    support::eventually(Duration::from_secs(5), "the timed-out attempt's node is deleted", || async {
        nodes_of(&obs, &path, session).await.is_empty()
    })
    .await;
    // A timed attempt queued behind a local waiter whose turn waits: also strict.
    let waiting = crate::support::spawn({
        let local = local.clone();
        async move { lock(&local, "local waiter").await.release().await.unwrap() }
    });
    support::eventually(HANG, "the local waiter's node is queued", || async {
        !nodes_of(&obs, &path, session).await.is_empty()
    })
    .await;
    let attempt = tokio::time::timeout(Duration::from_secs(5), local.try_lock_for(Duration::from_millis(200)))
        .await
        .expect("try_lock_for(200 ms) behind a local waiter hangs")
        .unwrap();
    assert!(attempt.is_none());
    assert!(tokio::time::timeout(Duration::from_secs(5), local.try_lock())
        .await
        .expect("try_lock hangs")
        .unwrap()
        .is_none());
    holder.release().await.unwrap();
    support::join("local waiter", HANG, waiting).await;
    assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(5)).await.is_empty());

    // try_lock with a local holder: None, and no node created and deleted meanwhile.
    let guard = lock(&local, "local holder").await;
    let before = support::stat(&obs, &path).await.expect("the lock path").cversion;
    for _ in 0..5 {
        let attempt = tokio::time::timeout(Duration::from_secs(5), local.try_lock())
            .await
            .expect("try_lock with a local holder hangs")
            .unwrap();
        assert!(attempt.is_none(), "try_lock got the lock while a local guard holds it");
    }
    let after = support::stat(&obs, &path).await.expect("the lock path").cversion;
    assert_eq!(after, before, "try_lock with a local holder created a node (child version {before} -> {after})");
    guard.release().await.unwrap();
    assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(5)).await.is_empty());
}

// ---------------------------------------------------------------------------------------------
// More: downgrade with local writers waiting; try_lock right after a cancelled waiter; close
// ---------------------------------------------------------------------------------------------

/// Writers W1..W5 of one client share one turn; W1 downgrades (`lock_while_writing`) and releases
/// its write hold: the node must not be handed on to W2 while W1's read hold stands in its place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downgrade_is_not_overtaken_by_local_writers_of_its_turn() {
    const WRITERS: usize = 5;
    let (server, clients) = setup(2).await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("lq-downgrade");
    let ours = InterProcessReadWriteLock::new(&clients[0], &path).unwrap();
    let theirs = InterProcessReadWriteLock::new(&clients[1], &path).unwrap();
    let witness = Arc::new(Witness::default());
    // A local write holder: W1..W5 gather in one turn behind it, and the local blocker's release
    // starts that turn (W1 first, the others handed the node locally). Another client's writer
    // holds first, so the blocker's node is in line too.
    let remote = tokio::time::timeout(HANG, theirs.write_lock().lock()).await.unwrap().unwrap();
    let blocker = crate::support::spawn({
        let ours = ours.clone();
        async move { tokio::time::timeout(HANG, ours.write_lock().lock()).await.expect("blocker hangs").unwrap() }
    });
    support::eventually(HANG, "the blocker's node is queued", || async {
        !nodes_of(&obs, &path, clients[0].session_id()).await.is_empty()
    })
    .await;
    remote.release().await.unwrap();
    let blocker = support::join("blocker", HANG, blocker).await;
    let started = Arc::new(AtomicUsize::new(0));
    let first = crate::support::spawn({
        let (ours, started) = (ours.clone(), started.clone());
        async move {
            started.fetch_add(1, Ordering::SeqCst);
            tokio::time::timeout(HANG, ours.write_lock().lock()).await.expect("W1 hangs").unwrap()
        }
    });
    support::eventually(HANG, "W1 is waiting", || async { started.load(Ordering::SeqCst) == 1 }).await;
    let others: Vec<_> = (2..=WRITERS)
        .map(|w| {
            let (ours, started, witness) = (ours.clone(), started.clone(), witness.clone());
            crate::support::spawn(async move {
                started.fetch_add(1, Ordering::SeqCst);
                let guard = tokio::time::timeout(HANG, ours.write_lock().lock()).await.expect("writer hangs").unwrap();
                let inside = witness.enter(&format!("W{w}"));
                tokio::task::yield_now().await;
                drop(inside);
                guard.release().await.unwrap();
            })
        })
        .collect();
    support::eventually(HANG, "the writers are waiting", || async { started.load(Ordering::SeqCst) == WRITERS }).await;
    blocker.release().await.unwrap();
    let w1 = support::join("W1", HANG, first).await;
    let w1_inside = witness.enter("W1");
    let read = tokio::time::timeout(HANG, ours.read_lock().lock_while_writing(&w1)).await.unwrap().unwrap();
    drop(w1_inside);
    let read_inside = witness.enter_shared("W1's read hold");
    w1.release().await.unwrap();
    // Give a wrong implementation the chance to hand the write node on (not a timing bound).
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(others.iter().all(|w| !w.is_finished()), "a local writer finished while the downgraded read hold stands");
    drop(read_inside);
    read.release().await.unwrap();
    join_all("writer", others).await;
    witness.assert_clean("downgrade");
    assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(5)).await.is_empty());
}

/// A lock() that was cancelled (no other holder, no other waiter) leaves the lock free: `try_lock()`
/// soon gets it; right after a timed-out `try_lock_for` (which waits for its node's delete) and
/// the other client's release, `try_lock()` gets it at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_lock_right_after_a_cancelled_waiter_gets_the_free_lock() {
    let (server, clients) = setup(2).await;
    let connect = server.connect_string();
    let path = support::unique_path("lq-try-after-cancel");
    let mutex = InterProcessMutex::new(&clients[0], &path).unwrap();
    let remote = InterProcessMutex::new(&clients[1], &path).unwrap();
    for round in 0..5 {
        // A waiter cancelled while its node is on the way.
        {
            let pending = mutex.lock();
            tokio::pin!(pending);
            let first = futures::poll!(pending.as_mut());
            assert!(
                first.is_pending(),
                "round {round}: lock() was ready at its first poll: {:?}",
                first.map(|r| r.map(drop))
            );
        }
        // The cancelled waiter's node may still be on its way out (as with one node per task), so
        // "busy" for a moment is allowed; for good is not.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            if let Some(guard) = mutex.try_lock().await.unwrap() {
                guard.release().await.unwrap();
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "round {round}: try_lock() still says busy 5 s after a cancelled lock(); the lock is free"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // A timed attempt that ran out behind another client's holder, which then released.
        let holder = lock(&remote, "remote").await;
        assert!(mutex.try_lock_for(Duration::from_millis(50)).await.unwrap().is_none());
        holder.release().await.unwrap();
        let guard = mutex.try_lock().await.unwrap();
        assert!(guard.is_some(), "round {round}: try_lock() right after a timed-out try_lock_for said busy");
        guard.unwrap().release().await.unwrap();
    }
    assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(5)).await.is_empty());
}

/// Closing the client while local waiters wait: each gets `Error::Closed` (no hang), and nothing
/// of this client is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_client_ends_the_local_queue() {
    let (server, clients) = setup(2).await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("lq-close");
    let session = clients[0].session_id();
    let mutex = InterProcessMutex::new(&clients[0], &path).unwrap();
    let blocker = lock(&InterProcessMutex::new(&clients[1], &path).unwrap(), "blocker").await;
    let holder = crate::support::spawn({
        let mutex = mutex.clone();
        async move { mutex.lock().await }
    });
    let waiters: Vec<_> = (0..10)
        .map(|_| {
            let mutex = mutex.clone();
            crate::support::spawn(async move { mutex.lock().await.map(drop) })
        })
        .collect();
    support::eventually(HANG, "our turn's node is queued", || async {
        !nodes_of(&obs, &path, session).await.is_empty()
    })
    .await;
    tokio::time::timeout(HANG, clients[0].close()).await.expect("close hangs");
    for (i, waiter) in waiters.into_iter().enumerate() {
        let result = support::join(&format!("waiter {i}"), HANG, waiter).await;
        assert!(matches!(result, Err(Error::Closed { .. })), "waiter {i} after close: {result:?}");
    }
    let result = support::join("holder", HANG, holder).await;
    assert!(matches!(result, Err(Error::Closed { .. })), "first waiter after close: {:?}", result.map(drop));
    assert!(nodes_of(&obs, &path, session).await.is_empty(), "a node of the closed client is left");
    blocker.release().await.unwrap();
    assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(5)).await.is_empty());
}

/// Forms one local turn on `mutex` of `n` tasks behind `blocker`, a guard of the same `mutex` (so
/// the tasks gather in one collecting turn whose node is made once the blocker is gone): the first
/// task spawned is granted first; returns its guard and the other tasks, each running `then` on
/// its guard once handed the turn's node.
async fn one_turn<F, Fut>(
    obs: &zk::Client,
    mutex: &InterProcessMutex,
    session: i64,
    blocker: MutexGuard,
    n: usize,
    then: F,
) -> (MutexGuard, Vec<JoinHandle<()>>)
where
    F: Fn(usize, MutexGuard) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let started = Arc::new(AtomicUsize::new(0));
    let first = crate::support::spawn({
        let (mutex, started) = (mutex.clone(), started.clone());
        async move {
            started.fetch_add(1, Ordering::SeqCst);
            lock(&mutex, "first of the turn").await
        }
    });
    support::eventually(HANG, "the first task waits", || async { started.load(Ordering::SeqCst) == 1 }).await;
    let others = (1..n)
        .map(|i| {
            let (mutex, started, then) = (mutex.clone(), started.clone(), then.clone());
            crate::support::spawn(async move {
                started.fetch_add(1, Ordering::SeqCst);
                let guard = lock(&mutex, &format!("task {i} of the turn")).await;
                then(i, guard).await
            })
        })
        .collect();
    support::eventually(HANG, "the turn's tasks wait", || async { started.load(Ordering::SeqCst) == n }).await;
    // The blocker's node is this process's node in line: the tasks gather in one turn that starts
    // (one node) once the blocker is gone.
    let _ = (obs, session);
    blocker.release().await.unwrap();
    (support::join("first of the turn", HANG, first).await, others)
}

/// The connection of a client whose holder has local waiters in its turn is cut: the holder's
/// hold is Suspended, and releasing it then must not hand the node on (nobody may be granted a
/// hold that is not Held). Once the connection is back (same session), the waiters get the lock
/// one by one, each Held at grant, and nothing is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspended_holder_does_not_hand_its_node_on() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let proxy = zk_curator::testing::FaultProxy::start(&connect).await.expect("proxy");
    let client = support::client(&proxy.connect_string()).await;
    let obs = support::observer(&connect).await;
    let path = support::unique_path("lq-suspended");
    let mutex = InterProcessMutex::new(&client, &path).unwrap();
    let witness = Arc::new(Witness::default());
    let bad: Arc<Mutex<Vec<String>>> = Arc::default();
    let blocker = lock(&mutex, "blocker").await;
    let then = {
        let (witness, bad, client) = (witness.clone(), bad.clone(), client.clone());
        move |i: usize, guard: MutexGuard| {
            let (witness, bad, client) = (witness.clone(), bad.clone(), client.clone());
            async move {
                let state = guard.hold_state();
                if state != HoldState::Held || guard.hold().session() != client.session() {
                    bad.lock().unwrap().push(format!("task {i}: granted {state:?} on {:?}", guard.hold().session()));
                }
                let inside = witness.enter(&format!("task {i}"));
                tokio::task::yield_now().await;
                drop(inside);
                guard.release().await.unwrap();
            }
        }
    };
    let (holder, waiters) = one_turn(&obs, &mutex, client.session_id(), blocker, 11, then).await;
    let session = client.session_id();
    proxy.set_mode(zk_curator::testing::ProxyMode::Cut);
    support::eventually(HANG, "the holder is Suspended", || async { holder.hold_state() == HoldState::Suspended })
        .await;
    drop(holder); // released in the background: must not be handed on while Suspended
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(waiters.iter().all(|w| !w.is_finished()), "a waiter finished while the connection was cut");
    proxy.set_mode(zk_curator::testing::ProxyMode::Pass);
    join_all("waiter", waiters).await;
    assert_eq!(client.session_id(), session, "the session survived the short cut");
    witness.assert_clean("suspended holder");
    let bad = bad.lock().unwrap().clone();
    assert!(bad.is_empty(), "holds handed out not Held on the current session: {bad:#?}");
    assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(10)).await.is_empty());
}

/// A holder whose link is blackholed until its client gives the session up (LOST), with local
/// waiters in its turn and in the next, then healed at once: no waiter is granted before the
/// holder's hold is Lost, every grant is Held on the current session, and while the holder keeps
/// its guard nothing of ours frees its node (the waiters are granted only once the holder drops it
/// or the old session could have expired). Nothing is left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_of_a_blackholed_holders_turn_wait_for_its_loss_and_heal() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let proxy = zk_curator::testing::FaultProxy::start(&connect).await.expect("proxy");
    let client =
        support::client_with_timeouts(&proxy.connect_string(), Duration::from_secs(4), Duration::from_secs(2)).await;
    let obs = support::observer(&connect).await;
    let path = support::unique_path("lq-blackhole-heal");
    let mutex = InterProcessMutex::new(&client, &path).unwrap();
    let lost_seen: Arc<Mutex<Option<std::time::Instant>>> = Arc::default();
    let bad: Arc<Mutex<Vec<String>>> = Arc::default();
    let witness = Arc::new(Witness::default());
    let blocker = lock(&mutex, "blocker").await;
    let then = {
        let (lost_seen, bad, client, witness) = (lost_seen.clone(), bad.clone(), client.clone(), witness.clone());
        move |i: usize, guard: MutexGuard| {
            let (lost_seen, bad, client, witness) = (lost_seen.clone(), bad.clone(), client.clone(), witness.clone());
            async move {
                let state = guard.hold_state();
                if state != HoldState::Held || guard.hold().session() != client.session() {
                    bad.lock().unwrap().push(format!("task {i}: granted {state:?} on {:?}", guard.hold().session()));
                }
                if lost_seen.lock().unwrap().is_none() {
                    bad.lock().unwrap().push(format!("task {i}: granted before the holder's hold was Lost"));
                }
                let inside = witness.enter(&format!("task {i}"));
                tokio::task::yield_now().await;
                drop(inside);
                guard.release().await.unwrap();
            }
        }
    };
    let (holder, mut waiters) = one_turn(&obs, &mutex, client.session_id(), blocker, 4, then.clone()).await;
    // Two more in the next turn.
    for i in 10..12 {
        let (mutex, then) = (mutex.clone(), then.clone());
        waiters.push(crate::support::spawn(async move {
            let guard = lock(&mutex, &format!("task {i} of the next turn")).await;
            then(i, guard).await
        }));
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let holder_inside = witness.enter("the holder");
    proxy.set_mode(zk_curator::testing::ProxyMode::Blackhole);
    support::eventually(HANG, "the holder's hold is Lost", || async { holder.hold_state() == HoldState::Lost }).await;
    let old = holder.hold().session();
    drop(holder_inside);
    *lost_seen.lock().unwrap() = Some(std::time::Instant::now());
    proxy.set_mode(zk_curator::testing::ProxyMode::Pass);
    // The holder keeps its guard a while: its node stays (nobody granted) unless the old session
    // could have expired meanwhile.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let expired_by_now = client.earliest_expiry(old).is_some_and(|at| at <= std::time::Instant::now());
    if !expired_by_now {
        assert!(
            support::exists(&obs, holder.node_path()).await || waiters.iter().all(|w| !w.is_finished()),
            "the lost holder's node was freed while it kept its guard"
        );
    }
    drop(holder);
    join_all("waiter", waiters).await;
    witness.assert_clean("blackholed holder");
    let bad = bad.lock().unwrap().clone();
    assert!(bad.is_empty(), "{bad:#?}");
    assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(10)).await.is_empty());
}

/// A revocable holder with local waiters in its turn is asked to release (Curator's Revoker) by a
/// contender of another client queued behind it: once it releases, the node is not handed on
/// locally — the contender that asked gets the lock before every local waiter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_node_is_not_handed_on_locally() {
    let (server, clients) = setup(2).await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("lq-revoke");
    let mutex = InterProcessMutex::new(&clients[0], &path).unwrap();
    mutex.make_revocable();
    let remote = InterProcessMutex::new(&clients[1], &path).unwrap();
    let order: Arc<Mutex<Vec<String>>> = Arc::default();
    let witness = Arc::new(Witness::default());
    let blocker = lock(&mutex, "blocker").await;
    let then = {
        let (order, witness) = (order.clone(), witness.clone());
        move |i: usize, guard: MutexGuard| {
            let (order, witness) = (order.clone(), witness.clone());
            async move {
                let inside = witness.enter(&format!("local {i}"));
                order.lock().unwrap().push(format!("local {i}"));
                tokio::task::yield_now().await;
                drop(inside);
                guard.release().await.unwrap();
            }
        }
    };
    let (holder, waiters) = one_turn(&obs, &mutex, clients[0].session_id(), blocker, 6, then).await;
    let contender = crate::support::spawn({
        let (remote, order, witness) = (remote.clone(), order.clone(), witness.clone());
        async move {
            let guard = lock(&remote, "remote contender").await;
            let inside = witness.enter("remote contender");
            order.lock().unwrap().push("remote".to_string());
            tokio::task::yield_now().await;
            drop(inside);
            guard.release().await.unwrap();
        }
    });
    support::eventually_queued(&obs, &path, 2, "our turn, then the remote contender").await;
    zk_curator::locks::Revoker::attempt_revoke(&clients[1], holder.node_path()).await.unwrap();
    tokio::time::timeout(HANG, holder.revocation_requested()).await.expect("the holder is asked to release");
    holder.release().await.unwrap();
    support::join("remote contender", HANG, contender).await;
    join_all("local waiter", waiters).await;
    witness.assert_clean("revocation");
    let order = order.lock().unwrap().clone();
    assert_eq!(order.first().map(String::as_str), Some("remote"), "the revoked node was handed on locally: {order:?}");
    assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(5)).await.is_empty());
}

/// The fairness rule for readers whose turn is still waiting: a writer W1 of another client holds;
/// our readers' turn queues behind it; a writer W2 of the other client queues behind our turn;
/// then more of our readers arrive. W2 must get the lock before those late readers (they arrived
/// after W2's node was created).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_readers_do_not_join_a_waiting_turn_ahead_of_a_queued_writer() {
    const EARLY: usize = 5;
    const LATE: usize = 5;
    let (server, clients) = setup(2).await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("lq-late-readers");
    let ours = InterProcessReadWriteLock::new(&clients[0], &path).unwrap();
    // W1 and W2 stand for two writers of other processes: a node each.
    let theirs = InterProcessReadWriteLock::new(&clients[1], &path).unwrap().with_node_per_task();
    let (session, their_session) = (clients[0].session_id(), clients[1].session_id());
    let witness = Arc::new(Witness::default());
    let order: Arc<Mutex<Vec<String>>> = Arc::default();
    let started = Arc::new(AtomicUsize::new(0));
    let w1 = tokio::time::timeout(HANG, theirs.write_lock().lock()).await.unwrap().unwrap();
    let spawn_reader = |name: String| {
        let (ours, witness, order, started) = (ours.clone(), witness.clone(), order.clone(), started.clone());
        crate::support::spawn(async move {
            started.fetch_add(1, Ordering::SeqCst);
            let guard = tokio::time::timeout(HANG, ours.read_lock().lock()).await.expect("reader hangs").unwrap();
            let inside = witness.enter_shared(&name);
            order.lock().unwrap().push(name);
            tokio::task::yield_now().await;
            drop(inside);
            guard.release().await.unwrap();
        })
    };
    let mut readers: Vec<_> = (0..EARLY).map(|r| spawn_reader(format!("early reader {r}"))).collect();
    support::eventually(HANG, "the early readers wait", || async { started.load(Ordering::SeqCst) == EARLY }).await;
    support::eventually(HANG, "our readers' turn is queued", || async {
        !nodes_of(&obs, &path, session).await.is_empty()
    })
    .await;
    let w2 = crate::support::spawn({
        let (theirs, witness, order) = (theirs.clone(), witness.clone(), order.clone());
        async move {
            let guard = tokio::time::timeout(HANG, theirs.write_lock().lock()).await.expect("W2 hangs").unwrap();
            let inside = witness.enter("W2");
            order.lock().unwrap().push("W2".to_string());
            tokio::task::yield_now().await;
            drop(inside);
            guard.release().await.unwrap();
        }
    });
    support::eventually(HANG, "W2 is queued", || async { nodes_of(&obs, &path, their_session).await.len() == 2 }).await;
    readers.extend((0..LATE).map(|r| spawn_reader(format!("late reader {r}"))));
    support::eventually(HANG, "the late readers wait", || async { started.load(Ordering::SeqCst) == EARLY + LATE })
        .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    w1.release().await.unwrap();
    join_all("reader", readers).await;
    support::join("W2", HANG, w2).await;
    witness.assert_clean("late readers");
    let order = order.lock().unwrap().clone();
    let w2_at = order.iter().position(|n| n == "W2").unwrap();
    let late_before: Vec<_> = order[..w2_at].iter().filter(|n| n.starts_with("late")).collect();
    assert!(late_before.is_empty(), "readers that arrived after the queued writer W2 went first: {order:?}");
    assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(5)).await.is_empty());
}

/// Holds a read or write guard briefly under the witness, then releases or drops it.
async fn hold_rw<D: zk_curator::locks::driver::LockDriver>(
    guard: MutexGuard<D>,
    witness: &Witness,
    who: &str,
    read: bool,
    drop_it: bool,
) {
    let inside = if read { witness.enter_shared(who) } else { witness.enter(who) };
    tokio::task::yield_now().await;
    drop(inside);
    if drop_it {
        drop(guard);
    } else {
        guard.release().await.unwrap();
    }
}

/// The cancellation storm on both halves of a read-write lock (readers share turns, writers hand
/// on): 300 random read/write acquires on one client, most cancelled at random points, with
/// `try_lock` / `try_lock_for` mixed in, while another client's readers and writers contend. No
/// writer overlaps anyone, nothing is left, and fresh acquires work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_write_cancellation_storm() {
    const N: usize = 300;
    let (server, clients) = setup(2).await;
    let connect = server.connect_string();
    let path = support::unique_path("lq-rw-storm");
    let mut rng = StdRng::seed_from_u64(support::seed("LOCAL_QUEUE_SEED"));
    let witness = Arc::new(Witness::default());
    let local = InterProcessReadWriteLock::new(&clients[0], &path).unwrap();
    let remote = InterProcessReadWriteLock::new(&clients[1], &path).unwrap();

    let remote_task = {
        let (remote, witness) = (remote.clone(), witness.clone());
        let plan: Vec<(bool, u64)> = (0..15).map(|_| (rng.gen_bool(0.5), rng.gen_range(0..30))).collect();
        crate::support::spawn(async move {
            for (r, (read, pause)) in plan.into_iter().enumerate() {
                let who = format!("remote round {r}");
                if read {
                    let guard = tokio::time::timeout(HANG, remote.read_lock().lock()).await.expect("hang").unwrap();
                    hold_rw(guard, &witness, &who, true, false).await;
                } else {
                    let guard = tokio::time::timeout(HANG, remote.write_lock().lock()).await.expect("hang").unwrap();
                    hold_rw(guard, &witness, &who, false, false).await;
                }
                tokio::time::sleep(Duration::from_millis(pause)).await;
            }
        })
    };

    let mut tasks = Vec::new();
    let mut aborters = Vec::new();
    for i in 0..N {
        let (lock, witness) = (local.clone(), witness.clone());
        let delay = Duration::from_millis(rng.gen_range(0..200));
        let cancel_after = Duration::from_millis(rng.gen_range(0..40));
        let drop_it = rng.gen_bool(0.3);
        let read = rng.gen_bool(0.6);
        let kind = rng.gen_range(0..5);
        let who = format!("local {i} {} kind {kind}", if read { "reader" } else { "writer" });
        macro_rules! run {
            ($half:expr) => {{
                let half = $half;
                match kind {
                    0 => {
                        if let Ok(result) = tokio::time::timeout(cancel_after, half.lock()).await {
                            hold_rw(result.unwrap(), &witness, &who, read, drop_it).await;
                        }
                    }
                    1 => {
                        tokio::select! {
                            result = half.lock() => hold_rw(result.unwrap(), &witness, &who, read, drop_it).await,
                            _ = tokio::time::sleep(cancel_after) => {}
                        }
                    }
                    2 => {
                        let guard = half.lock().await.unwrap();
                        hold_rw(guard, &witness, &who, read, drop_it).await;
                    }
                    3 => {
                        if let Some(guard) = half.try_lock().await.unwrap() {
                            hold_rw(guard, &witness, &who, read, drop_it).await;
                        }
                    }
                    _ => {
                        if let Some(guard) = half.try_lock_for(cancel_after).await.unwrap() {
                            hold_rw(guard, &witness, &who, read, drop_it).await;
                        }
                    }
                }
            }};
        }
        let task = crate::support::spawn(async move {
            tokio::time::sleep(delay).await;
            if read {
                run!(lock.read_lock())
            } else {
                run!(lock.write_lock())
            }
        });
        if kind == 2 {
            let abort = task.abort_handle();
            let after = delay + cancel_after;
            aborters.push(crate::support::spawn(async move {
                tokio::time::sleep(after).await;
                abort.abort();
            }));
        }
        tasks.push(task);
    }
    for (i, task) in tasks.into_iter().enumerate() {
        match tokio::time::timeout(HANG, task).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) if e.is_cancelled() => {}
            Ok(Err(e)) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Ok(Err(e)) => panic!("storm task {i}: {e}"),
            Err(_) => panic!("storm task {i} not finished within {HANG:?}"),
        }
    }
    join_all("aborter", aborters).await;
    support::join("remote", HANG, remote_task).await;
    witness.assert_clean("read-write cancellation storm");
    println!("rw storm: {} holds", witness.holds.load(Ordering::SeqCst));
    let left = support::eventually_no_children(&connect, &path, Duration::from_secs(10)).await;
    assert!(left.is_empty(), "nodes left after the storm: {left:?}");
    for rw in [&local, &remote] {
        let guard =
            tokio::time::timeout(Duration::from_secs(5), rw.write_lock().lock()).await.expect("fresh write hangs");
        guard.unwrap().release().await.unwrap();
        let guard =
            tokio::time::timeout(Duration::from_secs(5), rw.read_lock().lock()).await.expect("fresh read hangs");
        guard.unwrap().release().await.unwrap();
    }
    assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(5)).await.is_empty());
}

/// The deterministic form of the race that `session_expiry_with_a_local_queue` hit now and then
/// (before the turn rule kept one node of a local queue in line): our holder's node and the next
/// node of our session vanish in ONE transaction (as a server-side close of
/// our session deletes all its ephemerals at once, while our connection may still deliver the
/// watch event). The next turn's acquisition sees its predecessor deleted; it must not hand out
/// its own node, which is gone too: every local waiter must be granted a node that exists, on
/// which its guarded write succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_node_deleted_with_its_predecessor_is_not_granted() {
    const WAITERS: usize = 5;
    let (server, clients) = setup(1).await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("lq-dead-turn");
    let target = format!("{path}-target");
    obs.mkdir(&target, &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())).await.unwrap();
    let session = clients[0].session_id();
    // One node per task: since the turn rule keeps one node of a local queue in line, two
    // consecutive nodes of one session come from per-task guards, Curator-style acquires or two
    // queues of one client (read and write halves); the race is in the node wait underneath.
    let mutex = InterProcessMutex::new(&clients[0], &path).unwrap().with_node_per_task();
    let holder = lock(&mutex, "holder").await;
    let bad: Arc<Mutex<Vec<String>>> = Arc::default();
    let started = Arc::new(AtomicUsize::new(0));
    let waiters: Vec<_> = (0..WAITERS)
        .map(|w| {
            let (mutex, obs, bad, started, target) =
                (mutex.clone(), obs.clone(), bad.clone(), started.clone(), target.clone());
            crate::support::spawn(async move {
                started.fetch_add(1, Ordering::SeqCst);
                let guard = lock(&mutex, &format!("waiter {w}")).await;
                let state = guard.hold_state();
                let exists = support::exists(&obs, guard.node_path()).await;
                let write = guard.guarded_write(Transaction::new().set_data(&target, b"w", None)).await;
                if state != HoldState::Held || !exists || write.is_err() {
                    bad.lock().unwrap().push(format!(
                        "waiter {w}: granted {state:?} on {} (exists: {exists}), guarded write: {:?}",
                        guard.node_path(),
                        write.map(drop)
                    ));
                }
                drop(guard);
            })
        })
        .collect();
    support::eventually(HANG, "the waiters wait", || async { started.load(Ordering::SeqCst) == WAITERS }).await;
    support::eventually(HANG, "the waiters' nodes are queued", || async {
        nodes_of(&obs, &path, session).await.len() == WAITERS + 1
    })
    .await;
    // The holder's node and the first waiter's, in sequence order.
    let mut ours = nodes_of(&obs, &path, session).await;
    ours.sort_by_key(|n| n.rsplit('-').next().unwrap_or_default().to_string());
    ours.truncate(2);
    let mut both = obs.new_multi_writer();
    for node in &ours {
        both.add_delete(&format!("{path}/{node}"), None).unwrap();
    }
    both.commit().await.expect("delete the holder's and the next turn's node at once");
    tokio::time::timeout(HANG, holder.lost()).await.expect("the holder's hold goes Lost");
    drop(holder);
    join_all("waiter", waiters).await;
    let bad = bad.lock().unwrap().clone();
    assert!(bad.is_empty(), "holds handed out on a node that no longer exists: {bad:#?}");
    assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(5)).await.is_empty());
}

/// A waiter is handed the turn's node while its task is not running, and its `lock()` future is
/// then dropped without ever seeing the grant: the node must go on to the next waiter (not be
/// lost with the dropped future), and nothing is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_to_a_dropped_waiter_is_handed_on() {
    let (server, clients) = setup(1).await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("lq-dropped-grant");
    let session = clients[0].session_id();
    let mutex = InterProcessMutex::new(&clients[0], &path).unwrap();
    let holder = lock(&mutex, "holder").await;
    // W1 queues (one poll), then W2 behind it.
    let mut w1 = Box::pin(mutex.lock());
    assert!(futures::poll!(w1.as_mut()).is_pending(), "W1 queues behind the holder");
    let w2 = crate::support::spawn({
        let mutex = mutex.clone();
        async move { lock(&mutex, "W2").await.release().await.unwrap() }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let holder_node = support::node_name(holder.node_path()).to_string();
    holder.release().await.unwrap();
    // The turn's node is made and granted to W1, whose task does not poll it.
    support::eventually(HANG, "the turn's node is in line", || async {
        let nodes = nodes_of(&obs, &path, session).await;
        !nodes.is_empty() && !nodes.contains(&holder_node)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(w1);
    support::join("W2", HANG, w2).await;
    assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(5)).await.is_empty());
}

// ---------------------------------------------------------------------------------------------
// Runtimes: the queue runs its tasks where its waiters run
// ---------------------------------------------------------------------------------------------

/// A runtime of its own for a test step (shut down with `shutdown_background`, which may be
/// called inside another runtime).
fn other_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("a runtime")
}

/// The local queue is not tied to the runtime of its first `lock()`: a guard taken on a runtime
/// that has been shut down since, then dropped on a plain thread (no runtime at all: Drop never
/// panics), hands the lock on to a waiter of another runtime, and nothing is left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_outliving_its_runtime_hands_the_lock_to_a_waiter_of_another_runtime() {
    let (server, clients) = setup(1).await;
    let connect = server.connect_string();
    let path = support::unique_path("lq-runtime-gone");
    let mutex = InterProcessMutex::new(&clients[0], &path).unwrap();
    let r2 = other_runtime();
    let on_r2 = r2.spawn({
        let mutex = mutex.clone();
        async move { lock(&mutex, "the first lock(), on R2").await }
    });
    let guard = support::join("the guard on R2", HANG, on_r2).await;
    r2.shutdown_background();
    let waiter = crate::support::spawn({
        let mutex = mutex.clone();
        async move { lock(&mutex, "the waiter of another runtime").await.release().await.unwrap() }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiter.is_finished(), "the waiter got the lock while the guard held it");
    std::thread::spawn(move || drop(guard)).join().expect("dropping the guard on a plain thread");
    support::join("the waiter of another runtime", HANG, waiter).await;
    assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(5)).await.is_empty());
}

/// A turn whose node is being acquired by a task of a runtime that is shut down meanwhile (the
/// runtime of the turn's first waiter, and of the queue's first `lock()`) does not stay
/// "started": its other waiter moves on and gets the lock once the remote holder lets go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_move_on_when_the_runtime_acquiring_their_turn_shuts_down() {
    let (server, clients) = setup(2).await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("lq-driver-gone");
    let session = clients[0].session_id();
    let mutex = InterProcessMutex::new(&clients[0], &path).unwrap();
    let remote = InterProcessMutex::new(&clients[1], &path).unwrap();
    let r3 = other_runtime();
    let first = r3.spawn({
        let mutex = mutex.clone();
        async move { lock(&mutex, "the first lock(), on R3").await }
    });
    let first = support::join("the first holder, on R3", HANG, first).await;
    // A remote contender queues behind it and holds until told.
    let (held_tx, held_rx) = tokio::sync::oneshot::channel();
    let (go_tx, go_rx) = tokio::sync::oneshot::channel::<()>();
    let remote_task = crate::support::spawn(async move {
        let guard = lock(&remote, "the remote contender").await;
        held_tx.send(()).unwrap();
        let _ = go_rx.await;
        guard.release().await.unwrap();
    });
    support::eventually_queued(&obs, &path, 2, "the remote contender queues").await;
    // A (on R3), then B (here) gather in the next turn.
    let a = r3.spawn({
        let mutex = mutex.clone();
        async move { lock(&mutex, "A, on R3").await.release().await.unwrap() }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let b = crate::support::spawn({
        let mutex = mutex.clone();
        async move { lock(&mutex, "B").await.release().await.unwrap() }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let first_node = support::node_name(first.node_path()).to_string();
    first.release().await.unwrap();
    tokio::time::timeout(HANG, held_rx).await.expect("the remote contender holds").unwrap();
    // The turn of A and B is being acquired: its node waits behind the remote holder's.
    support::eventually(HANG, "the turn's node is in line", || async {
        let nodes = nodes_of(&obs, &path, session).await;
        !nodes.is_empty() && !nodes.contains(&first_node)
    })
    .await;
    r3.shutdown_background();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(a.is_finished(), "A's task ended with its runtime");
    go_tx.send(()).unwrap();
    support::join("B, whose turn's acquirer was on R3", HANG, b).await;
    support::join("the remote contender", HANG, remote_task).await;
    assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(5)).await.is_empty());
}

/// A turn's acquisition never depends on a runtime that has stopped being driven: a waiter polled
/// inside a current-thread runtime's `block_on` (the turn's first waiter, so the turn would be
/// acquired there) gives up with a timeout while the turn's node waits behind a remote holder;
/// `block_on` returns, and that runtime, alive, is not driven any more. The turn's other waiter,
/// on a running runtime, gets the lock once the remote holder lets go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_is_not_stranded_on_a_current_thread_runtime_no_longer_driven() {
    let (server, clients) = setup(2).await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("lq-undriven");
    let session = clients[0].session_id();
    let mutex = InterProcessMutex::new(&clients[0], &path).unwrap();
    let remote = InterProcessMutex::new(&clients[1], &path).unwrap();
    let holder = lock(&mutex, "the local holder").await;
    let (go_tx, go_rx) = tokio::sync::oneshot::channel::<()>();
    let remote_task = crate::support::spawn(async move {
        let guard = lock(&remote, "the remote contender").await;
        let _ = go_rx.await;
        guard.release().await.unwrap();
    });
    support::eventually_queued(&obs, &path, 2, "the remote contender queues").await;
    // A: the next turn's first waiter, polled by a current-thread runtime's block_on for 1.5 s.
    let (a_done_tx, a_done_rx) = std::sync::mpsc::channel::<bool>();
    let (drop_rt_tx, drop_rt_rx) = std::sync::mpsc::channel::<()>();
    let a_thread = std::thread::spawn({
        let mutex = mutex.clone();
        move || {
            let ct = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
            let got = ct.block_on(async { tokio::time::timeout(Duration::from_millis(1500), mutex.lock()).await });
            a_done_tx.send(matches!(got, Ok(Ok(_)))).unwrap();
            // Alive, not driven, until the test ends.
            let _ = drop_rt_rx.recv();
            drop(ct);
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let b = crate::support::spawn({
        let mutex = mutex.clone();
        async move {
            let guard = mutex.lock().await.unwrap();
            guard.release().await.unwrap();
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let holder_node = support::node_name(holder.node_path()).to_string();
    holder.release().await.unwrap();
    support::eventually(HANG, "the turn's node is in line", || async {
        let nodes = nodes_of(&obs, &path, session).await;
        !nodes.is_empty() && !nodes.contains(&holder_node)
    })
    .await;
    let a_got = tokio::task::spawn_blocking(move || a_done_rx.recv().unwrap()).await.unwrap();
    assert!(!a_got, "A got the lock while the remote contender held it");
    go_tx.send(()).unwrap();
    let b_in_time = tokio::time::timeout(Duration::from_secs(10), b).await;
    drop_rt_tx.send(()).unwrap();
    a_thread.join().unwrap();
    support::join("the remote contender", HANG, remote_task).await;
    assert!(b_in_time.is_ok(), "B never got the free lock: its turn's acquisition sits on A's undriven runtime");
    assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(5)).await.is_empty());
}

/// A waiter's future dropped on a plain thread (no runtime: Drop never panics) while its turn's
/// node waits behind a remote holder leaves no node: both when the waiter acquires its turn's node
/// itself (it came when nothing of ours was in line) and when a task acquires it (the turn started
/// when the local holder let go).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_dropped_without_a_runtime_leaves_no_node() {
    let (server, clients) = setup(2).await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let session = clients[0].session_id();
    for by_task in [false, true] {
        let path = support::unique_path("lq-drop-no-runtime");
        let mutex = InterProcessMutex::new(&clients[0], &path).unwrap();
        let remote = InterProcessMutex::new(&clients[1], &path).unwrap();
        let holder = if by_task { Some(lock(&mutex, "the local holder").await) } else { None };
        let (held_tx, held_rx) = tokio::sync::oneshot::channel();
        let (go_tx, go_rx) = tokio::sync::oneshot::channel::<()>();
        let remote_task = crate::support::spawn(async move {
            let guard = lock(&remote, "the remote contender").await;
            let _ = held_tx.send(());
            let _ = go_rx.await;
            guard.release().await.unwrap();
        });
        if holder.is_none() {
            tokio::time::timeout(HANG, held_rx).await.expect("the remote contender holds").unwrap();
        } else {
            support::eventually_queued(&obs, &path, 2, "the remote contender queues").await;
        }
        let mut waiter = Box::pin({
            let mutex = mutex.clone();
            async move { mutex.lock().await }
        });
        if let Some(holder) = holder {
            let holder_node = support::node_name(holder.node_path()).to_string();
            crate::support::spawn(async move {
                tokio::time::sleep(Duration::from_millis(100)).await;
                holder.release().await.unwrap();
            });
            let polled = tokio::time::timeout(Duration::from_millis(600), &mut waiter).await;
            assert!(polled.is_err(), "the waiter got the lock while the remote contender held it");
            let nodes = nodes_of(&obs, &path, session).await;
            assert!(!nodes.is_empty() && !nodes.contains(&holder_node), "the turn's node is not in line: {nodes:?}");
        } else {
            let polled = tokio::time::timeout(Duration::from_millis(500), &mut waiter).await;
            assert!(polled.is_err(), "the waiter got the lock while the remote contender held it");
            assert_eq!(nodes_of(&obs, &path, session).await.len(), 1, "the waiter's node is in line");
        }
        std::thread::spawn(move || drop(waiter)).join().expect("dropping the waiter on a plain thread");
        support::eventually(HANG, "the dropped waiter's node is deleted", || async {
            nodes_of(&obs, &path, session).await.is_empty()
        })
        .await;
        go_tx.send(()).unwrap();
        support::join("the remote contender", HANG, remote_task).await;
        assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(5)).await.is_empty());
        // The queue still works.
        lock(&mutex, "a later lock()").await.release().await.unwrap();
    }
}

/// Tokens increase in hold order across a downgrade whose read hold is joined by local readers
/// queued before it, local writers queued before the downgrade, a remote writer, and a
/// Curator-style write acquire after the guards: whenever one hold ended before another began,
/// its token is smaller.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_follow_hold_order_across_a_downgrade_local_readers_and_curator_style() {
    let (server, clients) = setup(2).await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("lq-token-order");
    let rw = InterProcessReadWriteLock::new(&clients[0], &path).unwrap();
    let remote = InterProcessReadWriteLock::new(&clients[1], &path).unwrap();
    type Log = Arc<Mutex<Vec<(String, FencingToken, std::time::Instant, std::time::Instant)>>>;
    let log: Log = Arc::default();
    let record = |log: &Log, who: String, token: FencingToken, from: std::time::Instant| {
        log.lock().unwrap().push((who, token, from, std::time::Instant::now()));
    };
    let w1 = tokio::time::timeout(HANG, rw.write_lock().lock()).await.unwrap().unwrap();
    let w1_from = std::time::Instant::now();
    let mut tasks = Vec::new();
    for i in 0..3 {
        let (rw, log) = (rw.clone(), log.clone());
        tasks.push(crate::support::spawn(async move {
            let guard = tokio::time::timeout(HANG, rw.read_lock().lock()).await.unwrap().unwrap();
            let from = std::time::Instant::now();
            tokio::time::sleep(Duration::from_millis(50)).await;
            let token = guard.fencing_token();
            log.lock().unwrap().push((format!("reader {i}"), token, from, std::time::Instant::now()));
            guard.release().await.unwrap();
        }));
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    for i in 0..3 {
        let (rw, log) = (rw.clone(), log.clone());
        tasks.push(crate::support::spawn(async move {
            let guard = tokio::time::timeout(HANG, rw.write_lock().lock()).await.unwrap().unwrap();
            let from = std::time::Instant::now();
            tokio::time::sleep(Duration::from_millis(20)).await;
            let token = guard.fencing_token();
            log.lock().unwrap().push((format!("writer {i}"), token, from, std::time::Instant::now()));
            guard.release().await.unwrap();
        }));
    }
    {
        let log = log.clone();
        tasks.push(crate::support::spawn(async move {
            let guard = tokio::time::timeout(HANG, remote.write_lock().lock()).await.unwrap().unwrap();
            let from = std::time::Instant::now();
            tokio::time::sleep(Duration::from_millis(20)).await;
            let token = guard.fencing_token();
            log.lock().unwrap().push(("remote writer".into(), token, from, std::time::Instant::now()));
            guard.release().await.unwrap();
        }));
    }
    support::eventually(HANG, "the readers' turn and the remote writer queue", || async {
        support::sorted_children(&obs, &path).await.len() >= 3
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let d = tokio::time::timeout(HANG, rw.read_lock().lock_while_writing(&w1)).await.unwrap().unwrap();
    let d_from = std::time::Instant::now();
    record(&log, "writer w1".into(), w1.fencing_token(), w1_from);
    w1.release().await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    record(&log, "downgrade".into(), d.fencing_token(), d_from);
    d.release().await.unwrap();
    join_all("holder", tasks).await;
    // Curator-style after the guards.
    rw.write_lock().acquire().await.unwrap();
    let from = std::time::Instant::now();
    let token = rw.write_lock().current_hold().expect("held").fencing_token();
    record(&log, "curator-style writer".into(), token, from);
    rw.write_lock().release().await.unwrap();
    let log = log.lock().unwrap().clone();
    let mut wrong = Vec::new();
    for (a, ta, _, a_end) in &log {
        for (b, tb, b_from, _) in &log {
            if a_end < b_from && ta >= tb {
                wrong.push(format!("{a} {ta} ended before {b} {tb} began"));
            }
        }
    }
    assert!(wrong.is_empty(), "tokens out of hold order: {wrong:#?}\n{log:#?}");
    assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(5)).await.is_empty());
}

/// The nodes of `session` under `path`, looked up from a thread and runtime of their own while
/// the calling thread is blocked: on a current-thread runtime nothing of the caller's client moves
/// meanwhile.
fn nodes_of_while_blocked(connect: &str, path: &str, session: i64) -> Vec<String> {
    let (connect, path) = (connect.to_string(), path.to_string());
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        runtime.block_on(async {
            let zk = support::observer(&connect).await;
            nodes_of(&zk, &path, session).await
        })
    })
    .join()
    .expect("the look-up thread")
}

/// A waiter that times out while its turn's node is being acquired (the turn started when the
/// local holder let go; its node waits behind a remote holder) answers "not acquired" only once
/// that node's delete is handed over: at the answer, the node is gone or its delete is pending.
/// Checked at once on a current-thread runtime (the answer is not followed by a yield), with the
/// runtime blocked during the look-up.
#[tokio::test(flavor = "current_thread")]
async fn a_timed_out_waiter_returns_after_its_turns_node_delete_is_handed_over() {
    let (server, clients) = setup(2).await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("lq-timeout-delete");
    let local = clients[0].clone();
    let session = local.session_id();
    let mutex = InterProcessMutex::new(&local, &path).unwrap();
    let remote = InterProcessMutex::new(&clients[1], &path).unwrap();
    let holder = lock(&mutex, "the local holder").await;
    let (go_tx, go_rx) = tokio::sync::oneshot::channel::<()>();
    let remote_task = crate::support::spawn(async move {
        let guard = lock(&remote, "the remote contender").await;
        let _ = go_rx.await;
        guard.release().await.unwrap();
    });
    support::eventually_queued(&obs, &path, 2, "the remote contender queues").await;
    let holder_node = support::node_name(holder.node_path()).to_string();
    crate::support::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        holder.release().await.unwrap();
    });
    let seen = crate::support::spawn({
        let (obs, path) = (obs.clone(), path.clone());
        async move {
            support::eventually(HANG, "the waiter's turn's node is in line", || async {
                let nodes = nodes_of(&obs, &path, session).await;
                !nodes.is_empty() && !nodes.contains(&holder_node)
            })
            .await;
        }
    });
    let answer = mutex.try_lock_for(Duration::from_millis(1500)).await.unwrap();
    let pending = local.pending_background_deletes();
    let left = nodes_of_while_blocked(&connect, &path, session);
    assert!(answer.is_none(), "the waiter got the lock while the remote contender held it");
    assert!(seen.is_finished(), "the waiter's turn never queued a node: the test proves nothing");
    assert!(
        left.is_empty() || pending > 0,
        "\"not acquired\" while the turn's node {left:?} is still there and no delete is pending"
    );
    go_tx.send(()).unwrap();
    support::join("the remote contender", HANG, remote_task).await;
    assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(5)).await.is_empty());
}

// ---------------------------------------------------------------------------------------------
// The token's text form
// ---------------------------------------------------------------------------------------------

/// Compares two decimal numbers given as text exactly (integer part, then the fraction digit by
/// digit), as `sort -n` or a decimal type does.
fn decimal_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    let split = |s: &str| -> (u128, String) {
        let (int, frac) = s.split_once('.').unwrap_or((s, ""));
        assert!(frac.len() <= 40, "{s}: fraction too long for this check");
        (int.parse().unwrap_or_else(|e| panic!("{s}: not a decimal: {e}")), format!("{frac:0<40}"))
    };
    split(a).cmp(&split(b))
}

/// The text form of a token compares, as a decimal number, as the token does (`123.10` used to be
/// below `123.9`); a node's first holder still shows the plain zxid, below every later local
/// holder of that node and above every holder of an older node. `sort -n` orders them too.
#[test]
fn the_tokens_text_compares_as_its_value() {
    let epoch = 5i64 << 32;
    let mut tokens = Vec::new();
    for zxid in [9, 10, 123, 124, 999, 1000, epoch + 1, epoch + 10, i64::MAX - 1, i64::MAX] {
        for handoff in [0, 1, 2, 9, 10, 11, 99, 100, 1_000_000, u32::MAX - 1, u32::MAX] {
            tokens.push(FencingToken::new(zxid, handoff));
        }
    }
    assert_eq!(FencingToken::new(123, 0).to_string(), "123", "a node's first holder: the plain zxid");
    for a in &tokens {
        for b in &tokens {
            assert_eq!(decimal_cmp(&a.to_string(), &b.to_string()), a.cmp(b), "{a:?} is {} but {b:?} is {}", a, b);
        }
    }
    // The same order through `sort -n` (exact for long numbers), from a shuffled list.
    let mut shuffled = tokens.clone();
    let mut rng = StdRng::seed_from_u64(8);
    for i in (1..shuffled.len()).rev() {
        shuffled.swap(i, rng.gen_range(0..=i));
    }
    let input: String = shuffled.iter().map(|t| format!("{t}\n")).collect();
    let mut sort = std::process::Command::new("sort")
        .arg("-n")
        .env("LC_ALL", "C")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("sort");
    std::io::Write::write_all(&mut sort.stdin.take().unwrap(), input.as_bytes()).unwrap();
    let sorted = sort.wait_with_output().expect("sort -n");
    let expected: Vec<String> = tokens.iter().map(ToString::to_string).collect();
    let mut expected_sorted = tokens.clone();
    expected_sorted.sort();
    let expected_sorted: Vec<String> = expected_sorted.iter().map(ToString::to_string).collect();
    let got: Vec<String> = String::from_utf8(sorted.stdout).unwrap().lines().map(str::to_string).collect();
    assert_eq!(got, expected_sorted, "sort -n orders the texts as the tokens (all: {expected:?})");
}
