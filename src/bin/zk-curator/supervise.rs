//! Running COMMAND under a hold (a lock for `lock`, leadership for `elect`): in a process group of
//! its own, told by the kernel if we die (Linux), signals we receive passed on to its group, and
//! stopped when the hold is lost — SIGTERM at once, SIGKILL before the server can expire the
//! session (see [`kill_deadline`]); we return only once the whole group is gone.

use std::ffi::OsString;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use zk_curator::framework::SessionIdentity;
use zk_curator::locks::{Hold, HoldState};
use zk_curator::{ConnectionState, CuratorClient};

use crate::common::{Signals, EXIT_CANNOT_EXECUTE, EXIT_NOT_FOUND};

/// How often the group of a COMMAND whose hold was lost is checked once its leader has exited.
const GROUP_POLL: Duration = Duration::from_millis(20);

/// How long after SIGKILL we wait for the group to disappear (a process in uninterruptible sleep
/// dies only when its system call returns) before we exit anyway, saying so.
const GROUP_EXIT_WAIT: Duration = Duration::from_secs(5);

/// What to run, and how to speak of it.
pub(crate) struct Supervision<'a> {
    /// COMMAND and its arguments (at least one element).
    pub(crate) command: &'a [OsString],
    /// Variables added to COMMAND's environment (`ZK_AUTH` is always removed).
    pub(crate) env: Vec<(&'static str, String)>,
    /// The longest time between SIGTERM and SIGKILL after the hold is lost.
    pub(crate) kill_after: Duration,
    /// What is lost, for messages: `lock /jobs/x`, `leadership of /election/x`.
    pub(crate) what: String,
    /// What the hold's node is called, for messages: `lock node`, `latch node`.
    pub(crate) node: &'static str,
    /// Report on stderr when the hold is suspended, and when it is held again.
    pub(crate) report_suspension: bool,
    /// When COMMAND exits by itself, stop what it left running in its group (SIGTERM, SIGKILL
    /// after `kill_after`) before returning, i.e. before the hold is released: `elect`'s
    /// COMMAND must not run on (a daemon that forked) next to the next leader's.
    pub(crate) stop_group_on_exit: bool,
}

/// What COMMAND runs under: a lock's or a leadership's [`Hold`], or (`register`) a registration,
/// which is lost with its session.
pub(crate) struct Guard {
    /// Held, suspended, lost (for good).
    pub(crate) states: watch::Receiver<HoldState>,
    /// The session the guard lives on.
    pub(crate) session: SessionIdentity,
    /// The guard's node, for messages.
    pub(crate) path: String,
}

impl Guard {
    pub(crate) fn of_hold(hold: &Arc<Hold>) -> Self {
        Self { states: hold.watch_state(), session: hold.session(), path: hold.path().to_string() }
    }
}

/// How COMMAND's run ended.
#[derive(Debug, PartialEq)]
pub(crate) enum Ended {
    /// COMMAND exited by itself (or after a signal we passed on) while the hold lasted: its
    /// status (128+N if signal N ended it).
    Exited(u8),
    /// The hold was lost; COMMAND's group was terminated and is gone.
    Lost,
    /// COMMAND could not be started: 126 (not executable) or 127 (not found).
    NotRun(u8),
}

/// [`Ended`], and whether a signal was passed on to COMMAND during the run.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub(crate) ended: Ended,
    /// The signals received (and passed on) while COMMAND ran, in order.
    pub(crate) signalled: Vec<i32>,
}

/// Sends `signal` to the process group `pgid`; true if it reached at least one process.
fn signal_group(pgid: Option<i32>, signal: i32) -> bool {
    let Some(pgid) = pgid.filter(|p| *p > 1) else { return false };
    // SAFETY: kill(2) has no memory-safety preconditions; a negative pid names a process group.
    unsafe { libc::kill(-pgid, signal) == 0 }
}

/// True while group `pgid` has a process, zombies included — also one we may not signal (EPERM:
/// e.g. it made itself another user), which SIGKILL cannot reach but which is not gone.
fn group_exists(pgid: Option<i32>) -> bool {
    let Some(pgid) = pgid.filter(|p| *p > 1) else { return false };
    // SAFETY: kill(2) with signal 0 only checks; a negative pid names a process group.
    if unsafe { libc::kill(-pgid, 0) } == 0 {
        return true;
    }
    std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// True while a process of group `pgid` is still alive (zombies do not count: they are dead,
/// waiting for whoever inherited them to reap them).
fn group_alive(pgid: Option<i32>) -> bool {
    if !group_exists(pgid) {
        return false;
    }
    #[cfg(target_os = "linux")]
    if let (Some(pgid), Ok(entries)) = (pgid, std::fs::read_dir("/proc")) {
        return entries.flatten().any(|entry| {
            let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            // pid (comm) state ppid pgrp ...
            let mut fields = stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace()).into_iter().flatten();
            let state = fields.next();
            let group = fields.nth(1).and_then(|g| g.parse::<i32>().ok());
            group == Some(pgid) && state.is_some_and(|s| s != "Z" && s != "X")
        });
    }
    true
}

