//! Lock recipes and the three layers they share:
//!
//! 1. [`reentrancy`]: who holds a lock Curator-style in this process and how many times;
//! 2. [`internals`]: [`LockInternals`], the create / list / verdict / watch loop;
//! 3. [`driver`]: [`LockDriver`], the pluggable naming, sorting and verdict policy.
//!
//! Recipes: [`InterProcessMutex`] (more to come on the same layers). Every hold of every recipe is
//! a [`Hold`] with a [`FencingToken`], a [`HoldState`], the node's data and guarded writes.

pub(crate) mod driver;
pub(crate) mod hold;
pub(crate) mod internals;
pub(crate) mod mutex;
pub(crate) mod reentrancy;
