//! `hold PATH SECONDS KIND`: take a lock, or lead a `LeaderLatch` / `LeaderSelector`, hold it while
//! reporting hold-state changes, give it back — the Rust side of interop and failover runs against
//! the Curator side's `hold` mode, with the same command line and output lines.

use std::sync::Arc;
use std::time::Duration;

use zk_curator::leader::{LeaderLatch, LeaderSelector, Leadership as SelectorLeadership};
use zk_curator::locks::driver::LockDriver;
use zk_curator::locks::{
    GuardedWrite, Hold, HoldState, InterProcessMutex, InterProcessReadWriteLock, InterProcessSemaphoreV2, Lease,
    MutexGuard,
};
use zk_curator::CuratorClient;

use crate::report::say;
use crate::{connect_client, BenchResult};

fn env_parse<T: std::str::FromStr>(name: &str) -> BenchResult<Option<T>> {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => {
            v.trim().parse().map(Some).map_err(|_| format!("{name}={v:?} is not a valid value").into())
        }
        _ => Ok(None),
    }
}

fn state_word(state: HoldState) -> &'static str {
    match state {
        HoldState::Held => "HELD",
        HoldState::Suspended => "SUSPENDED",
        HoldState::Lost => "LOST",
        _ => "UNKNOWN",
    }
}

pub(crate) async fn hold(connect: &str, path: &str, seconds: f64, kind: &str) -> BenchResult<()> {
    let session_timeout = Duration::from_millis(env_parse::<u64>("SESSION_TIMEOUT_MS")?.unwrap_or(15_000));
    let acquire_timeout = match env_parse::<f64>("ACQUIRE_TIMEOUT_S")? {
        Some(t) => Some(Duration::try_from_secs_f64(t.max(0.0)).map_err(|e| format!("bad ACQUIRE_TIMEOUT_S: {e}"))?),
        None => None,
    };
    let guarded_path = std::env::var("GUARDED_WRITE_PATH").ok().filter(|p| !p.is_empty());
    let hold_for = Duration::try_from_secs_f64(seconds.max(0.0)).map_err(|e| format!("bad SECONDS: {e}"))?;

    let client = connect_client(connect, session_timeout).await?;
    let held = hold_kind(&client, path, kind, acquire_timeout, hold_for, &guarded_path).await;
    client.close().await;
    held
}

async fn hold_kind(
    client: &CuratorClient,
    path: &str,
    kind: &str,
    acquire_timeout: Option<Duration>,
    hold_for: Duration,
    guarded_path: &Option<String>,
) -> BenchResult<()> {
    if let Some((Election::Selector, id)) = leader_kind(kind)? {
        return hold_selector(client, path, id, acquire_timeout, hold_for, guarded_path).await;
    }
    if let Some((Election::Latch, id)) = leader_kind(kind)? {
        let latch = LeaderLatch::new(client, path, id)?;
        latch.start()?;
        let leadership = lead(&latch, acquire_timeout).await;
        return match leadership {
            Ok(Some(hold)) => hold_for_a_while(Some(Leadership { latch, hold }), hold_for, guarded_path).await,
            not_leading => {
                // Timed out (NOT_ACQUIRED) or failed: leave the line first.
                if let Err(e) = latch.close().await {
                    eprintln!("lock_bench: closing the latch: {e}");
                }
                not_leading?;
                hold_for_a_while(None::<Leadership>, hold_for, guarded_path).await
            }
        };
    }
    if let Some(leases) = semaphore_leases(kind)? {
        let semaphore = InterProcessSemaphoreV2::new(client, path, leases)?;
        let lease = match acquire_timeout {
            Some(t) => semaphore.acquire_timeout(t).await?,
            None => Some(semaphore.acquire().await?),
        };
        return hold_for_a_while(lease, hold_for, guarded_path).await;
    }
    let rw = InterProcessReadWriteLock::new(client, path)?;
    let mutex = InterProcessMutex::new(client, path)?;
    match (kind, acquire_timeout) {
        ("read", Some(t)) => hold_for_a_while(rw.read_lock().try_lock_for(t).await?, hold_for, guarded_path).await,
        ("read", None) => hold_for_a_while(Some(rw.read_lock().lock().await?), hold_for, guarded_path).await,
        ("write", Some(t)) => hold_for_a_while(rw.write_lock().try_lock_for(t).await?, hold_for, guarded_path).await,
        ("write", None) => hold_for_a_while(Some(rw.write_lock().lock().await?), hold_for, guarded_path).await,
        ("mutex", Some(t)) => hold_for_a_while(mutex.try_lock_for(t).await?, hold_for, guarded_path).await,
        ("mutex", None) => hold_for_a_while(Some(mutex.lock().await?), hold_for, guarded_path).await,
        (other, _) => Err(format!("unknown KIND {other} (mutex, read, write, sem:L or semmutex)").into()),
    }
}

