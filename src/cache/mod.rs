//! Caches (Curator's `recipes/cache`): [`CuratorCache`] (Curator's `CuratorCache`), a local copy of
//! a node, its children or a whole tree ([`CacheMode`]), kept current by one persistent (recursive)
//! watch and re-read after every gap, so that it always converges to the server.
//!
//! Start from [`CuratorCache::builder`] ([`CuratorCacheBuilder`]); read the [`CacheEntry`]s, follow
//! its [`CacheState`], and its changes as [`CacheEvent`]s on a [`CacheEventStream`].
//!
//! ```no_run
//! use zk_curator::cache::{CacheEvent, CuratorCache};
//!
//! # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
//! let cache = CuratorCache::builder(&client, "/config").start()?;
//! let mut events = cache.events();
//! while let Some(event) = events.next().await {
//!     if let CacheEvent::Changed { new, data_changed: true, .. } = event {
//!         println!("reload {} from {:?}", new.path(), new.data());
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! Inside: this door (the public types), `tree` (the cached nodes, the diff and the event
//! fan-out, all under one lock) and `sync` (the task that arms the watch, loads the tree and
//! follows the events).

mod sync;
mod tree;

use std::collections::BTreeMap;
use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::watch;

use crate::error::{Error, Result};
use crate::framework::paths::validate_path;
use crate::framework::{CuratorClient, Stat};

pub(crate) use tree::CacheSink;
use tree::{Pending, Shared, Subscriber};

/// The default of [`CuratorCacheBuilder::max_buffered_events`]: a load of up to this many nodes
/// reaches a subscriber that reads only once it is in without a lag; a queue this full takes
/// about 24 bytes an event (plus the entries it keeps alive).
const DEFAULT_MAX_BUFFERED_EVENTS: usize = 10_000;

/// How much of the tree under its path a [`CuratorCache`] holds: Curator's three older caches as
/// one option.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CacheMode {
    /// Only the node itself (Curator's `NodeCache`; `CuratorCacheBridge` with `SINGLE_NODE_CACHE`).
    Node,
    /// The node and its children (Curator's `PathChildrenCache`; the node itself is included).
    Children,
    /// The node and all its descendants (Curator's `TreeCache`/`CuratorCache`), down to
    /// [`max_depth`](CuratorCacheBuilder::max_depth) if set.
    #[default]
    Tree,
}

/// One cached node: its path (as the client sees it, without namespace), data and [`Stat`].
///
/// Cheap to clone (one reference count); the data is shared, never copied, by the cache, its
/// events and its readers (also when only the node's stat is refreshed).
#[derive(Clone)]
pub struct CacheEntry(Arc<EntryInner>);

struct EntryInner {
    path: Box<str>,
    data: Arc<[u8]>,
    stat: Stat,
}

impl CacheEntry {
    pub(crate) fn new(path: &str, data: Vec<u8>, stat: Stat) -> CacheEntry {
        CacheEntry(Arc::new(EntryInner { path: path.into(), data: data.into(), stat }))
    }

    /// The same node and data with a fresher stat (its children changed).
    fn with_stat(&self, stat: Stat) -> CacheEntry {
        CacheEntry(Arc::new(EntryInner { path: self.0.path.clone(), data: self.0.data.clone(), stat }))
    }

    /// The node's path, without the client's namespace.
    pub fn path(&self) -> &str {
        &self.0.path
    }

    /// The node's data.
    pub fn data(&self) -> &[u8] {
        &self.0.data
    }

    /// The node's stat as last read. The cache re-reads a node's stat when one of its children is
    /// created or deleted, so that once writes stop it equals the server's, child counters
    /// (`num_children`, `cversion`, `pzxid`) included; only `aversion` (an ACL change, which no
    /// watch reports) waits for the next re-read of the node.
    pub fn stat(&self) -> &Stat {
        &self.0.stat
    }

    /// The node's name: the last segment of its path (`""` for `/`).
    pub fn name(&self) -> &str {
        self.path().rsplit('/').next().unwrap_or("")
    }

    /// True when both entries describe the same state of the node (same stat and data).
    fn same_state(&self, other: &CacheEntry) -> bool {
        self.0.stat == other.0.stat && self.0.data == other.0.data
    }

