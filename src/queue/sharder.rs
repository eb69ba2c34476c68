//! [`QueueSharder`]: Curator's `QueueSharder` — one logical queue spread over several shard
//! queues, a new shard added (by the leader) when one grows past a threshold.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use rand::seq::IteratorRandom;
use tokio::sync::watch;
use tracing::{debug, debug_span, info, info_span, warn, Instrument};

use crate::error::{Error, ErrorCode, Result};
use crate::framework::paths;
use crate::leader::LeaderLatch;
use crate::{CreateMode, CuratorClient};

use super::SimpleDistributedQueue;
use super::{DistributedDelayQueue, DistributedIdQueue, DistributedPriorityQueue, DistributedQueue};

/// The shards' name prefix: each shard is `<queue path>/queue-<random UUID>` (Curator's).
pub const SHARD_PREFIX: &str = "queue-";

/// The default [`new_queue_threshold`](QueueSharderPoliciesBuilder::new_queue_threshold)
/// (Curator's, 10,000 items).
pub const DEFAULT_NEW_QUEUE_THRESHOLD: usize = 10_000;
/// The default [`threshold_check`](QueueSharderPoliciesBuilder::threshold_check) interval
/// (Curator's, 30 s).
pub const DEFAULT_THRESHOLD_CHECK: Duration = Duration::from_secs(30);
/// The default [`max_queues`](QueueSharderPoliciesBuilder::max_queues) (Curator's, 10).
pub const DEFAULT_MAX_QUEUES: usize = 10;

/// Largest threshold accepted: a shard that large could not be listed by its consumers in one
/// ZooKeeper reply (the default 1 MiB packet holds about 50,000 item names).
const MAX_NEW_QUEUE_THRESHOLD: usize = 1_000_000;
/// Longest check interval accepted: a sharder checking less than daily never catches a growing
/// shard.
const MAX_THRESHOLD_CHECK: Duration = Duration::from_secs(24 * 60 * 60);
/// Most shards accepted: each is a queue object (and usually a consumer) in every instance.
const MAX_MAX_QUEUES: usize = 10_000;

/// When a [`QueueSharder`] adds a shard and how often it looks (Curator's
/// `QueueSharderPolicies`). Build with [`QueueSharderPolicies::builder`]; the
/// [`Default`] is Curator's defaults.
///
/// ```
/// use std::time::Duration;
/// use zk_curator::queue::QueueSharderPolicies;
///
/// let policies = QueueSharderPolicies::builder()
///     .new_queue_threshold(5_000)
///     .threshold_check(Duration::from_secs(10))
///     .max_queues(20)
///     .build()?;
/// assert_eq!(policies.max_queues(), 20);
/// # Ok::<(), zk_curator::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueSharderPolicies {
    new_queue_threshold: usize,
    threshold_check: Duration,
    max_queues: usize,
}

impl Default for QueueSharderPolicies {
    fn default() -> Self {
        QueueSharderPolicies {
            new_queue_threshold: DEFAULT_NEW_QUEUE_THRESHOLD,
            threshold_check: DEFAULT_THRESHOLD_CHECK,
            max_queues: DEFAULT_MAX_QUEUES,
        }
    }
}

impl QueueSharderPolicies {
    /// A builder starting from the defaults.
    pub fn builder() -> QueueSharderPoliciesBuilder {
        QueueSharderPoliciesBuilder { policies: QueueSharderPolicies::default() }
    }

    /// Items in one shard at which the leader adds a shard.
    pub fn new_queue_threshold(&self) -> usize {
        self.new_queue_threshold
    }

    /// How often every instance lists and counts the shards.
    pub fn threshold_check(&self) -> Duration {
        self.threshold_check
    }

    /// Most shards the leader makes.
    pub fn max_queues(&self) -> usize {
        self.max_queues
    }
}

/// Builds [`QueueSharderPolicies`] (Curator's `QueueSharderPolicies.Builder`); the values are
/// checked by [`build`](Self::build).
#[derive(Clone, Debug)]
pub struct QueueSharderPoliciesBuilder {
    policies: QueueSharderPolicies,
}

