//! The claim: where it stands ([`ClaimState`]), what its holder sees ([`Claim`]), and what a
//! reclaim woke up ([`Reclaimed`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::watch;

use crate::framework::SessionIdentity;
use crate::locks::hold::{Hold, HoldState, HoldStateStream};

/// Where a claim stands, as its holder sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ClaimState {
    /// Connected on the claim's session, and the claim node (that very node: its creation zxid)
    /// stands: the item is ours.
    Held,
    /// The connection is lost; the session (and so the claim) may or may not survive. Stop doing
    /// anything another worker must not do on the item at the same time, until `Held` again (the
    /// same session reconnected) or `Lost`. See [`HoldState::Suspended`].
    Suspended,
    /// The claim node is gone without the holder releasing or completing it: reclaimed by
    /// [`WorkClaims::reclaim_older_than`](super::WorkClaims::reclaim_older_than), deleted by
    /// someone else, or its session ended (or was given up by the client while suspended). Its
    /// `complete` is refused; stop working on the item. Final.
    Lost,
    /// Completed or released by its holder. Final.
    Finished,
}

pub(super) struct ClaimShared {
    pub(super) item: String,
    pub(super) data: Vec<u8>,
    /// The item's data version written by the claim transaction: the fence.
    pub(super) item_version: i32,
    /// The item's creation zxid: tells it from an item added again under the same name.
    pub(super) item_czxid: i64,
    /// When the server made the claim node (its clock, as `reclaim_older_than` reads it).
    pub(super) granted_at: SystemTime,
    /// The claim node as a hold: its creation zxid (the fencing token's zxid), its session, and
    /// its `Held`/`Suspended`/`Lost` state — connection and session changes, and a watch on that
    /// very node (by creation zxid, never "a node at that path").
    pub(super) hold: Arc<Hold>,
    /// Completed or released by its holder (the hold is then `Lost`, as a released hold is).
    pub(super) finished: AtomicBool,
    /// The connection status as of the grant: once it changed (a disconnect, maybe), the claim
    /// may have been reclaimed, its item completed, added again and claimed by another worker
    /// with the same fence while this holder heard nothing — so its first fenced send is preceded
    /// by a read of the claim node (see `WorkClaims::fenced`).
    pub(super) status_at_grant: watch::Receiver<crate::framework::session::Status>,
}

impl ClaimShared {
    /// The claim's node's creation zxid.
    pub(super) fn czxid(&self) -> i64 {
        self.hold.fencing_token().zxid()
    }

    pub(super) fn session(&self) -> SessionIdentity {
        self.hold.session()
    }

    /// The state now.
    fn current(&self) -> ClaimState {
        if self.finished.load(Ordering::SeqCst) {
            return ClaimState::Finished;
        }
        match self.hold.hold_state() {
            HoldState::Held => ClaimState::Held,
            HoldState::Suspended => ClaimState::Suspended,
            _ => ClaimState::Lost,
        }
    }

    /// Neither lost nor finished: a `complete` or `release` is worth sending.
    pub(super) fn may_be_held(&self) -> bool {
        matches!(self.current(), ClaimState::Held | ClaimState::Suspended)
    }

    /// Marks the claim lost (its node is gone or someone else's), unless it finished.
    pub(super) fn mark_lost(&self) {
        self.hold.mark_node_gone();
    }

    /// Marks the claim completed or released by its holder.
    pub(super) fn mark_finished(&self) {
        self.finished.store(true, Ordering::SeqCst);
        self.hold.mark_released();
    }
}

/// One claimed item, as handed out by [`WorkClaims::claim`](super::WorkClaims::claim): its name,
/// payload, fence and state.
///
/// A claim is a hold, like a lock's: handed out only [`Held`](ClaimState::Held), it turns
/// [`Suspended`](ClaimState::Suspended) while the connection is lost (and `Held` again when the
/// same session reconnects), and [`Lost`](ClaimState::Lost) once its node is gone or its session
/// ended — see [`state`](Self::state), [`state_changes`](Self::state_changes) and
/// [`lost`](Self::lost).
///
/// Clones share the claim. Dropping it does not release the claim (the
/// [`WorkClaims`](super::WorkClaims) keeps it until [`complete`](super::WorkClaims::complete),
/// [`release`](super::WorkClaims::release) or the session's end). As a lock's [`Hold`] does, a
/// claim keeps its session open once the client gave that session up (LOST) and replaced it, until
/// the claim is finished or forgotten by its [`WorkClaims`](super::WorkClaims) — or the server
/// could have expired the session anyway, whichever is first: so its node is not handed to another
/// worker before its holder could be told.
#[derive(Clone)]
pub struct Claim {
    pub(super) shared: Arc<ClaimShared>,
}

