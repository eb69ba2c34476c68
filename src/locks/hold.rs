//! [`Hold`]: what a holder has once a lock or a lease is granted — the node that grants it, its
//! fencing token, its hold state (`Held` / `Suspended` / `Lost`), the node's data as others change
//! it (revocation), and writes guarded by the node's existence. Every recipe hands out the same type.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};
use std::time::Instant;

use tokio::sync::watch;
use tracing::debug;
use zookeeper_client as zk;

use crate::error::{Error, Result};
use crate::framework::guaranteed_delete::{DeleteTarget, OwnedMark};
use crate::framework::session::{SessionKeep, Status};
use crate::framework::{CreatedNode, SessionIdentity};
use crate::metrics::{HoldMeter, LossCause};
use crate::{CuratorClient, OpResult};

/// Whether a hold is still good.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HoldState {
    /// Connected, and our node is there: we hold the lock.
    Held,
    /// The connection is lost; the session (and so the lock) may or may not survive. Stop doing
    /// anything another holder must not do at the same time, until `Held` again.
    Suspended,
    /// Certainly not held any more: the session ended (or was given up while suspended, at most
    /// [`simulated_session_expiration_percent`](crate::CuratorClientBuilder::simulated_session_expiration_percent)
    /// — 85% by default — of the session timeout after the last reply from the server, before the
    /// server can expire it), our node was deleted by someone else, the lock was released, or the client was
    /// closed. Final.
    Lost,
}

/// A token that strictly increases across successive holders of one lock path — across
/// sessions, clients, processes, ensemble leader changes and local hand-offs inside a process.
///
/// It has two parts, compared in this order:
/// * [`zxid`](Self::zxid): the zxid of the create of the holder's lock node. Nodes of one path are
///   granted in the order they were created, and zxids order every write of the ensemble (the
///   leader epoch is in the high 32 bits, so a new leader's zxids are larger than any before).
/// * [`handoff`](Self::handoff): how many local holders had this node before this one. Guards of
///   one client on one path share one node per turn (see the
///   [local queue](crate::locks::InterProcessMutex#thousands-of-tasks-one-node-per-process)): the node's
///   first holder has 0, the next task it is handed to inside the process 1, and so on. The next
///   node granted has a larger zxid, so it comes after every local holder of this one.
///
/// **A downgrade** (a writer taking the read lock, which it then holds at its writer's place in
/// line) gets the write hold's token with the hand-off count one higher: its read hold begins
/// while the write hold ends, and every holder after it — writers queued before or after the
/// downgrade — has a node created after the write node, so a larger zxid. (The read node's own
/// czxid, newer than the nodes of writers queued before the downgrade, is not part of the token.)
///
/// Getting the token costs nothing: no write, no round trip. A store that remembers the largest
/// token it has seen for a resource and refuses smaller ones rejects a stale holder that still
/// believes it holds the lock. Store both parts, or the single number [`as_u128`](Self::as_u128),
/// or the text form (below) compared as a decimal number.
///
/// # Text form
/// [`Display`](std::fmt::Display) writes an exact decimal number that compares as the token does:
/// the zxid, then — unless the hand-off count is 0 — a point and the hand-off count as exactly
/// ten digits (`u32::MAX` has ten): `4294967311` for a node's first holder, `4294967311.0000000010`
/// for its eleventh local holder. Compare texts as decimal numbers with an exact comparison (`sort
/// -n`, a `NUMERIC`/`DECIMAL` column, a big-decimal type), not as strings (`"99" > "123"`) nor as
/// floating-point numbers (a zxid has up to 19 digits). Zxids are never negative.
///
/// # Examples
/// ```
/// use zk_curator::locks::FencingToken;
/// assert_eq!(FencingToken::new(123, 0).to_string(), "123");
/// assert_eq!(FencingToken::new(123, 9).to_string(), "123.0000000009");
/// assert_eq!(FencingToken::new(123, 10).to_string(), "123.0000000010"); // above 123.0000000009
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FencingToken {
    zxid: i64,
    handoff: u32,
}

impl FencingToken {
    /// The token of a node's `handoff`-th local holder (0: the holder the node was granted to).
    pub fn new(zxid: i64, handoff: u32) -> Self {
        Self { zxid, handoff }
    }

    /// The zxid of the create of the holder's node (for a downgrade: of its write node). Local
    /// holders of one node share it: compare whole tokens (or [`as_u128`](Self::as_u128)), not
    /// this part alone.
    pub fn zxid(self) -> i64 {
        self.zxid
    }

