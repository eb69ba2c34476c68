//! `zk-curator watch PATH` against a real ZooKeeper: the initial tree, then one line per change
//! (text and `--json`), `--depth`, a cut connection, clean exits on SIGINT/SIGTERM, typed failures.

use crate::support;

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};
use zk_curator::testing::{FaultProxy, ProxyMode};
use zk_curator::CuratorClient;

const BIN: &str = env!("CARGO_BIN_EXE_zk-curator");
/// Hang guard of one wait.
const HANG: Duration = Duration::from_secs(30);

/// A running `zk-curator watch`, its stdout read line by line.
struct Watch {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Watch {
    fn spawn(connect: &str, args: &[&str]) -> Watch {
        let mut child = Command::new(BIN)
            .args(["--connect", connect, "watch"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn zk-curator watch");
        let lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        Watch { child, lines }
    }

    async fn line(&mut self) -> String {
        let next = tokio::time::timeout(HANG, self.lines.next_line()).await.expect("no line from zk-curator watch");
        next.expect("read stdout").expect("zk-curator watch ended early")
    }

    /// The lines up to and including the first one `last` accepts.
    async fn lines_until(&mut self, last: impl Fn(&str) -> bool) -> Vec<String> {
        let mut lines = Vec::new();
        loop {
            let line = self.line().await;
            let done = last(&line);
            lines.push(line);
            if done {
                return lines;
            }
        }
    }

    /// Sends `signal`; the exit status.
    async fn stop(mut self, signal: i32) -> Option<i32> {
        let pid = self.child.id().expect("still running") as i32;
        // SAFETY: kill(2) on a child we own.
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0, "signal {signal} to {pid}");
        let status = tokio::time::timeout(HANG, self.child.wait()).await.expect("zk-curator watch hung on a signal");
        status.expect("wait").code()
    }
}

async fn tree(client: &CuratorClient, nodes: &[(&str, &str)]) {
    for (path, data) in nodes {
        client.create(path).data(*data).creating_parents_if_needed().await.expect(path);
    }
}

/// The initial tree comes first (a `CREATED` line per node, then `INITIALIZED N nodes`), then each
/// change as one line, in the order made; SIGTERM ends the watch with status 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_prints_the_initial_tree_then_each_change_as_one_line() {
    let server = support::server().await;
    let connect = server.connect_string();
    let client = support::client(&connect).await;
    let base = support::unique_path("watch-text");
    tree(&client, &[(&base, "root"), (&format!("{base}/a"), "1"), (&format!("{base}/b/c"), "two words")]).await;

    let mut watch = Watch::spawn(&connect, &[&base]);
    let mut initial = watch.lines_until(|l| l.starts_with("INITIALIZED")).await;
    assert_eq!(initial.pop().as_deref(), Some("INITIALIZED 4 nodes"));
    initial.sort();
    assert_eq!(
        initial,
        [
            format!("CREATED {base} version=0 data=\"root\""),
            format!("CREATED {base}/a version=0 data=\"1\""),
            format!("CREATED {base}/b version=0 data=\"\""),
            format!("CREATED {base}/b/c version=0 data=\"two words\""),
        ]
    );

    client.set_data(&format!("{base}/a"), "one\nline").await.expect("set a");
    assert_eq!(watch.line().await, format!("CHANGED {base}/a version=1 data=\"one\\nline\""));
    client.create(&format!("{base}/b/d")).data("new").await.expect("create d");
    assert_eq!(watch.line().await, format!("CREATED {base}/b/d version=0 data=\"new\""));
    client.delete(&format!("{base}/b/c")).await.expect("delete c");
    assert_eq!(watch.line().await, format!("DELETED {base}/b/c"));

    assert_eq!(watch.stop(libc::SIGTERM).await, Some(0), "SIGTERM ends a watch cleanly");
}

/// `--json` writes one object per line (the same events); `--depth 1` leaves out what is deeper;
/// SIGINT ends the watch with status 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_json_is_one_object_per_line_and_depth_bounds_the_tree() {
    let server = support::server().await;
    let connect = server.connect_string();
    let client = support::client(&connect).await;
    let base = support::unique_path("watch-json");
    tree(&client, &[(&base, ""), (&format!("{base}/a"), "x"), (&format!("{base}/a/deep"), "hidden")]).await;