impl QueueSharderPoliciesBuilder {
    /// Items in one shard at which the leader adds a shard (Curator's `newQueueThreshold`);
    /// default [`DEFAULT_NEW_QUEUE_THRESHOLD`]. Shards holding at most half of it are the
    /// preferred ones [`queue`](QueueSharder::queue) picks.
    pub fn new_queue_threshold(mut self, items: usize) -> Self {
        self.policies.new_queue_threshold = items;
        self
    }

    /// How often every instance lists the shards and counts their items (Curator's
    /// `thresholdCheckMs`); default [`DEFAULT_THRESHOLD_CHECK`].
    pub fn threshold_check(mut self, every: Duration) -> Self {
        self.policies.threshold_check = every;
        self
    }

    /// Most shards the leader makes (Curator's `maxQueues`); default [`DEFAULT_MAX_QUEUES`].
    pub fn max_queues(mut self, shards: usize) -> Self {
        self.policies.max_queues = shards;
        self
    }

    /// The policies.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the value: a threshold of 0 or over 1,000,000, a check
    /// interval of 0 or over a day, `max_queues` 0 or over 10,000.
    pub fn build(self) -> Result<QueueSharderPolicies> {
        let p = self.policies;
        if p.new_queue_threshold == 0 || p.new_queue_threshold > MAX_NEW_QUEUE_THRESHOLD {
            return Err(Error::invalid_argument(
                "new_queue_threshold",
                p.new_queue_threshold,
                "must be 1 to 1,000,000 items",
            ));
        }
        if p.threshold_check.is_zero() || p.threshold_check > MAX_THRESHOLD_CHECK {
            return Err(Error::invalid_argument(
                "threshold_check",
                format!("{:?}", p.threshold_check),
                "must be over 0 and at most a day",
            ));
        }
        if p.max_queues == 0 || p.max_queues > MAX_MAX_QUEUES {
            return Err(Error::invalid_argument("max_queues", p.max_queues, "must be 1 to 10,000 shards"));
        }
        Ok(p)
    }
}

/// A queue a [`QueueSharder`] can manage as a shard: cheap to clone (every clone the same
/// queue), and closed by the sharder's [`close`](QueueSharder::close) (Curator's `QueueBase`).
/// Implemented by this module's queues.
pub trait ShardQueue: Clone + Send + Sync + 'static {
    /// Closes this queue object (as its own `close`): the shard's items stay.
    fn close_shard(&self) -> impl Future<Output = ()> + Send;
}

impl<T: Send + 'static> ShardQueue for DistributedQueue<T> {
    fn close_shard(&self) -> impl Future<Output = ()> + Send {
        self.close()
    }
}

impl<T: Send + 'static> ShardQueue for DistributedPriorityQueue<T> {
    fn close_shard(&self) -> impl Future<Output = ()> + Send {
        self.close()
    }
}

impl<T: Send + 'static> ShardQueue for DistributedDelayQueue<T> {
    fn close_shard(&self) -> impl Future<Output = ()> + Send {
        self.close()
    }
}

impl<T: Send + 'static> ShardQueue for DistributedIdQueue<T> {
    fn close_shard(&self) -> impl Future<Output = ()> + Send {
        self.close()
    }
}

impl ShardQueue for SimpleDistributedQueue {
    /// Nothing to close: a simple queue keeps nothing running.
    fn close_shard(&self) -> impl Future<Output = ()> + Send {
        std::future::ready(())
    }
}

/// Where a sharder is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SharderState {
    /// Created, not started.
    Latent,
    /// Managing its shards.
    Started,
    /// Closed.
    Closed,
}

type Allocator<Q> = Box<dyn Fn(&CuratorClient, &str) -> Result<Q> + Send + Sync>;

/// The shard queues this instance manages, by path, and those it prefers for puts.
struct Shards<Q> {
    queues: BTreeMap<String, Q>,
    preferred: BTreeSet<String>,
    /// The sharder was closed or dropped: a queue allocated from now on (by a check still
    /// running) is closed at once instead of managed, or its consumers would outlive the sharder.
    retired: bool,
}

impl<Q: ShardQueue> Shards<Q> {
    /// Stops managing every queue: the caller closes them.
    fn take_queues(&mut self) -> Vec<Q> {
        self.preferred.clear();
        std::mem::take(&mut self.queues).into_values().collect()
    }

