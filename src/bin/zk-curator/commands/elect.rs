//! `zk-curator elect PATH -- COMMAND`: run COMMAND only while leader of a Curator-compatible
//! `LeaderLatch` on PATH (a daemon with hot standbys, like `consul lock`, but stopped before the
//! session can expire).
//!
//! Each *term*: join the latch, wait to be elected, run COMMAND (under [`supervise`], as `lock`
//! runs its command: own process group, signals passed on, SIGTERM then SIGKILL when leadership
//! is lost), leave the latch (our node is deleted). Then, unless `--once` or a SIGINT, SIGTERM or
//! SIGQUIT we passed on made the term the last, join again: a command that exited by itself after `--rejoin-delay`, a lost
//! leadership at once. A suspended connection changes nothing (as for `lock`): only a lost
//! leadership stops COMMAND, so losing one server of an ensemble (the client moves to another
//! within the session timeout) does not interrupt it.

use std::ffi::OsString;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use zk_curator::leader::LeaderLatch;
use zk_curator::locks::{Hold, HoldState};
use zk_curator::CuratorClient;

use crate::common::{
    exit, host_and_pid, parse_seconds, signal_exit, Signals, EXIT_LOCK_LOST, EXIT_UNAVAILABLE, RELEASE_WAIT,
};
use crate::connection::{close, start, Resolved};
use crate::supervise::{describe, supervise, Ended, Guard, Supervision};

#[derive(Args, Debug)]
#[command(after_help = "\
COMMAND runs only while this process leads: in a process group of its own, with ZK_LEADER_PATH \
(PATH), ZK_LEADER_ID (our participant id), ZK_LEADER_TERM (the fencing token of this leadership: \
larger for every later term of any participant) and ZK_LEADER_NODE (our latch node) in its \
environment. A suspended connection changes nothing; when leadership is lost (session lost, or \
our latch node deleted) COMMAND's group gets SIGTERM at once and SIGKILL before the server could \
expire the session (as for `lock`), and we queue again. When COMMAND exits by itself, what it left \
running in its group gets SIGTERM (SIGKILL after --kill-after); then we release leadership (another participant takes over) and queue again after --rejoin-delay. Signals \
(SIGINT, SIGTERM, SIGHUP, SIGQUIT) are passed on to COMMAND's group; SIGINT, SIGTERM and SIGQUIT \
also make the term the last one (when COMMAND exits, or leadership is lost, we exit); SIGHUP \
(reload) does not.

Exit status (as `lock`): with --once, or after SIGINT/SIGTERM/SIGQUIT, the status of the term: \
COMMAND's own (128+N if signal N ended it), or 75 when leadership was lost; 2 for usage errors; \
69 when ZooKeeper could not be reached at the start (later failures are retried and reported on \
stderr while we wait); 126/127 when COMMAND could not be executed / \
was not found; 128+N when signal N came while we were not leading (nothing is left behind).")]
pub(crate) struct ElectArgs {
    /// The election path (relative to --namespace): a Curator LeaderLatch path.
    #[arg(value_parser = parse_election_path)]
    path: String,
    /// Our participant id, written into our latch node (what Curator's getLeader() and
    /// getParticipants() show). Default: HOSTNAME:PID.
    #[arg(long, value_name = "NAME", value_parser = parse_id)]
    id: Option<String>,
    /// Exit after the first term, with its status (COMMAND's, or 75 if leadership was lost).
    #[arg(long)]
    once: bool,
    /// After leadership is lost and COMMAND got SIGTERM, SIGKILL its group after SECS at the
    /// latest; earlier when the session could expire sooner (as for `lock`).
    #[arg(long, value_name = "SECS", default_value = "5", value_parser = parse_seconds)]
    kill_after: Duration,
    /// After COMMAND exits by itself, stay out of the election for SECS before queueing again
    /// (another participant takes over meanwhile; a failing COMMAND does not spin).
    #[arg(long, value_name = "SECS", default_value = "1", value_parser = parse_seconds)]
    rejoin_delay: Duration,
    /// The command and its arguments, after `--`.
    #[arg(required = true, last = true, num_args = 1.., value_name = "COMMAND")]
    command: Vec<OsString>,
}

fn parse_election_path(text: &str) -> Result<String, String> {
    zk_curator::framework::validate_path(text).map_err(|e| e.to_string())?;
    if text == "/" {
        return Err(format!("{text:?}: an election cannot live at the root"));
    }
    Ok(text.to_string())
}

fn parse_id(text: &str) -> Result<String, String> {
    if text.is_empty() {
        return Err("the participant id must not be empty".to_string());
    }
    Ok(text.to_string())
}

/// How often an unchanged failure to queue is repeated on stderr.
const WARNING_REPEAT: Duration = Duration::from_secs(60);

pub(crate) async fn run(connection: &Resolved, args: ElectArgs) -> ExitCode {
    let (client, _, mut signals) = match start(connection, None).await {
        Ok(started) => started,
        Err(code) => return code,
    };
    let code = elect(&client, &args, &mut signals).await;
    close(&client, &mut signals, code).await
}

