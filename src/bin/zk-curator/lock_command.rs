//! `zk-curator lock PATH -- COMMAND`: flock(1) for a cluster.
//!
//! Acquires the lock (any kind), runs COMMAND in a process group of its own with the lock's path,
//! node and fencing token in its environment, and releases the lock when COMMAND exits. If the
//! lock is lost while COMMAND runs, the whole group gets SIGTERM at once and SIGKILL after
//! `--kill-after`. SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to us are passed on to the group;
//! while we still wait for the lock they cancel the wait (our node is deleted, nothing is left).

use std::ffi::OsString;
use std::future::Future;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::time::Instant;
use zk_curator::{
    ConnectionState, CuratorClient, Hold, HoldState, InterProcessMutex, InterProcessReadWriteLock,
    InterProcessSemaphoreV2, Lease, LockDriver, MutexGuard,
};

use super::{parse_lock_path, parse_seconds, Connection};

/// ZooKeeper could not be reached, or answered with an error.
const EXIT_UNAVAILABLE: u8 = 69;
/// The lock was lost while COMMAND ran; COMMAND was terminated.
const EXIT_LOCK_LOST: u8 = 75;
/// COMMAND exists but could not be executed (as a shell reports it).
const EXIT_CANNOT_EXECUTE: u8 = 126;
/// COMMAND was not found (as a shell reports it).
const EXIT_NOT_FOUND: u8 = 127;
/// clap's exit code for usage errors.
const EXIT_USAGE: u8 = 2;

#[derive(Args, Debug)]
#[command(after_help = "\
Exit status: COMMAND's own status (128+N if a signal N ended it); the conflict code (default 1) \
when the lock was not acquired in time, COMMAND not run; 2 for usage errors; 69 when ZooKeeper \
could not be reached or failed; 75 when the lock was lost while COMMAND ran (COMMAND was sent \
SIGTERM, then SIGKILL); 126/127 when COMMAND could not be executed / was not found; 128+N when \
signal N interrupted the wait for the lock.

COMMAND runs in a process group of its own (so that all of its processes get the signals) with \
ZK_LOCK_PATH, ZK_LOCK_NODE and ZK_LOCK_TOKEN (the fencing token: larger for every later holder) \
in its environment.")]
pub(crate) struct LockArgs {
    /// The lock path (relative to --namespace).
    #[arg(value_parser = parse_lock_path)]
    path: String,
    /// mutex, read, write (halves of a read-write lock), semaphore:N (one of N leases) or
    /// semmutex (a semaphore mutex). All wire-compatible with Curator's recipes.
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
    /// After the lock is lost and COMMAND got SIGTERM, SIGKILL it after SECS.
    #[arg(long, value_name = "SECS", default_value = "5", value_parser = parse_seconds)]
    kill_after: Duration,
    /// The command and its arguments, after `--`.
    #[arg(required = true, last = true, num_args = 1.., value_name = "COMMAND")]
    command: Vec<OsString>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Mutex,
    Read,
    Write,
    Semaphore(usize),
    SemaphoreMutex,
}

fn parse_kind(text: &str) -> Result<Kind, String> {
    match text {
        "mutex" => Ok(Kind::Mutex),
        "read" => Ok(Kind::Read),
        "write" => Ok(Kind::Write),
        "semmutex" => Ok(Kind::SemaphoreMutex),
        other => match other.strip_prefix("semaphore:").map(str::parse::<usize>) {
            Some(Ok(leases)) if leases >= 1 => Ok(Kind::Semaphore(leases)),
            Some(_) => Err(format!("{other:?}: the lease count N of semaphore:N must be a whole number >= 1")),
            None => Err(format!("{other:?} is not a lock kind (mutex, read, write, semaphore:N, semmutex)")),
        },
    }
}

fn parse_conflict_code(text: &str) -> Result<u8, String> {
    let code: u8 = text.parse().map_err(|_| format!("{text:?} is not an exit status (1-255)"))?;
    match code {
        0 => Err("0 would look like success".to_string()),
        EXIT_USAGE | EXIT_UNAVAILABLE | EXIT_LOCK_LOST | EXIT_CANNOT_EXECUTE | EXIT_NOT_FOUND => {
            Err(format!("{code} is one of zk-curator's own exit statuses (2, 69, 75, 126, 127)"))
        }
        code => Ok(code),
    }
}

/// A held lock of any kind.
trait HeldLock: Send {
    fn hold(&self) -> &Arc<Hold>;
    fn release(self: Box<Self>) -> Pin<Box<dyn Future<Output = zk_curator::Result<()>> + Send>>;
}