    /// Stops managing every queue for good (closed or dropped): the caller closes them.
    fn retire(&mut self) -> Vec<Q> {
        self.retired = true;
        self.take_queues()
    }
}

/// Closes `queues` in the background, on the client's runtime (where their consumers run): a
/// queue object dropped unclosed leaves the consumers its allocator started running. Never
/// panics, with or without a current runtime (a runtime shut down drops the task, and the
/// consumers with it).
fn close_in_background<Q: ShardQueue>(client: &CuratorClient, queues: Vec<Q>) {
    for queue in queues {
        drop(client.runtime().spawn(async move { queue.close_shard().await }));
    }
}

/// A queue from the allocator not yet managed: closed in the background if dropped so (its
/// shard's create failed, the sharder closed meanwhile, or the call was cancelled).
struct Unmanaged<'a, Q: ShardQueue> {
    client: &'a CuratorClient,
    queue: Option<Q>,
}

impl<Q: ShardQueue> Unmanaged<'_, Q> {
    fn take(mut self) -> Q {
        self.queue.take().expect("taken once")
    }
}

impl<Q: ShardQueue> Drop for Unmanaged<'_, Q> {
    fn drop(&mut self) {
        if let Some(queue) = self.queue.take() {
            close_in_background(self.client, vec![queue]);
        }
    }
}

struct Inner<Q> {
    client: CuratorClient,
    /// The queue path (the shards' parent), as the caller gave it.
    path: String,
    allocate: Allocator<Q>,
    policies: QueueSharderPolicies,
    latch: LeaderLatch,
    state: watch::Sender<SharderState>,
    shards: Mutex<Shards<Q>>,
    /// Why the last check failed; `None` once one succeeded.
    check_error: watch::Sender<Option<Error>>,
    /// The check loop, taken by `close` to wait for its end.
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// `close`'s outcome once its clean-up finished (every `close` call waits for it).
    closed: watch::Sender<Option<Result<()>>>,
}

/// Curator's `QueueSharder`, wire-compatible: one logical queue at `Q` spread over shard
/// queues, each at a child `Q/queue-<random UUID>` that is itself a queue path (so Curator's and
/// ours share the shards). A [`LeaderLatch`] at a separate leader path decides who adds shards.
///
/// Every instance lists the shards every
/// [`threshold_check`](QueueSharderPoliciesBuilder::threshold_check), adopts those others made
/// (a queue object from the allocator for each), and counts their items: a shard with at least
/// [`new_queue_threshold`](QueueSharderPoliciesBuilder::new_queue_threshold) items stops being
/// preferred, one with at most half of it becomes preferred; when a shard reached the threshold
/// the leader adds a shard, up to [`max_queues`](QueueSharderPoliciesBuilder::max_queues).
/// [`queue`](Self::queue) hands out a random preferred shard (else a random shard) to put to.
///
/// Items keep their order within a shard, not across shards. Consume every shard: the
/// allocator may start a consumer for each (closing the queue ends it), or consumers follow
/// [`queue_paths`](Self::queue_paths).
///
/// Better than Curator: a shard deleted between the listing and its count is dropped (Curator
/// fails the check); a shard deleted later is dropped too (its queue object closed), and if every
/// shard is gone the leader makes a new one; a failed check is logged and reported on
/// [`check_errors`](Self::check_errors), and the next check lists again (after a reconnect or a
/// new session as well).
///
/// Dropping the sharder stops its check loop and its latch (its node deleted in the
/// background) and closes the shards' queue objects in the background, so the consumers the
/// allocator started end; prefer [`close`](Self::close), which waits for all that.
///
/// ```no_run
/// use zk_curator::queue::{DistributedQueue, QueueSharder, QueueSharderPolicies};
///
/// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
/// let sharder = QueueSharder::new(
///     &client,
///     |client, shard| DistributedQueue::builder(client, shard).build(),
///     "/jobs/shards",
///     "/jobs/shards-leader",
///     QueueSharderPolicies::default(),
/// )?;
/// sharder.start().await?;
/// sharder.queue()?.put(b"resize photo 17".to_vec()).await?;
/// sharder.close().await?;
/// # Ok(()) }
/// ```
pub struct QueueSharder<Q: ShardQueue> {
    inner: Arc<Inner<Q>>,
}

