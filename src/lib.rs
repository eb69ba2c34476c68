//! # zk-curator
//!
//! Apache Curator's ZooKeeper lock recipes for async Rust, wire-compatible with Curator: a Rust
//! service and a Java service using Curator on the same lock path exclude each other.
//!
//! The crate has the same layers as Curator:
//!
//! * the framework: [`CuratorClient`] (Curator's `CuratorFramework`): session recovery,
//!   connection states, retry policies, namespaces, protected creates and guaranteed deletes, and
//!   Curator's data API ([`create`](CuratorClient::create), [`get_data`](CuratorClient::get_data),
//!   [`set_data`](CuratorClient::set_data), [`exists`](CuratorClient::exists),
//!   [`get_children`](CuratorClient::get_children), [`delete`](CuratorClient::delete),
//!   [`watch`](CuratorClient::watch), [`commit`](CuratorClient::commit) of a [`Transaction`]) in
//!   the crate's own types ([`CreateMode`], [`Acl`], [`Stat`], [`ErrorCode`], …);
//! * the lock machinery — a reentrancy map, the (internal) `LockInternals` loop, pluggable
//!   [`LockDriver`]s (written with the [`driver`] module) — and the recipes built on them: [`InterProcessMutex`], [`InterProcessNonFairMutex`], [`InterProcessReadWriteLock`],
//!   [`InterProcessSemaphoreV2`] (with its [`Lease`]s) and [`InterProcessSemaphoreMutex`], and
//!   [`InterProcessMultiLock`] (several locks taken as one), with revocation ([`Revoker`]) and a
//!   common [`InterProcessLock`] trait;
//! * leader election on the same layers: [`LeaderLatch`] and [`LeaderSelector`] (Curator's
//!   `recipes/leader`);
//! * caches: [`CuratorCache`] (Curator's `recipes/cache`), a local copy of a node, its children
//!   or a tree that always converges to the server, with a stream of its changes;
//! * [`IdempotencyKeys`]: one execution per request id (Stripe-style idempotency keys): an
//!   ephemeral claim while a request runs, its recorded result for every duplicate after;
//! * [`WorkClaims`]: lock-tag batch claims of work items (claim a batch, complete or release,
//!   reclaim a stuck holder's items, wait for work on one re-used watch);
//! * `discovery` (feature `discovery`): service discovery wire-compatible with Curator's
//!   `curator-x-discovery` — register, cache and pick service instances in one registry with Java
//!   services;
//! * [`inspect()`]: every lock under a path, whoever made it, with its holders (session, hold time,
//!   node data) and waiters — the library side of `zk-curator inspect`;
//! * [`blocking`]: the client with its data API, the mutex, the read-write lock, the semaphores,
//!   the multi-lock and leader election for plain threads (like `reqwest::blocking`), with the
//!   same promises and Curator-style holds owned by the calling thread, as in Curator;
//! * `testing` (feature `testing`): a real ZooKeeper for tests, like Curator's `TestingServer`;
//! * metrics (feature `metrics`): acquire wait and hold time histograms, holds lost by cause,
//!   waiters and connection state changes, labelled by recipe and lock path, on the
//!   [`metrics`](https://docs.rs/metrics) facade for any exporter (Prometheus, StatsD, …); the path
//!   label is set per client with `CuratorClientBuilder::metrics_path_label`. Names, labels and
//!   units: docs/observability.md. Without the feature nothing of it is compiled.
//!
//! The `zk-curator` command (feature `cli`) runs a command under any of these locks
//! (`zk-curator lock PATH -- COMMAND`), and lists or holds them.
//!
//! Beyond Curator, every acquire is cancel safe (a dropped future leaves no node behind), a release
//! never forgets a node it failed to delete, deadlines are strict, a hold is only handed out while
//! it is held, and every hold carries a fencing token.
//!
//! Time limits follow one rule, in every recipe, async and blocking (docs/failure-semantics.md,
//! "Time limits", has it with a table of every timed call): a wait for a state that another
//! party or the cluster decides (a lock, a lease, leadership, a barrier, a first create, a
//! connection, a cache's load) returns whether it got there — `Ok(false)` / `Ok(None)` on
//! time-out, as Curator's `boolean` / `null`; an operation that runs out of time (a data request,
//! a counter update, `begin_within`) fails with [`Error::DeadlineExceeded`] naming the path and the
//! timeout. Every timed call takes a [`Deadline`]: a `Duration`, or an `Instant` for chained waits.
//!
//! Everything is re-exported at the crate root; the modules are private, but for [`blocking`],
//! `testing`, [`driver`] (for writing a lock driver; its helper functions are only there) and
//! [`raw`]: the `zookeeper-client` crate underneath, the one place it appears, outside the semver
//! promise.
//!
//! Lead with guards ([`InterProcessMutex::lock`], `try_lock_for`, …): a guard owns its hold, moves
//! between tasks, and releases on drop. The Curator-style `acquire`/`release` pair is for ports of
//! Curator code; its hold belongs to the calling task, which must release it on every path — see
//! the two-model table on [`InterProcessMutex`].
//!
//! ```no_run
//! use std::time::Duration;
//! use zk_curator::{CuratorClient, InterProcessMutex};
//!
//! # async fn demo() -> zk_curator::Result<()> {
//! let client = CuratorClient::connect("127.0.0.1:2181").await?;
//! let mutex = InterProcessMutex::new(&client, "/locks/nightly-report")?;
//! if let Some(guard) = mutex.try_lock_for(Duration::from_secs(5)).await? {
//!     // ... generate the report, passing guard.fencing_token() to the store ...
//!     guard.release().await?;
//! }
//! # Ok(()) }
//! ```

