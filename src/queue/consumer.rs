//! A consumer: the stream of a queue's items, the task that takes them, and the items.

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};
use tracing::{debug, warn};
use zookeeper_client as zk;

use crate::error::{Error, ErrorCode, Result};
use crate::framework::guaranteed_delete::DeleteTarget;
use crate::framework::paths;
use crate::framework::session::SessionKeep;
use crate::framework::SessionIdentity;
use crate::locks::{HoldState, HoldStateStream};
use crate::metrics::RecipeLabels;

use super::distributed::{Shared, ITEM_PREFIX};
use super::format;
use super::order::requeue_prefix;

/// Most nodes one consumer takes in one round of pipelined requests.
const MAX_BATCH: usize = 256;

/// How long a consumer waits before listing again after a failure it cannot wait on a watch for.
const FAILURE_PAUSE: Duration = Duration::from_millis(100);

enum Delivery<T: 'static> {
    Item(Item<T>),
    Report(Error),
}

/// One consumer of a [`DistributedQueue`](super::DistributedQueue): a
/// [`Stream`](futures_core::Stream) of its [`Item`]s, oldest first, and of what it reports
/// (`Err`: a malformed item node, the queue path deleted, items possibly lost to a delete whose
/// reply was lost); see
/// [`DistributedQueue::consume`](super::DistributedQueue::consume).
///
/// A task takes the items for the stream (pipelined requests, at most `max_in_flight` nodes held
/// at once); dropping the stream stops it: with a lock path the items taken and not yielded are
/// left for the next consumer, without one they are put back at the tail.
pub struct QueueStream<T: 'static> {
    items: mpsc::UnboundedReceiver<Delivery<T>>,
    labels: RecipeLabels,
    /// An item whose connection was suspended when it came up: yielded once `Held` again, dropped
    /// (so released) once `Lost`.
    /// Boxed: the stream stays `Unpin` whatever `T` is.
    suspended: Option<Box<(Item<T>, Settling)>>,
}

/// A wait until a session is served again or has ended.
type Settling = Pin<Box<dyn Future<Output = ()> + Send + Sync>>;

impl<T: 'static> std::fmt::Debug for QueueStream<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueStream")
            .field("buffered", &(self.items.len() + usize::from(self.suspended.is_some())))
            .finish()
    }
}

impl<T: 'static> futures_core::Stream for QueueStream<T> {
    type Item = Result<Item<T>>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        // An item is handed out only Held, as a lock is: one whose session ended on the way is
        // dropped here (it goes to the next consumer), one whose connection is suspended waits.
        loop {
            let item = match self.suspended.take() {
                Some(mut waiting) => {
                    if waiting.1.as_mut().poll(cx).is_pending() {
                        self.suspended = Some(waiting);
                        return Poll::Pending;
                    }
                    waiting.0
                }
                None => match std::task::ready!(self.items.poll_recv(cx)) {
                    None => return Poll::Ready(None),
                    Some(Delivery::Report(e)) => return Poll::Ready(Some(Err(e))),
                    Some(Delivery::Item(item)) => item,
                },
            };
            match item.hold_state() {
                HoldState::Held => {
                    let mut item = item;
                    item.handed = true;
                    self.labels.queue_taken();
                    return Poll::Ready(Some(Ok(item)));
                }
                HoldState::Suspended => {
                    let settling = item.node.settling();
                    self.suspended = Some(Box::new((item, settling)));
                }
                _ => {
                    debug!(node = %item.node.name, "a queue item whose consumer's session ended was not handed out");
                    drop(item);
                }
            }
        }
    }
}

impl<T: 'static> QueueStream<T> {
    /// The next item (or report); `None` once the queue was closed.
    ///
    /// # Cancel safety
    /// Cancel safe: an item not returned stays in the stream.
    ///
    /// # Errors
    /// What the consumer reports: [`Error::MalformedData`] for an item node another writer made
    /// that is not Curator's format (left in place), [`Error::ZooKeeper`] with `NoNode` when the
    /// queue path was deleted; without a lock path, a retryable [`Error::ZooKeeper`]
    /// (`ConnectionLoss`, `SessionExpired`, ...) when a batched delete's reply was lost and its
    /// nodes were then all found gone: their items may be lost (at most once). The stream goes on
    /// after each.
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(queue: zk_curator::queue::DistributedQueue<Vec<u8>>) -> zk_curator::Result<()> {
    /// let mut items = queue.consume()?;
    /// while let Some(item) = items.next().await {
    ///     let item = item?;
    ///     println!("{:?}", item.value());
    ///     item.ack().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn next(&mut self) -> Option<Result<Item<T>>> {
        std::future::poll_fn(|cx| futures_core::Stream::poll_next(Pin::new(&mut *self), cx)).await
    }
}

/// The lock node a consumer holds for an item node (guaranteed delivery).
struct LockHold {
    /// Keeps the lock node's session open while the item lives, also once the client gave it up:
    /// nothing of ours ends it (freeing the lock node) before the holder let go, or the server
    /// could have expired it anyway — a lost item kept for ever does not keep its node for ever,
    /// as a raw handle on the session would (see `SessionKeep`).
    _keep: Option<Arc<SessionKeep>>,
    /// The session the lock node was made on: the item's hold state follows the client's status
    /// for it, and its ack is sent only while the client is served on it.
    session: SessionIdentity,
    fixed: String,
    path: String,
}

