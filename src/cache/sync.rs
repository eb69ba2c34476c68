//! The task behind a [`CuratorCache`](super::CuratorCache): on every (re)connection it arms the
//! persistent watch *first*, then `sync`s and re-reads the tree, applies the net difference, and
//! follows the watch's events until the next gap.
//!
//! Why this order leaves no window: a change made after the watch is armed is reported by it (and
//! read again after the load, which is never older than the event); a change made before is seen by
//! the load. Events of a gap are not replayed for persistent watches (ZOOKEEPER-4698), a new
//! session has no watch at all, and zookeeper-client 0.11.2 does not even set a persistent watch
//! again when it reconnects the same session (its `SetWatches` carries only one-shot watches):
//! hence the watch armed again, and the tree re-read, after every gap. Reads on one connection are answered in
//! order, so applying them in the order they were sent never regresses an entry; the `mzxid`
//! check in [`Shared::apply`] guards the rest.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tracing::{debug, info, warn};
use zookeeper_client as zk;

use super::tree::{Applied, Shared};
use super::{CacheEntry, CacheMode, CacheState};
use crate::error::{Error, ErrorCode, ErrorKind};
use crate::framework::{CuratorClient, SessionIdentity};

/// Read requests in flight at once while loading (the replies are applied in the order sent).
const LOAD_WINDOW: usize = 32;

/// Most reads in one multi-read request of the load.
const BATCH_READS: usize = 256;

/// What one multi-read reply of the load should come to on average: data batches are sized from
/// the mean data size seen so far in the load, so a few large nodes among many small ones do not
/// make every request small; once the mean passes half of this, data is read one node per request.
const BATCH_REPLY_BYTES: usize = 256 * 1024;

/// What one multi-read reply of the load may come to at most, judging by the largest data seen so
/// far (zookeeper-client has no packet limit; a node's data is at most the server's jute.maxbuffer,
/// 1 MiB by default).
const MAX_REPLY_BYTES: usize = 8 * 1024 * 1024;

/// A read's share of a reply besides its data (the `Stat`, headers).
const READ_OVERHEAD: usize = 128;

/// Reads in the first data request, before any size is known.
const FIRST_DATA_BATCH: usize = 16;

/// Most child names in one multi-read request of the load (known from the parents' `Stat`s); a
/// node with more children is listed alone.
const BATCH_CHILDREN: usize = 4096;

/// Most events handled in one batch (their reads are pipelined).
const EVENT_BATCH: usize = 1024;

/// Pause before retrying after a failed attempt, doubling up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(20);
const MAX_PAUSE: Duration = Duration::from_secs(1);

/// Runs the cache until `stop` says so or it fails; then ends it (state, error, subscribers).
pub(super) async fn run(shared: Arc<Shared>, client: CuratorClient, mut stop: watch::Receiver<bool>) {
    let outcome = tokio::select! {
        biased;
        _ = stop.wait_for(|stop| *stop) => None,
        err = keep_in_sync(&shared, &client) => Some(err),
    };
    match outcome {
        Some(err) if err.kind() != ErrorKind::Closed => {
            warn!(path = shared.root(), error = %err, "cache stopped");
            shared.finish(CacheState::Failed, Some(err));
        }
        _ => shared.finish(CacheState::Closed, None),
    }
}

/// Why a load or an event batch stopped.
enum Stop {
    /// A gap (disconnect, session change, a read failed on the connection): re-arm and re-read.
    Resync,
    /// For good.
    Fatal(Error),
}

/// Classifies a failed read or watch: the client closed and bounds are fatal, the rest calls for a
/// re-sync (after a pause).
fn stop_for(path: &str, err: zk::Error) -> Stop {
    let err = Error::zk(path, err);
    match err.kind() {
        ErrorKind::Closed => Stop::Fatal(err),
        _ => {
            debug!(path, error = %err, "cache read failed; re-syncing");
            Stop::Resync
        }
    }
}

