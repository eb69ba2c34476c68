//! [`DistributedAtomicValue`] and [`DistributedAtomicNumber`] ([`DistributedAtomicLong`],
//! [`DistributedAtomicInteger`]), blocking.

use std::sync::Arc;
use std::time::Duration;

use super::{Core, CuratorClient};
use crate::atomic::{AtomicNumber, AtomicValue, PromotedToLock};
use crate::error::Result;
use crate::RetryPolicy;

/// A blocking [`DistributedAtomicValue`](crate::atomic::DistributedAtomicValue): bytes in one node
/// changed by optimistic versioned sets (Curator's `DistributedAtomicValue`). A lost reply is
/// never applied twice: see [Lost replies](crate::atomic::DistributedAtomicValue#lost-replies).
///
/// # Examples
/// ```no_run
/// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
/// let token = zk_curator::blocking::DistributedAtomicValue::new(&client, "/app/token")?;
/// if token.try_set(b"v2".to_vec())?.succeeded() {
///     println!("set");
/// }
/// # Ok::<(), zk_curator::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct DistributedAtomicValue {
    inner: crate::atomic::DistributedAtomicValue,
    core: Arc<Core>,
}

impl DistributedAtomicValue {
    /// A value at `path`, as [`DistributedAtomicValue::new`](crate::atomic::DistributedAtomicValue::new).
    ///
    /// # Errors
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) naming `path`.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// let token = zk_curator::blocking::DistributedAtomicValue::new(&client, "/app/token")?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn new(client: &CuratorClient, path: &str) -> Result<Self> {
        let inner = crate::atomic::DistributedAtomicValue::new(client.core().client(), path)?;
        Ok(Self { inner, core: client.core().clone() })
    }

    fn with(&self, inner: crate::atomic::DistributedAtomicValue) -> Self {
        Self { inner, core: self.core.clone() }
    }

    /// The same value with its optimistic attempts under `policy`.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let token = zk_curator::blocking::DistributedAtomicValue::new(&client, "/app/token")?;
    /// let patient = token.with_retry_policy(zk_curator::RetryNTimes::new(100, std::time::Duration::from_millis(1)));
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn with_retry_policy(&self, policy: impl RetryPolicy) -> Self {
        self.with(self.inner.with_retry_policy(policy))
    }

    /// The same value, promoted to a mutex when the optimistic attempts give up.
    ///
    /// # Errors
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) naming the lock path.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let token = zk_curator::blocking::DistributedAtomicValue::new(&client, "/app/token")?;
    /// let token = token.promoted_to_lock(zk_curator::atomic::PromotedToLock::new("/app/token-lock"))?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn promoted_to_lock(&self, promoted: PromotedToLock) -> Result<Self> {
        Ok(self.with(self.inner.promoted_to_lock(promoted)?))
    }

    /// The same value with every call bounded by `timeout`, strictly.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let token = zk_curator::blocking::DistributedAtomicValue::new(&client, "/app/token")?;
    /// let token = token.timeout(std::time::Duration::from_secs(2));
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn timeout(&self, timeout: Duration) -> Self {
        self.with(self.inner.timeout(timeout))
    }

    /// The path.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let token = zk_curator::blocking::DistributedAtomicValue::new(&client, "/app/token")?;
    /// assert_eq!(token.path(), "/app/token");
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn path(&self) -> &str {
        self.inner.path()
    }

    /// The async value inside (the same settings).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let token = zk_curator::blocking::DistributedAtomicValue::new(&client, "/app/token")?;
    /// let same: zk_curator::atomic::DistributedAtomicValue = token.as_async().clone();
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn as_async(&self) -> &crate::atomic::DistributedAtomicValue {
        &self.inner
    }

    /// The current bytes (empty when the node does not exist).
    ///
    /// # Errors
    /// As [`DistributedAtomicValue::get`](crate::atomic::DistributedAtomicValue::get);
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `runtime` inside a tokio
    /// runtime context.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let token = zk_curator::blocking::DistributedAtomicValue::new(&client, "/app/token")?;
    /// println!("{:?}", token.get()?.post_value());
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn get(&self) -> Result<AtomicValue<Vec<u8>>> {
        self.core.block_on(self.inner.get())?
    }

    /// Sets the bytes with optimistic attempts (then the promoted lock, if any).
    ///
    /// # Errors
    /// As [`DistributedAtomicValue::try_set`](crate::atomic::DistributedAtomicValue::try_set);
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `runtime` inside a tokio
    /// runtime context.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let token = zk_curator::blocking::DistributedAtomicValue::new(&client, "/app/token")?;
    /// let result = token.try_set(b"v2".to_vec())?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn try_set(&self, new: Vec<u8>) -> Result<AtomicValue<Vec<u8>>> {
        self.core.block_on(self.inner.try_set(new))?
    }

    /// Sets `new` if the node holds exactly `expected` (one versioned set, never a create).
    ///
    /// # Errors
    /// As [`try_set`](Self::try_set).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let token = zk_curator::blocking::DistributedAtomicValue::new(&client, "/app/token")?;
    /// let moved = token.compare_and_set(b"v1".to_vec(), b"v2".to_vec())?.succeeded();
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn compare_and_set(&self, expected: Vec<u8>, new: Vec<u8>) -> Result<AtomicValue<Vec<u8>>> {
        self.core.block_on(self.inner.compare_and_set(expected, new))?
    }

    /// Creates the node with `value` if it does not exist; `false` if it existed.
    ///
    /// # Errors
    /// As [`try_set`](Self::try_set).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let token = zk_curator::blocking::DistributedAtomicValue::new(&client, "/app/token")?;
    /// token.try_initialize(b"v1".to_vec())?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn try_initialize(&self, value: Vec<u8>) -> Result<bool> {
        self.core.block_on(self.inner.try_initialize(value))?
    }

    /// Sets the bytes whatever they are, creating the node if needed (no atomicity).
    ///
    /// # Errors
    /// As [`try_set`](Self::try_set) (never [`Error::OutcomeUnknown`](crate::Error::OutcomeUnknown)).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let token = zk_curator::blocking::DistributedAtomicValue::new(&client, "/app/token")?;
    /// token.force_set(b"reset".to_vec())?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn force_set(&self, value: Vec<u8>) -> Result<()> {
        self.core.block_on(self.inner.force_set(value))?
    }
}