/// One item node taken by a consumer; its items share it.
pub(super) struct NodeHold<T: 'static> {
    shared: Arc<Shared<T>>,
    name: String,
    item_fixed: String,
    data: Vec<u8>,
    lock: Option<LockHold>,
    /// Items of the node not acknowledged yet.
    outstanding: AtomicUsize,
    /// The node's lock released (or lost, or the node removed): no ack can finish it any more.
    settled: AtomicBool,
    /// The hold state as last published to watchers (see [`Item::watch_state`]).
    state: watch::Sender<HoldState>,
    /// A task follows the client's status for the watchers (started by the first one).
    monitor_started: AtomicBool,
    _permit: OwnedSemaphorePermit,
}

impl<T: 'static> NodeHold<T> {
    /// Lets the item node go (to the next consumer): deletes our lock node in the background
    /// (only while it is our session's).
    pub(super) fn release(&self) {
        if self.settle() {
            return;
        }
        if let Some(lock) = &self.lock {
            debug!(node = %self.name, "releasing a queue item's lock node");
            drop(self.shared.client.delete_target_in_background(DeleteTarget::OwnedBy {
                path: lock.fixed.clone(),
                owner: lock.session.id,
            }));
        }
    }

    /// Marks the node settled (acknowledged, put back or released: `Lost` to its items' watchers);
    /// true if it already was.
    fn settle(&self) -> bool {
        let was = self.settled.swap(true, Ordering::AcqRel);
        self.refresh();
        was
    }

    /// The hold state now: `Lost` once settled; without a lock path `Held` until then (the node
    /// is deleted, nobody else can take its items); with one, as a lock hold's, from the client's
    /// status for the lock node's session (its end includes the client giving it up while
    /// suspended, before the server can expire it).
    fn hold_state(&self) -> HoldState {
        if self.settled.load(Ordering::Acquire) {
            return HoldState::Lost;
        }
        let Some(lock) = &self.lock else { return HoldState::Held };
        let status = self.shared.client.status_now();
        if status.has_ended(lock.session) {
            HoldState::Lost
        } else if status.serves(lock.session) {
            HoldState::Held
        } else {
            HoldState::Suspended
        }
    }

    /// Publishes the state now to the watchers (`Lost` is final).
    fn refresh(&self) -> HoldState {
        let now = self.hold_state();
        self.state.send_if_modified(|s| {
            if *s == now || *s == HoldState::Lost {
                return false;
            }
            *s = now;
            true
        });
        *self.state.borrow()
    }

    /// Starts the task that publishes the state on each change of the client's status, until
    /// `Lost` or the node is dropped. Without a lock path only settling changes it: no task.
    fn start_monitor(self: &Arc<Self>) {
        if self.lock.is_none() || self.monitor_started.swap(true, Ordering::AcqRel) {
            return;
        }
        let node = Arc::downgrade(self);
        let mut status = self.shared.client.status();
        let mut own = self.state.subscribe();
        drop(self.shared.client.runtime().spawn(async move {
            loop {
                match node.upgrade() {
                    Some(node) if node.refresh() != HoldState::Lost => {}
                    _ => return,
                }
                tokio::select! {
                    changed = status.changed() => if changed.is_err() { return },
                    // Settled (published by `settle`), or the node dropped: nothing more to follow.
                    _ = own.wait_for(|s| *s == HoldState::Lost) => return,
                }
            }
        }));
    }

    /// Resolves once the node's session is served again or has ended, or the node is settled
    /// (released by a close): the stream looks at the state again then.
    fn settling(&self) -> Settling {
        let mut status = self.shared.client.status();
        let mut own = self.state.subscribe();
        let Some(session) = self.lock.as_ref().map(|l| l.session) else {
            return Box::pin(std::future::ready(()));
        };
        Box::pin(async move {
            loop {
                let settled = {
                    let now = status.borrow_and_update();
                    now.has_ended(session) || now.serves(session)
                };
                if settled {
                    return;
                }
                tokio::select! {
                    changed = status.changed() => if changed.is_err() { return },
                    _ = own.wait_for(|s| *s == HoldState::Lost) => return,
                }
            }
        })
    }
}

impl<T: 'static> Drop for NodeHold<T> {
    fn drop(&mut self) {
        self.release();
        let mut holds = self.shared.holds.lock();
        if holds.get(&self.name).is_some_and(|h| h.strong_count() == 0) {
            holds.remove(&self.name);
        }
    }
}

