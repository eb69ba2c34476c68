//! [`SharedValue`] (Curator's `SharedValue`): bytes in one node that every process reads, watches
//! and sets with a versioned compare-and-set.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tracing::{debug, warn};

use super::write::{self, Written};
use crate::deadline::deadline_after;
use crate::error::{Error, ErrorCode, Result};
use crate::feed::WatchChanges;
use crate::framework::{backoff::Backoff, paths};
use crate::{ConnectionState, CuratorClient};

/// A value with the node version it was read at (Curator's `VersionedValue`): what
/// [`SharedValue::try_set`] and [`SharedCount::try_set`](crate::shared::SharedCount::try_set) compare.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct VersionedValue<T> {
    version: i32,
    value: T,
}

impl<T> VersionedValue<T> {
    /// A value seen at `version`.
    pub fn new(version: i32, value: T) -> Self {
        Self { version, value }
    }

    /// The node's data version (ZooKeeper's `Stat.version`; it wraps around past `i32::MAX`).
    pub fn version(&self) -> i32 {
        self.version
    }

    /// The value.
    pub fn value(&self) -> &T {
        &self.value
    }

    /// The value, by move.
    pub fn into_value(self) -> T {
        self.value
    }
}

/// The last value seen, with the zxid of the change that wrote it: the order of changes.
#[derive(Clone, Debug)]
pub(crate) struct Seen {
    pub(crate) value: VersionedValue<Vec<u8>>,
    mzxid: i64,
}

impl Seen {
    /// True when `mzxid` is a later change than this one. Changes are ordered by zxid (an `i64`
    /// the ensemble only increases), never by version: the version wraps around after
    /// `i32::MAX` sets, and ordering by it would freeze the value there (Curator's CURATOR-688).
    fn is_older_than(&self, mzxid: i64) -> bool {
        mzxid > self.mzxid
    }
}

pub(crate) struct Inner {
    client: CuratorClient,
    path: String,
    /// `recipe="shared_value"` or `"shared_count"`.
    metrics: crate::metrics::RecipeLabels,
    seen: watch::Sender<Seen>,
    /// Whether bytes are a value of this shared value (a count takes only 4 bytes).
    accept: fn(&[u8]) -> bool,
}

impl Inner {
    /// Takes `data` as the value if it is a later change than the one held.
    fn observe(&self, data: Vec<u8>, stat: &zookeeper_client::Stat) {
        if !(self.accept)(&data) {
            warn!(path = %self.path, len = data.len(), "ignoring a shared value this recipe cannot read");
            return;
        }
        self.seen.send_if_modified(|seen| {
            if seen.is_older_than(stat.mzxid) {
                *seen = Seen { value: VersionedValue::new(stat.version, data), mzxid: stat.mzxid };
                true
            } else {
                false
            }
        });
    }
}

/// Stops the follower when the last handle goes.
struct Core {
    inner: Arc<Inner>,
    follower: tokio::task::JoinHandle<()>,
}

impl Drop for Core {
    fn drop(&mut self) {
        self.follower.abort();
    }
}

/// Bytes in one node, shared by every process that uses the path (Curator's `SharedValue`).
///
/// [`start`](Self::start) creates the node with a seed if it does not exist, reads it and keeps
/// following it: [`value`](Self::value) is the latest value seen, [`changes`](Self::changes) a
/// stream of them. The watch is re-armed after every change, reconnection and session
/// replacement, and the value is re-read then, so every handle converges on the node's value.
/// Clones share one follower; it stops when the last clone is dropped.
///
/// A node deleted under it is not a lost race: [`try_set`](Self::try_set) and
/// [`set`](Self::set) fail with [`ErrorCode::NoNode`] naming the path (as Curator's
/// `trySetValue`), so a compare-and-set loop ends; the value seen stays the last one until the
/// node is created again (e.g. by another [`start`](Self::start)).
#[derive(Clone)]
pub struct SharedValue {
    core: Arc<Core>,
    /// Bounds every write of this handle, strictly (see [`timeout`](Self::timeout)).
    timeout: Option<Duration>,
}

impl std::fmt::Debug for SharedValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedValue").field("path", &self.core.inner.path).finish_non_exhaustive()
    }
}