/// The lease count of a semaphore KIND (`sem:L`, or `semmutex`: a semaphore mutex is a one-lease
/// semaphore on the wire, as in Curator); None for the lock kinds.
pub(crate) fn semaphore_leases(kind: &str) -> Result<Option<usize>, String> {
    if kind == "semmutex" {
        return Ok(Some(1));
    }
    match kind.strip_prefix("sem:") {
        Some(l) => match l.parse::<usize>() {
            Ok(leases) if leases >= 1 => Ok(Some(leases)),
            _ => Err(format!("bad KIND {kind}: the lease count must be a whole number >= 1")),
        },
        None => Ok(None),
    }
}

/// The two leader election recipes `hold` takes part in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Election {
    Latch,
    Selector,
}

/// The election and participant id of a leader KIND (`latch:ID`, `selector:ID`, or without `:ID`:
/// `rust-<pid>`); None for the lock kinds.
pub(crate) fn leader_kind(kind: &str) -> Result<Option<(Election, String)>, String> {
    let (name, id) = kind.split_once(':').map_or((kind, None), |(n, id)| (n, Some(id)));
    let election = match name {
        "latch" => Election::Latch,
        "selector" => Election::Selector,
        _ => return Ok(None),
    };
    match id {
        None => Ok(Some((election, format!("rust-{}", std::process::id())))),
        Some("") => Err(format!("bad KIND {kind}: the participant id is empty")),
        Some(id) => Ok(Some((election, id.to_string()))),
    }
}

/// `hold` as a `LeaderSelector` participant: the leadership work hands its [`SelectorLeadership`]
/// over and runs until told to return (SECONDS over) or the leadership is lost.
async fn hold_selector(
    client: &CuratorClient,
    path: &str,
    id: String,
    acquire_timeout: Option<Duration>,
    hold_for: Duration,
    guarded_path: &Option<String>,
) -> BenchResult<()> {
    let (leading_tx, mut leading) = tokio::sync::mpsc::unbounded_channel::<SelectorLeadership>();
    let (done, done_rx) = tokio::sync::watch::channel(false);
    let selector = LeaderSelector::new(client, path, id, move |leadership: SelectorLeadership| {
        let (leading_tx, mut done) = (leading_tx.clone(), done_rx.clone());
        async move {
            let _ = leading_tx.send(leadership.clone());
            tokio::select! {
                _ = done.wait_for(|d| *d) => {}
                _ = leadership.lost() => {}
            }
        }
    })?;
    selector.start()?;
    let term = match acquire_timeout {
        Some(t) => tokio::time::timeout(t, leading.recv()).await.ok().flatten(),
        None => leading.recv().await,
    };
    match term {
        Some(leadership) => {
            let hold = leadership.hold().clone();
            hold_for_a_while(Some(SelectorTerm { selector, done, hold }), hold_for, guarded_path).await
        }
        None => {
            if let Err(e) = selector.close().await {
                eprintln!("lock_bench: closing the selector: {e}");
            }
            hold_for_a_while(None::<SelectorTerm>, hold_for, guarded_path).await
        }
    }
}

/// A selector while its leadership work runs: releasing it lets the work return, then closes the
/// selector.
struct SelectorTerm {
    selector: LeaderSelector,
    done: tokio::sync::watch::Sender<bool>,
    hold: Arc<Hold>,
}

impl Held for SelectorTerm {
    fn hold(&self) -> &Arc<Hold> {
        &self.hold
    }
    async fn release(self) -> zk_curator::Result<()> {
        self.done.send_replace(true);
        self.selector.close().await
    }
}