    /// True when `other` is another write of the node than `self`: another `mzxid` (a set, also of
    /// the same data), another node at the path (`czxid`), or other data. A change of the node's
    /// children (or ACL) alone is not a write.
    fn written_apart(&self, other: &CacheEntry) -> bool {
        let (a, b) = (&self.0.stat, &other.0.stat);
        a.mzxid != b.mzxid || a.czxid != b.czxid || self.0.data != other.0.data
    }

    /// True when `self` was read before `other`, judging by their stats (a stat read later is
    /// never behind in either zxid); entries read at the same point compare as not older.
    fn read_before(&self, other: &CacheEntry) -> bool {
        let (a, b) = (&self.0.stat, &other.0.stat);
        a.mzxid < b.mzxid || a.pzxid < b.pzxid
    }
}

impl fmt::Debug for CacheEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CacheEntry")
            .field("path", &self.path())
            .field("data_len", &self.data().len())
            .field("version", &self.stat().version)
            .field("mzxid", &self.stat().mzxid)
            .finish()
    }
}

impl PartialEq for CacheEntry {
    fn eq(&self, other: &CacheEntry) -> bool {
        self.path() == other.path() && self.same_state(other)
    }
}

impl Eq for CacheEntry {}

/// A change the cache saw, as [`CuratorCache::events`] yields them.
///
/// Every event is a write on the server: a node created, written (`setData`, also of the same
/// bytes: [`Changed`](CacheEvent::Changed) says whether the data changed) or deleted. A node's
/// children being created or deleted is announced by the children's own events, not by a
/// `Changed` of the parent, whose cached stat (`num_children`, `cversion`, `pzxid`) the cache
/// refreshes quietly; neither does an ACL change (`aversion`) make an event.
///
/// Applying a subscriber's events in order to an empty map (insert on `Created`, replace on
/// `Changed`, remove on `Deleted`) always gives the cache's nodes, with their data and their
/// writes' stat (`mzxid`, `version`, …), as of the last event: a subscriber starts with a
/// `Created` for each node already cached (and `Initialized` if the first load is done), and after
/// a gap (disconnect, new session) the cache reports the net difference it found — nothing for a
/// node that was not written meanwhile.
///
/// A subscriber that falls more than
/// [`max_buffered_events`](CuratorCacheBuilder::max_buffered_events) behind gets
/// [`Lagged`](CacheEvent::Lagged) and, right after it, the cache's contents again as a new
/// subscriber's stream begins: clear the map on `Lagged`, and the rule above holds again.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CacheEvent {
    /// A node appeared in the cache.
    Created(CacheEntry),
    /// A cached node was written: its data, or at least its version (a `setData` of the same
    /// bytes), changed; or it was deleted and created again during a gap.
    ///
    /// A config reader reloads only when [`data_changed`](CacheEvent::Changed::data_changed):
    ///
    /// ```no_run
    /// # use zk_curator::cache::CacheEvent;
    /// # async fn demo(cache: zk_curator::cache::CuratorCache) {
    /// let mut events = cache.events();
    /// while let Some(event) = events.next().await {
    ///     if let CacheEvent::Changed { new, data_changed: true, .. } = event {
    ///         println!("reload {} from {:?}", new.path(), new.data());
    ///     }
    /// }
    /// # }
    /// ```
    #[non_exhaustive]
    Changed {
        /// The entry before.
        old: CacheEntry,
        /// The entry now.
        new: CacheEntry,
        /// True when the data differs from `old`'s; false when only the stat does (a write of
        /// the same bytes).
        data_changed: bool,
    },
    /// A node left the cache (deleted on the server).
    Deleted(CacheEntry),
    /// The subscriber's map is complete: after the `Created` events of the cache's first full
    /// load, and at the end of the contents a stream replays (when it starts, and after
    /// [`Lagged`](CacheEvent::Lagged)) once that load is in.
    Initialized,
    /// This subscriber fell more than
    /// [`max_buffered_events`](CuratorCacheBuilder::max_buffered_events) behind and missed
    /// `missed` events (its queued ones were dropped, so that a slow subscriber never holds more
    /// than the bound). The stream goes on with a [`Created`](CacheEvent::Created) for every node
    /// cached now (and [`Initialized`](CacheEvent::Initialized) if the first load is in), taken
    /// atomically with the events that follow: a subscriber that folds events into a map clears it
    /// here, and is in step with the cache again after the replay. (Reading
    /// [`CuratorCache::snapshot`] instead is not in step: events queued after the lag may be
    /// older than the snapshot.)
    ///
    /// ```no_run
    /// # use std::collections::BTreeMap;
    /// # use zk_curator::cache::{CacheEntry, CacheEvent};
    /// # async fn demo(cache: zk_curator::cache::CuratorCache) {
    /// let mut nodes: BTreeMap<String, CacheEntry> = BTreeMap::new();
    /// let mut events = cache.events();
    /// while let Some(event) = events.next().await {
    ///     match event {
    ///         CacheEvent::Created(e) | CacheEvent::Changed { new: e, .. } => {
    ///             nodes.insert(e.path().to_string(), e);
    ///         }
    ///         CacheEvent::Deleted(e) => {
    ///             nodes.remove(e.path());
    ///         }
    ///         CacheEvent::Lagged { missed } => {
    ///             tracing::warn!(missed, "cache subscriber fell behind; replaying the cache");
    ///             nodes.clear();
    ///         }
    ///         _ => {}
    ///     }
    /// }
    /// # }
    /// ```
    Lagged {
        /// How many events this subscriber did not receive.
        missed: u64,
    },
}

