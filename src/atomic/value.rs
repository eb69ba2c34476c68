//! [`DistributedAtomicValue`] (Curator's `DistributedAtomicValue`): bytes in one node changed by
//! optimistic versioned sets, optionally promoted to an [`InterProcessMutex`]; and the result
//! every atomic operation returns, [`AtomicValue`].

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::debug;

use crate::deadline::deadline_after;
use crate::error::{Error, ErrorCode, Result};
use crate::framework::paths;
use crate::locks::InterProcessMutex;
use crate::shared::write::{self, Written};
use crate::{CuratorClient, RetryPolicy};

/// How an atomic operation went (Curator's `AtomicStats`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AtomicStats {
    /// Optimistic attempts (a read and a versioned set, or a create), the successful one included.
    pub optimistic_tries: u32,
    /// Attempts made while holding the promoted lock.
    pub promoted_tries: u32,
    /// Time spent in optimistic attempts, back-off sleeps and the wait for this client's turn on
    /// the node included.
    pub optimistic_time: Duration,
    /// Time spent on the promoted lock: acquiring it, the attempts under it.
    pub promoted_time: Duration,
}

/// The result of an atomic operation (Curator's `AtomicValue`). Always check
/// [`succeeded`](Self::succeeded): an operation that ran out of attempts did not change the value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AtomicValue<T> {
    pub(crate) succeeded: bool,
    pub(crate) pre_value: T,
    pub(crate) post_value: T,
    pub(crate) stats: AtomicStats,
}

impl<T> AtomicValue<T> {
    /// True when the operation applied (for [`get`](DistributedAtomicValue::get): always).
    pub fn succeeded(&self) -> bool {
        self.succeeded
    }

    /// The value the operation started from (the last value read).
    pub fn pre_value(&self) -> &T {
        &self.pre_value
    }

    /// The value the operation wrote; when it did not succeed, the last value read.
    pub fn post_value(&self) -> &T {
        &self.post_value
    }

    /// Attempt counts and times.
    pub fn stats(&self) -> &AtomicStats {
        &self.stats
    }

    /// The same outcome with other values.
    pub(crate) fn with<U>(self, pre_value: U, post_value: U) -> AtomicValue<U> {
        AtomicValue { succeeded: self.succeeded, pre_value, post_value, stats: self.stats }
    }
}

/// Where optimistic attempts that gave up go next (Curator's `PromotedToLock`): an
/// [`InterProcessMutex`] on `path`, waited for at most `max_lock_time`, and attempts under it
/// as long as its own retry policy allows (by default one attempt).
#[derive(Clone, Debug)]
pub struct PromotedToLock {
    path: String,
    max_lock_time: Option<Duration>,
    retry_policy: Option<Arc<dyn RetryPolicy>>,
}

impl PromotedToLock {
    /// Promotion to a mutex on `path` (checked when given to a counter).
    pub fn new(path: &str) -> Self {
        Self { path: path.to_string(), max_lock_time: None, retry_policy: None }
    }

    /// Waits at most `timeout` for the lock (Curator's `timeout`); without it, as long as the
    /// operation's own deadline allows.
    pub fn max_lock_time(mut self, timeout: Duration) -> Self {
        self.max_lock_time = Some(timeout);
        self
    }

    /// The retry policy of the attempts under the lock (default: no retry, one attempt).
    pub fn retry_policy(mut self, policy: impl RetryPolicy) -> Self {
        self.retry_policy = Some(Arc::new(policy));
        self
    }

    /// The lock path.
    pub fn path(&self) -> &str {
        &self.path
    }
}

/// The settings shared by the clones of a counter.
#[derive(Debug)]
pub(crate) struct Config {
    pub(crate) client: CuratorClient,
    pub(crate) path: String,
    retry_policy: Option<Arc<dyn RetryPolicy>>,
    promoted: Option<(PromotedToLock, InterProcessMutex)>,
    timeout: Option<Duration>,
    /// The counter's metrics (`recipe="atomic"`).
    metrics: crate::metrics::RecipeLabels,
}

