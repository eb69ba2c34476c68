//! [`InterProcessSemaphoreV2`] and its [`Lease`]: Curator's counting semaphore, built on the same
//! layers as the locks.
//!
//! Wire protocol (Curator's): an internal mutex at `<path>/locks` serialises acquirers; leases are
//! `<path>/leases/_c_<uuid>-lease-<seq>` (EPHEMERAL_SEQUENTIAL). The holder of the internal mutex
//! creates its lease node, then lists the leases with a children watch and waits — still holding
//! the internal mutex — until there are at most `max_leases` of them, then releases the internal
//! mutex. So Curator and Rust acquirers take turns on one semaphore and never exceed the limit
//! together. The lease wait is [`LockInternals`] with [`LeaseDriver`]'s children-watch verdict, not
//! a second loop.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tracing::debug;

use super::driver::{Contender, LockDriver, Verdict};
use super::hold::{FencingToken, GuardedWrite, Hold, HoldState, HoldStateStream, Settled};
use super::internals::{Basis, LockInternals, Wait, CLEANUP_SLACK};
use super::mutex::InterProcessMutex;
use crate::error::{Error, ErrorCode, Result};
use crate::framework::paths;
use crate::metrics::{measure_acquire, LockLabels, Recipe};
use crate::{CuratorClient, OpResult};

/// Curator's lease node name.
pub const LEASE_NODE_NAME: &str = "lease-";
/// Curator's child path of the internal mutex.
pub const SEMAPHORE_LOCK_PARENT: &str = "locks";
/// Curator's child path of the leases.
pub const SEMAPHORE_LEASE_PARENT: &str = "leases";

/// The lease driver: a lease is granted when the leases (ours included) number at most the
/// maximum; otherwise wait for any change of the leases (Curator's rule, count-based, not
/// position-based — only the internal mutex's holder ever asks).
#[derive(Clone, Copy, Debug, Default)]
pub struct LeaseDriver;

impl LeaseDriver {
    fn decide(children: &[String], contender: &Contender<'_>) -> Verdict {
        if !children.iter().any(|child| child == contender.our_name) {
            Verdict::NotInQueue
        } else if children.len() <= contender.max_leases {
            Verdict::Acquired
        } else {
            Verdict::WatchChildren
        }
    }
}

impl LockDriver for LeaseDriver {
    fn lock_name(&self) -> &str {
        LEASE_NODE_NAME
    }

    fn verdict(&self, sorted_children: &[String], contender: &Contender<'_>) -> Verdict {
        Self::decide(sorted_children, contender)
    }

    fn evaluate(&self, children: Vec<String>, contender: &Contender<'_>) -> Verdict {
        Self::decide(&children, contender)
    }
}

/// A counting semaphore shared across processes, wire-compatible with Curator's
/// `InterProcessSemaphoreV2`: at most `max_leases` [`Lease`]s are held at once, across every
/// process and library using the path.
///
/// The maximum is fixed ([`new`](Self::new)) or read from a shared counter node that may change at
/// run time ([`with_shared_count`](Self::with_shared_count), Curator's `SharedCount`).
///
/// ```no_run
/// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
/// let jobs = zk_curator::locks::InterProcessSemaphoreV2::new(&client, "/throttle/reports", 3)?;
/// let lease = jobs.acquire().await?; // one of at most 3, across all processes
/// // ... run the job ...
/// lease.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct InterProcessSemaphoreV2 {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    path: String,
    lock: InterProcessMutex,
    leases: LockInternals<LeaseDriver>,
    data: Option<Vec<u8>>,
    /// The shared count the maximum follows ([`InterProcessSemaphoreV2::with_shared_count`]).
    count: std::sync::OnceLock<crate::shared::SharedCount>,
}

impl InterProcessSemaphoreV2 {
    /// A semaphore on `path` with at most `max_leases` leases.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] naming `path`; [`Error::InvalidArgument`] for zero leases.
    pub fn new(client: &CuratorClient, path: &str, max_leases: usize) -> Result<Self> {
        Self::build(client, path, max_leases, None, Recipe::Semaphore)
    }