/// Arms, loads and follows, again after every gap; returns only the error that stops the cache.
async fn keep_in_sync(shared: &Shared, client: &CuratorClient) -> Error {
    let root = shared.root().to_string();
    let fixed = client.fix_path(&root);
    let mode = if shared.mode() == CacheMode::Node {
        zk::AddWatchMode::Persistent
    } else {
        zk::AddWatchMode::PersistentRecursive
    };
    let mut pause = Duration::ZERO;
    // The last session's watcher, dropped only once the next one is armed (on the same session,
    // dropping it first could remove the server's watch for a moment).
    let mut previous: Option<zk::PersistentWatcher> = None;
    loop {
        if !pause.is_zero() {
            tokio::time::sleep(pause).await;
        }
        pause = (pause * 2).clamp(FIRST_PAUSE, MAX_PAUSE);
        if shared.is_initialized() && !client.is_connected() {
            shared.set_state(CacheState::Suspended);
        }
        let (zk, session) = match client.connected(&root, None).await {
            Ok(connected) => connected,
            Err(err) if err.kind() == ErrorKind::Closed => return err,
            Err(_) => continue,
        };
        shared.set_state(if shared.is_initialized() { CacheState::Resyncing } else { CacheState::Loading });
        // 1. The watch first.
        let mut watcher = match zk.watch(&fixed, mode).await {
            Ok(watcher) => watcher,
            Err(err) => {
                let err = Error::zk(&root, err);
                match err.code() {
                    // A server without persistent watches (before 3.6).
                    Some(ErrorCode::Unimplemented) => return err,
                    _ if err.kind() == ErrorKind::Closed => return err,
                    _ => {
                        debug!(path = root, error = %err, "arming the cache's watch failed; retrying");
                        continue;
                    }
                }
            }
        };
        drop(previous.take());
        // 2. Then the tree.
        match load(shared, client, &zk, &fixed).await {
            Ok((entries, unreadable)) => shared.replace(entries, unreadable),
            Err(Stop::Fatal(err)) => return err,
            Err(Stop::Resync) => {
                previous = Some(watcher);
                continue;
            }
        }
        info!(path = root, nodes = shared.size(), "cache synced");
        pause = Duration::ZERO;
        // 3. Then the changes, until the next gap.
        let ended = match follow(shared, client, &zk, session, &mut watcher).await {
            Ok(ended) => ended,
            Err(err) => return err,
        };
        // A watcher that reported its session's end must not be polled (nor kept) again.
        previous = (!ended).then_some(watcher);
        if shared.is_initialized() {
            shared.set_state(CacheState::Suspended);
        }
    }
}

