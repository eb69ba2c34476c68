//! The cached nodes of a [`CuratorCache`](super::CuratorCache) and everything that must change
//! together with them under one lock: the subscribers (so that each sees every change, in order,
//! starting from a consistent copy), the latest value of the root, the unreadable paths.
//!
//! Each subscriber has a bounded queue ([`Subscriber`]): a subscriber that falls more than the
//! bound behind loses its queued events at once (memory is freed, nothing more is queued for it)
//! and, when it reads again, is told how many it missed and re-primed from the tree (taken under
//! the tree's lock, so that it continues exactly where the replay ends).

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ops::Bound;
use std::sync::Arc;
use std::task::Waker;

use parking_lot::{Mutex, RwLock};
use tokio::sync::watch;

use super::{CacheEntry, CacheEvent, CacheMode, CacheState};
use crate::error::Error;
use crate::framework::Stat;

/// A cached entry ordered and looked up by its path (`BTreeSet<Node>` finds it by `&str`): the
/// path is stored once, inside the entry.
#[derive(Clone)]
pub(super) struct Node(pub(super) CacheEntry);

impl PartialEq for Node {
    fn eq(&self, other: &Node) -> bool {
        self.0.path() == other.0.path()
    }
}

impl Eq for Node {}

impl PartialOrd for Node {
    fn partial_cmp(&self, other: &Node) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Node {
    fn cmp(&self, other: &Node) -> Ordering {
        self.0.path().cmp(other.0.path())
    }
}

impl Borrow<str> for Node {
    fn borrow(&self) -> &str {
        self.0.path()
    }
}

/// The cached nodes strictly below `path` (its descendants), in path order: the keys from `path/`
/// up to `path0` (`'0'` follows `'/'`).
fn range_below<'a>(nodes: &'a BTreeSet<Node>, path: &str) -> std::collections::btree_set::Range<'a, Node> {
    let (lo, hi) =
        if path == "/" { ("/".to_string(), "0".to_string()) } else { (format!("{path}/"), format!("{path}0")) };
    // The range keeps no borrow of its bounds.
    nodes.range::<str, _>((Bound::Excluded(lo.as_str()), Bound::Excluded(hi.as_str())))
}

struct Tree {
    nodes: BTreeSet<Node>,
    subscribers: Vec<Arc<Subscriber>>,
    /// The events of the change being applied, handed to the subscribers once the sink published
    /// it ([`Shared::publish`]).
    unpublished: Vec<CacheEvent>,
    initialized: bool,
    unreadable: BTreeSet<String>,
    finished: bool,
}

/// A crate-internal follower of a cache's changes, called where they happen rather than through
/// a subscriber's stream: a view built on the cache (`ServiceCache`) is current as soon as the
/// cache is, without a task of its own to wake. Called under the tree's lock, in order; it must
/// be quick and must not call back into the cache.
pub(crate) trait CacheSink: Send + Sync {
    /// One change (every event a subscriber would get, never `Lagged`).
    fn event(&self, event: &CacheEvent);
    /// The changes of one applied read, or of a load, are all in: the time to publish them.
    fn flush(&self);
}

/// What the cache's handle and its task share.
pub(super) struct Shared {
    root: String,
    mode: CacheMode,
    max_depth: usize,
    max_nodes: Option<usize>,
    /// The most events queued per subscriber (at least 1).
    max_buffered_events: usize,
    tree: RwLock<Tree>,
    state: watch::Sender<CacheState>,
    /// The root's latest entry; dropped when the cache finishes, so that waiters on a receiver
    /// wake (`changed()` fails) instead of waiting for a change that can no longer come.
    latest: Mutex<Option<watch::Sender<Option<CacheEntry>>>>,
    /// A receiver of `latest` kept to hand out its last value once the sender is gone.
    last: watch::Receiver<Option<CacheEntry>>,
    error: Mutex<Option<Error>>,
    /// The cache's metrics (`recipe="cache"`).
    metrics: crate::metrics::RecipeLabels,
    /// The nodes this cache last added to the `zk_curator_cache_nodes` gauge.
    reported_nodes: std::sync::atomic::AtomicUsize,
    /// Told every change as it is emitted.
    sink: Option<Arc<dyn CacheSink>>,
}

