//! Work claims: work items as nodes, claimed in batches by tagged processes (lock tags; Curator
//! has no counterpart — Kazoo's `LockingQueue` comes closest, done here without its flaws).
//!
//! Start from [`WorkClaims`]: [`add`](WorkClaims::add) items, [`claim`](WorkClaims::claim) a
//! batch of them as [`Claim`]s, then [`complete`](WorkClaims::complete) or
//! [`release`](WorkClaims::release) each; [`reclaim_older_than`](WorkClaims::reclaim_older_than)
//! wakes up a stuck holder's items ([`Reclaimed`]), whose claims turn
//! [`Lost`](ClaimState::Lost); [`wait_for_work`](WorkClaims::wait_for_work) waits for items on one
//! re-used watch.
//!
//! ```no_run
//! use zk_curator::claims::WorkClaims;
//!
//! # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
//! let work = WorkClaims::new(&client, "/work/emails", "mailer-1")?;
//! for claim in work.claim(50).await? {
//!     // ... process claim.data() ...
//!     work.complete(claim.item()).await?;
//! }
//! # Ok(()) }
//! ```
//!
//! # Layout
//!
//! Under a recipe path `P`:
//!
//! * `P/items/<item>`: one PERSISTENT node per work item; its data is the item's payload. Every
//!   claim rewrites the payload unchanged, so the item's data version counts its claims: that
//!   version is the claim's fence.
//! * `P/claims/<item>`: one EPHEMERAL node per claimed item (`NodeExists`: someone else's), data
//!   `tag\nsession-id-hex\nclaim-time-ms\nmark-hex` (the mark is per claim call). It goes with its session.
//! * `P/members/<tag>-<session-id-hex>`: EPHEMERAL, one per participant session when the fair share
//!   is on.
//!
//! A claim is one transaction `{create claim (ephemeral), set item data at version v}`; the claims
//! of a batch are pipelined on one session. Completing is `{delete claim, delete item at version
//! v + 1}` and releasing `{check item at v + 1, delete claim}`: once the claim was reclaimed (or
//! its session ended) and the item claimed again, the item's version has moved and both are
//! refused; a claim reclaimed and not yet re-claimed is gone, and both are refused too. An item
//! completed and added again under its name starts at version 0 again, so a send whose reply was
//! lost is repeated only after reading the claim node back as this claim's (session and creation
//! zxid) — and so is a first send once the connection status changed since the claim was granted.
//!
//! # Inside
//!
//! One concept a file: `work_claims` (the handle and its state: adding, completing, releasing,
//! reclaiming, waiting for work), `claim` (a claim and its state), `call` (one claim call: the
//! batch claimed on a task of its own, so that a cancelled call still has its claims released)
//! and `release` (the background releases, which the next claim waits for).

mod call;
mod claim;
mod release;
mod work_claims;

pub use claim::{Claim, ClaimState, Reclaimed};
pub use work_claims::WorkClaims;