    /// How many local holders had the node before this holder (0 for the first; a downgrade
    /// counts one past its write hold).
    pub fn handoff(self) -> u32 {
        self.handoff
    }

    /// The zxid part, as before local hand-offs existed. Equal for local holders of one node: use
    /// [`as_u128`](Self::as_u128) or the whole token where those may differ.
    pub fn value(self) -> i64 {
        self.zxid
    }

    /// Both parts in one number that orders as the token does: the zxid in the high 64 bits, the
    /// hand-off count in the low ones.
    pub fn as_u128(self) -> u128 {
        (u128::from(self.zxid as u64) << 64) | u128::from(self.handoff)
    }
}

impl std::fmt::Display for FencingToken {
    /// The zxid alone for a node's first holder (as before local hand-offs existed), else
    /// `ZXID.HHHHHHHHHH`: the hand-off count as a ten-digit fraction, so that the text compares
    /// as a decimal number as the token does (see [the text form](FencingToken#text-form)).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.handoff == 0 {
            write!(f, "{}", self.zxid)
        } else {
            write!(f, "{}.{:010}", self.zxid, self.handoff)
        }
    }
}

/// One hold of a lock or a lease: the node that grants it and everything derived from it.
///
/// Handed out only in [`HoldState::Held`], on the client's current session. Shared by a recipe's
/// reentrancy entry or by the guard that owns it.
///
/// A hold keeps the session of its node open while it lives: once the client has given that
/// session up (LOST) and opened a new one, nothing of ours ends the old session — and so frees the
/// node to the next holder, should the link heal before the server expired it — until the last
/// holder of the hold lets go of it, or the server could have expired the session anyway
/// ([`CuratorClient::earliest_expiry`]), whichever is first. So drop a lost hold (its guard) once
/// the work it protected has stopped, not before.
#[derive(Debug)]
pub struct Hold {
    client: CuratorClient,
    node: CreatedNode,
    fixed: String,
    /// Its fencing token: the node's `(czxid, 0)`; for a local holder the hand-off count is its
    /// place among the node's holders; a downgrade's follows its write hold's.
    token: FencingToken,
    released: AtomicBool,
    /// Shared by every local holder of one node: a deletion seen by one is seen by all.
    node_deleted: Arc<AtomicBool>,
    /// Set for a holder of a node shared through the local queue: its release hands the node on.
    local: Option<LocalLink>,
    /// Set for a node of a fixed name, which successive holders re-create at the same path (the
    /// non-fair mutex): the unique data its creator wrote. Its deletes touch it only while the
    /// node at the path is still this one, on its own session ([`DeleteTarget::Owned`]).
    owner_mark: Option<Vec<u8>>,
    state: watch::Sender<HoldState>,
    data: watch::Sender<Vec<u8>>,
    monitor_started: AtomicBool,
    /// Hold time and loss metrics: ended when the hold is first seen `Lost`, or on drop.
    meter: HoldMeter,
    /// Keeps the node's session open while the hold lives, also once the client gave the session
    /// up and replaced it: nothing of ours ends it (and so frees the node) before the holder let
    /// go of the hold, or the server could have expired it anyway (see `SessionKeep`).
    session_keep: Option<Arc<SessionKeep>>,
}

impl Hold {
    pub(crate) fn new(
        client: &CuratorClient,
        node: CreatedNode,
        fixed: String,
        data: &[u8],
        meter: HoldMeter,
    ) -> Arc<Hold> {
        let token = FencingToken::new(node.czxid, 0);
        Self::with_token(client, node, fixed, data, meter, token)
    }

    /// A hold of a node of a fixed name (see [`Hold::owner_mark`]) whose creator wrote `mark`.
    pub(crate) fn of_fixed_name(
        client: &CuratorClient,
        node: CreatedNode,
        fixed: String,
        mark: &[u8],
        meter: HoldMeter,
    ) -> Arc<Hold> {
        let token = FencingToken::new(node.czxid, 0);
        let mut hold = Self::with_token(client, node, fixed, mark, meter, token);
        if let Some(hold) = Arc::get_mut(&mut hold) {
            hold.owner_mark = Some(mark.to_vec());
        }
        hold
    }

