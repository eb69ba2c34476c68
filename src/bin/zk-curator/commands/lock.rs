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
use std::future::Future;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::time::Instant;
use zk_curator::{
    CuratorClient, Hold, HoldState, InterProcessMutex, InterProcessReadWriteLock, InterProcessSemaphoreV2, Lease,
    LockDriver, MutexGuard,
};

use super::supervise::{supervise, Ended, Supervision, EXIT_CANNOT_EXECUTE, EXIT_NOT_FOUND};
use super::{parse_lock_path, parse_seconds, Resolved};

/// ZooKeeper could not be reached, or answered with an error.
pub(crate) const EXIT_UNAVAILABLE: u8 = 69;
/// The lock was lost while COMMAND ran; COMMAND was terminated.
pub(crate) const EXIT_LOCK_LOST: u8 = 75;
/// clap's exit code for usage errors.
pub(crate) const EXIT_USAGE: u8 = 2;

/// How long releasing the lock after COMMAND exited may wait (for a suspended connection to come
/// back); then the node is left to the session's end. Signals cut it short.
pub(crate) const RELEASE_WAIT: Duration = Duration::from_secs(2);

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
    /// After the lock is lost and COMMAND got SIGTERM, SIGKILL its group after SECS at the latest.
    /// SIGKILL comes earlier when the session could expire sooner: 0.1 of the session timeout
    /// after SIGTERM (less a little for short sessions) when the connection was lost.
    #[arg(long, value_name = "SECS", default_value = "5", value_parser = parse_seconds)]
    kill_after: Duration,
    /// The command and its arguments, after `--`.
    #[arg(required = true, last = true, num_args = 1.., value_name = "COMMAND")]
    command: Vec<OsString>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Mutex,
    Read,
    Write,
    Semaphore(usize),
    SemaphoreMutex,
}

pub(crate) fn parse_kind(text: &str) -> Result<Kind, String> {
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

pub(crate) fn parse_conflict_code(text: &str) -> Result<u8, String> {
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
pub(crate) trait HeldLock: Send {
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
pub(crate) enum Wait {
    Forever,
    OneAttempt,
    Until(Instant),
}

fn boxed<T: HeldLock + 'static>(held: Option<T>) -> Option<Box<dyn HeldLock>> {
    held.map(|h| Box::new(h) as Box<dyn HeldLock>)
}

pub(crate) async fn acquire(
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

/// Everything `lock` and `hold` do before they wait for the lock: signal handlers, the wait a
/// `--timeout` asks for (measured from now), and a client — connecting gets the whole timeout,
/// and at least a second (a connection is not a conflict). `Err` is the status to exit with.
pub(crate) async fn start(
    connection: &Resolved,
    timeout: Option<Duration>,
) -> Result<(CuratorClient, Wait, Signals), ExitCode> {
    let mut signals = match Signals::install() {
        Ok(signals) => signals,
        Err(e) => {
            eprintln!("zk-curator: cannot install signal handlers: {e}");
            return Err(exit(EXIT_UNAVAILABLE));
        }
    };
    let started = Instant::now();
    let wait = match timeout {
        None => Wait::Forever,
        Some(t) if t.is_zero() => Wait::OneAttempt,
        // A timeout too long for the clock means waiting as long as it takes.
        Some(t) => started.checked_add(t).map_or(Wait::Forever, Wait::Until),
    };
    let connection_timeout = timeout.map_or(Duration::from_secs(15), |t| t.max(Duration::from_secs(1)));
    tokio::select! {
        connected = connection.connect(connection_timeout) => match connected {
            Ok(client) => Ok((client, wait, signals)),
            Err(e) => {
                eprintln!("zk-curator: {e}");
                Err(exit(EXIT_UNAVAILABLE))
            }
        },
        signal = signals.next() => Err(signal_exit(signal)),
    }
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

/// Closes the client (which also removes any node a cancelled wait or a release could not delete
/// in time); a signal cuts it short (the server then removes our nodes when the session expires).
/// A lost lock keeps its status 75 through such a signal: a supervisor must be able to tell a
/// lost lock from an interrupt.
pub(crate) async fn close(client: &CuratorClient, signals: &mut Signals, code: ExitCode) -> ExitCode {
    tokio::select! {
        () = client.close() => code,
        signal = signals.next() => if code == exit(EXIT_LOCK_LOST) { code } else { signal_exit(signal) },
    }
}

/// "Not acquired": the conflict status, or 69 when ZooKeeper is not reachable now (the wait ended
/// without an answer, so nobody can say whether the lock is free).
pub(crate) fn not_acquired(client: &CuratorClient, path: &str, within: Option<Duration>, conflict: u8) -> ExitCode {
    if !client.is_connected() {
        eprintln!(
            "zk-curator: ZooKeeper is unreachable (connection {}); {path} not acquired",
            client.connection_state()
        );
        return exit(EXIT_UNAVAILABLE);
    }
    eprintln!(
        "zk-curator: {path} is held by another process; not acquired{}",
        within.map_or(String::new(), |t| format!(" within {}s", t.as_secs_f64()))
    );
    exit(conflict)
}

/// Releases `held` (unless its hold is lost already), waiting at most [`RELEASE_WAIT`]; a signal
/// ends the wait: `Err(128+N)`.
pub(crate) async fn release(held: Box<dyn HeldLock>, path: &str, signals: &mut Signals) -> Result<(), ExitCode> {
    if held.hold().hold_state() == HoldState::Lost {
        // Its node died with the session or is about to; waiting for a connection to delete it
        // would only delay our exit (dropping queues the delete for `close`).
        drop(held);
        return Ok(());
    }
    tokio::select! {
        released = tokio::time::timeout(RELEASE_WAIT, held.release()) => {
            match released {
                Ok(Ok(())) => {}
                // The delete stays queued until the session closes, which removes the node anyway.
                Ok(Err(e)) => eprintln!("zk-curator: releasing {path}: {e}"),
                Err(_) => eprintln!(
                    "zk-curator: releasing {path}: no answer from ZooKeeper within {}s; the lock node goes with the session",
                    RELEASE_WAIT.as_secs_f64()
                ),
            }
            Ok(())
        }
        signal = signals.next() => {
            eprintln!("zk-curator: interrupted while releasing {path}; the lock node goes with the session");
            Err(signal_exit(signal))
        }
    }
}

/// [`acquire`], ended by a signal: the hold, `Ok(None)` when it was not acquired in time, or the
/// status to exit with (ZooKeeper failed, or a signal ended the wait).
pub(crate) async fn acquire_interruptibly(
    client: &CuratorClient,
    path: &str,
    kind: Kind,
    wait: Wait,
    signals: &mut Signals,
) -> Result<Option<Box<dyn HeldLock>>, ExitCode> {
    tokio::select! {
        acquired = acquire(client, path, kind, wait) => acquired.map_err(|e| {
            eprintln!("zk-curator: {e}");
            exit(EXIT_UNAVAILABLE)
        }),
        // Dropping the acquire deletes our node (in the background; `close` waits for it).
        signal = signals.next() => {
            eprintln!("zk-curator: interrupted while waiting for {path}");
            Err(signal_exit(signal))
        }
    }
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
    match supervise(client, hold, &run, signals).await.ended {
        Ended::Exited(code) | Ended::NotRun(code) => exit(code),
        Ended::Lost => exit(EXIT_LOCK_LOST),
    }
}
