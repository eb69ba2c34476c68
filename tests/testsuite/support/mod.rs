//! Shared helpers for the integration tests: real ZooKeeper servers (shared or owned), clients,
//! node checks, polling and task joins.

pub mod curator_hold;
pub mod curator_peer;
pub mod exclusion;
pub mod latency;

use std::future::Future;
use std::time::{Duration, Instant};

use zk_curator::testing::{TestingServer, TestingServerBuilder};
use zk_curator::{CuratorClient, RetryNTimes};

/// How often the polling helpers look again.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

// ---------------------------------------------------------------------------------------------
// servers and clients
// ---------------------------------------------------------------------------------------------

/// The run's shared ZooKeeper (`ZK_CONNECT`, which `.ci/test` sets), in a chroot of this test's
/// own; or a real one of its own when none is shared. Fails the test with the harness's message
/// (a shared server that died is named as such).
pub async fn server() -> TestingServer {
    server_with(TestingServer::builder()).await
}

/// A server process this test owns even when `ZK_CONNECT` is set: for tests that stop, restart or
/// pause it.
pub async fn owned_server() -> TestingServer {
    server_with(TestingServer::builder().owned()).await
}

/// `connect` split into its hosts and its chroot (`""` when none): a proxy of a test's own forwards
/// to the hosts and hands its clients the chroot (a shared server gives each test one).
pub fn split_chroot(connect: &str) -> (String, String) {
    match connect.find('/') {
        Some(i) => (connect[..i].to_owned(), connect[i..].to_owned()),
        None => (connect.to_owned(), String::new()),
    }
}

/// [`server`] with a customised builder (tick time, port).
pub async fn server_with(builder: TestingServerBuilder) -> TestingServer {
    builder.start().await.unwrap_or_else(|e| panic!("cannot start ZooKeeper for tests: {e}"))
}

/// The server of this test binary (with tracing on) and `n` clients of it.
pub async fn server_and_clients(n: usize) -> (TestingServer, Vec<CuratorClient>) {
    init_tracing();
    let server = server().await;
    let connect = server.connect_string();
    let mut clients = Vec::with_capacity(n);
    for _ in 0..n {
        clients.push(client(&connect).await);
    }
    (server, clients)
}

/// `mutex.lock()`, panicking with `what` on an error, or when not granted within `within` (a hang
/// guard, never a performance bound).
pub async fn lock_within(
    mutex: &zk_curator::locks::InterProcessMutex,
    what: &str,
    within: Duration,
) -> zk_curator::locks::MutexGuard {
    match tokio::time::timeout(within, mutex.lock()).await {
        Ok(Ok(guard)) => guard,
        Ok(Err(e)) => panic!("{what}: lock() failed: {e}"),
        Err(_) => panic!("{what}: lock() not granted within {within:?}"),
    }
}

/// A client with short timeouts suited to tests.
pub async fn client(connect: &str) -> CuratorClient {
    client_with(connect, Duration::from_secs(10)).await
}

/// [`client`] with the given session timeout.
pub async fn client_with(connect: &str, session_timeout: Duration) -> CuratorClient {
    client_with_timeouts(connect, session_timeout, Duration::from_secs(5)).await
}

/// A client whose suspended session is given up (LOST) at 30% of its 8 s timeout, so a link
/// healed right after LOST reaches the server seconds before the session could expire: for tests
/// of what a given-up session's old handle must not do.
pub async fn client_given_up_early(connect: &str) -> CuratorClient {
    CuratorClient::builder(connect)
        .session_timeout(Duration::from_secs(8))
        .connection_timeout(Duration::from_secs(2))
        .simulated_session_expiration_percent(30)
        .retry_policy(zk_curator::RetryNTimes::new(10, Duration::from_millis(100)))
        .connect()
        .await
        .expect("connect")
}

/// [`client`] with the given session and connection timeouts (retry: 10 times, 100 ms apart).
pub async fn client_with_timeouts(
    connect: &str,
    session_timeout: Duration,
    connection_timeout: Duration,
) -> CuratorClient {
    CuratorClient::builder(connect)
        .session_timeout(session_timeout)
        .connection_timeout(connection_timeout)
        .retry_policy(RetryNTimes::new(10, Duration::from_millis(100)))
        .connect()
        .await
        .expect("connect")
}