    /// Like [`new`](Self::new), writing `data` into every lease node (Curator's node data).
    ///
    /// # Errors
    /// As [`new`](Self::new); [`Error::InvalidArgument`] naming its size and `path` if `data` is
    /// larger than the client's [`max_data_size`](crate::CuratorClientBuilder::max_data_size).
    pub fn with_data(client: &CuratorClient, path: &str, max_leases: usize, data: impl Into<Vec<u8>>) -> Result<Self> {
        Self::build(client, path, max_leases, Some(data.into()), Recipe::Semaphore)
    }

    /// A semaphore measured as `recipe` (a semaphore mutex is one).
    fn build(
        client: &CuratorClient,
        path: &str,
        max_leases: usize,
        data: Option<Vec<u8>>,
        recipe: Recipe,
    ) -> Result<Self> {
        paths::validate_path(path)?;
        if max_leases == 0 {
            return Err(Error::invalid_argument("max_leases", 0, "must be at least 1"));
        }
        client.check_data_size("data", path, data.as_ref().map_or(0, Vec::len))?;
        // An acquire is measured as a whole (the internal mutex and the lease, see `acquire_one`),
        // and its hold is the lease: the internal mutex is traced only.
        let lock_path = paths::join(path, SEMAPHORE_LOCK_PARENT);
        let driver = super::driver::StandardLockDriver::default();
        let lock = InterProcessMutex::build(client, &lock_path, driver, None, LockLabels::internal(recipe, path))?;
        let labels = client.lock_labels(recipe, path);
        let lease_path = paths::join(path, SEMAPHORE_LEASE_PARENT);
        let leases = LockInternals::new(client, &lease_path, LeaseDriver, max_leases, labels)?;
        Ok(Self { shared: Arc::new(Shared { path: path.to_string(), lock, leases, data, count: Default::default() }) })
    }

    /// A semaphore whose maximum is the value of the counter node `count_path` (Curator's
    /// `SharedCount`: a 4-byte big-endian integer), followed as it changes. The node is created
    /// with `seed` if it does not exist.
    ///
    /// # Errors
    /// As [`new`](Self::new) (`seed` must be at least 1); server errors reading the counter.
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// // The limit is the integer in /throttle/reports-limit (created with 3), changeable at run time.
    /// let jobs = zk_curator::locks::InterProcessSemaphoreV2::with_shared_count(
    ///     &client,
    ///     "/throttle/reports",
    ///     "/throttle/reports-limit",
    ///     3,
    /// )
    /// .await?;
    /// println!("at most {} at once", jobs.max_leases());
    /// # Ok(()) }
    /// ```
    pub async fn with_shared_count(client: &CuratorClient, path: &str, count_path: &str, seed: i32) -> Result<Self> {
        paths::validate_path(count_path)?;
        if seed < 1 {
            return Err(Error::invalid_argument("seed", seed, "must be at least 1"));
        }
        // Every argument is checked before anything is written.
        let semaphore = Self::build(client, path, 1, None, Recipe::Semaphore)?;
        let count = crate::shared::SharedCount::start(client, count_path, seed).await?;
        // The stream starts from the value read by `start`, which sets the first maximum.
        let changes = count.changes();
        semaphore.shared.leases.set_max_leases(count.count().max(0) as usize);
        let _ = semaphore.shared.count.set(count);
        let weak = Arc::downgrade(&semaphore.shared);
        tokio::spawn(follow_count(weak, changes));
        Ok(semaphore)
    }

    /// The semaphore's path.
    pub fn path(&self) -> &str {
        &self.shared.path
    }

    /// The current maximum number of leases.
    pub fn max_leases(&self) -> usize {
        self.shared.leases.max_leases()
    }