impl SharedValue {
    /// Starts following the shared value at `path`, creating it (parents as containers) with
    /// `seed` if it does not exist.
    ///
    /// # Errors
    /// [`Error::InvalidPath`]; [`Error::InvalidArgument`] for a seed over the client's data size
    /// limit; server errors after the retry policy gave up.
    ///
    /// # Cancel safety
    /// Cancel safe: at most the node is created (with the seed), which any later start accepts.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// let mode = zk_curator::shared::SharedValue::start(&client, "/config/mode", b"normal".to_vec()).await?;
    /// println!("mode: {}", String::from_utf8_lossy(&mode.value()));
    /// # Ok(()) }
    /// ```
    pub async fn start(client: &CuratorClient, path: &str, seed: impl Into<Vec<u8>>) -> Result<Self> {
        Self::start_with(client, path, seed.into(), |_| true, "shared_value").await
    }

    pub(crate) async fn start_with(
        client: &CuratorClient,
        path: &str,
        seed: Vec<u8>,
        accept: fn(&[u8]) -> bool,
        recipe: &'static str,
    ) -> Result<Self> {
        paths::validate_path(path)?;
        client.check_data_size("seed", path, seed.len())?;
        match client.create(path).data(seed).uncompressed().creating_parent_containers_if_needed().await {
            Ok(_) => {}
            Err(e) if e.is(ErrorCode::NodeExists) => {}
            Err(e) => return Err(e),
        }
        let fixed = client.fix_path(path);
        let f = fixed.as_str();
        let (data, stat, watcher) =
            client.with_retry(path, None, |zk| async move { zk.get_and_watch_data(f).await }).await?;
        if !accept(&data) {
            return Err(Error::CorruptedValue {
                path: path.to_string(),
                len: data.len(),
                expected: "4 bytes (a big-endian i32)",
            });
        }
        let seen = Seen { value: VersionedValue::new(stat.version, data), mzxid: stat.mzxid };
        let inner = Arc::new(Inner {
            client: client.clone(),
            path: path.to_string(),
            metrics: client.recipe_labels(recipe, path),
            seen: watch::channel(seen).0,
            accept,
        });
        let follower = tokio::spawn(follow(inner.clone(), watcher));
        Ok(Self { core: Arc::new(Core { inner, follower }), timeout: None })
    }

    /// The same shared value (the same follower) with every write ([`set`](Self::set),
    /// [`try_set`](Self::try_set)) bounded by `timeout`, strictly, as the atomics'
    /// [`timeout`](crate::atomic::DistributedAtomicLong::timeout): past it a write returns
    /// [`Error::DeadlineExceeded`] whatever the connection does and sends nothing more.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(mode: zk_curator::shared::SharedValue) -> zk_curator::Result<()> {
    /// use std::time::Duration;
    /// let mode = mode.timeout(Duration::from_secs(2));
    /// mode.set(b"maintenance".to_vec()).await?;
    /// # Ok(()) }
    /// ```
    pub fn timeout(&self, timeout: Duration) -> Self {
        Self { core: self.core.clone(), timeout: Some(timeout) }
    }

    /// Runs the write `op` within this handle's timeout, if it has one, strictly; `op` gets the
    /// deadline (so that nothing is sent after it).
    pub(crate) async fn bounded<T, F, Fut>(&self, during: &'static str, op: F) -> Result<T>
    where
        F: FnOnce(Option<Instant>) -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        let Some(timeout) = self.timeout else { return op(None).await };
        let start = Instant::now();
        let deadline = deadline_after(timeout);
        // Inner deadline errors name the caller's timeout too, not the remainder a step had left.
        match tokio::time::timeout_at(deadline.into(), op(Some(deadline))).await {
            Ok(result) => result.map_err(|e| e.naming_timeout(timeout, start.elapsed())),
            Err(_) => Err(Error::deadline_exceeded(&self.core.inner.path, during, start.elapsed())
                .naming_timeout(timeout, start.elapsed())),
        }
    }

    /// The path.
    pub fn path(&self) -> &str {
        &self.core.inner.path
    }

    /// The latest value seen.
    pub fn value(&self) -> Vec<u8> {
        self.core.inner.seen.borrow().value.value.clone()
    }

    /// The latest value seen, with its version: the `expected` of [`try_set`](Self::try_set).
    pub fn versioned_value(&self) -> VersionedValue<Vec<u8>> {
        self.core.inner.seen.borrow().value.clone()
    }

    /// The values as they change: each call of [`next`](SharedValueStream::next) waits for a
    /// value later than the last one it returned (intermediate values may be skipped; the last
    /// one is never missed).
    pub fn changes(&self) -> SharedValueStream<Vec<u8>> {
        SharedValueStream::new(self.core.inner.seen.subscribe(), |bytes| bytes.to_vec())
    }

    pub(crate) fn inner_seen(&self) -> watch::Receiver<Seen> {
        self.core.inner.seen.subscribe()
    }

