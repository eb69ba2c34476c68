//! `zk-curator elect` and its command's process group (a background process, a group ignoring
//! SIGTERM) and absurd input: real processes against a real ZooKeeper.

use crate::support;

use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

use tokio::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_zk-curator");
/// Hang guard of one wait.
const HANG: Duration = Duration::from_secs(30);

fn elect_command(connect: &str, path: &str, options: &[&str], command: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(["--connect", connect, "elect", path]).args(options).arg("--").args(command);
    cmd.stdin(Stdio::null()).kill_on_drop(true);
    cmd
}

async fn run(connect: &str, path: &str, options: &[&str], command: &[&str]) -> Output {
    let out = elect_command(connect, path, options, command).stdout(Stdio::piped()).stderr(Stdio::null()).output();
    tokio::time::timeout(HANG, out).await.expect("zk-curator elect hung").expect("run zk-curator")
}

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| !stat.contains(") Z "))
}

/// The pids a command wrote to `file`, one a line.
fn pids(file: &Path) -> Vec<i32> {
    std::fs::read_to_string(file).unwrap_or_default().lines().filter_map(|l| l.trim().parse().ok()).collect()
}

/// SIGKILLs the processes listed in a pid file when dropped (a failing test leaves none behind).
struct KillOnDrop(std::path::PathBuf);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for pid in pids(&self.0) {
            if pid > 1 {
                // SAFETY: kill(2) on a process this test started.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
    }
}

/// COMMAND runs only while we lead: a process COMMAND started in the background (a daemon that
/// forks and whose parent exits 0) must not run on after `elect` released the leadership — else
/// the next leader's instance runs next to it (and, without `--once`, every term adds one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_process_of_the_command_does_not_outlive_the_term() {
    let server = support::server().await;
    let connect = server.connect_string();
    let path = support::unique_path("elect-review-fork");
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pids");
    let _cleanup = KillOnDrop(pidfile.clone());
    let script = format!("sleep 60 >/dev/null 2>&1 & echo $! >> {}; exit 0", pidfile.display());
    let out = run(&connect, &path, &["--once", "--kill-after", "1"], &["sh", "-c", &script]).await;
    assert_eq!(out.status.code(), Some(0));
    let left = pids(&pidfile);
    assert_eq!(left.len(), 1, "the command ran once");
    assert!(!alive(left[0]), "the command's background process {} runs on after the term ended", left[0]);
    assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(5)).await.is_empty());
    // A leftover that ignores SIGTERM gets SIGKILL (after --kill-after); the status stays
    // COMMAND's own.
    let pidfile = dir.path().join("pids2");
    let _cleanup = KillOnDrop(pidfile.clone());
    let script = format!("trap '' TERM; sleep 60 >/dev/null 2>&1 & echo $! >> {}; exit 3", pidfile.display());
    let out = run(&connect, &path, &["--once", "--kill-after", "0.5"], &["sh", "-c", &script]).await;
    assert_eq!(out.status.code(), Some(3));
    let left = pids(&pidfile);
    assert_eq!(left.len(), 1, "the command ran once");
    assert!(!alive(left[0]), "the background process {} ignoring SIGTERM runs on after the term ended", left[0]);
    assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(5)).await.is_empty());
}