impl<Q: ShardQueue> std::fmt::Debug for QueueSharder<Q> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueSharder")
            .field("path", &self.inner.path)
            .field("leader_path", &self.inner.latch.path())
            .field("state", &self.state())
            .field("shards", &self.queue_paths())
            .field("policies", &self.inner.policies)
            .finish()
    }
}

impl<Q: ShardQueue> QueueSharder<Q> {
    /// A sharder of the queue at `queue_path`, its leader latch at `leader_path` (Curator's
    /// constructor); `allocate` makes the queue object of a shard path (Curator's
    /// `QueueAllocator`), for shards this instance makes and those it adopts. Not started: see
    /// [`start`](Self::start).
    ///
    /// # Errors
    /// [`Error::InvalidPath`] naming the path if either path is invalid or `/`, or if the leader
    /// path is the queue path or inside it (or the reverse).
    pub fn new(
        client: &CuratorClient,
        allocate: impl Fn(&CuratorClient, &str) -> Result<Q> + Send + Sync + 'static,
        queue_path: &str,
        leader_path: &str,
        policies: QueueSharderPolicies,
    ) -> Result<Self> {
        paths::validate_path(queue_path)?;
        if queue_path == "/" {
            return Err(Error::InvalidPath {
                path: queue_path.to_string(),
                reason: "the shards need a node of their own",
            });
        }
        paths::validate_path(leader_path)?;
        let inside = |a: &str, b: &str| a == b || a.starts_with(&format!("{b}/"));
        if inside(leader_path, queue_path) || inside(queue_path, leader_path) {
            return Err(Error::InvalidPath {
                path: leader_path.to_string(),
                reason: "the leader path must be apart from the queue path (neither inside the other)",
            });
        }
        // Curator's sharder makes its latch with the default (empty) participant id.
        let latch = LeaderLatch::new(client, leader_path, "")?;
        let inner = Inner {
            client: client.clone(),
            path: queue_path.to_string(),
            allocate: Box::new(allocate),
            policies,
            latch,
            state: watch::Sender::new(SharderState::Latent),
            shards: Mutex::new(Shards { queues: BTreeMap::new(), preferred: BTreeSet::new(), retired: false }),
            check_error: watch::Sender::new(None),
            task: Mutex::new(None),
            closed: watch::Sender::new(None),
        };
        Ok(QueueSharder { inner: Arc::new(inner) })
    }

    /// The queue path (the shards' parent).
    pub fn path(&self) -> &str {
        &self.inner.path
    }

    /// The leader latch's path.
    pub fn leader_path(&self) -> &str {
        self.inner.latch.path()
    }

    /// The policies.
    pub fn policies(&self) -> QueueSharderPolicies {
        self.inner.policies
    }

    /// The sharder's state.
    pub fn state(&self) -> SharderState {
        *self.inner.state.borrow()
    }

    /// Whether this instance is the one that adds shards now.
    pub fn is_leader(&self) -> bool {
        self.inner.latch.has_leadership()
    }

    /// Starts (Curator's `start`): makes the queue path (a container, as Curator does), adopts
    /// the shards there or — when there is none — makes one, starts the leader latch and the
    /// check loop (on the client's runtime).
    ///
    /// As in Curator, instances starting together on an empty queue path may each make a first
    /// shard.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if already started or closed (a sharder starts once); the
    /// allocator's error; ZooKeeper's errors listing or making the shards. A failed start leaves
    /// the sharder unstarted (it may be started again), the queue objects it allocated closed
    /// in the background.
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled start leaves the sharder unstarted, the queue objects it
    /// allocated closed in the background. A shard it made stays (shards are shared by every
    /// instance, as in Curator).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(sharder: zk_curator::queue::QueueSharder<zk_curator::queue::DistributedQueue<Vec<u8>>>) -> zk_curator::Result<()> {
    /// sharder.start().await?;
    /// println!("{} shards", sharder.shard_count());
    /// # Ok(()) }
    /// ```
    pub async fn start(&self) -> Result<()> {
        let span = debug_span!("queue_sharder_start", path = %self.inner.path);
        async {
            let mut started = false;
            self.inner.state.send_if_modified(|state| {
                started = *state == SharderState::Latent;
                if started {
                    *state = SharderState::Started;
                }
                started
            });
            if !started {
                return Err(Error::invalid_argument(
                    "sharder state",
                    format!("{:?}", self.state()),
                    "a sharder starts once",
                ));
            }
            let mut undo = UndoStart(Some(&self.inner));
            self.inner.ensure_queue_path().await?;
            let listed = self.inner.list_shards().await?;
            for shard in &listed {
                self.inner.adopt(shard)?;
            }
            if listed.is_empty() {
                self.inner.add_shard().await?;
            }
            self.inner.latch.start()?;
            let task = check_loop(Arc::downgrade(&self.inner), self.inner.state.subscribe(), self.inner.policies);
            let span = info_span!("queue_sharder", path = %self.inner.path);
            *self.inner.task.lock() = Some(self.inner.client.runtime().spawn(task.instrument(span)));
            undo.0 = None;
            debug!(shards = self.shard_count(), "queue sharder started");
            Ok(())
        }
        .instrument(span)
        .await
    }

