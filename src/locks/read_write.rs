//! [`InterProcessReadWriteLock`]: Curator's cross-process read-write lock, built on the same layers
//! as the mutex (each half is an [`InterProcessMutex`] with a driver of its own).
//!
//! Wire protocol (Curator's): both kinds of node live directly under the lock path,
//! `_c_<uuid>-__READ__<seq>` and `_c_<uuid>-__WRIT__<seq>`, EPHEMERAL_SEQUENTIAL, sorted together by
//! their sequence. A writer holds when its node is first of all children; a reader holds when no
//! writer sorts before it. Order is FIFO by sequence, so neither kind starves the other.

use std::sync::Arc;
use std::time::Duration;

use crate::CreateMode;

use super::driver::{ahead_of, evaluate_by_key, java_cmp, standard_sort_key, standard_verdict, Contender};
use super::driver::{LockDriver, NodeSpec, Verdict};
use super::hold::Hold;
use super::internals::{Basis, Wait};
use super::interprocess_lock::{InterProcessLock, LockFuture};
use super::mutex::{InterProcessMutex, MutexGuard};
use crate::error::{Error, Result};
use crate::framework::paths;
use crate::metrics::Recipe;
use crate::CuratorClient;

/// Curator's read lock name.
pub const READ_LOCK_NAME: &str = "__READ__";
/// Curator's write lock name (as long as the read lock name, as Curator requires).
pub const WRITE_LOCK_NAME: &str = "__WRIT__";

/// Curator's read-write sort key: the text after the last `__READ__`, then after the last
/// `__WRIT__` — the sequence digits for either kind.
pub fn read_write_sort_key(child: &str) -> &str {
    standard_sort_key(standard_sort_key(child, READ_LOCK_NAME), WRITE_LOCK_NAME)
}

/// The write half's driver: Curator's mutex rule over all children (readers and writers).
#[derive(Clone, Copy, Debug, Default)]
pub struct WriteLockDriver;

/// A writer waits on the node just ahead of it, and always looks again when that node goes: a
/// downgrading writer's read node takes its writer's place in line, so a node can appear ahead of
/// us after we started watching, and the hand-off without a listing would be wrong here.
fn without_hand_off(verdict: Verdict) -> Verdict {
    match verdict {
        Verdict::Watch { node, .. } => Verdict::Watch { node, acquired_when_deleted: false },
        other => other,
    }
}

impl LockDriver for WriteLockDriver {
    fn lock_name(&self) -> &str {
        WRITE_LOCK_NAME
    }

    fn sort_key<'a>(&self, child: &'a str) -> &'a str {
        read_write_sort_key(child)
    }

    fn verdict(&self, sorted_children: &[String], contender: &Contender<'_>) -> Verdict {
        without_hand_off(standard_verdict(sorted_children, contender.our_name, 1))
    }

    fn evaluate(&self, children: Vec<String>, contender: &Contender<'_>) -> Verdict {
        without_hand_off(evaluate_by_key(&children, contender.our_name, 1, read_write_sort_key))
    }
}

/// The read half's driver: held when no writer sorts before our node (writers the caller itself
/// holds do not count: a writer may take the read lock). A waiting reader watches the nearest
/// writer ahead of it (Curator watches the first writer; the nearest is as correct, wakes fewer
/// readers when several writers queue, and when it is the only writer ahead its deletion grants
/// the read lock without another listing: writers are always sequential, so none can appear ahead
/// of us later).
#[derive(Clone, Copy, Debug, Default)]
pub struct ReadLockDriver;

impl ReadLockDriver {
    fn decide(children: &[String], contender: &Contender<'_>) -> Verdict {
        let foreign_writer =
            |child: &str| child.contains(WRITE_LOCK_NAME) && !contender.caller_holds.iter().any(|held| held == child);
        let Some((_, writers_ahead)) = ahead_of(children, contender.our_name, foreign_writer, read_write_sort_key)
        else {
            return Verdict::NotInQueue;
        };
        let nearest = writers_ahead.iter().max_by(|a, b| java_cmp(a.0, b.0).then(a.1.cmp(&b.1)));
        match nearest {
            None => Verdict::Acquired,
            Some(&(_, index)) => {
                Verdict::Watch { node: children[index].clone(), acquired_when_deleted: writers_ahead.len() == 1 }
            }
        }
    }
}