/// An item a consumer took: [`ack`](Self::ack) it once processed. With a lock path the item's
/// node is deleted only then; an item dropped unacknowledged (or whose consumer's session ended)
/// goes to the next consumer. Without a lock path the node was deleted before the item was handed
/// out and `ack` only says so.
///
/// # Hold state
///
/// With a lock path an item is held as a lock is: its consumer's EPHEMERAL lock node stands on
/// one session, and once that session ends the server hands the item to another consumer. So an
/// item has a [`HoldState`], as a [`MutexGuard`](crate::locks::MutexGuard) does
/// ([`hold_state`](Self::hold_state), [`watch_state`](Self::watch_state),
/// [`state_changes`](Self::state_changes), [`lost`](Self::lost)): handed out only `Held`;
/// `Suspended` while the connection is lost (the session, and so the item, may or may not
/// survive: stop doing what another consumer must not do at the same time); `Held` again when the
/// same session reconnects; `Lost` once the session ended — or was given up by the client while
/// suspended, before the server can expire it (see
/// [`simulated_session_expiration_percent`](crate::CuratorClientBuilder::simulated_session_expiration_percent))
/// — and its `ack` is then refused. An item is also `Lost` once its node is settled: it (or,
/// for a node of several items, [`put_multi`](super::DistributedQueue::put_multi), a sibling)
/// was requeued, released by a dropped sibling or a closed queue, or every item of the node was
/// acknowledged. The items of one node share its lock node, and so its state.
///
/// Without a lock path the item node was deleted before the item was handed out: nobody else can
/// get the item whatever the connection does, so the item is `Held` until it is acknowledged or
/// dropped (then `Lost`), and [`lost`](Self::lost) does not resolve while you hold it.
///
/// A lock node deleted by someone else than its session (by hand) is not noticed: the item stays
/// `Held`, and its `ack` then deletes the item node only (Curator's consumer does not notice it
/// either).
pub struct Item<T: 'static> {
    value: T,
    /// Where in its node's data the bytes it was read from are: what goes back when it is put
    /// back (not serialized again, which could fail or write other bytes than the producer did).
    bytes: std::ops::Range<usize>,
    node: Arc<NodeHold<T>>,
    handed: bool,
    done: bool,
}

impl<T: std::fmt::Debug + 'static> std::fmt::Debug for Item<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Item").field("node", &self.node.name).field("value", &self.value).finish()
    }
}

impl<T: 'static> Drop for Item<T> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if self.node.lock.is_some() {
            self.node.release();
        } else if !self.handed {
            // Without a lock path its node was deleted when taken. Never yielded (the stream was
            // dropped or the queue closed first): put back as a new node under its old name's
            // prefix, so it keeps its priority, delay or id (a plain item goes to the tail). One
            // yielded and dropped unacknowledged is gone: at most once.
            let data = format::encode([&self.node.data[self.bytes.clone()]]);
            if self.node.shared.enqueue(requeue_prefix(&self.node.name), data, None, 0).is_err() {
                warn!(node = %self.node.name, "a queue item taken and not yielded could not be put back");
            }
        }
    }
}

