//! What every command shares (as cargo's `command_prelude`): the exit statuses, the signals we pass
//! on to COMMAND (and that end a wait), how long a wait for a lock may take, and the value parsers
//! and node data more than one command uses. Depends on no other file of the CLI.

use std::process::ExitCode;
use std::time::Duration;

use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::time::Instant;

/// ZooKeeper could not be reached, or answered with an error.
pub(crate) const EXIT_UNAVAILABLE: u8 = 69;
/// The lock was lost while COMMAND ran; COMMAND was terminated.
pub(crate) const EXIT_LOCK_LOST: u8 = 75;
/// clap's exit code for usage errors.
pub(crate) const EXIT_USAGE: u8 = 2;
/// COMMAND exists but could not be executed (as a shell reports it).
pub(crate) const EXIT_CANNOT_EXECUTE: u8 = 126;
/// COMMAND was not found (as a shell reports it).
pub(crate) const EXIT_NOT_FOUND: u8 = 127;

/// How long releasing the lock after COMMAND exited may wait (for a suspended connection to come
/// back); then the node is left to the session's end. Signals cut it short.
pub(crate) const RELEASE_WAIT: Duration = Duration::from_secs(2);

/// The signals we pass on to COMMAND (and that end a wait for the lock).
pub(crate) struct Signals(Vec<(i32, Signal)>);

impl Signals {
    pub(crate) fn install() -> std::io::Result<Self> {
        let kinds = [
            (libc::SIGINT, SignalKind::interrupt()),
            (libc::SIGTERM, SignalKind::terminate()),
            (libc::SIGHUP, SignalKind::hangup()),
            (libc::SIGQUIT, SignalKind::quit()),
        ];
        let mut signals = Vec::with_capacity(kinds.len());
        for (number, kind) in kinds {
            signals.push((number, signal(kind)?));
        }
        Ok(Self(signals))
    }

    /// The next signal received (its number).
    pub(crate) async fn next(&mut self) -> i32 {
        std::future::poll_fn(|cx| {
            for (number, stream) in &mut self.0 {
                if stream.poll_recv(cx).is_ready() {
                    return std::task::Poll::Ready(*number);
                }
            }
            std::task::Poll::Pending
        })
        .await
    }
}

pub(crate) fn exit(code: u8) -> ExitCode {
    ExitCode::from(code)
}

pub(crate) fn signal_exit(signal: i32) -> ExitCode {
    exit(u8::try_from(128 + signal).unwrap_or(u8::MAX))
}

/// How long to wait for the lock.
#[derive(Clone, Copy)]
pub(crate) enum Wait {
    Forever,
    OneAttempt,
    Until(Instant),
}

/// `HOSTNAME:PID` (`localhost:PID` if the host name cannot be read): the data of our lock nodes
/// and `elect`'s default participant id.
pub(crate) fn host_and_pid() -> String {
    let host = gethostname::gethostname().to_string_lossy().into_owned();
    let host = if host.is_empty() { "localhost".to_string() } else { host };
    format!("{host}:{}", std::process::id())
}

/// A duration (clap value parser): seconds, fractions allowed (`90`, `0.5`), or with units as
/// humantime reads them (`90s`, `15m`, `1h 30m`, `500ms`, `2days`).
pub(crate) fn parse_seconds(text: &str) -> Result<Duration, String> {
    let trimmed = text.trim();
    if let Ok(seconds) = trimmed.parse::<f64>() {
        return Duration::try_from_secs_f64(seconds)
            .map_err(|_| format!("{text:?} is not a non-negative number of seconds"));
    }
    humantime::parse_duration(trimmed)
        .map_err(|e| format!("{text:?} is not a duration (seconds, or e.g. 90s, 15m, 1h 30m): {e}"))
}

pub(crate) fn parse_lock_path(text: &str) -> Result<String, String> {
    zk_curator::framework::validate_path(text).map_err(|e| e.to_string())?;
    if text == "/" {
        // The recipes refuse it too, but only once connected (which made it status 69).
        return Err(format!("{text:?}: a lock cannot live at the root"));
    }
    Ok(text.to_string())
}

/// An error and each of its causes, joined by ": " (as `anyhow`'s `{:#}`): a library error's
/// `Display` names only its own layer (the path, the code), its cause comes from `source()`.
pub(crate) struct Report<'a>(pub &'a dyn std::error::Error);

impl std::fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut cause = self.0.source();
        while let Some(c) = cause {
            write!(f, ": {c}")?;
            cause = c.source();
        }
        Ok(())
    }
}