impl LockDriver for ReadLockDriver {
    fn lock_name(&self) -> &str {
        READ_LOCK_NAME
    }

    /// A caller that holds the write lock takes the read lock *at its writer's place*: a plain
    /// EPHEMERAL node `__READ__<writer's sequence>` (Curator ≥ 5.5, CURATOR-621), so a writer
    /// queued behind stays behind when the write lock is released.
    fn node_spec(&self, caller_holds: &[String]) -> NodeSpec {
        match caller_holds.iter().find(|held| held.contains(WRITE_LOCK_NAME)) {
            Some(writer) => NodeSpec {
                name: format!("{READ_LOCK_NAME}{}", read_write_sort_key(writer)),
                mode: CreateMode::Ephemeral,
            },
            None => NodeSpec { name: READ_LOCK_NAME.to_string(), mode: CreateMode::EphemeralSequential },
        }
    }

    fn sort_key<'a>(&self, child: &'a str) -> &'a str {
        read_write_sort_key(child)
    }

    fn verdict(&self, sorted_children: &[String], contender: &Contender<'_>) -> Verdict {
        Self::decide(sorted_children, contender)
    }

    fn evaluate(&self, children: Vec<String>, contender: &Contender<'_>) -> Verdict {
        Self::decide(&children, contender)
    }
}

/// A guard of the read lock: a shared hold of its own (see [`MutexGuard`]).
pub type ReadLockGuard = MutexGuard<ReadLockDriver>;
/// A guard of the write lock: an exclusive hold of its own (see [`MutexGuard`]).
pub type WriteLockGuard = MutexGuard<WriteLockDriver>;

/// A read-write lock shared across processes, wire-compatible with Curator's
/// `InterProcessReadWriteLock`: many readers or one writer, FIFO by arrival.
///
/// Each half behaves like [`InterProcessMutex`]: Curator-style `acquire`/`acquire_timeout`/`release`
/// (re-entrant per task) and guards (`lock`, `try_lock_for`, `try_lock`: holds of their own that
/// move with the guard), hold state, fencing token, guarded writes, strict deadlines, cancel
/// safety, revocation.
///
/// * **Downgrade**: a task holding the write lock Curator-style may take the read lock at once
///   (then release the write lock); with guards, [`ReadLock::lock_while_writing`]. The read node
///   takes the writer's place, so a writer queued behind stays behind (Curator ≥ 5.5).
/// * **Upgrade** (read held, write wanted by the same task) is refused at once with
///   [`Error::WouldDeadlock`]: the write node would queue behind the task's own read node forever
///   (Curator deadlocks an untimed acquire there).
///
/// ```no_run
/// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
/// let lock = zk_curator::locks::InterProcessReadWriteLock::new(&client, "/locks/config")?;
/// let read = lock.read_lock().lock().await?; // many readers at once
/// read.release().await?;
/// let write = lock.write_lock().lock().await?; // alone
/// write.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct InterProcessReadWriteLock {
    read: ReadLock,
    write: WriteLock,
}

impl InterProcessReadWriteLock {
    /// A read-write lock on `path` writing the client's default data into its nodes.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] naming `path`.
    pub fn new(client: &CuratorClient, path: &str) -> Result<Self> {
        Self::build(client, path, None)
    }

    /// Like [`new`](Self::new), writing `data` into every node of this lock (Curator's `lockData`).
    ///
    /// # Errors
    /// As [`new`](Self::new); [`Error::InvalidArgument`] naming its size and `path` if `data` is
    /// larger than the client's [`max_data_size`](crate::CuratorClientBuilder::max_data_size).
    pub fn with_data(client: &CuratorClient, path: &str, data: impl Into<Vec<u8>>) -> Result<Self> {
        Self::build(client, path, Some(data.into()))
    }