/// A command whose whole group ignores SIGTERM (the shell and a child it forked) is SIGKILLed,
/// group and all, before `elect` queues again after leadership is lost; the next term runs in a
/// larger term.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_ignoring_sigterm_is_killed_whole_before_the_next_term() {
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let path = support::unique_path("elect-review-ignore");
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pids");
    let terms = dir.path().join("terms");
    let _cleanup = KillOnDrop(pidfile.clone());
    // The shell and its background child both ignore SIGTERM (SIG_IGN is inherited).
    let script = format!(
        "trap '' TERM; sleep 60 & echo $! >> {p}; echo $$ >> {p}; echo $ZK_LEADER_TERM >> {t}; wait; wait",
        p = pidfile.display(),
        t = terms.display()
    );
    let says = dir.path().join("stderr");
    let mut elector = elect_command(&connect, &path, &["--kill-after", "0.5"], &["sh", "-c", &script])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&says).unwrap())
        .spawn()
        .unwrap();
    support::eventually(HANG, "the first term runs", || async { pids(&pidfile).len() >= 2 }).await;
    let first = pids(&pidfile);
    let node = support::sorted_children(&obs, &path).await.pop().expect("the latch node");
    obs.delete(&format!("{path}/{node}"), None).await.expect("delete the latch node");
    // The term is written after the pids: wait for it too.
    let term_lines = || std::fs::read_to_string(&terms).unwrap_or_default().lines().count();
    support::eventually(HANG, "a second term", || async { pids(&pidfile).len() >= 4 && term_lines() >= 2 }).await;
    for pid in &first {
        assert!(!alive(*pid), "process {pid} of the first term runs next to the second");
    }
    let terms: Vec<i64> = std::fs::read_to_string(&terms).unwrap().lines().map(|l| l.parse().unwrap()).collect();
    assert!(terms[1] > terms[0], "{terms:?}");
    // SAFETY: kill(2) on our child.
    unsafe { libc::kill(elector.id().unwrap() as i32, libc::SIGTERM) };
    // The command ignores the SIGTERM passed on: we kill it; elect waits for it.
    for pid in pids(&pidfile) {
        // SAFETY: kill(2) on a process this test started.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    let status = tokio::time::timeout(HANG, elector.wait()).await.expect("elect hung").unwrap();
    let says = std::fs::read_to_string(&says).unwrap_or_default();
    // The command's status (137), or 143 when the command died before `elect` took the
    // SIGTERM in: then it came while not leading.
    let code = status.code();
    assert!(code == Some(128 + libc::SIGKILL) || code == Some(128 + libc::SIGTERM), "status {code:?}: {says}");
    assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(5)).await.is_empty());
}

/// Absurd input: typed usage errors (2) naming the value; huge delays are accepted and a signal
/// during them still ends `elect` at once; an id with a newline and 100 KB long is carried
/// verbatim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absurd_input() {
    let server = support::server().await;
    let connect = server.connect_string();
    let path = support::unique_path("elect-review-absurd");
    for (option, value) in [
        ("--rejoin-delay", "-1"),
        ("--rejoin-delay", "nan"),
        ("--rejoin-delay", "1e400"),
        ("--kill-after", "-0.5"),
        ("--id", ""),
    ] {
        let out = elect_command(&connect, &path, &[option, value], &["true"]).stderr(Stdio::piped()).output();
        let out = tokio::time::timeout(HANG, out).await.unwrap().unwrap();
        let says = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{option} {value:?}: {says}");
        assert!(!says.contains("panicked"), "{says}");
    }
    // A huge --rejoin-delay: the command ran once, we wait; SIGTERM ends the wait, nothing left.
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    let script = format!("echo x >> {}", ran.display());
    let mut elector =
        elect_command(&connect, &path, &["--rejoin-delay", "1e18", "--kill-after", "1e18"], &["sh", "-c", &script])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
    support::eventually(HANG, "the command ran", || async { ran.exists() }).await;
    support::eventually(HANG, "the node is released", || async {
        support::sorted_children(&support::observer(&connect).await, &path).await.is_empty()
    })
    .await;
    // SAFETY: kill(2) on our child.
    unsafe { libc::kill(elector.id().unwrap() as i32, libc::SIGTERM) };
    let status = tokio::time::timeout(HANG, elector.wait()).await.expect("elect hung").unwrap();
    assert_eq!(status.code(), Some(128 + libc::SIGTERM));
    assert_eq!(std::fs::read_to_string(&ran).unwrap(), "x\n", "ran once");
    // An id with a newline, 100 KB long: carried verbatim to the node and the environment.
    let id = format!("a\nb{}", "x".repeat(100_000));
    let out = run(&connect, &path, &["--once", "--id", &id], &["sh", "-c", "printf %s \"$ZK_LEADER_ID\""]).await;
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout == id.as_bytes(), "ZK_LEADER_ID differs ({} bytes)", out.stdout.len());
    assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(5)).await.is_empty());
}