    /// A hold of a downgrade's read node, which stands in `writer`'s place in line: its token is
    /// the write hold's, one hand-off further (see [`FencingToken`]).
    pub(crate) fn in_place_of(
        writer: &Hold,
        client: &CuratorClient,
        node: CreatedNode,
        fixed: String,
        data: &[u8],
        meter: HoldMeter,
    ) -> Arc<Hold> {
        let token = FencingToken::new(writer.token.zxid, writer.token.handoff.saturating_add(1));
        Self::with_token(client, node, fixed, data, meter, token)
    }

    fn with_token(
        client: &CuratorClient,
        node: CreatedNode,
        fixed: String,
        data: &[u8],
        meter: HoldMeter,
        token: FencingToken,
    ) -> Arc<Hold> {
        let (state, _) = watch::channel(HoldState::Held);
        let (data, _) = watch::channel(data.to_vec());
        let session_keep = client.session_keep(node.session);
        Arc::new(Hold {
            session_keep,
            client: client.clone(),
            node,
            fixed,
            token,
            released: AtomicBool::new(false),
            node_deleted: Arc::new(AtomicBool::new(false)),
            local: None,
            owner_mark: None,
            state,
            data,
            monitor_started: AtomicBool::new(false),
            meter,
        })
    }

    /// A hold of `node`'s node for one local holder of the local queue: the `handoff`-th holder
    /// of that node, released through `link`.
    pub(crate) fn local(node: &Hold, handoff: u32, link: LocalLink, meter: HoldMeter) -> Arc<Hold> {
        let (state, _) = watch::channel(HoldState::Held);
        let (data, _) = watch::channel(node.data());
        Arc::new(Hold {
            session_keep: node.session_keep.clone(),
            client: node.client.clone(),
            node: node.node.clone(),
            fixed: node.fixed.clone(),
            token: FencingToken::new(node.token.zxid, node.token.handoff.saturating_add(handoff)),
            released: AtomicBool::new(false),
            node_deleted: node.node_deleted.clone(),
            local: Some(link),
            owner_mark: node.owner_mark.clone(),
            state,
            data,
            monitor_started: AtomicBool::new(false),
            meter,
        })
    }

    /// Stops the local queue from handing this hold's node on to another task (its place in line
    /// now backs another node, e.g. a downgrade's read node).
    pub(crate) fn keep_node_to_itself(&self) {
        if let Some(link) = &self.local {
            link.queue.close_turn(link.turn);
        }
    }

    /// The lock node's full path (without namespace).
    pub fn path(&self) -> &str {
        &self.node.path
    }

    /// The lock node's name.
    pub fn name(&self) -> &str {
        &self.node.name
    }

    /// The fencing token of this hold.
    pub fn fencing_token(&self) -> FencingToken {
        self.token
    }

    /// The session the lock node belongs to.
    pub fn session(&self) -> SessionIdentity {
        self.node.session
    }

    /// The client.
    pub fn client(&self) -> &CuratorClient {
        &self.client
    }

    /// The hold state now, computed from the client's connection and session.
    ///
    /// Deletion of the node by someone else is noticed once something watches the hold
    /// ([`watch_state`](Self::watch_state), [`lost`](Self::lost) or [`watch_data`](Self::watch_data));
    /// a guarded write notices it always.
    pub fn hold_state(&self) -> HoldState {
        self.state_given(&self.client.status_now())
    }

    fn state_given(&self, status: &Status) -> HoldState {
        if self.released.load(Ordering::SeqCst) || self.node_deleted.load(Ordering::SeqCst) {
            return HoldState::Lost;
        }
        if status.has_ended(self.node.session) {
            HoldState::Lost
        } else if !status.serves(self.node.session) {
            HoldState::Suspended
        } else {
            HoldState::Held
        }
    }

    /// Waits while the hold is [`HoldState::Suspended`]: `Ok(true)` once it is `Held`, `Ok(false)`
    /// if `deadline` passed first.
    ///
    /// # Errors
    /// [`Error::LockLost`] naming the node once it is `Lost`; [`Error::Closed`] once the client is.
    pub(crate) async fn wait_held(&self, deadline: Option<Instant>) -> Result<bool> {
        let mut status = self.client.status();
        loop {
            let state = {
                let status = status.borrow_and_update();
                if status.closed {
                    return Err(Error::Closed { path: self.node.path.clone() });
                }
                self.state_given(&status)
            };
            match state {
                HoldState::Held => return Ok(true),
                HoldState::Lost => return Err(self.lost_error("the hold is lost")),
                HoldState::Suspended => {}
            }
            let changed = match deadline {
                Some(d) => match tokio::time::timeout_at(d.into(), status.changed()).await {
                    Ok(changed) => changed,
                    Err(_) => return Ok(false),
                },
                None => status.changed().await,
            };
            if changed.is_err() {
                return Err(Error::Closed { path: self.node.path.clone() });
            }
        }
    }