    /// Stops (Curator's `close`): ends the check loop (waiting for a check in progress to
    /// finish), closes every shard's queue object (ending the consumers the allocator started)
    /// and the leader latch (its node deleted). The shards and their items stay, as in Curator.
    /// Closing a sharder not started (or closed) only marks it closed.
    ///
    /// # Errors
    /// The leader latch's close error (its node stays queued for deletion in the background).
    ///
    /// # Cancel safety
    /// Cancel safe: the sharder is closed at the first poll and the clean-up goes on in the
    /// background; a later `close` waits for it.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(sharder: zk_curator::queue::QueueSharder<zk_curator::queue::DistributedQueue<Vec<u8>>>) -> zk_curator::Result<()> {
    /// sharder.close().await?;
    /// assert!(sharder.queue().is_err());
    /// # Ok(()) }
    /// ```
    pub async fn close(&self) -> Result<()> {
        let span = debug_span!("queue_sharder_close", path = %self.inner.path);
        async {
            let before = self.inner.state.send_replace(SharderState::Closed);
            if before != SharderState::Closed {
                let inner = self.inner.clone();
                self.inner.client.runtime().spawn(
                    async move {
                        let result = inner.clean_up().await;
                        inner.closed.send_replace(Some(result));
                    }
                    .in_current_span(),
                );
            }
            let mut closed = self.inner.closed.subscribe();
            let outcome = closed.wait_for(Option::is_some).await.ok().and_then(|outcome| outcome.clone());
            outcome.unwrap_or(Ok(()))
        }
        .instrument(span)
        .await
    }

    /// One of the shards to put to (Curator's `getQueue`): a random preferred shard (one that
    /// held at most half the threshold at the last check, or is new), else a random shard.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when not started; [`Error::Closed`] naming the queue path once
    /// closed; [`Error::ZooKeeper`] with [`ErrorCode::NoNode`] naming the queue path when every
    /// shard was deleted and the leader has not made a new one yet.
    pub fn queue(&self) -> Result<Q> {
        match self.state() {
            SharderState::Started => {}
            SharderState::Closed => return Err(Error::Closed { path: self.inner.path.clone() }),
            SharderState::Latent => {
                return Err(Error::invalid_argument("sharder state", "Latent", "start the sharder first"))
            }
        }
        let shards = self.inner.shards.lock();
        let mut rng = rand::thread_rng();
        let pick = shards
            .preferred
            .iter()
            .filter(|path| shards.queues.contains_key(*path))
            .choose(&mut rng)
            .or_else(|| shards.queues.keys().choose(&mut rng));
        match pick {
            Some(path) => Ok(shards.queues[path].clone()),
            None => Err(Error::code_on(&self.inner.path, ErrorCode::NoNode)),
        }
    }

    /// How many shards this instance manages (Curator's `getShardQty`).
    pub fn shard_count(&self) -> usize {
        self.inner.shards.lock().queues.len()
    }

    /// The shard paths this instance manages, sorted (Curator's `getQueuePaths`).
    pub fn queue_paths(&self) -> Vec<String> {
        self.inner.shards.lock().queues.keys().cloned().collect()
    }