/// The terms, until one is the last; the status to exit with.
async fn elect(client: &CuratorClient, args: &ElectArgs, signals: &mut Signals) -> ExitCode {
    let path = args.path.as_str();
    let id = args.id.clone().unwrap_or_else(host_and_pid);
    loop {
        let latch = match LeaderLatch::new(client, path, id.as_str()) {
            Ok(latch) => latch,
            Err(e) => {
                eprintln!("zk-curator: {}", crate::common::Report(&e));
                return exit(EXIT_UNAVAILABLE);
            }
        };
        if let Err(e) = latch.start() {
            eprintln!("zk-curator: {}", crate::common::Report(&e));
            return exit(EXIT_UNAVAILABLE);
        }
        let hold = match leadership(&latch, signals).await {
            Ok(hold) => hold,
            Err(code) => {
                // Cancelled: our queued node is deleted (or goes with the session `close` ends).
                let _ = leave(latch, path, signals).await;
                return code;
            }
        };
        let term = hold.fencing_token();
        eprintln!("zk-curator: {id} leads {path} (term {term}); running `{}`", describe(&args.command));
        let run = Supervision {
            command: &args.command,
            env: vec![
                ("ZK_LEADER_PATH", args.path.clone()),
                ("ZK_LEADER_ID", id.clone()),
                ("ZK_LEADER_TERM", term.to_string()),
                ("ZK_LEADER_NODE", hold.path().to_string()),
            ],
            kill_after: args.kill_after,
            what: format!("leadership of {path}"),
            node: "latch node",
            report_suspension: true,
            stop_group_on_exit: true,
        };
        let outcome = supervise(client, &Guard::of_hold(&hold), &run, signals).await;
        drop(hold);
        if let Err(interrupted) = leave(latch, path, signals).await {
            // As `lock`: a lost leadership keeps its 75 through a signal.
            return if outcome.ended == Ended::Lost { exit(EXIT_LOCK_LOST) } else { interrupted };
        }
        let status = match outcome.ended {
            Ended::Exited(status) => status,
            Ended::Lost => EXIT_LOCK_LOST,
            // It will not run next time either.
            Ended::NotRun(status) => return exit(status),
        };
        // SIGHUP asks a daemon to reload, not to stop: it does not end the election.
        if args.once || outcome.signalled.iter().any(|signal| *signal != libc::SIGHUP) {
            return exit(status);
        }
        if outcome.ended == Ended::Lost {
            eprintln!("zk-curator: {id} queues again for {path}");
            continue;
        }
        eprintln!(
            "zk-curator: `{}` exited (status {status}); leadership of {path} released, {id} queues again in {}s",
            describe(&args.command),
            args.rejoin_delay.as_secs_f64()
        );
        tokio::select! {
            () = tokio::time::sleep(args.rejoin_delay) => {}
            signal = signals.next() => return signal_exit(signal),
        }
    }
}

/// Waits until `latch` leads with a held hold (a leadership suspended meanwhile is waited out); a
/// signal or a latch failure ends the wait with the status to exit with.
async fn leadership(latch: &LeaderLatch, signals: &mut Signals) -> Result<Arc<Hold>, ExitCode> {
    // The latch retries a failure to queue (e.g. a create ZooKeeper refuses for want of
    // permission) every second; without saying so `elect` would wait silently for ever.
    let mut queue_errors = latch.queue_errors();
    let mut said: Option<(String, std::time::Instant)> = None;
    loop {
        tokio::select! {
            Ok(()) = queue_errors.changed() => {
                let text = queue_errors.borrow_and_update().as_ref().map(|e| crate::common::Report(e).to_string());
                if let Some(text) = text {
                    let now = std::time::Instant::now();
                    let repeated = said.as_ref().is_some_and(|(s, at)| *s == text && now.duration_since(*at) < WARNING_REPEAT);
                    if !repeated {
                        eprintln!("zk-curator: cannot queue for leadership of {} (trying again): {text}", latch.path());
                        said = Some((text, now));
                    }
                }
                continue;
            }
            led = latch.await_leadership() => {
                if let Err(e) = led {
                    eprintln!("zk-curator: {}", crate::common::Report(&e));
                    return Err(exit(EXIT_UNAVAILABLE));
                }
            }
            signal = signals.next() => {
                eprintln!("zk-curator: interrupted while waiting for leadership of {}", latch.path());
                return Err(signal_exit(signal));
            }
        }
        if let Some(hold) = latch.hold().filter(|hold| hold.hold_state() == HoldState::Held) {
            return Ok(hold);
        }
    }
}

/// Leaves the election: closes `latch` (our node is deleted), waiting at most [`RELEASE_WAIT`];
/// then the delete goes on in the background (and the node goes with the session at the latest).
/// A signal ends the wait: `Err(128+N)`.
async fn leave(latch: LeaderLatch, path: &str, signals: &mut Signals) -> Result<(), ExitCode> {
    let was_leading = latch.hold().is_some();
    tokio::select! {
        closed = tokio::time::timeout(RELEASE_WAIT, latch.close()) => {
            match closed {
                Ok(Ok(())) => {}
                Ok(Err(e)) if was_leading => eprintln!("zk-curator: releasing leadership of {path}: {}", crate::common::Report(&e)),
                Ok(Err(_)) => {}
                Err(_) => eprintln!(
                    "zk-curator: releasing leadership of {path}: no answer from ZooKeeper within {}s; the latch node goes with the session",
                    RELEASE_WAIT.as_secs_f64()
                ),
            }
            Ok(())
        }
        signal = signals.next() => {
            eprintln!("zk-curator: interrupted while leaving the election on {path}; the latch node goes with the session");
            Err(signal_exit(signal))
        }
    }
}