#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

/// The examples of README.md, compiled (and run: they only define functions) by
/// `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// The examples of docs/security.md, which need the `tls` and `sasl` features.
#[cfg(all(doctest, feature = "tls", feature = "sasl"))]
#[doc = include_str!("../docs/security.md")]
struct SecurityDoctests;

mod atomic;
mod barriers;
pub mod blocking;
mod cache;
mod claims;
mod deadline;
#[cfg(feature = "discovery")]
#[cfg_attr(docsrs, doc(cfg(feature = "discovery")))]
pub mod discovery;
mod error;
mod feed;
mod framework;
mod idempotency;
mod inspect;
mod leader;
mod locks;
mod metrics;
mod nodes;
pub mod raw;
mod shared;
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;

pub use atomic::{
    AtomicNumber, AtomicStats, AtomicValue, DistributedAtomicInteger, DistributedAtomicLong, DistributedAtomicNumber,
    DistributedAtomicValue, PromotedToLock,
};
pub use barriers::{DistributedBarrier, DistributedDoubleBarrier, READY_NODE_NAME};
pub use cache::{CacheEntry, CacheEvent, CacheEventStream, CacheMode, CacheState, CuratorCache, CuratorCacheBuilder};
pub use claims::{Claim, ClaimState, Reclaimed, WorkClaims};
pub use deadline::Deadline;
pub use error::{Error, ErrorCode, ErrorDetail, ErrorKind, Result};
#[cfg(feature = "sasl")]
pub use framework::SaslOptions;
#[cfg(feature = "tls")]
pub use framework::TlsOptions;
pub use framework::{
    is_protected, parse_sequence, strip_protection, validate_path, Acl, AclProvider, BoundedExponentialBackoffRetry,
    CommitBuilder, ConnectionState, ConnectionStateErrorPolicy, ConnectionStateStream, CreateBuilder, CreateMode,
    CreatedNode, CuratorClient, CuratorClientBuilder, DefaultAclProvider, DeleteBuilder, DeleteOutcome, EventType,
    ExistsBuilder, ExistsWatchBuilder, ExponentialBackoffRetry, GetChildrenBuilder, GetChildrenWatchBuilder,
    GetDataBuilder, GetDataWatchBuilder, Id, OpResult, Permissions, PersistentWatchBuilder, RetryForever, RetryNTimes,
    RetryOneTime, RetryPolicy, RetryUntilElapsed, SessionIdentity, SetDataBuilder, Stat, Transaction, Watch,
    WatchStream, WatchedEvent, DEFAULT_CONNECTION_TIMEOUT, DEFAULT_MAX_CLOSE_WAIT, DEFAULT_MAX_DATA_SIZE,
    DEFAULT_SESSION_TIMEOUT, DEFAULT_SIMULATED_SESSION_EXPIRATION_PERCENT,
};
pub use idempotency::{Begin, IdempotencyClaim, IdempotencyKeys, Retention, Settled, MAX_IDEMPOTENCY_KEY_LEN};
pub use inspect::{
    inspect, inspect_barrier, inspect_lock, inspect_with, BarrierInfo, BarrierMember, BarrierReady, InspectOptions,
    Inspection, LockHolder, LockInfo, LockKind,
};
pub use leader::{
    CloseMode, LatchState, LeaderLatch, LeaderSelector, Leadership, LeadershipState, LeadershipStream, Participant,
    LATCH_LOCK_NAME, SELECTOR_LOCK_NAME,
};
pub use locks::{
    return_all, Contender, FencingToken, GuardedWrite, Hold, HoldState, HoldStateStream, HolderId, InterProcessLock,
    InterProcessMultiLock, InterProcessMutex, InterProcessNonFairMutex, InterProcessReadWriteLock,
    InterProcessSemaphoreMutex, InterProcessSemaphoreV2, Lease, LeaseDriver, LockDriver, LockFuture, MutexGuard,
    NodeSpec, ReadLock, ReadLockDriver, ReadLockGuard, Revoker, StandardLockDriver, Verdict, WriteLock,
    WriteLockDriver, WriteLockGuard, LEASE_NODE_NAME, NONFAIR_LOCK_NAME, READ_LOCK_NAME, SEMAPHORE_LEASE_PARENT,
    SEMAPHORE_LOCK_PARENT, WRITE_LOCK_NAME,
};
pub use nodes::{
    GroupMember, MembershipEvent, MembershipStream, NodeState, PersistentNode, PersistentTtlNode, Protection,
    TTL_TOUCH_NODE_NAME,
};
pub use shared::{SharedCount, SharedValue, SharedValueStream, VersionedValue};