impl CacheEvent {
    /// The path the event is about; `None` for [`Initialized`](CacheEvent::Initialized) and
    /// [`Lagged`](CacheEvent::Lagged).
    pub fn path(&self) -> Option<&str> {
        match self {
            CacheEvent::Created(e) | CacheEvent::Deleted(e) => Some(e.path()),
            CacheEvent::Changed { new, .. } => Some(new.path()),
            CacheEvent::Initialized | CacheEvent::Lagged { .. } => None,
        }
    }
}

/// How sure a [`CuratorCache`] is of its contents.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CacheState {
    /// The first load is under way (or waits for a connection); the cache may be incomplete.
    Loading,
    /// The watch is armed and the last load is in: the cache follows the server.
    Synced,
    /// The connection is down: the cache holds what it last knew, which may be stale.
    Suspended,
    /// Back after a gap (reconnect, new session): re-arming the watch and re-reading the tree;
    /// the differences found are being applied.
    Resyncing,
    /// Closed ([`CuratorCache::close`], or its client was closed): no more changes.
    Closed,
    /// Stopped on an error ([`CuratorCache::error`] says which, e.g. [`Error::LimitExceeded`] or a
    /// server without persistent watches); no more changes.
    Failed,
}

impl CacheState {
    /// True for the states after which nothing changes any more.
    pub fn is_terminal(self) -> bool {
        matches!(self, CacheState::Closed | CacheState::Failed)
    }
}

/// Options of a [`CuratorCache`], from [`CuratorCache::builder`].
#[must_use = "a builder does nothing until start()"]
pub struct CuratorCacheBuilder {
    client: CuratorClient,
    path: String,
    mode: CacheMode,
    max_depth: Option<usize>,
    max_nodes: Option<usize>,
    max_buffered_events: usize,
    sink: Option<Arc<dyn CacheSink>>,
}

impl fmt::Debug for CuratorCacheBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CuratorCacheBuilder")
            .field("client", &self.client)
            .field("path", &self.path)
            .field("mode", &self.mode)
            .field("max_depth", &self.max_depth)
            .field("max_nodes", &self.max_nodes)
            .field("max_buffered_events", &self.max_buffered_events)
            .field("sink", &self.sink.is_some())
            .finish()
    }
}

impl CuratorCacheBuilder {
    /// What to cache: the node, its children, or the tree (the default).
    pub fn mode(mut self, mode: CacheMode) -> Self {
        self.mode = mode;
        self
    }

    /// In [`CacheMode::Tree`], cache nodes at most `depth` levels below the path (0: only the
    /// node; 1: also its children; …) — like Curator's `TreeCache.setMaxDepth`: deeper nodes are
    /// simply not cached.
    pub fn max_depth(mut self, depth: usize) -> Self {
        self.max_depth = Some(depth);
        self
    }