/// The outcome of [`Engine::apply`], in bytes (empty: absent or empty node).
pub(crate) type Raw = AtomicValue<Vec<u8>>;

/// A node's bytes (empty when absent) and version (`None` when absent).
pub(crate) type Current = (Vec<u8>, Option<i32>);

fn current(node: write::Node) -> Current {
    match node {
        Some((data, stat)) => (data, Some(stat.version)),
        None => (Vec::new(), None),
    }
}

/// The changes of one node by one client take turns (a FIFO `tokio` mutex per path, kept in the
/// client's registry of local queues), so that the client's own tasks never race each other;
/// each turn hands the node's value and version, as its successful write left them, to the next
/// one, whose first attempt then needs no read.
type Turn = tokio::sync::Mutex<Option<(Current, Instant)>>;

/// How long a handed-over value may be used instead of a read: a hand-off is immediate; an older
/// value is read again (a versioned set from it would be refused anyway if the node changed, but
/// not if the node was deleted and re-created up to the same version meanwhile).
const HANDED_OVER_FOR: Duration = Duration::from_millis(10);

/// The turn of `path` on `client`.
fn turn(client: &CuratorClient, path: &str) -> Arc<Turn> {
    let key = (std::any::TypeId::of::<Turn>(), path.to_string(), String::new(), Vec::new(), false);
    client.local_queue(key, || Arc::new(Turn::new(None)))
}

/// The attempt loops shared by the byte value and the numbers.
#[derive(Clone, Debug)]
pub(crate) struct Engine {
    pub(crate) config: Arc<Config>,
}

impl Engine {
    pub(crate) fn new(client: &CuratorClient, path: &str) -> Result<Self> {
        paths::validate_path(path)?;
        let config = Config {
            client: client.clone(),
            path: path.to_string(),
            retry_policy: None,
            promoted: None,
            timeout: None,
            metrics: client.recipe_labels("atomic", path),
        };
        Ok(Self { config: Arc::new(config) })
    }

    fn edit(&self, f: impl FnOnce(&mut Config)) -> Self {
        let c = &self.config;
        let mut config = Config {
            client: c.client.clone(),
            path: c.path.clone(),
            retry_policy: c.retry_policy.clone(),
            promoted: c.promoted.clone(),
            metrics: c.metrics.clone(),
            timeout: c.timeout,
        };
        f(&mut config);
        Self { config: Arc::new(config) }
    }

    pub(crate) fn with_retry_policy(&self, policy: Arc<dyn RetryPolicy>) -> Self {
        self.edit(|c| c.retry_policy = Some(policy))
    }

    pub(crate) fn promoted_to_lock(&self, promoted: PromotedToLock) -> Result<Self> {
        let mutex = InterProcessMutex::new(&self.config.client, &promoted.path)?;
        Ok(self.edit(|c| c.promoted = Some((promoted, mutex))))
    }

    pub(crate) fn timeout(&self, timeout: Duration) -> Self {
        self.edit(|c| c.timeout = Some(timeout))
    }

    /// Runs `op` within the counter's timeout, if it has one, strictly; `op` gets the deadline
    /// (so that nothing is sent after it).
    pub(crate) async fn bounded<T, F, Fut>(&self, during: &'static str, op: F) -> Result<T>
    where
        F: FnOnce(Option<Instant>) -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let Some(timeout) = self.config.timeout else { return op(None).await };
        let deadline = deadline_after(timeout);
        let path = self.config.path.as_str();
        crate::deadline::naming_timeout(Some(timeout), async {
            match tokio::time::timeout_at(deadline.into(), op(Some(deadline))).await {
                Ok(result) => result,
                Err(_) => Err(Error::deadline_exceeded(path, during, Duration::ZERO)),
            }
        })
        .await
    }

    /// The node's bytes (empty when absent) and version (`None` when absent).
    pub(crate) async fn read(&self, deadline: Option<Instant>) -> Result<Current> {
        Ok(current(write::read(&self.config.client, &self.config.path, deadline).await?))
    }

