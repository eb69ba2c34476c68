//! Shared helpers for the integration tests: a real ZooKeeper per test binary, clients, node checks.
#![allow(dead_code)]

use std::time::Duration;

use zk_curator::testing::TestingServer;
use zk_curator::{CuratorClient, RetryNTimes};

/// Starts a real ZooKeeper (or uses `ZK_CONNECT`), failing the test with the harness's message.
pub async fn server() -> TestingServer {
    match TestingServer::start().await {
        Ok(server) => server,
        Err(e) => panic!("cannot start ZooKeeper for tests: {e}"),
    }
}

/// A client with short timeouts suited to tests.
pub async fn client(connect: &str) -> CuratorClient {
    client_with(connect, Duration::from_secs(10)).await
}

pub async fn client_with(connect: &str, session_timeout: Duration) -> CuratorClient {
    CuratorClient::builder(connect)
        .session_timeout(session_timeout)
        .connection_timeout(Duration::from_secs(5))
        .retry_policy(RetryNTimes::new(10, Duration::from_millis(100)))
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

/// The children of `path` seen through a plain `zookeeper-client` session (no namespace);
/// empty when the path does not exist.
pub async fn children(connect: &str, path: &str) -> Vec<String> {
    let zk = zookeeper_client::Client::connect(connect).await.expect("observer connect");
    match zk.list_children(path).await {
        Ok(mut c) => {
            c.sort();
            c
        }
        Err(zookeeper_client::Error::NoNode) => Vec::new(),
        Err(e) => panic!("list {path}: {e}"),
    }
}

/// Waits until `path` has no children (background deletes may still be running), up to `within`.
pub async fn eventually_no_children(connect: &str, path: &str, within: Duration) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let c = children(connect, path).await;
        if c.is_empty() || tokio::time::Instant::now() >= deadline {
            return c;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}
