//! [`InterProcessMutex`]: Curator's re-entrant, fair, cross-process mutex.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::{debug, Instrument};

use super::driver::{LockDriver, StandardLockDriver};
use super::hold::{FencingToken, GuardedWrite, Hold, HoldState, HoldStateStream};
use super::internals::{Basis, LockInternals, Wait};
use super::local_queue::LocalQueue;
use super::reentrancy::{HolderId, ReentrancyMap, Released};
use crate::deadline::deadline_after;
use crate::error::{Error, Result};
use crate::metrics::{measure_acquire, LockLabels, Recipe};
use crate::CuratorClient;

/// A mutex shared across processes, wire-compatible with Curator's `InterProcessMutex` (nodes
/// `<path>/_c_<uuid>-lock-<seq>`, fair FIFO order, each waiter watches only its predecessor).
///
/// # Two ownership models, never mixed
///
/// | | guards: [`lock`](Self::lock), [`try_lock_for`](Self::try_lock_for), [`try_lock`](Self::try_lock) | Curator style: [`acquire`](Self::acquire), [`acquire_timeout`](Self::acquire_timeout), [`release`](Self::release) |
/// |---|---|---|
/// | owner | the [`MutexGuard`], wherever it moves (`Send + 'static`) | the calling tokio task (the thread outside a runtime), as Curator's thread |
/// | re-entrant | never: a second `lock()` queues behind the first guard, like `tokio::sync::Mutex` | yes: the owner acquires again without a round trip and releases as often |
/// | released by | [`MutexGuard::release`], or dropping the guard (in the background) | the owner's matching [`release`](Self::release) calls |
/// | `join!` of two calls in one task | two separate holds: the second waits for the first guard, which `join!` keeps alive — a deadlock, as with tokio's mutex | serialised: the second waits for the first and then re-enters (count 2) |
/// | `select!` | cancel safe: the losing branch leaves no node behind | the same |
/// | owner ends without releasing (early `?`, panic, abort) | released: the guard is dropped with the task | **orphaned**: the hold and its node stay until the last clone of this instance is dropped (released then, with a `tracing` warning) or the session ends; no other task can re-enter or release it |
///
/// **Prefer guards.** The Curator-style API is for ports of Curator code, and its rules are
/// Curator's: the task that acquired must itself release, as often as it acquired, on every path.
/// Nothing can notice that a tokio task ended (stable tokio has no such hook), so a hold whose task
/// returned early or panicked cannot be released then; what is guaranteed is that no other task
/// ever reaches it — task ids of ended tasks are never handed out again (tokio's 64-bit counter;
/// thread ids outside a runtime are never reused either) — and that dropping the lock instance
/// releases it and warns.
///
/// A guard is never counted as its task's Curator-style hold: a task holding a guard that calls
/// [`acquire`](Self::acquire) queues behind its own guard.
///
/// A hold is only ever handed out [`HoldState::Held`], on the client's current session. Re-entering
/// a hold that is [`HoldState::Lost`] fails with [`Error::LockLost`] (the earlier acquisitions still
/// need their releases); re-entering one that is `Suspended` waits until it is `Held` again (or
/// the timeout passes).
///
/// Re-entrancy is per instance, as in Curator: two `InterProcessMutex` values on one path are two
/// contenders even in one task. Clones of one instance share its holders.
///
/// # Thousands of tasks: one node per process
///
/// Guards ([`lock`](Self::lock), [`try_lock_for`](Self::try_lock_for), [`try_lock`](Self::try_lock))
/// of one client on one lock path queue **inside the process** behind one ZooKeeper node (lock
/// cohorting), whichever instances they use (same path, driver type and node data):
///
/// * **Turns.** Waiters gather in a *turn*. A turn queues its node in ZooKeeper only when the
///   process has no other node of this lock in line (the previous turn's node was deleted), and
///   takes no newcomer from then on: those gather in the next turn. When the node is granted, the
///   turn's first waiter holds; each release hands the node to the next waiter of the turn, in
///   arrival order, **without a round trip**; the turn's last holder deletes the node, and the next
///   turn queues its node — behind any contender that queued meanwhile. So a contender of another
///   process — ours or Curator's — waits for at most one turn of each process ahead of it, made of
///   waiters that all arrived before it queued; and the server sees one node per process instead
///   of one per task (10,000 waiting tasks: one node, not 10,000 nodes and O(W²) listings).
/// * **Each holder keeps the whole hold contract**: its own guard and [`Hold`]; the state (`Held`,
///   `Suspended`, `Lost`) of the shared node; [`lost`](MutexGuard::lost); revocation; guarded
///   writes that are refused once *that* holder has released (even though the node lives on);
///   and a [`FencingToken`] that increases from holder to holder, local hand-offs included:
///   `(czxid, handoff)`, where `handoff` counts the local holders of the node before this one —
///   free, no write and no round trip (see [`FencingToken`]).
/// * **A node is handed on only while it is `Held`** and nobody asked for it: a suspended or lost
///   session, a node deleted by someone else, a revocation request (`__REVOKE__`), or a downgrade
///   standing in its place ends the turn; its waiters move to the next turn, a node of their own.
///   When the node is lost, its waiters move on at once, without waiting for the holder to notice.
/// * **Cancel safety and deadlines are unchanged**: a cancelled or timed-out waiter leaves its
///   turn; the last waiter of a turn still waiting for its node stops the attempt, and the node is
///   deleted (handed to the delete queue before the call returns, as for a node of one's own).
/// * **No runtime of its own**: a turn's node is acquired on the client's runtime (on one of its
///   waiters' should that one shut down), so a waiter's runtime that stops being driven or shuts
///   down holds up nobody once the waiter is gone; guards may be taken, moved and dropped across
///   runtimes (or dropped with none).
/// * Read locks: the readers of one turn share its read node and hold it together. Later readers
///   gather in the next turn, whose read node is queued as soon as the previous one is granted
///   (granted at once unless a writer is ahead), so a writer queued behind a turn is not starved by
///   readers arriving after it.
///
/// What stays per task: Curator-style [`acquire`](Self::acquire) makes one node per task (it is
/// re-entrant per task, as Curator is per thread), and [`participant_nodes`](Self::participant_nodes)
/// lists ZooKeeper's nodes — one per process turn for guards. [`with_node_per_task`](Self::with_node_per_task)
/// makes guards use a node each, as Curator's threads do. Outside a tokio runtime (the blocking
/// facade runs one) guards also make a node each.
pub struct InterProcessMutex<D: LockDriver = StandardLockDriver> {
    shared: Arc<Shared<D>>,
}