    /// One attempt: make the new bytes from the node's current ones (`current`, read first if
    /// unknown), write them conditionally. A refused write leaves in `current` the node as read
    /// right behind it (in the same pipeline), for the next attempt.
    async fn try_once(
        &self,
        make: &(dyn Fn(&[u8]) -> Result<Vec<u8>> + Sync),
        result: &mut Raw,
        current: &mut Option<Current>,
        deadline: Option<Instant>,
    ) -> Result<bool> {
        let (pre, version) = match current.take() {
            Some(known) => known,
            None => self.read(deadline).await?,
        };
        let new = make(&pre)?;
        self.config.client.check_data_size("value", &self.config.path, new.len())?;
        result.pre_value = pre;
        let c = &self.config;
        match write::conditional_write(&c.client, &c.path, version, &new, deadline, "setting").await? {
            Written::Applied(stat) => {
                *current = Some((new.clone(), Some(stat.version)));
                result.post_value = new;
                Ok(true)
            }
            Written::Conflict { now } => {
                *current = now.map(self::current);
                Ok(false)
            }
        }
    }

    /// Optimistic attempts under the retry policy, then (if configured and still not done) the
    /// promoted lock (Curator's `trySet(MakeValue)`).
    pub(crate) async fn apply(
        &self,
        make: &(dyn Fn(&[u8]) -> Result<Vec<u8>> + Sync),
        deadline: Option<Instant>,
    ) -> Result<Raw> {
        let applied = self.apply_measured(make, deadline).await;
        let metrics = &self.config.metrics;
        match &applied {
            Ok(result) => {
                metrics.counter_operation(if result.succeeded { "succeeded" } else { "failed" });
                metrics.counter_attempts("optimistic", result.stats.optimistic_tries.into());
                if result.stats.promoted_tries > 0 {
                    metrics.counter_attempts("locked", result.stats.promoted_tries.into());
                }
            }
            Err(_) => metrics.counter_operation("error"),
        }
        applied
    }

    async fn apply_measured(
        &self,
        make: &(dyn Fn(&[u8]) -> Result<Vec<u8>> + Sync),
        deadline: Option<Instant>,
    ) -> Result<Raw> {
        let mut result = AtomicValue {
            succeeded: false,
            pre_value: Vec::new(),
            post_value: Vec::new(),
            stats: AtomicStats::default(),
        };
        let policy = self.config.retry_policy.as_deref().unwrap_or_else(|| self.config.client.retry_policy());
        let start = Instant::now();
        let turn = turn(&self.config.client, &self.config.path);
        let mut turn = turn.lock().await;
        // Only a successful write below hands a value over to the next turn.
        let mut current = turn.take().filter(|(_, at)| at.elapsed() < HANDED_OVER_FOR).map(|(known, _)| known);
        let mut retries = 0;
        loop {
            result.stats.optimistic_tries += 1;
            if self.try_once(make, &mut result, &mut current, deadline).await? {
                result.succeeded = true;
                break;
            }
            match policy.allow_retry(retries, start.elapsed()) {
                Some(sleep) => {
                    retries += 1;
                    self.back_off(sleep, &current, deadline, start).await?;
                }
                None => break,
            }
        }
        result.stats.optimistic_time = start.elapsed();
        if result.succeeded {
            *turn = current.map(|known| (known, Instant::now()));
        } else if let Some((promoted, mutex)) = &self.config.promoted {
            self.apply_promoted(promoted, mutex, make, &mut result, deadline).await?;
        }
        if !result.succeeded {
            result.post_value = result.pre_value.clone();
        }
        Ok(result)
    }

