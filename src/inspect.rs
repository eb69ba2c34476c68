//! Inspection: who holds which lock, for how long, and who waits — every lock under a path,
//! recognised by its nodes, whoever made them (Curator or zk-curator); the library side of
//! `zk-curator inspect`. Curator has no counterpart (its `LockInternals.getParticipantNodes` and
//! `getParticipants` come closest).
//!
//! Start from [`inspect()`]: an [`Inspection`] of every lock under a path, each a [`LockInfo`]
//! of a [`LockKind`] with its [`LockHolder`]s and waiters ([`inspect_with`] takes
//! [`InspectOptions`]). [`inspect_lock`] looks at one lock path, [`inspect_barrier`] at a double
//! barrier ([`BarrierInfo`]).
//!
//! ```no_run
//! # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
//! for lock in zk_curator::inspect::inspect(&client, "/locks").await?.locks {
//!     println!("{} {}: {} holder(s), {} waiting", lock.path, lock.kind, lock.holders.len(), lock.waiters.len());
//! }
//! # Ok(()) }
//! ```
//!
//! # How locks are recognised
//!
//! Who holds which lock, for how long, and who waits: every lock under a path, recognised by its
//! nodes, whoever made them (Curator or zk-curator).
//!
//! The recipes' layouts ([docs/wire-protocol.md](crate::guide::wire_protocol)):
//!
//! * mutex (`InterProcessMutex`, `LeaderSelector`): children `[_c_<uuid>-]lock-<seq>`; the first in
//!   sort order holds;
//! * read-write lock: `__READ__<seq>` / `__WRIT__<seq>` children in one queue; a writer holds when
//!   first, a reader when no writer sorts before it;
//! * semaphore (`InterProcessSemaphoreV2`, `InterProcessSemaphoreMutex`): a `leases` child holding
//!   the leases (`lease-<seq>`) and a `locks` child, the internal mutex acquirers queue on. The
//!   first in that queue decides; if it has created its lease already (the newest lease, of the
//!   same session) that lease is not granted yet. A path is a semaphore when it has a `leases`
//!   child and no lock nodes of its own (a mutex with a nested lock at `leases/...` or
//!   `locks/...` stays a mutex). While it has no `leases` node — before its first lease, or
//!   once the server reaped the empty `leases` container — a semaphore is only
//!   `PATH/locks/<mutex nodes>`, exactly a mutex at `PATH/locks`, and is reported as one;
//! * leader latch: `latch-<seq>` children; the first leads;
//! * non-fair mutex (`InterProcessNonFairMutex`): one EPHEMERAL child `nonfair-lock`, the holder;
//!   its waiters only watch it, so none are listed.
//! * membership (`GroupMember`, `PersistentNode` registrations): ephemeral children that are not
//!   lock nodes, `<path>/<memberId>`; every one is a member. They are found when listed (an
//!   ephemeral node has no children): one `getData` more per member. With the `discovery`
//!   feature, a group one of whose members holds a curator-x-discovery instance of it (Curator's
//!   JSON naming the group or the member) is a service, listed by `inspect_services` and not
//!   here: a registry's `base/NAME/ID` nodes have a group's shape.
//!
//! A lock node is a child whose name contains one of those lock names and ends in a sequence
//! number (10 digits or more), or a non-fair mutex's `nonfair-lock`. Lock nodes are ephemeral, so they are never listed; every other
//! child is a directory that is listed in turn.

use std::cmp::Ordering;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::task::Poll;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::{Error, ErrorCode, Result};
use crate::framework::client::CuratorClient;
use crate::framework::node::Stat;
use crate::framework::paths::validate_path;
use crate::framework::protected::parse_sequence;
use crate::leader::LATCH_LOCK_NAME;
use crate::locks::driver::{java_cmp, standard_sort_key};
use crate::locks::nonfair::NONFAIR_LOCK_NAME;
use crate::locks::read_write::{read_write_sort_key, READ_LOCK_NAME, WRITE_LOCK_NAME};
use crate::locks::semaphore::{LEASE_NODE_NAME, SEMAPHORE_LEASE_PARENT, SEMAPHORE_LOCK_PARENT};

/// The lock name of `InterProcessMutex` (and `LeaderSelector`) nodes, Curator's `LOCK_NAME`.
const MUTEX_LOCK_NAME: &str = "lock-";

/// What a lock path is, as its nodes tell. Serialised (feature `serde`) as its
/// [`as_str`](Self::as_str) name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize), serde(rename_all = "kebab-case"))]
#[non_exhaustive]
pub enum LockKind {
    /// `InterProcessMutex` — or a `LeaderSelector`, whose nodes are a mutex's.
    Mutex,
    /// `InterProcessReadWriteLock`.
    ReadWrite,
    /// `InterProcessSemaphoreV2`, or an `InterProcessSemaphoreMutex` (a semaphore with one lease,
    /// on the same nodes).
    Semaphore,
    /// `LeaderLatch`: the holder is the leader.
    Latch,
    /// `InterProcessNonFairMutex`: its one node is the holder; its waiters, who only watch the
    /// node, are not seen.
    NonFairMutex,
    /// A group (`GroupMember`, or any directory of ephemeral nodes such as `PersistentNode`
    /// registrations): its [`holders`](LockInfo::holders) are the members, one per ephemeral child
    /// (named as it is: `<path>/<memberId>`), with their data; no waiters.
    Membership,
}

impl LockKind {
    /// The kind's name as `zk-curator inspect` prints it: `mutex`, `read-write`, `semaphore`,
    /// `latch`, `nonfair-mutex`.
    pub fn as_str(&self) -> &'static str {
        match self {
            LockKind::Mutex => "mutex",
            LockKind::ReadWrite => "read-write",
            LockKind::Semaphore => "semaphore",
            LockKind::Latch => "latch",
            LockKind::NonFairMutex => "nonfair-mutex",
            LockKind::Membership => "membership",
        }
    }
}

