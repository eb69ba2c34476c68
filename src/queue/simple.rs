//! [`SimpleDistributedQueue`] (Curator's `SimpleDistributedQueue`): a FIFO of byte items, one
//! PERSISTENT_SEQUENTIAL node `qn-<sequence>` per item, taken by deleting it.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use tracing::{debug, warn};
use zookeeper_client as zk;

use crate::barriers::{wake_up, Woken};
use crate::error::{Error, ErrorCode, Result};
use crate::framework::paths;
use crate::metrics::RecipeLabels;
use crate::{CreateMode, CuratorClient};

/// The prefix of every item node (Curator's `SimpleDistributedQueue.PREFIX`).
pub const ITEM_PREFIX: &str = "qn-";

/// Consecutive items of the local view found already taken by others before the view is thrown
/// away and the queue listed again: past a few, the view is stale (other consumers are ahead).
const RELIST_AFTER_MISSES: usize = 8;

/// A distributed FIFO queue of byte items (Curator's `SimpleDistributedQueue`), wire-compatible
/// with Curator: items offered by Curator are taken here and the other way round, on one path.
///
/// Each item is a PERSISTENT_SEQUENTIAL node `<path>/qn-<sequence>` holding the item's bytes; the
/// queue's node is created (as a container, like Curator's `EnsureContainers`) when missing. Items
/// are taken in the order of their node names (the sequence number), as Curator does; nodes
/// without the `qn-` prefix are skipped with a warning.
///
/// # Delivery
/// At most once, as Curator: an item is taken by whoever deletes its node — each item goes to one
/// taker, whichever process or session it is in. An item taken is gone from ZooKeeper, so a
/// process that dies before using it loses it. Cancelling a call never loses one (see
/// [`take`](Self::take)); the one case where an item can be lost by a live taker is a delete whose
/// reply a connection loss hides: the delete may have been applied, and the retry finds the node
/// gone, which cannot be told apart from another taker's delete — it is logged (with the node) and
/// not delivered, never delivered twice.
///
/// # Speed
/// Curator lists the whole queue (and reads and deletes) for every take: three round trips, and a
/// listing that grows with the queue. This queue lists once, keeps the sorted names locally (shared
/// by the clones of one queue) and takes them in order, sending the read and the delete of an item
/// together (one round trip; the server answers them in order); it lists again only when its view
/// is used up, or after several items in a row were taken by others.
///
/// # Cancel safety and hand-off
/// A taken item (deleted node) is first put into a hand-off buffer shared by the clones of this
/// queue, by a task that outlives the caller: a call cancelled after the delete was sent leaves the
/// item there, and the next [`take`](Self::take), [`poll_timeout`](Self::poll_timeout), [`try_take`](Self::try_take)
/// or [`remove`](Self::remove) returns it first (and [`peek`](Self::peek) shows it). When the last
/// clone is dropped with items still in the buffer, they are put back at the tail (new nodes) in
/// the background on the client's runtime. Not under their old names: another queue's take sends
/// an item's read and delete together, and a node made again under a name it had listed could
/// fall between the two — deleted unread, and lost.
///
/// # Examples
/// ```no_run
/// use zk_curator::queue::SimpleDistributedQueue;
///
/// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
/// let queue = SimpleDistributedQueue::new(&client, "/queues/jobs")?;
/// queue.offer(b"resize image 42".to_vec()).await?;
/// let job = queue.take().await?;
/// assert_eq!(job, b"resize image 42");
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct SimpleDistributedQueue {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    client: CuratorClient,
    /// As the caller gave it.
    path: String,
    /// With the namespace.
    fixed: String,
    labels: RecipeLabels,
    view: Mutex<View>,
    /// Items whose delete succeeded and that no caller received yet, oldest first.
    handed_off: Mutex<VecDeque<Item>>,
}

#[derive(Debug, Default)]
struct View {
    /// Item names from the last listing not tried yet, in queue order.
    names: VecDeque<String>,
    /// Items in a row found taken by others.
    misses: usize,
}

#[derive(Debug)]
struct Item {
    name: String,
    data: Vec<u8>,
}

/// What one look at the queue found.
enum Next {
    Item(Vec<u8>),
    /// Nothing now; the watch on the queue's children when one was asked for.
    Empty(Option<zk::OneshotWatcher>),
}

