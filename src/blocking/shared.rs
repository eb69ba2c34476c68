//! [`SharedValue`] and [`SharedCount`] with their [`SharedValueChanges`], blocking.

use std::sync::Arc;
use std::time::Duration;

use super::{Core, CuratorClient};
use crate::error::Result;
use crate::shared::{SharedValueStream, VersionedValue};

/// A blocking [`SharedValue`](crate::shared::SharedValue): bytes in one node shared by every process
/// (Curator's `SharedValue`), followed in the background on the client's runtime and set with a
/// versioned compare-and-set. Clones share one follower; it stops when the last clone is dropped
/// (on any thread).
///
/// # Examples
/// ```no_run
/// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
/// let mode = zk_curator::blocking::SharedValue::start(&client, "/config/mode", "normal")?;
/// println!("mode: {}", String::from_utf8_lossy(&mode.value()));
/// mode.set("maintenance")?;
/// # Ok::<(), zk_curator::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct SharedValue {
    inner: crate::shared::SharedValue,
    core: Arc<Core>,
}

impl SharedValue {
    /// Starts following the shared value at `path`, creating it (parents as containers) with
    /// `seed` if it does not exist, as [`SharedValue::start`](crate::shared::SharedValue::start).
    ///
    /// # Errors
    /// As [`SharedValue::start`](crate::shared::SharedValue::start);
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `runtime` when called
    /// inside a tokio runtime context.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// let mode = zk_curator::blocking::SharedValue::start(&client, "/config/mode", "normal")?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn start(client: &CuratorClient, path: &str, seed: impl Into<Vec<u8>>) -> Result<Self> {
        let core = client.core();
        let inner = core.block_on(crate::shared::SharedValue::start(core.client(), path, seed))??;
        Ok(Self { inner, core: core.clone() })
    }

    /// The path.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let mode = zk_curator::blocking::SharedValue::start(&client, "/config/mode", "normal")?;
    /// assert_eq!(mode.path(), "/config/mode");
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn path(&self) -> &str {
        self.inner.path()
    }

    /// The async shared value inside (the same one, the same follower).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let mode = zk_curator::blocking::SharedValue::start(&client, "/config/mode", "normal")?;
    /// let same: zk_curator::shared::SharedValue = mode.as_async().clone();
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn as_async(&self) -> &crate::shared::SharedValue {
        &self.inner
    }

    /// The same shared value with every write bounded by `timeout`, strictly (see
    /// [`SharedValue::timeout`](crate::shared::SharedValue::timeout)).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let mode = zk_curator::blocking::SharedValue::start(&client, "/config/mode", "normal")?;
    /// let mode = mode.timeout(std::time::Duration::from_secs(2));
    /// mode.set("maintenance")?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn timeout(&self, timeout: Duration) -> Self {
        Self { inner: self.inner.timeout(timeout), core: self.core.clone() }
    }

    /// The latest value seen (no round trip).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let mode = zk_curator::blocking::SharedValue::start(&client, "/config/mode", "normal")?;
    /// let bytes: Vec<u8> = mode.value();
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn value(&self) -> Vec<u8> {
        self.inner.value()
    }

    /// The latest value seen with its version: the `expected` of [`try_set`](Self::try_set).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let mode = zk_curator::blocking::SharedValue::start(&client, "/config/mode", "normal")?;
    /// println!("version {}", mode.versioned_value().version());
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn versioned_value(&self) -> VersionedValue<Vec<u8>> {
        self.inner.versioned_value()
    }

    /// The values as they change (see [`SharedValue::changes`](crate::shared::SharedValue::changes)).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let mode = zk_curator::blocking::SharedValue::start(&client, "/config/mode", "normal")?;
    /// for seen in mode.changes() {
    ///     println!("mode now {:?}", seen.value());
    /// }
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn changes(&self) -> SharedValueChanges<Vec<u8>> {
        SharedValueChanges { inner: self.inner.changes(), path: self.path().to_string(), core: self.core.clone() }
    }

    /// Sets the value whatever it is now (Curator's `setValue`).
    ///
    /// # Errors
    /// As [`SharedValue::set`](crate::shared::SharedValue::set);
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `runtime` inside a tokio
    /// runtime context.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let mode = zk_curator::blocking::SharedValue::start(&client, "/config/mode", "normal")?;
    /// mode.set("maintenance")?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn set(&self, value: impl Into<Vec<u8>>) -> Result<()> {
        self.core.block_on(self.inner.set(value))?
    }

    /// Sets `new` only if the node is still at `expected`'s version (Curator's `trySetValue`);
    /// `Ok(false)` if someone changed it first (the value is then read again).
    ///
    /// # Errors
    /// As [`SharedValue::try_set`](crate::shared::SharedValue::try_set) (an
    /// [`Error::OutcomeUnknown`](crate::Error::OutcomeUnknown) set applied once or not at all);
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `runtime` inside a tokio
    /// runtime context.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let mode = zk_curator::blocking::SharedValue::start(&client, "/config/mode", "normal")?;
    /// let current = mode.versioned_value();
    /// if !mode.try_set("maintenance", &current)? {
    ///     println!("changed meanwhile to {:?}", mode.value());
    /// }
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn try_set(&self, new: impl Into<Vec<u8>>, expected: &VersionedValue<Vec<u8>>) -> Result<bool> {
        self.core.block_on(self.inner.try_set(new, expected))?
    }
}