impl<T: 'static> Item<T> {
    /// The item.
    pub fn value(&self) -> &T {
        &self.value
    }

    /// The item's node name (`queue-<sequence>`).
    pub fn node(&self) -> &str {
        &self.node.name
    }

    /// The item's node path.
    pub fn path(&self) -> String {
        self.node.shared.item_path(&self.node.name)
    }

    /// The item's hold state now (see [the hold state](Self#hold-state)): with a lock path, from
    /// the client's connection and the lock node's session; without one, `Held` until the item
    /// is acknowledged.
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(item: zk_curator::queue::Item<Vec<u8>>) -> zk_curator::Result<()> {
    /// use zk_curator::locks::HoldState;
    /// // ... part of the work ...
    /// if item.hold_state() == HoldState::Held {
    ///     item.ack().await?;
    /// } // else dropped: it goes to the next consumer
    /// # Ok(()) }
    /// ```
    pub fn hold_state(&self) -> HoldState {
        self.node.hold_state()
    }

    /// A receiver of the item's hold-state changes, for `select!`-ing work against losing the
    /// item (a task on the client's runtime follows the connection for it while the item lives).
    ///
    /// # Example
    /// ```no_run
    /// # async fn work() {}
    /// # async fn demo(item: zk_curator::queue::Item<Vec<u8>>) -> zk_curator::Result<()> {
    /// use zk_curator::locks::HoldState;
    /// let mut state = item.watch_state();
    /// tokio::select! {
    ///     () = work() => item.ack().await?,
    ///     _ = state.wait_for(|s| *s != HoldState::Held) => {} // dropped: the next consumer's
    /// }
    /// # Ok(()) }
    /// ```
    pub fn watch_state(&self) -> watch::Receiver<HoldState> {
        self.node.start_monitor();
        let rx = self.node.state.subscribe();
        self.node.refresh();
        rx
    }

    /// The item's hold-state changes as a stream, each change once, ending after
    /// [`HoldState::Lost`].
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(item: zk_curator::queue::Item<Vec<u8>>) {
    /// let mut changes = item.state_changes();
    /// while let Some(state) = changes.next().await {
    ///     println!("{} is {state:?}", item.node()); // Suspended, Held, ..., Lost
    /// }
    /// # }
    /// ```
    pub fn state_changes(&self) -> HoldStateStream {
        HoldStateStream::new(self.watch_state())
    }

    /// Resolves once the item is [`HoldState::Lost`]: with a lock path, once its consumer's
    /// session ended (or was given up by the client: before the server can hand the item to
    /// another consumer) or its node was settled; without one, not while you hold the item.
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits.
    ///
    /// # Example
    /// ```no_run
    /// # async fn work() {}
    /// # async fn demo(item: zk_curator::queue::Item<Vec<u8>>) -> zk_curator::Result<()> {
    /// tokio::select! {
    ///     () = work() => item.ack().await?,
    ///     () = item.lost() => eprintln!("{} went to another consumer: stop", item.node()),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn lost(&self) {
        let mut rx = self.watch_state();
        let _ = rx.wait_for(|s| *s == HoldState::Lost).await;
    }

    /// Acknowledges the item: with a lock path, once every item of its node is acknowledged the
    /// node and its lock node are deleted in one transaction, on the session that took it.
    ///
    /// # Errors
    /// [`Error::LockLost`] naming the lock node when the item is [`Lost`](HoldState::Lost): the
    /// consumer's session ended (or the client gave it up) or the item was released (its consumer
    /// stream dropped or the queue closed) first — also while the ack waits for a connection: the
    /// item goes (or went) to another consumer. Connection errors after the retry policy: the item
    /// is released to the next consumer, as by a dropped call (a send whose reply was lost may
    /// have removed the node).
    ///
    /// # Cancel safety
    /// A dropped call may have removed the node; if it did not, the item is released to the next
    /// consumer.
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(mut items: zk_curator::queue::QueueStream<Vec<u8>>) -> zk_curator::Result<()> {
    /// if let Some(item) = items.next().await {
    ///     let item = item?;
    ///     // ... process item.value() ...
    ///     item.ack().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn ack(mut self) -> Result<()> {
        let node = self.node.clone();
        let Some(lock) = &node.lock else {
            self.done = true;
            return Ok(());
        };
        refuse_lost(&node, lock)?;
        if node.outstanding.fetch_sub(1, Ordering::AcqRel) > 1 {
            self.done = true;
            return Ok(());
        }
        // Dropped from here on, or failed: `self` releases the lock node (the item goes to the
        // next consumer), so no lock node of ours outlives the call on a live session.
        finish(&node, lock, None).await?;
        self.done = true;
        node.settle();
        Ok(())
    }

    /// Puts the item's node back at the tail (Curator's `ErrorMode.REQUEUE`): with a lock path
    /// the node is re-created there and removed, with its lock node, in one transaction; without
    /// one the item is put again.
    ///
    /// # Errors
    /// As [`ack`](Self::ack); without a lock path [`Error::Closed`] after `close`.
    ///
    /// # Cancel safety
    /// As [`ack`](Self::ack).
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(item: zk_curator::queue::Item<Vec<u8>>) -> zk_curator::Result<()> {
    /// item.requeue().await?;
    /// # Ok(()) }
    /// ```
    pub async fn requeue(mut self) -> Result<()> {
        let node = self.node.clone();
        let Some(lock) = &node.lock else {
            self.done = true;
            let data = format::encode([&self.node.data[self.bytes.clone()]]);
            return node.shared.enqueue(requeue_prefix(&node.name), data, None, 0);
        };
        refuse_lost(&node, lock)?;
        // As in `ack`: dropped or failed, `self` releases the lock node.
        finish(&node, lock, Some(&node.data)).await?;
        self.done = true;
        node.settle();
        Ok(())
    }
}

fn lost(lock: &LockHold, reason: &'static str) -> Error {
    Error::LockLost { node: lock.path.clone(), reason }
}

const SESSION_ENDED: &str = "the consumer's session ended: the item goes to another consumer";

/// Refuses to finish an item that is `Lost`: released, or its session ended. Lost is final: an
/// item its consumer may have been told is lost is never acknowledged (the old session's handle
/// could still reach the server before it expires).
fn refuse_lost<T: 'static>(node: &NodeHold<T>, lock: &LockHold) -> Result<()> {
    if node.settled.load(Ordering::Acquire) {
        return Err(lost(lock, "the item was released (its consumer stopped or the queue closed)"));
    }
    if node.hold_state() == HoldState::Lost {
        node.refresh();
        return Err(lost(lock, SESSION_ENDED));
    }
    Ok(())
}