impl SimpleDistributedQueue {
    /// The queue at `path` (Curator's `new SimpleDistributedQueue(client, path)`). Nothing is sent:
    /// the queue's node is created by the first call that needs it.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] naming the path.
    ///
    /// # Examples
    /// ```no_run
    /// # fn demo(client: &zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// let queue = zk_curator::queue::SimpleDistributedQueue::new(client, "/queues/jobs")?;
    /// # Ok(()) }
    /// ```
    pub fn new(client: &CuratorClient, path: &str) -> Result<Self> {
        paths::validate_path(path)?;
        if path == "/" {
            return Err(Error::InvalidPath { path: path.to_string(), reason: "a queue needs a node of its own" });
        }
        let fixed = client.fix_path(path);
        client.check_path_size(path, &fixed)?;
        let shared = Shared {
            client: client.clone(),
            path: path.to_string(),
            labels: client.recipe_labels("simple_queue", path),
            fixed,
            view: Mutex::new(View::default()),
            handed_off: Mutex::new(VecDeque::new()),
        };
        Ok(Self { shared: Arc::new(shared) })
    }

    /// The queue's path.
    pub fn path(&self) -> &str {
        &self.shared.path
    }

    /// Adds `data` at the tail of the queue (Curator's `offer`): one create of
    /// `<path>/qn-` (PERSISTENT_SEQUENTIAL), the queue's node created as a container when missing.
    /// Returns the item's node path.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `data` and the path when `data` is over the client's
    /// [`max_data_size`](CuratorClient::max_data_size) (nothing sent); server errors after the
    /// retry policy gave up; [`Error::Closed`]. A connection lost after the create was sent is
    /// returned, not retried (a second create would add the item twice): the item may be in the
    /// queue.
    ///
    /// # Cancel safety
    /// Not cancel safe in the sense that a cancelled offer may still have added the item (once).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(queue: zk_curator::queue::SimpleDistributedQueue) -> zk_curator::Result<()> {
    /// let node = queue.offer(b"job".to_vec()).await?;
    /// println!("queued as {node}");
    /// # Ok(()) }
    /// ```
    pub async fn offer(&self, data: impl Into<Vec<u8>>) -> Result<String> {
        let shared = &self.shared;
        let created = shared
            .client
            .create(&paths::join(&shared.path, ITEM_PREFIX))
            .data(data)
            .mode(CreateMode::PersistentSequential)
            .creating_parent_containers_if_needed()
            .await?;
        shared.labels.queue_offered(1);
        Ok(created)
    }

    /// Removes the head of the queue and returns it, waiting (on a watch of the queue's children,
    /// no polling) until there is one (Curator's `take`). Reconnections, a new session, and the
    /// queue's node deleted while waiting are ridden out: the queue is looked at again (its node
    /// created again when missing).
    ///
    /// # Errors
    /// Server errors after the retry policy gave up; [`Error::Closed`].
    ///
    /// # Cancel safety
    /// Cancel safe: an item whose delete was sent before the call was dropped is kept in the
    /// queue's hand-off buffer and returned by the next take (see the type's notes); no item is
    /// lost.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(queue: zk_curator::queue::SimpleDistributedQueue) -> zk_curator::Result<()> {
    /// loop {
    ///     let job = queue.take().await?;
    ///     println!("working on {} bytes", job.len());
    /// }
    /// # }
    /// ```
    pub async fn take(&self) -> Result<Vec<u8>> {
        loop {
            if let Some(data) = self.take_until(None).await? {
                return Ok(data);
            }
        }
    }

