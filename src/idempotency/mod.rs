//! Idempotency keys (Stripe-style) on ZooKeeper: one execution per key, and every duplicate
//! answered with the recorded outcome. Curator has no counterpart.
//!
//! Start from [`IdempotencyKeys`] (with a [`Retention`] for the outcomes):
//! [`begin`](IdempotencyKeys::begin) a request's key and look at the [`Begin`]: `Started` hands
//! out an [`IdempotencyClaim`] — do the work once, then [`complete`](IdempotencyClaim::complete)
//! it with the outcome — while a duplicate finds the key in progress or done.
//!
//! ```no_run
//! use std::time::Duration;
//! use zk_curator::idempotency::{Begin, IdempotencyKeys, Retention};
//!
//! # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
//! let keys = IdempotencyKeys::new(&client, "/payments/idempotency", Retention::Ttl(Duration::from_secs(86_400)))?;
//! match keys.begin("order-1234").await? {
//!     Begin::Started(claim) => claim.complete(b"charged 42.00".to_vec()).await?,
//!     Begin::InProgress { holder } => println!("still being processed by {holder}"),
//!     Begin::Done { result } => println!("already done: {}", String::from_utf8_lossy(&result)),
//!     _ => {}
//! }
//! # Ok(()) }
//! ```
//!
//! # Layout
//!
//! A key is one node, `BASE/KEY`, in one of two states:
//! * a **claim**: an EPHEMERAL node (version 0) whose data names the claimant (a random mark, the
//!   holder's description). A crash ends the session and the server removes the claim, so the key
//!   is free for a retry;
//! * an **outcome**: a PERSISTENT node (a TTL node, or a plain one for [`sweep_expired`]) made by
//!   [`IdempotencyClaim::complete`] in one transaction — delete the claim at version 0, create the
//!   outcome, set its data (version 1). Claims are always at version 0 and outcomes at version 1,
//!   so a versioned delete of one can never remove the other.
//!
//! [`IdempotencyKeys::begin`] is one create when the key is free; otherwise one read tells whose
//! claim or which outcome is there. A claim's requests (its outcome's commit, its release) are sent
//! only while the client is connected on the claim's own session, through that session's handle:
//! a release can never delete someone else's later claim at the same path, and once the client gave
//! the session up (the claim is `Lost` to its holder) nothing more is sent on it — not even when
//! the old session reaches the server again before it expires — so a lost claim's outcome is never
//! recorded. The claim keeps its session open while it lives, at most until the server could have
//! expired it, so a lost claim its holder keeps does not keep the key from a retry.
//!
//! [`sweep_expired`]: IdempotencyKeys::sweep_expired
//!
//! # Inside
//!
//! One concept a file: `keys` (the handle, what a begin finds), `retention` (how long outcomes
//! are kept), `claim` (a begun key, completed or abandoned) and `node` (a key's node: its two
//! states as data, read and parsed, and the claim's conditional delete).

mod claim;
mod keys;
mod node;
mod retention;

pub use claim::IdempotencyClaim;
pub use keys::{Begin, IdempotencyKeys, Settled, MAX_IDEMPOTENCY_KEY_LEN};
pub use retention::Retention;