    /// Whether every one of `holds` is `Held`: with `wait`, a suspended hold is waited for
    /// until it is `Held` again or `deadline` passes; without, the states are read once. Stops
    /// at the first lost hold. A set taken one part after another (a multi-lock, several
    /// leases) checks this before it is handed out: an earlier part may have been suspended or
    /// lost while a later one was awaited.
    ///
    /// `Held` only when one pass finds every hold `Held` without waiting: while one hold is
    /// waited for, another may change (its client's link cut, its node deleted), so every wait
    /// is followed by another pass.
    ///
    /// # Errors
    /// [`Error::Closed`] once the client is.
    pub(crate) async fn settle_all(holds: Vec<Arc<Hold>>, wait: bool, deadline: Option<Instant>) -> Result<Settled> {
        loop {
            let mut waited = false;
            for hold in &holds {
                let held = if wait {
                    waited |= hold.hold_state() != HoldState::Held;
                    hold.wait_held(deadline).await
                } else {
                    match hold.hold_state() {
                        HoldState::Held => Ok(true),
                        HoldState::Suspended => Ok(false),
                        HoldState::Lost => Err(hold.lost_error("the hold is lost")),
                    }
                };
                match held {
                    Ok(true) => {}
                    Ok(false) => return Ok(Settled::NotHeld),
                    Err(Error::LockLost { node, .. }) => return Ok(Settled::Lost(node)),
                    Err(e) => return Err(e),
                }
            }
            if !waited {
                return Ok(Settled::Held);
            }
        }
    }

    fn lost_error(&self, reason: &'static str) -> Error {
        Error::LockLost { node: self.node.path.clone(), reason }
    }

    /// The node's data: what was written at creation, or as last seen by the monitor.
    pub fn data(&self) -> Vec<u8> {
        self.data.borrow().clone()
    }

    /// The node's data as last read: what was written at creation, then whatever someone else
    /// writes into the node while it is held — e.g. Curator's revocation request `__REVOKE__`.
    /// Starts watching the node (like [`watch_state`](Self::watch_state)) the first time.
    pub fn watch_data(self: &Arc<Self>) -> watch::Receiver<Vec<u8>> {
        self.start_monitor();
        self.data.subscribe()
    }

    /// A receiver of hold-state changes (starts the watch on our node the first time).
    pub fn watch_state(self: &Arc<Self>) -> watch::Receiver<HoldState> {
        self.start_monitor();
        let rx = self.state.subscribe();
        self.refresh();
        rx
    }

    /// The hold's state changes as a stream: each change once, ending after [`HoldState::Lost`].
    pub fn state_changes(self: &Arc<Self>) -> HoldStateStream {
        HoldStateStream::new(self.watch_state())
    }

