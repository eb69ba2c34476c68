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
//! * the lock machinery — a reentrancy map, the `LockInternals` loop, pluggable [`LockDriver`]s
//!   — and the recipes built on them: [`InterProcessMutex`], [`InterProcessReadWriteLock`],
//!   [`InterProcessSemaphoreV2`] (with its [`Lease`]s) and [`InterProcessSemaphoreMutex`], and
//!   [`InterProcessMultiLock`] (several locks taken as one), with revocation ([`Revoker`]) and a
//!   common [`InterProcessLock`] trait;
//! * [`inspect()`]: every lock under a path, whoever made it, with its holders (session, hold time,
//!   node data) and waiters — the library side of `zk-curator inspect`;
//! * [`blocking`]: the client and every recipe for plain threads (like `reqwest::blocking`), with
//!   the same promises and Curator-style holds owned by the calling thread, as in Curator;
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
//! Everything is re-exported at the crate root; the modules are private, but for [`blocking`],
//! `testing` and [`raw`]: the `zookeeper-client` crate underneath, the one place it appears, outside
//! the semver promise.
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

pub mod blocking;
mod error;
mod framework;
mod inspect;
mod locks;
mod metrics;
pub mod raw;
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;

pub use error::{Error, ErrorCode, ErrorKind, Result};
pub use framework::acl::{Acl, Id, Permissions};
pub use framework::acl_provider::{AclProvider, DefaultAclProvider};
pub use framework::builder::{
    CuratorClientBuilder, DEFAULT_CONNECTION_TIMEOUT, DEFAULT_MAX_CLOSE_WAIT, DEFAULT_MAX_DATA_SIZE,
    DEFAULT_SESSION_TIMEOUT,
};
pub use framework::client::CuratorClient;
pub use framework::guaranteed_delete::DeleteOutcome;
pub use framework::node::{CreateMode, EventType, Stat, WatchedEvent};
pub use framework::operations::{
    CommitBuilder, CreateBuilder, DeleteBuilder, ExistsBuilder, ExistsWatchBuilder, GetChildrenBuilder,
    GetChildrenWatchBuilder, GetDataBuilder, GetDataWatchBuilder, OpResult, PersistentWatchBuilder, SetDataBuilder,
    Transaction, Watch, WatchStream,
};
pub use framework::paths::validate_path;
pub use framework::protected::{is_protected, parse_sequence, strip_protection, CreatedNode};
pub use framework::retry::{
    BoundedExponentialBackoffRetry, ExponentialBackoffRetry, RetryForever, RetryNTimes, RetryOneTime, RetryPolicy,
    RetryUntilElapsed,
};
#[cfg(feature = "sasl")]
pub use framework::security::SaslOptions;
#[cfg(feature = "tls")]
pub use framework::security::TlsOptions;
pub use framework::session::SessionIdentity;
pub use framework::state::{ConnectionState, ConnectionStateStream};
pub use inspect::{inspect, inspect_lock, inspect_with, InspectOptions, Inspection, LockHolder, LockInfo, LockKind};
pub use locks::driver::{
    evaluate_by_key, java_cmp, standard_evaluate, standard_sort_key, standard_verdict, Contender, LockDriver, NodeSpec,
    StandardLockDriver, Verdict,
};
pub use locks::hold::{FencingToken, GuardedWrite, Hold, HoldState, HoldStateStream};
pub use locks::interprocess_lock::{InterProcessLock, LockFuture};
pub use locks::leader_latch::{LatchState, LeaderLatch, LATCH_LOCK_NAME};
pub use locks::leader_selector::{LeaderSelector, Leadership, SELECTOR_LOCK_NAME};
pub use locks::leadership::{CloseMode, LeadershipState, LeadershipStream, Participant};
pub use locks::multi_lock::InterProcessMultiLock;
pub use locks::mutex::{InterProcessMutex, MutexGuard};
pub use locks::read_write::{
    read_write_sort_key, InterProcessReadWriteLock, ReadLock, ReadLockDriver, ReadLockGuard, WriteLock,
    WriteLockDriver, WriteLockGuard, READ_LOCK_NAME, WRITE_LOCK_NAME,
};
pub use locks::reentrancy::HolderId;
pub use locks::revocation::Revoker;
pub use locks::semaphore::{
    return_all, InterProcessSemaphoreMutex, InterProcessSemaphoreV2, Lease, LeaseDriver, LEASE_NODE_NAME,
    SEMAPHORE_LEASE_PARENT, SEMAPHORE_LOCK_PARENT,
};