impl<D: LockDriver> Clone for InterProcessMutex<D> {
    fn clone(&self) -> Self {
        Self { shared: self.shared.clone() }
    }
}

struct Shared<D: LockDriver> {
    internals: Arc<LockInternals<D>>,
    /// Curator-style holds only.
    holders: ReentrancyMap<HolderId, Arc<Hold>>,
    /// Serialises concurrent Curator-style acquires of one holder (`join!` in one task).
    acquiring: Turns,
    /// Guards alive (not yet released).
    guards: AtomicUsize,
    data: Option<Vec<u8>>,
    /// Nodes carry no data, as Curator's revocable locks (see [`InterProcessMutex::make_revocable`]).
    revocable: AtomicBool,
    /// Guards make a node each instead of sharing one through the local queue.
    node_per_task: AtomicBool,
    /// The local queue's waiters of one turn hold its node together (a read lock's readers).
    shares_turns: AtomicBool,
}

impl<D: LockDriver> std::fmt::Debug for InterProcessMutex<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InterProcessMutex").field("path", &self.path()).finish()
    }
}

impl InterProcessMutex {
    /// A mutex on `path`, with Curator's standard driver and the client's default node data.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] naming `path` if it is not a valid ZooKeeper path (or is `/`).
    pub fn new(client: &CuratorClient, path: &str) -> Result<Self> {
        Self::with_driver(client, path, StandardLockDriver::default())
    }

    /// Like [`new`](Self::new), writing `data` into the lock node instead of the default data.
    ///
    /// # Errors
    /// As [`new`](Self::new); [`Error::InvalidArgument`] naming its size and `path` if `data` is
    /// larger than the client's [`max_data_size`](crate::CuratorClientBuilder::max_data_size).
    pub fn with_data(client: &CuratorClient, path: &str, data: impl Into<Vec<u8>>) -> Result<Self> {
        let labels = client.lock_labels(Recipe::Mutex, path);
        Self::build(client, path, StandardLockDriver::default(), Some(data.into()), labels)
    }
}

impl<D: LockDriver> InterProcessMutex<D> {
    /// A mutex on `path` with a custom driver (Curator's `InterProcessMutex(client, path, driver)`).
    ///
    /// # Errors
    /// [`Error::InvalidPath`] / [`Error::InvalidArgument`] for a bad path or lock name.
    pub fn with_driver(client: &CuratorClient, path: &str, driver: D) -> Result<Self> {
        Self::build(client, path, driver, None, client.lock_labels(Recipe::Mutex, path))
    }

