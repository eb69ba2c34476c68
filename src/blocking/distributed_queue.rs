//! [`DistributedQueue`], blocking: producers put from plain threads, consumers take
//! [`QueueItems`] (an iterator of [`QueueItem`]s to acknowledge or put back).

use std::sync::Arc;

use super::{Core, CuratorClient, HoldStateChanges};
use crate::deadline::deadline_after;
use crate::error::Result;
use crate::locks::HoldState;

/// A blocking [`DistributedQueue`](crate::queue::DistributedQueue), wire-compatible with
/// Curator's `DistributedQueue`: the same queue (its put pipeline and consumers on the client's
/// runtime thread), its calls waiting on the calling thread.
///
/// [`consume`](Self::consume) gives a consumer as an [`Iterator`] of [`QueueItem`]s: process one,
/// then [`ack`](QueueItem::ack) it (or [`requeue`](QueueItem::requeue) it). With a lock path
/// ([`with_lock_path`](Self::with_lock_path)) delivery is at least once: an item dropped
/// unacknowledged — on any thread, also one that never saw a runtime — or whose consumer's
/// process died goes to the next consumer.
///
/// # Examples
/// ```no_run
/// use zk_curator::blocking::{CuratorClient, DistributedQueue};
///
/// # fn main() -> zk_curator::Result<()> {
/// let client = CuratorClient::connect("127.0.0.1:2181")?;
/// let queue = DistributedQueue::with_lock_path(&client, "/jobs/queue", "/jobs/locks")?;
/// queue.put(b"resize photo 17".to_vec())?;
/// for item in queue.consume()? {
///     let item = item?;
///     // ... process item.value() ...
///     item.ack()?;
///     # break;
/// }
/// queue.close()
/// # }
/// ```
///
/// For a queue of other item types (a [`QueueSerializer`](crate::queue::QueueSerializer), such as
/// the JSON one) build the async queue on [`CuratorClient::async_client`] and wrap it with
/// [`from_async`](Self::from_async). A cheap [`Clone`] shares the queue.
pub struct DistributedQueue<T: 'static> {
    inner: crate::queue::DistributedQueue<T>,
    core: Arc<Core>,
}

impl<T: 'static> Clone for DistributedQueue<T> {
    fn clone(&self) -> Self {
        DistributedQueue { inner: self.inner.clone(), core: self.core.clone() }
    }
}

impl<T: 'static> std::fmt::Debug for DistributedQueue<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl DistributedQueue<Vec<u8>> {
    /// A queue of byte items at `path`, delivered at most once (no lock path; items put in the
    /// background, as Curator's default).
    ///
    /// # Errors
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) naming the path.
    pub fn new(client: &CuratorClient, path: &str) -> Result<Self> {
        let core = client.core().clone();
        let inner = core.enter(|| crate::queue::DistributedQueue::builder(core.client(), path).build())?;
        Ok(DistributedQueue { inner, core })
    }

    /// A queue of byte items at `path` delivered at least once: consumers lock each item node
    /// under `lock_path` (Curator's `lockPath`).
    ///
    /// # Errors
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) naming a bad path, or the lock path when
    /// one is inside the other.
    pub fn with_lock_path(client: &CuratorClient, path: &str, lock_path: &str) -> Result<Self> {
        let core = client.core().clone();
        let inner =
            core.enter(|| crate::queue::DistributedQueue::builder(core.client(), path).lock_path(lock_path).build())?;
        Ok(DistributedQueue { inner, core })
    }
}

