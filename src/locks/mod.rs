//! Lock recipes and the three layers they share:
//!
//! 1. [`reentrancy`]: who holds a lock Curator-style in this process and how many times;
//! 2. [`internals`]: [`LockInternals`](crate::LockInternals), the create / list / verdict / watch loop;
//! 3. [`driver`]: [`LockDriver`](crate::LockDriver), the pluggable naming, sorting and verdict policy.
//!
//! Recipes: [`InterProcessMutex`](crate::InterProcessMutex), [`InterProcessReadWriteLock`](crate::InterProcessReadWriteLock),
//! [`InterProcessSemaphoreV2`](crate::InterProcessSemaphoreV2) (with [`Lease`](crate::Lease)s),
//! [`InterProcessSemaphoreMutex`](crate::InterProcessSemaphoreMutex),
//! [`LeaderLatch`](crate::LeaderLatch) (leadership as a hold of a `latch-` node),
//! [`LeaderSelector`](crate::LeaderSelector) (leadership work run while holding a mutex) and
//! [`InterProcessMultiLock`](crate::InterProcessMultiLock), the locks behind the common [`InterProcessLock`](crate::InterProcessLock) trait, the mutex and
//! the read-write halves revocable ([`Revoker`](crate::Revoker)). Every
//! hold of every recipe is a [`Hold`](crate::Hold) with a [`FencingToken`](crate::FencingToken), a [`HoldState`](crate::HoldState), the node's data and
//! guarded writes.

pub(crate) mod driver;
pub(crate) mod hold;
pub(crate) mod internals;
pub(crate) mod interprocess_lock;
pub(crate) mod leader_latch;
pub(crate) mod leader_selector;
pub(crate) mod leadership;
pub(crate) mod local_queue;
pub(crate) mod multi_lock;
pub(crate) mod mutex;
pub(crate) mod read_write;
pub(crate) mod reentrancy;
pub(crate) mod revocation;
pub(crate) mod semaphore;