impl std::fmt::Display for LockKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One holder of a lock: a lease of a semaphore, a reader or the writer of a read-write lock, the
/// leader of a latch.
///
/// Serialised (feature `serde`) as `zk-curator inspect --json` prints a holder ([docs/cli.md](crate::guide::cli)):
/// `node`, `session` as [`session_hex`](Self::session_hex), `created_ms`, `held_ms` (whole
/// milliseconds) and `data` as [`data_lossy`](Self::data_lossy).
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct LockHolder {
    /// The holder's node, full path (within the client's namespace).
    pub node: String,
    /// The session that owns the node (its `ephemeralOwner`); see [`LockHolder::session_hex`].
    #[cfg_attr(feature = "serde", serde(serialize_with = "json::session_hex"))]
    pub session: i64,
    /// The node's creation time (`ctime`), milliseconds since the epoch, by the server's clock.
    pub created_ms: i64,
    /// How long it has been held: the local clock now minus the node's creation time by the
    /// server's clock (0 if that is negative), so as exact as the two clocks agree.
    #[cfg_attr(feature = "serde", serde(rename = "held_ms", serialize_with = "json::millis"))]
    pub held: Duration,
    /// The node's data: whatever the holder wrote (Curator: the client's IP address by default;
    /// `zk-curator lock`/`hold`: `HOSTNAME:PID`; a leader latch: the participant id).
    #[cfg_attr(feature = "serde", serde(serialize_with = "json::lossy"))]
    pub data: Vec<u8>,
}

impl LockHolder {
    /// The session id as ZooKeeper's tools print it (`0x` and lowercase hex).
    pub fn session_hex(&self) -> String {
        format!("{:#x}", self.session)
    }

    /// The node data decoded as UTF-8, invalid sequences replaced.
    pub fn data_lossy(&self) -> String {
        String::from_utf8_lossy(&self.data).into_owned()
    }
}

/// One lock found by [`inspect`]: its holders and waiters at the time it was read.
///
/// Serialised (feature `serde`) as `zk-curator inspect --json` prints a lock ([docs/cli.md](crate::guide::cli)):
/// `path`, `kind`, `holders`, `waiters` (how many), `oldest_wait_ms`, `lease_limit`, `pending`
/// and `waiting_nodes` (the [`waiters`](Self::waiters) themselves).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockInfo {
    /// The lock path (within the client's namespace).
    pub path: String,
    /// What it is.
    pub kind: LockKind,
    /// The holders, in queue order. Empty when the holder's node went away while it was read (or,
    /// rarely, when a foreign child sorts first and keeps everybody out, as in Curator).
    pub holders: Vec<LockHolder>,
    /// A semaphore's lease node that exists but is not granted yet: its owner holds the internal
    /// lock and waits for a free lease (it is also counted in [`waiters`](LockInfo::waiters)).
    pub pending: Option<String>,
    /// The waiting nodes, full paths in queue order (for a semaphore, the nodes queued on its
    /// internal lock `PATH/locks`, the first one being the acquirer that holds it).
    pub waiters: Vec<String>,
    /// How long the first waiter has waited (local clock minus its node's creation time); `None`
    /// without waiters, or when its node went away while it was read.
    pub oldest_wait: Option<Duration>,
    /// How many may hold at once, where the nodes tell: 1 for a mutex and a latch; `None` for a
    /// read-write lock (one writer or any number of readers) and for a semaphore, whose limit is
    /// not stored with it (a fixed count lives in its users' code; a `SharedCount` at a path of its
    /// users' choosing).
    pub lease_limit: Option<u32>,
}

impl LockInfo {
    /// The holder that has held the longest, if any.
    pub fn longest_hold(&self) -> Option<&LockHolder> {
        self.holders.iter().max_by_key(|h| h.held)
    }
}

/// The JSON shape of the inspection types ([docs/cli.md](crate::guide::cli), `inspect --json`).
#[cfg(feature = "serde")]
mod json {
    use std::time::Duration;

    use serde::ser::{Serialize, SerializeStruct, Serializer};

    use super::LockInfo;

    pub(super) fn session_hex<S: Serializer>(session: &i64, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&format_args!("{session:#x}"))
    }

    /// Whole milliseconds (saturating at `u64::MAX`).
    pub(super) fn millis<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    pub(super) fn lossy<S: Serializer>(data: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&String::from_utf8_lossy(data))
    }

    struct Millis(Duration);

    impl Serialize for Millis {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            millis(&self.0, s)
        }
    }

    impl Serialize for LockInfo {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let mut lock = s.serialize_struct("LockInfo", 8)?;
            lock.serialize_field("path", &self.path)?;
            lock.serialize_field("kind", &self.kind)?;
            lock.serialize_field("holders", &self.holders)?;
            lock.serialize_field("waiters", &self.waiters.len())?;
            lock.serialize_field("oldest_wait_ms", &self.oldest_wait.map(Millis))?;
            lock.serialize_field("lease_limit", &self.lease_limit)?;
            lock.serialize_field("pending", &self.pending)?;
            lock.serialize_field("waiting_nodes", &self.waiters)?;
            lock.end()
        }
    }
}

/// Limits of an [`inspect_with`] walk, so that a big tree costs a bounded number of requests.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct InspectOptions {
    /// How many levels below the root are listed (the root is level 0). Default 32.
    pub max_depth: usize,
    /// How many nodes are listed (`getChildren`) at most. Default 10 000. (A semaphore found by
    /// the last listing still has its `leases` and `locks` listed: up to 2 more.) For
    /// `inspect_services` it bounds every read: each `getChildren` and each `getData` counts one.
    pub max_listings: usize,
}

impl Default for InspectOptions {
    fn default() -> Self {
        InspectOptions { max_depth: 32, max_listings: 10_000 }
    }
}

impl InspectOptions {
    /// The default limits.
    pub fn new() -> Self {
        Self::default()
    }

    /// Lists at most `depth` levels below the root.
    pub fn max_depth(mut self, depth: usize) -> Self {
        self.max_depth = depth;
        self
    }

    /// Lists at most `listings` nodes.
    pub fn max_listings(mut self, listings: usize) -> Self {
        self.max_listings = listings;
        self
    }
}

/// What [`inspect_with`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Inspection {
    /// The locks with at least one holder or waiter, by path.
    pub locks: Vec<LockInfo>,
    /// Whether a limit of [`InspectOptions`] stopped the walk: some nodes were not listed, so
    /// locks below them are missing.
    pub truncated: bool,
    /// Paths that could not be read for lack of permission (`NoAuth`): directories that could
    /// not be listed (skipped), and holders' nodes whose data could not be read (still reported,
    /// with empty data).
    pub unreadable: Vec<String>,
    /// The requests sent.
    pub requests: usize,
}