/// Deletes the item node and our lock node in one transaction on the lock's session (and with
/// `requeue`, creates the node again at the tail in it).
async fn finish<T: 'static>(node: &NodeHold<T>, lock: &LockHold, requeue: Option<&[u8]>) -> Result<()> {
    let shared = &node.shared;
    let item_path = shared.item_path(&node.name);
    let mut retrying = shared.client.retrying(&item_path, None);
    let tail = paths::join(&shared.fixed, requeue_prefix(&node.name));
    let acls = shared.client.raw_acls_for(&tail);
    let options = zk::CreateMode::PersistentSequential.with_acls(zk::Acls::new(&acls));
    loop {
        // Sent only while the client is served on the lock's session: a request queued on a
        // suspended connection would go out on the old session's handle if it reconnected after
        // the client gave the session up, acknowledging an item its consumer was told is lost.
        // Given up (or closed) while this waits: refused, as at the start.
        let zk = match shared.client.connected_retrying_on(&mut retrying, lock.session).await {
            Ok(Some(zk)) => zk,
            Ok(None) => return Err(lost(lock, SESSION_ENDED)),
            Err(e) if e.kind() == crate::ErrorKind::Closed => return Err(lost(lock, SESSION_ENDED)),
            Err(e) => return Err(e),
        };
        let mut writer = zk.new_multi_writer();
        let added = writer
            .add_delete(&node.item_fixed, None)
            .and_then(|_| match requeue {
                Some(data) => writer.add_create(&tail, data, &options),
                None => Ok(()),
            })
            .and_then(|_| writer.add_delete(&lock.fixed, None));
        added.map_err(|e| Error::zk(&item_path, e))?;
        match writer.commit().await {
            Ok(_) => return Ok(()),
            Err(zk::MultiWriteError::OperationFailed { .. }) => {
                // The item node or our lock node is gone. Our lock node goes only with its
                // session or by our own hand (an earlier send whose reply was lost).
                match zk.check_stat(&lock.fixed).await {
                    Ok(None) => return Ok(()),
                    Ok(Some(_)) => {
                        // Someone else removed the item node: nothing to deliver again.
                        debug!(node = %node.name, "the queue item was removed by someone else");
                        let _ = zk.delete(&lock.fixed, None).await;
                        return Ok(());
                    }
                    Err(e) => retrying.backoff_or_fail(Error::zk(&item_path, e)).await?,
                }
            }
            Err(zk::MultiWriteError::RequestFailed { source: zk::Error::SessionExpired }) => {
                return Err(lost(lock, SESSION_ENDED));
            }
            Err(zk::MultiWriteError::RequestFailed { source }) => {
                let err = Error::zk(&item_path, source);
                if err.is_session_lost() {
                    return Err(lost(lock, SESSION_ENDED));
                }
                retrying.backoff_or_fail(err).await?;
            }
        }
    }
}

/// Starts a consumer of `shared`'s queue.
pub(super) fn start<T: Send + 'static>(shared: Arc<Shared<T>>) -> QueueStream<T> {
    let (tx, items) = mpsc::unbounded_channel();
    let taker = Taker {
        permits: Arc::new(Semaphore::new(shared.max_in_flight)),
        reported: HashSet::new(),
        again: false,
        watch_next: false,
        contended: false,
        seen_queue: false,
        wake_at: None,
        tx,
        shared: shared.clone(),
    };
    // Not aborted when the stream is dropped: the task sees the channel closed at its next wait
    // and stops there, so a round in flight finishes and what it took is released or put back
    // (an abort mid-round would leave a lock node made, or a node deleted, that no item knows).
    drop(shared.client.runtime().spawn(taker.run()));
    QueueStream { items, labels: shared.labels.clone(), suspended: None }
}

/// The task taking items for one consumer.
struct Taker<T: 'static> {
    shared: Arc<Shared<T>>,
    tx: mpsc::UnboundedSender<Delivery<T>>,
    permits: Arc<Semaphore>,
    /// Malformed item nodes already reported: skipped.
    reported: HashSet<String>,
    /// Take again at once, without waiting for a change.
    again: bool,
    /// List the next round with a watch (this one found nothing to take).
    watch_next: bool,
    /// The last round lost nodes to other consumers.
    contended: bool,
    /// The queue path was seen: once it is gone, that is reported.
    seen_queue: bool,
    /// When the first item node not due yet is due (a delay queue): a wait ends then.
    wake_at: Option<tokio::time::Instant>,
}

impl<T: 'static> Taker<T> {
    /// Nothing to take: wait on `watcher`, or list again with one.
    fn wait_on(&mut self, watcher: Option<zk::OneshotWatcher>) -> Round {
        match watcher {
            Some(w) => Round::Wait(vec![w]),
            None => {
                self.watch_next = true;
                Round::Again
            }
        }
    }
}

/// What one round found.
enum Round {
    /// Took something (or nothing to wait for): list again.
    Again,
    /// Nothing to take: wait for a change.
    Wait(Vec<zk::OneshotWatcher>),
    /// The queue path is gone.
    NoQueue,
}

