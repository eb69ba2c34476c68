//! `zk-curator hold PATH`: acquire a lock of any kind, hold it for a while, report its hold state
//! on stdout (`ACQUIRED node`, `TOKEN n`, state changes, `RELEASED` or `NOT_ACQUIRED`), release
//! it. Exit statuses as `lock`: 0, the conflict status (default 1), 69, 75 (lost while held),
//! 128+N (signal N ended the wait or the hold; the lock is released).

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use zk_curator::locks::HoldState;
use zk_curator::CuratorClient;

use crate::acquire::{acquire_interruptibly, not_acquired, parse_conflict_code, parse_kind, release, Kind};
use crate::common::{exit, parse_lock_path, parse_seconds, signal_exit, Signals, Wait, EXIT_LOCK_LOST};
use crate::connection::{close, start, Resolved};

#[derive(Args, Debug)]
pub(crate) struct HoldArgs {
    /// The lock path.
    #[arg(value_parser = parse_lock_path)]
    path: String,
    /// mutex, read, write, semaphore:N, semmutex or nonfair (as for `lock`).
    #[arg(long, default_value = "mutex", value_parser = parse_kind)]
    kind: Kind,
    /// How long to hold it (fractions allowed).
    #[arg(long, value_name = "SECS", default_value = "10", value_parser = parse_seconds)]
    seconds: Duration,
    /// Give up if not acquired within SECS (fractions allowed; 0 = one attempt). Default: wait.
    #[arg(long, value_name = "SECS", value_parser = parse_seconds)]
    timeout: Option<Duration>,
    /// Exit status when the lock was not acquired in time (as for `lock`).
    #[arg(long, short = 'E', value_name = "N", default_value_t = 1, value_parser = parse_conflict_code)]
    conflict_exit_code: u8,
}

fn say(line: impl std::fmt::Display) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

pub(crate) async fn run(connection: &Resolved, args: HoldArgs) -> ExitCode {
    let (client, wait, mut signals) = match start(connection, args.timeout).await {
        Ok(started) => started,
        Err(code) => return code,
    };
    let code = hold(&client, &args, wait, &mut signals).await;
    close(&client, &mut signals, code).await
}

async fn hold(client: &CuratorClient, args: &HoldArgs, wait: Wait, signals: &mut Signals) -> ExitCode {
    let path = args.path.as_str();
    let held = match acquire_interruptibly(client, path, args.kind, wait, signals).await {
        Ok(Some(held)) => held,
        Ok(None) => {
            say("NOT_ACQUIRED");
            return not_acquired(client, path, args.timeout, args.conflict_exit_code);
        }
        Err(code) => return code,
    };
    let hold = held.hold().clone();
    say(format!("ACQUIRED {}", hold.path()));
    say(format!("TOKEN {}", hold.fencing_token()));
    let mut states = hold.watch_state();
    let until = tokio::time::sleep(args.seconds);
    tokio::pin!(until);
    let code = loop {
        tokio::select! {
            () = &mut until => break exit(0),
            signal = signals.next() => break signal_exit(signal),
            changed = states.changed() => {
                if changed.is_err() {
                    break exit(0);
                }
                let state = *states.borrow_and_update();
                say(format!("{state:?}").to_uppercase());
                if state == HoldState::Lost {
                    break exit(EXIT_LOCK_LOST);
                }
            },
        }
    };
    match release(held, path, signals).await {
        Ok(()) => {
            say("RELEASED");
            code
        }
        Err(interrupted) => interrupted,
    }
}