    /// Waits for one lease.
    ///
    /// # Errors
    /// [`Error::Closed`]; server errors after the retry policy gave up.
    ///
    /// # Cancel safety
    /// Cancel safe: no lease node (and no internal-mutex node) outlives a dropped call.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(jobs: zk_curator::locks::InterProcessSemaphoreV2) -> zk_curator::Result<()> {
    /// let lease = jobs.acquire().await?;
    /// // ... run the job; the lease may move to another task ...
    /// lease.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire(&self) -> Result<Lease> {
        let lease = self.acquire_one(Wait::Forever).await?;
        lease.ok_or_else(|| Error::Closed { path: self.path().to_string() })
    }

    /// One lease within `timeout` (strictly), or `Ok(None)`; a zero timeout is one attempt.
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
    /// # async fn demo(jobs: zk_curator::locks::InterProcessSemaphoreV2) -> zk_curator::Result<()> {
    /// let Some(lease) = jobs.acquire_timeout(Duration::from_secs(10)).await? else {
    ///     return Ok(()); // every lease stayed taken for 10 s
    /// };
    /// // ... run the job ...
    /// lease.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire_timeout(&self, timeout: impl Into<crate::Deadline>) -> Result<Option<Lease>> {
        let timeout = timeout.into().remaining();
        self.acquire_one(Wait::from_timeout(timeout)).await
    }

    /// Waits for `n` leases; on an error, any already taken are given back.
    ///
    /// Leases are taken one at a time, as in Curator: two callers that each hold some leases and
    /// wait for more than are left can wait for each other forever. Prefer
    /// [`acquire_many_timeout`](Self::acquire_many_timeout) when several callers take more than one.
    ///
    /// Every lease handed out is [`HoldState::Held`] on the current session: one taken early may
    /// be suspended or lost while a later one is awaited, so once all are taken each is checked —
    /// a suspended one is waited for until it is `Held` again; if one is lost, all are given back
    /// and taken again.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] at once for `n` = 0 or more than the maximum; otherwise as
    /// [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    /// Cancel safe: leases already taken are released in the background.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(jobs: zk_curator::locks::InterProcessSemaphoreV2) -> zk_curator::Result<()> {
    /// let leases = jobs.acquire_many(2).await?; // a job that counts double
    /// // ... run it ...
    /// zk_curator::locks::return_all(leases).await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire_many(&self, n: usize) -> Result<Vec<Lease>> {
        let leases = self.acquire_many_wait(n, Wait::Forever).await?;
        leases.ok_or_else(|| Error::Closed { path: self.path().to_string() })
    }

    /// `n` leases within one `timeout` for all of them, or `Ok(None)` with every lease already
    /// taken given back (Curator gives each lease the full timeout). As with
    /// [`acquire_many`](Self::acquire_many), every lease handed out is `Held`: a suspended one is
    /// waited for until the deadline, lost ones are taken again while time is left; a zero
    /// timeout succeeds only if every lease is `Held` at the end of its one attempt.
    ///
    /// # Errors
    /// As [`acquire_many`](Self::acquire_many).
    ///
    /// # Cancel safety
    /// As [`acquire_many`](Self::acquire_many).
    ///
    /// # Examples
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(jobs: zk_curator::locks::InterProcessSemaphoreV2) -> zk_curator::Result<()> {
    /// if let Some(leases) = jobs.acquire_many_timeout(2, Duration::from_secs(10)).await? {
    ///     // ... run it ...
    ///     zk_curator::locks::return_all(leases).await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn acquire_many_timeout(
        &self,
        n: usize,
        timeout: impl Into<crate::Deadline>,
    ) -> Result<Option<Vec<Lease>>> {
        let timeout = timeout.into().remaining();
        self.acquire_many_wait(n, Wait::from_timeout(timeout)).await
    }

    async fn acquire_many_wait(&self, n: usize, wait: Wait) -> Result<Option<Vec<Lease>>> {
        if n == 0 {
            return Err(Error::invalid_argument("n", 0, "must be at least 1"));
        }
        if n > self.max_leases() {
            return Err(Error::invalid_argument("n", n, "is more than the semaphore's maximum number of leases"));
        }
        // Give back what was taken within the call's deadline: deletes that cannot finish by
        // then go on in the background (guaranteed), never past the deadline. One attempt waits
        // a few ms for them, counted from the give-back (the attempts themselves take longer).
        let give_back_by = || match wait {
            Wait::OneAttempt => Some(std::time::Instant::now() + CLEANUP_SLACK),
            _ => wait.deadline(),
        };
        loop {
            // Grows as leases come: `n` may be as large as the maximum (even `usize::MAX`).
            let mut leases = Vec::new();
            while leases.len() < n {
                let outcome = self.acquire_one(wait).await;
                if let Ok(Some(lease)) = outcome {
                    leases.push(lease);
                    continue;
                }
                let _ = return_all_by(leases, give_back_by()).await;
                return outcome.map(|_| None);
            }
            // The leases are taken one after another: an earlier one may have been suspended or
            // lost while a later one was awaited. They are handed out only when each is Held.
            let settled = Hold::settle_all(
                leases.iter().map(|lease| lease.hold.clone()).collect(),
                wait != Wait::OneAttempt,
                wait.deadline(),
            )
            .await;
            match settled {
                Ok(Settled::Held) => return Ok(Some(leases)),
                Ok(Settled::NotHeld) => {
                    let _ = return_all_by(leases, give_back_by()).await;
                    return Ok(None);
                }
                Ok(Settled::Lost(node)) => {
                    let _ = return_all_by(leases, give_back_by()).await;
                    let time_left = wait.deadline().is_none_or(|d| d > std::time::Instant::now());
                    if wait == Wait::OneAttempt || !time_left {
                        return Ok(None);
                    }
                    debug!(path = %self.shared.path, %node, "a lease was lost while the others were taken: taking them again");
                }
                Err(e) => {
                    let _ = return_all_by(leases, give_back_by()).await;
                    return Err(e);
                }
            }
        }
    }

    /// One lease, measured as one acquire of the semaphore (the wait for the internal mutex
    /// included).
    async fn acquire_one(&self, wait: Wait) -> Result<Option<Lease>> {
        let leases = &self.shared.leases;
        let attempt = self.acquire_one_unmeasured(wait);
        measure_acquire(leases.labels(), LEASE_NODE_NAME, |lease: &Lease| lease.node_path(), attempt).await
    }

    async fn acquire_one_unmeasured(&self, wait: Wait) -> Result<Option<Lease>> {
        let data = self.shared.data.as_deref().unwrap_or(self.shared.leases.client().default_data());
        let mut restarts = self.shared.leases.client().retrying(&self.shared.path, wait.deadline());
        loop {
            // The internal mutex serialises acquirers, as Curator's does: only its holder counts
            // leases.
            let Some(turn) = self.shared.lock.attempt(wait, Basis::None).await? else {
                return Ok(None);
            };
            let turn = self.shared.lock.guard(turn);
            // The lease stands on the internal mutex: it is created on the mutex's session and
            // granted only while the mutex is held. A lease counted under a turn that died with
            // its session would count against the limit next to the new turn holder's lease.
            let lease = self.shared.leases.attempt_lock_unmeasured(wait, data, Basis::Elsewhere(turn.hold())).await;
            let turn_node = turn.node_path().to_string();
            // The next acquirer's turn starts when the server deletes our mutex node; the caller
            // need not wait for that round trip (the delete is guaranteed, in the background).
            drop(turn);
            match lease {
                Ok(lease) => return Ok(lease.map(|hold| Lease { hold, released: false })),
                // Our turn died (its session ended): give it up and start over, as Curator does
                // when its node is gone — within the same deadline; one attempt stays one.
                Err(Error::LockLost { node, .. }) if node == turn_node && wait != Wait::OneAttempt => {
                    debug!(path = %self.shared.path, "the semaphore's internal lock was lost while waiting; starting over");
                    // Each start-over counts against the retry policy, as Curator's
                    // RETRY_DUE_TO_MISSING_NODE does.
                    let lost = Error::code_on(&turn_node, ErrorCode::SessionExpired);
                    match restarts.backoff_or_fail(lost).await {
                        Ok(()) => {}
                        Err(Error::DeadlineExceeded { .. }) => return Ok(None),
                        Err(e) => return Err(e),
                    }
                }
                Err(Error::LockLost { node, .. }) if node == turn_node => return Ok(None),
                Err(e) => return Err(e),
            }
        }
    }

    /// The lease nodes, full paths (Curator's `getParticipantNodes`, which gives names).
    ///
    /// # Errors
    /// Server errors after retries.
    ///
    /// # Cancel safety
    /// Cancel safe (read only).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(jobs: zk_curator::locks::InterProcessSemaphoreV2) -> zk_curator::Result<()> {
    /// let leases = jobs.participant_nodes().await?;
    /// println!("{} of {} leases taken", leases.len(), jobs.max_leases());
    /// # Ok(()) }
    /// ```
    pub async fn participant_nodes(&self) -> Result<Vec<String>> {
        self.shared.leases.participant_nodes(None).await
    }
}