/// What applying a read found.
pub(super) enum Applied {
    Ok,
    /// The cache would hold more than its `max_nodes`.
    Full(Error),
}

impl Shared {
    pub(super) fn new(
        root: &str,
        mode: CacheMode,
        max_depth: usize,
        max_nodes: Option<usize>,
        max_buffered_events: usize,
    ) -> Shared {
        let (latest, last) = watch::channel(None);
        Shared {
            root: root.to_string(),
            mode,
            max_depth,
            max_nodes,
            max_buffered_events: max_buffered_events.max(1),
            tree: RwLock::new(Tree {
                nodes: BTreeSet::new(),
                subscribers: Vec::new(),
                unpublished: Vec::new(),
                initialized: false,
                unreadable: BTreeSet::new(),
                finished: false,
            }),
            state: watch::channel(CacheState::Loading).0,
            latest: Mutex::new(Some(latest)),
            last,
            error: Mutex::new(None),
            metrics: crate::metrics::RecipeLabels::default(),
            reported_nodes: std::sync::atomic::AtomicUsize::new(0),
            sink: None,
        }
    }

    /// With a sink told every change.
    pub(super) fn with_sink(mut self, sink: Option<Arc<dyn CacheSink>>) -> Shared {
        self.sink = sink;
        self
    }

    /// With the cache's metrics labels.
    pub(super) fn with_metrics(mut self, metrics: crate::metrics::RecipeLabels) -> Shared {
        self.metrics = metrics;
        self
    }

    /// Reports the size of `tree` to the nodes gauge: none once finished (nothing is followed).
    fn report_size(&self, tree: &Tree) {
        let nodes = if tree.finished { 0 } else { tree.nodes.len() };
        self.metrics.cache_size(&self.reported_nodes, nodes);
    }

    pub(super) fn root(&self) -> &str {
        &self.root
    }

    pub(super) fn mode(&self) -> CacheMode {
        self.mode
    }

    pub(super) fn max_depth(&self) -> usize {
        self.max_depth
    }

    /// How many levels below the root `path` is; `None` when it is not in the root's tree.
    pub(super) fn depth_of(&self, path: &str) -> Option<usize> {
        let rest = if self.root == "/" {
            if path == "/" {
                return Some(0);
            }
            path
        } else {
            let rest = path.strip_prefix(self.root.as_str())?;
            if rest.is_empty() {
                return Some(0);
            }
            if !rest.starts_with('/') {
                return None;
            }
            rest
        };
        Some(rest.bytes().filter(|b| *b == b'/').count())
    }

    /// True when `path` belongs in the cache (in the root's tree, not too deep).
    pub(super) fn wants(&self, path: &str) -> bool {
        self.depth_of(path).is_some_and(|d| d <= self.max_depth)
    }

    pub(super) fn entry(&self, path: &str) -> Option<CacheEntry> {
        self.tree.read().nodes.get(path).map(|n| n.0.clone())
    }

    pub(super) fn children(&self, path: &str) -> Vec<String> {
        let tree = self.tree.read();
        let skip = if path == "/" { 1 } else { path.len() + 1 };
        range_below(&tree.nodes, path)
            .map(|n| &n.0.path()[skip..])
            .filter(|rest| !rest.contains('/'))
            .map(str::to_string)
            .collect()
    }

    pub(super) fn snapshot(&self) -> BTreeMap<String, CacheEntry> {
        self.tree.read().nodes.iter().map(|n| (n.0.path().to_string(), n.0.clone())).collect()
    }

    pub(super) fn size(&self) -> usize {
        self.tree.read().nodes.len()
    }

    pub(super) fn unreadable(&self) -> Vec<String> {
        self.tree.read().unreadable.iter().cloned().collect()
    }

    pub(super) fn states(&self) -> watch::Receiver<CacheState> {
        self.state.subscribe()
    }

    pub(super) fn latest(&self) -> watch::Receiver<Option<CacheEntry>> {
        match &*self.latest.lock() {
            Some(latest) => latest.subscribe(),
            None => {
                let mut last = self.last.clone();
                last.mark_unchanged();
                last
            }
        }
    }