    /// Resolves once someone asked for the lock: `__REVOKE__` was written into our node (Curator's
    /// `Revoker`; see [`Revoker::attempt_revoke`](crate::locks::Revoker::attempt_revoke)). Never resolves
    /// otherwise — `select!` it with [`lost`](Self::lost) and the work.
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn work() {}
    /// # async fn demo(mutex: zk_curator::locks::InterProcessMutex) -> zk_curator::Result<()> {
    /// mutex.make_revocable();
    /// mutex.acquire().await?;
    /// let hold = mutex.current_hold().expect("held by this task");
    /// tokio::select! {
    ///     _ = work() => {}
    ///     _ = hold.revocation_requested() => println!("{} asked for: letting go", hold.path()),
    /// }
    /// mutex.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn revocation_requested(self: &Arc<Self>) {
        let mut data = self.watch_data();
        if data.wait_for(|d| d.as_slice() == super::revocation::REVOKE_MESSAGE).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// Resolves once the hold is [`HoldState::Lost`].
    ///
    /// # Cancel safety
    /// Cancel safe.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn work() {}
    /// # async fn demo(mutex: zk_curator::locks::InterProcessMutex) -> zk_curator::Result<()> {
    /// mutex.acquire().await?;
    /// let hold = mutex.current_hold().expect("held by this task");
    /// tokio::select! {
    ///     _ = work() => {}
    ///     _ = hold.lost() => eprintln!("{} lost: stop", hold.path()),
    /// }
    /// mutex.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn lost(self: &Arc<Self>) {
        let mut rx = self.watch_state();
        let _ = rx.wait_for(|s| *s == HoldState::Lost).await;
    }

    fn refresh(&self) -> HoldState {
        let now = self.hold_state();
        if now == HoldState::Lost {
            // Recorded (once) before anyone can see `Lost`.
            self.meter.end(|| self.loss_cause());
        }
        self.state.send_if_modified(|s| {
            // Lost is final.
            if *s == now || *s == HoldState::Lost {
                return false;
            }
            *s = now;
            true
        });
        *self.state.borrow()
    }

    /// Why the hold ended, as far as the client knows now: `None` for a release. The session's end
    /// comes first: a hold released after its session ended was lost before — also when the
    /// client was closed since, on a later session (the hold was lost at its session's end, not
    /// by the close).
    fn loss_cause(&self) -> Option<LossCause> {
        let status = self.client.status_now();
        if status.closed && status.session == self.node.session {
            Some(LossCause::ClientClosed)
        } else if status.has_ended(self.node.session) {
            Some(if status.expiry_bounds.given_up(self.node.session) {
                LossCause::SessionGivenUp
            } else {
                LossCause::SessionExpired
            })
        } else if self.node_deleted.load(Ordering::SeqCst) {
            Some(LossCause::NodeDeleted)
        } else {
            None
        }
    }

    fn start_monitor(self: &Arc<Self>) {
        if self.monitor_started.swap(true, Ordering::SeqCst) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            // Started by the first watcher inside a runtime.
            self.monitor_started.store(false, Ordering::SeqCst);
            return;
        };
        // A monitor dropped with its runtime (shut down, also before it ran) lets the next watcher
        // start another one, on its own runtime.
        let mut restart = MonitorRestart(Arc::downgrade(self));
        let monitor = monitor(Arc::downgrade(self), self.client.status(), self.state.subscribe());
        runtime.spawn(async move {
            monitor.await;
            restart.disarm();
        });
    }

    /// Marks the node gone — found deleted or someone else's by a recipe's own check (a write
    /// fenced on it refused, a read) — so the hold is `Lost`.
    pub(crate) fn mark_node_gone(&self) {
        self.node_deleted.store(true, Ordering::SeqCst);
        self.refresh();
    }

    /// True once the node was seen deleted (or replaced at its path) by the monitor or a check.
    pub(crate) fn node_seen_gone(&self) -> bool {
        self.node_deleted.load(Ordering::SeqCst)
    }

    pub(crate) fn mark_released(&self) {
        self.released.store(true, Ordering::SeqCst);
        self.refresh();
    }

    /// Releases: deletes the node now (guaranteed; a failure leaves it queued for background
    /// deletion). Waits at most the connection timeout in all, then leaves the delete to the queue.
    ///
    /// Also after our session ended, as Curator does: an ephemeral node is gone with its session
    /// (the delete is a harmless `NoNode`), but a driver may create PERSISTENT nodes, which outlive
    /// the session and must still be deleted. The name is unique (protected), so this can never
    /// delete another contender's node; a node of a fixed name is deleted only while it is ours,
    /// on its own session ([`DeleteTarget::Owned`]).
    pub(crate) async fn release(&self) -> Result<()> {
        self.release_by(None).await
    }

    /// [`release`](Self::release), waiting at most until `deadline` too (a timed call giving back
    /// what it took keeps its own deadline).
    pub(crate) async fn release_by(&self, deadline: Option<Instant>) -> Result<()> {
        if let Some(link) = &self.local {
            // The node is handed on to the next local holder, or deleted by its last one.
            self.mark_released();
            return match link.queue.leave(link.turn, &self.data()) {
                // Boxed (here and below): a task that waits to hold and then release carries its
                // release future's size the whole time; the delete is the large part.
                Some(node) => Box::pin(node.delete_node(deadline)).await,
                None => Ok(()),
            };
        }
        Box::pin(self.delete_node(deadline)).await
    }

    /// Releases a hold of a node of its own: marks it released and deletes the node.
    async fn delete_node(&self, deadline: Option<Instant>) -> Result<()> {
        let session_gone = self.client.session() != self.node.session;
        self.mark_released();
        if session_gone {
            debug!(node = %self.node.path, "release after session loss: deleting in case the node outlived it");
        }
        let budget = crate::deadline::deadline_after(self.client.connection_timeout());
        let budget = deadline.map_or(budget, |deadline| deadline.min(budget));
        self.client.delete_target_guaranteed(self.delete_target(), Some(budget)).await
    }

    /// What deleting our node deletes: the path, or for a node of a fixed name, the node at the
    /// path only while it is ours.
    fn delete_target(&self) -> DeleteTarget {
        match &self.owner_mark {
            // Held: ours on its own session, no look needed for the first delete (the mark told
            // it apart while its create's outcome was unknown); a retry looks at the czxid.
            Some(_) => DeleteTarget::Owned {
                path: self.fixed.clone(),
                session: self.node.session.id,
                mark: OwnedMark::held(self.node.czxid),
            },
            None => DeleteTarget::Node(self.fixed.clone()),
        }
    }

    /// Gives back a hold granted but never handed out (its waiter was gone, or did not take it):
    /// released in the background, its hold not counted in the metrics.
    pub(crate) fn give_back_unclaimed(&self) {
        self.discard_meter();
        self.release_in_background();
    }

    /// Counts no hold time for this hold (granted, never handed out).
    pub(crate) fn discard_meter(&self) {
        self.meter.discard();
    }

    /// Releases in the background (from `Drop`): never blocks, never needs a runtime. Deletes even
    /// after a session change, for the same reason as [`release`](Self::release).
    pub(crate) fn release_in_background(&self) {
        self.mark_released();
        if let Some(link) = &self.local {
            if let Some(node) = link.queue.leave(link.turn, &self.data()) {
                node.release_in_background();
            }
            return;
        }
        drop(self.client.delete_target_in_background(self.delete_target()));
    }

    /// Runs a ZooKeeper multi-op whose first op checks that our lock node still exists, so the
    /// writes happen only while we hold the lock (the idea of CURATOR-689 and of `zookeeper-client`'s
    /// `LockClient`).
    ///
    /// Paths in the results are as the caller gave them (without the client's namespace).
    ///
    /// # Errors
    /// * [`Error::LockLost`] when our node is gone (or our session ended) — nothing was written.
    /// * [`Error::InvalidPath`] / [`Error::InvalidArgument`] for a bad operation in `write`, or
    ///   data over the client's [`max_data_size`](crate::CuratorClientBuilder::max_data_size)
    ///   (nothing sent).
    /// * [`Error::TransactionFailed`] when an op failed (naming its index, path and code;
    ///   nothing was written).
    /// * [`Error::ZooKeeper`] when the
    ///   check on our node failed for another reason than its absence (e.g. `NoAuth`: the node's
    ///   ACL denies READ), or when the request failed (retryable errors have an unknown outcome
    ///   and are not retried).
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped commit may still be applied (atomically, and only while held).
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(mutex: zk_curator::locks::InterProcessMutex) -> zk_curator::Result<()> {
    /// let guard = mutex.lock().await?;
    /// let write = zk_curator::locks::GuardedWrite::new().set_data("/reports/latest", b"done", None);
    /// guard.hold().guarded_write(write).await?;
    /// # Ok(()) }
    /// ```
    pub async fn guarded_write(&self, write: GuardedWrite) -> Result<Vec<OpResult>> {
        // Nothing is sent for a bad operation.
        let prepared = write.prepare(&self.client)?;
        if self.released.load(Ordering::SeqCst) {
            return Err(self.lost_error("the lock was released"));
        }
        if self.client.session() != self.node.session {
            return Err(self.lost_error("the lock's session ended"));
        }
        // Lost is final (e.g. LOST while the client is still replacing the session): fail fast
        // rather than wait for a connection and report a retryable ConnectionLoss.
        if self.refresh() == HoldState::Lost {
            return Err(self.lost_error("the hold is lost"));
        }
        // Nothing is sent yet: waiting for a connection is retried under the policy (the write
        // itself is sent once); the hold's session given up meanwhile ends the wait at once.
        let mut retrying = self.client.retrying(&self.node.path, None);
        let Some(zk) = self.client.connected_retrying_on(&mut retrying, self.node.session).await? else {
            return Err(self.lost_error("the lock's session ended"));
        };
        let mut writer = zk.new_check_writer(&self.fixed, None).map_err(|e| Error::zk(&self.node.path, e))?;
        prepared.add_to(&mut writer).map_err(|e| Error::zk(write.path_at(0).unwrap_or("/"), e))?;
        match writer.commit().await {
            Ok(results) => Ok(results.into_iter().map(|result| OpResult::of_guarded(&self.client, result)).collect()),
            Err(zk::CheckWriteError::CheckFailed { source: zk::Error::NoNode }) => {
                self.node_deleted.store(true, Ordering::SeqCst);
                self.refresh();
                Err(self.lost_error("the lock node no longer exists"))
            }
            Err(zk::CheckWriteError::CheckFailed { source }) => Err(Error::zk(&self.node.path, source)),
            Err(zk::CheckWriteError::OperationFailed { index, source }) => Err(write.failed_at(index, &source)),
            Err(zk::CheckWriteError::RequestFailed { source }) => Err(Error::zk(&self.node.path, source)),
        }
    }
}