    async fn apply_promoted(
        &self,
        promoted: &PromotedToLock,
        mutex: &InterProcessMutex,
        make: &(dyn Fn(&[u8]) -> Result<Vec<u8>> + Sync),
        result: &mut Raw,
        deadline: Option<Instant>,
    ) -> Result<()> {
        let start = Instant::now();
        let wait = match (promoted.max_lock_time, deadline) {
            (Some(t), Some(d)) => Some(t.min(d.saturating_duration_since(start))),
            (t, d) => t.or_else(|| d.map(|d| d.saturating_duration_since(start))),
        };
        let guard = match wait {
            Some(wait) => mutex.try_lock_for(wait).await?,
            None => Some(mutex.lock().await?),
        };
        if let Some(guard) = guard {
            let mut retries = 0;
            let mut current = None;
            let outcome = async {
                loop {
                    result.stats.promoted_tries += 1;
                    if self.try_once(make, result, &mut current, deadline).await? {
                        result.succeeded = true;
                        return Ok(());
                    }
                    let Some(sleep) =
                        promoted.retry_policy.as_ref().and_then(|p| p.allow_retry(retries, start.elapsed()))
                    else {
                        return Ok(());
                    };
                    retries += 1;
                    self.back_off(sleep, &current, deadline, start).await?;
                }
            }
            .await;
            if let Err(e) = guard.release().await {
                debug!(%e, path = %promoted.path, "releasing the promoted lock failed; it is deleted in the background");
            }
            outcome?;
        }
        result.stats.promoted_time = start.elapsed();
        Ok(())
    }

    /// Before the next attempt: at once when the refused set brought the node's current value
    /// back (it is fresh now and would only grow stale while sleeping: every sleeper's next set
    /// would lose to the writers that did not sleep), else the policy's sleep.
    async fn back_off(
        &self,
        sleep: Duration,
        current: &Option<Current>,
        deadline: Option<Instant>,
        start: Instant,
    ) -> Result<()> {
        match current {
            Some(_) => Ok(()),
            None => self.sleep(sleep, deadline, start).await,
        }
    }

    async fn sleep(&self, sleep: Duration, deadline: Option<Instant>, start: Instant) -> Result<()> {
        if deadline.is_some_and(|d| Instant::now().checked_add(sleep).is_none_or(|wake| wake >= d)) {
            return Err(Error::deadline_exceeded(&self.config.path, "retrying", start.elapsed()));
        }
        tokio::time::sleep(sleep).await;
        Ok(())
    }

    /// One versioned set from `expected` to `new` (Curator's `compareAndSet`): not attempted
    /// when the node holds something else. An absent node (also one deleted before the set) is
    /// `NoNode` naming the path, not a lost race: no `expected` can match it until it is
    /// created, so a retry loop from [`get`](DistributedAtomicValue::get) would spin.
    pub(crate) async fn compare_and_set(
        &self,
        matches: &(dyn Fn(&[u8]) -> Result<bool> + Sync),
        new: Vec<u8>,
        deadline: Option<Instant>,
    ) -> Result<Raw> {
        let start = Instant::now();
        let c = &self.config;
        c.client.check_data_size("value", &c.path, new.len())?;
        let (pre, version) = self.read(deadline).await?;
        let Some(version) = version else { return Err(Error::code_on(&c.path, ErrorCode::NoNode)) };
        let mut result = AtomicValue {
            succeeded: false,
            pre_value: pre.clone(),
            post_value: pre.clone(),
            stats: AtomicStats { optimistic_tries: 1, ..AtomicStats::default() },
        };
        if matches(&pre)? {
            match write::conditional_write(&c.client, &c.path, Some(version), &new, deadline, "compare-and-set").await?
            {
                Written::Applied(_) => {
                    result.succeeded = true;
                    result.post_value = new;
                }
                Written::Conflict { now: Some(None) } => return Err(Error::code_on(&c.path, ErrorCode::NoNode)),
                Written::Conflict { .. } => {}
            }
        }
        result.stats.optimistic_time = start.elapsed();
        Ok(result)
    }

    /// Creates the node with `value` if it does not exist (Curator's `initialize`).
    pub(crate) async fn try_initialize(&self, value: Vec<u8>, deadline: Option<Instant>) -> Result<bool> {
        let c = &self.config;
        c.client.check_data_size("value", &c.path, value.len())?;
        let written = write::conditional_write(&c.client, &c.path, None, &value, deadline, "initializing").await?;
        Ok(matches!(written, Written::Applied(_)))
    }