/// A blocking [`DistributedAtomicNumber`](crate::atomic::DistributedAtomicNumber): Curator's
/// `DistributedAtomicLong` ([`DistributedAtomicLong`]) and `DistributedAtomicInteger`
/// ([`DistributedAtomicInteger`]), big-endian numbers changed by optimistic versioned sets; a
/// change never applies twice.
///
/// # Examples
/// ```no_run
/// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
/// let sold = zk_curator::blocking::DistributedAtomicLong::new(&client, "/shop/tickets-sold")?
///     .timeout(std::time::Duration::from_secs(5));
/// let result = sold.increment()?;
/// if result.succeeded() {
///     println!("ticket #{}", result.post_value());
/// }
/// # Ok::<(), zk_curator::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct DistributedAtomicNumber<T: AtomicNumber> {
    inner: crate::atomic::DistributedAtomicNumber<T>,
    core: Arc<Core>,
}

/// A blocking [`DistributedAtomicLong`](crate::atomic::DistributedAtomicLong): an `i64` in 8 bytes.
pub type DistributedAtomicLong = DistributedAtomicNumber<i64>;

/// A blocking [`DistributedAtomicInteger`](crate::atomic::DistributedAtomicInteger): an `i32` in 4 bytes.
pub type DistributedAtomicInteger = DistributedAtomicNumber<i32>;