    /// Stop with [`Error::LimitExceeded`] (state [`CacheState::Failed`]) rather than hold more
    /// than `nodes` nodes: a bound on memory for trees that may grow without one.
    pub fn max_nodes(mut self, nodes: usize) -> Self {
        self.max_nodes = Some(nodes);
        self
    }

    /// Queue at most `events` events for each subscriber ([`CuratorCache::events`]); default
    /// 10,000 (a load of that many nodes reaches a subscriber that reads only once the load is in
    /// without a lag). A subscriber that falls further behind gets
    /// [`CacheEvent::Lagged`] with the number it missed, then the cache's contents again: a slow
    /// subscriber costs at most this many events of memory, never blocks the cache or another
    /// subscriber, and is in step again after the replay.
    ///
    /// ```no_run
    /// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// let cache = zk_curator::cache::CuratorCache::builder(&client, "/jobs").max_buffered_events(1_000).start()?;
    /// # Ok(()) }
    /// ```
    pub fn max_buffered_events(mut self, events: usize) -> Self {
        self.max_buffered_events = events;
        self
    }

    /// Tells `sink` every change where it is made (crate-internal: a view kept without a task).
    #[cfg(feature = "discovery")]
    pub(crate) fn sink(mut self, sink: Arc<dyn CacheSink>) -> Self {
        self.sink = Some(sink);
        self
    }

    /// Starts the cache: its task arms the watch and loads the tree in the background; see
    /// [`CuratorCache::wait_initialized`].
    ///
    /// Must be called within the client's tokio runtime (it spawns the cache's task there).
    ///
    /// # Errors
    /// [`Error::InvalidPath`] naming the path if it is not a valid ZooKeeper path;
    /// [`Error::InvalidArgument`] for `max_nodes(0)` or `max_buffered_events(0)`;
    /// [`Error::Closed`] when the client is closed.
    /// Failures while running (e.g. a server older than 3.6, which has no persistent watches:
    /// [`ErrorCode::Unimplemented`](crate::ErrorCode::Unimplemented)) are reported through
    /// [`CuratorCache::error`] and [`wait_initialized`](CuratorCache::wait_initialized).
    ///
    /// ```no_run
    /// use zk_curator::CuratorClient;
    /// use zk_curator::cache::{CacheMode, CuratorCache};
    ///
    /// # async fn demo(client: CuratorClient) -> zk_curator::Result<()> {
    /// let services = CuratorCache::builder(&client, "/services").mode(CacheMode::Children).max_nodes(10_000).start()?;
    /// # Ok(()) }
    /// ```
    pub fn start(self) -> Result<CuratorCache> {
        validate_path(&self.path)?;
        if self.client.is_closed() {
            return Err(Error::Closed { path: self.path });
        }
        if self.max_nodes == Some(0) {
            return Err(Error::invalid_argument("max_nodes", 0, "must be at least 1"));
        }
        if self.max_buffered_events == 0 {
            return Err(Error::invalid_argument("max_buffered_events", 0, "must be at least 1"));
        }
        let depth = match self.mode {
            CacheMode::Node => 0,
            CacheMode::Children => 1,
            CacheMode::Tree => self.max_depth.unwrap_or(usize::MAX),
        };
        let metrics = self.client.recipe_labels("cache", &self.path);
        let shared = Arc::new(
            Shared::new(&self.path, self.mode, depth, self.max_nodes, self.max_buffered_events)
                .with_metrics(metrics)
                .with_sink(self.sink),
        );
        let (stop, stopped) = watch::channel(false);
        let ends = EndOnDrop(shared.clone());
        let run = sync::run(shared.clone(), self.client.clone(), stopped);
        let task = self.client.runtime().spawn(async move {
            let _ends = ends;
            run.await;
        });
        let running = Arc::new(Running { shared: shared.clone(), stop, task: Mutex::new(Some(task)) });
        Ok(CuratorCache { shared, running })
    }
}

/// Ends the cache ([`CacheState::Closed`], subscribers' streams ended) when its task's future is
/// dropped without having ended it: the runtime shut down (or the task was aborted) while it ran,
/// and nothing follows the server any more. A no-op after a normal end.
struct EndOnDrop(Arc<Shared>);

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        self.0.finish(CacheState::Closed, None);
    }
}