    /// Sets the value whatever it is now (Curator's `setValue`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for data over the client's size limit; [`ErrorCode::NoNode`]
    /// naming the path when the node was deleted (it is not created again); other server errors
    /// after the retry policy gave up; [`Error::DeadlineExceeded`] past the
    /// [`timeout`](Self::timeout) (the value was then set once or not at all, and
    /// [`value`](Self::value) follows the node either way).
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call (so also one past its timeout) sets the value once or not at
    /// all.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(mode: zk_curator::shared::SharedValue) -> zk_curator::Result<()> {
    /// mode.set(b"maintenance".to_vec()).await?;
    /// # Ok(()) }
    /// ```
    pub async fn set(&self, value: impl Into<Vec<u8>>) -> Result<()> {
        let inner = &self.core.inner;
        let value = value.into();
        inner.client.check_data_size("value", &inner.path, value.len())?;
        let fixed = inner.client.fix_path(&inner.path);
        let (f, d) = (fixed.as_str(), value.as_slice());
        let stat = self
            .bounded("setting", |deadline| {
                inner.client.with_retry(&inner.path, deadline, |zk| async move { zk.set_data(f, d, None).await })
            })
            .await;
        inner.metrics.counter_operation(if stat.is_ok() { "succeeded" } else { "error" });
        inner.observe(value, &stat?);
        Ok(())
    }

    /// Sets the value to `new` only if the node is still at `expected`'s version (Curator's
    /// `trySetValue`). `Ok(false)`: someone else changed it first; the value is read again, so
    /// [`versioned_value`](Self::versioned_value) is the fresh one to retry from.
    ///
    /// # Errors
    /// As [`set`](Self::set): a deleted node is [`ErrorCode::NoNode`] naming the path, never
    /// `Ok(false)` (no version can match until the node is created again, so a retry loop would
    /// spin); [`Error::OutcomeUnknown`] when a reply was lost and the node no longer tells
    /// whether the set applied (it applied once or not at all).
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call (so also one past its timeout) applies at most once (the
    /// versioned set can only win once).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(mode: zk_curator::shared::SharedValue) -> zk_curator::Result<()> {
    /// loop {
    ///     let current = mode.versioned_value();
    ///     let mut next = current.value().clone();
    ///     next.extend_from_slice(b"+");
    ///     if mode.try_set(next, &current).await? {
    ///         break;
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_set(&self, new: impl Into<Vec<u8>>, expected: &VersionedValue<Vec<u8>>) -> Result<bool> {
        let inner = &self.core.inner;
        let new = new.into();
        inner.client.check_data_size("value", &inner.path, new.len())?;
        self.try_set_bytes(new, expected.version).await
    }

    /// The versioned set behind both `try_set`s, within this handle's timeout.
    pub(crate) async fn try_set_bytes(&self, new: Vec<u8>, version: i32) -> Result<bool> {
        let set = self.try_set_unmeasured(new, version).await;
        let outcome = match &set {
            Ok(true) => "succeeded",
            Ok(false) => "failed",
            Err(_) => "error",
        };
        self.core.inner.metrics.counter_operation(outcome);
        set
    }

    async fn try_set_unmeasured(&self, new: Vec<u8>, version: i32) -> Result<bool> {
        let inner = &self.core.inner;
        self.bounded("setting", |deadline| async move {
            match write::conditional_write(&inner.client, &inner.path, Some(version), &new, deadline, "setting").await?
            {
                Written::Applied(stat) => {
                    inner.observe(new, &stat);
                    Ok(true)
                }
                Written::Conflict { now } => {
                    // The node as read behind the refused set, or (that read lost) read again.
                    let now = match now {
                        Some(now) => now,
                        None => write::read(&inner.client, &inner.path, deadline).await?,
                    };
                    match now {
                        Some((data, stat)) => {
                            inner.observe(data, &stat);
                            Ok(false)
                        }
                        // Deleted: not a race lost to another writer. No version can match until
                        // the node is made again, so `Ok(false)` would spin a retry loop.
                        None => Err(Error::code_on(&inner.path, ErrorCode::NoNode)),
                    }
                }
            }
        })
        .await
    }
}

/// The values of a [`SharedValue`] or [`SharedCount`](crate::shared::SharedCount) as they change, a
/// [`Stream`](futures_core::Stream) of [`VersionedValue`]s: [`next`](Self::next) is the same as
/// `StreamExt::next`.
///
/// Latest value only (a `tokio::sync::watch`): a slow reader skips the intermediate values and
/// gets the newest one, which it never misses; nothing queues.
///
/// ```no_run
/// # async fn demo(limit: zk_curator::shared::SharedCount) {
/// use futures::StreamExt;
///
/// let mut raised = limit.changes().map(|seen| *seen.value()).filter(|n| std::future::ready(*n > 100));
/// while let Some(limit) = raised.next().await {
///     println!("the limit is up to {limit}");
/// }
/// # }
/// ```
pub struct SharedValueStream<T> {
    seen: WatchChanges<Seen>,
    decode: fn(&[u8]) -> T,
}

impl<T> std::fmt::Debug for SharedValueStream<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedValueStream").finish_non_exhaustive()
    }
}

