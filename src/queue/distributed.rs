//! The handle: [`DistributedQueue`], its builder, and the put pipeline.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot, watch};
use tracing::{debug, warn};
use zookeeper_client as zk;

use crate::error::{Error, ErrorCode, ErrorKind, Result};
use crate::framework::paths;
use crate::metrics::RecipeLabels;
use crate::CuratorClient;

use super::consumer::{self, NodeHold, QueueStream};
use super::format::{self, BytesSerializer, QueueSerializer, NODE_OVERHEAD, PER_ITEM_OVERHEAD};
use super::order::NodeOrder;

/// Curator's item node prefix: every item node is `<queue>/queue-<10-digit sequence>`.
pub(crate) const ITEM_PREFIX: &str = "queue-";

/// Most creates one producer has in flight on its session at once.
const MAX_PIPELINED_PUTS: usize = 1024;

/// Most creates sent together in one transaction (`multi`): the server logs (and fsyncs) a
/// transaction as one entry, where separate creates cost one request each.
const MAX_CREATES_PER_MULTI: usize = 256;

/// Most item data in one transaction: far below the server's 1 MiB request limit
/// (`jute.maxbuffer`); a larger item is sent alone.
const MAX_MULTI_BYTES: usize = 256 * 1024;

/// The default bound on the nodes one consumer holds at once (taken, not yet acknowledged).
pub const DEFAULT_MAX_IN_FLIGHT: usize = 128;

/// The default wait of [`close`](DistributedQueue::close) for puts still in flight (Curator's
/// `finalFlushTime`, 5 s).
pub const DEFAULT_FINAL_FLUSH: Duration = Duration::from_secs(5);

/// One node to create: its data, and who waits for the outcome (none: a background put).
pub(super) struct PutJob {
    /// The node's name before the sequence ZooKeeper adds (`queue-` and the kind's part).
    pub(super) name: String,
    pub(super) data: Vec<u8>,
    pub(super) done: Option<oneshot::Sender<Result<()>>>,
    /// The items the node holds that count as offered (0 for an item put back).
    pub(super) offered: u64,
}

/// What the handle, its consumers and its items share.
pub(crate) struct Shared<T: 'static> {
    pub(super) client: CuratorClient,
    /// The queue path as the caller gave it, and namespace-fixed.
    pub(super) path: String,
    pub(super) fixed: String,
    /// The lock path (guaranteed delivery), as given and fixed.
    pub(super) lock: Option<(String, String)>,
    pub(super) serializer: Arc<dyn QueueSerializer<T>>,
    max_items: Option<usize>,
    background: bool,
    pub(super) max_in_flight: usize,
    final_flush: Duration,
    puts: mpsc::UnboundedSender<PutJob>,
    /// Puts handed to the pipeline and not finished.
    pending: Arc<watch::Sender<usize>>,
    /// The first background put that failed since the last `flush_puts_timeout`.
    put_failure: Arc<Mutex<Option<Error>>>,
    pub(super) closed: watch::Sender<bool>,
    /// The item nodes this queue's consumers hold with a lock node, by name: not taken again by
    /// another of them, and released by `close`.
    pub(super) holds: Mutex<HashMap<String, Weak<NodeHold<T>>>>,
    /// The `recipe="distributed_queue"` metrics labels: items offered and taken.
    pub(super) labels: RecipeLabels,
    /// The kind's order of the item nodes (and which are due).
    pub(super) order: NodeOrder,
    /// Most item nodes a consumer takes from one listing before it lists again (Curator's
    /// `minItemsBeforeRefresh`, at least 1).
    pub(super) refresh_after: usize,
}

impl<T: 'static> Shared<T> {
    /// The path of item node `name`, as the caller sees it.
    pub(super) fn item_path(&self, name: &str) -> String {
        paths::join(&self.path, name)
    }

    /// Queues `data` as a new item node `name<sequence>` (the pipeline creates it); `done` hears
    /// the outcome.
    /// `offered`: how many of its items are new (counted in the metrics once the node is made);
    /// 0 for items put back by a consumer.
    pub(super) fn enqueue(
        &self,
        name: &str,
        data: Vec<u8>,
        done: Option<oneshot::Sender<Result<()>>>,
        offered: u64,
    ) -> Result<()> {
        self.pending.send_modify(|n| *n += 1);
        if self.puts.send(PutJob { name: name.to_string(), data, done, offered }).is_err() {
            self.pending.send_modify(|n| *n = n.saturating_sub(1));
            return Err(Error::Closed { path: self.path.clone() });
        }
        Ok(())
    }
}