impl Drop for Hold {
    /// A hold whose end was never seen (e.g. its session expired while nobody watched it, and it
    /// was never released) still ends its metrics, with what is known now.
    fn drop(&mut self) {
        self.meter.end(|| self.loss_cause());
    }
}

/// Clears a hold's `monitor_started` when its monitor task is dropped before it ended.
struct MonitorRestart(Weak<Hold>);

impl MonitorRestart {
    /// The monitor ended: nothing to restart.
    fn disarm(&mut self) {
        self.0 = Weak::new();
    }
}

impl Drop for MonitorRestart {
    fn drop(&mut self) {
        if let Some(hold) = self.0.upgrade() {
            hold.monitor_started.store(false, Ordering::SeqCst);
        }
    }
}

/// Keeps the hold state up to date — connection and session changes, and a data watch on our node
/// that notices its deletion — and publishes the node's data each time the watch is armed (so a
/// data change, such as a revocation request, reaches [`Hold::watch_data`]).
async fn monitor(node: Weak<Hold>, mut status: watch::Receiver<Status>, mut own: watch::Receiver<HoldState>) {
    type Fired = std::pin::Pin<Box<dyn std::future::Future<Output = zk::WatchedEvent> + Send>>;
    let mut fired: Option<Fired> = None;
    let mut arm_failed = false;
    loop {
        let Some(this) = node.upgrade() else { return };
        if this.refresh() == HoldState::Lost {
            return;
        }
        // Arm a data watch on our node while connected on its session. The request is raced with
        // the state changes below, so a disconnect while it is in flight is still reported at once.
        let current = this.client.status_now().serves(this.node.session).then(|| this.client.raw_client().ok());
        let arm = match (&fired, arm_failed, current.flatten()) {
            (None, false, Some(zk)) if zk.session_id().0 == this.node.session.id => {
                let fixed = this.fixed.clone();
                let czxid = this.node.czxid;
                Some(async move {
                    zk.get_and_watch_data(&fixed).await.and_then(|(data, stat, watcher)| {
                        // A node re-created at the path (a fixed name's next holder) is not ours.
                        if stat.czxid == czxid {
                            Ok((data, watcher))
                        } else {
                            Err(zk::Error::NoNode)
                        }
                    })
                })
            }
            _ => None,
        };
        drop(this);
        tokio::select! {
            armed = optional(arm) => match armed {
                Ok((data, watcher)) => {
                    fired = Some(Box::pin(watcher.changed()));
                    if let Some(this) = node.upgrade() {
                        this.data.send_if_modified(|d| if *d == data { false } else { *d = data; true });
                    }
                }
                Err(zk::Error::NoNode) => {
                    if let Some(this) = node.upgrade() {
                        this.node_deleted.store(true, Ordering::SeqCst);
                    }
                }
                // Try again after the next connection change rather than spinning.
                Err(_) => arm_failed = true,
            },
            event = optional(fired.as_mut()) => {
                fired = None;
                if event.event_type == zk::EventType::NodeDeleted {
                    if let Some(this) = node.upgrade() {
                        this.node_deleted.store(true, Ordering::SeqCst);
                    }
                }
            },
            changed = status.changed() => {
                if changed.is_err() {
                    return;
                }
                arm_failed = false;
            },
            _ = own.wait_for(|s| *s == HoldState::Lost) => {},
        }
    }
}

