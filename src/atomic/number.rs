//! [`DistributedAtomicLong`] and [`DistributedAtomicInteger`] (Curator's): a big-endian number in
//! one node, on the engine of [`DistributedAtomicValue`](crate::atomic::DistributedAtomicValue).

use std::sync::Arc;
use std::time::Duration;

use super::value::{AtomicValue, Engine, PromotedToLock};
use crate::error::{Error, Result};
use crate::{CuratorClient, RetryPolicy};

mod sealed {
    pub trait Sealed {}
    impl Sealed for i64 {}
    impl Sealed for i32 {}
}

/// A number a [`DistributedAtomicNumber`] can hold: `i64` (8 bytes, Curator's
/// `DistributedAtomicLong`) or `i32` (4 bytes, `DistributedAtomicInteger`), big-endian.
/// Arithmetic wraps around, as Java's does.
pub trait AtomicNumber: sealed::Sealed + Copy + PartialEq + std::fmt::Debug + Send + Sync + 'static {
    /// What a node of this number holds, for [`Error::CorruptedValue`].
    const EXPECTED: &'static str;
    /// Big-endian bytes.
    fn to_bytes(self) -> Vec<u8>;
    /// From big-endian bytes of exactly this size.
    fn from_bytes(bytes: &[u8]) -> Option<Self>;
    /// `self + delta`, wrapping.
    fn add(self, delta: Self) -> Self;
    /// `-self`, wrapping.
    fn negate(self) -> Self;
    /// 0.
    const ZERO: Self;
    /// 1.
    const ONE: Self;
}

impl AtomicNumber for i64 {
    const EXPECTED: &'static str = "8 bytes (a big-endian i64) or none";
    const ZERO: Self = 0;
    const ONE: Self = 1;
    fn to_bytes(self) -> Vec<u8> {
        self.to_be_bytes().to_vec()
    }
    fn from_bytes(bytes: &[u8]) -> Option<Self> {
        bytes.try_into().ok().map(i64::from_be_bytes)
    }
    fn add(self, delta: Self) -> Self {
        self.wrapping_add(delta)
    }
    fn negate(self) -> Self {
        self.wrapping_neg()
    }
}

impl AtomicNumber for i32 {
    const EXPECTED: &'static str = "4 bytes (a big-endian i32) or none";
    const ZERO: Self = 0;
    const ONE: Self = 1;
    fn to_bytes(self) -> Vec<u8> {
        self.to_be_bytes().to_vec()
    }
    fn from_bytes(bytes: &[u8]) -> Option<Self> {
        bytes.try_into().ok().map(i32::from_be_bytes)
    }
    fn add(self, delta: Self) -> Self {
        self.wrapping_add(delta)
    }
    fn negate(self) -> Self {
        self.wrapping_neg()
    }
}

/// A counter in one node: Curator's `DistributedAtomicLong` ([`DistributedAtomicLong`], 8 bytes)
/// and `DistributedAtomicInteger` ([`DistributedAtomicInteger`], 4 bytes), big-endian. A missing
/// or empty node reads as 0; any other length is [`Error::CorruptedValue`] naming the path and
/// the length, and nothing is written.
///
/// Each change is a read and a versioned set (a create where the node is absent) retried under
/// the retry policy (the client's, or [`with_retry_policy`](Self::with_retry_policy)) while
/// another process wins, then optionally under a mutex ([`promoted_to_lock`](Self::promoted_to_lock)).
/// Every result is an [`AtomicValue`]: check [`succeeded`](AtomicValue::succeeded). A set that
/// lost comes back with the current value (read in the same pipeline) and is tried again at once
/// from it (see [Contention](crate::atomic::DistributedAtomicValue#contention)).
///
/// A change never applies twice: a retry after a lost reply carries the same version, and when
/// the node cannot tell whether the first send applied the call returns
/// [`Error::OutcomeUnknown`] rather than applying the change again from the new value (see
/// [`DistributedAtomicValue`](crate::atomic::DistributedAtomicValue#lost-replies)).
///
/// ```no_run
/// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
/// use std::time::Duration;
/// let sold = zk_curator::atomic::DistributedAtomicLong::new(&client, "/shop/tickets-sold")?
///     .timeout(Duration::from_secs(5));
/// let result = sold.increment().await?;
/// if result.succeeded() {
///     println!("ticket #{}", result.post_value());
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct DistributedAtomicNumber<T: AtomicNumber> {
    engine: Engine,
    _number: std::marker::PhantomData<fn() -> T>,
}