    pub(super) fn error(&self) -> Option<Error> {
        self.error.lock().clone()
    }

    pub(super) fn is_initialized(&self) -> bool {
        self.tree.read().initialized
    }

    /// A new subscriber, and its priming: a `Created` for every cached node (and `Initialized`
    /// if the first load is in), taken together with the registration so that the subscriber's
    /// queue continues exactly where the priming ends. The priming is not queued (it holds
    /// references to the cached entries, no copies), so it never counts against the bound.
    pub(super) fn subscribe(&self) -> (Arc<Subscriber>, VecDeque<CacheEvent>) {
        let subscriber = Arc::new(Subscriber::new(self.max_buffered_events));
        let mut tree = self.tree.write();
        let priming = Self::priming(&tree);
        if tree.finished {
            subscriber.end();
        } else {
            // Those whose stream was dropped go here too, not only at the next event: a quiet
            // cache whose streams come and go keeps no more than its live ones.
            tree.subscribers.retain(|s| Arc::strong_count(s) > 1);
            tree.subscribers.push(subscriber.clone());
        }
        (subscriber, priming)
    }

    /// Re-primes a subscriber that fell behind: its missed count, and the cache's contents as a
    /// new subscriber's priming; `None` when it has not fallen behind. Under the tree's lock, so
    /// that no event is emitted between the copy and the subscriber's queue.
    pub(super) fn resync(&self, subscriber: &Subscriber) -> Option<(u64, VecDeque<CacheEvent>)> {
        let tree = self.tree.read();
        let missed = subscriber.queue.lock().missed.take()?;
        Some((missed, Self::priming(&tree)))
    }

    fn priming(tree: &Tree) -> VecDeque<CacheEvent> {
        let mut priming: VecDeque<CacheEvent> = tree.nodes.iter().map(|n| CacheEvent::Created(n.0.clone())).collect();
        if tree.initialized {
            priming.push_back(CacheEvent::Initialized);
        }
        priming
    }

    /// Sets the state, unless the cache has finished.
    pub(super) fn set_state(&self, state: CacheState) {
        self.set_state_locked(&self.tree.read(), state);
    }

    /// [`set_state`](Self::set_state) under the tree's lock, taken by the caller.
    fn set_state_locked(&self, tree: &Tree, state: CacheState) {
        if !tree.finished {
            self.state.send_if_modified(|s| std::mem::replace(s, state) != state);
        }
    }

    /// Ends the cache once: its final state (and error), and the end of every subscriber's stream.
    pub(super) fn finish(&self, state: CacheState, error: Option<Error>) {
        let mut tree = self.tree.write();
        if tree.finished {
            return;
        }
        tree.finished = true;
        self.report_size(&tree);
        for subscriber in tree.subscribers.drain(..) {
            subscriber.end();
        }
        self.latest.lock().take();
        if let Some(error) = error {
            *self.error.lock() = Some(error);
        }
        self.state.send_replace(state);
    }

    /// Applies a fresh read of `path`: `Some(entry)` when it exists, `None` when it does not. A
    /// read older than the cached entry is ignored; a missing node takes its cached descendants
    /// with it. A write of the node is announced; a fresher stat alone (its children changed) is
    /// taken quietly.
    pub(super) fn apply(&self, path: &str, read: Option<CacheEntry>) -> Applied {
        let mut tree = self.tree.write();
        let tree = &mut *tree;
        match read {
            Some(new) => {
                tree.unreadable.remove(path);
                match tree.nodes.get(path).map(|n| n.0.clone()) {
                    Some(old) if new.read_before(&old) || old.same_state(&new) => {}
                    Some(old) if old.written_apart(&new) => {
                        tree.nodes.replace(Node(new.clone()));
                        let data_changed = old.data() != new.data();
                        self.emit(tree, CacheEvent::Changed { old, new, data_changed });
                    }
                    Some(_) => self.refresh_quietly(tree, new),
                    None => {
                        if let Some(max) = self.max_nodes {
                            if tree.nodes.len() >= max {
                                return Applied::Full(self.full(max));
                            }
                        }
                        tree.nodes.insert(Node(new.clone()));
                        self.emit(tree, CacheEvent::Created(new));
                    }
                }
            }
            None => {
                tree.unreadable.remove(path);
                let gone: Vec<Node> = range_below(&tree.nodes, path).cloned().collect();
                // Deepest first, as ZooKeeper deletes them.
                for node in gone.into_iter().rev() {
                    tree.nodes.remove(node.0.path());
                    self.emit(tree, CacheEvent::Deleted(node.0));
                }
                if let Some(node) = tree.nodes.take(path) {
                    self.emit(tree, CacheEvent::Deleted(node.0));
                }
            }
        }
        self.publish(tree);
        Applied::Ok
    }