    fn build(client: &CuratorClient, path: &str, data: Option<Vec<u8>>) -> Result<Self> {
        let labels = |recipe| client.lock_labels(recipe, path);
        let write = InterProcessMutex::build(client, path, WriteLockDriver, data.clone(), labels(Recipe::Write))?;
        let read =
            InterProcessMutex::build(client, path, ReadLockDriver, data, labels(Recipe::Read))?.share_local_turns();
        Ok(Self {
            read: ReadLock { mutex: read.clone(), write: write.clone() },
            write: WriteLock { mutex: write, read },
        })
    }

    /// Guards of both halves each make a node of their own, as Curator's threads do, instead of
    /// sharing one per turn through the local queue (see [`InterProcessMutex::with_node_per_task`]).
    ///
    /// # Examples
    /// ```no_run
    /// # fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// let lock = zk_curator::locks::InterProcessReadWriteLock::new(&client, "/config")?.with_node_per_task();
    /// # Ok(()) }
    /// ```
    pub fn with_node_per_task(self) -> Self {
        // Clones share their settings: both halves' mutexes are set through their clones.
        let _ = self.read.mutex.clone().with_node_per_task();
        let _ = self.write.mutex.clone().with_node_per_task();
        self
    }

    /// The lock path.
    pub fn path(&self) -> &str {
        self.write.mutex.path()
    }

    /// The read half.
    pub fn read_lock(&self) -> &ReadLock {
        &self.read
    }

    /// The write half.
    pub fn write_lock(&self) -> &WriteLock {
        &self.write
    }
}

/// The read half of an [`InterProcessReadWriteLock`].
#[derive(Clone, Debug)]
pub struct ReadLock {
    mutex: InterProcessMutex<ReadLockDriver>,
    write: InterProcessMutex<WriteLockDriver>,
}

/// The write half of an [`InterProcessReadWriteLock`].
#[derive(Clone, Debug)]
pub struct WriteLock {
    mutex: InterProcessMutex<WriteLockDriver>,
    read: InterProcessMutex<ReadLockDriver>,
}