pub(crate) fn describe(command: &[OsString]) -> String {
    command.iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>().join(" ")
}

/// How long before the earliest possible expiry of the session COMMAND's group gets SIGKILL:
/// 1/20 of the session timeout, at least 100 ms (scheduling, a network hop, signal delivery).
fn kill_margin(session_timeout: Duration) -> Duration {
    (session_timeout / 20).max(Duration::from_millis(100))
}

/// When COMMAND's group gets SIGKILL, the hold having been lost `now`: `--kill-after` after the
/// SIGTERM, but never later than `kill_margin` before the server can expire the session (when
/// the hold was lost because the connection was suspended too long, the client knows that
/// instant: LOST comes 0.15 of the session timeout before it). Returns the instant, and how long
/// before the earliest expiry it is, when that is known.
fn kill_deadline(
    now: Instant,
    kill_after: Duration,
    earliest_expiry: Option<Instant>,
    session_timeout: Duration,
) -> (Instant, Option<Duration>) {
    // A grace too long for the clock: no SIGKILL before the earliest expiry (if known).
    let grace_end = now.checked_add(kill_after);
    match earliest_expiry {
        Some(expiry) => {
            let latest = expiry.checked_sub(kill_margin(session_timeout)).unwrap_or(now).max(now);
            let at = grace_end.map_or(latest, |grace_end| grace_end.min(latest));
            (at, Some(expiry.saturating_duration_since(at)))
        }
        None => (grace_end.unwrap_or_else(|| far_future(now)), None),
    }
}