impl<T> SharedValueStream<T> {
    pub(crate) fn new(seen: watch::Receiver<Seen>, decode: fn(&[u8]) -> T) -> Self {
        Self { seen: WatchChanges::new(seen), decode }
    }

    /// The next value later than the last one returned (or than the value when the stream was
    /// made); `None` once the shared value is dropped. The same as `StreamExt::next`.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call loses nothing; the next call returns the latest value.
    ///
    /// ```no_run
    /// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// let limit = zk_curator::shared::SharedCount::start(&client, "/config/limit", 10).await?;
    /// let mut changes = limit.changes();
    /// while let Some(seen) = changes.next().await {
    ///     println!("limit {} (version {})", seen.value(), seen.version());
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn next(&mut self) -> Option<VersionedValue<T>> {
        std::future::poll_fn(|cx| self.poll_value(cx)).await
    }

    fn poll_value(&mut self, cx: &mut Context<'_>) -> Poll<Option<VersionedValue<T>>> {
        let Some(seen) = std::task::ready!(self.seen.poll_changed(cx)) else {
            return Poll::Ready(None);
        };
        let seen = seen.borrow_and_update();
        Poll::Ready(Some(VersionedValue::new(seen.value.version, (self.decode)(&seen.value.value))))
    }
}

impl<T> futures_core::Stream for SharedValueStream<T> {
    type Item = VersionedValue<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<VersionedValue<T>>> {
        self.get_mut().poll_value(cx)
    }
}

/// Re-reads the node (re-arming the watch) after every change, reconnection and session change.
async fn follow(inner: Arc<Inner>, first: zookeeper_client::OneshotWatcher) {
    let mut states = inner.client.connection_states();
    let mut backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(2));
    let mut watcher = Some(first);
    loop {
        if let Some(w) = watcher.take() {
            tokio::select! {
                _ = w.changed() => {}
                _ = reconnected(&mut states) => {}
            }
        }
        if inner.client.is_closed() {
            return;
        }
        let fixed = inner.client.fix_path(&inner.path);
        let f = fixed.as_str();
        let deadline = Some(Instant::now() + inner.client.negotiated_session_timeout().max(Duration::from_secs(1)));
        match inner.client.with_retry(&inner.path, deadline, |zk| async move { zk.get_and_watch_data(f).await }).await {
            Ok((data, stat, w)) => {
                inner.observe(data, &stat);
                watcher = Some(w);
                backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(2));
            }
            Err(Error::Closed { .. }) => return,
            Err(e) if e.is(ErrorCode::NoNode) => {
                // Deleted: keep the last value and wait for the node to come back.
                let exists = inner
                    .client
                    .with_retry(&inner.path, deadline, |zk| async move { zk.check_and_watch_stat(f).await });
                match exists.await {
                    Ok((None, w)) => {
                        tokio::select! {
                            _ = w.changed() => {}
                            _ = reconnected(&mut states) => {}
                        }
                    }
                    Ok((Some(_), _)) => {}
                    Err(e) => {
                        debug!(%e, path = %inner.path, "watching a deleted shared value failed; retrying");
                        backoff.wait().await;
                    }
                }
            }
            Err(e) => {
                debug!(%e, path = %inner.path, "reading the shared value failed; retrying");
                backoff.wait().await;
            }
        }
    }
}

/// Returns at the next `Reconnected` (a new connection or a new session: watches may be gone).
pub(crate) async fn reconnected(states: &mut crate::framework::ConnectionStateStream) {
    loop {
        match states.next().await {
            Some(ConnectionState::Reconnected) => return,
            Some(_) => {}
            None => std::future::pending::<()>().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_past_the_version_wrap_around_is_still_newer() {
        let at_max = Seen { value: VersionedValue::new(i32::MAX, vec![1]), mzxid: 1_000 };
        // The next set wraps the version to i32::MIN; its zxid is later: it must be taken.
        assert!(at_max.is_older_than(1_001));
        assert!(!at_max.is_older_than(999));
        assert_eq!(i32::MAX.wrapping_add(1), i32::MIN);
    }
}