/// A client in `namespace` (session 10 s, connection 5 s, the default retry policy).
pub async fn namespaced_client(connect: &str, namespace: &str) -> CuratorClient {
    CuratorClient::builder(connect)
        .namespace(namespace)
        .session_timeout(Duration::from_secs(10))
        .connection_timeout(Duration::from_secs(5))
        .connect()
        .await
        .expect("connect")
}

/// A unique path per test, so tests sharing a server (ZK_CONNECT) do not collide.
pub fn unique_path(name: &str) -> String {
    format!("/zkc-test/{name}-{}", uuid_like())
}

fn uuid_like() -> String {
    use std::time::{SystemTime, UNIX_EPOCH};
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    format!("{:x}{:x}", nanos, std::process::id())
}

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

// ---------------------------------------------------------------------------------------------
// looking at the tree
// ---------------------------------------------------------------------------------------------

/// A plain `zookeeper-client` session used only to look at the tree (no namespace, no recipes,
/// no proxy).
pub async fn observer(connect: &str) -> zookeeper_client::Client {
    zookeeper_client::Client::connect(connect).await.expect("observer connect")
}

/// The children of `path` (sorted by name), empty when `path` does not exist.
pub async fn sorted_children(zk: &zookeeper_client::Client, path: &str) -> Vec<String> {
    match zk.list_children(path).await {
        Ok(mut c) => {
            c.sort();
            c
        }
        Err(zookeeper_client::Error::NoNode) => Vec::new(),
        Err(e) => panic!("list {path}: {e}"),
    }
}

/// [`sorted_children`] through a new [`observer`] session.
pub async fn children(connect: &str, path: &str) -> Vec<String> {
    sorted_children(&observer(connect).await, path).await
}

/// The stat of `path`, None when it does not exist; any other error fails the test.
pub async fn stat(zk: &zookeeper_client::Client, path: &str) -> Option<zookeeper_client::Stat> {
    zk.check_stat(path).await.unwrap_or_else(|e| panic!("stat {path}: {e}"))
}

/// Whether `path` exists; an error fails the test.
pub async fn exists(zk: &zookeeper_client::Client, path: &str) -> bool {
    stat(zk, path).await.is_some()
}