    /// [`take`](Self::take) for at most `timeout` (Curator's `poll(timeout, unit)`): `Ok(None)`
    /// when no item came in time. The call returns within `timeout` whatever the connection does;
    /// a timeout too long for the clock (`Duration::MAX`) means "forever".
    ///
    /// # Errors
    /// As [`take`](Self::take).
    ///
    /// # Cancel safety
    /// As [`take`](Self::take): an item deleted when the deadline (or a cancellation) struck is
    /// kept for the next call, never lost.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(queue: zk_curator::queue::SimpleDistributedQueue) -> zk_curator::Result<()> {
    /// use std::time::Duration;
    /// match queue.poll_timeout(Duration::from_secs(5)).await? {
    ///     Some(job) => println!("got {} bytes", job.len()),
    ///     None => println!("nothing within 5 s"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn poll_timeout(&self, timeout: impl Into<crate::Deadline>) -> Result<Option<Vec<u8>>> {
        let deadline = timeout.into().instant_from(Instant::now());
        match tokio::time::timeout_at(deadline.into(), self.take_until(Some(deadline))).await {
            Ok(Ok(Some(data))) => Ok(Some(data)),
            Ok(Err(Error::DeadlineExceeded { .. })) | Ok(Ok(None)) | Err(_) => Ok(self.shared.pop_handed_off()),
            Ok(Err(e)) => Err(e),
        }
    }

    /// Removes the head of the queue and returns it, or `Ok(None)` at once when the queue is empty
    /// (Curator's `poll()` without a timeout).
    ///
    /// # Errors
    /// As [`take`](Self::take).
    ///
    /// # Cancel safety
    /// As [`take`](Self::take).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(queue: zk_curator::queue::SimpleDistributedQueue) -> zk_curator::Result<()> {
    /// while let Some(job) = queue.try_take().await? {
    ///     println!("draining {} bytes", job.len());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_take(&self) -> Result<Option<Vec<u8>>> {
        match self.next(None, false).await? {
            Next::Item(data) => Ok(Some(data)),
            Next::Empty(_) => Ok(None),
        }
    }

    /// Removes the head of the queue and returns it (Curator's `remove()`); an empty queue is an
    /// error, as Java's `NoSuchElementException`.
    ///
    /// # Errors
    /// [`Error::QueueEmpty`] naming the path; otherwise as [`take`](Self::take).
    ///
    /// # Cancel safety
    /// As [`take`](Self::take).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(queue: zk_curator::queue::SimpleDistributedQueue) -> zk_curator::Result<()> {
    /// let head = queue.remove().await?;
    /// # Ok(()) }
    /// ```
    pub async fn remove(&self) -> Result<Vec<u8>> {
        self.try_take().await?.ok_or_else(|| Error::QueueEmpty { path: self.shared.path.clone() })
    }

    /// The head of the queue without removing it, or `Ok(None)` when the queue is empty (Curator's
    /// `peek()`). An item this queue took but no caller received yet (see the type's notes) is the
    /// head.
    ///
    /// # Errors
    /// Server errors after the retry policy gave up; [`Error::Closed`].
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(queue: zk_curator::queue::SimpleDistributedQueue) -> zk_curator::Result<()> {
    /// if let Some(next) = queue.peek().await? {
    ///     println!("next up: {} bytes", next.len());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn peek(&self) -> Result<Option<Vec<u8>>> {
        let shared = &self.shared;
        loop {
            if let Some(item) = shared.handed_off.lock().front() {
                return Ok(Some(item.data.clone()));
            }
            let front = shared.view.lock().names.front().cloned();
            let Some(name) = front else {
                let (names, _) = shared.list(None, false).await?;
                if names.is_empty() {
                    return Ok(None);
                }
                shared.view.lock().names = names;
                continue;
            };
            let node = paths::join(&shared.fixed, &name);
            let n = node.as_str();
            match shared.client.with_retry(&shared.path, None, |zk| async move { zk.get_data(n).await }).await {
                Ok((data, _)) => return Ok(Some(data)),
                Err(e) if e.is(ErrorCode::NoNode) => {
                    let mut view = shared.view.lock();
                    if view.names.front() == Some(&name) {
                        view.names.pop_front();
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The head of the queue without removing it (Curator's `element()`); an empty queue is an
    /// error, as Java's `NoSuchElementException`.
    ///
    /// # Errors
    /// [`Error::QueueEmpty`] naming the path; otherwise as [`peek`](Self::peek).
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(queue: zk_curator::queue::SimpleDistributedQueue) -> zk_curator::Result<()> {
    /// let head = queue.element().await?;
    /// # Ok(()) }
    /// ```
    pub async fn element(&self) -> Result<Vec<u8>> {
        self.peek().await?.ok_or_else(|| Error::QueueEmpty { path: self.shared.path.clone() })
    }

    /// Takes until `deadline`: `Ok(None)` when it passed (or the watch woke with nothing to take
    /// and the caller should look again — only with a deadline).
    async fn take_until(&self, deadline: Option<Instant>) -> Result<Option<Vec<u8>>> {
        loop {
            // Before the look that sets the watch (see `wake_up`).
            let mut status = self.shared.client.status();
            match self.next(deadline, true).await? {
                Next::Item(data) => return Ok(Some(data)),
                Next::Empty(Some(watcher)) => {
                    // Whatever woke us (a new child, the queue's node deleted, a reconnection, a
                    // new session), the next pass looks at the queue again.
                    if let Woken::Deadline = wake_up(&mut status, watcher, deadline).await {
                        return Ok(None);
                    }
                }
                Next::Empty(None) => {}
            }
        }
    }

    /// The next item: from the hand-off buffer, else by taking the names of the local view in
    /// order, listing the queue again (watched when `watch`) once the view is used up.
    async fn next(&self, deadline: Option<Instant>, watch: bool) -> Result<Next> {
        let shared = &self.shared;
        loop {
            if let Some(data) = shared.pop_handed_off() {
                return Ok(Next::Item(data));
            }
            let name = shared.view.lock().names.pop_front();
            match name {
                Some(name) => {
                    if !Shared::take_node(shared, name, deadline).await? {
                        let mut view = shared.view.lock();
                        view.misses += 1;
                        if view.misses >= RELIST_AFTER_MISSES {
                            debug!(path = %shared.path, "others took the queue's head several times: listing again");
                            view.names.clear();
                            view.misses = 0;
                        }
                    } else {
                        shared.view.lock().misses = 0;
                    }
                }
                None => {
                    let (names, watcher) = shared.list(deadline, watch).await?;
                    if names.is_empty() {
                        return Ok(Next::Empty(watcher));
                    }
                    shared.view.lock().names = names;
                }
            }
        }
    }
}

impl Shared {
    /// The returned item (counted as taken) at the head of the hand-off buffer.
    fn pop_handed_off(&self) -> Option<Vec<u8>> {
        let item = self.handed_off.lock().pop_front()?;
        self.labels.queue_taken();
        Some(item.data)
    }

    /// Tries to take the item `name`: its read and its delete are sent together, and a task that
    /// outlives the caller files the item into the hand-off buffer when the delete succeeded.
    /// `Ok(true)` when it did, `Ok(false)` when the node was gone (taken by another).
    async fn take_node(this: &Arc<Shared>, name: String, deadline: Option<Instant>) -> Result<bool> {
        let node = paths::join(&this.fixed, &name);
        let name = name.as_str();
        let node = node.as_str();
        this.client
            .with_retry(&this.path, deadline, |zk| {
                // Both requests are queued now, in this order: the server answers the read before
                // it applies the delete, so the data is known whenever the delete succeeded.
                let read = zk.get_data(node);
                let delete = zk.delete(node, None);
                let shared = Arc::clone(this);
                let (name, node) = (name.to_string(), node.to_string());
                let filed = this.client.runtime().spawn(async move {
                    let (read, delete) = tokio::join!(read, delete);
                    match (read, delete) {
                        (Ok((data, _)), Ok(())) => {
                            shared.handed_off.lock().push_back(Item { name, data });
                            Ok(true)
                        }
                        (_, Err(zk::Error::NoNode)) => Ok(false),
                        (Err(e), Ok(())) => {
                            // Not seen in practice: the read is answered first and both share the
                            // connection.
                            warn!(node, error = %e, "a queue item was deleted but its data could not be read: lost");
                            Ok(false)
                        }
                        (_, Err(e)) => Err(e),
                    }
                });
                async move { filed.await.unwrap_or(Err(zk::Error::ConnectionLoss)) }
            })
            .await
    }

    /// The queue's item names in queue order (foreign nodes left out), watched when `watch`;
    /// the queue's node created when missing.
    async fn list(
        &self,
        deadline: Option<Instant>,
        watch: bool,
    ) -> Result<(VecDeque<String>, Option<zk::OneshotWatcher>)> {
        let f = self.fixed.as_str();
        let mut created = false;
        loop {
            let listed = self
                .client
                .with_retry(&self.path, deadline, |zk| async move {
                    if watch {
                        zk.list_and_watch_children(f).await.map(|(names, watcher)| (names, Some(watcher)))
                    } else {
                        zk.list_children(f).await.map(|names| (names, None))
                    }
                })
                .await;
            match listed {
                Ok((names, watcher)) => {
                    let mut items: Vec<String> = names
                        .into_iter()
                        .filter(|name| {
                            let ours = name.starts_with(ITEM_PREFIX);
                            if !ours {
                                warn!(path = %self.path, node = %name, "foreign node in queue path: skipped");
                            }
                            ours
                        })
                        .collect();
                    items.sort_unstable();
                    return Ok((items.into(), watcher));
                }
                // Missing (never made, deleted, or a reaped empty container): made again, as
                // Curator's `EnsureContainers`; a second miss in a row is someone deleting it
                // right away, so the queue is reported empty rather than spinning.
                Err(e) if e.is(ErrorCode::NoNode) && !created => {
                    created = true;
                    self.client.create_parents(&self.fixed, deadline).await?;
                }
                Err(e) if e.is(ErrorCode::NoNode) => return Ok((VecDeque::new(), None)),
                Err(e) => return Err(e),
            }
        }
    }
}

impl Drop for Shared {
    /// Puts items taken but never received back at the tail (new nodes, never their old names:
    /// see the type's docs), in the background on the client's runtime. Never panics, with or
    /// without a runtime.
    fn drop(&mut self) {
        let items = std::mem::take(&mut *self.handed_off.lock());
        if items.is_empty() {
            return;
        }
        let client = self.client.clone();
        let path = self.path.clone();
        debug!(path = %path, items = items.len(), "writing back queue items no caller received");
        client.runtime().clone().spawn(async move {
            for item in items {
                let restored = client
                    .create(&paths::join(&path, ITEM_PREFIX))
                    .data(item.data)
                    .mode(CreateMode::PersistentSequential)
                    .creating_parent_containers_if_needed()
                    .await;
                if let Err(e) = restored {
                    warn!(path = %path, node = %item.name, error = %e, "a queue item taken but never received could not be put back: lost");
                }
            }
        });
    }
}
