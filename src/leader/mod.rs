//! Leader election (Curator's `recipes/leader`), built on the lock layers of [`crate::locks`].
//!
//! * [`LeaderLatch`] (Curator's `LeaderLatch`): start from it when a process should *be* the
//!   leader while it can — leadership is a hold of a `latch-` node, reported as a
//!   [`LatchState`] and on a [`LeadershipStream`] of [`LeadershipState`]s;
//! * [`LeaderSelector`] (Curator's `LeaderSelector`): leadership *work*, run while holding a
//!   mutex (Curator's `lock-` nodes) and told through its [`Leadership`] when to stop; taken in
//!   turns when re-queued.
//!
//! Both list the [`Participant`]s and close by a [`CloseMode`].
//!
//! ```no_run
//! use zk_curator::leader::LeaderLatch;
//!
//! # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
//! let latch = LeaderLatch::new(&client, "/election/reports", "worker-1")?;
//! latch.start()?;
//! latch.await_leadership().await?;
//! // ... lead while latch.has_leadership() ...
//! latch.close().await?;
//! # Ok(()) }
//! ```
//!
//! Inside: `latch`, `selector`, and `leadership` (what both share).

pub(crate) mod latch;
pub(crate) mod leadership;
pub(crate) mod selector;

pub use latch::{LatchState, LeaderLatch, LATCH_LOCK_NAME};
pub use leadership::{CloseMode, LeadershipState, LeadershipStream, Participant};
pub use selector::{LeaderSelector, Leadership, SELECTOR_LOCK_NAME};