    let mut watch = Watch::spawn(&connect, &[&base, "--json", "--depth", "1"]);
    let initial = watch.lines_until(|l| l.contains("\"initialized\"")).await;
    let parsed: Vec<serde_json::Value> =
        initial.iter().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"))).collect();
    let mut created: Vec<&str> =
        parsed.iter().filter(|v| v["event"] == "created").map(|v| v["path"].as_str().expect("a path")).collect();
    created.sort_unstable();
    assert_eq!(created, [base.clone(), format!("{base}/a")], "depth 1: {initial:?}");
    assert_eq!(parsed.last().expect("initialized")["nodes"], 2);

    // A change below the depth is not shown, nor is `a`'s new child (a change of `a`'s children,
    // not a write of `a`); the next line is the write at depth 1.
    client.set_data(&format!("{base}/a/deep"), "still hidden").await.expect("set deep");
    client.create(&format!("{base}/a/deeper")).await.expect("create below a");
    client.set_data(&format!("{base}/a"), "y").await.expect("set a");
    let changed: serde_json::Value = serde_json::from_str(&watch.line().await).expect("JSON");
    assert_eq!(changed["event"], "changed");
    assert_eq!(changed["path"], format!("{base}/a"));
    assert_eq!(changed["data"], "y");
    assert_eq!(changed["data_changed"], true);
    assert_eq!(changed["version"], 1);
    client.set_data(&format!("{base}/a"), "y").await.expect("set a to the same");
    let same: serde_json::Value = serde_json::from_str(&watch.line().await).expect("JSON");
    assert_eq!((&same["path"], &same["data_changed"], &same["version"]), (&changed["path"], &false.into(), &2.into()));

    assert_eq!(watch.stop(libc::SIGINT).await, Some(0), "SIGINT ends a watch cleanly");
}

/// A cut connection is reported (`STATE SUSPENDED` or `RESYNCING`), and what changed meanwhile is
/// printed once the watch is back (before `STATE SYNCED`): the view converges.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_reports_a_cut_connection_and_the_changes_made_during_it() {
    let server = support::server().await;
    let connect = server.connect_string();
    let client = support::client(&connect).await;
    let proxy = FaultProxy::start(&connect).await.expect("a proxy");
    let base = support::unique_path("watch-cut");
    tree(&client, &[(&base, "v0")]).await;

    let mut watch = Watch::spawn(&proxy.connect_string(), &[&base, "--session-timeout", "20"]);
    watch.lines_until(|l| l.starts_with("INITIALIZED")).await;
    proxy.set_mode(ProxyMode::Cut);
    // The watch says it is not sure any more (the state may already have moved on to re-syncing).
    let unsure = watch.line().await;
    assert!(unsure == "STATE SUSPENDED" || unsure == "STATE RESYNCING", "{unsure}");
    client.set_data(&base, "v1").await.expect("set during the cut");
    client.create(&format!("{base}/new")).data("n").await.expect("create during the cut");
    proxy.set_mode(ProxyMode::Pass);
    let after = watch.lines_until(|l| l == "STATE SYNCED").await;
    assert!(after.contains(&format!("CHANGED {base} version=1 data=\"v1\"")), "{after:?}");
    assert!(after.contains(&format!("CREATED {base}/new version=0 data=\"n\"")), "{after:?}");

    assert_eq!(watch.stop(libc::SIGTERM).await, Some(0));
}

/// Bad input is a usage error (status 2) naming the value; a server that cannot be reached is
/// status 69 with a message, within `--timeout`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_refuses_bad_input_and_an_unreachable_server_with_a_message() {
    let run = |args: Vec<&'static str>| async move {
        let out = Command::new(BIN).args(&args).stdin(Stdio::null()).kill_on_drop(true).output();
        tokio::time::timeout(HANG, out).await.expect("zk-curator watch hung").expect("run zk-curator")
    };
    for (args, names) in [
        (vec!["watch", "no-slash"], "\"no-slash\""),
        (vec!["watch", "/a//b"], "\"/a//b\""),
        (vec!["watch", "/a", "--depth", "-1"], "-1"),
        (vec!["watch", "/a", "--max-nodes", "0"], "0"),
    ] {
        let out = run(args.clone()).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(names), "{args:?} does not name the value: {stderr}");
    }
    // Port 1 on loopback: nothing listens there.
    let out = run(vec!["--connect", "127.0.0.1:1", "watch", "/a", "--timeout", "1"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(69), "{stderr}");
    assert!(stderr.starts_with("zk-curator: "), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing was watched: {}", String::from_utf8_lossy(&out.stdout));
}