    /// A mutex traced and measured as `labels` say (the recipe it belongs to).
    pub(crate) fn build(
        client: &CuratorClient,
        path: &str,
        driver: D,
        data: Option<Vec<u8>>,
        labels: LockLabels,
    ) -> Result<Self> {
        let internals = LockInternals::new(client, path, driver, 1, labels)?;
        Self::from_internals(client, path, internals, data)
    }

    /// A mutex whose acquisitions go through `internals` (a racing one: the non-fair mutex).
    pub(crate) fn from_internals(
        client: &CuratorClient,
        path: &str,
        internals: LockInternals<D>,
        data: Option<Vec<u8>>,
    ) -> Result<Self> {
        let internals = Arc::new(internals);
        client.check_data_size("data", path, data.as_ref().map_or(0, Vec::len))?;
        let shared = Shared {
            internals,
            holders: ReentrancyMap::default(),
            acquiring: parking_lot::Mutex::new(HashMap::new()),
            guards: AtomicUsize::new(0),
            data,
            revocable: AtomicBool::new(false),
            node_per_task: AtomicBool::new(false),
            shares_turns: AtomicBool::new(false),
        };
        Ok(Self { shared: Arc::new(shared) })
    }

    /// The lock path.
    pub fn path(&self) -> &str {
        self.shared.internals.base_path()
    }

    pub(crate) fn client(&self) -> &CuratorClient {
        self.shared.internals.client()
    }

    /// Guards of this instance (and its clones) each make a node of their own, as Curator's
    /// threads do, instead of sharing one per turn through the
    /// [local queue](#thousands-of-tasks-one-node-per-process). Use it where every waiting task
    /// must show as a participant of its own (Curator's `getParticipantNodes` per thread), or where
    /// a few long holds should not queue behind each other's turns. Curator-style
    /// [`acquire`](Self::acquire) always makes a node per task.
    ///
    /// # Examples
    /// ```no_run
    /// # fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// let mutex = zk_curator::locks::InterProcessMutex::new(&client, "/locks/report")?.with_node_per_task();
    /// # Ok(()) }
    /// ```
    pub fn with_node_per_task(self) -> Self {
        self.shared.node_per_task.store(true, Ordering::SeqCst);
        self
    }

    /// The local queue's waiters of one turn share its node all at once (readers).
    pub(crate) fn share_local_turns(self) -> Self {
        self.shared.shares_turns.store(true, Ordering::SeqCst);
        self
    }

    /// A new hold for a guard: through the local queue, or a node of its own (per-task mode, or
    /// outside a tokio runtime).
    async fn attempt_guarded(&self, wait: Wait) -> Result<Option<Arc<Hold>>> {
        // The futures a queued waiter never polls are boxed: a future is as large as its largest
        // branch, and 10,000 waiting tasks each hold one (7.7 kB unboxed, 256 bytes boxed).
        if tokio::runtime::Handle::try_current().is_err() || self.shared.node_per_task.load(Ordering::SeqCst) {
            return Box::pin(self.attempt(wait, Basis::None)).await;
        }
        let revocable = self.shared.revocable.load(Ordering::SeqCst);
        let data = self.node_data(revocable).to_vec();
        let internals = &self.shared.internals;
        let lock_name = internals.driver().lock_name();
        let key =
            (std::any::TypeId::of::<D>(), self.path().to_string(), lock_name.to_string(), data.clone(), revocable);
        let shared = self.shared.shares_turns.load(Ordering::SeqCst);
        let queue = self.client().local_queue(key, || LocalQueue::new(internals.clone(), data, shared, revocable));
        measure_acquire(internals.labels(), lock_name, |hold: &Arc<Hold>| hold.path(), Box::pin(queue.acquire(wait)))
            .await
    }

    fn node_data(&self, revocable: bool) -> &[u8] {
        match &self.shared.data {
            _ if revocable => &[][..],
            Some(data) => data.as_slice(),
            None => self.shared.internals.client().default_data(),
        }
    }

    /// Makes later acquisitions revocable (Curator's `makeRevocable`): their nodes are created with
    /// empty data, as Curator's, and the holder is told when someone asks for the lock through
    /// [`Revoker::attempt_revoke`](crate::locks::Revoker::attempt_revoke) — see
    /// [`MutexGuard::revocation_requested`] and [`Hold::revocation_requested`]. Releasing is up to
    /// the holder (cooperative revocation).
    pub fn make_revocable(&self) {
        self.shared.revocable.store(true, Ordering::SeqCst);
    }