/// The last segment of a node path.
pub fn node_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Waits until the children of `path` are exactly `expected` (sorted), up to `within`; returns
/// what it saw last.
pub async fn children_become(
    zk: &zookeeper_client::Client,
    path: &str,
    expected: &[String],
    within: Duration,
) -> Vec<String> {
    let deadline = Instant::now() + within;
    loop {
        let now = sorted_children(zk, path).await;
        if now == expected || Instant::now() >= deadline {
            return now;
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// Waits until `path` has no children (background deletes may still be running), up to `within`;
/// returns what it saw last.
pub async fn eventually_no_children(connect: &str, path: &str, within: Duration) -> Vec<String> {
    children_become(&observer(connect).await, path, &[], within).await
}

// ---------------------------------------------------------------------------------------------
// waiting
// ---------------------------------------------------------------------------------------------

/// A condition's one check, boxed (see [`poll_until`]).
type Check<'a> = std::pin::Pin<Box<dyn Future<Output = bool> + Send + 'a>>;

/// Polls `cond` until it is true (true) or `within` has passed (false).
///
/// The loop itself is compiled once ([`poll_until_boxed`]): hundreds of call sites each made a
/// copy of it for the compiler to generate, as unboxed futures.
pub async fn poll_until<'a, F, Fut>(within: Duration, mut cond: F) -> bool
where
    F: FnMut() -> Fut + Send + 'a,
    Fut: Future<Output = bool> + Send + 'a,
{
    poll_until_boxed(within, &mut move || Box::pin(cond()) as Check<'a>).await
}

async fn poll_until_boxed<'a>(within: Duration, cond: &mut (dyn FnMut() -> Check<'a> + Send + 'a)) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if cond().await {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// Polls `cond` until it is true; panics naming `what` after `within`. Returns how long it took.
pub async fn eventually<'a, F, Fut>(within: Duration, what: &str, mut cond: F) -> Duration
where
    F: FnMut() -> Fut + Send + 'a,
    Fut: Future<Output = bool> + Send + 'a,
{
    let start = Instant::now();
    let met = poll_until_boxed(within, &mut move || Box::pin(cond()) as Check<'a>).await;
    assert!(met, "not within {within:?}: {what}");
    start.elapsed()
}

/// Waits up to 5 s until `path` has `count` children (a holder and its queued waiters); panics
/// naming `what`.
pub async fn eventually_queued(zk: &zookeeper_client::Client, path: &str, count: usize, what: &str) {
    eventually(Duration::from_secs(5), what, || async { sorted_children(zk, path).await.len() == count }).await;
}

/// `tokio::spawn` with the task's future boxed. The suite spawns hundreds of different futures;
/// each one spawned unboxed is a copy of tokio's task machinery for the compiler to generate (a
/// fifth of the suite's code), where a boxed one shares the copy of its output type.
pub fn spawn<T: Send + 'static>(future: impl Future<Output = T> + Send + 'static) -> tokio::task::JoinHandle<T> {
    tokio::spawn(Box::pin(future) as std::pin::Pin<Box<dyn Future<Output = T> + Send>>)
}

/// Awaits a spawned task with a time limit, propagating its panic.
pub async fn join<T>(what: &str, within: Duration, handle: tokio::task::JoinHandle<T>) -> T {
    match tokio::time::timeout(within, handle).await {
        Ok(Ok(v)) => v,
        Ok(Err(e)) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Ok(Err(e)) => panic!("{what}: {e}"),
        Err(_) => panic!("{what}: not finished within {within:?}"),
    }
}

/// Asserts that `result` is `Ok` or an error of one of `kinds` (a call whose failure is allowed in
/// a fault scenario), in one assertion that always runs.
#[track_caller]
pub fn assert_ok_or_kind<T: std::fmt::Debug>(
    result: &zk_curator::Result<T>,
    kinds: &[zk_curator::ErrorKind],
    what: &str,
) {
    assert!(
        result.as_ref().err().is_none_or(|e| kinds.contains(&e.kind())),
        "{what}: expected Ok or one of {kinds:?}, got {result:?}"
    );
}

/// A random seed, or the one in environment variable `var` (printed, so a failure can be replayed).
pub fn seed(var: &str) -> u64 {
    let seed = std::env::var(var).ok().and_then(|v| v.parse().ok()).unwrap_or_else(rand::random);
    println!("{var}={seed}");
    seed
}

/// Waits until `client` is connected on another session than `old` (the server expired `old`,
/// or the client gave it up). A hang bound only: on a loaded machine (the plain `cargo test`
/// run starts many servers at once) a replacement has taken over 20 s.
pub async fn session_replaced(client: &CuratorClient, old: i64) {
    eventually(Duration::from_secs(60), "the session is replaced", || async {
        client.is_connected() && client.session_id() != old
    })
    .await;
}

/// Whether a connection-state stream may yield `next` right after `prev`: the rule of
/// docs/failure-semantics.md ("Which sequences a subscriber sees"). Never the same state twice
/// in a row; CONNECTED only for the first read-write connection (at most once; the caller checks
/// that); SUSPENDED only from a connected state; READ_ONLY only ever followed by LOST; LOST
/// always followed by the new session's state.
pub fn may_follow(prev: zk_curator::ConnectionState, next: zk_curator::ConnectionState) -> bool {
    use zk_curator::ConnectionState::*;
    match prev {
        Latent => matches!(next, Connected | ReadOnly),
        Connected | Reconnected => matches!(next, Suspended | Lost | ReadOnly),
        Suspended => matches!(next, Reconnected | Lost | ReadOnly),
        ReadOnly => next == Lost,
        Lost => matches!(next, Reconnected | Connected | ReadOnly),
        _ => false,
    }
}

/// Asserts that `states` (a stream's items, starting with its first: the state when subscribed)
/// is a sequence the documented rule allows (see [`may_follow`]).
#[track_caller]
pub fn assert_documented_states(states: &[zk_curator::ConnectionState]) {
    for pair in states.windows(2) {
        assert!(may_follow(pair[0], pair[1]), "{} after {} breaks the documented rule: {states:?}", pair[1], pair[0]);
    }
    let connected = states.iter().filter(|s| **s == zk_curator::ConnectionState::Connected).count();
    assert!(connected <= 1, "CONNECTED at most once: {states:?}");
}

/// Everything `stream` has queued now, in order.
pub fn queued_states(stream: &mut zk_curator::framework::ConnectionStateStream) -> Vec<zk_curator::ConnectionState> {
    std::iter::from_fn(|| stream.try_next()).collect()
}

/// Asserts `result` is `Error::LockLost` naming `node`.
pub fn assert_lock_lost<T: std::fmt::Debug>(result: zk_curator::Result<T>, node: &str, what: &str) {
    match result {
        Err(zk_curator::Error::LockLost { node: named, .. }) => {
            assert_eq!(named, node, "{what}: the error names the node")
        }
        other => panic!("{what}: expected LockLost naming {node}, got {other:?}"),
    }
}

/// Collects a leadership stream in the background: every state it yields, until it ends.
pub fn record_leadership(
    mut changes: zk_curator::leader::LeadershipStream,
) -> tokio::task::JoinHandle<Vec<zk_curator::leader::LeadershipState>> {
    crate::support::spawn(async move {
        let mut seen = Vec::new();
        while let Some(state) = changes.next().await {
            seen.push(state);
        }
        seen
    })
}

// ---------------------------------------------------------------------------------------------
// connection cuts longer than the connection timeout
// ---------------------------------------------------------------------------------------------

/// A cut longer than two connection timeouts of [`riding_client`], far shorter than its session.
pub const CUT: Duration = Duration::from_millis(2500);

/// A client whose retry policy outlasts [`CUT`] many times over (1000 retries, 50 ms apart), with
/// a 1 s connection timeout and a 10 s session: a call that waits for a connection outside the
/// policy gives up within the cut, one under the policy rides it out on the same session.
pub async fn riding_client(connect: &str) -> CuratorClient {
    CuratorClient::builder(connect)
        .session_timeout(Duration::from_secs(10))
        .connection_timeout(Duration::from_secs(1))
        .retry_policy(RetryNTimes::new(1000, Duration::from_millis(50)))
        .connect()
        .await
        .expect("connect")
}

/// Cuts `proxy`'s link and waits until `client` knows (SUSPENDED: a request made before is queued
/// on the connection and rides the cut out whatever the call does).
pub async fn cut_off(proxy: &zk_curator::testing::FaultProxy, client: &CuratorClient) {
    proxy.set_mode(zk_curator::testing::ProxyMode::Cut);
    eventually(Duration::from_secs(60), "the client notices the cut", || async {
        client.connection_state() == zk_curator::ConnectionState::Suspended
    })
    .await;
}

/// Runs `call` during a [`CUT`] of `client`'s link through `proxy` (started once the client knows
/// it is cut off), heals the link, and returns the call's result; panics if the call ended before
/// the link healed (the test would prove nothing) or hangs.
pub async fn during_a_cut<T: Send + 'static>(
    proxy: &zk_curator::testing::FaultProxy,
    client: &CuratorClient,
    call: impl Future<Output = T> + Send + 'static,
) -> T {
    cut_off(proxy, client).await;
    let call = crate::support::spawn(call);
    tokio::time::sleep(CUT).await;
    assert!(!call.is_finished(), "the call ended during the cut");
    proxy.set_mode(zk_curator::testing::ProxyMode::Pass);
    join("the call made during the cut", Duration::from_secs(60), call).await
}

/// Every `.rs` file under `dir`: the crate's sources, for the tests that check them against the
/// docs (time limits, feeds).
pub fn rust_sources(dir: &std::path::Path, into: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_sources(&path, into);
        } else if path.extension().is_some_and(|e| e == "rs") {
            into.push(path);
        }
    }
}