impl<T: AtomicNumber> DistributedAtomicNumber<T> {
    /// A counter at `path`, as [`DistributedAtomicNumber::new`](crate::atomic::DistributedAtomicNumber::new).
    ///
    /// # Errors
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) naming `path`.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// let stock = zk_curator::blocking::DistributedAtomicInteger::new(&client, "/shop/stock")?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn new(client: &CuratorClient, path: &str) -> Result<Self> {
        let inner = crate::atomic::DistributedAtomicNumber::new(client.core().client(), path)?;
        Ok(Self { inner, core: client.core().clone() })
    }

    fn with(&self, inner: crate::atomic::DistributedAtomicNumber<T>) -> Self {
        Self { inner, core: self.core.clone() }
    }

    /// The same counter with its optimistic attempts under `policy`.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let sold = zk_curator::blocking::DistributedAtomicLong::new(&client, "/shop/tickets-sold")?;
    /// let sold = sold.with_retry_policy(zk_curator::RetryNTimes::new(1000, std::time::Duration::from_millis(1)));
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn with_retry_policy(&self, policy: impl RetryPolicy) -> Self {
        self.with(self.inner.with_retry_policy(policy))
    }

    /// The same counter, promoted to a mutex when the optimistic attempts give up.
    ///
    /// # Errors
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) naming the lock path.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let sold = zk_curator::blocking::DistributedAtomicLong::new(&client, "/shop/tickets-sold")?;
    /// let sold = sold.promoted_to_lock(zk_curator::atomic::PromotedToLock::new("/shop/tickets-lock"))?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn promoted_to_lock(&self, promoted: PromotedToLock) -> Result<Self> {
        Ok(self.with(self.inner.promoted_to_lock(promoted)?))
    }

    /// The same counter with every call bounded by `timeout`, strictly.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let sold = zk_curator::blocking::DistributedAtomicLong::new(&client, "/shop/tickets-sold")?;
    /// let sold = sold.timeout(std::time::Duration::from_secs(2));
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn timeout(&self, timeout: Duration) -> Self {
        self.with(self.inner.timeout(timeout))
    }

    /// The path.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let sold = zk_curator::blocking::DistributedAtomicLong::new(&client, "/shop/tickets-sold")?;
    /// assert_eq!(sold.path(), "/shop/tickets-sold");
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn path(&self) -> &str {
        self.inner.path()
    }

    /// The async counter inside (the same settings).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let sold = zk_curator::blocking::DistributedAtomicLong::new(&client, "/shop/tickets-sold")?;
    /// let same: zk_curator::atomic::DistributedAtomicLong = sold.as_async().clone();
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn as_async(&self) -> &crate::atomic::DistributedAtomicNumber<T> {
        &self.inner
    }

    /// The current value (0 when the node is missing or empty).
    ///
    /// # Errors
    /// As [`DistributedAtomicNumber::get`](crate::atomic::DistributedAtomicNumber::get);
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `runtime` inside a tokio
    /// runtime context.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let sold = zk_curator::blocking::DistributedAtomicLong::new(&client, "/shop/tickets-sold")?;
    /// println!("{} sold", sold.get()?.post_value());
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn get(&self) -> Result<AtomicValue<T>> {
        self.core.block_on(self.inner.get())?
    }

    /// Adds `delta` (wrapping); check [`succeeded`](AtomicValue::succeeded).
    ///
    /// # Errors
    /// As [`DistributedAtomicNumber::add`](crate::atomic::DistributedAtomicNumber::add) (an
    /// [`Error::OutcomeUnknown`](crate::Error::OutcomeUnknown) change applied once or not at
    /// all); [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `runtime` inside a
    /// tokio runtime context.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let sold = zk_curator::blocking::DistributedAtomicLong::new(&client, "/shop/tickets-sold")?;
    /// let r = sold.add(3)?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn add(&self, delta: T) -> Result<AtomicValue<T>> {
        self.core.block_on(self.inner.add(delta))?
    }

    /// Subtracts `delta` (wrapping).
    ///
    /// # Errors
    /// As [`add`](Self::add).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let stock = zk_curator::blocking::DistributedAtomicInteger::new(&client, "/shop/stock")?;
    /// stock.subtract(2)?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn subtract(&self, delta: T) -> Result<AtomicValue<T>> {
        self.core.block_on(self.inner.subtract(delta))?
    }

    /// Adds 1.
    ///
    /// # Errors
    /// As [`add`](Self::add).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let sold = zk_curator::blocking::DistributedAtomicLong::new(&client, "/shop/tickets-sold")?;
    /// sold.increment()?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn increment(&self) -> Result<AtomicValue<T>> {
        self.core.block_on(self.inner.increment())?
    }

    /// Subtracts 1.
    ///
    /// # Errors
    /// As [`add`](Self::add).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let sold = zk_curator::blocking::DistributedAtomicLong::new(&client, "/shop/tickets-sold")?;
    /// sold.decrement()?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn decrement(&self) -> Result<AtomicValue<T>> {
        self.core.block_on(self.inner.decrement())?
    }

    /// Sets `new` with optimistic attempts then the promoted lock, if any.
    ///
    /// # Errors
    /// As [`add`](Self::add).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let sold = zk_curator::blocking::DistributedAtomicLong::new(&client, "/shop/tickets-sold")?;
    /// sold.try_set(100)?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn try_set(&self, new: T) -> Result<AtomicValue<T>> {
        self.core.block_on(self.inner.try_set(new))?
    }

    /// Sets `new` if the value is `expected` (one versioned set; a missing node is never created).
    ///
    /// # Errors
    /// As [`add`](Self::add).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let epoch = zk_curator::blocking::DistributedAtomicLong::new(&client, "/app/epoch")?;
    /// let moved = epoch.compare_and_set(7, 8)?.succeeded();
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn compare_and_set(&self, expected: T, new: T) -> Result<AtomicValue<T>> {
        self.core.block_on(self.inner.compare_and_set(expected, new))?
    }

    /// Creates the node with `value` if it does not exist; `false` if it existed.
    ///
    /// # Errors
    /// As [`add`](Self::add).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let sold = zk_curator::blocking::DistributedAtomicLong::new(&client, "/shop/tickets-sold")?;
    /// sold.try_initialize(0)?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn try_initialize(&self, value: T) -> Result<bool> {
        self.core.block_on(self.inner.try_initialize(value))?
    }

    /// Sets `value` whatever the node holds, creating it if needed (no atomicity).
    ///
    /// # Errors
    /// As [`add`](Self::add).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let sold = zk_curator::blocking::DistributedAtomicLong::new(&client, "/shop/tickets-sold")?;
    /// sold.force_set(0)?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn force_set(&self, value: T) -> Result<()> {
        self.core.block_on(self.inner.force_set(value))?
    }
}