/// Builds a [`DistributedQueue`] (Curator's `QueueBuilder`).
///
/// ```no_run
/// use std::time::Duration;
/// use zk_curator::queue::DistributedQueue;
///
/// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
/// let queue = DistributedQueue::builder(&client, "/jobs/queue")
///     .lock_path("/jobs/locks")       // guaranteed delivery: at least once
///     .max_items(10_000)              // a put waits while the queue holds this many
///     .put_in_background(false)       // put returns once the node exists
///     .max_in_flight(32)              // nodes a consumer holds unacknowledged
///     .build()?;
/// # Ok(()) }
/// ```
pub struct QueueBuilder<T: 'static> {
    client: CuratorClient,
    path: String,
    serializer: Arc<dyn QueueSerializer<T>>,
    lock_path: Option<String>,
    max_items: Option<usize>,
    background: bool,
    max_in_flight: usize,
    final_flush: Duration,
}

impl<T: 'static> std::fmt::Debug for QueueBuilder<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueBuilder")
            .field("path", &self.path)
            .field("lock_path", &self.lock_path)
            .field("max_items", &self.max_items)
            .field("put_in_background", &self.background)
            .field("max_in_flight", &self.max_in_flight)
            .finish()
    }
}

impl<T: Send + 'static> QueueBuilder<T> {
    /// A queue at `path` whose items go through `serializer`.
    pub fn with_serializer(client: &CuratorClient, path: &str, serializer: impl QueueSerializer<T>) -> Self {
        QueueBuilder {
            client: client.clone(),
            path: path.to_string(),
            serializer: Arc::new(serializer),
            lock_path: None,
            max_items: None,
            background: true,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            final_flush: DEFAULT_FINAL_FLUSH,
        }
    }

    /// Guaranteed delivery (Curator's `lockPath`): a consumer takes an item by creating the
    /// EPHEMERAL node `<lock path>/<item node name>` and the item node is deleted only when the
    /// item is [acknowledged](super::Item::ack). An item whose consumer dropped it, was cancelled
    /// or lost its session is delivered again: at least once. Without a lock path an item node is
    /// deleted before it is handed out: at most once.
    pub fn lock_path(mut self, path: &str) -> Self {
        self.lock_path = Some(path.to_string());
        self
    }

    /// Bounds the queue (Curator's `maxItems`): a put waits while the queue holds `max` item nodes
    /// or more ([`put_timeout`](DistributedQueue::put_timeout) gives up with `Ok(false)`). As in
    /// Curator the bound is soft: producers that see room at once may all add.
    pub fn max_items(mut self, max: usize) -> Self {
        self.max_items = Some(max);
        self
    }

    /// True (the default, as Curator): [`put`](DistributedQueue::put) returns once the item is
    /// handed to this queue's put pipeline, before the node exists;
    /// [`flush_puts_timeout`](DistributedQueue::flush_puts_timeout) waits for those puts and reports a failed one.
    /// False: `put` returns once the node exists.
    pub fn put_in_background(mut self, background: bool) -> Self {
        self.background = background;
        self
    }

    /// How many item nodes one consumer holds at once: taken and not yet acknowledged or dropped
    /// (a `put_multi` node counts once). The consumer takes no more until one is done
    /// (back-pressure). Default [`DEFAULT_MAX_IN_FLIGHT`].
    pub fn max_in_flight(mut self, max: usize) -> Self {
        self.max_in_flight = max;
        self
    }

    /// How long [`close`](DistributedQueue::close) waits for puts still in flight (Curator's
    /// `finalFlushTime`). Default [`DEFAULT_FINAL_FLUSH`].
    pub fn final_flush(mut self, wait: Duration) -> Self {
        self.final_flush = wait;
        self
    }

    /// The queue. Nothing is sent: the queue path (and lock path) are made by the first put or
    /// consumer that needs them, as PERSISTENT nodes.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for a bad queue or lock path (or one nested in the other);
    /// [`Error::InvalidArgument`] for `max_items` or `max_in_flight` zero.
    pub fn build(self) -> Result<DistributedQueue<T>> {
        self.build_ordered(NodeOrder::Name, usize::MAX)
    }

    /// The queue, its consumers taking nodes in `order`, at most `refresh_after` from one listing.
    pub(super) fn build_ordered(self, order: NodeOrder, refresh_after: usize) -> Result<DistributedQueue<T>> {
        paths::validate_path(&self.path)?;
        if self.path == "/" {
            return Err(Error::InvalidPath { path: self.path, reason: "a queue cannot be the root" });
        }
        if let Some(lock) = &self.lock_path {
            paths::validate_path(lock)?;
            let nested = |a: &str, b: &str| a == b || a.starts_with(&format!("{}/", b.trim_end_matches('/')));
            if lock == "/" || nested(lock, &self.path) || nested(&self.path, lock) {
                return Err(Error::InvalidPath {
                    path: lock.clone(),
                    reason: "the lock path must be apart from the queue path (neither inside the other)",
                });
            }
        }
        if self.max_items == Some(0) {
            return Err(Error::invalid_argument("max_items", 0, "must be at least 1"));
        }
        if self.max_in_flight == 0 {
            return Err(Error::invalid_argument("max_in_flight", 0, "must be at least 1"));
        }
        let fixed = self.client.fix_path(&self.path);
        let lock = self.lock_path.map(|p| {
            let f = self.client.fix_path(&p);
            (p, f)
        });
        let (puts, jobs) = mpsc::unbounded_channel();
        let pending = Arc::new(watch::channel(0usize).0);
        let labels = self.client.recipe_labels("distributed_queue", &self.path);
        let put_failure = Arc::new(Mutex::new(None));
        let pipeline = PutPipeline {
            client: self.client.clone(),
            path: self.path.clone(),
            fixed: fixed.clone(),
            pending: pending.clone(),
            put_failure: put_failure.clone(),
            labels: labels.clone(),
        };
        self.client.runtime().spawn(pipeline.run(jobs));
        Ok(DistributedQueue {
            shared: Arc::new(Shared {
                client: self.client,
                path: self.path,
                fixed,
                lock,
                serializer: self.serializer,
                max_items: self.max_items,
                background: self.background,
                max_in_flight: self.max_in_flight,
                final_flush: self.final_flush,
                puts,
                pending,
                put_failure,
                closed: watch::channel(false).0,
                holds: Mutex::new(HashMap::new()),
                labels,
                order,
                refresh_after: refresh_after.max(1),
            }),
        })
    }
}

