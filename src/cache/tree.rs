//! The cached nodes of a [`CuratorCache`](super::CuratorCache) and everything that must change
//! together with them under one lock: the subscribers (so that each sees every change, in order,
//! starting from a consistent copy), the latest value of the root, the unreadable paths.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use parking_lot::{Mutex, RwLock};
use tokio::sync::{mpsc, watch};

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
    subscribers: Vec<mpsc::UnboundedSender<CacheEvent>>,
    initialized: bool,
    unreadable: BTreeSet<String>,
    finished: bool,
}

/// What the cache's handle and its task share.
pub(super) struct Shared {
    root: String,
    mode: CacheMode,
    max_depth: usize,
    max_nodes: Option<usize>,
    tree: RwLock<Tree>,
    state: watch::Sender<CacheState>,
    /// The root's latest entry; dropped when the cache finishes, so that waiters on a receiver
    /// wake (`changed()` fails) instead of waiting for a change that can no longer come.
    latest: Mutex<Option<watch::Sender<Option<CacheEntry>>>>,
    /// A receiver of `latest` kept to hand out its last value once the sender is gone.
    last: watch::Receiver<Option<CacheEntry>>,
    error: Mutex<Option<Error>>,
}

/// What applying a read found.
pub(super) enum Applied {
    Ok,
    /// The cache would hold more than its `max_nodes`.
    Full(Error),
}

impl Shared {
    pub(super) fn new(root: &str, mode: CacheMode, max_depth: usize, max_nodes: Option<usize>) -> Shared {
        let (latest, last) = watch::channel(None);
        Shared {
            root: root.to_string(),
            mode,
            max_depth,
            max_nodes,
            tree: RwLock::new(Tree {
                nodes: BTreeSet::new(),
                subscribers: Vec::new(),
                initialized: false,
                unreadable: BTreeSet::new(),
                finished: false,
            }),
            state: watch::channel(CacheState::Loading).0,
            latest: Mutex::new(Some(latest)),
            last,
            error: Mutex::new(None),
        }
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

    /// A new subscriber, primed with the current contents.
    pub(super) fn subscribe(&self) -> mpsc::UnboundedReceiver<CacheEvent> {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut tree = self.tree.write();
        for node in &tree.nodes {
            let _ = tx.send(CacheEvent::Created(node.0.clone()));
        }
        if tree.initialized {
            let _ = tx.send(CacheEvent::Initialized);
        }
        if !tree.finished {
            tree.subscribers.push(tx);
        }
        rx
    }

    /// Sets the state, unless the cache has finished.
    pub(super) fn set_state(&self, state: CacheState) {
        let tree = self.tree.read();
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
        tree.subscribers.clear();
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
        Applied::Ok
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
    /// it could not read), emitting the net difference, then `Initialized` the first time.
    pub(super) fn replace(&self, loaded: Vec<CacheEntry>, unreadable: BTreeSet<String>) {
        let mut guard = self.tree.write();
        let tree = &mut *guard;
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
        if !tree.initialized {
            tree.initialized = true;
            self.emit(tree, CacheEvent::Initialized);
        }
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

    /// Sends `event` to every live subscriber and, for the root, to the latest-value receivers.
    fn emit(&self, tree: &mut Tree, event: CacheEvent) {
        if event.path() == Some(self.root.as_str()) {
            let latest = match &event {
                CacheEvent::Created(e) | CacheEvent::Changed { new: e, .. } => Some(e.clone()),
                _ => None,
            };
            if let Some(sender) = &*self.latest.lock() {
                sender.send_replace(latest);
            }
        }
        tree.subscribers.retain(|s| s.send(event.clone()).is_ok());
    }
}