/// Reads the whole cached tree (after a `sync`, so that a new session's server is at least as
/// recent as the leader was): level by level, first the data of the level's nodes, then the
/// children of those that have any, batched into multi-read requests ([`read_batched`]). A node
/// gone meanwhile is simply absent (CURATOR-476); one it may not read is listed in the second set.
/// A child created after its parent's read is reported by the watch, armed before.
async fn load(
    shared: &Shared,
    client: &CuratorClient,
    zk: &zk::Client,
    fixed_root: &str,
) -> Result<(Vec<CacheEntry>, BTreeSet<String>), Stop> {
    let root = shared.root();
    zk.sync(fixed_root).await.map_err(|err| stop_for(root, err))?;
    let mut entries = Vec::new();
    let mut unreadable = BTreeSet::new();
    let mut level = vec![root.to_string()];
    let mut depth = 0usize;
    let seen = DataSeen::default();
    while !level.is_empty() {
        let want_children = depth < shared.max_depth();
        let mut parents = Vec::new();
        let mut todo = std::mem::take(&mut level).into_iter().peekable();
        read_batched(
            || {
                let size = seen.batch();
                let batch: Vec<String> = todo.by_ref().take(size).collect();
                (!batch.is_empty()).then(|| {
                    let request = if let [path] = batch.as_slice() {
                        single_get_data(zk, &client.fix_path(path))
                    } else {
                        let mut reader = zk.new_multi_reader();
                        for path in &batch {
                            if let Err(err) = reader.add_get_data(&client.fix_path(path)) {
                                return (batch, Box::pin(std::future::ready(Err(err))) as Pending<'_>);
                            }
                        }
                        Box::pin(reader.commit())
                    };
                    (batch, request)
                })
            },
            |path, result| {
                match result {
                    zk::MultiReadResult::Data { data, stat } => {
                        seen.note(data.len());
                        if want_children && stat.num_children > 0 {
                            parents.push((path.clone(), stat.num_children as usize));
                        }
                        entries.push(CacheEntry::new(&path, data, stat.into()));
                        shared.check_size(entries.len()).map_err(Stop::Fatal)?;
                    }
                    zk::MultiReadResult::Error { err: zk::Error::NoNode } => {}
                    zk::MultiReadResult::Error { err: zk::Error::NoAuth } => {
                        warn!(path, "the cache may not read this node; it is not cached");
                        unreadable.insert(path);
                    }
                    zk::MultiReadResult::Error { err } => return Err(stop_for(&path, err)),
                    _ => return Err(unexpected(&path)),
                }
                Ok(())
            },
        )
        .await?;
        let mut next = Vec::new();
        let mut parents = parents.into_iter().peekable();
        read_batched(
            || {
                // Parents with few children share a request; one with many is listed alone.
                let mut batch = Vec::new();
                let mut names = 0usize;
                while let Some((_, count)) = parents.peek() {
                    if !batch.is_empty() && (names + count > BATCH_CHILDREN || batch.len() >= BATCH_READS) {
                        break;
                    }
                    names += count;
                    batch.extend(parents.next().map(|(path, _)| path));
                }
                (!batch.is_empty()).then(|| {
                    let request = if let [path] = batch.as_slice() {
                        single_get_children(zk, &client.fix_path(path))
                    } else {
                        let mut reader = zk.new_multi_reader();
                        for path in &batch {
                            if let Err(err) = reader.add_get_children(&client.fix_path(path)) {
                                return (batch, Box::pin(std::future::ready(Err(err))) as Pending<'_>);
                            }
                        }
                        Box::pin(reader.commit())
                    };
                    (batch, request)
                })
            },
            |path, result| {
                match result {
                    zk::MultiReadResult::Children { children } => {
                        shared.check_size(entries.len() + next.len() + children.len()).map_err(Stop::Fatal)?;
                        let prefix = if path == "/" { "" } else { path.as_str() };
                        next.extend(children.into_iter().map(|name| format!("{prefix}/{name}")));
                    }
                    zk::MultiReadResult::Error { err: zk::Error::NoNode } => {}
                    zk::MultiReadResult::Error { err: zk::Error::NoAuth } => {
                        unreadable.insert(path);
                    }
                    zk::MultiReadResult::Error { err } => return Err(stop_for(&path, err)),
                    _ => return Err(unexpected(&path)),
                }
                Ok(())
            },
        )
        .await?;
        level = next;
        depth += 1;
    }
    entries.sort_by(|a, b| a.path().cmp(b.path()));
    Ok((entries, unreadable))
}

/// The data the load has read so far, which sizes its next data batches (written from the reply
/// side, read from the sending side of [`read_batched`]).
#[derive(Default)]
struct DataSeen {
    nodes: AtomicUsize,
    bytes: AtomicUsize,
    largest: AtomicUsize,
}

impl DataSeen {
    fn note(&self, len: usize) {
        self.nodes.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(len, Ordering::Relaxed);
        self.largest.fetch_max(len, Ordering::Relaxed);
    }

    /// How many nodes the next data request reads.
    fn batch(&self) -> usize {
        let nodes = self.nodes.load(Ordering::Relaxed);
        if nodes == 0 {
            return FIRST_DATA_BATCH;
        }
        let mean = self.bytes.load(Ordering::Relaxed) / nodes;
        let largest = self.largest.load(Ordering::Relaxed);
        (BATCH_REPLY_BYTES / (mean + READ_OVERHEAD))
            .min(MAX_REPLY_BYTES / (largest + READ_OVERHEAD))
            .clamp(1, BATCH_READS)
    }
}

/// One read request of the load: a multi-read, or a single read shaped like one.
type Pending<'a> = Pin<Box<dyn Future<Output = Result<Vec<zk::MultiReadResult>, zk::Error>> + Send + 'a>>;

/// Sends the requests `next` makes (each with the paths it reads), up to [`LOAD_WINDOW`] in
/// flight, and hands every path's result to `apply` in the order sent.
async fn read_batched<'a>(
    mut next: impl FnMut() -> Option<(Vec<String>, Pending<'a>)>,
    mut apply: impl FnMut(String, zk::MultiReadResult) -> Result<(), Stop>,
) -> Result<(), Stop> {
    let mut inflight = VecDeque::new();
    loop {
        while inflight.len() < LOAD_WINDOW {
            let Some(request) = next() else { break };
            inflight.push_back(request);
        }
        let Some((paths, reply)) = inflight.pop_front() else { return Ok(()) };
        let results = match reply.await {
            Ok(results) => results,
            Err(err) => return Err(stop_for(paths.first().map_or("/", |p| p.as_str()), err)),
        };
        if results.len() != paths.len() {
            return Err(unexpected(paths.first().map_or("/", |p| p.as_str())));
        }
        for (path, result) in paths.into_iter().zip(results) {
            apply(path, result)?;
        }
    }
}

/// A single `getData` (a node whose data may be large), its result shaped like a multi-read's.
fn single_get_data<'a>(zk: &'a zk::Client, path: &str) -> Pending<'a> {
    let reply = zk.get_data(path);
    Box::pin(async move {
        Ok(vec![match reply.await {
            Ok((data, stat)) => zk::MultiReadResult::Data { data, stat },
            Err(err @ (zk::Error::NoNode | zk::Error::NoAuth)) => zk::MultiReadResult::Error { err },
            Err(err) => return Err(err),
        }])
    })
}