    /// Waits until the lock is held by the calling task (or thread), however long it takes.
    ///
    /// Re-entrant: if the caller already holds it, this only counts one more hold.
    ///
    /// # Errors
    /// * [`Error::LockLost`] naming the node when re-entering a hold that is lost (its session
    ///   ended or its node was deleted); the caller still owes the earlier releases.
    /// * [`Error::Closed`] if the client is closed (also while waiting).
    /// * Server errors after the retry policy gave up ([`Error::ZooKeeper`]; see [`Error::kind`]).
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future at any point leaves no node behind (it is deleted in the
    /// background) and takes no hold; the caller loses its place in the queue.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// let mutex = zk_curator::locks::InterProcessMutex::new(&client, "/locks/report")?;
    /// mutex.acquire().await?;
    /// mutex.acquire().await?; // re-entered: no round trip
    /// mutex.release().await?;
    /// mutex.release().await?; // the last release deletes the node
    /// # Ok(()) }
    /// ```
    pub async fn acquire(&self) -> Result<()> {
        self.acquire_reentrant(Wait::Forever, Basis::None).await.map(|_| ())
    }

    /// Like [`acquire`](Self::acquire), giving up after `timeout`: `Ok(false)` if not acquired, with
    /// our node deleted. The call returns within `timeout` (plus a few ms) whatever the connection
    /// does. A zero timeout makes one attempt (one create and one listing) if connected, and
    /// returns `Ok(false)` at once if not.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    /// Cancel safe, as [`acquire`](Self::acquire).
    ///
    /// # Examples
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(mutex: zk_curator::locks::InterProcessMutex) -> zk_curator::Result<()> {
    /// if mutex.acquire_timeout(Duration::from_secs(5)).await? {
    ///     // ... work while holding the lock ...
    ///     mutex.release().await?;
    /// } else {
    ///     println!("{} is busy", mutex.path());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn acquire_timeout(&self, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let timeout = timeout.into().remaining();
        self.acquire_reentrant(Wait::from_timeout(timeout), Basis::None).await.map(|hold| hold.is_some())
    }

    /// Curator-style acquire of the calling holder, standing on `basis` (see [`Basis`]).
    pub(crate) async fn acquire_reentrant(&self, wait: Wait, basis: Basis<'_>) -> Result<Option<Arc<Hold>>> {
        let holder = HolderId::current();
        let deadline = match wait {
            Wait::OneAttempt => Some(Instant::now()),
            _ => wait.deadline(),
        };
        // Concurrent acquires of one holder (join! in one task) take turns: the later one then
        // re-enters instead of queueing behind its own node.
        let mut turn = Turn::new(&self.shared.acquiring, holder);
        let wait_turn = turn.mutex.clone().lock_owned();
        let held = match deadline {
            Some(d) => match tokio::time::timeout_at(d.into(), wait_turn).await {
                Ok(held) => held,
                Err(_) => return Ok(None),
            },
            None => wait_turn.await,
        };
        turn.held = Some(held);
        self.acquire_turn(holder, wait, deadline, basis).await
    }

    async fn acquire_turn(
        &self,
        holder: HolderId,
        wait: Wait,
        deadline: Option<Instant>,
        basis: Basis<'_>,
    ) -> Result<Option<Arc<Hold>>> {
        if let Some((hold, _)) = self.shared.holders.get(holder) {
            // Re-enter only a hold that is Held: wait out Suspended, refuse Lost.
            if !hold.wait_held(deadline).await? {
                return Ok(None);
            }
            if let Some(hold) = self.shared.holders.reenter(holder) {
                return Ok(Some(hold));
            }
        }
        // A racing lock (the non-fair mutex) races once per process: its Curator-style holds
        // come through the local queue too, so a release wakes one racer per process.
        let attempt = if self.shared.internals.races() {
            self.attempt_guarded(wait).await?
        } else {
            self.attempt(wait, basis).await?
        };
        let Some(hold) = attempt else {
            return Ok(None);
        };
        // No await between winning and recording: a cancelled caller cannot lose a won node.
        if !self.shared.holders.insert(holder, hold.clone()) {
            // Cannot happen while acquires take turns; never keep two nodes for one holder.
            hold.release_in_background();
            return Ok(self.shared.holders.reenter(holder));
        }
        Ok(Some(hold))
    }

    /// One new hold (no reentrancy), for a guard or a first Curator-style hold.
    pub(crate) async fn attempt(&self, wait: Wait, basis: Basis<'_>) -> Result<Option<Arc<Hold>>> {
        let revocable = self.shared.revocable.load(Ordering::SeqCst);
        let data = self.node_data(revocable);
        let hold = self.shared.internals.attempt_lock(wait, data, basis).await?;
        if revocable {
            // Watch our node from the start, so a request made while we waited is seen at once.
            if let Some(hold) = &hold {
                drop(hold.watch_data());
            }
        }
        Ok(hold)
    }

    /// Releases one hold of the calling task (or thread). The last release deletes the lock node.
    ///
    /// # Errors
    /// * [`Error::NotOwner`] if the caller holds nothing (Curator's `IllegalMonitorStateException`);
    ///   a guard is not the task's hold.
    /// * The delete's error if it failed — or [`Error::DeadlineExceeded`] when it could not finish
    ///   within the connection timeout, the most a release waits: the hold is gone either way, and
    ///   the node stays queued for guaranteed deletion in the background (never forgotten, unlike
    ///   CURATOR-678).
    ///
    /// # Cancel safety
    /// Cancel safe: the hold is released at the first poll and the delete continues in the background.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn work() -> zk_curator::Result<()> { Ok(()) }
    /// # async fn demo(mutex: zk_curator::locks::InterProcessMutex) -> zk_curator::Result<()> {
    /// mutex.acquire().await?;
    /// let outcome = work().await;
    /// mutex.release().await?; // on every path: nobody else can release this task's hold
    /// outcome
    /// # }
    /// ```
    pub async fn release(&self) -> Result<()> {
        let holder = HolderId::current();
        match self.shared.holders.release(holder) {
            None => {
                Err(Error::NotOwner { path: self.path().to_string(), reason: "the caller does not hold this lock" })
            }
            Some(Released::StillHeld(_)) => Ok(()),
            Some(Released::Last(hold)) => release_hold(&hold, self.shared.internals.labels()).await,
        }
    }

    /// True if this instance holds the lock — through any task's Curator-style hold or any live
    /// guard (Curator's `isAcquiredInThisProcess`, which is per instance despite its name).
    pub fn is_acquired_in_this_process(&self) -> bool {
        !self.shared.holders.is_empty() || self.shared.guards.load(Ordering::SeqCst) > 0
    }

    /// True if the calling task (or thread) holds the lock Curator-style (guards do not count).
    pub fn is_owned_by_current_task(&self) -> bool {
        self.shared.holders.get(HolderId::current()).is_some()
    }

    /// The calling holder's lock node path, if it holds the lock Curator-style (Curator's `getLockPath`).
    pub fn lock_node_path(&self) -> Option<String> {
        self.current_hold().map(|hold| hold.path().to_string())
    }

    /// The calling holder's Curator-style hold (node, token, state, guarded writes), if any.
    pub fn current_hold(&self) -> Option<Arc<Hold>> {
        self.shared.holders.get(HolderId::current()).map(|(hold, _)| hold)
    }

    /// Every contender's node, full paths in lock order (the holder first). Includes foreign
    /// children, as Curator does.
    ///
    /// # Errors
    /// Server errors after retries.
    ///
    /// # Cancel safety
    /// Cancel safe (read only).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(mutex: zk_curator::locks::InterProcessMutex) -> zk_curator::Result<()> {
    /// let nodes = mutex.participant_nodes().await?;
    /// if let Some(holder) = nodes.first() {
    ///     println!("held through {holder}, {} waiting", nodes.len() - 1);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn participant_nodes(&self) -> Result<Vec<String>> {
        self.shared.internals.participant_nodes(None).await
    }

