//! Atomic values and counters (Curator's `recipes/atomic`), changed by optimistic versioned sets,
//! optionally promoted to a mutex ([`PromotedToLock`]).
//!
//! Start from [`DistributedAtomicLong`] (Curator's `DistributedAtomicLong`, a big-endian `i64`),
//! or [`DistributedAtomicInteger`] (`i32`); [`DistributedAtomicValue`] is the byte value both are
//! built on, [`DistributedAtomicNumber`] their common trait over an [`AtomicNumber`]. Every
//! operation answers an [`AtomicValue`]: whether it succeeded, the values before and after, and
//! its [`AtomicStats`].
//!
//! ```no_run
//! use std::time::Duration;
//! use zk_curator::atomic::DistributedAtomicLong;
//!
//! # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
//! let sold = DistributedAtomicLong::new(&client, "/shop/tickets-sold")?.timeout(Duration::from_secs(5));
//! let result = sold.increment().await?;
//! if result.succeeded() {
//!     println!("ticket #{}", result.post_value());
//! }
//! # Ok(()) }
//! ```

pub(crate) mod number;
pub(crate) mod value;

pub use number::{AtomicNumber, DistributedAtomicInteger, DistributedAtomicLong, DistributedAtomicNumber};
pub use value::{AtomicStats, AtomicValue, DistributedAtomicValue, PromotedToLock};