/// A local copy of a node, its children or a whole tree (Curator's `CuratorCache`, and its
/// `NodeCache`/`PathChildrenCache`/`TreeCache` as [`CacheMode`]s), kept current by one ZooKeeper
/// persistent recursive watch (ZooKeeper ≥ 3.6).
///
/// * **Reads without a round trip**, from any thread: [`entry`](Self::entry),
///   [`children`](Self::children), [`snapshot`](Self::snapshot), [`size`](Self::size).
/// * **Changes** as a stream per subscriber ([`events`](Self::events)), ordered per path, bounded
///   ([`max_buffered_events`](CuratorCacheBuilder::max_buffered_events): a subscriber that falls
///   behind is told how much it missed and gets the contents again), and a
///   latest-value receiver of the cached node itself ([`latest`](Self::latest)) for config readers.
/// * **Always converges** (beyond Curator, whose cache misses what happens during a partition):
///   after a disconnect, a new session, a server restart or a failover it re-arms its watch
///   *first*, then re-reads the tree (after a `sync`) and emits the net difference; once writes
///   stop, it equals the server's tree, every node's stat included (a parent's stat is re-read
///   when its children change). While it cannot be sure it says so ([`state`](Self::state);
///   [`wait_synced`](Self::wait_synced) waits until it is sure again).
/// * **One watch per path and session on ZooKeeper 3.8** (ZOOKEEPER-4466, fixed in 3.9): another
///   watch on the cache's own path set through the same client (a one-shot
///   [`get_data`](CuratorClient::get_data)`(..).watch()`, a recipe watching that node, a cache of
///   it in [`CacheMode::Node`] next to one in another mode) replaces the cache's on the server, which
///   then misses changes until the next reconnect. Give such a cache its own client.
/// * The path need not exist (the cache fills when it appears, empties when it goes, also when the
///   server reaps a container); the cache never creates or deletes anything. A node the client may
///   not read is listed by [`unreadable`](Self::unreadable), not fatal.
///
/// A cheap [`Clone`] shares one cache (one watch, one tree): closing through any clone closes it
/// for all; dropping the last clone stops its task (like [`close`](Self::close), without
/// waiting).
///
/// ```no_run
/// use std::time::Duration;
/// use zk_curator::CuratorClient;
/// use zk_curator::cache::{CacheEvent, CuratorCache};
///
/// # async fn demo(client: CuratorClient) -> zk_curator::Result<()> {
/// let cache = CuratorCache::start(&client, "/config")?;
/// let mut events = cache.events();
/// if !cache.wait_initialized_timeout(Duration::from_secs(10)).await? {
///     eprintln!("/config is still loading; reading what the cache has so far");
/// }
/// if let Some(flag) = cache.entry("/config/feature-x") {
///     println!("feature-x = {:?}", flag.data());
/// }
/// while let Some(event) = events.next().await {
///     if let CacheEvent::Changed { new, .. } = event {
///         println!("{} is now {:?}", new.path(), new.data());
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct CuratorCache {
    shared: Arc<Shared>,
    /// Shared by the clones: dropping the last one stops the cache.
    running: Arc<Running>,
}