    /// Why the last check of the shards failed (a ZooKeeper error, or the allocator's for a
    /// shard to adopt); `None` until one fails, and again once one succeeds. Each failure is
    /// also logged (`warn`); the loop goes on.
    pub fn check_errors(&self) -> watch::Receiver<Option<Error>> {
        self.inner.check_error.subscribe()
    }
}

impl<Q: ShardQueue> Drop for QueueSharder<Q> {
    /// Stops the check loop (it ends at its next wake-up, or once the check it is making
    /// finished, on the client's runtime) and closes the shards' queue objects in the background
    /// (ending the consumers the allocator started); the latch goes with the last reference (its
    /// node deleted in the background). Never panics, with or without a runtime.
    fn drop(&mut self) {
        self.inner.state.send_replace(SharderState::Closed);
        let queues = self.inner.shards.lock().retire();
        close_in_background(&self.inner.client, queues);
    }
}

/// Puts a sharder whose start did not finish (failed or cancelled) back to unstarted: the queue
/// objects it allocated are closed in the background.
struct UndoStart<'a, Q: ShardQueue>(Option<&'a Inner<Q>>);

impl<Q: ShardQueue> Drop for UndoStart<'_, Q> {
    fn drop(&mut self) {
        if let Some(inner) = self.0.take() {
            inner.state.send_if_modified(|state| {
                let undo = *state == SharderState::Started;
                if undo {
                    *state = SharderState::Latent;
                }
                undo
            });
            let queues = inner.shards.lock().take_queues();
            close_in_background(&inner.client, queues);
        }
    }
}