/// Awaits the future if there is one, else never resolves (a disabled `select!` branch).
async fn optional<F: std::future::Future>(future: Option<F>) -> F::Output {
    match future {
        Some(future) => future.await,
        None => std::future::pending().await,
    }
}

/// Hold-state changes of one hold, from [`Hold::state_changes`]: a [`futures_core::Stream`] of
/// [`HoldState`]s that ends after [`HoldState::Lost`] (use `futures::StreamExt` or
/// `tokio_stream::StreamExt`), or the inherent [`next`](Self::next).
pub struct HoldStateStream {
    /// Exactly one of `rx` and `changing` is set while the stream has not ended: the receiver lives
    /// inside the wait in flight (`watch::Receiver` has no poll method).
    rx: Option<watch::Receiver<HoldState>>,
    changing: Option<Changing>,
    done: bool,
}

/// A wait for the next change in flight, owning the receiver.
type Changing = Pin<Box<dyn Future<Output = (HoldState, watch::Receiver<HoldState>)> + Send + Sync>>;

impl std::fmt::Debug for HoldStateStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HoldStateStream").field("waiting", &self.changing.is_some()).field("done", &self.done).finish()
    }
}

impl HoldStateStream {
    pub(crate) fn new(rx: watch::Receiver<HoldState>) -> Self {
        Self { rx: Some(rx), changing: None, done: false }
    }