/// A blocking [`SharedCount`](crate::shared::SharedCount): an `i32` in one node (Curator's
/// `SharedCount`: 4 bytes, big-endian), followed in the background and set with a versioned
/// compare-and-set.
///
/// # Examples
/// ```no_run
/// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
/// let limit = zk_curator::blocking::SharedCount::start(&client, "/throttle/limit", 10)?;
/// loop {
///     let current = limit.versioned_value();
///     if limit.try_set(current.value() * 2, &current)? {
///         break;
///     }
/// }
/// # Ok::<(), zk_curator::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct SharedCount {
    inner: crate::shared::SharedCount,
    core: Arc<Core>,
}

impl SharedCount {
    /// Starts following the count at `path`, creating it with `seed` if it does not exist, as
    /// [`SharedCount::start`](crate::shared::SharedCount::start).
    ///
    /// # Errors
    /// As [`SharedCount::start`](crate::shared::SharedCount::start)
    /// ([`Error::CorruptedValue`](crate::Error::CorruptedValue) when the node holds anything but
    /// 4 bytes); [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `runtime`
    /// inside a tokio runtime context.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// let limit = zk_curator::blocking::SharedCount::start(&client, "/throttle/limit", 10)?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn start(client: &CuratorClient, path: &str, seed: i32) -> Result<Self> {
        let core = client.core();
        let inner = core.block_on(crate::shared::SharedCount::start(core.client(), path, seed))??;
        Ok(Self { inner, core: core.clone() })
    }

    /// The path.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let limit = zk_curator::blocking::SharedCount::start(&client, "/throttle/limit", 10)?;
    /// assert_eq!(limit.path(), "/throttle/limit");
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn path(&self) -> &str {
        self.inner.path()
    }

    /// The async count inside (the same one, the same follower).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let limit = zk_curator::blocking::SharedCount::start(&client, "/throttle/limit", 10)?;
    /// let same: zk_curator::shared::SharedCount = limit.as_async().clone();
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn as_async(&self) -> &crate::shared::SharedCount {
        &self.inner
    }

    /// The same count with every write bounded by `timeout`, strictly (see
    /// [`SharedCount::timeout`](crate::shared::SharedCount::timeout)).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let limit = zk_curator::blocking::SharedCount::start(&client, "/throttle/limit", 10)?;
    /// let limit = limit.timeout(std::time::Duration::from_secs(2));
    /// limit.set_count(20)?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn timeout(&self, timeout: Duration) -> Self {
        Self { inner: self.inner.timeout(timeout), core: self.core.clone() }
    }

    /// The latest count seen (Curator's `getCount`; no round trip).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let limit = zk_curator::blocking::SharedCount::start(&client, "/throttle/limit", 10)?;
    /// println!("limit {}", limit.count());
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn count(&self) -> i32 {
        self.inner.count()
    }

    /// The latest count seen with its version: the `expected` of [`try_set`](Self::try_set).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let limit = zk_curator::blocking::SharedCount::start(&client, "/throttle/limit", 10)?;
    /// let seen = limit.versioned_value();
    /// println!("{} at version {}", seen.value(), seen.version());
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn versioned_value(&self) -> VersionedValue<i32> {
        self.inner.versioned_value()
    }

    /// The counts as they change (see [`SharedValue::changes`](crate::shared::SharedValue::changes)).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let limit = zk_curator::blocking::SharedCount::start(&client, "/throttle/limit", 10)?;
    /// let mut changes = limit.changes();
    /// if let Ok(Some(seen)) = changes.next_timeout(std::time::Duration::from_secs(5)) {
    ///     println!("limit now {}", seen.value());
    /// }
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn changes(&self) -> SharedValueChanges<i32> {
        SharedValueChanges { inner: self.inner.changes(), path: self.path().to_string(), core: self.core.clone() }
    }

    /// Sets the count whatever it is now (Curator's `setCount`).
    ///
    /// # Errors
    /// As [`SharedCount::set_count`](crate::shared::SharedCount::set_count);
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `runtime` inside a tokio
    /// runtime context.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let limit = zk_curator::blocking::SharedCount::start(&client, "/throttle/limit", 10)?;
    /// limit.set_count(20)?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn set_count(&self, count: i32) -> Result<()> {
        self.core.block_on(self.inner.set_count(count))?
    }

    /// Sets `new` only if the node is still at `expected`'s version (Curator's `trySetCount`);
    /// `Ok(false)` if someone changed it first (the count is then read again).
    ///
    /// # Errors
    /// As [`SharedCount::try_set`](crate::shared::SharedCount::try_set);
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `runtime` inside a tokio
    /// runtime context.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let limit = zk_curator::blocking::SharedCount::start(&client, "/throttle/limit", 10)?;
    /// let current = limit.versioned_value();
    /// let doubled = limit.try_set(current.value() * 2, &current)?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn try_set(&self, new: i32, expected: &VersionedValue<i32>) -> Result<bool> {
        self.core.block_on(self.inner.try_set(new, expected))?
    }
}