    /// [`participant_nodes`](Self::participant_nodes) within `timeout` (a [`Duration`] or an
    /// instant, see [`Deadline`](crate::Deadline)), whatever the connection does: an operation, so
    /// running out of time is an error.
    ///
    /// # Errors
    /// [`Error::DeadlineExceeded`] naming the path when `timeout` passed first; server errors after
    /// retries.
    ///
    /// # Cancel safety
    /// Cancel safe (read only).
    ///
    /// # Examples
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(mutex: zk_curator::locks::InterProcessMutex) -> zk_curator::Result<()> {
    /// let nodes = mutex.participant_nodes_within(Duration::from_secs(2)).await?;
    /// println!("{} contenders on {}", nodes.len(), mutex.path());
    /// # Ok(()) }
    /// ```
    pub async fn participant_nodes_within(&self, timeout: impl Into<crate::Deadline>) -> Result<Vec<String>> {
        let timeout = timeout.into().remaining();
        let listed = self.shared.internals.participant_nodes(Some(deadline_after(timeout)));
        crate::deadline::naming_timeout(Some(timeout), listed).await
    }

    /// The old name of [`participant_nodes_within`](Self::participant_nodes_within).
    ///
    /// # Errors
    /// As [`participant_nodes_within`](Self::participant_nodes_within).
    ///
    /// # Cancel safety
    /// Cancel safe (read only).
    #[deprecated(
        note = "use `participant_nodes_within`: a `_timeout` name is a wait that returns `Ok(false)`/`Ok(None)` on time-out; an operation that runs out of time fails, within a `_within` name"
    )]
    pub async fn participant_nodes_timeout(&self, timeout: Duration) -> Result<Vec<String>> {
        self.participant_nodes_within(timeout).await
    }

    /// Waits for the lock and returns a guard that owns the hold.
    ///
    /// Never re-enters: if this instance is already held (by a guard, or Curator-style by any
    /// task), the call queues behind that hold, like `tokio::sync::Mutex::lock`.
    ///
    /// Waits in the process's local queue: see
    /// [one node per process](#thousands-of-tasks-one-node-per-process).
    ///
    /// # Errors
    /// [`Error::Closed`] if the client is closed (also while waiting); server errors after the
    /// retry policy gave up.
    ///
    /// # Cancel safety
    /// Cancel safe, as [`acquire`](Self::acquire).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// let mutex = zk_curator::locks::InterProcessMutex::new(&client, "/locks/report")?;
    /// let guard = mutex.lock().await?;
    /// // The guard may move to another task; the hold goes with it.
    /// tokio::spawn(async move {
    ///     println!("holding {} with token {}", guard.node_path(), guard.fencing_token());
    ///     guard.release().await
    /// });
    /// # Ok(()) }
    /// ```
    pub async fn lock(&self) -> Result<MutexGuard<D>> {
        let hold = self.attempt_guarded(Wait::Forever).await?;
        Ok(self.guard(hold.ok_or_else(|| Error::Closed { path: self.path().to_string() })?))
    }

    /// Like [`lock`](Self::lock), giving up after `timeout` (`Ok(None)`, our node deleted). The call
    /// returns within `timeout` (plus a few ms) whatever the connection does; a zero timeout is
    /// [`try_lock`](Self::try_lock).
    ///
    /// # Errors
    /// As [`lock`](Self::lock).
    ///
    /// # Cancel safety
    /// Cancel safe, as [`acquire`](Self::acquire).
    ///
    /// # Examples
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(mutex: zk_curator::locks::InterProcessMutex) -> zk_curator::Result<()> {
    /// match mutex.try_lock_for(Duration::from_secs(5)).await? {
    ///     Some(guard) => {
    ///         // ... work, passing guard.fencing_token() to the store ...
    ///         guard.release().await?;
    ///     }
    ///     None => println!("busy; trying again later"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_lock_for(&self, timeout: impl Into<crate::Deadline>) -> Result<Option<MutexGuard<D>>> {
        let timeout = timeout.into().remaining();
        Ok(self.attempt_guarded(Wait::from_timeout(timeout)).await?.map(|hold| self.guard(hold)))
    }

    /// One attempt (a create and a listing): the guard if the lock was free, else `Ok(None)`.
    /// Returns `Ok(None)` at once, sending nothing, when the client has no connection, or when
    /// another task of this process holds or waits for the lock through the local queue.
    ///
    /// # Errors
    /// As [`lock`](Self::lock).
    ///
    /// # Cancel safety
    /// Cancel safe, as [`acquire`](Self::acquire).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(mutex: zk_curator::locks::InterProcessMutex) -> zk_curator::Result<()> {
    /// let Some(guard) = mutex.try_lock().await? else {
    ///     return Ok(()); // another process runs the job
    /// };
    /// // ... run the job ...
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn try_lock(&self) -> Result<Option<MutexGuard<D>>> {
        self.try_lock_for(Duration::ZERO).await
    }

    pub(crate) fn guard(&self, hold: Arc<Hold>) -> MutexGuard<D> {
        self.shared.guards.fetch_add(1, Ordering::SeqCst);
        MutexGuard { mutex: self.clone(), hold, released: false }
    }
}

