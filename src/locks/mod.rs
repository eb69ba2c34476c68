//! Locks (Curator's `recipes/locks`): mutexes, a read-write lock, semaphores and a multi-lock,
//! every one of them wire-compatible with its Curator counterpart on the same path.
//!
//! Start from [`InterProcessMutex`]: one holder at a time, first come first served, a
//! [`MutexGuard`] that releases on drop. The others:
//!
//! | type | Curator | holds |
//! |---|---|---|
//! | [`InterProcessMutex`] | `InterProcessMutex` | one holder, fair (sequence order), re-entrant per task |
//! | [`InterProcessNonFairMutex`] | — | one holder, one raced node (no queue) |
//! | [`InterProcessReadWriteLock`] | `InterProcessReadWriteLock` | many readers ([`ReadLock`]) or one writer ([`WriteLock`]) |
//! | [`InterProcessSemaphoreV2`] | `InterProcessSemaphoreV2` | up to `max_leases` [`Lease`]s |
//! | [`InterProcessSemaphoreMutex`] | `InterProcessSemaphoreMutex` | one holder, not re-entrant |
//! | [`InterProcessMultiLock`] | `InterProcessMultiLock` | several locks taken as one |
//!
//! What they share: the [`InterProcessLock`] trait (Curator's `InterProcessLock`); revocation
//! ([`Revoker`]); and the [`Hold`] behind every guard and lease, with its [`FencingToken`], its
//! [`HoldState`] (and [`HoldStateStream`]), the node's data and [`GuardedWrite`]s that only
//! succeed while the hold is held. [`driver`] is for writing a lock driver of one's own (Curator's
//! `LockInternalsDriver`).
//!
//! Leader election is built on the same layers and has its own module, [`crate::leader`].
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
//!
//! Inside, the recipes share three layers: `reentrancy` (who holds a lock Curator-style in this
//! process and how many times), `internals` (`LockInternals`, the create / list / verdict / watch
//! loop) and [`driver`] (the pluggable naming, sorting and verdict policy).

pub mod driver;
pub(crate) mod hold;
pub(crate) mod internals;
pub(crate) mod interprocess_lock;
pub(crate) mod local_queue;
pub(crate) mod multi_lock;
pub(crate) mod mutex;
pub(crate) mod nonfair;
pub(crate) mod read_write;
pub(crate) mod reentrancy;
pub(crate) mod revocation;
pub(crate) mod semaphore;

pub use hold::{FencingToken, GuardedWrite, Hold, HoldState, HoldStateStream};
pub use interprocess_lock::{InterProcessLock, LockFuture};
pub use multi_lock::InterProcessMultiLock;
pub use mutex::{InterProcessMutex, MutexGuard};
pub use nonfair::{InterProcessNonFairMutex, NONFAIR_LOCK_NAME};
pub use read_write::{
    InterProcessReadWriteLock, ReadLock, ReadLockGuard, WriteLock, WriteLockGuard, READ_LOCK_NAME, WRITE_LOCK_NAME,
};
pub use reentrancy::HolderId;
pub use revocation::Revoker;
pub use semaphore::{
    return_all, InterProcessSemaphoreMutex, InterProcessSemaphoreV2, Lease, LEASE_NODE_NAME, SEMAPHORE_LEASE_PARENT,
    SEMAPHORE_LOCK_PARENT,
};
