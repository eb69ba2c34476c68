//! Lock recipes and the three layers they share:
//!
//! 1. [`reentrancy`]: who holds a lock in this process and how many times;
//! 2. [`internals`]: [`LockInternals`], the create / list / sort / watch-predecessor loop;
//! 3. [`driver`]: [`LockDriver`], the pluggable naming, sorting and "do I hold it?" policy.
//!
//! Recipes: [`InterProcessMutex`] (more to come on the same layers). Every hold is a [`LockNode`]
//! with a [`FencingToken`], a [`HoldState`] and guarded writes.

pub mod driver;
pub mod hold;
pub mod internals;
pub mod mutex;
pub mod reentrancy;

pub use driver::{LockDriver, NodeSpec, Predicate, StandardLockDriver};
pub use hold::{FencingToken, GuardedWrite, HoldState, HoldStateStream, LockNode};
pub use internals::LockInternals;
pub use mutex::{InterProcessMutex, MutexGuard};
pub use reentrancy::HolderId;