/// The methods both halves share, delegating to their mutex.
macro_rules! half_methods {
    ($driver:ty, $name:literal) => {
        /// The lock path.
        pub fn path(&self) -> &str {
            self.mutex.path()
        }

        /// Releases one Curator-style hold of the calling task; the last one deletes the node.
        ///
        /// # Errors
        /// As [`InterProcessMutex::release`].
        ///
        /// # Cancel safety
        /// Cancel safe: the hold is released at the first poll; the delete goes on in the background.
        ///
        /// # Examples
        /// ```no_run
        /// # async fn demo(lock: zk_curator::locks::InterProcessReadWriteLock) -> zk_curator::Result<()> {
        #[doc = concat!("let half = lock.", $name, "_lock();")]
        /// half.acquire().await?;
        /// // ...
        /// half.release().await?;
        /// # Ok(()) }
        /// ```
        pub async fn release(&self) -> Result<()> {
            self.mutex.release().await
        }

        /// True if any task of this half holds it (Curator-style or through a live guard).
        pub fn is_acquired_in_this_process(&self) -> bool {
            self.mutex.is_acquired_in_this_process()
        }

        /// True if the calling task holds this half Curator-style.
        pub fn is_owned_by_current_task(&self) -> bool {
            self.mutex.is_owned_by_current_task()
        }

        /// The calling task's lock node path, if it holds this half Curator-style.
        pub fn lock_node_path(&self) -> Option<String> {
            self.mutex.lock_node_path()
        }

        /// The calling task's Curator-style hold, if any.
        pub fn current_hold(&self) -> Option<Arc<Hold>> {
            self.mutex.current_hold()
        }

        /// Makes later acquisitions of this half revocable; see [`InterProcessMutex::make_revocable`].
        pub fn make_revocable(&self) {
            self.mutex.make_revocable()
        }

        #[doc = concat!("The ", $name, " nodes under the lock path, full paths in lock order ")]
        /// (Curator's `getParticipantNodes` of this half).
        ///
        /// # Errors
        /// Server errors after retries.
        ///
        /// # Cancel safety
        /// Cancel safe (read only).
        ///
        /// # Examples
        /// ```no_run
        /// # async fn demo(lock: zk_curator::locks::InterProcessReadWriteLock) -> zk_curator::Result<()> {
        #[doc = concat!("let half = lock.", $name, "_lock();")]
        /// for node in half.participant_nodes().await? {
        ///     println!("{node}");
        /// }
        /// # Ok(()) }
        /// ```
        pub async fn participant_nodes(&self) -> Result<Vec<String>> {
            let all = self.mutex.participant_nodes().await?;
            Ok(self.own_kind(all))
        }

        /// [`participant_nodes`](Self::participant_nodes) within `timeout`.
        ///
        /// # Errors
        /// [`Error::DeadlineExceeded`] when `timeout` passed first; server errors after retries.
        ///
        /// # Cancel safety
        /// Cancel safe (read only).
        ///
        /// # Examples
        /// ```no_run
        /// # use std::time::Duration;
        /// # async fn demo(lock: zk_curator::locks::InterProcessReadWriteLock) -> zk_curator::Result<()> {
        #[doc = concat!("let half = lock.", $name, "_lock();")]
        /// let nodes = half.participant_nodes_within(Duration::from_secs(2)).await?;
        /// println!("{} on {}", nodes.len(), half.path());
        /// # Ok(()) }
        /// ```
        pub async fn participant_nodes_within(&self, timeout: impl Into<crate::Deadline>) -> Result<Vec<String>> {
            let all = self.mutex.participant_nodes_within(timeout).await?;
            Ok(self.own_kind(all))
        }

        /// The old name of [`participant_nodes_within`](Self::participant_nodes_within).
        ///
        /// # Errors
        /// As [`participant_nodes_within`](Self::participant_nodes_within).
        ///
        /// # Cancel safety
        /// Cancel safe (read only).
        #[deprecated(note = "use `participant_nodes_within`: a `_timeout` name is a wait that returns `Ok(false)`/`Ok(None)` on time-out; an operation that runs out of time fails, within a `_within` name")]
        pub async fn participant_nodes_timeout(&self, timeout: Duration) -> Result<Vec<String>> {
            self.participant_nodes_within(timeout).await
        }

        fn own_kind(&self, all: Vec<String>) -> Vec<String> {
            let name = <$driver as LockDriver>::lock_name(&<$driver>::default()).to_string();
            all.into_iter().filter(|path| paths::node_name(path).contains(name.as_str())).collect()
        }
    };
}

impl ReadLock {
    half_methods!(ReadLockDriver, "read");

    /// Curator-style acquire of the calling task: a task that holds the write lock Curator-style
    /// takes the read lock standing on that hold (a downgrade, at the writer's place in line).
    async fn acquire_wait(&self, wait: Wait) -> Result<bool> {
        let writer = self.write.current_hold();
        let basis = writer.as_deref().map_or(Basis::None, Basis::InQueue);
        Ok(self.mutex.acquire_reentrant(wait, basis).await?.is_some())
    }