impl<D: LockDriver + 'static> HeldLock for MutexGuard<D> {
    fn hold(&self) -> &Arc<Hold> {
        MutexGuard::hold(self)
    }
    fn release(self: Box<Self>) -> Pin<Box<dyn Future<Output = zk_curator::Result<()>> + Send>> {
        Box::pin(MutexGuard::release(*self))
    }
}

impl HeldLock for Lease {
    fn hold(&self) -> &Arc<Hold> {
        Lease::hold(self)
    }
    fn release(self: Box<Self>) -> Pin<Box<dyn Future<Output = zk_curator::Result<()>> + Send>> {
        Box::pin(Lease::release(*self))
    }
}

/// How long to wait for the lock.
#[derive(Clone, Copy)]
enum Wait {
    Forever,
    OneAttempt,
    Until(Instant),
}

fn boxed<T: HeldLock + 'static>(held: Option<T>) -> Option<Box<dyn HeldLock>> {
    held.map(|h| Box::new(h) as Box<dyn HeldLock>)
}

async fn acquire(
    client: &CuratorClient,
    path: &str,
    kind: Kind,
    wait: Wait,
) -> zk_curator::Result<Option<Box<dyn HeldLock>>> {
    let remaining = |deadline: Instant| deadline.saturating_duration_since(Instant::now());
    macro_rules! guard_of {
        ($lock:expr) => {{
            let lock = $lock;
            match wait {
                Wait::Forever => boxed(Some(lock.lock().await?)),
                Wait::OneAttempt => boxed(lock.try_lock().await?),
                Wait::Until(deadline) => boxed(lock.try_lock_for(remaining(deadline)).await?),
            }
        }};
    }
    Ok(match kind {
        Kind::Mutex => guard_of!(InterProcessMutex::new(client, path)?),
        Kind::Read => guard_of!(InterProcessReadWriteLock::new(client, path)?.read_lock().clone()),
        Kind::Write => guard_of!(InterProcessReadWriteLock::new(client, path)?.write_lock().clone()),
        Kind::Semaphore(_) | Kind::SemaphoreMutex => {
            let leases = if let Kind::Semaphore(n) = kind { n } else { 1 };
            // A semaphore mutex is a one-lease semaphore on the wire, as in Curator.
            let semaphore = InterProcessSemaphoreV2::new(client, path, leases)?;
            match wait {
                Wait::Forever => boxed(Some(semaphore.acquire().await?)),
                Wait::OneAttempt => boxed(semaphore.acquire_timeout(Duration::ZERO).await?),
                Wait::Until(deadline) => boxed(semaphore.acquire_timeout(remaining(deadline)).await?),
            }
        }
    })
}

/// The signals we pass on to COMMAND (and that end a wait for the lock).
struct Signals(Vec<(i32, Signal)>);

