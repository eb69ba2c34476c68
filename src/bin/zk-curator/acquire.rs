//! A lock of any kind (`--kind`): acquiring it (a signal ends the wait), saying why it was not
//! acquired, releasing it. Shared by `lock` and `hold`.

use std::future::Future;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use zk_curator::locks::driver::LockDriver;
use zk_curator::locks::{
    Hold, HoldState, InterProcessMutex, InterProcessNonFairMutex, InterProcessReadWriteLock, InterProcessSemaphoreV2,
    Lease, MutexGuard,
};
use zk_curator::CuratorClient;

use crate::common::{
    exit, signal_exit, Signals, Wait, EXIT_CANNOT_EXECUTE, EXIT_LOCK_LOST, EXIT_NOT_FOUND, EXIT_UNAVAILABLE,
    EXIT_USAGE, RELEASE_WAIT,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Mutex,
    Read,
    Write,
    Semaphore(usize),
    SemaphoreMutex,
    NonFair,
}

pub(crate) fn parse_kind(text: &str) -> Result<Kind, String> {
    match text {
        "mutex" => Ok(Kind::Mutex),
        "read" => Ok(Kind::Read),
        "write" => Ok(Kind::Write),
        "semmutex" => Ok(Kind::SemaphoreMutex),
        "nonfair" => Ok(Kind::NonFair),
        other => match other.strip_prefix("semaphore:").map(str::parse::<usize>) {
            Some(Ok(leases)) if leases >= 1 => Ok(Kind::Semaphore(leases)),
            Some(_) => Err(format!("{other:?}: the lease count N of semaphore:N must be a whole number >= 1")),
            None => Err(format!("{other:?} is not a lock kind (mutex, read, write, semaphore:N, semmutex, nonfair)")),
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
        Kind::NonFair => guard_of!(InterProcessNonFairMutex::new(client, path)?),
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
                Ok(Err(e)) => eprintln!("zk-curator: releasing {path}: {}", crate::common::Report(&e)),
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
            eprintln!("zk-curator: {}", crate::common::Report(&e));
            exit(EXIT_UNAVAILABLE)
        }),
        // Dropping the acquire deletes our node (in the background; `close` waits for it).
        signal = signals.next() => {
            eprintln!("zk-curator: interrupted while waiting for {path}");
            Err(signal_exit(signal))
        }
    }
}
