//! [`SharedCount`] (Curator's `SharedCount`): a [`SharedValue`] holding a 4-byte big-endian `i32`.

use std::time::Duration;

use super::value::{SharedValue, SharedValueStream, VersionedValue};
use crate::error::Result;
use crate::CuratorClient;

fn is_count(bytes: &[u8]) -> bool {
    bytes.len() == 4
}

fn decode(bytes: &[u8]) -> i32 {
    // Only 4-byte values are ever stored in a count's state (`is_count`).
    bytes.try_into().map(i32::from_be_bytes).unwrap_or_default()
}

/// An integer in one node shared by every process (Curator's `SharedCount`: 4 bytes,
/// big-endian), read, followed and set with a versioned compare-and-set. The semaphore's
/// [`with_shared_count`](crate::locks::InterProcessSemaphoreV2::with_shared_count) follows one.
///
/// Changes are ordered by the zxid that wrote them, never by the node's version, so a count keeps
/// following past the version's wrap-around at `i32::MAX` sets (Curator's CURATOR-688).
///
/// A node deleted under it is not a lost race: [`try_set`](Self::try_set) and
/// [`set_count`](Self::set_count) fail with [`ErrorCode::NoNode`](crate::ErrorCode::NoNode)
/// naming the path (as Curator's `trySetCount`), so a compare-and-set loop ends.
#[derive(Clone, Debug)]
pub struct SharedCount {
    value: SharedValue,
}

impl SharedCount {
    /// Starts following the count at `path`, creating it with `seed` if it does not exist.
    ///
    /// # Errors
    /// [`Error::InvalidPath`](crate::Error::InvalidPath); [`Error::CorruptedValue`](crate::Error::CorruptedValue)
    /// naming the path and length when the node holds anything but 4 bytes; server errors after
    /// the retry policy gave up.
    ///
    /// # Cancel safety
    /// Cancel safe: at most the node is created with the seed.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// let limit = zk_curator::shared::SharedCount::start(&client, "/throttle/limit", 10).await?;
    /// println!("limit {}", limit.count());
    /// # Ok(()) }
    /// ```
    pub async fn start(client: &CuratorClient, path: &str, seed: i32) -> Result<Self> {
        let value =
            SharedValue::start_with(client, path, seed.to_be_bytes().to_vec(), is_count, "shared_count").await?;
        Ok(Self { value })
    }

    /// The same count (the same follower) with every write ([`set_count`](Self::set_count),
    /// [`try_set`](Self::try_set)) bounded by `timeout`, strictly, as the atomics'
    /// [`timeout`](crate::atomic::DistributedAtomicLong::timeout): past it a write returns
    /// [`Error::DeadlineExceeded`](crate::Error::DeadlineExceeded) whatever the connection does
    /// and sends nothing more.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(limit: zk_curator::shared::SharedCount) -> zk_curator::Result<()> {
    /// use std::time::Duration;
    /// let limit = limit.timeout(Duration::from_secs(2));
    /// limit.set_count(20).await?;
    /// # Ok(()) }
    /// ```
    pub fn timeout(&self, timeout: Duration) -> Self {
        Self { value: self.value.timeout(timeout) }
    }

    /// The path.
    pub fn path(&self) -> &str {
        self.value.path()
    }

    /// The latest count seen (Curator's `getCount`).
    pub fn count(&self) -> i32 {
        decode(&self.value.value())
    }

    /// The latest count seen with its version: the `expected` of [`try_set`](Self::try_set).
    pub fn versioned_value(&self) -> VersionedValue<i32> {
        let v = self.value.versioned_value();
        VersionedValue::new(v.version(), decode(v.value()))
    }

    /// The counts as they change (see [`SharedValue::changes`]).
    pub fn changes(&self) -> SharedValueStream<i32> {
        SharedValueStream::new(self.value.inner_seen(), decode)
    }

    /// Sets the count whatever it is now (Curator's `setCount`).
    ///
    /// # Errors
    /// As [`SharedValue::set`]: [`ErrorCode::NoNode`](crate::ErrorCode::NoNode) naming the path
    /// when the node was deleted; server errors after the retry policy gave up;
    /// [`Error::DeadlineExceeded`](crate::Error::DeadlineExceeded) past the
    /// [`timeout`](Self::timeout) (set once or not at all).
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call (so also one past its timeout) sets the count once or not at
    /// all.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(limit: zk_curator::shared::SharedCount) -> zk_curator::Result<()> {
    /// limit.set_count(20).await?;
    /// # Ok(()) }
    /// ```
    pub async fn set_count(&self, count: i32) -> Result<()> {
        self.value.set(count.to_be_bytes().to_vec()).await
    }

    /// Sets the count to `new` only if the node is still at `expected`'s version (Curator's
    /// `trySetCount`); `Ok(false)` if someone changed it first (the count is then read again).
    ///
    /// # Errors
    /// As [`SharedValue::try_set`]: [`ErrorCode::NoNode`](crate::ErrorCode::NoNode) naming the
    /// path when the node was deleted (as Curator's `trySetCount`: the loop below ends with it);
    /// [`Error::OutcomeUnknown`](crate::Error::OutcomeUnknown);
    /// [`Error::DeadlineExceeded`](crate::Error::DeadlineExceeded) past the
    /// [`timeout`](Self::timeout).
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call (so also one past its timeout) applies at most once.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(limit: zk_curator::shared::SharedCount) -> zk_curator::Result<()> {
    /// // Double the limit, whoever else changes it meanwhile.
    /// loop {
    ///     let current = limit.versioned_value();
    ///     if limit.try_set(current.value() * 2, &current).await? {
    ///         break;
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_set(&self, new: i32, expected: &VersionedValue<i32>) -> Result<bool> {
        self.value.try_set_bytes(new.to_be_bytes().to_vec(), expected.version()).await
    }
}