impl<T: Send + 'static> Taker<T> {
    async fn run(mut self) {
        let mut closed = self.shared.closed.subscribe();
        let mut queue_missing_reported = false;
        loop {
            let stop = async {
                tokio::select! {
                    _ = closed.wait_for(|c| *c) => {}
                    () = self.tx.closed() => {}
                }
            };
            let permits = self.permits.clone();
            let first = tokio::select! {
                // A dropped stream or a closed queue first: no round after either.
                biased;
                () = stop => return,
                permit = permits.acquire_owned() => match permit { Ok(p) => p, Err(_) => return },
            };
            let mut batch = vec![first];
            while batch.len() < MAX_BATCH {
                match self.permits.clone().try_acquire_owned() {
                    Ok(p) => batch.push(p),
                    Err(_) => break,
                }
            }
            let round = match self.shared.client.connected(&self.shared.path, None).await {
                Ok((zk, session)) => self.round(&zk, session, batch).await,
                Err(e) if e.kind() == crate::ErrorKind::Closed => return,
                Err(_) => Ok(Round::Again),
            };
            let wait = match round {
                Ok(Round::Again) => continue,
                Ok(Round::Wait(watchers)) => watchers,
                Ok(Round::NoQueue) if !self.seen_queue => {
                    // Not made yet: made here, as Curator's consumer does when it starts.
                    if let Err(e) = self.shared.client.create_parents_as(&self.shared.fixed, None, false).await {
                        debug!(path = %self.shared.path, error = %e, "making the queue path");
                        tokio::time::sleep(FAILURE_PAUSE).await;
                    }
                    self.seen_queue = true;
                    continue;
                }
                Ok(Round::NoQueue) => {
                    if !queue_missing_reported {
                        queue_missing_reported = true;
                        let _ = self.tx.send(Delivery::Report(Error::code_on(&self.shared.path, ErrorCode::NoNode)));
                    }
                    match self.watch_queue_path().await {
                        Some(w) => vec![w],
                        None => continue,
                    }
                }
                Err(e) => {
                    debug!(path = %self.shared.path, error = %e, "queue consumer round failed");
                    tokio::time::sleep(FAILURE_PAUSE).await;
                    continue;
                }
            };
            if !wait.is_empty() {
                queue_missing_reported = false;
            }
            let changed = async {
                let mut any = Vec::with_capacity(wait.len());
                for w in wait {
                    any.push(Box::pin(w.changed()));
                }
                std::future::poll_fn(|cx| {
                    for w in any.iter_mut() {
                        if w.as_mut().poll(cx).is_ready() {
                            return Poll::Ready(());
                        }
                    }
                    Poll::Pending
                })
                .await;
            };
            let stop = async {
                tokio::select! {
                    _ = closed.wait_for(|c| *c) => {}
                    () = self.tx.closed() => {}
                }
            };
            let wake_at = self.wake_at.take();
            let due = async {
                match wake_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = changed => {}
                () = due => {}
                () = stop => return,
            }
        }
    }

    /// A watch for the queue path's creation (None: it exists again).
    async fn watch_queue_path(&self) -> Option<zk::OneshotWatcher> {
        let zk = self.shared.client.raw_client().ok()?;
        match zk.check_and_watch_stat(&self.shared.fixed).await {
            Ok((None, w)) => Some(w),
            Ok((Some(_), _)) => None,
            Err(_) => {
                tokio::time::sleep(FAILURE_PAUSE).await;
                None
            }
        }
    }

    /// Lists the queue and takes up to `permits.len()` item nodes, oldest first.
    async fn round(
        &mut self,
        zk: &zk::Client,
        session: SessionIdentity,
        mut permits: Vec<OwnedSemaphorePermit>,
    ) -> Result<Round> {
        let shared = self.shared.clone();
        // A watch only when the last round found nothing to take: a consumer that keeps taking
        // leaves no watches behind.
        let listed = if std::mem::take(&mut self.watch_next) {
            zk.get_and_watch_children(&shared.fixed).await.map(|(c, _, w)| (c, Some(w)))
        } else {
            zk.list_children(&shared.fixed).await.map(|c| (c, None))
        };
        let (children, watcher) = match listed {
            Ok(listed) => listed,
            Err(zk::Error::NoNode) => return Ok(Round::NoQueue),
            Err(e) => return Err(Error::zk(&shared.path, e)),
        };
        self.seen_queue = true;
        let mut names: Vec<String> = {
            let held = shared.holds.lock();
            children
                .into_iter()
                .filter(|c| c.starts_with(ITEM_PREFIX) && !held.contains_key(c) && !self.reported.contains(c))
                .collect()
        };
        // Curator's order (the kind's: by name, so by sequence or priority; by delay, only the due
        // ones; by sequence with ids), and at most `refresh_after` nodes from one listing.
        let waiting = shared.order.arrange(&mut names, std::time::SystemTime::now());
        self.wake_at = waiting.map(|w| tokio::time::Instant::now() + w);
        if names.is_empty() {
            return Ok(self.wait_on(watcher));
        }
        // A consumer that lost nodes to others last
        // round starts a little further in, so competing consumers do not all ask for the same
        // oldest nodes (order across consumers is not kept anyway).
        let want = permits.len().min(shared.refresh_after);
        if self.contended && names.len() > want {
            use rand::Rng as _;
            let offset = rand::thread_rng().gen_range(0..=(names.len() - want).min(3 * want));
            names.drain(..offset);
        }
        names.truncate(want);
        // The stream was dropped (or the queue closed) while we listed: take nothing more, or a
        // consumer that is gone would hold nodes (with a lock path) until it noticed.
        if self.tx.is_closed() || *shared.closed.borrow() {
            return Ok(Round::Again);
        }
        let taken = match &shared.lock {
            None => self.take_plain(zk, &names).await?,
            Some((_, lock_fixed)) => self.take_locked(zk, session, lock_fixed, &names).await?,
        };
        if taken.is_empty() && std::mem::take(&mut self.again) {
            return Ok(Round::Again);
        }
        self.contended = taken.len() < names.len();
        if taken.is_empty() {
            // Every one was someone else's: wait for a change (an item removed, or the first
            // one's lock node gone).
            let Some(watcher) = watcher else {
                self.watch_next = true;
                return Ok(Round::Again);
            };
            let mut watchers = vec![watcher];
            if let Some((_, lock_fixed)) = &shared.lock {
                match zk.check_and_watch_stat(&paths::join(lock_fixed, &names[0])).await {
                    Ok((Some(_), w)) => watchers.push(w),
                    // Released meanwhile: take again.
                    Ok((None, _)) => return Ok(Round::Again),
                    Err(e) => return Err(Error::zk(&shared.path, e)),
                }
            }
            return Ok(Round::Wait(watchers));
        }
        for (name, data, lock) in taken {
            let Some(permit) = permits.pop() else { break };
            self.deliver(name, data, lock, permit);
        }
        Ok(Round::Again)
    }

    /// Without a lock path: reads the nodes (pipelined), then deletes the well-formed ones
    /// (pipelined); a node is ours when our delete removed it.
    async fn take_plain(
        &mut self,
        zk: &zk::Client,
        names: &[String],
    ) -> Result<Vec<(String, Vec<u8>, Option<LockHold>)>> {
        let fixed: Vec<String> = names.iter().map(|n| paths::join(&self.shared.fixed, n)).collect();
        let reads: Vec<_> = fixed.iter().map(|f| zk.get_data(f)).collect();
        let mut readable = Vec::new();
        for (i, read) in reads.into_iter().enumerate() {
            match read.await {
                Ok((data, _)) => {
                    if self.check_format(&names[i], &data) {
                        readable.push((i, data));
                    }
                }
                Err(zk::Error::NoNode) => {}
                Err(e) => return Err(Error::zk(&self.shared.path, e)),
            }
        }
        // All of them in one transaction first (one log entry on the server instead of one write
        // each). When another consumer took one of them the transaction removed none: each is
        // deleted on its own, ours only when our delete removed it.
        let mut unanswered = None;
        if readable.len() > 1 {
            let mut writer = zk.new_multi_writer();
            for (i, _) in &readable {
                writer.add_delete(&fixed[*i], None).map_err(|e| Error::zk(&self.shared.path, e))?;
            }
            match writer.commit().await {
                Ok(_) => return Ok(readable.into_iter().map(|(i, data)| (names[i].clone(), data, None)).collect()),
                Err(zk::MultiWriteError::OperationFailed { .. }) => {}
                // Refused by the server (throttled, ...): it removed none.
                Err(zk::MultiWriteError::RequestFailed { source }) if !crate::error::outcome_unknown(&source) => {}
                // Unknown outcome. Each is deleted on its own: a node still there proves the
                // transaction removed none (all or none), so the deletes decide; if all are gone
                // the transaction may have taken them, or others did: reported, never handed out.
                Err(zk::MultiWriteError::RequestFailed { source }) => unanswered = Some(source),
            }
        }
        let batched = readable.len();
        let deletes: Vec<_> = readable.iter().map(|(i, _)| zk.delete(&fixed[*i], None)).collect();
        let mut taken = Vec::new();
        let mut failure = None;
        for ((i, data), delete) in readable.into_iter().zip(deletes) {
            match delete.await {
                Ok(()) => taken.push((names[i].clone(), data, None)),
                Err(zk::Error::NoNode) => {}
                // The outcome of this delete is unknown: at most once, so the item may be lost.
                Err(e) if crate::error::outcome_unknown(&e) => {
                    warn!(node = %names[i], error = %e, "a queue item's delete went unanswered (at most once: it may be lost)");
                    failure.get_or_insert(e);
                }
                // Refused (throttled, ...): the node stays for a later round.
                Err(e) => {
                    failure.get_or_insert(e);
                }
            }
        }
        if taken.is_empty() {
            if let Some(e) = failure {
                return Err(Error::zk(&self.shared.path, e));
            }
            if let Some(e) = unanswered {
                // Told to the stream (its consumer may have lost items), not only logged.
                warn!(path = %self.shared.path, nodes = batched, error = %e, "a queue's batched delete went unanswered and its nodes are gone (at most once: their items may be lost)");
                let _ = self.tx.send(Delivery::Report(Error::zk(&self.shared.path, e)));
            }
        }
        Ok(taken)
    }

    /// With a lock path: creates our EPHEMERAL lock node for each and reads the node (all
    /// pipelined); a node is ours when our lock node was made and the node was still there.
    async fn take_locked(
        &mut self,
        zk: &zk::Client,
        session: SessionIdentity,
        lock_fixed: &str,
        names: &[String],
    ) -> Result<Vec<(String, Vec<u8>, Option<LockHold>)>> {
        let shared = self.shared.clone();
        let locks: Vec<String> = names.iter().map(|n| paths::join(lock_fixed, n)).collect();
        let items: Vec<String> = names.iter().map(|n| paths::join(&shared.fixed, n)).collect();
        let acls = shared.client.raw_acls_for(&locks[0]);
        let options = zk::CreateMode::Ephemeral.with_acls(zk::Acls::new(&acls));
        let default_data = shared.client.default_data().to_vec();
        let mut sent = Vec::with_capacity(names.len());
        for (lock, item) in locks.iter().zip(&items) {
            sent.push((zk.create(lock, &default_data, &options), zk.get_data(item)));
        }
        let mut taken = Vec::new();
        let mut missing_lock_path = false;
        let mut failure = None;
        for (i, (create, read)) in sent.into_iter().enumerate() {
            let created = create.await;
            let read = read.await;
            let name = &names[i];
            match created {
                Ok(_) => {}
                Err(zk::Error::NodeExists) => continue,
                Err(zk::Error::NoNode) => {
                    missing_lock_path = true;
                    continue;
                }
                Err(e) => {
                    // Unknown outcome: a lock node of ours may stand; delete it while it is ours.
                    drop(shared.client.delete_target_in_background(DeleteTarget::OwnedBy {
                        path: locks[i].clone(),
                        owner: session.id,
                    }));
                    failure.get_or_insert(e);
                    continue;
                }
            }
            let hold = LockHold {
                _keep: shared.client.session_keep(session),
                session,
                fixed: locks[i].clone(),
                path: paths::join(shared.lock.as_ref().map_or("", |l| l.0.as_str()), name),
            };
            match read {
                Ok((data, _)) if self.check_format(name, &data) => taken.push((name.clone(), data, Some(hold))),
                // Malformed (reported) or gone: our lock node goes, the node stays as it is.
                Ok(_) | Err(zk::Error::NoNode) => {
                    drop(
                        shared
                            .client
                            .delete_target_in_background(DeleteTarget::OwnedBy { path: hold.fixed, owner: session.id }),
                    );
                }
                Err(e) => {
                    drop(
                        shared
                            .client
                            .delete_target_in_background(DeleteTarget::OwnedBy { path: hold.fixed, owner: session.id }),
                    );
                    failure.get_or_insert(e);
                }
            }
        }
        if missing_lock_path {
            debug!(path = %shared.path, "making the queue's lock path");
            shared.client.create_parents_as(lock_fixed, None, false).await?;
        }
        if taken.is_empty() {
            if let Some(e) = failure {
                return Err(Error::zk(&shared.path, e));
            }
        }
        // Made the lock path: take again at once.
        self.again = missing_lock_path;
        Ok(taken)
    }

    /// True when `data` is Curator's item format with items our serializer reads; otherwise
    /// reports the node (once) and false.
    fn check_format(&mut self, name: &str, data: &[u8]) -> bool {
        let problem = match format::decode(data) {
            Err(reason) => reason,
            Ok(items) => match items.iter().find_map(|i| self.shared.serializer.deserialize(i).err()) {
                None => return true,
                Some(reason) => format!("an item the serializer refused: {reason}"),
            },
        };
        if self.reported.insert(name.to_string()) {
            let path = self.shared.item_path(name);
            warn!(%path, reason = %problem, "malformed queue item node left in place");
            let _ = self.tx.send(Delivery::Report(Error::MalformedData {
                path,
                expected: "a queue item node (Curator's item format)",
                reason: problem,
            }));
        }
        false
    }

    fn deliver(&mut self, name: String, data: Vec<u8>, lock: Option<LockHold>, permit: OwnedSemaphorePermit) {
        // Each item with where its bytes are in `data` (decode hands out slices of it).
        let values: Vec<(T, std::ops::Range<usize>)> = match format::decode(&data) {
            Ok(items) => items
                .iter()
                .filter_map(|i| {
                    let start = i.as_ptr() as usize - data.as_ptr() as usize;
                    Some((self.shared.serializer.deserialize(i).ok()?, start..start + i.len()))
                })
                .collect(),
            Err(_) => Vec::new(),
        };
        let node = Arc::new(NodeHold {
            shared: self.shared.clone(),
            item_fixed: paths::join(&self.shared.fixed, &name),
            name,
            data,
            lock,
            outstanding: AtomicUsize::new(values.len()),
            settled: AtomicBool::new(false),
            state: watch::channel(HoldState::Held).0,
            monitor_started: AtomicBool::new(false),
            _permit: permit,
        });
        if node.lock.is_some() {
            self.shared.holds.lock().insert(node.name.clone(), Arc::downgrade(&node));
        }
        if values.is_empty() {
            // A node of no items (Curator writes one for an empty putMulti): done at once.
            if node.lock.is_some() {
                let node = node.clone();
                self.shared.client.runtime().spawn(async move {
                    if let Some(lock) = &node.lock {
                        if finish(&node, lock, None).await.is_ok() {
                            node.settle();
                        }
                    }
                });
            }
            return;
        }
        for (value, bytes) in values {
            let item = Item { value, bytes, node: node.clone(), handed: false, done: false };
            // A closed stream drops the item: released (lock path) or put back.
            let _ = self.tx.send(Delivery::Item(item));
        }
    }
}