impl<D: LockDriver> super::interprocess_lock::InterProcessLock for InterProcessMutex<D> {
    fn path(&self) -> &str {
        InterProcessMutex::path(self)
    }
    fn acquire(&self) -> super::interprocess_lock::LockFuture<'_, ()> {
        Box::pin(InterProcessMutex::acquire(self))
    }
    fn acquire_timeout(&self, timeout: Duration) -> super::interprocess_lock::LockFuture<'_, bool> {
        Box::pin(InterProcessMutex::acquire_timeout(self, timeout))
    }
    fn release(&self) -> super::interprocess_lock::LockFuture<'_, ()> {
        Box::pin(InterProcessMutex::release(self))
    }
    fn is_acquired_in_this_process(&self) -> bool {
        InterProcessMutex::is_acquired_in_this_process(self)
    }
    fn release_abandoned(&self, holder: HolderId) {
        if let Some(Released::Last(hold)) = self.shared.holders.release(holder) {
            hold.release_in_background();
        }
    }
    fn holds_of(&self, holder: HolderId) -> Vec<Arc<Hold>> {
        self.shared.holders.get(holder).map(|(hold, _)| hold).into_iter().collect()
    }
}

impl<D: LockDriver> Drop for Shared<D> {
    /// The last clone is gone, so nobody can release the Curator-style holds still recorded: each
    /// belongs to a task (or thread) that ended without its releases, or that lost its lock
    /// instance. Release them — otherwise their nodes would block every contender until the session
    /// ends — and say so: this is a bug in the caller.
    fn drop(&mut self) {
        for (holder, hold, count) in self.holders.drain() {
            tracing::warn!(
                path = %self.internals.base_path(),
                node = %hold.path(),
                ?holder,
                holds = count,
                "Curator-style hold never released: its task ended (an early `?`, a panic, an abort) or dropped \
                 every clone of the lock before release(); deleting its node now. Prefer lock() and its guard"
            );
            hold.release_in_background();
        }
    }
}

