//! Values shared through one node (Curator's `recipes/shared`): [`SharedValue`](crate::SharedValue)
//! (bytes) and [`SharedCount`](crate::SharedCount) (a 4-byte big-endian `i32`), read, followed
//! and set with a versioned compare-and-set; and the conditional write they and the atomic
//! counters share (`write`). This door re-exports every public item; the crate root re-exports
//! them from here.

pub(crate) mod count;
pub(crate) mod value;
pub(crate) mod write;

pub use count::SharedCount;
pub use value::{SharedValue, SharedValueStream, VersionedValue};