/// The cache's task, stopped (and the cache closed) when the last clone of the handle is dropped.
struct Running {
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl CuratorCache {
    /// Options for a cache of `path` (a tree cache unless [`mode`](CuratorCacheBuilder::mode) says
    /// otherwise), as [`CuratorClient::builder`] is: infallible, every option checked by
    /// [`start`](CuratorCacheBuilder::start) (a bad `path` is an [`Error::InvalidPath`] naming it
    /// there).
    pub fn builder(client: &CuratorClient, path: &str) -> CuratorCacheBuilder {
        CuratorCacheBuilder {
            client: client.clone(),
            path: path.to_string(),
            mode: CacheMode::Tree,
            max_depth: None,
            max_nodes: None,
            max_buffered_events: DEFAULT_MAX_BUFFERED_EVENTS,
            sink: None,
        }
    }

    /// Starts a tree cache of `path` with the default options.
    ///
    /// # Errors
    /// As [`builder`](Self::builder) and [`CuratorCacheBuilder::start`].
    pub fn start(client: &CuratorClient, path: &str) -> Result<CuratorCache> {
        Self::builder(client, path).start()
    }

    /// The cached path (without the namespace).
    pub fn path(&self) -> &str {
        self.shared.root()
    }

    /// The mode the cache was started with.
    pub fn mode(&self) -> CacheMode {
        self.shared.mode()
    }

    /// The cached entry of `path`, if the cache holds it.
    pub fn entry(&self, path: &str) -> Option<CacheEntry> {
        self.shared.entry(path)
    }

    /// The names of the cached children of `path`, sorted.
    pub fn children(&self, path: &str) -> Vec<String> {
        self.shared.children(path)
    }

    /// Every cached entry by path.
    pub fn snapshot(&self) -> BTreeMap<String, CacheEntry> {
        self.shared.snapshot()
    }

    /// The number of cached nodes.
    pub fn size(&self) -> usize {
        self.shared.size()
    }

    /// Paths the client may not read (`NoAuth`), as last seen; they are not cached.
    pub fn unreadable(&self) -> Vec<String> {
        self.shared.unreadable()
    }

    /// The cache's state now.
    pub fn state(&self) -> CacheState {
        *self.shared.states().borrow()
    }

    /// A receiver of the cache's state (`changed().await` on it waits for the next one).
    pub fn states(&self) -> watch::Receiver<CacheState> {
        self.shared.states()
    }

    /// Why the cache stopped, once its state is [`CacheState::Failed`].
    pub fn error(&self) -> Option<Error> {
        self.shared.error()
    }

    /// True once the first full load is in.
    pub fn is_initialized(&self) -> bool {
        self.shared.is_initialized()
    }

    /// A new, independent subscriber to the cache's changes. It starts with a
    /// [`Created`](CacheEvent::Created) for every node cached now (and
    /// [`Initialized`](CacheEvent::Initialized) if the first load is in), then follows; see
    /// [`CacheEvent`]. It ends when the cache closes or fails.
    ///
    /// Each subscriber's queue is bounded
    /// ([`max_buffered_events`](CuratorCacheBuilder::max_buffered_events)): one that falls
    /// further behind gets [`CacheEvent::Lagged`] and a replay of the cache (see there); a
    /// dropped stream costs nothing.
    pub fn events(&self) -> CacheEventStream {
        let (subscriber, replay) = self.shared.subscribe();
        CacheEventStream { shared: self.shared.clone(), subscriber, replay }
    }

    /// The cached node itself (the cache's path) as a `tokio::sync::watch` receiver of its latest
    /// entry (`None` while it does not exist) — what a config reader wants. It wakes for the
    /// node's writes (as [`CacheEvent`]s announce them), not when only its children changed
    /// (`borrow()` shows the fresher stat then). Once the cache has
    /// closed or failed, the receiver's `changed()` fails (and `borrow()` keeps the last entry), so
    /// that a waiter wakes instead of waiting forever.
    pub fn latest(&self) -> watch::Receiver<Option<CacheEntry>> {
        self.shared.latest()
    }

    /// Waits until the first full load is in, at most `timeout` (a [`Duration`] or an instant,
    /// see [`Deadline`](crate::Deadline)): `Ok(true)` once it is, `Ok(false)` when the time ran
    /// out first — the call returns then, whatever the connection does.
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits.
    ///
    /// # Errors
    /// The cache's error if it failed; [`Error::Closed`] if it was closed.
    ///
    /// ```no_run
    /// # async fn demo(cache: zk_curator::cache::CuratorCache) -> zk_curator::Result<()> {
    /// if cache.wait_initialized_timeout(std::time::Duration::from_secs(5)).await? {
    ///     println!("{} nodes", cache.size());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn wait_initialized_timeout(&self, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let deadline = timeout.into().instant_from(std::time::Instant::now());
        self.wait_until(deadline, |_| self.shared.is_initialized()).await
    }