type Turns = parking_lot::Mutex<HashMap<HolderId, Arc<tokio::sync::Mutex<()>>>>;

/// One holder's turn among its concurrent acquires; its entry leaves the map with the last user,
/// also when the acquire is cancelled.
struct Turn<'a> {
    turns: &'a Turns,
    holder: HolderId,
    mutex: Arc<tokio::sync::Mutex<()>>,
    held: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl<'a> Turn<'a> {
    fn new(turns: &'a Turns, holder: HolderId) -> Self {
        let mutex = turns.lock().entry(holder).or_default().clone();
        Self { turns, holder, mutex, held: None }
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.held = None;
        let mut turns = self.turns.lock();
        // Only the map and this turn still refer to it: nobody else of this holder is waiting.
        if Arc::strong_count(&self.mutex) == 2 {
            turns.remove(&self.holder);
        }
    }
}

/// Releases `hold` in a `release` span with the fields of the `acquire` span (`recipe`, `path`).
async fn release_hold(hold: &Hold, labels: &LockLabels) -> Result<()> {
    let start = std::time::Instant::now();
    let span =
        tracing::debug_span!("release", recipe = labels.recipe().as_str(), path = %labels.path(), node = %hold.path());
    // Boxed: a task that waits for its turn and then releases carries its release future the whole
    // time, and the delete behind it is the large part (a local holder's release only hands on).
    let result = Box::pin(hold.release()).instrument(span.clone()).await;
    debug!(parent: &span, took_us = start.elapsed().as_micros() as u64, ok = result.is_ok(), "released");
    result
}

/// An exclusive hold of an [`InterProcessMutex`], owned: `Send + 'static`, movable between tasks
/// (the hold moves with it), never shared and never re-entered. Not `Clone`, as
/// `tokio::sync::MutexGuard` is not: an exclusive hold moves with its one guard.
///
/// Release it with [`release`](Self::release) to learn whether the delete worked; if dropped, it
/// is released in the background (never panics, with or without a runtime).
#[must_use = "dropping the guard releases the lock"]
pub struct MutexGuard<D: LockDriver = StandardLockDriver> {
    mutex: InterProcessMutex<D>,
    hold: Arc<Hold>,
    released: bool,
}

impl<D: LockDriver> std::fmt::Debug for MutexGuard<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MutexGuard")
            .field("node", &self.hold.path())
            .field("token", &self.hold.fencing_token())
            .finish()
    }
}

impl<D: LockDriver> MutexGuard<D> {
    /// The lock node's full path.
    pub fn node_path(&self) -> &str {
        self.hold.path()
    }

    /// The fencing token of this hold (see [`FencingToken`]).
    pub fn fencing_token(&self) -> FencingToken {
        self.hold.fencing_token()
    }

    /// The hold's state now.
    pub fn hold_state(&self) -> HoldState {
        self.hold.hold_state()
    }