/// Every lock under `root` (itself included), with default [`InspectOptions`].
///
/// See [`inspect_with`].
///
/// # Errors
///
/// As [`inspect_with`].
///
/// # Cancel safety
///
/// Cancel safe: it only reads.
///
/// # Examples
///
/// ```no_run
/// # async fn demo() -> zk_curator::Result<()> {
/// let client = zk_curator::CuratorClient::connect("127.0.0.1:2181").await?;
/// for lock in zk_curator::inspect::inspect(&client, "/locks").await?.locks {
///     println!("{} {}: {} holder(s), {} waiting", lock.path, lock.kind, lock.holders.len(), lock.waiters.len());
/// }
/// # Ok(()) }
/// ```
pub async fn inspect(client: &CuratorClient, root: &str) -> Result<Inspection> {
    inspect_with(client, root, &InspectOptions::default()).await
}

/// Every lock under `root` (itself included), whoever made it: its kind, holders (node, session,
/// since when, data) and waiters (how many, since when the first).
///
/// Cost: one `getChildren` per node listed — every node under `root` but lock nodes, which are
/// ephemeral and have no children; a semaphore's `leases` and `locks` are two of them — plus, per
/// lock, one `getData` per holder and one `exists` for the first waiter: a mutex with waiters costs
/// three requests. `options` caps the depth and the number of listings (then
/// [`Inspection::truncated`] says so). Up to 16 paths are read at a time, their requests
/// pipelined on the client's session (a lock's holders are read together too).
///
/// The tree changes while it is read: a node that goes away before it is read is skipped (a
/// holder that released, a waiter that gave up), never an error, and the holders and waiters of
/// one lock are read at slightly different times.
///
/// # Errors
///
/// [`Error::InvalidPath`] for a bad `root`; an option of 0 listings is
/// [`Error::InvalidArgument`]; the server's or the connection's error if a request fails other
/// than with `NoNode` (gone: skipped) or `NoAuth` (listed in [`Inspection::unreadable`]; a
/// holder whose data may not be read is still reported, with empty data).
///
/// # Cancel safety
///
/// Cancel safe: it only reads.
///
/// # Examples
///
/// ```no_run
/// use zk_curator::inspect::{inspect_with, InspectOptions};
///
/// # async fn demo() -> zk_curator::Result<()> {
/// let client = zk_curator::CuratorClient::connect("127.0.0.1:2181").await?;
/// let found = inspect_with(&client, "/", &InspectOptions::new().max_listings(1000)).await?;
/// for lock in &found.locks {
///     if let Some(holder) = lock.longest_hold() {
///         println!("{}: held {:?} by {}", lock.path, holder.held, holder.data_lossy());
///     }
/// }
/// if found.truncated {
///     eprintln!("stopped early: the tree is bigger than the limits");
/// }
/// # Ok(()) }
/// ```
pub async fn inspect_with(client: &CuratorClient, root: &str, options: &InspectOptions) -> Result<Inspection> {
    validate_path(root)?;
    if options.max_listings == 0 {
        return Err(Error::invalid_argument("max_listings", 0, "must be at least 1"));
    }
    let walk = Walk::new(client);
    let mut locks = Vec::new();
    let mut truncated = false;
    let mut listings = 0usize;
    // Depth-first, children in name order (pushed reversed), up to CONCURRENCY paths at a time.
    let mut stack = vec![(root.to_string(), 0usize)];
    while !stack.is_empty() {
        if listings >= options.max_listings {
            truncated = true;
            break;
        }
        let take = stack.len().min(CONCURRENCY).min(options.max_listings - listings);
        let batch = stack.split_off(stack.len() - take);
        listings += take;
        let visits = join_all(batch.iter().rev().map(|(dir, _)| walk.visit(dir)).collect()).await;
        for ((_, depth), visit) in batch.iter().rev().zip(visits) {
            let Visit { lock, member, subdirs, semaphore } = visit?;
            listings += if semaphore { 2 } else { 0 };
            locks.extend(lock);
            // The root's own parent is outside the walk.
            if let Some(member) = member.filter(|m| m.node != root) {
                let group = parent_of(&member.node).to_string();
                match locks.iter_mut().find(|l| l.kind == LockKind::Membership && l.path == group) {
                    Some(found) => found.holders.push(member),
                    None => locks.push(LockInfo {
                        path: group,
                        kind: LockKind::Membership,
                        holders: vec![member],
                        pending: None,
                        waiters: Vec::new(),
                        oldest_wait: None,
                        lease_limit: None,
                    }),
                }
            }
            if *depth >= options.max_depth {
                truncated |= !subdirs.is_empty();
                continue;
            }
            stack.extend(subdirs.into_iter().rev().map(|d| (d, depth + 1)));
        }
    }
    for group in locks.iter_mut().filter(|l| l.kind == LockKind::Membership) {
        group.holders.sort_by(|a, b| a.node.cmp(&b.node));
    }
    // A service's ephemeral instances are laid out as a group's members (`base/NAME/ID`): only
    // their data tells them apart. Services are `inspect_services`'s, not locks.
    #[cfg(feature = "discovery")]
    locks.retain(|l| !(l.kind == LockKind::Membership && is_discovery_service(&l.path, &l.holders)));
    locks.sort_by(|a: &LockInfo, b: &LockInfo| a.path.cmp(&b.path));
    let (unreadable, requests) = walk.into_parts();
    Ok(Inspection { locks, truncated, unreadable, requests })
}

/// The lock at `path` alone (`None` if it has neither holders nor waiters), e.g. for
/// `zk-curator participants`. Costs as one lock of [`inspect_with`].
///
/// # Errors
///
/// As [`inspect_with`]; a `NoAuth` listing is the server's error here.
///
/// # Cancel safety
///
/// Cancel safe: it only reads.
///
/// # Examples
///
/// ```no_run
/// # async fn demo() -> zk_curator::Result<()> {
/// let client = zk_curator::CuratorClient::connect("127.0.0.1:2181").await?;
/// if let Some(lock) = zk_curator::inspect::inspect_lock(&client, "/locks/nightly-report").await? {
///     println!("{} waiting", lock.waiters.len());
/// }
/// # Ok(()) }
/// ```
pub async fn inspect_lock(client: &CuratorClient, path: &str) -> Result<Option<LockInfo>> {
    validate_path(path)?;
    let walk = Walk::new(client);
    let names = match client.get_children(path).await {
        Ok(names) => names,
        Err(e) if e.code() == Some(ErrorCode::NoNode) => return Ok(None),
        Err(e) => return Err(e),
    };
    if is_semaphore(&names) {
        walk.semaphore(path, &mut Vec::new()).await
    } else {
        walk.queue(path, &names).await
    }
}

