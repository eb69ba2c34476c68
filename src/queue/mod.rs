//! Queues (Curator's `recipes/queue`), wire-compatible with Curator.
//!
//! * [`SimpleDistributedQueue`] (Curator's `SimpleDistributedQueue`): a FIFO of byte items with
//!   `offer`, `take`, `poll_timeout` (Curator's `poll(timeout, unit)`), `try_take`
//!   (`poll()`), `peek`, `element`, `remove`.

mod simple;

pub use simple::{SimpleDistributedQueue, ITEM_PREFIX};