/// Curator's `DistributedAtomicLong`: an `i64` in 8 big-endian bytes.
pub type DistributedAtomicLong = DistributedAtomicNumber<i64>;

/// Curator's `DistributedAtomicInteger`: an `i32` in 4 big-endian bytes.
pub type DistributedAtomicInteger = DistributedAtomicNumber<i32>;

impl<T: AtomicNumber> DistributedAtomicNumber<T> {
    /// A counter at `path`, optimistic attempts under the client's retry policy, no promotion,
    /// no timeout.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] naming `path`.
    pub fn new(client: &CuratorClient, path: &str) -> Result<Self> {
        Ok(Self::of(Engine::new(client, path)?))
    }

    fn of(engine: Engine) -> Self {
        Self { engine, _number: std::marker::PhantomData }
    }

    /// The same counter with its optimistic attempts under `policy` (Curator's constructor
    /// argument) instead of the client's; see [Contention](crate::atomic::DistributedAtomicValue#contention)
    /// for its sleeps.
    pub fn with_retry_policy(&self, policy: impl RetryPolicy) -> Self {
        Self::of(self.engine.with_retry_policy(Arc::new(policy)))
    }

    /// The same counter, promoted to a mutex when the optimistic attempts give up.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] naming the lock path.
    pub fn promoted_to_lock(&self, promoted: PromotedToLock) -> Result<Self> {
        Ok(Self::of(self.engine.promoted_to_lock(promoted)?))
    }

    /// The same counter with every call bounded by `timeout`, strictly: past it a call returns
    /// [`Error::DeadlineExceeded`] and sends nothing more (a write sent before may have applied,
    /// once).
    pub fn timeout(&self, timeout: Duration) -> Self {
        Self::of(self.engine.timeout(timeout))
    }

    /// The path.
    pub fn path(&self) -> &str {
        &self.engine.config.path
    }

    fn decode(&self, bytes: &[u8]) -> Result<T> {
        if bytes.is_empty() {
            return Ok(T::ZERO);
        }
        T::from_bytes(bytes).ok_or_else(|| Error::CorruptedValue {
            path: self.engine.config.path.clone(),
            len: bytes.len(),
            expected: T::EXPECTED,
        })
    }

    fn decoded(&self, raw: AtomicValue<Vec<u8>>) -> Result<AtomicValue<T>> {
        // Only bytes that were read (checked by the attempt) or written (ours) are here.
        let pre = self.decode(&raw.pre_value)?;
        let post = self.decode(&raw.post_value)?;
        Ok(raw.with(pre, post))
    }

    /// The current value (0 when the node is missing or empty); always succeeded.
    ///
    /// # Errors
    /// [`Error::CorruptedValue`]; server errors after the retry policy gave up;
    /// [`Error::DeadlineExceeded`].
    ///
    /// # Cancel safety
    /// Cancel safe (a read).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(sold: zk_curator::atomic::DistributedAtomicLong) -> zk_curator::Result<()> {
    /// println!("{} sold", sold.get().await?.post_value());
    /// # Ok(()) }
    /// ```
    pub async fn get(&self) -> Result<AtomicValue<T>> {
        self.engine
            .bounded("reading", |deadline| async move {
                let (bytes, _) = self.engine.read(deadline).await?;
                let value = self.decode(&bytes)?;
                Ok(AtomicValue { succeeded: true, pre_value: value, post_value: value, stats: Default::default() })
            })
            .await
    }

    /// Adds `delta` (wrapping), with optimistic attempts then the promoted lock, if any.
    ///
    /// # Errors
    /// [`Error::CorruptedValue`]; server errors; [`Error::OutcomeUnknown`] when a reply was lost
    /// and the node cannot tell whether the change applied (it applied once or not at all);
    /// [`Error::DeadlineExceeded`].
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call applies at most once (whether it did is not known).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(sold: zk_curator::atomic::DistributedAtomicLong) -> zk_curator::Result<()> {
    /// let r = sold.add(3).await?;
    /// if r.succeeded() {
    ///     println!("{} -> {} in {} tries", r.pre_value(), r.post_value(), r.stats().optimistic_tries);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn add(&self, delta: T) -> Result<AtomicValue<T>> {
        let make = move |pre: &[u8]| Ok(self.decode(pre)?.add(delta).to_bytes());
        let raw = self
            .engine
            .bounded("adding to", |deadline| async move { self.engine.apply(&make, deadline).await })
            .await?;
        self.decoded(raw)
    }

