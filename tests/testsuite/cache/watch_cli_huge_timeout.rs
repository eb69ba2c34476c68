//! `zk-curator watch --timeout SECS` with a value past what a clock instant can hold (1e19 s parses
//! as a `Duration`): it means "no limit", never an overflow panic (status 101).

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use super::put;
use crate::support;

const BIN: &str = env!("CARGO_BIN_EXE_zk-curator");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_with_a_timeout_past_any_instant_loads_instead_of_panicking() {
    let (server, clients) = support::server_and_clients(1).await;
    let root = support::unique_path("cache-cli-timeout");
    put(&clients[0], &root, b"x").await;
    let mut child = Command::new(BIN)
        .args(["--connect", &server.connect_string(), "watch", &root, "--timeout", "1e19"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn zk-curator watch");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut seen = Vec::new();
    let initialized = tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(line)) = lines.next_line().await {
            let done = line.starts_with("INITIALIZED");
            seen.push(line);
            if done {
                return true;
            }
        }
        false
    })
    .await;
    if initialized != Ok(true) {
        let _ = child.start_kill();
        let out = child.wait_with_output().await.expect("wait");
        panic!(
            "no INITIALIZED line (status {:?}); stdout {seen:?}; stderr {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // SAFETY: kill(2) on a child we own.
    unsafe { libc::kill(child.id().expect("running") as i32, libc::SIGTERM) };
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait()).await.expect("exits").expect("status");
    assert_eq!(status.code(), Some(0));
}
