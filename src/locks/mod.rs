//! Lock recipes and the three layers they share:
//!
//! 1. [`reentrancy`]: who holds a lock Curator-style in this process and how many times;
//! 2. [`internals`]: `LockInternals` (crate-private), the create / list / verdict / watch loop;
//! 3. [`driver`]: [`LockDriver`](crate::LockDriver) (public as [`crate::driver`]), the pluggable naming, sorting and verdict policy.
//!
//! Recipes: [`InterProcessMutex`](crate::InterProcessMutex), [`InterProcessNonFairMutex`](crate::InterProcessNonFairMutex) (one raced node), [`InterProcessReadWriteLock`](crate::InterProcessReadWriteLock),
//! [`InterProcessSemaphoreV2`](crate::InterProcessSemaphoreV2) (with [`Lease`](crate::Lease)s),
//! [`InterProcessSemaphoreMutex`](crate::InterProcessSemaphoreMutex) and
//! [`InterProcessMultiLock`](crate::InterProcessMultiLock), the locks behind the common [`InterProcessLock`](crate::InterProcessLock) trait, the mutex and
//! the read-write halves revocable ([`Revoker`](crate::Revoker)). Every
//! hold of every recipe is a [`Hold`](crate::Hold) with a [`FencingToken`](crate::FencingToken), a [`HoldState`](crate::HoldState), the node's data and
//! guarded writes.
//!
//! Leader election, built on the same layers, has its own folder: [`crate::leader`]. This door
//! re-exports every public item; the crate root re-exports them from here.

pub(crate) mod driver;
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

pub use driver::{
    evaluate_by_key, java_cmp, standard_evaluate, standard_sort_key, standard_verdict, Contender, LockDriver, NodeSpec,
    StandardLockDriver, Verdict,
};
pub use hold::{FencingToken, GuardedWrite, Hold, HoldState, HoldStateStream};
pub use interprocess_lock::{InterProcessLock, LockFuture};
pub use multi_lock::InterProcessMultiLock;
pub use mutex::{InterProcessMutex, MutexGuard};
pub use nonfair::{InterProcessNonFairMutex, NONFAIR_LOCK_NAME};
pub use read_write::{
    read_write_sort_key, InterProcessReadWriteLock, ReadLock, ReadLockDriver, ReadLockGuard, WriteLock,
    WriteLockDriver, WriteLockGuard, READ_LOCK_NAME, WRITE_LOCK_NAME,
};
pub use reentrancy::HolderId;
pub use revocation::Revoker;
pub use semaphore::{
    return_all, InterProcessSemaphoreMutex, InterProcessSemaphoreV2, Lease, LeaseDriver, LEASE_NODE_NAME,
    SEMAPHORE_LEASE_PARENT, SEMAPHORE_LOCK_PARENT,
};