/// A child of a recipe: a lock name and a sequence number.
fn is_lock_node(name: &str) -> bool {
    name == NONFAIR_LOCK_NAME
        || parse_sequence(name).is_some()
            && [MUTEX_LOCK_NAME, LATCH_LOCK_NAME, READ_LOCK_NAME, WRITE_LOCK_NAME, LEASE_NODE_NAME]
                .iter()
                .any(|lock_name| name.contains(lock_name))
}

/// A semaphore's children: a `leases` child, and no lock nodes of its own (a mutex with a `leases`
/// or `locks` subdirectory — a lock nested below it — stays a mutex).
fn is_semaphore(names: &[String]) -> bool {
    names.iter().any(|n| n == SEMAPHORE_LEASE_PARENT) && !names.iter().any(|n| is_lock_node(n))
}

fn parent_of(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

fn child(dir: &str, name: &str) -> String {
    if dir == "/" {
        format!("/{name}")
    } else {
        format!("{dir}/{name}")
    }
}

/// `names` in the recipe's order: by `key` (Curator's `fixForSorting`), Java's string order, stable.
fn sorted_by(names: &[String], key: impl Fn(&str) -> &str) -> Vec<&String> {
    let mut sorted: Vec<&String> = names.iter().collect();
    sorted.sort_by(|a, b| java_cmp(key(a), key(b)));
    sorted
}

fn since(ctime_ms: i64) -> Duration {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0);
    Duration::from_millis(now.saturating_sub(ctime_ms).max(0) as u64)
}

/// How many paths [`inspect_with`] and `inspect_services` read at a time (their requests are
/// pipelined on the session).
const CONCURRENCY: usize = 16;

/// Polls `futures` together on the calling task; their outputs in the same order.
async fn join_all<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (future, output) in futures.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                match future.as_mut().poll(cx) {
                    Poll::Ready(value) => *output = Some(value),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    outputs.into_iter().flatten().collect()
}

/// What one path holds: the lock found there, if any, and the paths to list next.
struct Visit {
    lock: Option<LockInfo>,
    /// The listed path itself, when it is an ephemeral node that is not a lock node: a member of
    /// its parent's group.
    member: Option<LockHolder>,
    subdirs: Vec<String>,
    /// Whether `leases` and `locks` were listed too (a semaphore).
    semaphore: bool,
}

struct Walk<'a> {
    client: &'a CuratorClient,
    requests: AtomicUsize,
    unreadable: parking_lot::Mutex<Vec<String>>,
}

impl<'a> Walk<'a> {
    fn new(client: &'a CuratorClient) -> Self {
        Walk { client, requests: AtomicUsize::new(0), unreadable: parking_lot::Mutex::new(Vec::new()) }
    }

    fn into_parts(self) -> (Vec<String>, usize) {
        (self.unreadable.into_inner(), self.requests.into_inner())
    }

    fn count(&self) {
        self.requests.fetch_add(1, AtomicOrdering::Relaxed);
    }

    /// Lists `dir` and reads the lock there, if any.
    async fn visit(&self, dir: &str) -> Result<Visit> {
        let Some((mut names, stat)) = self.children_and_stat(dir).await? else {
            return Ok(Visit { lock: None, member: None, subdirs: Vec::new(), semaphore: false });
        };
        let name = dir.rsplit('/').next().unwrap_or(dir);
        if stat.ephemeral_owner != 0 && !is_lock_node(name) {
            // Ephemeral nodes have no children: a member of its parent's group.
            return Ok(Visit {
                lock: None,
                member: self.holder(dir.to_string()).await?,
                subdirs: Vec::new(),
                semaphore: false,
            });
        }
        names.sort();
        let is_semaphore = is_semaphore(&names);
        let mut subdirs = Vec::new();
        let mut lock_nodes = false;
        for name in &names {
            if is_lock_node(name) {
                lock_nodes = true;
            } else if !(is_semaphore && (name == SEMAPHORE_LEASE_PARENT || name == SEMAPHORE_LOCK_PARENT)) {
                subdirs.push(child(dir, name));
            }
        }
        let lock = if is_semaphore {
            // `leases` and `locks` are listed as part of the semaphore; what else they hold (an
            // application's own `leases` or `locks` directory) is walked as usual.
            self.semaphore(dir, &mut subdirs).await?
        } else if lock_nodes {
            self.queue(dir, &names).await?
        } else {
            None
        };
        Ok(Visit { lock, member: None, subdirs, semaphore: is_semaphore })
    }

