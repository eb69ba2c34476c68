//! Values shared through one node (Curator's `recipes/shared`), read, followed and set with a
//! versioned compare-and-set.
//!
//! * [`SharedCount`] (Curator's `SharedCount`): start from it for a number — a 4-byte big-endian
//!   `i32`;
//! * [`SharedValue`] (Curator's `SharedValue`): the bytes underneath, with their
//!   [`VersionedValue`] and a [`SharedValueStream`] of changes.
//!
//! ```no_run
//! use zk_curator::shared::SharedCount;
//!
//! # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
//! let limit = SharedCount::start(&client, "/throttle/limit", 10).await?;
//! println!("limit {}", limit.count());
//! # Ok(()) }
//! ```
//!
//! Inside: `count`, `value`, and `write`, the conditional write these and the atomic counters
//! share.

pub(crate) mod count;
pub(crate) mod value;
pub(crate) mod write;

pub use count::SharedCount;
pub use value::{SharedValue, SharedValueStream, VersionedValue};