    /// A stream that has ended (of a hold that never was).
    pub(crate) fn ended() -> Self {
        Self { rx: None, changing: None, done: true }
    }

    /// The next state change; `None` after `Lost` has been returned. The same as `StreamExt::next`.
    ///
    /// # Cancel safety
    /// Cancel safe: a change not yet returned is returned by the next call.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(mutex: zk_curator::locks::InterProcessMutex) -> zk_curator::Result<()> {
    /// let guard = mutex.lock().await?;
    /// let mut changes = guard.state_changes();
    /// while let Some(state) = changes.next().await {
    ///     println!("{} is {state:?}", guard.node_path()); // Suspended, Held, ..., Lost
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn next(&mut self) -> Option<HoldState> {
        std::future::poll_fn(|cx| self.poll_change(cx)).await
    }

    fn poll_change(&mut self, cx: &mut Context<'_>) -> Poll<Option<HoldState>> {
        if self.done {
            return Poll::Ready(None);
        }
        let changing = match &mut self.changing {
            Some(changing) => changing,
            None => {
                let Some(mut rx) = self.rx.take() else {
                    return Poll::Ready(None);
                };
                self.changing.insert(Box::pin(async move {
                    let state = match rx.changed().await {
                        Ok(()) => *rx.borrow_and_update(),
                        // The hold itself is gone: it was released.
                        Err(_) => HoldState::Lost,
                    };
                    (state, rx)
                }))
            }
        };
        let (state, rx) = std::task::ready!(changing.as_mut().poll(cx));
        self.changing = None;
        self.rx = Some(rx);
        self.done = state == HoldState::Lost;
        Poll::Ready(Some(state))
    }
}

impl futures_core::Stream for HoldStateStream {
    type Item = HoldState;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<HoldState>> {
        self.get_mut().poll_change(cx)
    }
}

/// How a local holder reaches the local queue that shares its node.
pub(crate) struct LocalLink {
    pub(crate) queue: Arc<dyn LocalTurns>,
    pub(crate) turn: u64,
}

impl std::fmt::Debug for LocalLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalLink").field("turn", &self.turn).finish()
    }
}

/// The local queue as its holders see it.
pub(crate) trait LocalTurns: Send + Sync {
    /// A holder of `turn` is done (released or dropped; `data` is its node's data as it last saw
    /// it): the node goes to the next local waiter of the turn, or — returned — is to be deleted
    /// by the caller, the turn's last holder.
    fn leave(&self, turn: u64, data: &[u8]) -> Option<Arc<Hold>>;
    /// No more local hand-offs of `turn`'s node: its waiters move on to the next turn.
    fn close_turn(&self, turn: u64);
}

/// The writes of one [`Hold::guarded_write`], applied atomically after the lock check: a
/// [`Transaction`](crate::Transaction), with the same operations.
pub type GuardedWrite = crate::Transaction;

/// Whether every part of a set of holds is held (see [`Hold::settle_all`]).
#[derive(Debug)]
pub(crate) enum Settled {
    Held,
    /// A part was still suspended at the deadline (or when read once).
    NotHeld,
    /// The named node of a part is lost.
    Lost(String),
}