impl<T: Send + 'static> DistributedQueue<T> {
    /// Wraps a queue built on `client`'s [`async_client`](CuratorClient::async_client) (any
    /// [`QueueBuilder`](crate::queue::QueueBuilder) option, any item type).
    pub fn from_async(client: &CuratorClient, queue: crate::queue::DistributedQueue<T>) -> Self {
        DistributedQueue { inner: queue, core: client.core().clone() }
    }

    /// The queue path.
    pub fn path(&self) -> &str {
        self.inner.path()
    }

    /// The lock path, when delivery is guaranteed.
    pub fn lock_path(&self) -> Option<&str> {
        self.inner.lock_path()
    }

    /// As [`DistributedQueue::put`](crate::queue::DistributedQueue::put).
    ///
    /// # Errors
    /// As the async call; [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming
    /// `runtime` inside a tokio runtime context.
    pub fn put(&self, item: T) -> Result<()> {
        self.core.block_on(self.inner.put(item))?
    }

    /// As [`DistributedQueue::put_timeout`](crate::queue::DistributedQueue::put_timeout):
    /// `Ok(false)` when the queue stayed full until `timeout` (nothing put).
    ///
    /// # Errors
    /// As [`put`](Self::put).
    pub fn put_timeout(&self, item: T, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let timeout = timeout.into();
        self.core.block_on(self.inner.put_timeout(item, timeout))?
    }

    /// As [`DistributedQueue::put_multi`](crate::queue::DistributedQueue::put_multi): the items
    /// in one node, delivered together.
    ///
    /// # Errors
    /// As [`put`](Self::put).
    pub fn put_multi(&self, items: Vec<T>) -> Result<()> {
        self.core.block_on(self.inner.put_multi(items))?
    }

    /// As [`DistributedQueue::put_multi_timeout`](crate::queue::DistributedQueue::put_multi_timeout).
    ///
    /// # Errors
    /// As [`put`](Self::put).
    pub fn put_multi_timeout(&self, items: Vec<T>, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let timeout = timeout.into();
        self.core.block_on(self.inner.put_multi_timeout(items, timeout))?
    }

    /// As [`DistributedQueue::flush_puts_timeout`](crate::queue::DistributedQueue::flush_puts_timeout):
    /// `Ok(true)` once every put so far is made, `Ok(false)` when `timeout` passed first.
    ///
    /// # Errors
    /// The first background put that failed since the last call; as [`put`](Self::put).
    pub fn flush_puts_timeout(&self, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let timeout = timeout.into();
        self.core.block_on(self.inner.flush_puts_timeout(timeout))?
    }

    /// Puts handed to the pipeline and not done yet.
    pub fn pending_puts(&self) -> usize {
        self.inner.pending_puts()
    }

    /// As [`DistributedQueue::len`](crate::queue::DistributedQueue::len): the item nodes the
    /// queue holds now.
    ///
    /// # Errors
    /// As [`put`](Self::put).
    // A count read from the server, as the async queue's: no `is_empty` beside it either.
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> Result<usize> {
        self.core.block_on(self.inner.len())?
    }

    /// A consumer: the queue's items in sequence order as a blocking iterator (see
    /// [`DistributedQueue::consume`](crate::queue::DistributedQueue::consume)). Dropping it — on
    /// any thread — stops it: with a lock path the items it took and did not hand out go to the
    /// next consumer, without one they are put back at the tail.
    ///
    /// # Errors
    /// [`Error::Closed`](crate::Error::Closed) once [`close`](Self::close) began.
    pub fn consume(&self) -> Result<QueueItems<T>> {
        let inner = self.core.enter(|| self.inner.consume())?;
        Ok(QueueItems { inner, path: self.path().to_string(), core: self.core.clone() })
    }

    /// As [`DistributedQueue::close`](crate::queue::DistributedQueue::close): refuses further
    /// puts, waits for the puts in flight (at most the final flush), ends the consumers and
    /// releases their lock nodes.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `runtime` inside a tokio
    /// runtime context.
    pub fn close(&self) -> Result<()> {
        self.core.block_on(self.inner.close())
    }

    /// The async queue underneath.
    pub fn as_async(&self) -> &crate::queue::DistributedQueue<T> {
        &self.inner
    }
}

/// One consumer of a blocking [`DistributedQueue`]: an [`Iterator`] of its items (and of what it
/// reports: `Err` for a malformed item node or the queue path deleted; it goes on after either)
/// that waits on the calling thread and ends once the queue is closed (or when called inside a
/// tokio runtime context: logged).
pub struct QueueItems<T: 'static> {
    inner: crate::queue::QueueStream<T>,
    path: String,
    core: Arc<Core>,
}

impl<T: 'static> std::fmt::Debug for QueueItems<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl<T: Send + 'static> QueueItems<T> {
    /// The next item (or report), waiting at most `timeout`; `Ok(None)` once the queue closed.
    ///
    /// # Errors
    /// [`Error::DeadlineExceeded`](crate::Error::DeadlineExceeded) naming the queue path when
    /// nothing came within `timeout` (nothing is taken then);
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `runtime` inside a tokio
    /// runtime context. A report of the consumer comes as `Ok(Some(Err(..)))`.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let queue = zk_curator::blocking::DistributedQueue::new(&client, "/jobs/queue")?;
    /// let mut items = queue.consume()?;
    /// match items.next_timeout(std::time::Duration::from_secs(1)) {
    ///     Ok(Some(item)) => item?.ack()?,
    ///     Ok(None) => println!("the queue closed"),
    ///     Err(e) if e.kind() == zk_curator::ErrorKind::DeadlineExceeded => println!("empty"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn next_timeout(&mut self, timeout: impl Into<crate::Deadline>) -> Result<Option<Result<QueueItem<T>>>> {
        let timeout = timeout.into().remaining();
        let next = self.core.feed_next_timeout(self.inner.next(), timeout, &self.path, "waiting for an item of")?;
        Ok(next.map(|next| next.map(|inner| QueueItem { inner, core: self.core.clone() })))
    }
}

impl<T: Send + 'static> Iterator for QueueItems<T> {
    type Item = Result<QueueItem<T>>;

    /// Waits for the next item (or report); `None` once the queue closed (or when called inside
    /// a tokio runtime context: logged, nothing taken).
    fn next(&mut self) -> Option<Self::Item> {
        let next = self.core.feed_next(self.inner.next(), &self.path)?;
        Some(next.map(|inner| QueueItem { inner, core: self.core.clone() }))
    }
}