    /// The changes so far are all in: tells the sink, then hands the events to the subscribers,
    /// so that a subscriber handed a change finds it in the sink's view too (the instance of a
    /// `ServiceCacheEvent::Added` is in `ServiceCache::instances`).
    fn publish(&self, tree: &mut Tree) {
        if let Some(sink) = &self.sink {
            sink.flush();
        }
        if tree.unpublished.is_empty() {
            return;
        }
        let mut to_wake = Vec::new();
        let Tree { subscribers, unpublished, .. } = tree;
        for event in unpublished.drain(..) {
            // A subscriber whose stream was dropped is only referenced here.
            subscribers.retain(|s| Arc::strong_count(s) > 1 && s.push(&event, &mut to_wake));
        }
        for waker in to_wake {
            waker.wake();
        }
    }

    /// Applies a fresh stat of `path` (read because its children changed): taken quietly when it
    /// is of the cached write of the node and not older. Another write (or node) is left to the
    /// read its watch event brings (ZooKeeper delivers the event before the reply that shows the
    /// write, so it is queued already).
    pub(super) fn apply_stat(&self, path: &str, stat: Stat) {
        let mut tree = self.tree.write();
        let tree = &mut *tree;
        let Some(old) = tree.nodes.get(path).map(|n| n.0.clone()) else { return };
        let same_write = old.stat().mzxid == stat.mzxid && old.stat().czxid == stat.czxid;
        if !same_write || old.stat() == &stat {
            return;
        }
        let new = old.with_stat(stat);
        if !new.read_before(&old) {
            self.refresh_quietly(tree, new);
        }
    }

    /// Replaces a cached entry by one of the same write with another stat, without an event (and
    /// without waking the root's latest-value receivers, whose `borrow()` shows it).
    fn refresh_quietly(&self, tree: &mut Tree, new: CacheEntry) {
        if new.path() == self.root {
            if let Some(sender) = &*self.latest.lock() {
                sender.send_if_modified(|latest| {
                    *latest = Some(new.clone());
                    false
                });
            }
        }
        tree.nodes.replace(Node(new));
    }

    /// Notes that `path` could not be read (`NoAuth`): it is dropped from the cache (with what is
    /// below it) and listed as unreadable.
    pub(super) fn mark_unreadable(&self, path: &str) {
        let _ = self.apply(path, None);
        self.tree.write().unreadable.insert(path.to_string());
    }

