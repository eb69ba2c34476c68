//! Review of the `zk-curator` CLI: edge cases found wanting (each test failed before its fix).
#![cfg(feature = "cli")]

mod support;

use std::process::{Output, Stdio};
use std::time::Duration;

use tokio::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_zk-curator");
const HANG: Duration = Duration::from_secs(60);

fn zk_curator(connect: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.arg("--connect").arg(connect).args(args);
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
    cmd
}

async fn run(connect: &str, args: &[&str]) -> Output {
    tokio::time::timeout(HANG, zk_curator(connect, args).output()).await.expect("zk-curator hung").expect("run")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A child that is not a lock node but sorts first (Curator's `fixForSorting` keeps a name
/// without the lock name whole; `-` sorts before the digits of a sequence) blocks every contender
/// of the recipe, as in Curator. `participants` must not call the first lock node the holder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn participants_agrees_with_the_recipe_about_foreign_children() {
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    for (kind, marker) in [("mutex", "-lock-"), ("write", "__WRIT__")] {
        let path = support::unique_path(&format!("review-foreign-{kind}"));
        let persistent = zk_curator::zookeeper_client::CreateMode::Persistent
            .with_acls(zk_curator::zookeeper_client::Acls::anyone_all());
        obs.mkdir(&path, &persistent).await.expect("the lock path");
        obs.create(&format!("{path}/-blocker"), b"", &persistent).await.expect("a foreign child");

        // The recipe itself: blocked.
        let blocked = run(&connect, &["hold", &path, "--kind", kind, "--timeout", "1"]).await;
        assert_eq!(blocked.status.code(), Some(1), "{kind}: {}{}", text(&blocked.stdout), text(&blocked.stderr));

        let waiter = zk_curator(&connect, &["hold", &path, "--kind", kind, "--timeout", "50"]).spawn().unwrap();
        support::eventually_queued(&obs, &path, 2, "the waiter queued behind the foreign child").await;
        let listed = run(&connect, &["participants", &path]).await;
        assert_eq!(listed.status.code(), Some(0), "{}", text(&listed.stderr));
        let lines = text(&listed.stdout);
        assert!(lines.lines().any(|l| l.contains(marker)), "{kind}: the waiter is listed: {lines}");
        assert!(
            !lines.lines().any(|l| l.starts_with("HOLDER")),
            "{kind}: participants names a holder while the recipe holds nothing: {lines}"
        );
        drop(waiter);
    }
}

/// Bad input is a usage error (status 2) naming the value, found before connecting — not 69
/// ("ZooKeeper could not be reached"): a lock at the root, a zero session timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_root_lock_path_or_a_zero_session_timeout_is_a_usage_error() {
    let server = support::server().await;
    let connect = server.connect_string();
    let path = support::unique_path("review-usage");
    for (args, names) in [
        (vec!["lock", "/", "--", "true"], "\"/\""),
        (vec!["--namespace", "review-ns", "lock", "/", "--", "true"], "\"/\""),
        (vec!["--namespace", "review-ns", "participants", "/"], "\"/\""),
        (vec!["hold", "/", "--seconds", "0"], "\"/\""),
        (vec!["--session-timeout", "0", "lock", &path, "--", "true"], "\"0\""),
        (vec!["--session-timeout-ms", "0", "lock", &path, "--", "true"], "\"0\""),
    ] {
        let out = run(&connect, &args).await;
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out.stderr));
        assert!(text(&out.stderr).contains(names), "{args:?} does not name the value: {}", text(&out.stderr));
    }
}