    /// Waits until the first full load is in, at most `timeout`; past it,
    /// [`Error::DeadlineExceeded`].
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits.
    ///
    /// # Errors
    /// [`Error::DeadlineExceeded`] when `timeout` passes first; the cache's error if it failed;
    /// [`Error::Closed`] if it was closed.
    #[deprecated(
        note = "use `wait_initialized_timeout`, which returns `Ok(false)` on time-out (the crate's one rule for waits)"
    )]
    pub async fn wait_initialized(&self, timeout: Duration) -> Result<()> {
        let during = "waiting for the first load of the cache of";
        self.deadline_error_if_not(timeout, during, self.wait_initialized_timeout(timeout)).await
    }

    /// Waits until the cache is [`Synced`](CacheState::Synced): its watch armed and its last load
    /// in, at most `timeout` (a [`Duration`] or an instant, see [`Deadline`](crate::Deadline)):
    /// `Ok(true)` once it is, `Ok(false)` when the time ran out first — the call returns then,
    /// whatever the connection does. It returns at once when the cache is synced now; after a gap
    /// (disconnect, new session, server restart) that the cache has noticed, only once it has
    /// re-armed its watch and re-read the tree — then it holds every write made before the gap
    /// ended.
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits.
    ///
    /// # Errors
    /// The cache's error if it failed; [`Error::Closed`] if it was closed.
    ///
    /// ```no_run
    /// # async fn demo(cache: zk_curator::cache::CuratorCache) -> zk_curator::Result<()> {
    /// // Serve from the cache only while it follows the server.
    /// if cache.wait_synced_timeout(std::time::Duration::from_secs(5)).await? {
    ///     let flag = cache.entry("/config/feature-x");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn wait_synced_timeout(&self, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let deadline = timeout.into().instant_from(std::time::Instant::now());
        self.wait_until(deadline, |state| state == CacheState::Synced).await
    }

    /// Waits until the cache is [`Synced`](CacheState::Synced), at most `timeout`; past it,
    /// [`Error::DeadlineExceeded`].
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits.
    ///
    /// # Errors
    /// [`Error::DeadlineExceeded`] when `timeout` passes first; the cache's error if it failed;
    /// [`Error::Closed`] if it was closed.
    #[deprecated(
        note = "use `wait_synced_timeout`, which returns `Ok(false)` on time-out (the crate's one rule for waits)"
    )]
    pub async fn wait_synced(&self, timeout: Duration) -> Result<()> {
        let during = "waiting for a synced cache of";
        self.deadline_error_if_not(timeout, during, self.wait_synced_timeout(timeout)).await
    }

    /// The old shape of the waits: a time-out as [`Error::DeadlineExceeded`].
    async fn deadline_error_if_not(
        &self,
        timeout: Duration,
        during: &'static str,
        wait: impl std::future::Future<Output = Result<bool>>,
    ) -> Result<()> {
        let start = std::time::Instant::now();
        if wait.await? {
            return Ok(());
        }
        Err(Error::DeadlineExceeded {
            path: self.path().to_string(),
            during,
            waited: start.elapsed(),
            timeout: Some(timeout),
        })
    }

    /// Waits until `done` holds (checked on every state): true; or the cache ends (its error); or
    /// `deadline` passes: false.
    async fn wait_until(&self, deadline: std::time::Instant, done: impl Fn(CacheState) -> bool) -> Result<bool> {
        let mut states = self.shared.states();
        loop {
            let state = *states.borrow_and_update();
            if done(state) {
                return Ok(true);
            }
            if state == CacheState::Failed {
                return Err(self.shared.error().unwrap_or(Error::Closed { path: self.path().to_string() }));
            }
            if state == CacheState::Closed {
                return Err(Error::Closed { path: self.path().to_string() });
            }
            match tokio::time::timeout_at(deadline.into(), states.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Err(Error::Closed { path: self.path().to_string() }),
                Err(_) => return Ok(false),
            }
        }
    }

    /// Stops the cache: removes its watch, stops its task, ends its subscribers' streams; the state
    /// becomes [`CacheState::Closed`] (unless it had failed). The cached contents stay readable.
    ///
    /// # Cancel safety
    /// Cancel safe: the stop is requested at the first poll; a dropped call only stops waiting for
    /// the task to end.
    ///
    /// ```no_run
    /// # async fn demo(cache: zk_curator::cache::CuratorCache) {
    /// cache.close().await;
    /// assert!(cache.state().is_terminal());
    /// # }
    /// ```
    pub async fn close(&self) {
        self.running.stop.send_replace(true);
        let task = self.running.task.lock().take();
        if let Some(task) = task {
            let _ = task.await;
        }
        self.shared.finish(CacheState::Closed, None);
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.send_replace(true);
        // Aborting needs no runtime context and never panics; the task's future (and the watch it
        // holds) is dropped by the runtime.
        if let Some(task) = self.task.get_mut().take() {
            task.abort();
        }
        self.shared.finish(CacheState::Closed, None);
    }
}

