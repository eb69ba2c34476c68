//! Atomic values and counters (Curator's `recipes/atomic`): [`DistributedAtomicValue`](crate::DistributedAtomicValue)
//! (bytes) and [`DistributedAtomicLong`](crate::DistributedAtomicLong) /
//! [`DistributedAtomicInteger`](crate::DistributedAtomicInteger) (big-endian numbers), changed by
//! optimistic versioned sets, optionally promoted to a mutex ([`PromotedToLock`](crate::PromotedToLock)),
//! each result an [`AtomicValue`](crate::AtomicValue). This door re-exports every public item; the
//! crate root re-exports them from here.

pub(crate) mod number;
pub(crate) mod value;

pub use number::{AtomicNumber, DistributedAtomicInteger, DistributedAtomicLong, DistributedAtomicNumber};
pub use value::{AtomicStats, AtomicValue, DistributedAtomicValue, PromotedToLock};
