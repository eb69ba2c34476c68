//! `zk-curator lock PATH -- COMMAND`: flock(1) for a cluster.
//!
//! Acquires the lock (any kind), runs COMMAND in a process group of its own with the lock's path,
//! node and fencing token in its environment, and releases the lock when COMMAND exits. If the
//! lock is lost while COMMAND runs, the whole group gets SIGTERM at once and SIGKILL after
//! `--kill-after`, or earlier: before the server can expire the session (see the `supervise`
//! module, shared with `elect`); we exit only once the whole group is gone. SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to us are
//! passed on to the group; while we still wait for the lock, or release it, they end that (our
//! node is deleted, or goes with the session).

use std::ffi::OsString;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use zk_curator::locks::Hold;
use zk_curator::CuratorClient;

use crate::acquire::{acquire_interruptibly, not_acquired, parse_conflict_code, parse_kind, release, Kind};
use crate::common::{exit, parse_lock_path, parse_seconds, Signals, Wait, EXIT_LOCK_LOST};
use crate::connection::{close, start, Resolved};
use crate::supervise::{supervise, Ended, Guard, Supervision};

#[derive(Args, Debug)]
#[command(after_help = "\
Exit status: COMMAND's own status (128+N if a signal N ended it); the conflict code (default 1) \
when the lock was not acquired in time, COMMAND not run; 2 for usage errors; 69 when ZooKeeper \
could not be reached or failed; 75 when the lock was lost while COMMAND ran (COMMAND was sent \
SIGTERM, then SIGKILL before the server could expire the session); 126/127 when COMMAND could \
not be executed / was not found; 128+N when signal N interrupted the wait for the lock or its \
release.

COMMAND runs in a process group of its own (so that all of its processes get the signals) with \
ZK_LOCK_PATH, ZK_LOCK_NODE and ZK_LOCK_TOKEN (the fencing token: larger for every later holder) \
in its environment.")]
pub(crate) struct LockArgs {
    /// The lock path (relative to --namespace).
    #[arg(value_parser = parse_lock_path)]
    path: String,
    /// mutex, read, write (halves of a read-write lock), semaphore:N (one of N leases),
    /// semmutex (a semaphore mutex) — all wire-compatible with Curator's recipes — or nonfair
    /// (zk-curator's non-fair mutex: one raced node, no order).
    #[arg(long, default_value = "mutex", value_parser = parse_kind)]
    kind: Kind,
    /// Give up if the lock is not acquired within SECS (fractions allowed; 0 = one attempt).
    /// Default: wait as long as it takes.
    #[arg(long, value_name = "SECS", value_parser = parse_seconds)]
    timeout: Option<Duration>,
    /// One attempt: give up at once if the lock is taken (same as --timeout 0).
    #[arg(long, short = 'n', conflicts_with = "timeout")]
    nonblock: bool,
    /// Exit status when the lock was not acquired in time (1-255, not 2, 69, 75, 126 or 127).
    #[arg(long, short = 'E', value_name = "N", default_value_t = 1, value_parser = parse_conflict_code)]
    conflict_exit_code: u8,
    /// After the lock is lost and COMMAND got SIGTERM, SIGKILL its group after SECS at the latest.
    /// SIGKILL comes earlier when the session could expire sooner: 0.1 of the session timeout
    /// after SIGTERM (less a little for short sessions) when the connection was lost.
    #[arg(long, value_name = "SECS", default_value = "5", value_parser = parse_seconds)]
    kill_after: Duration,
    /// The command and its arguments, after `--`.
    #[arg(required = true, last = true, num_args = 1.., value_name = "COMMAND")]
    command: Vec<OsString>,
}

pub(crate) async fn run(connection: &Resolved, args: LockArgs) -> ExitCode {
    let timeout = if args.nonblock { Some(Duration::ZERO) } else { args.timeout };
    let (client, wait, mut signals) = match start(connection, timeout).await {
        Ok(started) => started,
        Err(code) => return code,
    };
    let code = run_connected(&client, &args, wait, &mut signals).await;
    close(&client, &mut signals, code).await
}

async fn run_connected(client: &CuratorClient, args: &LockArgs, wait: Wait, signals: &mut Signals) -> ExitCode {
    let path = args.path.as_str();
    let held = match acquire_interruptibly(client, path, args.kind, wait, signals).await {
        Ok(Some(held)) => held,
        Ok(None) => return not_acquired(client, path, args.timeout, args.conflict_exit_code),
        Err(code) => return code,
    };
    let hold = held.hold().clone();
    let code = run_command(client, args, &hold, signals).await;
    match release(held, path, signals).await {
        Ok(()) => code,
        Err(interrupted) => interrupted,
    }
}

async fn run_command(client: &CuratorClient, args: &LockArgs, hold: &Arc<Hold>, signals: &mut Signals) -> ExitCode {
    let run = Supervision {
        command: &args.command,
        env: vec![
            ("ZK_LOCK_PATH", args.path.clone()),
            ("ZK_LOCK_NODE", hold.path().to_string()),
            ("ZK_LOCK_TOKEN", hold.fencing_token().to_string()),
        ],
        kill_after: args.kill_after,
        what: format!("lock {}", args.path),
        node: "lock node",
        report_suspension: false,
        stop_group_on_exit: false,
    };
    match supervise(client, &Guard::of_hold(hold), &run, signals).await.ended {
        Ended::Exited(code) | Ended::NotRun(code) => exit(code),
        Ended::Lost => exit(EXIT_LOCK_LOST),
    }
}