    /// Sets the value whatever it is, creating the node if needed (Curator's `forceSet`).
    pub(crate) async fn force_set(&self, value: Vec<u8>, deadline: Option<Instant>) -> Result<()> {
        let c = &self.config;
        c.client.check_data_size("value", &c.path, value.len())?;
        let fixed = c.client.fix_path(&c.path);
        let (f, d) = (fixed.as_str(), value.as_slice());
        loop {
            match c.client.with_retry(&c.path, deadline, |zk| async move { zk.set_data(f, d, None).await }).await {
                Ok(_) => return Ok(()),
                Err(e) if e.is(ErrorCode::NoNode) => {}
                Err(e) => return Err(e),
            }
            match write::conditional_write(&c.client, &c.path, None, d, deadline, "force-setting").await {
                Ok(Written::Applied(_)) => return Ok(()),
                // Created by someone else meanwhile: set it.
                Ok(Written::Conflict { .. }) => {}
                // The node holds something: ours or someone's; setting it again is what was asked.
                Err(Error::OutcomeUnknown { .. }) => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// Bytes in one node changed atomically (Curator's `DistributedAtomicValue`): each change is a
/// read and a versioned set (a create where the node is absent), retried under the retry policy
/// while another process wins, and optionally promoted to an [`InterProcessMutex`]
/// ([`PromotedToLock`]).
///
/// # Contention
/// Each versioned set travels with a read of the node in the same pipeline, so a set that lost to
/// another writer comes back with the node's current value and version: the next attempt is one
/// round trip (the set, from that value), made at once. The retry policy bounds how many attempts
/// are made and for how long; its sleep is taken only when the current value did not come back
/// (a sleep would leave it stale, and the set after it would lose again to the writers that did
/// not sleep).
///
/// The tasks of one client take turns on a node (first come, first served), so they never race
/// each other; a turn that wrote hands the node's value and version to the next one (used for at
/// most 10 ms), whose first attempt is then the set alone.
///
/// A missing node reads as empty bytes. Clones share their settings; the builder methods
/// ([`with_retry_policy`](Self::with_retry_policy), [`promoted_to_lock`](Self::promoted_to_lock),
/// [`timeout`](Self::timeout)) return a new counter.
///
/// # Lost replies
/// Every write is conditional (a versioned set or a create): a retry after a lost reply carries
/// the same condition, so a change never applies twice. When a retry is refused and the node no
/// longer shows whether the first send applied, the call returns [`Error::OutcomeUnknown`]
/// instead of trying again from the new value (which could apply the change a second time).
#[derive(Clone, Debug)]
pub struct DistributedAtomicValue {
    engine: Engine,
}

impl DistributedAtomicValue {
    /// A value at `path`, optimistic attempts under the client's retry policy, no promotion, no
    /// timeout.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] naming `path`.
    pub fn new(client: &CuratorClient, path: &str) -> Result<Self> {
        Ok(Self { engine: Engine::new(client, path)? })
    }

    /// The same value with its optimistic attempts under `policy` (Curator's constructor
    /// argument) instead of the client's; see [Contention](Self#contention) for its sleeps.
    pub fn with_retry_policy(&self, policy: impl RetryPolicy) -> Self {
        Self { engine: self.engine.with_retry_policy(Arc::new(policy)) }
    }

    /// The same value, promoted to a mutex when the optimistic attempts give up.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] naming the lock path.
    pub fn promoted_to_lock(&self, promoted: PromotedToLock) -> Result<Self> {
        Ok(Self { engine: self.engine.promoted_to_lock(promoted)? })
    }

    /// The same value with every call bounded by `timeout`, strictly: past it a call returns
    /// [`Error::DeadlineExceeded`] and sends nothing more.
    pub fn timeout(&self, timeout: Duration) -> Self {
        Self { engine: self.engine.timeout(timeout) }
    }

    /// The path.
    pub fn path(&self) -> &str {
        &self.engine.config.path
    }

    /// The current bytes (empty when the node does not exist); always succeeded.
    ///
    /// # Errors
    /// Server errors after the retry policy gave up; [`Error::DeadlineExceeded`].
    ///
    /// # Cancel safety
    /// Cancel safe (a read).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// let value = zk_curator::atomic::DistributedAtomicValue::new(&client, "/app/token")?;
    /// println!("{:?}", value.get().await?.post_value());
    /// # Ok(()) }
    /// ```
    pub async fn get(&self) -> Result<AtomicValue<Vec<u8>>> {
        self.engine
            .bounded("reading", |deadline| async move {
                let (bytes, _) = self.engine.read(deadline).await?;
                Ok(AtomicValue {
                    succeeded: true,
                    pre_value: bytes.clone(),
                    post_value: bytes,
                    stats: AtomicStats::default(),
                })
            })
            .await
    }

    /// Sets the bytes with optimistic attempts (then the promoted lock, if any) (Curator's
    /// `trySet`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for data over the client's size limit; server errors;
    /// [`Error::OutcomeUnknown`] (see [Lost replies](Self#lost-replies)); [`Error::DeadlineExceeded`].
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call applies at most once.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(value: zk_curator::atomic::DistributedAtomicValue) -> zk_curator::Result<()> {
    /// let result = value.try_set(b"v2".to_vec()).await?;
    /// assert!(!result.succeeded() || result.post_value() == b"v2");
    /// # Ok(()) }
    /// ```
    pub async fn try_set(&self, new: Vec<u8>) -> Result<AtomicValue<Vec<u8>>> {
        let make = move |_: &[u8]| Ok(new.clone());
        self.engine.bounded("setting", |deadline| async move { self.engine.apply(&make, deadline).await }).await
    }

    /// Sets `new` if the node holds exactly `expected` (one versioned set, no retry; an absent
    /// node is never created) (Curator's `compareAndSet`).
    ///
    /// # Errors
    /// As [`try_set`](Self::try_set); [`ErrorCode::NoNode`] naming the path when the node does
    /// not exist (Curator reports a plain failure, which a retry loop starting from
    /// [`get`](Self::get)'s empty bytes would repeat for ever): create it first
    /// ([`try_initialize`](Self::try_initialize)).
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call applies at most once.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(value: zk_curator::atomic::DistributedAtomicValue) -> zk_curator::Result<()> {
    /// if value.compare_and_set(b"v1".to_vec(), b"v2".to_vec()).await?.succeeded() {
    ///     println!("moved from v1 to v2");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn compare_and_set(&self, expected: Vec<u8>, new: Vec<u8>) -> Result<AtomicValue<Vec<u8>>> {
        let matches = move |current: &[u8]| Ok(current == expected.as_slice());
        self.engine
            .bounded(
                "compare-and-set",
                |deadline| async move { self.engine.compare_and_set(&matches, new, deadline).await },
            )
            .await
    }

    /// Creates the node with `value` if it does not exist; `false` if it existed (Curator's
    /// `initialize`).
    ///
    /// # Errors
    /// As [`try_set`](Self::try_set).
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call creates the node at most once.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(value: zk_curator::atomic::DistributedAtomicValue) -> zk_curator::Result<()> {
    /// value.try_initialize(b"v1".to_vec()).await?;
    /// # Ok(()) }
    /// ```
    pub async fn try_initialize(&self, value: Vec<u8>) -> Result<bool> {
        self.engine
            .bounded("initializing", |deadline| async move { self.engine.try_initialize(value, deadline).await })
            .await
    }

    /// Sets the bytes whatever they are, creating the node if needed (Curator's `forceSet`: no
    /// atomicity).
    ///
    /// # Errors
    /// As [`try_set`](Self::try_set) (never [`Error::OutcomeUnknown`]).
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call sets the value or not.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(value: zk_curator::atomic::DistributedAtomicValue) -> zk_curator::Result<()> {
    /// value.force_set(b"reset".to_vec()).await?;
    /// # Ok(()) }
    /// ```
    pub async fn force_set(&self, value: Vec<u8>) -> Result<()> {
        self.engine
            .bounded("force-setting", |deadline| async move { self.engine.force_set(value, deadline).await })
            .await
    }
}