/// Curator's `DistributedQueue`, wire-compatible: producers put items as
/// `PERSISTENT_SEQUENTIAL` nodes `<path>/queue-<sequence>` holding Curator's item format, and
/// consumers take them in sequence order, as a [`Stream`](futures_core::Stream) of
/// [`Item`](super::Item)s to acknowledge ([`consume`](Self::consume)) or through a handler
/// ([`consume_with`](Self::consume_with), Curator's `QueueConsumer`).
///
/// Delivery: without a lock path at most once (an item node is deleted before its items are
/// handed out); with one ([`QueueBuilder::lock_path`]) at least once, and never to two live
/// consumers at the same time, Curator's and ours alike. See the [module docs](super).
///
/// Cloning is cheap and shares the queue (its put pipeline, its consumers).
pub struct DistributedQueue<T: 'static> {
    pub(super) shared: Arc<Shared<T>>,
}

impl<T: 'static> Clone for DistributedQueue<T> {
    fn clone(&self) -> Self {
        DistributedQueue { shared: self.shared.clone() }
    }
}

impl<T: 'static> std::fmt::Debug for DistributedQueue<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DistributedQueue")
            .field("path", &self.shared.path)
            .field("lock_path", &self.shared.lock.as_ref().map(|l| &l.0))
            .field("pending_puts", &*self.shared.pending.borrow())
            .finish()
    }
}

impl DistributedQueue<Vec<u8>> {
    /// A builder for a queue of byte items at `path` (Curator's `QueueBuilder.builder` with a
    /// `byte[]` serializer); [`QueueBuilder::with_serializer`] for other item types.
    pub fn builder(client: &CuratorClient, path: &str) -> QueueBuilder<Vec<u8>> {
        QueueBuilder::with_serializer(client, path, BytesSerializer)
    }
}