    /// Waits until the calling task holds the read lock (re-entrant). A task that holds the write
    /// lock Curator-style gets it at once (downgrade) — only while that write hold is `Held`.
    ///
    /// # Errors
    /// [`Error::LockLost`] naming the write node when the calling task holds the write lock but
    /// that hold is lost (its session ended, also while this call ran): a downgrade only ever
    /// starts from a write hold that is held, and no node is left. Otherwise as
    /// [`InterProcessMutex::acquire`].
    ///
    /// # Cancel safety
    /// Cancel safe: nothing is left behind.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(lock: zk_curator::locks::InterProcessReadWriteLock) -> zk_curator::Result<()> {
    /// // A downgrade, Curator-style: the read lock at the writer's place, then the write lock goes.
    /// lock.write_lock().acquire().await?;
    /// lock.read_lock().acquire().await?;
    /// lock.write_lock().release().await?;
    /// // ... read what was written; no other writer came in between ...
    /// lock.read_lock().release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire(&self) -> Result<()> {
        self.acquire_wait(Wait::Forever).await.map(|_| ())
    }

    /// Like [`acquire`](Self::acquire), giving up after `timeout` (`Ok(false)`), strictly.
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
    /// # async fn demo(lock: zk_curator::locks::InterProcessReadWriteLock) -> zk_curator::Result<()> {
    /// if lock.read_lock().acquire_timeout(Duration::from_secs(1)).await? {
    ///     // ... read ...
    ///     lock.read_lock().release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn acquire_timeout(&self, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let timeout = timeout.into().remaining();
        self.acquire_wait(Wait::from_timeout(timeout)).await
    }

    /// Waits for the read lock and returns a guard that owns the hold (shared with other readers).
    ///
    /// A task that holds a [`WriteLockGuard`] and calls this queues behind its own writer, as with
    /// tokio's `RwLock`; use [`lock_while_writing`](Self::lock_while_writing) to downgrade.
    ///
    /// # Errors
    /// As [`InterProcessMutex::lock`].
    ///
    /// # Cancel safety
    /// Cancel safe: nothing is left behind.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(lock: zk_curator::locks::InterProcessReadWriteLock) -> zk_curator::Result<()> {
    /// let guard = lock.read_lock().lock().await?;
    /// // ... read; other readers may hold the lock at the same time ...
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn lock(&self) -> Result<ReadLockGuard> {
        self.mutex.lock().await
    }

    /// Like [`lock`](Self::lock), giving up after `timeout` (`Ok(None)`), strictly.
    ///
    /// # Errors
    /// As [`InterProcessMutex::lock`].
    ///
    /// # Cancel safety
    /// Cancel safe: nothing is left behind.
    ///
    /// # Examples
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(lock: zk_curator::locks::InterProcessReadWriteLock) -> zk_curator::Result<()> {
    /// if let Some(guard) = lock.read_lock().try_lock_for(Duration::from_millis(500)).await? {
    ///     // ... serve from the current configuration ...
    ///     guard.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_lock_for(&self, timeout: impl Into<crate::Deadline>) -> Result<Option<ReadLockGuard>> {
        let timeout = timeout.into().remaining();
        self.mutex.try_lock_for(timeout).await
    }

    /// One attempt; `Ok(None)` at once without a connection.
    ///
    /// # Errors
    /// As [`InterProcessMutex::lock`].
    ///
    /// # Cancel safety
    /// Cancel safe: nothing is left behind.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(lock: zk_curator::locks::InterProcessReadWriteLock) -> zk_curator::Result<()> {
    /// match lock.read_lock().try_lock().await? {
    ///     Some(guard) => guard.release().await?,
    ///     None => println!("a writer holds or waits for {}", lock.path()),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_lock(&self) -> Result<Option<ReadLockGuard>> {
        self.mutex.try_lock().await
    }

    /// Downgrade with guards: takes the read lock at once, at `writer`'s place in line, while
    /// `writer` is still held; release `writer` afterwards. A writer queued behind stays behind.
    /// Waits while `writer` is suspended.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if `writer` is not a guard of this lock (its path, through this
    /// client); [`Error::LockLost`]
    /// naming the write node if its hold is lost (before or during the call, e.g. its session was
    /// replaced); otherwise as [`lock`](Self::lock).
    ///
    /// # Cancel safety
    /// Cancel safe: nothing is left behind; `writer` is untouched.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(lock: zk_curator::locks::InterProcessReadWriteLock) -> zk_curator::Result<()> {
    /// let write = lock.write_lock().lock().await?;
    /// // ... write ...
    /// let read = lock.read_lock().lock_while_writing(&write).await?;
    /// write.release().await?; // a writer queued behind us stays behind the read hold
    /// // ... read what was just written ...
    /// read.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn lock_while_writing(&self, writer: &WriteLockGuard) -> Result<ReadLockGuard> {
        if paths::parent(writer.node_path()) != self.path() {
            return Err(Error::invalid_argument("writer", writer.node_path(), "is not a write lock of this lock path"));
        }
        if !writer.hold().client().is_same_client(self.mutex.client()) {
            // Its read node would be made on another session than the writer's.
            return Err(Error::invalid_argument("writer", writer.node_path(), "is held through another client"));
        }
        let hold = self.mutex.attempt(Wait::Forever, Basis::InQueue(writer.hold())).await?;
        if hold.is_some() {
            // The read node stands in the writer's place: the write node is not handed on to
            // another local writer while it is held.
            writer.hold().keep_node_to_itself();
        }
        Ok(self.mutex.guard(hold.ok_or_else(|| Error::Closed { path: self.path().to_string() })?))
    }
}