/// A single `getChildren` (a node with many children), its result shaped like a multi-read's.
fn single_get_children<'a>(zk: &'a zk::Client, path: &str) -> Pending<'a> {
    let reply = zk.get_children(path);
    Box::pin(async move {
        Ok(vec![match reply.await {
            Ok((children, _)) => zk::MultiReadResult::Children { children },
            Err(err @ (zk::Error::NoNode | zk::Error::NoAuth)) => zk::MultiReadResult::Error { err },
            Err(err) => return Err(err),
        }])
    })
}

/// A reply that does not match its request: re-sync rather than trust it.
fn unexpected(path: &str) -> Stop {
    warn!(path, "a multi-read reply did not match its request; re-syncing");
    Stop::Resync
}

/// Follows the watch until a gap: returns `Ok(true)` when the watcher reported its session's end,
/// `Ok(false)` for another gap (disconnect, session change, a failed read), an error only when the
/// cache must stop.
async fn follow(
    shared: &Shared,
    client: &CuratorClient,
    zk: &zk::Client,
    session: SessionIdentity,
    watcher: &mut zk::PersistentWatcher,
) -> Result<bool, Error> {
    let mut status = client.status();
    loop {
        let first = tokio::select! {
            event = watcher.changed() => event,
            _ = status.wait_for(|s| s.closed || s.session != session) => return Ok(false),
        };
        let mut batch = vec![first];
        let mut ended = false;
        loop {
            let last = batch.last().map(|e: &zk::WatchedEvent| e.event_type);
            if last == Some(zk::EventType::Session) || batch.len() >= EVENT_BATCH {
                break;
            }
            let more = tokio::select! {
                biased;
                event = watcher.changed() => Some(event),
                _ = std::future::ready(()) => None,
            };
            match more {
                Some(event) => batch.push(event),
                None => break,
            }
        }
        let gap = batch.iter().find(|e| e.event_type == zk::EventType::Session).map(|e| e.session_state);
        if let Some(state) = gap {
            ended = state.is_terminated();
            if state != zk::SessionState::SyncConnected {
                shared.set_state(CacheState::Suspended);
            }
            debug!(path = shared.root(), ?state, "cache's connection changed; re-syncing");
            batch.retain(|e| e.event_type != zk::EventType::Session);
        }
        match apply_batch(shared, client, zk, &batch).await {
            Ok(()) if gap.is_some() => return Ok(ended),
            Ok(()) => {}
            Err(Stop::Resync) => return Ok(ended),
            Err(Stop::Fatal(err)) => return Err(err),
        }
    }
}

