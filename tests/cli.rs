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

// ---------------------------------------------------------------------------------------------
// `lock PATH -- COMMAND`
// ---------------------------------------------------------------------------------------------

mod lock_command {
    use std::path::{Path, PathBuf};
    use std::process::Output;
    use std::time::{Duration, Instant};

    use tokio::process::{Child, Command};
    use zk_curator::testing::{FaultProxy, ProxyMode};

    use super::{support, BIN};

    const HANG: Duration = Duration::from_secs(60);

    /// A scratch directory for the commands' files, removed on drop.
    fn scratch() -> tempfile::TempDir {
        tempfile::tempdir().expect("a scratch dir")
    }

    fn lock_command(connect: &str, path: &str, options: &[&str], command: &[&str]) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.args(["--connect", connect, "lock", path]).args(options).arg("--").args(command);
        cmd.stdin(std::process::Stdio::null()).kill_on_drop(true);
        cmd
    }

    async fn run(connect: &str, path: &str, options: &[&str], command: &[&str]) -> Output {
        let out = lock_command(connect, path, options, command).output();
        tokio::time::timeout(HANG, out).await.expect("zk-curator lock hung").expect("run zk-curator")
    }

    fn spawn(connect: &str, path: &str, options: &[&str], command: &[&str]) -> Child {
        lock_command(connect, path, options, command)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn zk-curator lock")
    }

    async fn finish(child: Child) -> Output {
        tokio::time::timeout(HANG, child.wait_with_output()).await.expect("zk-curator lock hung").expect("wait")
    }

    fn stdout(out: &Output) -> String {
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn stderr(out: &Output) -> String {
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    fn send_signal(child: &Child, signal: i32) {
        let pid = child.id().expect("still running") as i32;
        // SAFETY: kill(2) on a child we own.
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0, "signal {signal} to {pid}");
    }

    async fn wait_for_file(file: &Path, what: &str) {
        support::eventually(Duration::from_secs(30), what, || async { file.exists() }).await;
    }

    /// The most `start` lines without their `end` at any point of a log of `start X` / `end X` lines.
    fn most_inside(log: &str) -> usize {
        let (mut inside, mut most) = (0usize, 0usize);
        for line in log.lines() {
            if line.starts_with("start") {
                inside += 1;
                most = most.max(inside);
            } else if line.starts_with("end") {
                inside -= 1;
            }
        }
        most
    }

    /// A command that logs `start TOKEN`, works for `ms`, logs `end TOKEN`.
    fn logged_work(log: &Path, ms: u32) -> Vec<String> {
        let log = log.display();
        let script = format!(
            "echo \"start $ZK_LOCK_TOKEN\" >> {log}; sleep {}; echo \"end $ZK_LOCK_TOKEN\" >> {log}",
            f64::from(ms) / 1000.0
        );
        vec!["sh".into(), "-c".into(), script]
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn runs_the_command_with_the_lock_in_its_environment_and_passes_its_status() {
        let server = support::server().await;
        let connect = server.connect_string();
        let path = support::unique_path("cli-lock-env");

        let out =
            run(&connect, &path, &[], &["sh", "-c", "echo \"$ZK_LOCK_PATH $ZK_LOCK_NODE $ZK_LOCK_TOKEN\"; exit 7"])
                .await;
        assert_eq!(out.status.code(), Some(7), "the command's status: {}", stderr(&out));
        let line = stdout(&out);
        let fields: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(fields.len(), 3, "{line}");
        assert_eq!(fields[0], path);
        assert!(fields[1].starts_with(&format!("{path}/_c_")) && fields[1].contains("-lock-"), "{line}");
        let mut last_token: i64 = fields[2].parse().expect("a numeric token");
        assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(5)).await.is_empty());

        // The token increases run after run.
        for _ in 0..3 {
            let out = run(&connect, &path, &[], &["sh", "-c", "echo $ZK_LOCK_TOKEN"]).await;
            assert!(out.status.success());
            let token: i64 = stdout(&out).trim().parse().expect("a numeric token");
            assert!(token > last_token, "token {token} after {last_token}");
            last_token = token;
        }

        // A command ended by a signal, one that does not exist, one that cannot be executed.
        let killed = run(&connect, &path, &[], &["sh", "-c", "kill -KILL $$"]).await;
        assert_eq!(killed.status.code(), Some(128 + 9));
        let missing = run(&connect, &path, &[], &["/nonexistent/zk-curator-test-command"]).await;
        assert_eq!(missing.status.code(), Some(127));
        assert!(stderr(&missing).contains("/nonexistent/zk-curator-test-command"), "{}", stderr(&missing));
        let dir = scratch();
        let plain_file = dir.path().join("not-executable");
        std::fs::write(&plain_file, "echo hi\n").unwrap();
        let not_executable = run(&connect, &path, &[], &[plain_file.to_str().unwrap()]).await;
        assert_eq!(not_executable.status.code(), Some(126), "{}", stderr(&not_executable));
        assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(5)).await.is_empty());
    }

    /// Four concurrent runs of each kind; the log of the commands shows what overlapped.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_runs_exclude_or_share_as_their_kind_says() {
        let server = support::server().await;
        let connect = server.connect_string();
        let dir = scratch();
        for (kind, most_allowed, must_share) in [
            ("mutex", 1, false),
            ("write", 1, false),
            ("read", 4, true),
            ("semaphore:2", 2, true),
            ("semmutex", 1, false),
        ] {
            let path = support::unique_path(&format!("cli-lock-{}", kind.replace(':', "-")));
            let log = dir.path().join(format!("{}.log", kind.replace(':', "-")));
            let work = logged_work(&log, 300);
            let work: Vec<&str> = work.iter().map(String::as_str).collect();
            let runs: Vec<Child> = (0..4).map(|_| spawn(&connect, &path, &["--kind", kind], &work)).collect();
            for run in runs {
                let out = finish(run).await;
                assert!(out.status.success(), "{kind}: {}", stderr(&out));
            }
            let text = std::fs::read_to_string(&log).expect("the log");
            assert_eq!(text.lines().count(), 8, "{kind}: every run worked once:\n{text}");
            let most = most_inside(&text);
            assert!(most <= most_allowed, "{kind}: {most} runs at once (at most {most_allowed}):\n{text}");
            if must_share {
                assert!(most >= 2, "{kind}: the runs never shared the lock:\n{text}");
            } else {
                // Exclusive: each start is followed by its own end, tokens increasing.
                let lines: Vec<&str> = text.lines().collect();
                let mut last = 0i64;
                for pair in lines.chunks(2) {
                    let start: i64 = pair[0].strip_prefix("start ").and_then(|t| t.parse().ok()).expect("start");
                    assert_eq!(pair[1], format!("end {start}"), "{kind}: interleaved:\n{text}");
                    assert!(start > last, "{kind}: tokens not increasing:\n{text}");
                    last = start;
                }
            }
        }
        // A writer is kept out by readers (and a reader by a writer).
        let path = support::unique_path("cli-lock-rw");
        let reader = spawn(&connect, &path, &["--kind", "read"], &["sleep", "1"]);
        support::eventually_queued(&support::observer(&connect).await, &path, 1, "the reader holds").await;
        let marker = dir.path().join("writer-ran");
        let writer =
            run(&connect, &path, &["--kind", "write", "--nonblock"], &["touch", marker.to_str().unwrap()]).await;
        assert_eq!(writer.status.code(), Some(1), "a writer beside a reader: {}", stderr(&writer));
        assert!(!marker.exists(), "the writer's command ran");
        assert!(finish(reader).await.status.success());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn conflict_exit_codes_and_usage_errors() {
        let server = support::server().await;
        let connect = server.connect_string();
        let path = support::unique_path("cli-lock-conflict");
        let dir = scratch();
        let marker = dir.path().join("ran");
        let marker_arg = marker.to_str().unwrap();
        let holder = spawn(&connect, &path, &[], &["sleep", "30"]);
        support::eventually_queued(&support::observer(&connect).await, &path, 1, "the holder holds").await;

        let started = Instant::now();
        let nonblock = run(&connect, &path, &["--nonblock"], &["touch", marker_arg]).await;
        assert_eq!(nonblock.status.code(), Some(1), "{}", stderr(&nonblock));
        assert!(stderr(&nonblock).contains(&path), "the conflict names the path: {}", stderr(&nonblock));
        let timed =
            run(&connect, &path, &["--timeout", "0.4", "--conflict-exit-code", "9"], &["touch", marker_arg]).await;
        assert_eq!(timed.status.code(), Some(9), "{}", stderr(&timed));
        let zero = run(&connect, &path, &["--timeout", "0", "-E", "3"], &["touch", marker_arg]).await;
        assert_eq!(zero.status.code(), Some(3), "{}", stderr(&zero));
        assert!(started.elapsed() < Duration::from_secs(20), "conflicts are reported promptly");
        assert!(!marker.exists(), "a command ran without the lock");
        assert_eq!(support::children(&connect, &path).await.len(), 1, "the conflicting runs left nothing behind");

        // Usage errors: clap's status 2, never the conflict status.
        for (options, command, says) in [
            (vec!["--conflict-exit-code", "2"], vec!["true"], "own exit statuses"),
            (vec!["--conflict-exit-code", "0"], vec!["true"], "success"),
            (vec!["--timeout", "soon"], vec!["true"], "soon"),
            (vec!["--kind", "semaphore:0"], vec!["true"], "semaphore:0"),
            (vec!["--kind", "barrier"], vec!["true"], "barrier"),
        ] {
            let out = run(&connect, &path, &options, &command).await;
            assert_eq!(out.status.code(), Some(2), "{options:?}: {}", stderr(&out));
            assert!(stderr(&out).contains(says), "{options:?}: {}", stderr(&out));
        }
        let no_command =
            tokio::process::Command::new(BIN).args(["--connect", &connect, "lock", &path]).output().await.unwrap();
        assert_eq!(no_command.status.code(), Some(2));
        let bad_path = run(&connect, "no-slash", &[], &["true"]).await;
        assert_eq!(bad_path.status.code(), Some(2));
        assert!(stderr(&bad_path).contains("\"no-slash\""), "{}", stderr(&bad_path));
        let unreachable = run("127.0.0.1:1", &path, &["--timeout", "0.5"], &["touch", marker_arg]).await;
        assert_eq!(unreachable.status.code(), Some(69), "no ZooKeeper is not a conflict: {}", stderr(&unreachable));
        assert!(!marker.exists());
        drop(holder);
    }

    /// SIGINT while waiting cancels the wait and leaves no node; SIGTERM to a running `lock` is
    /// passed on to the command, whose status becomes ours, and the lock is released.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn signals_cancel_the_wait_or_reach_the_command() {
        let server = support::server().await;
        let connect = server.connect_string();
        let obs = support::observer(&connect).await;
        let path = support::unique_path("cli-lock-signals");
        let dir = scratch();
        let got = dir.path().join("got-term");
        let started = dir.path().join("started");
        let script =
            format!("trap 'echo TERM > {}; exit 3' TERM; touch {}; sleep 30 & wait", got.display(), started.display());
        let holder = spawn(&connect, &path, &[], &["sh", "-c", &script]);
        wait_for_file(&started, "the holder's command started").await;

        let marker = dir.path().join("waiter-ran");
        let waiter = spawn(&connect, &path, &[], &["touch", marker.to_str().unwrap()]);
        support::eventually_queued(&obs, &path, 2, "the waiter queued").await;
        send_signal(&waiter, libc::SIGINT);
        let waited = finish(waiter).await;
        assert_eq!(waited.status.code(), Some(128 + libc::SIGINT), "{}", stderr(&waited));
        assert!(!marker.exists(), "the waiter's command ran");
        let left = support::children(&connect, &path).await;
        assert_eq!(left.len(), 1, "Ctrl-C while waiting left a node: {left:?}");

        send_signal(&holder, libc::SIGTERM);
        let held = finish(holder).await;
        assert_eq!(held.status.code(), Some(3), "the command's status after SIGTERM: {}", stderr(&held));
        assert_eq!(std::fs::read_to_string(&got).unwrap().trim(), "TERM", "the command got SIGTERM");
        assert!(support::eventually_no_children(&connect, &path, Duration::from_secs(5)).await.is_empty());
    }

    /// The lock node is deleted under a running command that ignores SIGTERM: it gets SIGTERM,
    /// then SIGKILL after --kill-after, with every process of its group; `lock` exits 75.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_command_that_ignores_sigterm_is_killed_after_the_lock_is_lost() {
        let server = support::server().await;
        let connect = server.connect_string();
        let obs = support::observer(&connect).await;
        let path = support::unique_path("cli-lock-kill-after");
        let dir = scratch();
        let pids = dir.path().join("pids");
        let script = format!("trap '' TERM; sleep 300 & echo $$ $! > {}; while :; do sleep 0.05; done", pids.display());
        let run = spawn(&connect, &path, &["--kill-after", "0.3"], &["sh", "-c", &script]);
        wait_for_file(&pids, "the command started").await;
        let node = support::sorted_children(&obs, &path).await.pop().expect("the lock node");
        obs.delete(&format!("{path}/{node}"), None).await.expect("delete the lock node");
        let out = finish(run).await;
        assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
        let message = stderr(&out);
        assert!(message.contains("lost") && message.contains("deleted") && message.contains(&path), "{message}");
        assert_eq!(message.lines().count(), 1, "one line: {message}");
        let text = std::fs::read_to_string(&pids).unwrap();
        for pid in text.split_whitespace() {
            let gone = support::poll_until(Duration::from_secs(5), || async {
                !PathBuf::from(format!("/proc/{pid}")).exists()
                    || std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z "))
            })
            .await;
            assert!(gone, "process {pid} of the command's group survived");
        }
    }

    /// The session of a running `lock` is expired server-side (its traffic blackholed): the
    /// command is told (SIGTERM) before another process acquires the lock.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_command_is_terminated_before_another_process_acquires() {
        let server = support::server().await;
        let connect = server.connect_string();
        let proxy = FaultProxy::start(&connect).await.unwrap();
        let path = support::unique_path("cli-lock-lost");
        let dir = scratch();
        let (started, terminated, acquired) =
            (dir.path().join("started"), dir.path().join("terminated"), dir.path().join("acquired"));
        let script = format!(
            "trap 'date +%s%N > {}; exit 0' TERM; touch {}; while :; do sleep 0.05; done",
            terminated.display(),
            started.display()
        );
        let first = spawn(&proxy.connect_string(), &path, &["--session-timeout", "2"], &["sh", "-c", &script]);
        wait_for_file(&started, "the first command started").await;
        proxy.set_mode(ProxyMode::Blackhole);
        let record = format!("date +%s%N > {}", acquired.display());
        let second = spawn(&connect, &path, &[], &["sh", "-c", &record]);

        let first = finish(first).await;
        let exited = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
        assert_eq!(first.status.code(), Some(75), "{}", stderr(&first));
        assert!(stderr(&first).contains("session was lost"), "{}", stderr(&first));
        let second = finish(second).await;
        assert!(second.status.success(), "{}", stderr(&second));
        let read = |file: &Path| -> u128 { std::fs::read_to_string(file).unwrap().trim().parse().unwrap() };
        let (told, taken) = (read(&terminated), read(&acquired));
        assert!(
            told < taken,
            "the other process acquired {} ms before the command was told",
            (told - taken) / 1_000_000
        );
        eprintln!(
            "the command was told {} ms before the other process acquired the lock; `lock` exited {} ms after telling it",
            (taken - told) / 1_000_000,
            exited.saturating_sub(told) / 1_000_000
        );
    }
}