impl Signals {
    fn install() -> std::io::Result<Self> {
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
    async fn next(&mut self) -> i32 {
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

fn exit(code: u8) -> ExitCode {
    ExitCode::from(code)
}

fn signal_exit(signal: i32) -> ExitCode {
    exit(u8::try_from(128 + signal).unwrap_or(u8::MAX))
}

/// Sends `signal` to COMMAND's process group (its leader's pid is the group id).
fn signal_group(leader: Option<u32>, signal: i32) {
    let Some(pgid) = leader.and_then(|pid| i32::try_from(pid).ok()) else { return };
    // SAFETY: kill(2) has no memory-safety preconditions; a negative pid names a process group.
    unsafe {
        libc::kill(-pgid, signal);
    }
}

fn describe(command: &[OsString]) -> String {
    command.iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>().join(" ")
}

pub(crate) async fn run(connection: &Connection, args: LockArgs) -> ExitCode {
    let mut signals = match Signals::install() {
        Ok(signals) => signals,
        Err(e) => {
            eprintln!("zk-curator: cannot install signal handlers: {e}");
            return exit(EXIT_UNAVAILABLE);
        }
    };
    let started = Instant::now();
    let timeout = if args.nonblock { Some(Duration::ZERO) } else { args.timeout };
    let wait = match timeout {
        None => Wait::Forever,
        Some(t) if t.is_zero() => Wait::OneAttempt,
        Some(t) => Wait::Until(started + t),
    };
    // Connecting gets the whole timeout, and at least a second (a connection is not a conflict).
    let connection_timeout = timeout.map_or(Duration::from_secs(15), |t| t.max(Duration::from_secs(1)));

    let client = tokio::select! {
        connected = connection.connect(connection_timeout) => match connected {
            Ok(client) => client,
            Err(e) => {
                eprintln!("zk-curator: {e}");
                return exit(EXIT_UNAVAILABLE);
            }
        },
        signal = signals.next() => return signal_exit(signal),
    };
    let code = run_connected(&client, &args, wait, &mut signals).await;
    // Closing the session also removes any node a cancelled wait could not delete in time.
    client.close().await;
    code
}

async fn run_connected(client: &CuratorClient, args: &LockArgs, wait: Wait, signals: &mut Signals) -> ExitCode {
    let path = args.path.as_str();
    let held = tokio::select! {
        acquired = acquire(client, path, args.kind, wait) => match acquired {
            Ok(Some(held)) => held,
            Ok(None) => {
                eprintln!("zk-curator: {path} is held by another process; not acquired{}",
                    args.timeout.map_or(String::new(), |t| format!(" within {}s", t.as_secs_f64())));
                return exit(args.conflict_exit_code);
            }
            Err(e) => {
                eprintln!("zk-curator: {e}");
                return exit(EXIT_UNAVAILABLE);
            }
        },
        // Dropping the acquire deletes our node (in the background; `close` waits for it).
        signal = signals.next() => {
            eprintln!("zk-curator: interrupted while waiting for {path}");
            return signal_exit(signal);
        }
    };
    let hold = held.hold().clone();
    let code = run_command(client, args, &hold, signals).await;
    if hold.hold_state() == HoldState::Lost {
        // Its node died with the session or is about to; waiting for a connection to delete it
        // would only delay our exit (dropping queues the delete for `close`).
        drop(held);
    } else if let Err(e) = held.release().await {
        // The delete stays queued until the session closes, which removes the node anyway.
        eprintln!("zk-curator: releasing {path}: {e}");
    }
    code
}

async fn run_command(client: &CuratorClient, args: &LockArgs, hold: &Arc<Hold>, signals: &mut Signals) -> ExitCode {
    let program = &args.command[0];
    let mut command = tokio::process::Command::new(program);
    command
        .args(&args.command[1..])
        .env("ZK_LOCK_PATH", &args.path)
        .env("ZK_LOCK_NODE", hold.path())
        .env("ZK_LOCK_TOKEN", hold.fencing_token().to_string())
        .process_group(0);
    let parent = std::process::id();
    // SAFETY: runs in the forked child before exec; prctl and getppid are async-signal-safe.
    unsafe {
        command.pre_exec(move || {
            // If we die (even by SIGKILL), COMMAND is told: it must not run on without the lock.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            if u32::try_from(libc::getppid()).ok() != Some(parent) {
                return Err(std::io::Error::other("zk-curator exited before COMMAND started"));
            }
            Ok(())
        });
    }
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            eprintln!("zk-curator: {}: {e}", program.to_string_lossy());
            return exit(if e.kind() == std::io::ErrorKind::NotFound { EXIT_NOT_FOUND } else { EXIT_CANNOT_EXECUTE });
        }
    };
    let leader = child.id();
    let mut states = hold.watch_state();
    let mut lost = false;
    let mut watching = true;
    let mut kill_at: Option<Instant> = None;
    let status = loop {
        tokio::select! {
            status = child.wait() => break status,
            signal = signals.next() => signal_group(leader, signal),
            state = states.wait_for(|s| *s == HoldState::Lost), if watching && !lost => {
                if state.is_err() {
                    watching = false;
                    continue;
                }
                lost = true;
                signal_group(leader, libc::SIGTERM);
                kill_at = Some(Instant::now() + args.kill_after);
                let why = if client.connection_state() == ConnectionState::Lost || client.session() != hold.session() {
                    "the ZooKeeper session was lost".to_string()
                } else {
                    format!("the lock node {} was deleted", hold.path())
                };
                eprintln!(
                    "zk-curator: lock {} lost ({why}); sent SIGTERM to `{}` (SIGKILL in {}s)",
                    args.path,
                    describe(&args.command),
                    args.kill_after.as_secs_f64()
                );
            }
            _ = sleep_until(kill_at) => {
                signal_group(leader, libc::SIGKILL);
                kill_at = None;
            }
        }
    };
    if lost {
        return exit(EXIT_LOCK_LOST);
    }
    match status {
        Ok(status) => {
            use std::os::unix::process::ExitStatusExt;
            match (status.code(), status.signal()) {
                (Some(code), _) => exit(u8::try_from(code & 0xff).unwrap_or(u8::MAX)),
                (None, Some(signal)) => signal_exit(signal),
                (None, None) => exit(u8::MAX),
            }
        }
        Err(e) => {
            eprintln!("zk-curator: waiting for `{}`: {e}", describe(&args.command));
            exit(EXIT_CANNOT_EXECUTE)
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
