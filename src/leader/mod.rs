//! Leader election, Curator's `recipes/leader`, built on the lock layers of [`crate::locks`]:
//!
//! * [`latch`]: [`LeaderLatch`](crate::LeaderLatch), leadership as a hold of a `latch-` node;
//! * [`selector`]: [`LeaderSelector`](crate::LeaderSelector), leadership work run while holding a
//!   mutex (Curator's `lock-` nodes);
//! * [`leadership`]: what both share: leadership states and their stream, participants, close
//!   modes.

pub(crate) mod latch;
pub(crate) mod leadership;
pub(crate) mod selector;

pub use latch::{LatchState, LeaderLatch, LATCH_LOCK_NAME};
pub use leadership::{CloseMode, LeadershipState, LeadershipStream, Participant};
pub use selector::{LeaderSelector, Leadership, SELECTOR_LOCK_NAME};