/// What an event batch needs read again about a path.
enum Reread {
    /// Its data and stat (created or changed).
    Data,
    /// Nothing: it is gone.
    Gone,
    /// Its stat only: one of its children was created or deleted (a persistent recursive watch
    /// reports no `NodeChildrenChanged`), or its children changed (a persistent watch of the node
    /// alone does).
    Stat,
}

/// A re-read in flight.
enum Reply<D, S> {
    Data(D),
    Stat(S),
    Gone,
}

/// The parent of `path`; `None` for `/`.
fn parent_of(path: &str) -> Option<&str> {
    match path.rfind('/') {
        Some(0) if path.len() > 1 => Some("/"),
        Some(0) | None => None,
        Some(i) => Some(&path[..i]),
    }
}

/// Reads again every path the batch names (the last event of each path counts; a deletion needs
/// no read) and the stat of every cached parent whose children it creates or deletes (once, and
/// not when the parent's data is read anyway): all requests sent before the first reply is
/// awaited, the replies applied in order. Every read is sent after every event of the batch came,
/// so it shows them all.
async fn apply_batch(
    shared: &Shared,
    client: &CuratorClient,
    zk: &zk::Client,
    batch: &[zk::WatchedEvent],
) -> Result<(), Stop> {
    let last: HashMap<&str, usize> = batch.iter().enumerate().map(|(i, e)| (e.path.as_str(), i)).collect();
    let mut wanted: Vec<(&str, Reread)> = Vec::with_capacity(batch.len());
    let mut parents: Vec<&str> = Vec::new();
    for (i, event) in batch.iter().enumerate() {
        let path = client.unfix_path(&event.path);
        let parent_changed = match event.event_type {
            zk::EventType::NodeCreated | zk::EventType::NodeDeleted => parent_of(path),
            zk::EventType::NodeChildrenChanged => Some(path),
            _ => None,
        };
        if let Some(parent) = parent_changed.filter(|p| shared.wants(p)) {
            parents.push(parent);
        }
        if last.get(event.path.as_str()) != Some(&i) || !shared.wants(path) {
            continue;
        }
        match event.event_type {
            zk::EventType::NodeCreated | zk::EventType::NodeDataChanged => wanted.push((path, Reread::Data)),
            zk::EventType::NodeDeleted => wanted.push((path, Reread::Gone)),
            _ => {}
        }
    }
    if !parents.is_empty() {
        let mut covered: HashSet<&str> = wanted.iter().map(|(path, _)| *path).collect();
        for parent in parents {
            if covered.insert(parent) {
                wanted.push((parent, Reread::Stat));
            }
        }
    }
    let reads: Vec<_> = wanted
        .into_iter()
        .map(|(path, reread)| {
            let fixed = client.fix_path(path);
            let reply = match reread {
                Reread::Data => Reply::Data(zk.get_data(&fixed)),
                Reread::Stat => Reply::Stat(zk.check_stat(&fixed)),
                Reread::Gone => Reply::Gone,
            };
            (path, reply)
        })
        .collect();
    for (path, reply) in reads {
        let applied = match reply {
            Reply::Gone => shared.apply(path, None),
            Reply::Data(reply) => match reply.await {
                Ok((data, stat)) => shared.apply(path, Some(CacheEntry::new(path, data, stat.into()))),
                Err(zk::Error::NoNode) => shared.apply(path, None),
                Err(zk::Error::NoAuth) => {
                    warn!(path, "the cache may not read this node; it is not cached");
                    shared.mark_unreadable(path);
                    Applied::Ok
                }
                Err(err) => return Err(stop_for(path, err)),
            },
            Reply::Stat(reply) => match reply.await {
                Ok(Some(stat)) => {
                    shared.apply_stat(path, stat.into());
                    Applied::Ok
                }
                // Gone (its deletion is reported by the watch), or not ours to see.
                Ok(None) | Err(zk::Error::NoNode | zk::Error::NoAuth) => Applied::Ok,
                Err(err) => return Err(stop_for(path, err)),
            },
        };
        if let Applied::Full(err) = applied {
            return Err(Stop::Fatal(err));
        }
    }
    Ok(())
}