/// Gives every lease back; every release is attempted.
///
/// # Errors
/// The first failure (the others are logged); every failed delete stays queued in the background.
///
/// # Cancel safety
/// Cancel safe: leases not yet released are released in the background.
///
/// # Examples
/// ```no_run
/// # async fn demo(jobs: zk_curator::locks::InterProcessSemaphoreV2) -> zk_curator::Result<()> {
/// let mut leases = Vec::new();
/// for _ in 0..2 {
///     leases.push(jobs.acquire().await?);
/// }
/// // ... run the jobs ...
/// zk_curator::locks::return_all(leases).await?;
/// # Ok(()) }
/// ```
pub async fn return_all(leases: Vec<Lease>) -> Result<()> {
    return_all_by(leases, None).await
}

/// [`return_all`], waiting for the deletes until `deadline` at most (each at most the connection
/// timeout); what is not done by then goes on in the background.
async fn return_all_by(leases: Vec<Lease>, deadline: Option<std::time::Instant>) -> Result<()> {
    let mut first = None;
    for mut lease in leases {
        lease.released = true;
        if let Err(e) = lease.hold.release_by(deadline).await {
            debug!(%e, "returning a lease failed; its delete goes on in the background");
            first.get_or_insert(e);
        }
    }
    first.map_or(Ok(()), Err)
}