impl WriteLock {
    half_methods!(WriteLockDriver, "write");

    /// An upgrade would wait forever behind the task's own read node: refuse it.
    fn refuse_upgrade(&self) -> Result<()> {
        if self.read.is_owned_by_current_task() && !self.mutex.is_owned_by_current_task() {
            return Err(Error::WouldDeadlock {
                path: self.path().to_string(),
                reason: "the calling task holds the read lock; release it before taking the write lock (no upgrade)",
            });
        }
        Ok(())
    }

    /// Waits until the calling task holds the write lock (re-entrant).
    ///
    /// # Errors
    /// [`Error::WouldDeadlock`] at once if the calling task holds the read lock Curator-style
    /// (upgrade); otherwise as [`InterProcessMutex::acquire`].
    ///
    /// # Cancel safety
    /// Cancel safe: nothing is left behind.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(lock: zk_curator::locks::InterProcessReadWriteLock) -> zk_curator::Result<()> {
    /// lock.write_lock().acquire().await?;
    /// // ... write, alone ...
    /// lock.write_lock().release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire(&self) -> Result<()> {
        self.refuse_upgrade()?;
        self.mutex.acquire().await
    }

    /// Like [`acquire`](Self::acquire), giving up after `timeout` (`Ok(false)`), strictly.
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
    /// # async fn demo(lock: zk_curator::locks::InterProcessReadWriteLock) -> zk_curator::Result<()> {
    /// if !lock.write_lock().acquire_timeout(Duration::from_secs(5)).await? {
    ///     return Ok(()); // readers or another writer kept it for 5 s
    /// }
    /// // ... write ...
    /// lock.write_lock().release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire_timeout(&self, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let timeout = timeout.into().remaining();
        self.refuse_upgrade()?;
        self.mutex.acquire_timeout(timeout).await
    }

    /// Waits for the write lock and returns a guard that owns the hold.
    ///
    /// # Errors
    /// [`Error::WouldDeadlock`] at once if the calling task holds the read lock Curator-style;
    /// otherwise as [`InterProcessMutex::lock`]. (A task holding a [`ReadLockGuard`] that calls this
    /// queues behind its own reader, as with tokio's `RwLock`.)
    ///
    /// # Cancel safety
    /// Cancel safe: nothing is left behind.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(lock: zk_curator::locks::InterProcessReadWriteLock) -> zk_curator::Result<()> {
    /// let guard = lock.write_lock().lock().await?;
    /// // ... write, alone; the guard may move to another task ...
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn lock(&self) -> Result<WriteLockGuard> {
        self.refuse_upgrade()?;
        self.mutex.lock().await
    }

    /// Like [`lock`](Self::lock), giving up after `timeout` (`Ok(None)`), strictly.
    ///
    /// # Errors
    /// As [`lock`](Self::lock).
    ///
    /// # Cancel safety
    /// Cancel safe: nothing is left behind.
    ///
    /// # Examples
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(lock: zk_curator::locks::InterProcessReadWriteLock) -> zk_curator::Result<()> {
    /// match lock.write_lock().try_lock_for(Duration::from_secs(5)).await? {
    ///     Some(guard) => guard.release().await?,
    ///     None => println!("{} stayed busy", lock.path()),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_lock_for(&self, timeout: impl Into<crate::Deadline>) -> Result<Option<WriteLockGuard>> {
        let timeout = timeout.into().remaining();
        self.refuse_upgrade()?;
        self.mutex.try_lock_for(timeout).await
    }

    /// One attempt; `Ok(None)` at once without a connection.
    ///
    /// # Errors
    /// As [`lock`](Self::lock).
    ///
    /// # Cancel safety
    /// Cancel safe: nothing is left behind.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(lock: zk_curator::locks::InterProcessReadWriteLock) -> zk_curator::Result<()> {
    /// if let Some(guard) = lock.write_lock().try_lock().await? {
    ///     // ... write ...
    ///     guard.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_lock(&self) -> Result<Option<WriteLockGuard>> {
        self.refuse_upgrade()?;
        self.mutex.try_lock().await
    }
}