    /// `path`'s children and its own stat; `None` if it is gone (or, recorded, unreadable).
    async fn children_and_stat(&self, path: &str) -> Result<Option<(Vec<String>, Stat)>> {
        self.count();
        let fixed = self.client.fix_path(path);
        let f = fixed.as_str();
        match self.client.with_retry(path, None, |zk| async move { zk.get_children(f).await }).await {
            Ok((names, stat)) => Ok(Some((names, stat.into()))),
            Err(e) if e.code() == Some(ErrorCode::NoNode) => Ok(None),
            Err(e) if e.code() == Some(ErrorCode::NoAuth) => {
                tracing::debug!(path, "inspect: not allowed to list; skipped");
                self.unreadable.lock().push(path.to_string());
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// `path`'s children; `None` if it is gone (or, recorded, unreadable).
    async fn children(&self, path: &str) -> Result<Option<Vec<String>>> {
        self.count();
        match self.client.get_children(path).await {
            Ok(names) => Ok(Some(names)),
            Err(e) if e.code() == Some(ErrorCode::NoNode) => Ok(None),
            Err(e) if e.code() == Some(ErrorCode::NoAuth) => {
                tracing::debug!(path, "inspect: not allowed to list; skipped");
                self.unreadable.lock().push(path.to_string());
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// A holder from its node; `None` if the node is gone.
    async fn holder(&self, node: String) -> Result<Option<LockHolder>> {
        self.count();
        match self.client.get_data(&node).undecompressed().await {
            Ok((data, stat)) => Ok(Some(LockHolder {
                node,
                session: stat.ephemeral_owner,
                created_ms: stat.ctime,
                held: since(stat.ctime),
                data,
            })),
            Err(e) if e.code() == Some(ErrorCode::NoNode) => Ok(None),
            Err(e) if e.code() == Some(ErrorCode::NoAuth) => {
                // Not allowed to read its data (a creator-only ACL); `exists` needs no permission,
                // so the holder is still reported, without data.
                tracing::debug!(node, "inspect: not allowed to read a holder's data");
                self.unreadable.lock().push(node.clone());
                Ok(self.stat(&node).await?.map(|stat| LockHolder {
                    node,
                    session: stat.ephemeral_owner,
                    created_ms: stat.ctime,
                    held: since(stat.ctime),
                    data: Vec::new(),
                }))
            }
            Err(e) => Err(e),
        }
    }

    async fn stat(&self, node: &str) -> Result<Option<Stat>> {
        self.count();
        self.client.exists(node).await
    }

    /// The holders of `nodes`, read together, in the same order (gone ones left out).
    async fn holders(&self, nodes: Vec<String>) -> Result<Vec<LockHolder>> {
        let read = join_all(nodes.into_iter().map(|node| self.holder(node)).collect()).await;
        let mut holders = Vec::with_capacity(read.len());
        for holder in read {
            holders.extend(holder?);
        }
        Ok(holders)
    }

    /// A mutex, latch or read-write lock whose children are `names`.
    async fn queue(&self, path: &str, names: &[String]) -> Result<Option<LockInfo>> {
        let is_rw = |n: &str| n.contains(READ_LOCK_NAME) || n.contains(WRITE_LOCK_NAME);
        let (kind, holders, waiters): (LockKind, Vec<String>, Vec<String>) =
            if names.iter().any(|n| n == NONFAIR_LOCK_NAME) {
                // One node, the holder; waiters only watch it.
                (LockKind::NonFairMutex, vec![child(path, NONFAIR_LOCK_NAME)], Vec::new())
            } else if names.iter().any(|n| is_rw(n) && is_lock_node(n)) {
                // Every child is in the queue, sorted as the recipe sorts it (a foreign child that
                // sorts first keeps writers out, as in Curator); only lock nodes are reported.
                let sorted = sorted_by(names, read_write_sort_key);
                let (mut holders, mut waiters) = (Vec::new(), Vec::new());
                for (i, name) in sorted.iter().enumerate() {
                    if !is_rw(name) || !is_lock_node(name) {
                        continue;
                    }
                    let holds = if name.contains(WRITE_LOCK_NAME) {
                        i == 0
                    } else {
                        // A reader holds unless a writer sorts strictly before it (a downgrading
                        // writer's read node carries the writer's own sequence number).
                        !sorted[..i].iter().any(|w| {
                            w.contains(WRITE_LOCK_NAME)
                                && java_cmp(read_write_sort_key(w), read_write_sort_key(name)) == Ordering::Less
                        })
                    };
                    (if holds { &mut holders } else { &mut waiters }).push(child(path, name));
                }
                (LockKind::ReadWrite, holders, waiters)
            } else {
                // As the recipe (and Curator): every child is a contender, the first in sort order
                // holds (leads, for a latch).
                let (kind, lock_name) = if names.iter().any(|n| n.contains(LATCH_LOCK_NAME) && is_lock_node(n)) {
                    (LockKind::Latch, LATCH_LOCK_NAME)
                } else {
                    (LockKind::Mutex, MUTEX_LOCK_NAME)
                };
                let sorted = sorted_by(names, |n| standard_sort_key(n, lock_name));
                let (mut holders, mut waiters) = (Vec::new(), Vec::new());
                for (i, name) in sorted.iter().enumerate() {
                    if name.contains(lock_name) && is_lock_node(name) {
                        (if i == 0 { &mut holders } else { &mut waiters }).push(child(path, name));
                    }
                }
                (kind, holders, waiters)
            };
        if holders.is_empty() && waiters.is_empty() {
            return Ok(None);
        }
        let oldest_wait = self.first_wait(&waiters).await?;
        let holders = self.holders(holders).await?;
        let lease_limit = match kind {
            LockKind::Mutex | LockKind::Latch | LockKind::NonFairMutex => Some(1),
            _ => None,
        };
        Ok(Some(LockInfo { path: path.to_string(), kind, holders, pending: None, waiters, oldest_wait, lease_limit }))
    }

    async fn first_wait(&self, waiters: &[String]) -> Result<Option<Duration>> {
        match waiters.first() {
            Some(first) => Ok(self.stat(first).await?.map(|s| since(s.ctime))),
            None => Ok(None),
        }
    }

    /// The semaphore at `path`: leases under `path/leases`, acquirers queued on `path/locks`.
    /// Children of those two that are not lock nodes go to `subdirs`.
    async fn semaphore(&self, path: &str, subdirs: &mut Vec<String>) -> Result<Option<LockInfo>> {
        let (leases_path, locks_path) = (child(path, SEMAPHORE_LEASE_PARENT), child(path, SEMAPHORE_LOCK_PARENT));
        let mut leases = self.children(&leases_path).await?.unwrap_or_default();
        leases.sort();
        let locks = {
            let mut locks = self.children(&locks_path).await?.unwrap_or_default();
            locks.sort();
            locks
        };
        for (parent, names) in [(&leases_path, &leases), (&locks_path, &locks)] {
            subdirs.extend(names.iter().filter(|n| !is_lock_node(n)).map(|n| child(parent, n)));
        }
        leases.retain(|n| n.contains(LEASE_NODE_NAME) && is_lock_node(n));
        leases.sort_by_key(|n| (parse_sequence(n), n.clone()));
        let waiters: Vec<String> = sorted_by(&locks, |n| standard_sort_key(n, MUTEX_LOCK_NAME))
            .into_iter()
            .filter(|n| n.contains(MUTEX_LOCK_NAME) && is_lock_node(n))
            .map(|n| child(&locks_path, n))
            .collect();
        if leases.is_empty() && waiters.is_empty() {
            return Ok(None);
        }
        let deciding = match waiters.first() {
            Some(first) => self.stat(first).await?,
            None => None,
        };
        let mut holders = self.holders(leases.iter().map(|l| child(&leases_path, l)).collect()).await?;
        // The first acquirer queued on the internal lock holds it; if the newest lease is of its
        // session, it created that lease and waits for it to be granted.
        let mut pending = None;
        if let (Some(deciding), Some(newest)) = (&deciding, holders.last()) {
            let newest_is_latest = leases.last().map(|l| child(&leases_path, l)) == Some(newest.node.clone());
            if newest_is_latest && deciding.ephemeral_owner != 0 && deciding.ephemeral_owner == newest.session {
                pending = holders.pop().map(|h| h.node);
            }
        }
        Ok(Some(LockInfo {
            path: path.to_string(),
            kind: LockKind::Semaphore,
            holders,
            pending,
            waiters,
            oldest_wait: deciding.map(|s| since(s.ctime)),
            lease_limit: None,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_nodes_are_recognised_by_name_and_sequence() {
        assert!(is_lock_node("_c_6f1a4e0e-8a47-4ad8-9a39-0e1b1f2a3b4c-lock-0000000003"));
        assert!(is_lock_node("lock-0000000003"));
        assert!(is_lock_node("_c_6f1a4e0e-8a47-4ad8-9a39-0e1b1f2a3b4c-__READ__0000000003"));
        assert!(is_lock_node("_c_6f1a4e0e-8a47-4ad8-9a39-0e1b1f2a3b4c-latch-0000000012"));
        assert!(is_lock_node("_c_6f1a4e0e-8a47-4ad8-9a39-0e1b1f2a3b4c-lease-0000000012"));
        assert!(!is_lock_node("locks"));
        assert!(!is_lock_node("leases"));
        assert!(!is_lock_node("my-lock-dir"));
        assert!(!is_lock_node("job-0000000001"));
        assert_eq!(child("/", "a"), "/a");
        assert_eq!(child("/a", "b"), "/a/b");
    }
}

#[cfg(all(test, feature = "serde"))]
mod serde_tests {
    use std::time::Duration;

    use super::{LockHolder, LockInfo, LockKind};

    #[test]
    fn a_lock_serialises_in_the_shape_of_inspect_json() {
        let holder = LockHolder {
            node: "/l/_c_x-lock-0000000001".into(),
            session: 0x1000042f57c0001,
            created_ms: 1_700_000_000_000,
            held: Duration::from_millis(1500),
            data: b"h\"o\\s\nt\x01:\xff".to_vec(),
        };
        let lock = LockInfo {
            path: "/l".into(),
            kind: LockKind::ReadWrite,
            holders: vec![holder],
            pending: None,
            waiters: vec!["/l/_c_y-lock-0000000002".into()],
            oldest_wait: Some(Duration::from_micros(2500)),
            lease_limit: Some(1),
        };
        let expected = concat!(
            r#"{"path":"/l","kind":"read-write","holders":[{"node":"/l/_c_x-lock-0000000001","#,
            r#""session":"0x1000042f57c0001","created_ms":1700000000000,"held_ms":1500,"#,
            r#""data":"h\"o\\s\nt\u0001:"#,
            "\u{fffd}",
            r#""}],"waiters":1,"oldest_wait_ms":2,"lease_limit":1,"pending":null,"#,
            r#""waiting_nodes":["/l/_c_y-lock-0000000002"]}"#,
        );
        assert_eq!(serde_json::to_string(&lock).unwrap(), expected);
    }
}

// ---- barriers ------------------------------------------------------------------------------

/// The state of a double barrier's `ready` node (see [`BarrierInfo`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize), serde(rename_all = "kebab-case"))]
#[non_exhaustive]
pub enum BarrierReady {
    /// The round's members have entered and nobody has left yet.
    Open,
    /// A member has started leaving (zk-curator's members close the round); entrants wait.
    Closed,
}

/// A member node of a double barrier.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct BarrierMember {
    /// The member's node (full path).
    pub node: String,
    /// The session that owns it (0 for a node that is not ephemeral).
    pub session: i64,
    /// How long it has been there.
    pub since: Duration,
}

/// What a barrier path holds (see [`inspect_barrier`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct BarrierInfo {
    /// The barrier's path.
    pub path: String,
    /// A double barrier's members (its children other than `ready`), oldest first; empty for a
    /// [`DistributedBarrier`](crate::barriers::DistributedBarrier), whose node being there means it is set.
    pub members: Vec<BarrierMember>,
    /// A double barrier's `ready` node, if there.
    pub ready: Option<BarrierReady>,
}

/// Who is at the barrier at `path`: `None` when its node does not exist (a
/// [`DistributedBarrier`](crate::barriers::DistributedBarrier) that is not set, a double barrier nobody
/// entered); else a double barrier's members and its `ready` state. Costs one `getChildren` and
/// one `exists` per child, pipelined.
///
/// # Errors
///
/// [`Error::InvalidPath`] for a bad `path`; the server's or the connection's error.
///
/// # Cancel safety
///
/// Cancel safe: it only reads.
///
/// # Examples
///
/// ```no_run
/// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
/// if let Some(barrier) = zk_curator::inspect::inspect_barrier(&client, "/barriers/batch").await? {
///     println!("{} members, ready: {:?}", barrier.members.len(), barrier.ready);
/// }
/// # Ok(()) }
/// ```
pub async fn inspect_barrier(client: &CuratorClient, path: &str) -> Result<Option<BarrierInfo>> {
    validate_path(path)?;
    let names = match client.get_children(path).await {
        Ok(names) => names,
        Err(e) if e.code() == Some(ErrorCode::NoNode) => return Ok(None),
        Err(e) => return Err(e),
    };
    let nodes: Vec<String> = names.iter().map(|n| child(path, n)).collect();
    let stats = join_all(nodes.iter().map(|n| std::future::IntoFuture::into_future(client.exists(n))).collect()).await;
    let mut members = Vec::new();
    let mut ready = None;
    for ((name, node), stat) in names.iter().zip(nodes).zip(stats) {
        let Some(stat) = stat? else { continue };
        if name == crate::barriers::READY_NODE_NAME {
            ready = Some(if stat.version == 0 { BarrierReady::Open } else { BarrierReady::Closed });
        } else {
            members.push((stat.czxid, BarrierMember { node, session: stat.ephemeral_owner, since: since(stat.ctime) }));
        }
    }
    members.sort_by_key(|(czxid, _)| *czxid);
    let members = members.into_iter().map(|(_, m)| m).collect();
    Ok(Some(BarrierInfo { path: path.to_string(), members, ready }))
}

// ---- queues --------------------------------------------------------------------------------

/// An item being processed, found by [`inspect_queue`]: an item node that has a lock node.
///
/// Serialised (feature `serde`) as `zk-curator inspect --lock-path L --json` prints it: `item` and
/// `lock` (a holder's shape: `node`, `session`, `created_ms`, `held_ms`, `data`).
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct InFlightItem {
    /// The item node, full path (within the client's namespace).
    pub item: String,
    /// Its lock node `<lock path>/<item node name>`: its session is the consumer processing the
    /// item, its age how long it has been processed.
    pub lock: LockHolder,
}

/// A queue found by [`inspect_queue`] (Curator's `DistributedQueue` layout, the priority, delay
/// and id kinds included): how many item nodes it holds and which are in flight.
///
/// Serialised (feature `serde`) as `zk-curator inspect --json` prints it, with `"kind": "queue"`:
/// `path`, `lock_path`, `depth`, `in_flight`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct QueueInfo {
    /// The queue path.
    pub path: String,
    /// The lock path it was inspected with (guaranteed delivery), if any.
    pub lock_path: Option<String>,
    /// Item nodes (`queue-…`) in the queue, in flight or not. A node of `put_multi` holds several
    /// items and counts once.
    pub depth: usize,
    /// The item nodes that have a lock node under the lock path, in queue (name) order; empty
    /// without a lock path (at most once: a consumer deletes a node before processing it).
    pub in_flight: Vec<InFlightItem>,
}

/// The queue at `path`: its depth (item nodes `queue-…`) and, given its `lock_path`, the items
/// in flight with the session of the consumer holding each. `None` when `path` does not exist.
/// Costs a `getChildren` of each path and a `getData` per item in flight, pipelined.
///
/// # Errors
///
/// [`Error::InvalidPath`] for a bad path; the server's or the connection's error.
///
/// # Cancel safety
///
/// Cancel safe: it only reads.
///
/// # Examples
///
/// ```no_run
/// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
/// if let Some(queue) = zk_curator::inspect::inspect_queue(&client, "/jobs/queue", Some("/jobs/locks")).await? {
///     println!("{} items, {} in flight", queue.depth, queue.in_flight.len());
/// }
/// # Ok(()) }
/// ```
pub async fn inspect_queue(client: &CuratorClient, path: &str, lock_path: Option<&str>) -> Result<Option<QueueInfo>> {
    validate_path(path)?;
    if let Some(lock) = lock_path {
        validate_path(lock)?;
    }
    let walk = Walk::new(client);
    let Some(names) = walk.children(path).await? else { return Ok(None) };
    let mut items: Vec<String> = names.into_iter().filter(|n| n.starts_with(crate::queue::ITEM_NODE_PREFIX)).collect();
    items.sort();
    let mut in_flight = Vec::new();
    if let Some(lock) = lock_path {
        let locks: std::collections::BTreeSet<String> =
            walk.children(lock).await?.unwrap_or_default().into_iter().collect();
        let held: Vec<&String> = items.iter().filter(|n| locks.contains(*n)).collect();
        let holders = walk.holders(held.iter().map(|n| child(lock, n)).collect()).await?;
        for holder in holders {
            let name = holder.node.rsplit('/').next().unwrap_or_default();
            in_flight.push(InFlightItem { item: child(path, name), lock: holder });
        }
    }
    Ok(Some(QueueInfo {
        path: path.to_string(),
        lock_path: lock_path.map(str::to_string),
        depth: items.len(),
        in_flight,
    }))
}

// ---- service discovery ---------------------------------------------------------------------

/// One instance of a service found by [`inspect_services`], as Curator's JSON in its node says.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct InstanceSummary {
    /// The instance's node, full path.
    pub node: String,
    /// Its id (the node's name, without the sequence of a `DYNAMIC_SEQUENTIAL` instance).
    pub id: String,
    /// Its address, if set.
    pub address: Option<String>,
    /// Its port, if set.
    pub port: Option<u16>,
    /// Its SSL port, if set.
    pub ssl_port: Option<u16>,
    /// Its service type as Curator writes it: `DYNAMIC`, `STATIC`, `PERMANENT`,
    /// `DYNAMIC_SEQUENTIAL`.
    pub service_type: &'static str,
    /// Whether it takes traffic (Curator's `enabled`; true when the JSON does not say).
    pub enabled: bool,
    /// The session owning its node (`ephemeralOwner`), 0 for a persistent (`STATIC`,
    /// `PERMANENT`) instance. Serialised as hex, as a lock holder's.
    #[cfg_attr(feature = "serde", serde(serialize_with = "json::session_hex"))]
    pub session: i64,
}

/// A node under a service that is not an instance (another writer's data, a truncated write).
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct MalformedInstance {
    /// The node, full path.
    pub node: String,
    /// Why it cannot be read as an instance.
    pub error: String,
}

/// A service of a curator-x-discovery registry (`base/NAME/ID`), found by [`inspect_services`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct ServiceSummary {
    /// The service's node, full path (its parent is the registry's base path).
    pub path: String,
    /// The service's name (the node's name).
    pub name: String,
    /// Its instances, by node name.
    pub instances: Vec<InstanceSummary>,
    /// Its nodes that are not instances, by node name.
    pub malformed: Vec<MalformedInstance>,
}

/// What [`inspect_services`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct ServicesInspection {
    /// The services, by path.
    pub services: Vec<ServiceSummary>,
    /// Whether a limit of [`InspectOptions`] stopped the walk (services below, or whose
    /// instances did not all fit in `max_listings`, are missing).
    pub truncated: bool,
    /// Paths that could not be read for lack of permission (skipped).
    pub unreadable: Vec<String>,
    /// The requests sent.
    pub requests: usize,
}

/// Every curator-x-discovery service under `root` (itself included), whoever registered it
/// (zk-curator or Curator): its instances with address, ports, type and `enabled`, and the nodes
/// under it that are not instances.
///
/// A node is a service when at least one of its children holds Curator's instance JSON naming
/// it (`"name"` equal to the node's name) or naming the child (`"id"` equal to the child's name,
/// followed by its sequence number for a `DYNAMIC_SEQUENTIAL` instance); then every child that
/// is such an instance is listed as one, every other one (not JSON, or JSON naming neither) is
/// [malformed](ServiceSummary::malformed). [`inspect_with`] does not list a service's ephemeral
/// instances as a group's members.
///
/// Cost: one `getData` per node under `root` and one `getChildren` per node that has children,
/// up to 16 requests in flight at a time. [`InspectOptions::max_listings`] bounds the reads:
/// every `getChildren` and every `getData` counts one, so [`ServicesInspection::requests`]
/// never exceeds it; a directory whose children no longer all fit is not read, and the walk
/// stops there ([`ServicesInspection::truncated`]), so a service is listed whole or not at all.
/// Its `max_depth` bounds the levels. Nodes that go away meanwhile are skipped.
///
/// # Errors
///
/// [`Error::InvalidPath`] for a bad `root`; an option of 0 listings is
/// [`Error::InvalidArgument`]; the server's or the connection's error if a read fails other than
/// with `NoNode` (skipped) or `NoAuth` (listed in [`ServicesInspection::unreadable`]).
///
/// # Cancel safety
///
/// Cancel safe: it only reads.
///
/// # Examples
///
/// ```no_run
/// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
/// use zk_curator::inspect::{inspect_services, InspectOptions};
///
/// for service in inspect_services(&client, "/services", &InspectOptions::new()).await?.services {
///     println!("{}: {} instance(s), {} malformed", service.name, service.instances.len(), service.malformed.len());
/// }
/// # Ok(()) }
/// ```
#[cfg(feature = "discovery")]
#[cfg_attr(docsrs, doc(cfg(feature = "discovery")))]
pub async fn inspect_services(
    client: &CuratorClient,
    root: &str,
    options: &InspectOptions,
) -> Result<ServicesInspection> {
    validate_path(root)?;
    if options.max_listings == 0 {
        return Err(Error::invalid_argument("max_listings", 0, "must be at least 1"));
    }
    let walk = Walk::new(client);
    let mut services = Vec::new();
    let mut truncated = false;
    // Reads left: every getChildren and every getData counts one.
    let mut budget = options.max_listings;
    // Level by level: a directory's children are read together, then told apart.
    let mut level = vec![root.to_string()];
    let mut depth = 0usize;
    'walk: while !level.is_empty() && depth <= options.max_depth {
        let mut next = Vec::new();
        for chunk in level.chunks(CONCURRENCY) {
            if budget < chunk.len() {
                truncated = true;
            }
            let chunk = &chunk[..chunk.len().min(budget)];
            if chunk.is_empty() {
                break 'walk;
            }
            budget -= chunk.len();
            let listed = join_all(chunk.iter().map(|dir| walk.children(dir)).collect()).await;
            for (dir, names) in chunk.iter().zip(listed) {
                let Some(mut names) = names? else { continue };
                if names.is_empty() {
                    continue;
                }
                // A service read in part would be wrong (missing instances), so a directory
                // whose children do not all fit stops the walk before any is read.
                if budget < names.len() {
                    truncated = true;
                    break 'walk;
                }
                budget -= names.len();
                names.sort();
                let nodes: Vec<String> = names.iter().map(|n| child(dir, n)).collect();
                let mut found = Vec::with_capacity(nodes.len());
                for part in nodes.chunks(CONCURRENCY) {
                    let data = join_all(part.iter().map(|node| walk.data(node)).collect()).await;
                    for (node, data) in part.iter().zip(data) {
                        if let Some((data, stat)) = data? {
                            found.push((node.clone(), data, stat));
                        }
                    }
                }
                match service_of(dir, found) {
                    Some(service) => services.push(service),
                    // Not a service: its children may be (a base path), or hold some.
                    None => next.extend(nodes),
                }
            }
        }
        if truncated {
            break;
        }
        if depth == options.max_depth && !next.is_empty() {
            truncated = true;
            break;
        }
        level = next;
        depth += 1;
    }
    services.sort_by(|a, b| a.path.cmp(&b.path));
    let (unreadable, requests) = walk.into_parts();
    Ok(ServicesInspection { services, truncated, unreadable, requests })
}

/// `dir` as a service, from its children's nodes (path, data, stat): `None` when none of them
/// is an instance of it.
#[cfg(feature = "discovery")]
fn service_of(dir: &str, children: Vec<(String, Vec<u8>, Stat)>) -> Option<ServiceSummary> {
    let name = dir.rsplit('/').next().unwrap_or(dir);
    let mut instances = Vec::new();
    let mut malformed = Vec::new();
    for (node, data, stat) in children {
        match instance_of(dir, &node, &data) {
            Ok(instance) => instances.push(InstanceSummary {
                node,
                id: instance.id().to_string(),
                address: instance.address().map(str::to_string),
                port: instance.port(),
                ssl_port: instance.ssl_port(),
                service_type: instance.service_type().wire_name(),
                enabled: instance.is_enabled(),
                session: stat.ephemeral_owner,
            }),
            Err(error) => malformed.push(MalformedInstance { node, error }),
        }
    }
    (!instances.is_empty()).then(|| ServiceSummary {
        path: dir.to_string(),
        name: name.to_string(),
        instances,
        malformed,
    })
}

/// `data` of `node` (a child of `dir`) as a curator-x-discovery instance of the service at `dir`:
/// Curator's JSON naming the service (`"name"` equal to `dir`'s name, the default
/// `DiscoveryPathConstructor`) or the node (`"id"` equal to its name, followed by a sequence
/// number for a `DYNAMIC_SEQUENTIAL` instance; a custom path constructor's). Otherwise why not.
///
/// Both are needed: Curator's reader is lenient (missing fields take defaults), so any JSON
/// object reads as an instance, and a group member's data may be one.
#[cfg(feature = "discovery")]
fn instance_of(
    dir: &str,
    node: &str,
    data: &[u8],
) -> std::result::Result<crate::discovery::ServiceInstance<serde_json::Value>, String> {
    use crate::discovery::{InstanceSerializer, JsonInstanceSerializer};
    let service = dir.rsplit('/').next().unwrap_or(dir);
    let node_name = node.rsplit('/').next().unwrap_or(node);
    let instance = InstanceSerializer::<serde_json::Value>::deserialize(&JsonInstanceSerializer::new(), data)
        .map_err(|e| e.to_string())?;
    let id = instance.id();
    let names_the_node = !id.is_empty()
        && node_name
            .strip_prefix(id)
            .is_some_and(|rest| rest.is_empty() || rest.len() >= 10 && rest.bytes().all(|b| b.is_ascii_digit()));
    if instance.name() == service || names_the_node {
        Ok(instance)
    } else {
        Err(format!(
            "not an instance of this service: its JSON names service {:?}, id {:?}",
            instance.name(),
            instance.id()
        ))
    }
}

/// Whether the group at `group` is a curator-x-discovery service: one of its members holds an
/// instance of it ([`instance_of`]). Such a group is listed by [`inspect_services`], not as a
/// lock.
#[cfg(feature = "discovery")]
fn is_discovery_service(group: &str, members: &[LockHolder]) -> bool {
    members.iter().any(|m| instance_of(group, &m.node, &m.data).is_ok())
}

impl Walk<'_> {
    /// `node`'s data and stat; `None` if it is gone (or, recorded, unreadable).
    #[cfg(feature = "discovery")]
    async fn data(&self, node: &str) -> Result<Option<(Vec<u8>, Stat)>> {
        self.count();
        match self.client.get_data(node).undecompressed().await {
            Ok(read) => Ok(Some(read)),
            Err(e) if e.code() == Some(ErrorCode::NoNode) => Ok(None),
            Err(e) if e.code() == Some(ErrorCode::NoAuth) => {
                tracing::debug!(node, "inspect: not allowed to read; skipped");
                self.unreadable.lock().push(node.to_string());
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }
}