/// An item a blocking consumer took: [`ack`](Self::ack) it once processed, or
/// [`requeue`](Self::requeue) it. Dropped unacknowledged (on any thread, with or without a
/// runtime) it goes to the next consumer with a lock path, as the async
/// [`Item`](crate::queue::Item).
pub struct QueueItem<T: 'static> {
    // Declared first: dropped (its lock node handed to the background deletes) while `core`
    // still keeps the client open.
    inner: crate::queue::Item<T>,
    core: Arc<Core>,
}

impl<T: std::fmt::Debug + 'static> std::fmt::Debug for QueueItem<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl<T: 'static> QueueItem<T> {
    /// The item.
    pub fn value(&self) -> &T {
        self.inner.value()
    }

    /// The item's node name (`queue-<sequence>`).
    pub fn node(&self) -> &str {
        self.inner.node()
    }

    /// The item's node path.
    pub fn path(&self) -> String {
        self.inner.path()
    }

    /// As [`Item::hold_state`](crate::queue::Item::hold_state): with a lock path `Held`,
    /// `Suspended` while the connection is lost, `Lost` once the consumer's session ended (the
    /// item goes to another consumer) or the item was released; without one `Held` until
    /// acknowledged (see [the hold state](crate::queue::Item#hold-state)).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let queue = zk_curator::blocking::DistributedQueue::with_lock_path(&client, "/jobs/queue", "/jobs/locks")?;
    /// # let item = queue.consume()?.next().unwrap()?;
    /// // ... part of the work ...
    /// if item.hold_state() == zk_curator::locks::HoldState::Held {
    ///     item.ack()?;
    /// } // else dropped: it goes to the next consumer
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn hold_state(&self) -> HoldState {
        self.inner.hold_state()
    }

    /// The item's hold-state changes, waited for on the calling thread: each change once,
    /// ending after `Lost` (see [`Item::state_changes`](crate::queue::Item::state_changes)).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let queue = zk_curator::blocking::DistributedQueue::with_lock_path(&client, "/jobs/queue", "/jobs/locks")?;
    /// # let item = queue.consume()?.next().unwrap()?;
    /// let mut changes = item.state_changes();
    /// if let Ok(Some(state)) = changes.next_timeout(std::time::Duration::from_millis(100)) {
    ///     println!("{} is {state:?}", item.node()); // stop unless Held
    /// }
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn state_changes(&self) -> HoldStateChanges {
        HoldStateChanges::new(self.inner.state_changes(), self.inner.node(), &self.core)
    }

    /// Waits until the item is lost; see [`Item::lost`](crate::queue::Item::lost). It returns
    /// only once the item is lost: an item that stays `Held` (always, without a lock path, while
    /// you hold it) blocks the calling thread for as long — work that also finishes uses
    /// [`lost_timeout`](Self::lost_timeout).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `runtime` inside a tokio
    /// runtime context.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let queue = zk_curator::blocking::DistributedQueue::with_lock_path(&client, "/jobs/queue", "/jobs/locks")?;
    /// # let item = queue.consume()?.next().unwrap()?;
    /// // A job that runs until its item goes to another consumer, then stops.
    /// item.lost()?;
    /// eprintln!("{} went to another consumer: stop", item.node());
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn lost(&self) -> Result<()> {
        self.core.block_on(self.inner.lost())
    }

    /// Like [`lost`](Self::lost), giving up after `timeout`: `Ok(true)` once the item is lost,
    /// `Ok(false)` if not after `timeout`. Returns within `timeout` (plus a few ms).
    ///
    /// # Errors
    /// As [`lost`](Self::lost).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let queue = zk_curator::blocking::DistributedQueue::with_lock_path(&client, "/jobs/queue", "/jobs/locks")?;
    /// # let item = queue.consume()?.next().unwrap()?;
    /// for _step in 0..10 {
    ///     // ... one step of the work ...
    ///     if item.lost_timeout(std::time::Duration::ZERO)? {
    ///         return Ok(()); // it goes to another consumer: stop
    ///     }
    /// }
    /// item.ack()?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn lost_timeout(&self, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let deadline = deadline_after(timeout.into().remaining());
        let lost = self.core.block_on(async { tokio::time::timeout_at(deadline.into(), self.inner.lost()).await })?;
        Ok(lost.is_ok())
    }

    /// As [`Item::ack`](crate::queue::Item::ack): with a lock path the item's node and its lock
    /// node are deleted once every item of the node is acknowledged.
    ///
    /// # Errors
    /// As the async call ([`Error::LockLost`](crate::Error::LockLost) when the item went to
    /// another consumer first); [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming
    /// `runtime` inside a tokio runtime context (the item is then released, as if dropped).
    pub fn ack(self) -> Result<()> {
        let QueueItem { inner, core } = self;
        core.block_on(inner.ack())?
    }

    /// As [`Item::requeue`](crate::queue::Item::requeue): the item goes back at the tail.
    ///
    /// # Errors
    /// As [`ack`](Self::ack).
    pub fn requeue(self) -> Result<()> {
        let QueueItem { inner, core } = self;
        core.block_on(inner.requeue())?
    }

    /// The async item underneath.
    pub fn as_async(&self) -> &crate::queue::Item<T> {
        &self.inner
    }
}