    /// Replaces the contents with a full load (`loaded`, sorted by path; `unreadable` the paths
    /// it could not read), emitting the net difference, then `Initialized` the first time; the
    /// cache is `Synced` from then on.
    pub(super) fn replace(&self, loaded: Vec<CacheEntry>, unreadable: BTreeSet<String>) {
        let mut guard = self.tree.write();
        let tree = &mut *guard;
        if tree.initialized {
            self.metrics.cache_resync();
        }
        let old: Vec<CacheEntry> = tree.nodes.iter().map(|n| n.0.clone()).collect();
        let mut events = Vec::new();
        let mut restated = Vec::new();
        let (mut i, mut j) = (0, 0);
        while i < old.len() || j < loaded.len() {
            let order = match (old.get(i), loaded.get(j)) {
                (Some(o), Some(n)) => o.path().cmp(n.path()),
                (Some(_), None) => Ordering::Less,
                _ => Ordering::Greater,
            };
            match order {
                Ordering::Less => {
                    events.push(CacheEvent::Deleted(old[i].clone()));
                    i += 1;
                }
                Ordering::Greater => {
                    events.push(CacheEvent::Created(loaded[j].clone()));
                    j += 1;
                }
                Ordering::Equal => {
                    let (old, new) = (&old[i], &loaded[j]);
                    if old.written_apart(new) {
                        let data_changed = old.data() != new.data();
                        events.push(CacheEvent::Changed { old: old.clone(), new: new.clone(), data_changed });
                    } else if !old.same_state(new) {
                        // Only the stat moved (children or ACL changed): no event.
                        restated.push(new.clone());
                    }
                    i += 1;
                    j += 1;
                }
            }
        }
        // Deletions deepest first (children before their parent), creations parents first.
        let (mut deleted, rest): (Vec<_>, Vec<_>) =
            events.into_iter().partition(|e| matches!(e, CacheEvent::Deleted(_)));
        deleted.reverse();
        let unchanged = deleted.is_empty() && rest.is_empty() && restated.is_empty();
        if !unchanged {
            tree.nodes = loaded.into_iter().map(Node).collect();
        }
        if let Some(root) = restated.into_iter().find(|e| e.path() == self.root) {
            self.refresh_quietly(tree, root);
        }
        for event in deleted.into_iter().chain(rest) {
            self.emit(tree, event);
        }
        tree.unreadable = unreadable;
        self.report_size(tree);
        if !tree.initialized {
            tree.initialized = true;
            self.emit(tree, CacheEvent::Initialized);
        }
        // Synced with the load, before its events are handed out: a subscriber handed
        // `Initialized` (or a resync's changes) reads `state()` as `Synced`.
        self.set_state_locked(tree, CacheState::Synced);
        self.publish(tree);
    }

    fn full(&self, max: usize) -> Error {
        Error::LimitExceeded { path: self.root.clone(), what: "nodes in the cache", limit: max }
    }

    /// The error for a load of more than `max_nodes`, if the bound is set and `count` exceeds it.
    pub(super) fn check_size(&self, count: usize) -> Result<(), Error> {
        match self.max_nodes {
            Some(max) if count > max => Err(self.full(max)),
            _ => Ok(()),
        }
    }

    /// Tells `event` to the sink and, for the root, to the latest-value receivers; queues it for
    /// the subscribers ([`publish`](Self::publish) sends it).
    fn emit(&self, tree: &mut Tree, event: CacheEvent) {
        let applied = match &event {
            CacheEvent::Created(_) => Some("created"),
            CacheEvent::Changed { .. } => Some("changed"),
            CacheEvent::Deleted(_) => Some("deleted"),
            _ => None,
        };
        if let Some(applied) = applied {
            self.metrics.cache_event(applied);
            self.report_size(tree);
        }
        if event.path() == Some(self.root.as_str()) {
            let latest = match &event {
                CacheEvent::Created(e) | CacheEvent::Changed { new: e, .. } => Some(e.clone()),
                _ => None,
            };
            if let Some(sender) = &*self.latest.lock() {
                sender.send_replace(latest);
            }
        }
        if let Some(sink) = &self.sink {
            sink.event(&event);
        }
        if !tree.subscribers.is_empty() {
            tree.unpublished.push(event);
        }
    }
}

/// One subscriber's queue of events, bounded.
pub(super) struct Subscriber {
    queue: Mutex<Queue>,
    capacity: usize,
}

struct Queue {
    events: VecDeque<CacheEvent>,
    /// Set once the queue overflowed: the events dropped since (the queued ones included), until
    /// the subscriber is re-primed.
    missed: Option<u64>,
    /// No more events will come (the cache closed or failed).
    ended: bool,
    waker: Option<Waker>,
}

/// What a subscriber's queue has for a reader now.
pub(super) enum Pending {
    Event(CacheEvent),
    /// It fell behind: re-prime it ([`Shared::resync`]).
    Lagged,
    Ended,
    Empty,
}

impl Subscriber {
    fn new(capacity: usize) -> Subscriber {
        Subscriber {
            queue: Mutex::new(Queue { events: VecDeque::new(), missed: None, ended: false, waker: None }),
            capacity,
        }
    }

