//! # zk-curator
//!
//! Apache Curator's ZooKeeper recipes for async Rust, wire-compatible with Curator: a Rust
//! service and a Java service using Curator on the same lock path exclude each other.
//!
//! The crate has the same layers as Curator, and reads by family as Curator's packages do:
//!
//! * the framework: [`CuratorClient`] (Curator's `CuratorFramework`): session recovery,
//!   connection states, retry policies, namespaces, protected creates and guaranteed deletes, and
//!   Curator's data API ([`create`](CuratorClient::create), [`get_data`](CuratorClient::get_data),
//!   [`set_data`](CuratorClient::set_data), [`exists`](CuratorClient::exists),
//!   [`get_children`](CuratorClient::get_children), [`delete`](CuratorClient::delete),
//!   [`watch`](CuratorClient::watch), [`commit`](CuratorClient::commit) of a [`Transaction`]) in
//!   the crate's own types ([`CreateMode`], [`Acl`], [`Stat`], [`ErrorCode`], …);
//! * and one module per family of recipes, each opening with what the family is, its Curator
//!   counterpart and the type to start from:
//!
//! | module | Curator | start from |
//! |---|---|---|
//! | [`locks`] | `recipes/locks` | [`locks::InterProcessMutex`], the read-write lock, semaphores, the multi-lock; [`locks::driver`] to write a lock driver |
//! | [`leader`] | `recipes/leader` | [`leader::LeaderLatch`], [`leader::LeaderSelector`] |
//! | [`cache`] | `recipes/cache` | [`cache::CuratorCache`]: a local copy of a node, its children or a tree |
//! | [`nodes`] | `recipes/nodes` | [`nodes::PersistentNode`], [`nodes::GroupMember`] |
//! | [`atomic`] | `recipes/atomic` | [`atomic::DistributedAtomicLong`] |
//! | [`shared`] | `recipes/shared` | [`shared::SharedCount`], [`shared::SharedValue`] |
//! | [`barriers`] | `recipes/barriers` | [`barriers::DistributedBarrier`], [`barriers::DistributedDoubleBarrier`] |
//! | [`queue`] | `recipes/queue` | [`queue::DistributedQueue`] (items acknowledged, at most or at least once), [`queue::SimpleDistributedQueue`] |
//! | [`claims`] | — | [`claims::WorkClaims`]: lock-tag batch claims of work items |
//! | [`idempotency`] | — | [`idempotency::IdempotencyKeys`]: one execution per request id (Stripe-style) |
//! | `discovery` (feature `discovery`) | `curator-x-discovery` | `discovery::ServiceDiscovery`, `discovery::ServiceCache`, `discovery::ServiceProvider`: register, cache and pick service instances in one registry with Java services |
//! | [`guide`] | — | the guides: migration from Curator, failure semantics, wire protocol, observability, security, CLI, performance |
//! | [`mod@inspect`] | — | [`inspect()`](inspect::inspect): every lock under a path, with its holders and waiters |
//!
//! Besides them: [`blocking`], the client with its data API, the locks, leader election, the
//! barriers, the cache, the shared values, the atomic counters and the nodes for plain threads
//! (like `reqwest::blocking`), with the same promises and Curator-style holds owned by the calling
//! thread, as in Curator; `testing` (feature `testing`), a real ZooKeeper for tests, like
//! Curator's `TestingServer`; [`raw`], the `zookeeper-client` crate underneath, the one place it
//! appears, outside the semver promise; and metrics (feature `metrics`): acquire wait and hold
//! time histograms, holds lost by cause, waiters and connection state changes, labelled by recipe
//! and lock path, on the [`metrics`](https://docs.rs/metrics) facade for any exporter (Prometheus,
//! StatsD, …); the path label is set per client with `CuratorClientBuilder::metrics_path_label`.
//! Names, labels and units: [docs/observability.md](crate::guide::observability). Without the feature nothing of it is compiled.
//!
//! The `zk-curator` command (feature `cli`) runs a command under any of these locks
//! (`zk-curator lock PATH -- COMMAND`), and lists or holds them.
//!
//! # What is at the root
//!
//! The root keeps what most programs start from, as `zookeeper-client` keeps its client API flat:
//! the client and its builder ([`CuratorClient`], [`CuratorClientBuilder`]), the errors
//! ([`Error`], [`ErrorKind`], [`ErrorCode`], [`ErrorDetail`], [`Result`]), [`Deadline`],
//! [`ConnectionState`], the retry policies ([`RetryPolicy`] and Curator's, from
//! [`ExponentialBackoffRetry`] to [`RetryUntilElapsed`]) and the data API's everyday types
//! ([`CreateMode`], [`Stat`], [`Acl`] with [`Id`] and [`Permissions`], [`Transaction`] and its
//! [`OpResult`]s, [`WatchedEvent`] and [`EventType`]). The rest of the framework layer, which
//! programs rarely name — the request builders the data API returns, watch streams, ACL
//! providers, TLS and SASL options, path helpers, the builder's defaults — is in [`framework`].
//! A recipe is always named by its family (`zk_curator::locks::InterProcessMutex`), as Curator's
//! `org.apache.curator.framework.recipes.locks.InterProcessMutex`: the families keep the names
//! apart, and the root short. (The flat names of earlier releases still resolve, for one
//! release; [docs/curator-migration.md](crate::guide::curator_migration), "Module paths", maps them.)
//!
//! # Feature flags
//!
//! Nothing is on by default: the recipes and the client need no feature.
//!
//! | feature | adds | pulls in |
//! |---|---|---|
//! | `discovery` | `zk_curator::discovery`: service discovery wire-compatible with Curator's `curator-x-discovery` | `serde`, `serde_json` |
//! | `metrics` | wait and hold times, holds lost by cause, waiters and each family's counts, on the [`metrics`](https://docs.rs/metrics) facade ([docs/observability.md](crate::guide::observability)) | `metrics` |
//! | `serde` | `Serialize` for the inspection types, in the shape of `zk-curator inspect --json`; `queue::JsonSerializer` for queue items of any serde type | `serde`, `serde_json` |
//! | `tls` | `CuratorClientBuilder::tls`: TLS connections ([docs/security.md](crate::guide::security)) | `zookeeper-client/tls` (rustls) |
//! | `sasl` | `CuratorClientBuilder::sasl`: SASL DIGEST-MD5 ([docs/security.md](crate::guide::security)) | `zookeeper-client/sasl-digest-md5` |
//! | `testing` | `zk_curator::testing`: `TestingServer`, `TestingCluster` and `FaultProxy`, a real ZooKeeper for tests, as Curator's `curator-test` | `tempfile`, `libc` |
//! | `cli` | the `zk-curator` command line tool ([docs/cli.md](crate::guide::cli)); implies `tls` and `serde` | `clap`, `libc`, `serde_json`, `humantime` |
//!
//! # Promises
//!
//! Beyond Curator, every acquire is cancel safe (a dropped future leaves no node behind), a release
//! never forgets a node it failed to delete, deadlines are strict, a hold is only handed out while
//! it is held, and every hold carries a fencing token.
//!
//! Time limits follow one rule, in every recipe, async and blocking ([docs/failure-semantics.md](crate::guide::failure_semantics),
//! "Time limits", has it with a table of every timed call): a wait for a state that another
//! party or the cluster decides (a lock, a lease, leadership, a barrier, a first create, a
//! connection, a cache's load) returns whether it got there — `Ok(false)` / `Ok(None)` on
//! time-out, as Curator's `boolean` / `null`; an operation that runs out of time (a data request,
//! a counter update, `begin_within`) fails with [`Error::DeadlineExceeded`] naming the path and the
//! timeout. Every timed call takes a [`Deadline`]: a `Duration`, or an `Instant` for chained waits.
//!
//! Lead with guards ([`locks::InterProcessMutex::lock`], `try_lock_for`,
//! …): a guard owns its hold, moves between tasks, and releases on drop. The Curator-style
//! `acquire`/`release` pair is for ports of Curator code; its hold belongs to the calling task,
//! which must release it on every path — see the two-model table on
//! [`locks::InterProcessMutex`].
//!
//! ```no_run
//! use std::time::Duration;
//! use zk_curator::CuratorClient;
//! use zk_curator::locks::InterProcessMutex;
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

