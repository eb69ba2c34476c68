//! `CuratorCache`: reads, events, modes and bounds (reads_and_events), convergence after faults
//! (convergence), the holes of Curator's caches reproduced (curator_bugs), and a real Curator writer
//! and cache on the same tree (curator_interop), the requests a load sends (load_requests), cached
//! stats and what events announce (stats), and waiting for a synced cache (wait_synced).

mod backpressure;
mod blocking_facade;
mod cancelled_close;
mod convergence;
mod curator_bugs;
mod curator_interop;
mod latest_after_close;
mod load_requests;
mod reads_and_events;
mod runtime_shutdown;
mod stats;
mod wait_synced;
mod watch_cli_huge_timeout;

use std::collections::BTreeMap;
use std::time::Duration;

use zk_curator::cache::{CacheEntry, CacheEvent, CacheEventStream, CacheState, CuratorCache};

/// A node as compared between the cache and the server: its data, and the stat fields that a
/// write of the node (`mzxid`, `version`) or of its children (`cversion`, `num_children`, `pzxid`)
/// moves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    pub data: Vec<u8>,
    pub mzxid: i64,
    pub version: i32,
    pub cversion: i32,
    pub num_children: i32,
    pub pzxid: i64,
}

impl Node {
    pub fn of(entry: &CacheEntry) -> Node {
        let stat = entry.stat();
        Node {
            data: entry.data().to_vec(),
            mzxid: stat.mzxid,
            version: stat.version,
            cversion: stat.cversion,
            num_children: stat.num_children,
            pzxid: stat.pzxid,
        }
    }

    fn read(data: Vec<u8>, stat: &zookeeper_client::Stat) -> Node {
        Node {
            data,
            mzxid: stat.mzxid,
            version: stat.version,
            cversion: stat.cversion,
            num_children: stat.num_children,
            pzxid: stat.pzxid,
        }
    }

    /// What the events announce of a node: its data and the write that made it (a parent's
    /// child counters change in the cache without an event of the parent; its children's events
    /// announce them).
    pub fn written(&self) -> (&[u8], i64, i32) {
        (&self.data, self.mzxid, self.version)
    }
}

/// The announced part ([`Node::written`]) of every node of a tree.
pub fn written(tree: &BTreeMap<String, Node>) -> BTreeMap<&str, (&[u8], i64, i32)> {
    tree.iter().map(|(path, node)| (path.as_str(), node.written())).collect()
}

/// The cache's contents as comparable nodes.
pub fn cached(cache: &CuratorCache) -> BTreeMap<String, Node> {
    cache.snapshot().into_iter().map(|(p, e)| (p, Node::of(&e))).collect()
}

/// Applies events to a map, as the events' documentation says a subscriber may.
#[derive(Debug, Default)]
pub struct Replay {
    pub nodes: BTreeMap<String, Node>,
    /// `Initialized` events since the last `Lagged` (the replay after it ends with one again).
    pub initialized: usize,
    /// The `missed` of every `Lagged`.
    pub lags: Vec<u64>,
    /// Set when an event contradicts the replayed map (a create of a present node, a change or a
    /// delete of an absent one, a change whose `old` is not what the replay holds).
    pub inconsistencies: Vec<String>,
}

impl Replay {
    pub fn apply(&mut self, event: CacheEvent) {
        match event {
            CacheEvent::Created(e) => {
                if self.nodes.insert(e.path().to_string(), Node::of(&e)).is_some() {
                    self.inconsistencies.push(format!("created twice: {}", e.path()));
                }
            }
            CacheEvent::Changed { old, new, data_changed, .. } => {
                let before = self.nodes.insert(new.path().to_string(), Node::of(&new));
                if before.as_ref().map(Node::written) != Some(Node::of(&old).written()) {
                    self.inconsistencies.push(format!("changed from an unknown state: {}", new.path()));
                }
                if data_changed != (old.data() != new.data()) {
                    self.inconsistencies.push(format!("data_changed says {data_changed}: {}", new.path()));
                }
                if old.stat().mzxid == new.stat().mzxid && old.data() == new.data() {
                    self.inconsistencies.push(format!("changed but not written: {}", new.path()));
                }
            }
            CacheEvent::Deleted(e) => {
                if self.nodes.remove(e.path()).is_none() {
                    self.inconsistencies.push(format!("deleted while absent: {}", e.path()));
                }
            }
            CacheEvent::Initialized => self.initialized += 1,
            // The stream replays the cache next, as it begins: start over.
            CacheEvent::Lagged { missed } => {
                self.lags.push(missed);
                self.nodes.clear();
                self.initialized = 0;
            }
            other => self.inconsistencies.push(format!("unknown event {other:?}")),
        }
    }