/// One lease of an [`InterProcessSemaphoreV2`]: owned, `Send + 'static`, released by
/// [`release`](Self::release) or, if dropped, in the background (never panics, with or without a
/// runtime). Not `Clone`: a lease is released once, by its one owner (as a guard).
#[must_use = "dropping a lease releases it"]
#[derive(Debug)]
pub struct Lease {
    hold: Arc<Hold>,
    released: bool,
}

impl Lease {
    /// The lease node's full path.
    pub fn node_path(&self) -> &str {
        self.hold.path()
    }

    /// The lease node's name.
    pub fn node_name(&self) -> &str {
        self.hold.name()
    }

    /// The data written into the lease node.
    pub fn data(&self) -> Vec<u8> {
        self.hold.data()
    }

    /// The fencing token of this lease (its node's creation zxid).
    pub fn fencing_token(&self) -> FencingToken {
        self.hold.fencing_token()
    }

    /// The lease's state now.
    pub fn hold_state(&self) -> HoldState {
        self.hold.hold_state()
    }

    /// A receiver of hold-state changes.
    pub fn watch_state(&self) -> tokio::sync::watch::Receiver<HoldState> {
        self.hold.watch_state()
    }

    /// The lease's state changes, ending after [`HoldState::Lost`].
    pub fn state_changes(&self) -> HoldStateStream {
        self.hold.state_changes()
    }