    /// Subtracts `delta` (wrapping): [`add`](Self::add) of `-delta`.
    ///
    /// # Errors
    /// As [`add`](Self::add).
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call applies at most once.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(stock: zk_curator::atomic::DistributedAtomicInteger) -> zk_curator::Result<()> {
    /// stock.subtract(2).await?;
    /// # Ok(()) }
    /// ```
    pub async fn subtract(&self, delta: T) -> Result<AtomicValue<T>> {
        self.add(delta.negate()).await
    }

    /// Adds 1.
    ///
    /// # Errors
    /// As [`add`](Self::add).
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call applies at most once.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(sold: zk_curator::atomic::DistributedAtomicLong) -> zk_curator::Result<()> {
    /// let r = sold.increment().await?;
    /// assert!(!r.succeeded() || *r.post_value() == r.pre_value() + 1);
    /// # Ok(()) }
    /// ```
    pub async fn increment(&self) -> Result<AtomicValue<T>> {
        self.add(T::ONE).await
    }

    /// Subtracts 1.
    ///
    /// # Errors
    /// As [`add`](Self::add).
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call applies at most once.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(sold: zk_curator::atomic::DistributedAtomicLong) -> zk_curator::Result<()> {
    /// sold.decrement().await?;
    /// # Ok(()) }
    /// ```
    pub async fn decrement(&self) -> Result<AtomicValue<T>> {
        self.add(T::ONE.negate()).await
    }

    /// Sets `new` with optimistic attempts then the promoted lock, if any (Curator's `trySet`).
    ///
    /// # Errors
    /// As [`add`](Self::add).
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call applies at most once.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(sold: zk_curator::atomic::DistributedAtomicLong) -> zk_curator::Result<()> {
    /// sold.try_set(100).await?;
    /// # Ok(()) }
    /// ```
    pub async fn try_set(&self, new: T) -> Result<AtomicValue<T>> {
        let make = move |pre: &[u8]| {
            self.decode(pre)?;
            Ok(new.to_bytes())
        };
        let raw =
            self.engine.bounded("setting", |deadline| async move { self.engine.apply(&make, deadline).await }).await?;
        self.decoded(raw)
    }

    /// Sets `new` if the value is `expected` (one versioned set, no retry). A missing node is
    /// never created (Curator's `compareAndSet`); an empty node holds 0.
    ///
    /// # Errors
    /// As [`add`](Self::add); [`ErrorCode::NoNode`](crate::ErrorCode::NoNode) naming the path
    /// when the node does not exist (Curator reports a plain failure, which a retry loop starting
    /// from [`get`](Self::get)'s 0 would repeat for ever): create it first
    /// ([`try_initialize`](Self::try_initialize)).
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call applies at most once.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(epoch: zk_curator::atomic::DistributedAtomicLong) -> zk_curator::Result<()> {
    /// if epoch.compare_and_set(7, 8).await?.succeeded() {
    ///     println!("moved the epoch from 7 to 8");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn compare_and_set(&self, expected: T, new: T) -> Result<AtomicValue<T>> {
        let matches = move |current: &[u8]| Ok(self.decode(current)? == expected);
        let raw = self
            .engine
            .bounded("compare-and-set", |deadline| async move {
                self.engine.compare_and_set(&matches, new.to_bytes(), deadline).await
            })
            .await?;
        self.decoded(raw)
    }

    /// Creates the node with `value` if it does not exist; `false` if it existed (Curator's
    /// `initialize`).
    ///
    /// # Errors
    /// Server errors; [`Error::OutcomeUnknown`]; [`Error::DeadlineExceeded`].
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call creates the node at most once.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(sold: zk_curator::atomic::DistributedAtomicLong) -> zk_curator::Result<()> {
    /// sold.try_initialize(0).await?;
    /// # Ok(()) }
    /// ```
    pub async fn try_initialize(&self, value: T) -> Result<bool> {
        self.engine
            .bounded(
                "initializing",
                |deadline| async move { self.engine.try_initialize(value.to_bytes(), deadline).await },
            )
            .await
    }

    /// Sets `value` whatever the node holds (corrupted data included), creating it if needed
    /// (Curator's `forceSet`: no atomicity).
    ///
    /// # Errors
    /// Server errors; [`Error::DeadlineExceeded`].
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call sets the value or not.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(sold: zk_curator::atomic::DistributedAtomicLong) -> zk_curator::Result<()> {
    /// sold.force_set(0).await?;
    /// # Ok(()) }
    /// ```
    pub async fn force_set(&self, value: T) -> Result<()> {
        self.engine
            .bounded("force-setting", |deadline| async move { self.engine.force_set(value.to_bytes(), deadline).await })
            .await
    }
}