    /// Applies every event buffered in `events`.
    pub fn drain(&mut self, events: &mut CacheEventStream) {
        while let Some(event) = events.try_next() {
            self.apply(event);
        }
    }
}

/// The tree under `root` (root included) as the server holds it now, through a fresh session.
pub async fn server_tree(connect: &str, root: &str) -> BTreeMap<String, Node> {
    let zk = crate::support::observer(connect).await;
    let mut tree = BTreeMap::new();
    let mut todo = vec![root.to_string()];
    while let Some(path) = todo.pop() {
        match zk.get_data(&path).await {
            Ok((data, stat)) => {
                tree.insert(path.clone(), Node::read(data, &stat));
            }
            Err(zookeeper_client::Error::NoNode) => continue,
            Err(e) => panic!("read {path}: {e}"),
        }
        match zk.list_children(&path).await {
            Ok(children) => {
                let prefix = if path == "/" { "" } else { path.as_str() };
                todo.extend(children.into_iter().map(|c| format!("{prefix}/{c}")));
            }
            Err(zookeeper_client::Error::NoNode) => {}
            Err(e) => panic!("list {path}: {e}"),
        }
    }
    tree
}

/// Waits until the cache is synced and equals a fresh listing of the server under its path, data and
/// stats (through `connect`, which carries the cache's client's namespace as a chroot if it has
/// one), and the replay of `events` equals the cache (what events announce: [`Node::written`]);
/// panics showing the three after `within`.
///
/// The server is read first and the cache after it: listing a large tree of a loaded server can
/// take the whole `within` (one request per node), and a copy of the cache taken before that read
/// would be compared, stale, with a server read after it — a cache that caught up meanwhile (its
/// last stat re-read landing during the listing) would be reported as stuck behind.
pub async fn assert_converges(
    cache: &CuratorCache,
    events: &mut CacheEventStream,
    replay: &mut Replay,
    connect: &str,
    within: Duration,
) {
    let root = cache.path().to_string();
    let deadline = std::time::Instant::now() + within;
    loop {
        let server = server_tree(connect, &root).await;
        replay.drain(events);
        let cache_now = cached(cache);
        let state = cache.state();
        if state == CacheState::Synced && cache_now == server && written(&replay.nodes) == written(&cache_now) {
            break;
        }
        if std::time::Instant::now() >= deadline {
            panic!(
                "the cache of {root} did not converge within {within:?} (state {state:?}):\n cache  {cache_now:?}\n server {server:?}\n replay {:?}",
                replay.nodes
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(replay.inconsistencies.is_empty(), "the event stream contradicts itself: {:?}", replay.inconsistencies);
    assert_eq!(replay.initialized, 1, "one Initialized");
}

/// Creates `path` (and its missing parents) with `data`.
pub async fn put(c: &zk_curator::CuratorClient, path: &str, data: &[u8]) {
    c.create(path)
        .data(data.to_vec())
        .creating_parents_if_needed()
        .await
        .unwrap_or_else(|e| panic!("create {path}: {e}"));
}

/// Sets `path`'s data.
pub async fn set(c: &zk_curator::CuratorClient, path: &str, data: &[u8]) {
    c.set_data(path, data.to_vec()).await.unwrap_or_else(|e| panic!("set {path}: {e}"));
}

/// Deletes `path`.
pub async fn del(c: &zk_curator::CuratorClient, path: &str) {
    c.delete(path).await.unwrap_or_else(|e| panic!("delete {path}: {e}"));
}