/// Waits (at most `timeout`) until the started `latch` leads; the hold of that leadership.
pub(crate) async fn lead(latch: &LeaderLatch, timeout: Option<Duration>) -> zk_curator::Result<Option<Arc<Hold>>> {
    let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
    loop {
        let leading = match deadline {
            Some(d) => latch.await_leadership_timeout(d.saturating_duration_since(tokio::time::Instant::now())).await?,
            None => {
                latch.await_leadership().await?;
                true
            }
        };
        if !leading {
            return Ok(None);
        }
        // Leadership may already be gone again (then the latch has queued again): wait on.
        if let Some(hold) = latch.hold().filter(|h| h.hold_state() == HoldState::Held) {
            return Ok(Some(hold));
        }
    }
}

/// A leader latch while it leads: the hold is the leadership, releasing it closes the latch.
pub(crate) struct Leadership {
    latch: LeaderLatch,
    hold: Arc<Hold>,
}

impl Held for Leadership {
    fn hold(&self) -> &Arc<Hold> {
        &self.hold
    }
    async fn release(self) -> zk_curator::Result<()> {
        self.latch.close().await
    }
}

/// What `hold` holds: a lock guard, a semaphore lease or a latch's leadership.
trait Held {
    fn hold(&self) -> &Arc<Hold>;
    fn release(self) -> impl std::future::Future<Output = zk_curator::Result<()>> + Send;
}

impl<D: LockDriver> Held for MutexGuard<D> {
    fn hold(&self) -> &Arc<Hold> {
        MutexGuard::hold(self)
    }
    fn release(self) -> impl std::future::Future<Output = zk_curator::Result<()>> + Send {
        MutexGuard::release(self)
    }
}

impl Held for Lease {
    fn hold(&self) -> &Arc<Hold> {
        Lease::hold(self)
    }
    fn release(self) -> impl std::future::Future<Output = zk_curator::Result<()>> + Send {
        Lease::release(self)
    }
}

/// Prints what a holder sees (`ACQUIRED`, `TOKEN`, state changes, `RELEASED`) or `NOT_ACQUIRED`.
async fn hold_for_a_while(
    held: Option<impl Held>,
    hold_for: Duration,
    guarded_path: &Option<String>,
) -> BenchResult<()> {
    let Some(held) = held else {
        say("NOT_ACQUIRED");
        return Ok(());
    };
    let hold = held.hold().clone();
    say(format_args!("ACQUIRED {}", hold.path()));
    say(format_args!("TOKEN {}", hold.fencing_token()));

    let mut states = hold.watch_state();
    let mut last = HoldState::Held;
    let end = tokio::time::Instant::now() + hold_for;
    loop {
        let now = *states.borrow_and_update();
        if now != last {
            say(state_word(now));
            last = now;
        }
        if now == HoldState::Lost {
            break;
        }
        tokio::select! {
            _ = tokio::time::sleep_until(end) => break,
            changed = states.changed() => if changed.is_err() { break },
        }
    }

    if let Some(p) = &guarded_path {
        say(guarded_write(&hold, p).await);
    }
    // A lost hold has nothing left to delete; a disconnected one leaves the delete queued.
    match tokio::time::timeout(Duration::from_secs(5), held.release()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => eprintln!("lock_bench: release: {e} (the delete goes on in the background)"),
        Err(_) => eprintln!("lock_bench: release still pending after 5 s (the delete goes on in the background)"),
    }
    say("RELEASED");
    Ok(())
}

/// A set-data of `path` guarded by our lock node, or a create if `path` does not exist yet.
async fn guarded_write(hold: &Hold, path: &str) -> &'static str {
    let data = format!("token={}", hold.fencing_token()).into_bytes();
    let attempt = async {
        let set = GuardedWrite::new().set_data(path, &data, None);
        match hold.guarded_write(set).await {
            Err(e) if e.code() == Some(zk_curator::ErrorCode::NoNode) => {
                let create = GuardedWrite::new().create(path, &data, zk_curator::CreateMode::Persistent);
                hold.guarded_write(create).await
            }
            other => other,
        }
    };
    match tokio::time::timeout(Duration::from_secs(20), attempt).await {
        Ok(Ok(_)) => "GUARDED_WRITE_ACCEPTED",
        Ok(Err(e)) => {
            eprintln!("lock_bench: guarded write of {path} not applied: {e}");
            "GUARDED_WRITE_REJECTED"
        }
        Err(_) => {
            eprintln!("lock_bench: guarded write of {path} timed out (outcome unknown)");
            "GUARDED_WRITE_REJECTED"
        }
    }
}