    /// Queues `event`, or counts it as missed when the queue is full (dropping the queued events
    /// too: the re-priming after the lag notice supersedes them); a waiting reader's waker goes to
    /// `to_wake`. True to keep the subscriber, false once its stream is gone.
    fn push(&self, event: &CacheEvent, to_wake: &mut Vec<Waker>) -> bool {
        let mut queue = self.queue.lock();
        if queue.ended {
            // Released: its stream was dropped as the event was being sent.
            return false;
        }
        if let Some(missed) = &mut queue.missed {
            *missed += 1;
            return true;
        }
        if queue.events.len() >= self.capacity {
            let dropped = queue.events.len() as u64 + 1;
            queue.events = VecDeque::new();
            queue.missed = Some(dropped);
        } else {
            queue.events.push_back(event.clone());
        }
        to_wake.extend(queue.waker.take());
        true
    }

    /// Its stream is dropped: frees the queued events now (the cache drops the subscriber itself
    /// at its next event or subscription).
    pub(super) fn release(&self) {
        let mut queue = self.queue.lock();
        queue.ended = true;
        queue.missed = None;
        queue.waker = None;
        let events = std::mem::take(&mut queue.events);
        drop(queue);
        drop(events);
    }

    fn end(&self) {
        let mut queue = self.queue.lock();
        queue.ended = true;
        let waker = queue.waker.take();
        drop(queue);
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// The next queued event (or lag, or end); registers `waker` when there is none.
    pub(super) fn pop(&self, waker: Option<&Waker>) -> Pending {
        let mut queue = self.queue.lock();
        if let Some(event) = queue.events.pop_front() {
            return Pending::Event(event);
        }
        if queue.missed.is_some() {
            return Pending::Lagged;
        }
        if queue.ended {
            return Pending::Ended;
        }
        if let Some(waker) = waker {
            if !queue.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
                queue.waker = Some(waker.clone());
            }
        }
        Pending::Empty
    }

    /// The number of events queued now.
    pub(super) fn len(&self) -> usize {
        self.queue.lock().events.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cache that hears nothing keeps no subscriber whose stream was dropped: streams made and
    /// dropped by the thousand (one per request, say) cost nothing once gone.
    #[test]
    fn dropped_subscribers_of_a_quiet_cache_are_not_kept() {
        let shared = Shared::new("/quiet", CacheMode::Tree, usize::MAX, None, 16);
        let kept = shared.subscribe().0;
        for _ in 0..1000 {
            drop(shared.subscribe());
        }
        assert_eq!(shared.tree.read().subscribers.len(), 2, "the live subscriber and the last one made");
        drop(kept);
    }

    /// A dropped stream's queued events are freed with it, not at the cache's next event.
    #[test]
    fn a_dropped_streams_queue_is_freed_at_once() {
        let shared = Arc::new(Shared::new("/quiet", CacheMode::Tree, usize::MAX, None, 16));
        let (subscriber, replay) = shared.subscribe();
        let stream = super::super::CacheEventStream { shared: shared.clone(), subscriber, replay };
        let entry = CacheEntry::new("/quiet/child", vec![0; 1024], Stat::default());
        let _ = shared.apply("/quiet/child", Some(entry.clone()));
        drop(stream);
        shared.tree.write().nodes.clear();
        assert_eq!(Arc::strong_count(&entry.0), 1, "no copy of the entry is left anywhere");
    }

    /// An entry of `path` written at zxid `z`.
    fn written(path: &str, z: i64) -> CacheEntry {
        CacheEntry::new(path, z.to_le_bytes().to_vec(), Stat { czxid: z, mzxid: z, pzxid: z, ..Stat::default() })
    }

    /// Everything queued for `subscriber` now, its priming first.
    fn drain(subscriber: &Subscriber, priming: VecDeque<CacheEvent>) -> Vec<CacheEvent> {
        let mut events: Vec<CacheEvent> = priming.into();
        while let Pending::Event(event) = subscriber.pop(None) {
            events.push(event);
        }
        events
    }

    /// A subscriber made while changes are applied from another thread continues exactly where its
    /// priming ends: folding priming and events, every `Created` is of an absent path, every
    /// `Changed` and `Deleted` of a present one, and the result is the tree.
    #[test]
    fn a_subscriber_made_while_changes_are_applied_gets_each_change_once_after_its_priming() {
        let shared = Arc::new(Shared::new("/r", CacheMode::Tree, usize::MAX, None, usize::MAX));
        shared.replace(Vec::new(), BTreeSet::new());
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writer = {
            let (shared, stop) = (shared.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut z = 0i64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    z += 1;
                    let path = format!("/r/n{}", z % 7);
                    // Creates, sets and deletes of a few paths, in turn.
                    let read = (z % 3 != 0).then(|| written(&path, z));
                    let _ = shared.apply(&path, read);
                }
                z
            })
        };
        let mut subscribers = Vec::new();
        for _ in 0..200 {
            subscribers.push(shared.subscribe());
            std::thread::sleep(std::time::Duration::from_micros(20));
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let applied = writer.join().unwrap();
        assert!(applied > 200, "changes applied while subscribers were made: {applied}");
        let tree: BTreeSet<String> = shared.snapshot().into_keys().collect();
        for (n, (subscriber, priming)) in subscribers.into_iter().enumerate() {
            let mut folded = BTreeSet::new();
            for event in drain(&subscriber, priming) {
                match &event {
                    CacheEvent::Created(e) => assert!(folded.insert(e.path().to_string()), "#{n}: {event:?} twice"),
                    CacheEvent::Changed { new, .. } => assert!(folded.contains(new.path()), "#{n}: {event:?} of none"),
                    CacheEvent::Deleted(e) => assert!(folded.remove(e.path()), "#{n}: {event:?} of none"),
                    CacheEvent::Initialized => {}
                    CacheEvent::Lagged { .. } => panic!("#{n}: lagged with no bound"),
                }
            }
            assert_eq!(folded, tree, "subscriber #{n} folds to the tree");
        }
    }