impl fmt::Debug for CuratorCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CuratorCache")
            .field("path", &self.path())
            .field("mode", &self.mode())
            .field("state", &self.state())
            .field("size", &self.size())
            .finish()
    }
}

/// The changes of a [`CuratorCache`] for one subscriber ([`CuratorCache::events`]), a
/// [`Stream`](futures_core::Stream) of [`CacheEvent`]s: [`next`](Self::next) (the same as
/// `StreamExt::next`) and [`try_next`](Self::try_next).
///
/// Bounded: at most [`max_buffered_events`](CuratorCacheBuilder::max_buffered_events) events wait
/// for the subscriber; past that it gets [`CacheEvent::Lagged`] with the number it missed, then
/// the cache's contents again (see there).
///
/// ```no_run
/// # async fn demo(cache: zk_curator::cache::CuratorCache) {
/// use futures::StreamExt;
///
/// // Only the paths that changed, ten at most.
/// let paths: Vec<String> = cache.events().filter_map(|e| async move { e.path().map(str::to_string) }).take(10).collect().await;
/// # }
/// ```
pub struct CacheEventStream {
    shared: Arc<Shared>,
    subscriber: Arc<Subscriber>,
    /// Events to return before the queue: the contents when the stream started or re-synced.
    replay: std::collections::VecDeque<CacheEvent>,
}

impl CacheEventStream {
    /// The next event; `None` once the cache closed or failed and every event was read.
    ///
    /// # Cancel safety
    /// Cancel safe: an event not yet returned is returned by the next call.
    ///
    /// ```no_run
    /// # async fn demo(cache: zk_curator::cache::CuratorCache) {
    /// let mut events = cache.events();
    /// while let Some(event) = events.next().await {
    ///     println!("{event:?}");
    /// }
    /// # }
    /// ```
    pub async fn next(&mut self) -> Option<CacheEvent> {
        std::future::poll_fn(|cx| self.poll_event(Some(cx))).await
    }

    /// The next event if one is ready, without waiting; `None` when none is (or the stream ended).
    ///
    /// ```no_run
    /// # fn demo(events: &mut zk_curator::cache::CacheEventStream) {
    /// while let Some(event) = events.try_next() {
    ///     println!("{event:?}");
    /// }
    /// # }
    /// ```
    pub fn try_next(&mut self) -> Option<CacheEvent> {
        match self.poll_event(None) {
            Poll::Ready(event) => event,
            Poll::Pending => None,
        }
    }

    fn poll_event(&mut self, cx: Option<&mut Context<'_>>) -> Poll<Option<CacheEvent>> {
        if let Some(event) = self.replay.pop_front() {
            return Poll::Ready(Some(event));
        }
        match self.subscriber.pop(cx.map(|cx| cx.waker())) {
            Pending::Event(event) => Poll::Ready(Some(event)),
            Pending::Lagged => {
                // Only this stream re-primes its subscriber, so the lag is still there.
                let (missed, replay) = self.shared.resync(&self.subscriber).unwrap_or_default();
                self.replay = replay;
                Poll::Ready(Some(CacheEvent::Lagged { missed }))
            }
            Pending::Ended => Poll::Ready(None),
            Pending::Empty => Poll::Pending,
        }
    }
}

impl Drop for CacheEventStream {
    fn drop(&mut self) {
        self.subscriber.release();
    }
}

impl fmt::Debug for CacheEventStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CacheEventStream")
            .field("replaying", &self.replay.len())
            .field("buffered", &self.subscriber.len())
            .finish()
    }
}

impl futures_core::Stream for CacheEventStream {
    type Item = CacheEvent;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<CacheEvent>> {
        self.get_mut().poll_event(Some(cx))
    }
}