pub mod atomic;
pub mod barriers;
pub mod blocking;
pub mod cache;
pub mod claims;
mod deadline;
#[cfg(feature = "discovery")]
#[cfg_attr(docsrs, doc(cfg(feature = "discovery")))]
pub mod discovery;
mod error;
mod feed;
pub mod framework;
pub mod guide;
pub mod idempotency;
pub mod inspect;
pub mod leader;
pub mod locks;
mod metrics;
pub mod nodes;
pub mod queue;
pub mod raw;
pub mod shared;
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;

pub use deadline::Deadline;
pub use error::{Error, ErrorCode, ErrorDetail, ErrorKind, Result};
pub use framework::acl::{Acl, Id, Permissions};
pub use framework::builder::CuratorClientBuilder;
pub use framework::client::CuratorClient;
pub use framework::node::{CreateMode, EventType, Stat, WatchedEvent};
pub use framework::operations::{OpResult, Transaction};
pub use framework::retry::{
    BoundedExponentialBackoffRetry, ExponentialBackoffRetry, RetryForever, RetryNTimes, RetryOneTime, RetryPolicy,
    RetryUntilElapsed,
};
pub use framework::state::ConnectionState;

// The flat names of release 0.1, before the families: still importable from the root for one
// release, hidden from the docs (a re-export cannot be `#[deprecated]`). They go in the next
// release; docs/curator-migration.md ("Module paths") maps each to its module.
#[doc(hidden)]
pub use atomic::{
    AtomicNumber, AtomicStats, AtomicValue, DistributedAtomicInteger, DistributedAtomicLong, DistributedAtomicNumber,
    DistributedAtomicValue, PromotedToLock,
};
#[doc(hidden)]
pub use barriers::{DistributedBarrier, DistributedDoubleBarrier, READY_NODE_NAME};
#[doc(hidden)]
pub use cache::{CacheEntry, CacheEvent, CacheEventStream, CacheMode, CacheState, CuratorCache, CuratorCacheBuilder};
#[doc(hidden)]
pub use claims::{Claim, ClaimState, Reclaimed, WorkClaims};
#[doc(hidden)]
#[cfg(feature = "sasl")]
pub use framework::SaslOptions;
#[doc(hidden)]
#[cfg(feature = "tls")]
pub use framework::TlsOptions;
#[doc(hidden)]
pub use framework::{
    is_protected, parse_sequence, strip_protection, validate_path, AclProvider, CommitBuilder,
    ConnectionStateErrorPolicy, ConnectionStateStream, CreateBuilder, CreatedNode, DefaultAclProvider, DeleteBuilder,
    DeleteOutcome, ExistsBuilder, ExistsWatchBuilder, GetChildrenBuilder, GetChildrenWatchBuilder, GetDataBuilder,
    GetDataWatchBuilder, PersistentWatchBuilder, SessionIdentity, SetDataBuilder, Watch, WatchStream,
    DEFAULT_CONNECTION_TIMEOUT, DEFAULT_MAX_CLOSE_WAIT, DEFAULT_MAX_DATA_SIZE, DEFAULT_SESSION_TIMEOUT,
    DEFAULT_SIMULATED_SESSION_EXPIRATION_PERCENT,
};
#[doc(hidden)]
pub use idempotency::{Begin, IdempotencyClaim, IdempotencyKeys, Retention, Settled, MAX_IDEMPOTENCY_KEY_LEN};
#[doc(hidden)]
pub use inspect::{
    inspect, inspect_barrier, inspect_lock, inspect_with, BarrierInfo, BarrierMember, BarrierReady, InspectOptions,
    Inspection, LockHolder, LockInfo, LockKind,
};
#[doc(hidden)]
pub use leader::{
    CloseMode, LatchState, LeaderLatch, LeaderSelector, Leadership, LeadershipState, LeadershipStream, Participant,
    LATCH_LOCK_NAME, SELECTOR_LOCK_NAME,
};
#[doc(hidden)]
pub use locks::driver::{
    Contender, LeaseDriver, LockDriver, NodeSpec, ReadLockDriver, StandardLockDriver, Verdict, WriteLockDriver,
};
#[doc(hidden)]
pub use locks::{
    driver, return_all, FencingToken, GuardedWrite, Hold, HoldState, HoldStateStream, HolderId, InterProcessLock,
    InterProcessMultiLock, InterProcessMutex, InterProcessNonFairMutex, InterProcessReadWriteLock,
    InterProcessSemaphoreMutex, InterProcessSemaphoreV2, Lease, LockFuture, MutexGuard, ReadLock, ReadLockGuard,
    Revoker, WriteLock, WriteLockGuard, LEASE_NODE_NAME, NONFAIR_LOCK_NAME, READ_LOCK_NAME, SEMAPHORE_LEASE_PARENT,
    SEMAPHORE_LOCK_PARENT, WRITE_LOCK_NAME,
};
#[doc(hidden)]
pub use nodes::{
    GroupMember, MembershipEvent, MembershipStream, NodeState, PersistentNode, PersistentTtlNode, Protection,
    TTL_TOUCH_NODE_NAME,
};
#[doc(hidden)]
pub use shared::{SharedCount, SharedValue, SharedValueStream, VersionedValue};