    /// Resolves once the lease is certainly lost.
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run_job() {}
    /// # async fn demo(jobs: zk_curator::locks::InterProcessSemaphoreV2) -> zk_curator::Result<()> {
    /// let lease = jobs.acquire().await?;
    /// tokio::select! {
    ///     _ = run_job() => {}
    ///     _ = lease.lost() => eprintln!("lease lost: stop the job"),
    /// }
    /// lease.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn lost(&self) {
        self.hold.lost().await
    }

    /// The underlying hold.
    pub fn hold(&self) -> &Arc<Hold> {
        &self.hold
    }

    /// A write applied only while the lease node exists; see [`Hold::guarded_write`].
    ///
    /// # Errors
    /// [`Error::LockLost`] if the lease is lost; see [`Hold::guarded_write`].
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped commit may still be applied (only while the lease is held).
    pub async fn guarded_write(&self, write: GuardedWrite) -> Result<Vec<OpResult>> {
        self.hold.guarded_write(write).await
    }

    /// Gives the lease back: deletes its node and waits (at most the connection timeout).
    ///
    /// # Errors
    /// The delete's error, or [`Error::DeadlineExceeded`]; the node stays queued for deletion.
    ///
    /// # Cancel safety
    /// Cancel safe: the lease is released at the first poll; the delete goes on in the background.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(jobs: zk_curator::locks::InterProcessSemaphoreV2) -> zk_curator::Result<()> {
    /// let lease = jobs.acquire().await?;
    /// // ... run the job ...
    /// if let Err(e) = lease.release().await {
    ///     // The lease is given back anyway; its node keeps being deleted in the background.
    ///     eprintln!("returning {}: {e}", jobs.path());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn release(mut self) -> Result<()> {
        self.released = true;
        self.hold.release().await
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if !self.released {
            self.hold.release_in_background();
        }
    }
}

/// Keeps a semaphore's maximum equal to its shared count while the semaphore exists. The count
/// lives in the semaphore: when the semaphore goes, the count's follower stops and the stream
/// ends.
async fn follow_count(semaphore: Weak<Shared>, mut changes: crate::shared::SharedValueStream<i32>) {
    while let Some(value) = changes.next().await {
        let Some(shared) = semaphore.upgrade() else { return };
        shared.leases.set_max_leases((*value.value()).max(0) as usize);
    }
}

/// A semaphore with one lease (Curator's `InterProcessSemaphoreMutex`): a mutex that is not
/// re-entrant (a second acquire, even by the same task, waits) and may be released by any task.
#[derive(Clone, Debug)]
pub struct InterProcessSemaphoreMutex {
    semaphore: InterProcessSemaphoreV2,
    lease: Arc<parking_lot::Mutex<Option<Lease>>>,
}

impl InterProcessSemaphoreMutex {
    /// A semaphore mutex on `path` (Curator's layout: `<path>/locks`, `<path>/leases`).
    ///
    /// # Errors
    /// [`Error::InvalidPath`] naming `path`.
    pub fn new(client: &CuratorClient, path: &str) -> Result<Self> {
        let semaphore = InterProcessSemaphoreV2::build(client, path, 1, None, Recipe::SemaphoreMutex)?;
        Ok(Self { semaphore, lease: Default::default() })
    }

    /// The path.
    pub fn path(&self) -> &str {
        self.semaphore.path()
    }