/// The values of a blocking [`SharedValue`] or [`SharedCount`] as they change (a blocking
/// [`SharedValueStream`]), an [`Iterator`]: each `next()` waits for a value later than the last one
/// it returned (intermediate values may be skipped; the last one is never missed).
pub struct SharedValueChanges<T> {
    inner: SharedValueStream<T>,
    path: String,
    core: Arc<Core>,
}

impl<T> std::fmt::Debug for SharedValueChanges<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedValueChanges").finish_non_exhaustive()
    }
}

impl<T> SharedValueChanges<T> {
    /// The next value within `timeout`: `Ok(None)` once the shared value is dropped. Returns
    /// within `timeout` (plus a few ms); nothing is lost by a timeout.
    ///
    /// A timeout is `Err(DeadlineExceeded)`, as with every blocking feed's `next_timeout` (it was
    /// `Ok(None)` before: a caller that read `None` as "unchanged" now matches the error).
    ///
    /// # Errors
    /// [`Error::DeadlineExceeded`](crate::Error::DeadlineExceeded) naming the node when no value
    /// came within `timeout`; [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming
    /// `runtime` inside a tokio runtime context.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let limit = zk_curator::blocking::SharedCount::start(&client, "/throttle/limit", 10)?;
    /// let mut changes = limit.changes();
    /// match changes.next_timeout(std::time::Duration::from_secs(1)) {
    ///     Ok(Some(seen)) => println!("limit now {}", seen.value()),
    ///     Ok(None) => println!("stopped"),
    ///     Err(e) if e.kind() == zk_curator::ErrorKind::DeadlineExceeded => println!("unchanged"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn next_timeout(&mut self, timeout: impl Into<crate::Deadline>) -> Result<Option<VersionedValue<T>>> {
        let timeout = timeout.into().remaining();
        self.core.feed_next_timeout(self.inner.next(), timeout, &self.path, "waiting for a new value of")
    }
}

impl<T> Iterator for SharedValueChanges<T> {
    type Item = VersionedValue<T>;

    /// Waits for the next value; `None` once the shared value is dropped (or when called inside a
    /// tokio runtime context: logged).
    fn next(&mut self) -> Option<VersionedValue<T>> {
        self.core.feed_next(self.inner.next(), &self.path)
    }
}