impl std::fmt::Debug for Claim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Claim")
            .field("item", &self.shared.item)
            .field("fence", &self.shared.item_version)
            .field("czxid", &self.shared.czxid())
            .field("state", &self.state())
            .finish()
    }
}

impl Claim {
    /// The item's name (its node name under `P/items`).
    pub fn item(&self) -> &str {
        &self.shared.item
    }

    /// The item's payload, as read when it was claimed.
    pub fn data(&self) -> &[u8] {
        &self.shared.data
    }

    /// The claim's fence: the item's data version written by the claim, larger for each later
    /// claim of the same item node. Pass it to stores that must refuse a stale worker. An item
    /// completed and added again under its name is a new node whose fences start over: pair the
    /// fence with the item's name only if names are never re-used, else with
    /// [`czxid`](Self::czxid).
    pub fn fence(&self) -> i32 {
        self.shared.item_version
    }

    /// The claim node's creation zxid: unique to this claim, and larger for every later claim of
    /// any item (zxids order every write of the ensemble). It is also the zxid of the claim's
    /// transaction, which wrote the item's payload with the [`fence`](Self::fence).
    pub fn czxid(&self) -> i64 {
        self.shared.czxid()
    }

    /// When the claim was granted: the server's creation time of the claim node (the time
    /// [`WorkClaims::reclaim_older_than`](super::WorkClaims::reclaim_older_than) measures the
    /// claim's age from, against the reclaiming host's clock).
    pub fn granted_at(&self) -> SystemTime {
        self.shared.granted_at
    }

    /// The session the claim node belongs to.
    pub fn session(&self) -> SessionIdentity {
        self.shared.session()
    }

    /// The claim's state now (see [`ClaimState`]). The claim's node is watched from the moment
    /// it is handed out, so a reclaim shows here without anyone waiting on [`lost`](Self::lost).
    pub fn state(&self) -> ClaimState {
        self.shared.current()
    }

    /// True while the claim is [`Held`](ClaimState::Held) (connected, node there).
    pub fn is_held(&self) -> bool {
        self.state() == ClaimState::Held
    }

    /// The claim's state changes as a stream of [`HoldState`]s, each change once: `Suspended`,
    /// `Held` again, ..., ending after `Lost`. A claim completed or released by its holder ends
    /// the stream with `Lost` too, as a released lock does ([`state`](Self::state) then says
    /// [`Finished`](ClaimState::Finished)).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(claim: zk_curator::claims::Claim) {
    /// let mut changes = claim.state_changes();
    /// while let Some(state) = changes.next().await {
    ///     println!("{} is {state:?}", claim.item()); // pause on Suspended, stop on Lost
    /// }
    /// # }
    /// ```
    pub fn state_changes(&self) -> HoldStateStream {
        self.shared.hold.state_changes()
    }

    /// Resolves when the claim is lost ([`ClaimState::Lost`]); never resolves for a claim
    /// completed or released by its holder.
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits.
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(claim: zk_curator::claims::Claim) {
    /// tokio::select! {
    ///     _ = claim.lost() => { /* stop working on claim.item() */ }
    ///     _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
    /// }
    /// # }
    /// ```
    pub async fn lost(&self) {
        self.shared.hold.lost().await;
        if self.shared.finished.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
    }
}

/// What [`WorkClaims::reclaim_older_than`](super::WorkClaims::reclaim_older_than) woke up.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Reclaimed {
    /// The item.
    pub item: String,
    /// The tag of the process that held it.
    pub tag: String,
    /// Its session id.
    pub session: i64,
    /// How long it had held it.
    pub held_for: Duration,
}