/// An instant no run reaches (a century away).
fn far_future(now: Instant) -> Instant {
    now.checked_add(Duration::from_secs(100 * 365 * 86_400)).unwrap_or(now)
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Runs COMMAND while `hold` lasts (see the module documentation). A hold that is suspended
/// changes nothing (reported if asked): only [`HoldState::Lost`] stops COMMAND.
pub(crate) async fn supervise(
    client: &CuratorClient,
    hold: &Guard,
    run: &Supervision<'_>,
    signals: &mut Signals,
) -> Outcome {
    let program = &run.command[0];
    let mut command = tokio::process::Command::new(program);
    command
        .args(&run.command[1..])
        .envs(run.env.iter().map(|(name, value)| (name, value)))
        // Our credentials are not the command's business.
        .env_remove("ZK_AUTH")
        .process_group(0);
    let parent = std::process::id();
    // SAFETY: runs in the forked child before exec; prctl and getppid are async-signal-safe.
    unsafe {
        command.pre_exec(move || {
            // If we die (even by SIGKILL), COMMAND is told: it must not run on without the hold.
            // Linux only; elsewhere COMMAND outlives a zk-curator killed with SIGKILL (docs/cli.md).
            #[cfg(target_os = "linux")]
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            if u32::try_from(libc::getppid()).ok() != Some(parent) {
                return Err(std::io::Error::other("zk-curator exited before COMMAND started"));
            }
            Ok(())
        });
    }
    let session_timeout = client.negotiated_session_timeout();
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            eprintln!("zk-curator: {}: {e}", program.to_string_lossy());
            let code = if e.kind() == std::io::ErrorKind::NotFound { EXIT_NOT_FOUND } else { EXIT_CANNOT_EXECUTE };
            return Outcome { ended: Ended::NotRun(code), signalled: Vec::new() };
        }
    };
    // COMMAND leads its own process group: the group id is its pid.
    let group = child.id().and_then(|pid| i32::try_from(pid).ok());
    let mut states = hold.states.clone();
    let mut seen = HoldState::Held;
    let mut watching = true;
    let mut lost = false;
    // COMMAND exited by itself; what it left in its group is being stopped.
    let mut stopping = false;
    let mut signalled = Vec::new();
    let mut kill_at: Option<Instant> = None;
    // Once SIGKILL was sent: when we stop waiting for the group.
    let mut give_up_at: Option<Instant> = None;
    let mut status = None;
    loop {
        let last_seen = seen;
        tokio::select! {
            exited = child.wait(), if status.is_none() => {
                status = Some(exited);
                if !lost && !stopping {
                    if !(run.stop_group_on_exit && group_alive(group)) {
                        break;
                    }
                    // COMMAND exited but left processes in its group: they go before the hold.
                    stopping = true;
                    signal_group(group, libc::SIGTERM);
                    kill_at = Some(kill_deadline(Instant::now(), run.kill_after, None, session_timeout).0);
                    eprintln!(
                        "zk-curator: `{}` exited and left processes running in its group; sent them SIGTERM (SIGKILL in {}s)",
                        describe(run.command),
                        run.kill_after.as_secs_f64()
                    );
                }
            }
            signal = signals.next() => {
                signalled.push(signal);
                signal_group(group, signal);
            }
            state = states.wait_for(move |s| *s != last_seen), if watching && !lost => {
                let Ok(state) = state.map(|s| *s) else {
                    watching = false;
                    continue;
                };
                seen = state;
                if state == HoldState::Suspended {
                    if run.report_suspension {
                        eprintln!(
                            "zk-curator: {} suspended (no connection to ZooKeeper); `{}` keeps running unless it is lost",
                            run.what,
                            describe(run.command)
                        );
                    }
                    continue;
                }
                if state != HoldState::Lost {
                    if run.report_suspension {
                        eprintln!("zk-curator: {} held again", run.what);
                    }
                    continue;
                }
                lost = true;
                let now = Instant::now();
                signal_group(group, libc::SIGTERM);
                let expiry = client.earliest_expiry(hold.session).map(Instant::from_std);
                let (at, before_expiry) = kill_deadline(now, run.kill_after, expiry, session_timeout);
                kill_at = Some(at);
                let why = if expiry.is_some() {
                    "the ZooKeeper session was lost: no connection for too long".to_string()
                } else if client.connection_state() == ConnectionState::Lost || client.session() != hold.session {
                    "the ZooKeeper session was lost".to_string()
                } else {
                    format!("the {} {} was deleted", run.node, hold.path)
                };
                let when = match before_expiry {
                    Some(before) => format!(
                        "SIGKILL in {:.3}s, {:.3}s before the server can expire the session",
                        at.saturating_duration_since(now).as_secs_f64(),
                        before.as_secs_f64()
                    ),
                    None => format!("SIGKILL in {}s", run.kill_after.as_secs_f64()),
                };
                eprintln!("zk-curator: {} lost ({why}); sent SIGTERM to `{}` ({when})", run.what, describe(run.command));
            }
            () = sleep_until(kill_at) => {
                kill_at = None;
                give_up_at = Some(Instant::now() + GROUP_EXIT_WAIT);
                if signal_group(group, libc::SIGKILL) {
                    eprintln!("zk-curator: sent SIGKILL to the process group of `{}`", describe(run.command));
                }
            }
            // The leader has exited but the hold is lost: the rest of its group must go too. Also
            // once SIGKILL was sent while the leader still runs: a leader SIGKILL cannot reach
            // (uninterruptible sleep, another user) must not keep us waiting for ever.
            () = tokio::time::sleep(GROUP_POLL), if (lost || stopping) && (status.is_some() || give_up_at.is_some()) => {
                if !group_alive(group) {
                    break;
                }
                if let Some(limit) = give_up_at {
                    // Keep signalling: a process forked meanwhile gets it too.
                    signal_group(group, libc::SIGKILL);
                    if Instant::now() >= limit {
                        eprintln!(
                            "zk-curator: processes of `{}` (group {}) survived SIGKILL for {}s",
                            describe(run.command),
                            group.unwrap_or_default(),
                            GROUP_EXIT_WAIT.as_secs()
                        );
                        break;
                    }
                }
            }
        }
    }
    if lost {
        return Outcome { ended: Ended::Lost, signalled };
    }
    let code = match status {
        Some(Ok(status)) => {
            use std::os::unix::process::ExitStatusExt;
            match (status.code(), status.signal()) {
                (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(u8::MAX),
                (None, Some(signal)) => u8::try_from(128 + signal).unwrap_or(u8::MAX),
                (None, None) => u8::MAX,
            }
        }
        Some(Err(e)) => {
            eprintln!("zk-curator: waiting for `{}`: {e}", describe(run.command));
            EXIT_CANNOT_EXECUTE
        }
        None => u8::MAX,
    };
    Outcome { ended: Ended::Exited(code), signalled }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sigkill_comes_before_the_earliest_expiry_whatever_kill_after_says() {
        let now = Instant::now();
        let s = Duration::from_secs_f64;
        // Default: 15 s session, LOST 2.25 s before the expiry, --kill-after 5.
        let (at, before) = kill_deadline(now, s(5.0), Some(now + s(2.25)), s(15.0));
        assert_eq!(before, Some(s(0.75)));
        assert_eq!(at, now + s(1.5));
        // --kill-after can only make it earlier.
        let (at, _) = kill_deadline(now, s(0.5), Some(now + s(2.25)), s(15.0));
        assert_eq!(at, now + s(0.5));
        // A short session: the margin is at least 100 ms.
        let (at, before) = kill_deadline(now, s(5.0), Some(now + s(0.3)), s(2.0));
        assert_eq!((at, before), (now + s(0.2), Some(s(0.1))));
        // No time left: at once.
        let (at, _) = kill_deadline(now, s(5.0), Some(now + s(0.05)), s(2.0));
        assert_eq!(at, now);
        // The hold is gone already (node deleted, session expired): --kill-after.
        assert_eq!(kill_deadline(now, s(5.0), None, s(15.0)), (now + s(5.0), None));
    }
}