    /// A load of more events than the bound: the subscriber is told it lagged by all of them, then
    /// replayed the tree once, and nothing else is left for it.
    #[test]
    fn a_load_of_more_events_than_the_bound_is_lagged_once_then_replayed_as_the_tree() {
        let shared = Arc::new(Shared::new("/r", CacheMode::Tree, usize::MAX, None, 8));
        let (subscriber, replay) = shared.subscribe();
        let mut stream = super::super::CacheEventStream { shared: shared.clone(), subscriber, replay };
        let loaded: Vec<CacheEntry> = (0..100).map(|k| written(&format!("/r/n{k:03}"), k + 1)).collect();
        shared.replace(loaded.clone(), BTreeSet::new());
        assert_eq!(stream.try_next(), Some(CacheEvent::Lagged { missed: 101 }), "100 Created and Initialized");
        let replay: Vec<CacheEvent> = std::iter::from_fn(|| stream.try_next()).collect();
        let expected: Vec<CacheEvent> =
            loaded.into_iter().map(CacheEvent::Created).chain([CacheEvent::Initialized]).collect();
        assert_eq!(replay, expected);
        assert!(shared.tree.read().unpublished.is_empty(), "nothing left queued for publishing");
    }

    /// A cache that finished hands out what was published before, then ends: a change applied
    /// after (by a task still running as it was stopped) reaches no stream.
    #[test]
    fn a_finished_caches_streams_end_after_what_was_published_before() {
        let shared = Arc::new(Shared::new("/r", CacheMode::Tree, usize::MAX, None, 16));
        let (subscriber, replay) = shared.subscribe();
        let mut stream = super::super::CacheEventStream { shared: shared.clone(), subscriber, replay };
        let before = written("/r/before", 1);
        let _ = shared.apply("/r/before", Some(before.clone()));
        shared.finish(CacheState::Closed, None);
        let _ = shared.apply("/r/after", Some(written("/r/after", 2)));
        assert_eq!(stream.try_next(), Some(CacheEvent::Created(before)));
        assert_eq!(stream.try_next(), None);
        assert!(matches!(stream.subscriber.pop(None), Pending::Ended), "the stream ended");
        assert!(shared.tree.read().unpublished.is_empty(), "nothing left queued for publishing");
    }
}
