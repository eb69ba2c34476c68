//! The `zk-curator` command line tool against a real ZooKeeper.
#![cfg(feature = "cli")]

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_zk-curator");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hold_participants_and_timeout() {
    let server = support::server().await;
    let connect = server.connect_string();
    let path = support::unique_path("cli");

    let mut holder = Command::new(BIN)
        .args(["--connect", &connect, "hold", &path, "--seconds", "20"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn holder");
    let mut lines = BufReader::new(holder.stdout.take().unwrap()).lines();
    let acquired = lines.next().unwrap().unwrap();
    let node = acquired.strip_prefix("ACQUIRED ").expect(&acquired).to_string();
    assert!(node.starts_with(&format!("{path}/_c_")) && node.contains("-lock-"), "{node}");
    let token = lines.next().unwrap().unwrap();
    assert!(token.strip_prefix("TOKEN ").and_then(|t| t.parse::<i64>().ok()).is_some(), "{token}");

    let listed = Command::new(BIN).args(["--connect", &connect, "participants", &path]).output().unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(listed.starts_with(&format!("HOLDER {node}")), "{listed}");

    let second = Command::new(BIN).args(["--connect", &connect, "hold", &path, "--timeout", "1"]).output().unwrap();
    assert_eq!(second.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&second.stdout).trim(), "NOT_ACQUIRED");

    let bad = Command::new(BIN).args(["--connect", &connect, "participants", "no-slash"]).output().unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("\"no-slash\""), "a bad path is named in the error");

    holder.kill().unwrap();
    let _ = holder.wait();
}