    /// Waits for the lock. Not re-entrant: while this instance holds it, a second acquire waits.
    ///
    /// # Errors
    /// As [`InterProcessSemaphoreV2::acquire`].
    ///
    /// # Cancel safety
    /// Cancel safe: nothing is left behind.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(lock: zk_curator::locks::InterProcessSemaphoreMutex) -> zk_curator::Result<()> {
    /// lock.acquire().await?;
    /// // ... work; any task may release ...
    /// lock.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire(&self) -> Result<()> {
        let lease = self.semaphore.acquire().await?;
        *self.lease.lock() = Some(lease);
        Ok(())
    }

    /// Like [`acquire`](Self::acquire) within `timeout` (`Ok(false)` if not acquired), strictly.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    /// Cancel safe: nothing is left behind.
    ///
    /// # Examples
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(lock: zk_curator::locks::InterProcessSemaphoreMutex) -> zk_curator::Result<()> {
    /// if lock.acquire_timeout(Duration::from_secs(5)).await? {
    ///     // ... work ...
    ///     lock.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn acquire_timeout(&self, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let timeout = timeout.into().remaining();
        let Some(lease) = self.semaphore.acquire_timeout(timeout).await? else {
            return Ok(false);
        };
        *self.lease.lock() = Some(lease);
        Ok(true)
    }

    /// Releases the lock, from any task.
    ///
    /// # Errors
    /// [`Error::NotOwner`] if this instance does not hold it; the delete's error otherwise.
    ///
    /// # Cancel safety
    /// Cancel safe: released at the first poll, the delete goes on in the background.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(lock: zk_curator::locks::InterProcessSemaphoreMutex) -> zk_curator::Result<()> {
    /// lock.acquire().await?;
    /// let lock = lock.clone();
    /// tokio::spawn(async move {
    ///     // ... work ...
    ///     lock.release().await // another task than the one that acquired
    /// });
    /// # Ok(()) }
    /// ```
    pub async fn release(&self) -> Result<()> {
        let lease = self.lease.lock().take();
        match lease {
            Some(lease) => lease.release().await,
            None => Err(Error::NotOwner { path: self.path().to_string(), reason: "the semaphore mutex is not held" }),
        }
    }

    /// True while this instance holds the lock.
    pub fn is_acquired_in_this_process(&self) -> bool {
        self.lease.lock().is_some()
    }

    /// The current hold, if this instance holds the lock.
    pub fn current_hold(&self) -> Option<Arc<Hold>> {
        self.lease.lock().as_ref().map(|lease| lease.hold().clone())
    }
}

impl super::interprocess_lock::InterProcessLock for InterProcessSemaphoreMutex {
    fn path(&self) -> &str {
        InterProcessSemaphoreMutex::path(self)
    }
    fn acquire(&self) -> super::interprocess_lock::LockFuture<'_, ()> {
        Box::pin(InterProcessSemaphoreMutex::acquire(self))
    }
    fn acquire_timeout(&self, timeout: Duration) -> super::interprocess_lock::LockFuture<'_, bool> {
        Box::pin(InterProcessSemaphoreMutex::acquire_timeout(self, timeout))
    }
    fn release(&self) -> super::interprocess_lock::LockFuture<'_, ()> {
        Box::pin(InterProcessSemaphoreMutex::release(self))
    }
    fn is_acquired_in_this_process(&self) -> bool {
        InterProcessSemaphoreMutex::is_acquired_in_this_process(self)
    }
    fn release_abandoned(&self, _holder: crate::locks::HolderId) {
        // Not task-owned: the lease is released in the background when dropped.
        drop(self.lease.lock().take());
    }
    fn holds_of(&self, _holder: crate::locks::HolderId) -> Vec<Arc<Hold>> {
        // Not task-owned: the instance's lease is the hold.
        self.current_hold().into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_granted_by_count_not_position() {
        let kids: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        assert_eq!(LeaseDriver::decide(&kids, &Contender::new("c", 3)), Verdict::Acquired);
        assert_eq!(LeaseDriver::decide(&kids, &Contender::new("a", 2)), Verdict::WatchChildren);
        assert_eq!(LeaseDriver::decide(&kids, &Contender::new("z", 5)), Verdict::NotInQueue);
        assert_eq!(LeaseDriver::decide(&kids, &Contender::new("a", 0)), Verdict::WatchChildren);
    }
}