impl<Q: ShardQueue> Inner<Q> {
    /// Makes the queue path as a container (Curator's `createContainers`).
    async fn ensure_queue_path(&self) -> Result<()> {
        match self.client.create(&self.path).mode(CreateMode::Container).creating_parent_containers_if_needed().await {
            Ok(_) => Ok(()),
            Err(e) if e.is(ErrorCode::NodeExists) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The shard paths under the queue path (none when the path is gone: a container whose
    /// shards were all deleted).
    async fn list_shards(&self) -> Result<Vec<String>> {
        let children = match self.client.get_children(&self.path).await {
            Ok(children) => children,
            Err(e) if e.is(ErrorCode::NoNode) => Vec::new(),
            Err(e) => return Err(e),
        };
        let mut shards: Vec<String> = children
            .into_iter()
            .filter(|name| name.starts_with(SHARD_PREFIX))
            .map(|name| paths::join(&self.path, &name))
            .collect();
        shards.sort();
        Ok(shards)
    }

    /// Manages `shard` (from now preferred) unless it already is (or the sharder is closed).
    fn adopt(&self, shard: &str) -> Result<()> {
        {
            let shards = self.shards.lock();
            if shards.retired || shards.queues.contains_key(shard) {
                return Ok(());
            }
        }
        let queue = Unmanaged { client: &self.client, queue: Some((self.allocate)(&self.client, shard)?) };
        let mut shards = self.shards.lock();
        // Adopted meanwhile, or the sharder closed: `queue` is closed when dropped.
        if !shards.retired && !shards.queues.contains_key(shard) {
            debug!(shard, "adopting a queue shard");
            shards.queues.insert(shard.to_string(), queue.take());
            shards.preferred.insert(shard.to_string());
        }
        Ok(())
    }

    /// Makes a new shard `queue-<random UUID>` (a PERSISTENT node, as Curator's queue's start
    /// makes it) and manages it.
    async fn add_shard(&self) -> Result<String> {
        let shard = paths::join(&self.path, &format!("{SHARD_PREFIX}{}", uuid::Uuid::new_v4()));
        // The allocator first: a refused queue makes no node. Until managed, the queue is closed
        // if this call fails or is dropped (a cancelled start).
        let queue = Unmanaged { client: &self.client, queue: Some((self.allocate)(&self.client, &shard)?) };
        let made = self.client.create(&shard).mode(CreateMode::Persistent).creating_parent_containers_if_needed().await;
        match made {
            Ok(_) => {}
            // A create sent again after a lost reply.
            Err(e) if e.is(ErrorCode::NodeExists) => {}
            Err(e) => return Err(e),
        }
        let mut shards = self.shards.lock();
        if shards.retired {
            // Closed meanwhile: the shard stays (as every shard does), its queue is closed.
            return Err(Error::Closed { path: self.path.clone() });
        }
        shards.queues.insert(shard.clone(), queue.take());
        shards.preferred.insert(shard.clone());
        Ok(shard)
    }

    /// One look at the shards (Curator's `checkThreshold`).
    async fn check(&self) -> Result<()> {
        let listed = self.list_shards().await?;
        let threshold = self.policies.new_queue_threshold;
        let mut present = BTreeSet::new();
        let mut full: Option<(String, usize)> = None;
        let mut errors = Vec::new();
        for shard in listed {
            // Counted before adopted: a shard deleted since the listing is skipped.
            let Some(stat) = self.client.exists(&shard).await? else {
                continue;
            };
            present.insert(shard.clone());
            if let Err(e) = self.adopt(&shard) {
                warn!(shard = %shard, error = %e, "the allocator refused a queue shard");
                errors.push(e);
                continue;
            }
            let items = usize::try_from(stat.num_children).unwrap_or(0);
            let mut shards = self.shards.lock();
            if items >= threshold {
                shards.preferred.remove(&shard);
                full = Some((shard, items));
            } else if items <= threshold / 2 {
                shards.preferred.insert(shard);
            }
        }
        let gone: Vec<(String, Q)> = {
            let mut shards = self.shards.lock();
            let gone_paths: Vec<String> = shards.queues.keys().filter(|p| !present.contains(*p)).cloned().collect();
            gone_paths
                .into_iter()
                .filter_map(|path| {
                    shards.preferred.remove(&path);
                    shards.queues.remove(&path).map(|queue| (path, queue))
                })
                .collect()
        };
        for (path, queue) in gone {
            info!(shard = %path, "a queue shard was deleted: dropped");
            queue.close_shard().await;
        }
        // A sharder closed during this check adds no shard.
        if self.latch.has_leadership() && *self.state.borrow() == SharderState::Started {
            let count = self.shards.lock().queues.len();
            if count == 0 {
                let shard = self.add_shard().await?;
                info!(shard = %shard, "every queue shard was deleted: added one");
            } else if let Some((shard, items)) = full {
                if count < self.policies.max_queues {
                    let added = self.add_shard().await?;
                    info!(shard = %shard, items, threshold, added = %added, "a queue shard reached the threshold: added a shard");
                } else {
                    warn!(
                        shard = %shard, items, max_queues = self.policies.max_queues,
                        "a queue shard reached the threshold but there are max_queues shards: consider raising it"
                    );
                }
            }
        }
        Error::from_many(errors)
    }

    /// `close`'s work: waits for the loop's end (a check it was making finishes first), closes
    /// the shards' queue objects and the latch.
    async fn clean_up(&self) -> Result<()> {
        let task = self.task.lock().take();
        if let Some(task) = task {
            // The loop ends on the state change; a panicked loop has nothing to clean.
            let _ = task.await;
        }
        let queues = self.shards.lock().retire();
        let closing: Vec<_> = queues
            .into_iter()
            .map(|queue| self.client.runtime().spawn(async move { queue.close_shard().await }))
            .collect();
        for closed in closing {
            let _ = closed.await;
        }
        self.latch.close().await
    }
}

/// The check loop: every interval, one check, until the sharder is closed or dropped. Holds the
/// sharder only during a check. A check once begun is not cancelled (it would drop a queue it
/// allocated, or one it was closing, half done): `close` waits for it, and what it allocates after
/// the sharder closed is closed at once.
async fn check_loop<Q: ShardQueue>(
    sharder: Weak<Inner<Q>>,
    mut state: watch::Receiver<SharderState>,
    policies: QueueSharderPolicies,
) {
    let is_closed = |state: &SharderState| *state == SharderState::Closed;
    loop {
        tokio::select! {
            _ = state.wait_for(is_closed) => return,
            _ = tokio::time::sleep(policies.threshold_check) => {}
        }
        let Some(inner) = sharder.upgrade() else {
            return;
        };
        let outcome = inner.check().await;
        match outcome {
            Ok(()) => {
                inner.check_error.send_if_modified(|error| error.take().is_some());
            }
            Err(e) => {
                warn!(error = %e, "checking the queue shards failed; checking again in {:?}", policies.threshold_check);
                inner.check_error.send_replace(Some(e));
            }
        }
    }
}