    /// A receiver of hold-state changes, for `select!`-ing work against losing the lock.
    pub fn watch_state(&self) -> tokio::sync::watch::Receiver<HoldState> {
        self.hold.watch_state()
    }

    /// The hold's state changes as a stream, ending after [`HoldState::Lost`].
    pub fn state_changes(&self) -> HoldStateStream {
        self.hold.state_changes()
    }

    /// Resolves once someone asked this holder to release (Curator's revocation: `__REVOKE__`
    /// written into our node, e.g. by [`Revoker::attempt_revoke`](crate::locks::Revoker::attempt_revoke)).
    /// Works on any hold; [`InterProcessMutex::make_revocable`] makes the nodes Curator-compatible.
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn work() {}
    /// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// let mutex = zk_curator::locks::InterProcessMutex::new(&client, "/locks/report")?;
    /// mutex.make_revocable();
    /// let guard = mutex.lock().await?;
    /// tokio::select! {
    ///     _ = work() => {}
    ///     _ = guard.revocation_requested() => println!("asked to let go: stopping early"),
    /// }
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn revocation_requested(&self) {
        self.hold.revocation_requested().await
    }

    /// Resolves once the lock is certainly lost.
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn write_report(_token: zk_curator::locks::FencingToken) {}
    /// # async fn demo(mutex: zk_curator::locks::InterProcessMutex) -> zk_curator::Result<()> {
    /// let guard = mutex.lock().await?;
    /// tokio::select! {
    ///     _ = write_report(guard.fencing_token()) => {}
    ///     _ = guard.lost() => eprintln!("lock lost: stop writing"),
    /// }
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn lost(&self) {
        self.hold.lost().await
    }

    /// The underlying hold.
    pub fn hold(&self) -> &Arc<Hold> {
        &self.hold
    }

    /// A write that ZooKeeper applies only if our lock node still exists; see [`Hold::guarded_write`].
    ///
    /// # Errors
    /// [`Error::LockLost`] if the lock is lost; see [`Hold::guarded_write`].
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped commit may still be applied (only while the lock is held).
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(mutex: zk_curator::locks::InterProcessMutex) -> zk_curator::Result<()> {
    /// let guard = mutex.lock().await?;
    /// let write = zk_curator::locks::GuardedWrite::new().set_data("/reports/latest", b"done", None);
    /// guard.guarded_write(write).await?;
    /// # Ok(()) }
    /// ```
    pub async fn guarded_write(&self, write: GuardedWrite) -> Result<Vec<crate::OpResult>> {
        self.hold.guarded_write(write).await
    }

    /// Releases the hold: deletes the lock node and waits for it (at most the connection timeout).
    ///
    /// # Errors
    /// The delete's error, or [`Error::DeadlineExceeded`] when it could not finish within the
    /// connection timeout; the node stays queued for guaranteed deletion in the background.
    ///
    /// # Cancel safety
    /// Cancel safe: the hold is released at the first poll; the delete continues in the background.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(mutex: zk_curator::locks::InterProcessMutex) -> zk_curator::Result<()> {
    /// let guard = mutex.lock().await?;
    /// // ... work ...
    /// if let Err(e) = guard.release().await {
    ///     // The hold is gone anyway; the node keeps being deleted in the background.
    ///     eprintln!("release of {}: {e}", mutex.path());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn release(mut self) -> Result<()> {
        self.released = true;
        self.mutex.shared.guards.fetch_sub(1, Ordering::SeqCst);
        release_hold(&self.hold, self.mutex.shared.internals.labels()).await
    }
}

impl<D: LockDriver> Drop for MutexGuard<D> {
    fn drop(&mut self) {
        if !self.released {
            self.mutex.shared.guards.fetch_sub(1, Ordering::SeqCst);
            self.hold.release_in_background();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_holders_turn_entry_leaves_with_its_last_user_even_when_cancelled() {
        let turns = Turns::default();
        let holder = HolderId::current();
        let mut first = Turn::new(&turns, holder);
        first.held = Some(first.mutex.clone().lock_owned().await);
        {
            // A second acquire of the same holder waits for its turn and is cancelled.
            let second = Turn::new(&turns, holder);
            let waiting = second.mutex.clone().lock_owned();
            assert!(tokio::time::timeout(Duration::from_millis(10), waiting).await.is_err());
        }
        assert_eq!(turns.lock().len(), 1, "the first acquire still has its turn");
        drop(first);
        assert!(turns.lock().is_empty(), "no entry is left once every acquire of the holder is done");
    }
}