impl<T: Send + 'static> DistributedQueue<T> {
    /// The queue path.
    pub fn path(&self) -> &str {
        &self.shared.path
    }

    /// The lock path, when delivery is guaranteed.
    pub fn lock_path(&self) -> Option<&str> {
        self.shared.lock.as_ref().map(|l| l.0.as_str())
    }

    /// Puts `item` at the tail. Waits while the queue is full ([`QueueBuilder::max_items`]); in
    /// the background mode (the default) returns once the item is handed to the put pipeline.
    ///
    /// Puts waiting together go to the server as one transaction of up to 256 creates (all made
    /// or none). A put reported done is in the queue exactly once. A put whose create (or
    /// transaction) was sent and then went unanswered — the connection or session lost before
    /// the reply — is not sent again (a second create could put it twice; Curator's retry
    /// does send it again): it fails with that retryable error, and its item is in the queue
    /// once or not at all. A create the server refused (the queue path deleted: made again
    /// first) or one never sent is sent again, in put order.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the queue path when the item's node would be over the
    /// client's max data size; [`Error::Closed`] once [`close`](Self::close) began; without the
    /// background mode, the create's failure after the retry policy, or a retryable
    /// [`Error::ZooKeeper`] (connection loss, session expired) when the create was sent and its
    /// outcome is unknown (put once or not at all, never twice). In the background mode these
    /// come from [`flush_puts_timeout`](Self::flush_puts_timeout).
    ///
    /// # Cancel safety
    /// Once the wait for room is over the item is handed to the pipeline: a put dropped after
    /// that is still made (and [`flush_puts_timeout`](Self::flush_puts_timeout) waits for it).
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(queue: zk_curator::queue::DistributedQueue<Vec<u8>>) -> zk_curator::Result<()> {
    /// queue.put(b"job-1".to_vec()).await?;
    /// # Ok(()) }
    /// ```
    pub async fn put(&self, item: T) -> Result<()> {
        self.put_items(std::slice::from_ref(&item), None, ITEM_PREFIX).await.map(|_| ())
    }

    /// [`put`](Self::put), waiting for room at most until `timeout`: `Ok(false)` when the queue
    /// stayed full (nothing put). Curator's `put(item, maxWait, unit)`.
    ///
    /// # Errors
    /// As [`put`](Self::put); [`Error::DeadlineExceeded`] when, without the background mode, the
    /// create did not finish in time (the item may still be put).
    ///
    /// # Cancel safety
    /// As [`put`](Self::put).
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(queue: zk_curator::queue::DistributedQueue<Vec<u8>>) -> zk_curator::Result<()> {
    /// if !queue.put_timeout(b"job-1".to_vec(), std::time::Duration::from_secs(1)).await? {
    ///     // the queue stayed full
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn put_timeout(&self, item: T, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let deadline = timeout.into().instant_from(Instant::now());
        self.put_items(std::slice::from_ref(&item), Some(deadline), ITEM_PREFIX).await
    }

    /// Puts several items in one node (Curator's `putMulti`): a consumer gets them together, in
    /// this order; with a lock path the node is removed once every one of them is acknowledged.
    ///
    /// # Errors
    /// As [`put`](Self::put); [`Error::InvalidArgument`] for no items.
    ///
    /// # Cancel safety
    /// As [`put`](Self::put).
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(queue: zk_curator::queue::DistributedQueue<Vec<u8>>) -> zk_curator::Result<()> {
    /// queue.put_multi(vec![b"a".to_vec(), b"b".to_vec()]).await?;
    /// # Ok(()) }
    /// ```
    pub async fn put_multi(&self, items: Vec<T>) -> Result<()> {
        self.put_items(&items, None, ITEM_PREFIX).await.map(|_| ())
    }

    /// [`put_multi`](Self::put_multi), waiting for room at most until `timeout` (`Ok(false)`:
    /// nothing put).
    ///
    /// # Errors
    /// As [`put_timeout`](Self::put_timeout).
    ///
    /// # Cancel safety
    /// As [`put`](Self::put).
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(queue: zk_curator::queue::DistributedQueue<Vec<u8>>) -> zk_curator::Result<()> {
    /// let put = queue.put_multi_timeout(vec![b"a".to_vec()], std::time::Duration::from_secs(1)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn put_multi_timeout(&self, items: Vec<T>, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let deadline = timeout.into().instant_from(Instant::now());
        self.put_items(&items, Some(deadline), ITEM_PREFIX).await
    }

    /// Puts `items` in one node `name<sequence>` (`name`: `queue-` and the kind's part).
    pub(super) async fn put_items(&self, items: &[T], deadline: Option<Instant>, name: &str) -> Result<bool> {
        let shared = &self.shared;
        if *shared.closed.borrow() {
            return Err(Error::Closed { path: shared.path.clone() });
        }
        if items.is_empty() {
            return Err(Error::invalid_argument("items", format!("none for {}", shared.path), "put at least one"));
        }
        let serialized = items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                shared.serializer.serialize(item).map_err(|why| {
                    Error::invalid_argument(
                        "item",
                        format!("#{i} of the put to {}: {why}", shared.path),
                        "the queue's serializer cannot write it",
                    )
                })
            })
            .collect::<Result<Vec<Vec<u8>>>>()?;
        let len = serialized.iter().map(|s| s.len().saturating_add(PER_ITEM_OVERHEAD)).sum::<usize>() + NODE_OVERHEAD;
        // The item node's own name (and the ten digits of its sequence) counts with the queue path.
        shared.client.check_data_size("item", &paths::join(&shared.path, &format!("{name}0000000000")), len)?;
        let started = Instant::now();
        if !self.wait_for_room(deadline).await? {
            return Ok(false);
        }
        let data = format::encode(serialized.iter().map(Vec::as_slice));
        let offered = serialized.len() as u64;
        if shared.background {
            shared.enqueue(name, data, None, offered)?;
            return Ok(true);
        }
        let (done, outcome) = oneshot::channel();
        shared.enqueue(name, data, Some(done), offered)?;
        let outcome = async { outcome.await.unwrap_or_else(|_| Err(Error::Closed { path: shared.path.clone() })) };
        match deadline {
            None => outcome.await.map(|_| true),
            Some(deadline) => match tokio::time::timeout_at(deadline.into(), outcome).await {
                Ok(done) => done.map(|_| true),
                Err(_) => Err(Error::deadline_exceeded(&shared.path, "putting an item", started.elapsed())),
            },
        }
    }

    /// Waits until the queue holds fewer than `max_items` item nodes (at once without a bound);
    /// false when `deadline` passed first.
    async fn wait_for_room(&self, deadline: Option<Instant>) -> Result<bool> {
        let shared = &self.shared;
        let Some(max) = shared.max_items else { return Ok(true) };
        let f = shared.fixed.as_str();
        loop {
            let listed = shared
                .client
                .with_retry(&shared.path, deadline, |zk| async move {
                    match zk.get_and_watch_children(f).await {
                        Ok((children, _, watcher)) => Ok(Some((children, watcher))),
                        Err(zk::Error::NoNode) => Ok(None),
                        Err(e) => Err(e),
                    }
                })
                .await;
            let (children, watcher) = match listed {
                Ok(Some(listed)) => listed,
                // No queue yet: it is empty.
                Ok(None) => return Ok(true),
                Err(e) if e.kind() == ErrorKind::DeadlineExceeded => return Ok(false),
                Err(e) => return Err(e),
            };
            if children.iter().filter(|c| c.starts_with(ITEM_PREFIX)).count() < max {
                return Ok(true);
            }
            let mut closed = shared.closed.subscribe();
            let until = deadline.map(tokio::time::Instant::from_std);
            tokio::select! {
                _ = watcher.changed() => {}
                _ = closed.wait_for(|c| *c) => return Err(Error::Closed { path: shared.path.clone() }),
                () = sleep_until(until) => return Ok(false),
            }
        }
    }

    /// Waits until every put handed to the pipeline so far is done (Curator's `flushPuts`):
    /// `Ok(true)`, or `Ok(false)` when `timeout` passed first.
    ///
    /// # Errors
    /// The first background put that failed since the last call: after the retry policy (that
    /// item was not put), or — a retryable [`Error::ZooKeeper`] — sent and unanswered, its
    /// outcome unknown (that item is in the queue once or not at all; see [`put`](Self::put)).
    ///
    /// # Cancel safety
    /// Cancel safe: the puts go on.
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(queue: zk_curator::queue::DistributedQueue<Vec<u8>>) -> zk_curator::Result<()> {
    /// for i in 0..1000 {
    ///     queue.put(format!("job-{i}").into_bytes()).await?;
    /// }
    /// assert!(queue.flush_puts_timeout(std::time::Duration::from_secs(10)).await?);
    /// # Ok(()) }
    /// ```
    pub async fn flush_puts_timeout(&self, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let deadline = timeout.into().instant_from(Instant::now());
        let mut pending = self.shared.pending.subscribe();
        let flushed =
            tokio::time::timeout_at(deadline.into(), pending.wait_for(|n| *n == 0)).await.is_ok_and(|r| r.is_ok());
        if let Some(failure) = self.shared.put_failure.lock().take() {
            return Err(failure);
        }
        Ok(flushed)
    }

    /// How many puts were handed to the pipeline and are not done yet.
    pub fn pending_puts(&self) -> usize {
        *self.shared.pending.borrow()
    }

    /// How many item nodes the queue holds now (a `put_multi` node counts once; items held by
    /// consumers with a lock path count until acknowledged). 0 when the queue path does not exist.
    ///
    /// # Errors
    /// Connection errors after the retry policy.
    ///
    /// # Cancel safety
    /// Cancel safe (a read).
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(queue: zk_curator::queue::DistributedQueue<Vec<u8>>) -> zk_curator::Result<()> {
    /// println!("{} items waiting", queue.len().await?);
    /// # Ok(()) }
    /// ```
    pub async fn len(&self) -> Result<usize> {
        let f = self.shared.fixed.as_str();
        let children = self
            .shared
            .client
            .with_retry(&self.shared.path, None, |zk| async move {
                match zk.list_children(f).await {
                    Ok(c) => Ok(c),
                    Err(zk::Error::NoNode) => Ok(Vec::new()),
                    Err(e) => Err(e),
                }
            })
            .await?;
        Ok(children.iter().filter(|c| c.starts_with(ITEM_PREFIX)).count())
    }

    /// A consumer: a stream of the queue's items in sequence order (oldest first), holding at
    /// most [`max_in_flight`](QueueBuilder::max_in_flight) nodes at once. Each call makes a
    /// separate consumer; several compete for the items as Curator's consumers do.
    ///
    /// The stream yields `Err` for what it reports and goes on: a malformed item node
    /// ([`Error::MalformedData`], left in place and reported once per consumer), the queue path
    /// deleted ([`Error::ZooKeeper`] with [`ErrorCode::NoNode`], reported once; the consumer
    /// waits for the path to come back). It ends after [`close`](Self::close).
    ///
    /// # Errors
    /// [`Error::Closed`] once `close` began.
    pub fn consume(&self) -> Result<QueueStream<T>> {
        if *self.shared.closed.borrow() {
            return Err(Error::Closed { path: self.shared.path.clone() });
        }
        Ok(consumer::start(self.shared.clone()))
    }

    /// Curator's callback style (`QueueConsumer.consumeMessage`): runs `handler` on each item, one
    /// at a time, until the queue is [closed](Self::close). An item whose handler returned `Ok` is
    /// acknowledged; with a lock path, one whose handler returned `Err` is put back at the tail
    /// (Curator's `ErrorMode.REQUEUE`) — without one it is gone (at most once). Errors the
    /// consumer reports (malformed nodes, a deleted queue path) are logged.
    ///
    /// # Errors
    /// [`Error::Closed`] when the queue was closed before the call.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the call stops consuming; an item being handled is left for the next
    /// consumer with a lock path.
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(queue: zk_curator::queue::DistributedQueue<Vec<u8>>) -> zk_curator::Result<()> {
    /// queue
    ///     .consume_with(|item: Vec<u8>| async move {
    ///         println!("{}", String::from_utf8_lossy(&item));
    ///         Ok::<(), std::io::Error>(())
    ///     })
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn consume_with<F, Fut, E>(&self, mut handler: F) -> Result<()>
    where
        F: FnMut(T) -> Fut,
        Fut: Future<Output = std::result::Result<(), E>>,
        E: std::fmt::Display,
        T: Clone,
    {
        let mut stream = self.consume()?;
        while let Some(next) = stream.next().await {
            let item = match next {
                Ok(item) => item,
                Err(e) => {
                    warn!(path = %self.shared.path, error = %e, "queue consumer");
                    continue;
                }
            };
            let path = item.path();
            match handler(item.value().clone()).await {
                Ok(()) => {
                    if let Err(e) = item.ack().await {
                        warn!(%path, error = %e, "acknowledging a queue item");
                    }
                }
                Err(e) => {
                    warn!(%path, error = %e, "the queue item's handler failed");
                    if self.shared.lock.is_some() {
                        if let Err(e) = item.requeue().await {
                            warn!(%path, error = %e, "putting a queue item back");
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Closes the queue: refuses further puts, waits for puts in flight (at most the
    /// [`final_flush`](QueueBuilder::final_flush)), ends its consumers' streams and releases
    /// their lock nodes: an item taken and not acknowledged goes to the next consumer (its
    /// `ack` then fails with [`Error::LockLost`]); without a lock path, items a consumer took and
    /// has not yielded yet are put back at the tail. Nothing of this queue's is left behind but
    /// the queue's items.
    ///
    /// # Cancel safety
    /// Cancel safe: the queue is closed at the first poll; the lock nodes are deleted in the
    /// background (guaranteed).
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(queue: zk_curator::queue::DistributedQueue<Vec<u8>>) {
    /// queue.close().await;
    /// # }
    /// ```
    pub async fn close(&self) {
        if self.shared.closed.send_replace(true) {
            return;
        }
        let mut pending = self.shared.pending.subscribe();
        let _ = tokio::time::timeout(self.shared.final_flush, pending.wait_for(|n| *n == 0)).await;
        if self.shared.lock.is_some() {
            let holds: Vec<_> = self.shared.holds.lock().values().filter_map(Weak::upgrade).collect();
            for hold in holds {
                hold.release();
            }
            let deadline = crate::deadline::deadline_after(self.shared.final_flush);
            self.shared.client.wait_background_deletes(deadline).await;
        }
    }
}

/// The next jobs to send together, oldest first: at most `limit` of them, up to
/// [`MAX_CREATES_PER_MULTI`] and [`MAX_MULTI_BYTES`] of data and paths (`item_path_len`: the
/// queue's `<path>/queue-`), at least one job.
fn take_batch(waiting: &mut VecDeque<PutJob>, limit: usize, item_path_len: usize) -> Vec<PutJob> {
    let mut batch = Vec::new();
    let mut bytes = 0;
    while let Some(job) = waiting.front() {
        // The kind's part of the name (after `queue-`) and the ACL's few bytes count as well.
        let size = job.data.len() + item_path_len + job.name.len() + 64;
        let full = batch.len() >= limit.min(MAX_CREATES_PER_MULTI) || bytes + size > MAX_MULTI_BYTES;
        if !batch.is_empty() && full {
            break;
        }
        bytes += size;
        batch.extend(waiting.pop_front());
    }
    batch
}

/// Moves the puts already handed over into `waiting` (up to [`MAX_PIPELINED_PUTS`] waiting), so
/// that they go together in one transaction; false once the queue's side is gone (no more puts).
fn drain_ready(jobs: &mut mpsc::UnboundedReceiver<PutJob>, waiting: &mut VecDeque<PutJob>) -> bool {
    while waiting.len() < MAX_PIPELINED_PUTS {
        match jobs.try_recv() {
            Ok(job) => waiting.push_back(job),
            Err(mpsc::error::TryRecvError::Empty) => return true,
            Err(mpsc::error::TryRecvError::Disconnected) => return false,
        }
    }
    true
}

async fn sleep_until(until: Option<tokio::time::Instant>) {
    match until {
        Some(until) => tokio::time::sleep_until(until).await,
        None => std::future::pending().await,
    }
}

type CreateReply<'a> = Pin<Box<dyn Future<Output = std::result::Result<(), zk::Error>> + Send + 'a>>;

/// Sends `jobs`' creates, each under its own name (`queue-` and the kind's part): one create for
/// a single job, else one transaction (all made or none).
async fn send_creates<'a>(
    zk: &'a zk::Client,
    fixed: &str,
    item_path: &'a str,
    jobs: &[PutJob],
    options: &'a zk::CreateOptions<'a>,
) -> CreateReply<'a> {
    if let [job] = jobs {
        if job.name == ITEM_PREFIX {
            let reply = zk.create(item_path, &job.data, options);
            return Box::pin(async move { reply.await.map(|_| ()) });
        }
        return send_now(zk, paths::join(fixed, &job.name), job.data.clone(), options).await;
    }
    let mut writer = zk.new_multi_writer();
    for job in jobs {
        // The writer copies the path: a kind's own name needs no owner past this call.
        let added = if job.name == ITEM_PREFIX {
            writer.add_create(item_path, &job.data, options)
        } else {
            writer.add_create(&paths::join(fixed, &job.name), &job.data, options)
        };
        if let Err(e) = added {
            return Box::pin(std::future::ready(Err(e)));
        }
    }
    // Sent now (the commit's request goes out before its reply is awaited).
    let reply = writer.commit();
    Box::pin(async move { reply.await.map(|_| ()).map_err(zk::Error::from) })
}

/// A create of a node under a kind's own name (`path` owned by the reply), sent now: in put
/// order with the other creates.
async fn send_now<'a>(
    zk: &'a zk::Client,
    path: String,
    data: Vec<u8>,
    options: &'a zk::CreateOptions<'a>,
) -> CreateReply<'a> {
    let mut reply: CreateReply<'a> = Box::pin(async move { zk.create(&path, &data, options).await.map(|_| ()) });
    // The first poll sends the request.
    match std::future::poll_fn(|cx| std::task::Poll::Ready(reply.as_mut().poll(cx))).await {
        std::task::Poll::Ready(done) => Box::pin(std::future::ready(done)),
        std::task::Poll::Pending => reply,
    }
}

/// The task that creates a queue's item nodes: creates are pipelined on the session (sent as they
/// come, up to [`MAX_PIPELINED_PUTS`] unanswered), in the order they were put.
struct PutPipeline {
    client: CuratorClient,
    path: String,
    fixed: String,
    pending: Arc<watch::Sender<usize>>,
    put_failure: Arc<Mutex<Option<Error>>>,
    labels: RecipeLabels,
}

impl PutPipeline {
    fn finish(&self, job: PutJob, outcome: Result<()>) {
        self.pending.send_modify(|n| *n = n.saturating_sub(1));
        if outcome.is_ok() {
            self.labels.queue_offered(job.offered);
        }
        match job.done {
            Some(done) => drop(done.send(outcome)),
            None => {
                if let Err(e) = outcome {
                    warn!(path = %self.path, error = %e, "a background put failed");
                    self.put_failure.lock().get_or_insert(e);
                }
            }
        }
    }

    async fn run(self, mut jobs: mpsc::UnboundedReceiver<PutJob>) {
        let item_path = paths::join(&self.fixed, ITEM_PREFIX);
        let acls = self.client.raw_acls_for(&item_path);
        let mut waiting: VecDeque<PutJob> = VecDeque::new();
        let mut open = true;
        let mut retrying = self.client.retrying(&self.path, None);
        loop {
            if waiting.is_empty() {
                if !open {
                    return;
                }
                match jobs.recv().await {
                    Some(job) => {
                        waiting.push_back(job);
                        open = drain_ready(&mut jobs, &mut waiting);
                    }
                    None => return,
                }
            }
            let zk = match self.client.connected_retrying(&mut retrying).await {
                Ok((zk, _)) => zk,
                Err(e) => {
                    // Given up on (policy, closed client): these puts fail.
                    for job in waiting.drain(..) {
                        self.finish(job, Err(e.clone()));
                    }
                    retrying = self.client.retrying(&self.path, None);
                    continue;
                }
            };
            let options = zk::CreateMode::PersistentSequential.with_acls(zk::Acls::new(&acls));
            // Each entry: the jobs sent together (one create, or one transaction of creates).
            let mut in_flight: VecDeque<(Vec<PutJob>, CreateReply<'_>)> = VecDeque::new();
            let mut unanswered = 0;
            let mut failure: Option<zk::Error> = None;
            let mut failed: Vec<PutJob> = Vec::new();
            loop {
                if failure.is_none() {
                    while unanswered < MAX_PIPELINED_PUTS && !waiting.is_empty() {
                        let batch = take_batch(&mut waiting, MAX_PIPELINED_PUTS - unanswered, item_path.len());
                        let reply = send_creates(&zk, &self.fixed, &item_path, &batch, &options).await;
                        unanswered += batch.len();
                        in_flight.push_back((batch, reply));
                    }
                }
                if in_flight.is_empty() {
                    break;
                }
                let room = open && failure.is_none() && unanswered < MAX_PIPELINED_PUTS;
                tokio::select! {
                    biased;
                    reply = async { in_flight.front_mut().map(|(_, r)| r) .expect("checked").as_mut().await } => {
                        let Some((batch, _)) = in_flight.pop_front() else { break };
                        unanswered -= batch.len();
                        match reply {
                            Ok(()) => batch.into_iter().for_each(|job| self.finish(job, Ok(()))),
                            // The reply was lost (connection, session): the nodes may have been
                            // made (all of a transaction's, or none). Sent again they could be
                            // there twice, so these puts fail with the error instead: put once
                            // or not at all, never twice (the caller hears which puts are unknown).
                            Err(e) if crate::error::outcome_unknown(&e) => {
                                let err = Error::zk(&self.path, e.clone());
                                warn!(path = %self.path, nodes = batch.len(), error = %e, "a queue's create went unanswered: those puts fail (put once or not at all)");
                                batch.into_iter().for_each(|job| self.finish(job, Err(err.clone())));
                                failure.get_or_insert(e);
                            }
                            // Refused by the server (made nothing: a transaction all or none):
                            // sent again after the first failure, in order, once the cause is
                            // dealt with (the queue path made).
                            Err(e) => {
                                failure.get_or_insert(e);
                                failed.extend(batch);
                            }
                        }
                    }
                    job = jobs.recv(), if room => match job {
                        Some(job) => {
                            waiting.push_back(job);
                            open = drain_ready(&mut jobs, &mut waiting);
                        }
                        None => open = false,
                    },
                }
            }
            let Some(failure) = failure else {
                retrying = self.client.retrying(&self.path, None);
                continue;
            };
            // The failed jobs were sent before every waiting one: first again, in their order.
            for job in failed.into_iter().rev() {
                waiting.push_front(job);
            }
            let err = Error::zk(&self.path, failure);
            if err.is(ErrorCode::NoNode) {
                debug!(path = %self.path, "making the queue path");
                if let Err(e) = self.client.create_parents_as(&self.fixed, None, false).await {
                    for job in waiting.drain(..) {
                        self.finish(job, Err(e.clone()));
                    }
                }
                continue;
            }
            if matches!(err.kind(), ErrorKind::Retryable | ErrorKind::SessionLost)
                && retrying.backoff_or_fail(err.clone()).await.is_ok()
            {
                continue;
            }
            // Not retried (or the policy gave up): every waiting put fails with it.
            for job in waiting.drain(..) {
                self.finish(job, Err(err.clone()));
            }
            retrying = self.client.retrying(&self.path, None);
        }
    }
}