/// Both halves offer the common trait through their own methods.
macro_rules! impl_interprocess_lock {
    ($half:ty) => {
        impl InterProcessLock for $half {
            fn path(&self) -> &str {
                <$half>::path(self)
            }
            fn acquire(&self) -> LockFuture<'_, ()> {
                Box::pin(<$half>::acquire(self))
            }
            fn acquire_timeout(&self, timeout: Duration) -> LockFuture<'_, bool> {
                Box::pin(<$half>::acquire_timeout(self, timeout))
            }
            fn release(&self) -> LockFuture<'_, ()> {
                Box::pin(<$half>::release(self))
            }
            fn is_acquired_in_this_process(&self) -> bool {
                <$half>::is_acquired_in_this_process(self)
            }
            fn release_abandoned(&self, holder: crate::locks::HolderId) {
                InterProcessLock::release_abandoned(&self.mutex, holder)
            }
            fn holds_of(&self, holder: crate::locks::HolderId) -> Vec<Arc<Hold>> {
                InterProcessLock::holds_of(&self.mutex, holder)
            }
        }
    };
}

impl_interprocess_lock!(ReadLock);
impl_interprocess_lock!(WriteLock);

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn sort_key_is_the_sequence_of_either_kind() {
        assert_eq!(read_write_sort_key("_c_x-__READ__0000000007"), "0000000007");
        assert_eq!(read_write_sort_key("_c_x-__WRIT__0000000008"), "0000000008");
        assert_eq!(read_write_sort_key("foreign"), "foreign");
    }

    #[test]
    fn readers_share_and_wait_for_the_nearest_writer_ahead() {
        let kids = names(&[
            "a-__READ__0000000001",
            "b-__WRIT__0000000002",
            "c-__READ__0000000003",
            "d-__WRIT__0000000004",
            "e-__READ__0000000005",
        ]);
        let c = |name| Contender::new(name, 1);
        assert_eq!(ReadLockDriver::decide(&kids, &c("a-__READ__0000000001")), Verdict::Acquired);
        assert_eq!(
            ReadLockDriver::decide(&kids, &c("c-__READ__0000000003")),
            Verdict::Watch { node: "b-__WRIT__0000000002".into(), acquired_when_deleted: true }
        );
        assert_eq!(
            ReadLockDriver::decide(&kids, &c("e-__READ__0000000005")),
            Verdict::Watch { node: "d-__WRIT__0000000004".into(), acquired_when_deleted: false }
        );
        // The writer's own read node (downgrade) takes the writer's sequence and skips its writer.
        let held = names(&["b-__WRIT__0000000002"]);
        let downgrade = Contender { our_name: "f-__READ__0000000002", max_leases: 1, caller_holds: &held };
        let mut with_downgrade = kids.clone();
        with_downgrade.push("f-__READ__0000000002".into());
        assert_eq!(ReadLockDriver::decide(&with_downgrade, &downgrade), Verdict::Acquired);
        assert_eq!(
            ReadLockDriver.node_spec(&held),
            NodeSpec { name: "__READ__0000000002".into(), mode: CreateMode::Ephemeral }
        );
        assert_eq!(ReadLockDriver::decide(&kids, &c("zz")), Verdict::NotInQueue);
    }

    #[test]
    fn a_writer_needs_to_be_first_of_all_and_always_looks_again() {
        let kids = names(&["a-__READ__0000000001", "b-__WRIT__0000000002"]);
        let verdict = WriteLockDriver.evaluate(kids.clone(), &Contender::new("b-__WRIT__0000000002", 1));
        assert_eq!(verdict, Verdict::Watch { node: "a-__READ__0000000001".into(), acquired_when_deleted: false });
        let verdict =
            WriteLockDriver.evaluate(names(&["b-__WRIT__0000000002"]), &Contender::new("b-__WRIT__0000000002", 1));
        assert_eq!(verdict, Verdict::Acquired);
    }
}