pub mod driver {
    //! For writing a [`LockDriver`]: the policy that names, sorts and judges a lock's nodes (Curator's
    //! `LockInternalsDriver`), and the helpers the crate's own drivers are made of.
    //!
    //! A driver decides three things for [`InterProcessMutex::with_driver`](crate::InterProcessMutex::with_driver): the node a contender
    //! creates ([`NodeSpec`]), the order of the lock's children (a sort key, compared like Java's
    //! `String.compareTo`: [`java_cmp`]), and, for one contender, whether it holds the lock or what
    //! it waits for ([`Verdict`]). [`StandardLockDriver`] is Curator's (first in sequence order holds);
    //! [`standard_sort_key`], [`standard_verdict`], [`standard_evaluate`] and [`evaluate_by_key`] are
    //! its parts, for a driver that changes only one of them; [`read_write_sort_key`],
    //! [`ReadLockDriver`], [`WriteLockDriver`] and [`LeaseDriver`] are the read-write lock's and the
    //! semaphore's.
    //!
    //! The trait and the drivers are also at the crate root; the helper functions only here.

    pub use crate::locks::{
        evaluate_by_key, java_cmp, read_write_sort_key, standard_evaluate, standard_sort_key, standard_verdict,
        Contender, LeaseDriver, LockDriver, NodeSpec, ReadLockDriver, StandardLockDriver, Verdict, WriteLockDriver,
    };
}
