//! Lock-tag batch claims: work items as nodes, claimed in batches by tagged processes.
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

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use tokio::sync::watch;
use tracing::{debug, warn};
use zookeeper_client as zk;

use crate::error::{Error, ErrorCode, ErrorKind, Result};
use crate::framework::guaranteed_delete::DeleteTarget;
use crate::framework::CreatedNode;
use crate::framework::{limits, paths, SessionIdentity};
use crate::locks::hold::{Hold, HoldState, HoldStateStream};
use crate::metrics::HoldMeter;
use crate::CuratorClient;

/// The longest tag accepted (bytes).
const MAX_TAG_LEN: usize = 256;

/// A claim node's data besides the tag: a newline, the session id in hex, a newline, the claim
/// time in milliseconds.
const CLAIM_DATA_OVERHEAD: usize = 64;

/// Most reads in one multi-read request.
const READS_PER_REQUEST: usize = 256;

/// Most bytes of paths (with their headers) in one multi-read request: a quarter of the server's
/// default `jute.maxbuffer`, so a request of many long names never makes it drop the connection.
const PATH_BYTES_PER_REQUEST: usize = 256 * 1024;

/// What one read in a multi-read request takes besides its path.
const READ_OVERHEAD: usize = 16;

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
    /// [`WorkClaims::reclaim_older_than`], deleted by someone else, or its session ended (or was
    /// given up by the client while suspended). Its `complete` is refused; stop working on the
    /// item. Final.
    Lost,
    /// Completed or released by its holder. Final.
    Finished,
}

struct ClaimShared {
    item: String,
    data: Vec<u8>,
    /// The item's data version written by the claim transaction: the fence.
    item_version: i32,
    /// The item's creation zxid: tells it from an item added again under the same name.
    item_czxid: i64,
    /// When the server made the claim node (its clock, as `reclaim_older_than` reads it).
    granted_at: SystemTime,
    /// The claim node as a hold: its creation zxid (the fencing token's zxid), its session, and
    /// its `Held`/`Suspended`/`Lost` state — connection and session changes, and a watch on that
    /// very node (by creation zxid, never "a node at that path").
    hold: Arc<Hold>,
    /// Completed or released by its holder (the hold is then `Lost`, as a released hold is).
    finished: AtomicBool,
    /// The connection status as of the grant: once it changed (a disconnect, maybe), the claim
    /// may have been reclaimed, its item completed, added again and claimed by another worker
    /// with the same fence while this holder heard nothing — so its first fenced send is preceded
    /// by a read of the claim node (see `WorkClaims::fenced`).
    status_at_grant: watch::Receiver<crate::framework::session::Status>,
}

impl ClaimShared {
    /// The claim's node's creation zxid.
    fn czxid(&self) -> i64 {
        self.hold.fencing_token().zxid()
    }

    fn session(&self) -> SessionIdentity {
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
    fn may_be_held(&self) -> bool {
        matches!(self.current(), ClaimState::Held | ClaimState::Suspended)
    }

    /// Marks the claim lost (its node is gone or someone else's), unless it finished.
    fn mark_lost(&self) {
        self.hold.mark_node_gone();
    }

    /// Marks the claim completed or released by its holder.
    fn mark_finished(&self) {
        self.finished.store(true, Ordering::SeqCst);
        self.hold.mark_released();
    }
}

/// One claimed item, as handed out by [`WorkClaims::claim`]: its name, payload, fence and state.
///
/// A claim is a hold, like a lock's: handed out only [`Held`](ClaimState::Held), it turns
/// [`Suspended`](ClaimState::Suspended) while the connection is lost (and `Held` again when the
/// same session reconnects), and [`Lost`](ClaimState::Lost) once its node is gone or its session
/// ended — see [`state`](Self::state), [`state_changes`](Self::state_changes) and
/// [`lost`](Self::lost).
///
/// Clones share the claim. Dropping it does not release the claim (the [`WorkClaims`] keeps it
/// until [`complete`](WorkClaims::complete), [`release`](WorkClaims::release) or the session's end).
/// As a lock's [`Hold`] does, a claim keeps its session open once the client gave that session up
/// (LOST) and replaced it, until the claim is finished or forgotten by its [`WorkClaims`] — or
/// the server could have expired the session anyway, whichever is first: so its node is not
/// handed to another worker before its holder could be told.
#[derive(Clone)]
pub struct Claim {
    shared: Arc<ClaimShared>,
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
    /// fence with the item's name only if names are never re-used, else with [`czxid`](Self::czxid).
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
    /// [`WorkClaims::reclaim_older_than`] measures the claim's age from, against the reclaiming
    /// host's clock).
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

/// What [`WorkClaims::reclaim_older_than`] woke up.
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

struct WorkWatch {
    /// Fires (turns true) when the items' or the claims' children change, or the watches' session ends.
    fired: watch::Receiver<bool>,
    task: tokio::task::JoinHandle<()>,
}

struct Inner {
    client: CuratorClient,
    path: String,
    tag: String,
    items: String,
    claims: String,
    members: String,
    fair_share: bool,
    dirs_made: AtomicBool,
    held: Mutex<HashMap<String, Arc<ClaimShared>>>,
    work: Mutex<Option<WorkWatch>>,
    /// Cancelled claims whose claims are still being released.
    releasing: watch::Sender<usize>,
    /// Under the fair share, the member node made last (fixed path) and its session id.
    member: Mutex<Option<(String, i64)>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(w) = self.work.get_mut().take() {
            w.task.abort();
        }
        // No longer a participant: the member node goes (in the background, only while it is
        // that session's), so the others' shares stop counting us.
        if let Some((path, owner)) = self.member.get_mut().take() {
            drop(self.client.delete_target_in_background(DeleteTarget::OwnedBy { path, owner }));
        }
    }
}

/// One [`WorkClaims::claim`] call, shared by its caller and the task that runs it. Whoever
/// ends second sees what the other did under one lock: a result the caller will never read is
/// released, and the handle's count of pending releases goes up and down exactly once.
struct ClaimCall {
    inner: Arc<Inner>,
    state: Mutex<CallState>,
    done: tokio::sync::Notify,
}

enum CallState {
    Running,
    Done(Result<Vec<Claim>>),
    /// The caller is gone before the result came; a pending release is counted for it.
    Abandoned,
    Over,
}

impl ClaimCall {
    /// The task's end: hands the result over, or releases it when the caller is gone.
    fn finish(self: &Arc<Self>, result: Result<Vec<Claim>>) -> Option<(Result<Vec<Claim>>, PendingRelease)> {
        let mut state = self.state.lock();
        match std::mem::replace(&mut *state, CallState::Over) {
            CallState::Running => {
                *state = CallState::Done(result);
                drop(state);
                self.done.notify_one();
                None
            }
            CallState::Abandoned => Some((result, PendingRelease(self.inner.clone()))),
            other => {
                *state = other;
                None
            }
        }
    }

    /// The caller's end before it took a result: what the call made must still be released.
    fn abandon(&self) -> Option<(Result<Vec<Claim>>, PendingRelease)> {
        let mut state = self.state.lock();
        match std::mem::replace(&mut *state, CallState::Over) {
            CallState::Running => {
                self.inner.releasing.send_modify(|n| *n += 1);
                *state = CallState::Abandoned;
                None
            }
            CallState::Done(result @ Ok(_)) => {
                self.inner.releasing.send_modify(|n| *n += 1);
                Some((result, PendingRelease(self.inner.clone())))
            }
            CallState::Done(Err(_)) | CallState::Abandoned | CallState::Over => None,
        }
    }
}

/// Takes a finished call's result, if it finished.
fn take_done(state: &mut CallState) -> Option<Result<Vec<Claim>>> {
    if !matches!(state, CallState::Done(_)) {
        return None;
    }
    match std::mem::replace(state, CallState::Over) {
        CallState::Done(result) => Some(result),
        other => {
            *state = other;
            None
        }
    }
}

/// The task side of a [`ClaimCall`]: a task dropped before it finished (its runtime shut down)
/// still settles the call, so neither the caller nor a pending release waits for it forever.
struct ClaimTask(Arc<ClaimCall>);

impl Drop for ClaimTask {
    fn drop(&mut self) {
        let closed = Error::Closed { path: self.0.inner.path.clone() };
        // A pending release of an abandoned call ends here: nothing was claimed after all.
        drop(self.0.finish(Err(closed)));
    }
}

/// The caller side of a [`ClaimCall`]; dropped before it took the result, it abandons the call.
struct ClaimCaller(Arc<ClaimCall>);

impl Drop for ClaimCaller {
    fn drop(&mut self) {
        if let Some((result, pending)) = self.0.abandon() {
            let work = WorkClaims { inner: self.0.inner.clone() };
            // Spawning on a runtime that shut down drops the task, and with it `pending`.
            self.0.inner.client.runtime().spawn(async move {
                let _pending = pending;
                work.release_abandoned(result).await;
            });
        }
    }
}

/// One pending background release of a cancelled claim; counts down when dropped.
struct PendingRelease(Arc<Inner>);

impl Drop for PendingRelease {
    fn drop(&mut self) {
        self.0.releasing.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// Lock-tag batch claims (the seeds' "lock tags"; Kazoo's `LockingQueue`, done without its flaws):
/// work items are nodes under a path, each process claims a batch of unclaimed items under its own
/// tag in one call, processes them, and completes or releases them one by one or all at once.
///
/// * [`claim`](Self::claim) claims up to `n` unclaimed items with pipelined ephemeral claim nodes
///   (see the module layout in docs/failure-semantics.md and README): a dead process's claims go
///   with its session.
/// * [`complete`](Self::complete) deletes the item and its claim in one transaction fenced by the
///   claim; refused once the claim was lost.
/// * [`reclaim_older_than`](Self::reclaim_older_than) wakes up items of a live but stuck holder,
///   whose [`Claim`] turns [`Lost`](ClaimState::Lost) and whose `complete` is refused.
/// * [`wait_for_work`](Self::wait_for_work) waits on one pair of children watches, re-used by
///   every timed wait until it fires: no watcher growth.
///
/// ```no_run
/// use zk_curator::CuratorClient;
/// use zk_curator::claims::WorkClaims;
/// # async fn demo() -> zk_curator::Result<()> {
/// let client = CuratorClient::connect("127.0.0.1:2181").await?;
/// let work = WorkClaims::new(&client, "/work/emails", "mailer-1")?;
/// work.add("order-17", b"payload").await?;
/// for claim in work.claim(50).await? {
///     // ... process claim.data() ...
///     work.complete(claim.item()).await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct WorkClaims {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for WorkClaims {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkClaims").field("path", &self.inner.path).field("tag", &self.inner.tag).finish()
    }
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

impl WorkClaims {
    /// Claims under `path` for `tag` (this process's name, e.g. `host:pid`), without fair share.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for a bad path; [`Error::InvalidArgument`] for an empty tag, one with
    /// a newline or `/`, one longer than 256 bytes, or one with a character ZooKeeper refuses in a
    /// node name (the tag names this process's member node under the fair share).
    pub fn new(client: &CuratorClient, path: &str, tag: &str) -> Result<WorkClaims> {
        paths::validate_path(path)?;
        if tag.is_empty() {
            return Err(Error::invalid_argument("tag", "\"\"", "must not be empty"));
        }
        if tag.contains('\n') || tag.contains('/') {
            return Err(Error::invalid_argument("tag", tag, "must not contain a newline or '/'"));
        }
        if tag.len() > MAX_TAG_LEN {
            return Err(Error::invalid_argument("tag", tag, "is longer than 256 bytes"));
        }
        // The tag names this process's member node (`<tag>-<session-id-hex>`) under the fair share.
        if paths::validate_node_name("tag", &format!("{tag}-0")).is_err() {
            return Err(Error::invalid_argument("tag", tag, "has a character ZooKeeper refuses in a node name"));
        }
        let items = client.fix_path(&paths::join(path, "items"));
        let claims = client.fix_path(&paths::join(path, "claims"));
        let members = client.fix_path(&paths::join(path, "members"));
        Ok(WorkClaims {
            inner: Arc::new(Inner {
                client: client.clone(),
                path: path.to_string(),
                tag: tag.to_string(),
                items,
                claims,
                members,
                fair_share: false,
                dirs_made: AtomicBool::new(false),
                held: Mutex::new(HashMap::new()),
                work: Mutex::new(None),
                releasing: watch::channel(0).0,
                member: Mutex::new(None),
            }),
        })
    }

    /// Turns the fair share on: this process registers as a member (an ephemeral node under
    /// `P/members`, made by its first [`claim`](Self::claim)) and each claim takes at most
    /// ceil(unclaimed / members). Call before sharing the value. When the last handle (clone) is
    /// dropped, the member node is deleted in the background (two handles with the same tag on
    /// one client share it; the other's next claim makes it again).
    pub fn with_fair_share(mut self) -> WorkClaims {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.fair_share = true;
        }
        self
    }

    /// The recipe path.
    pub fn path(&self) -> &str {
        &self.inner.path
    }

    /// This process's tag.
    pub fn tag(&self) -> &str {
        &self.inner.tag
    }

    fn item_fixed(&self, item: &str) -> String {
        paths::join(&self.inner.items, item)
    }

    fn claim_fixed(&self, item: &str) -> String {
        paths::join(&self.inner.claims, item)
    }

    fn item_path(&self, item: &str) -> String {
        paths::join(&paths::join(&self.inner.path, "items"), item)
    }

    /// Refuses an item whose claim transaction (its payload rewritten, its claim node created)
    /// would be larger than one request the server reads: sent, it would make the server drop the
    /// connection, and the item could never be claimed.
    fn check_claim_size(&self, item: &str, data_len: usize) -> Result<()> {
        let rest = self.item_fixed(item).len()
            + self.claim_fixed(item).len()
            + self.inner.tag.len()
            + CLAIM_DATA_OVERHEAD
            + 2 * limits::OPERATION_OVERHEAD;
        limits::check_request_size(self.inner.client.max_data_size(), "data", &self.item_path(item), data_len, rest)
    }

    async fn make_dirs(&self, deadline: Option<Instant>) -> Result<()> {
        if self.inner.dirs_made.load(Ordering::Acquire) {
            return Ok(());
        }
        let c = &self.inner.client;
        c.create_parents_as(&self.inner.items, deadline, false).await?;
        c.create_parents_as(&self.inner.claims, deadline, false).await?;
        if self.inner.fair_share {
            c.create_parents_as(&self.inner.members, deadline, false).await?;
        }
        self.inner.dirs_made.store(true, Ordering::Release);
        Ok(())
    }

    /// Makes the recipe's directories again: someone deleted them under this handle.
    async fn remake_dirs(&self, deadline: Option<Instant>) -> Result<()> {
        debug!(path = %self.inner.path, "the claims' directories are gone: making them again");
        self.inner.dirs_made.store(false, Ordering::Release);
        self.make_dirs(deadline).await
    }

    /// Adds a work item `item` with payload `data` (a PERSISTENT node under `P/items`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a bad item name, or naming `data` when the item's claim
    /// transaction (payload, item and claim paths, claim data) would be larger than one request
    /// the server reads (the client's max data size + 4 KiB); [`Error::ZooKeeper`] with
    /// [`ErrorCode::NodeExists`] when the item exists; connection errors after the retry policy.
    ///
    /// # Cancel safety
    /// The item may or may not have been added; adding it again then reports `NodeExists`.
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(work: zk_curator::claims::WorkClaims) -> zk_curator::Result<()> {
    /// work.add("invoice-42", b"{\"id\":42}").await?;
    /// # Ok(()) }
    /// ```
    pub async fn add(&self, item: &str, data: &[u8]) -> Result<()> {
        paths::validate_node_name("item", item)?;
        self.check_claim_size(item, data.len())?;
        self.make_dirs(None).await?;
        match self.add_once(item, data).await {
            Err(e) if e.is(ErrorCode::NoNode) => {
                self.remake_dirs(None).await?;
                self.add_once(item, data).await
            }
            other => other,
        }
    }

    async fn add_once(&self, item: &str, data: &[u8]) -> Result<()> {
        let fixed = self.item_fixed(item);
        let f = fixed.as_str();
        let acls = self.inner.client.raw_acls_for(f);
        let path = self.item_path(item);
        let mut sends = 0u32;
        let result = self
            .inner
            .client
            .with_retry(&path, None, |zk| {
                sends += 1;
                let acls = acls.clone();
                async move {
                    let options = zk::CreateMode::Persistent.with_acls(zk::Acls::new(&acls));
                    zk.create(f, data, &options).await.map(|_| ())
                }
            })
            .await;
        match result {
            // A retried create whose first send applied.
            Err(e) if e.is(ErrorCode::NodeExists) && sends > 1 => Ok(()),
            other => other,
        }
    }

    /// Claims up to `n` unclaimed items for this process's tag in one call: one read of the items
    /// and claims, one pipelined read of the candidates, one pipelined claim transaction per
    /// candidate (an item someone else claims first is skipped). Returns the claims made (maybe
    /// fewer than `n`, maybe none). With the fair share on, at most ceil(unclaimed / members).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for `n == 0`; connection errors after the retry policy;
    /// [`Error::Closed`].
    ///
    /// # Cancel safety
    /// Cancel safe: the claim runs in a task of its own; when the caller is gone before it took
    /// the result, every claim the call made is released in the background, so a cancelled claim
    /// leaves no claim node. The next `claim` on this handle (or a clone) first waits for those
    /// releases, so it can take the same items again.
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(work: zk_curator::claims::WorkClaims) -> zk_curator::Result<()> {
    /// let batch = work.claim(50).await?;
    /// for claim in &batch {
    ///     work.complete(claim.item()).await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn claim(&self, n: usize) -> Result<Vec<Claim>> {
        if n == 0 {
            return Err(Error::invalid_argument("n", n, "must be at least 1"));
        }
        // A cancelled claim on this handle releases its claims in the background; wait for that,
        // so that this claim can take those items again.
        let mut releasing = self.inner.releasing.subscribe();
        let _ = releasing.wait_for(|n| *n == 0).await;
        let call = Arc::new(ClaimCall {
            inner: self.inner.clone(),
            state: Mutex::new(CallState::Running),
            done: tokio::sync::Notify::new(),
        });
        let task = ClaimTask(call.clone());
        let this = self.clone();
        self.inner.client.runtime().spawn(async move {
            let result = this.claim_batch(n).await;
            if let Some((result, _pending)) = task.0.finish(result) {
                this.release_abandoned(result).await;
            }
        });
        let caller = ClaimCaller(call);
        loop {
            // A claim is handed out only Held: while one is Suspended (the connection dropped
            // since it was made), wait for Held or Lost. The result stays with the call meanwhile,
            // so a caller dropped while waiting still has its claims released.
            let suspended = {
                let mut state = caller.0.state.lock();
                let suspended = match &*state {
                    CallState::Done(Ok(claims)) => {
                        claims.iter().find(|c| c.state() == ClaimState::Suspended).map(|c| c.shared.hold.clone())
                    }
                    _ => None,
                };
                if suspended.is_none() {
                    if let Some(result) = take_done(&mut state) {
                        return result.map(|claims| self.hand_out(claims));
                    }
                }
                suspended
            };
            match suspended {
                // Returns once Held, Lost or the client closed: then look again.
                Some(hold) => drop(hold.wait_held(None).await),
                None => caller.0.done.notified().await,
            }
        }
    }

    /// The claims of a finished call to hand out: the held ones. A claim lost meanwhile is
    /// dropped (its node is gone, or goes with its session).
    fn hand_out(&self, claims: Vec<Claim>) -> Vec<Claim> {
        claims
            .into_iter()
            .filter(|claim| {
                let held = claim.state() == ClaimState::Held;
                if !held {
                    debug!(item = %claim.item(), "a claim lost before it was handed out is dropped");
                    self.forget(&claim.shared);
                }
                held
            })
            .collect()
    }

    async fn release_abandoned(&self, result: Result<Vec<Claim>>) {
        if let Ok(claims) = result {
            debug!(count = claims.len(), "claim cancelled: releasing its claims");
            for claim in claims {
                let _ = self.release(claim.item()).await;
            }
        }
    }

    async fn claim_batch(&self, n: usize) -> Result<Vec<Claim>> {
        self.make_dirs(None).await?;
        let client = &self.inner.client;
        let path = self.inner.path.as_str();
        let mut retrying = client.retrying(path, None);
        let mut remade = false;
        loop {
            let (zk, session) = client.connected_retrying(&mut retrying).await?;
            match self.claim_on(&zk, session, n).await {
                // Claims made on a session the client gave up meanwhile are lost already: never
                // handed out; the next attempt claims on the new session.
                Ok(claims) if client.status_now().has_ended(session) => {
                    for claim in &claims {
                        claim.shared.mark_lost();
                        self.forget(&claim.shared);
                    }
                    let ended = Error::code_on(path, ErrorCode::SessionExpired);
                    retrying.backoff_or_fail(ended).await?;
                }
                Ok(claims) => return Ok(claims),
                Err(e) if e.is(ErrorCode::NoNode) && !remade => {
                    remade = true;
                    self.remake_dirs(None).await?;
                }
                Err(e) => {
                    retrying.backoff_or_fail(e).await?;
                    // A failed attempt's claims of unknown outcome are being released in the
                    // background: the next attempt would find its own items taken and claim none.
                    let _ = self.inner.releasing.subscribe().wait_for(|n| *n == 0).await;
                }
            }
        }
    }

    /// A claim node's data: the tag, the session id, the claim time, and a mark of this call, so
    /// that a claim whose reply was lost is told from one another call on the same session made.
    fn claim_data(&self, session: SessionIdentity) -> Vec<u8> {
        format!("{}\n{:x}\n{}\n{:016x}", self.inner.tag, session.id, now_ms(), rand::random::<u64>()).into_bytes()
    }

    async fn claim_on(&self, zk: &zk::Client, session: SessionIdentity, n: usize) -> Result<Vec<Claim>> {
        let inner = &self.inner;
        let path = inner.path.as_str();
        let err = |e| Error::zk(path, e);
        if inner.fair_share {
            let me = paths::join(&inner.members, &format!("{}-{:x}", inner.tag, session.id));
            let acls = inner.client.raw_acls_for(&me);
            let options = zk::CreateMode::Ephemeral.with_acls(zk::Acls::new(&acls));
            match zk.create(&me, b"", &options).await {
                Ok(_) | Err(zk::Error::NodeExists) => *inner.member.lock() = Some((me, session.id)),
                Err(e) => return Err(err(e)),
            }
        }
        let (items, claimed, members) = {
            let items = zk.list_children(&inner.items);
            let claimed = zk.list_children(&inner.claims);
            let members = inner.fair_share.then(|| zk.list_children(&inner.members));
            let members = async {
                match members {
                    Some(m) => m.await.map(|m| m.len()),
                    None => Ok(1),
                }
            };
            tokio::join!(items, claimed, members)
        };
        let (items, claimed, members) = (items.map_err(err)?, claimed.map_err(err)?, members.map_err(err)?);
        let claimed: HashSet<String> = claimed.into_iter().collect();
        let mut free: Vec<String> = items.into_iter().filter(|i| !claimed.contains(i)).collect();
        let mut want = n;
        if inner.fair_share {
            want = want.min(free.len().div_ceil(members.max(1)));
        }
        if free.is_empty() || want == 0 {
            return Ok(Vec::new());
        }
        // Workers start at different places so that they do not all race for the same items.
        free.sort();
        let start = (session.id.unsigned_abs() as usize).wrapping_mul(31).wrapping_add(rand::random::<u16>() as usize)
            % free.len();
        free.rotate_left(start);
        free.truncate(want);

        // One pipelined read of every candidate's payload and version, in requests of a size the
        // server reads.
        let mut reads = Vec::new();
        for chunk in read_chunks(&free, |item| self.item_fixed(item).len() + READ_OVERHEAD) {
            let mut reader = zk.new_multi_reader();
            for item in chunk {
                reader.add_get_data(&self.item_fixed(item)).map_err(err)?;
            }
            reads.push(reader.commit());
        }
        let mut read = Vec::with_capacity(free.len());
        for chunk in futures_join_all(reads).await {
            read.extend(chunk.map_err(err)?);
        }
        let mut candidates = Vec::new();
        for (item, result) in free.into_iter().zip(read) {
            if let zk::MultiReadResult::Data { data, stat } = result {
                // An item made by other means than `add`, too large to claim: skipped.
                if let Err(e) = self.check_claim_size(&item, data.len()) {
                    warn!(item = %item, error = %e, "an item too large to claim is skipped");
                    continue;
                }
                candidates.push((item, data, stat.version, stat.czxid));
            }
        }

        // Pipelined claim transactions: each is sent when its future is made.
        let claim_data = self.claim_data(session);
        let mut pending = Vec::with_capacity(candidates.len());
        for (item, data, version, _) in &candidates {
            let claim = self.claim_fixed(item);
            let acls = inner.client.raw_acls_for(&claim);
            let options = zk::CreateMode::Ephemeral.with_acls(zk::Acls::new(&acls));
            let mut writer = zk.new_multi_writer();
            writer.add_create(&claim, &claim_data, &options).map_err(err)?;
            writer.add_set_data(&self.item_fixed(item), data, Some(*version)).map_err(err)?;
            pending.push(writer.commit());
        }
        let results = futures_join_all(pending).await;
        let mut made = Vec::new();
        let mut unknown = Vec::new();
        for ((item, data, _, item_czxid), result) in candidates.into_iter().zip(results) {
            match result {
                Ok(ops) => {
                    // The item's stat, not the create's: ZooKeeper before 3.9 answers a create
                    // inside a multi without its stat (ZOOKEEPER-4026). A transaction has one zxid
                    // and one time for all its operations, so the item's new mzxid and mtime are
                    // the claim node's czxid and ctime — no extra round trip.
                    let Some(zk::MultiWriteResult::SetData { stat: item_stat }) = ops.get(1) else { continue };
                    made.push((item, data, item_stat.version, item_stat.mzxid, item_stat.mtime, item_czxid));
                }
                Err(zk::MultiWriteError::OperationFailed { .. }) => {}
                Err(zk::MultiWriteError::RequestFailed { source }) => unknown.push((item, data, source)),
            }
        }
        // Transactions whose reply was lost: ours when the claim node is this session's.
        let mut failure = None;
        for (item, data, source) in unknown {
            let claim = self.claim_fixed(&item);
            let owned = async {
                let found = zk.get_data(&claim).await.map(Some).or_else(|e| match e {
                    zk::Error::NoNode => Ok(None),
                    e => Err(e),
                })?;
                match found {
                    // This call's own claim node (not one another call on this session made).
                    Some((mark, s)) if s.ephemeral_owner == session.id && mark == claim_data => {
                        let (_, item_stat) = zk.get_data(&self.item_fixed(&item)).await?;
                        Ok(Some((item_stat.version, s.czxid, s.ctime, item_stat.czxid)))
                    }
                    _ => Ok(None),
                }
            };
            match owned.await {
                Ok(Some((version, czxid, ctime, item_czxid))) => {
                    made.push((item, data, version, czxid, ctime, item_czxid))
                }
                Ok(None) => {}
                Err(e) => {
                    // Still unknown (the connection is down): a session that lives on keeps the
                    // node; it is released in the background once the connection is back.
                    self.release_unknown_in_background(item, session, claim_data.clone());
                    failure.get_or_insert(Error::zk(
                        path,
                        if matches!(e, zk::Error::SessionExpired) { e } else { source },
                    ));
                }
            }
        }
        let mut claims = Vec::with_capacity(made.len());
        for (item, data, item_version, czxid, ctime, item_czxid) in made {
            let node = CreatedNode {
                path: paths::join(&paths::join(path, "claims"), &item),
                name: item.clone(),
                sequence: -1,
                czxid,
                session,
            };
            let hold = Hold::new(&inner.client, node, self.claim_fixed(&item), &claim_data, HoldMeter::unrecorded());
            // Watch the claim node from now on: a reclaim shows in `state()` without a waiter.
            drop(hold.watch_state());
            let shared = Arc::new(ClaimShared {
                item: item.clone(),
                data,
                item_version,
                item_czxid,
                granted_at: UNIX_EPOCH + Duration::from_millis(u64::try_from(ctime).unwrap_or(0)),
                hold,
                finished: AtomicBool::new(false),
                status_at_grant: inner.client.status(),
            });
            inner.held.lock().insert(item, shared.clone());
            claims.push(Claim { shared });
        }
        match failure {
            Some(e) if claims.is_empty() => Err(e),
            _ => Ok(claims),
        }
    }

    /// A claim transaction whose outcome stayed unknown: delete the claim node once the connection
    /// is back, if it is this session's.
    fn release_unknown_in_background(&self, item: String, session: SessionIdentity, mark: Vec<u8>) {
        let this = self.clone();
        // Counted as a pending release, which the next claim waits for.
        self.inner.releasing.send_modify(|n| *n += 1);
        let pending = PendingRelease(self.inner.clone());
        self.inner.client.runtime().spawn(async move {
            let _pending = pending;
            let claim = this.claim_fixed(&item);
            let client = &this.inner.client;
            let mut failed_requests = 0;
            // Until the session ends (which removes the node anyway): a cut longer than the
            // connection timeout must not leave the node behind on a session that lives on.
            while failed_requests < 100 {
                let (zk, now) = match client.connected(&this.inner.path, None).await {
                    Ok(connected) => connected,
                    Err(e) if e.is_retryable() && !client.status_now().has_ended(session) => {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                    Err(_) => return,
                };
                if now != session {
                    return;
                }
                match zk.get_data(&claim).await {
                    // Only the node this call made: one another call on this session made is held.
                    Ok((data, s)) if s.ephemeral_owner == session.id && data == mark => {
                        if zk.delete(&claim, Some(s.version)).await.is_ok() {
                            return;
                        }
                    }
                    Ok(_) | Err(zk::Error::NoNode) => return,
                    Err(_) => {}
                }
                failed_requests += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
    }

    /// The claims this instance holds now: [`Held`](ClaimState::Held) or
    /// [`Suspended`](ClaimState::Suspended) (lost and finished ones are left out, and forgotten).
    pub fn my_claims(&self) -> Vec<Claim> {
        let mut held = self.inner.held.lock();
        held.retain(|_, c| c.may_be_held());
        held.values().map(|c| Claim { shared: c.clone() }).collect()
    }

    fn take_held(&self, item: &str) -> Result<Arc<ClaimShared>> {
        paths::validate_node_name("item", item)?;
        let shared = self.inner.held.lock().get(item).cloned();
        let Some(shared) = shared else {
            return Err(Error::NotOwner {
                path: self.item_path(item),
                reason: "the item is not claimed by this WorkClaims",
            });
        };
        if !shared.may_be_held() {
            self.forget(&shared);
            return Err(Error::LockLost {
                node: paths::join(&paths::join(&self.inner.path, "claims"), item),
                reason: "the claim was lost (reclaimed, deleted or its session ended)",
            });
        }
        Ok(shared)
    }

    fn forget(&self, shared: &Arc<ClaimShared>) {
        let mut held = self.inner.held.lock();
        if held.get(&shared.item).is_some_and(|c| Arc::ptr_eq(c, shared)) {
            held.remove(&shared.item);
        }
    }

    /// Runs the fenced transaction `ops` for the claim on its own session.
    async fn fenced(&self, shared: &Arc<ClaimShared>, complete: bool) -> Result<()> {
        let client = &self.inner.client;
        let claim_path = paths::join(&paths::join(&self.inner.path, "claims"), &shared.item);
        let lost = |reason| Error::LockLost { node: claim_path.clone(), reason };
        let claim = self.claim_fixed(&shared.item);
        let item = self.item_fixed(&shared.item);
        let mut retrying = client.retrying(&claim_path, None);
        let mut sends = 0;
        loop {
            // The claim's session given up while we wait: lost, said at once.
            let session = shared.session();
            let Some(zk) = client.connected_retrying_on(&mut retrying, session).await? else {
                if sends > 0 {
                    // The last send's reply was lost and may have applied before the session
                    // ended (which took the claim node anyway): settled as any lost reply, by
                    // reading the item on the new session — never `LockLost` for a complete that
                    // deleted it.
                    if let Ok((zk, _)) = client.connected_retrying(&mut retrying).await {
                        return self.settle_unanswered(&zk, shared, complete, true, claim_path).await;
                    }
                    if complete {
                        shared.mark_lost();
                        self.forget(shared);
                        return Err(Error::OutcomeUnknown { path: claim_path, during: "completing" });
                    }
                }
                shared.mark_lost();
                self.forget(shared);
                return Err(lost("the claim's session ended"));
            };
            // Unheard-of changes since the grant: the connection changed (a disconnect, maybe) —
            // or the last send's reply was lost, and that send may have applied. Since then the
            // claim may have been reclaimed and the item completed, added again and claimed by
            // someone else with the same item version (the fence starts over on a re-add). Send
            // only while the claim node is still this claim's (its session, its creation zxid).
            if sends > 0 || shared.status_at_grant.has_changed().unwrap_or(true) {
                match zk.check_stat(&claim).await {
                    Ok(Some(s)) if s.ephemeral_owner == session.id && s.czxid == shared.czxid() => {}
                    Ok(now) if sends > 0 => {
                        return self.settle_unanswered(&zk, shared, complete, now.is_none(), claim_path).await
                    }
                    // Nothing sent yet: the claim was lost while this holder heard nothing.
                    Ok(_) => {
                        shared.mark_lost();
                        self.forget(shared);
                        return Err(lost("the claim was reclaimed (its node is gone or another's)"));
                    }
                    Err(e) => {
                        retrying.backoff_or_fail(Error::zk(&claim_path, e)).await?;
                        continue;
                    }
                }
            }
            let mut writer = zk.new_multi_writer();
            let add = if complete {
                writer.add_delete(&claim, None).and_then(|_| writer.add_delete(&item, Some(shared.item_version)))
            } else {
                writer.add_check_version(&item, shared.item_version).and_then(|_| writer.add_delete(&claim, None))
            };
            add.map_err(|e| Error::zk(&claim_path, e))?;
            sends += 1;
            match writer.commit().await {
                Ok(_) => {
                    shared.mark_finished();
                    self.forget(shared);
                    return Ok(());
                }
                Err(zk::MultiWriteError::OperationFailed { .. }) => {
                    let removed = self.remove_if_item_gone(&zk, shared, session).await;
                    self.forget(shared);
                    if removed && !complete {
                        shared.mark_finished();
                        return Ok(());
                    }
                    shared.mark_lost();
                    if removed {
                        return Err(lost("the item was deleted or replaced by someone else"));
                    }
                    return Err(lost("the claim was reclaimed or its item claimed again"));
                }
                Err(zk::MultiWriteError::RequestFailed { source }) => {
                    retrying.backoff_or_fail(Error::zk(&claim_path, source)).await?;
                }
            }
        }
    }

    /// A fenced transaction refused because someone else deleted the item (or replaced it: made
    /// it again under its name): removes the claim node if it is still this claim's (nobody can
    /// claim the name again while it stands), so it is not left behind on a live session. True
    /// when it was removed.
    async fn remove_if_item_gone(&self, zk: &zk::Client, shared: &ClaimShared, session: SessionIdentity) -> bool {
        match zk.check_stat(&self.item_fixed(&shared.item)).await {
            Ok(None) => {}
            Ok(Some(item)) if item.czxid != shared.item_czxid => {}
            _ => return false,
        }
        let claim = self.claim_fixed(&shared.item);
        match zk.check_stat(&claim).await {
            Ok(Some(s)) if s.ephemeral_owner == session.id && s.czxid == shared.czxid() => {
                debug!(item = %shared.item, "the item was deleted or replaced by someone else: removing its claim");
                zk.delete(&claim, Some(s.version)).await.is_ok()
            }
            _ => false,
        }
    }

    /// After a send whose reply was lost, the claim node is gone (`gone`) or someone else's: either
    /// that send applied, or the claim was lost meanwhile. A release got what it wanted when the
    /// node is gone; a complete applied only if the item it claimed is gone too.
    async fn settle_unanswered(
        &self,
        zk: &zk::Client,
        shared: &Arc<ClaimShared>,
        complete: bool,
        gone: bool,
        claim_path: String,
    ) -> Result<()> {
        if !complete && gone {
            shared.mark_finished();
            self.forget(shared);
            return Ok(());
        }
        shared.mark_lost();
        self.forget(shared);
        if complete {
            // The very item claimed (not one added again under its name) still there: the
            // complete did not apply.
            let item = self.item_fixed(&shared.item);
            let unchanged = matches!(zk.check_stat(&item).await, Ok(Some(s)) if s.czxid == shared.item_czxid);
            if !unchanged {
                return Err(Error::OutcomeUnknown { path: claim_path, during: "completing" });
            }
        }
        Err(Error::LockLost { node: claim_path, reason: "the claim was reclaimed or its item claimed again" })
    }

    /// Completes `item`: deletes the item and its claim in one transaction fenced by the claim
    /// (the item's version the claim wrote). Refused when the claim was lost — reclaimed,
    /// deleted, its session ended — even if the item was claimed again since.
    ///
    /// # Errors
    /// [`Error::NotOwner`] when this instance does not hold a claim on `item`;
    /// [`Error::LockLost`] when the claim was lost (nothing was deleted); [`Error::OutcomeUnknown`]
    /// when a send's reply was lost and by the next send (or once the claim's session ended) both
    /// the claim and the item it claimed were gone (that send may have completed the item). A send is repeated only while the claim
    /// node is still this claim's (its session, its creation), so a repeat never touches an item
    /// reclaimed, or completed and added again, meanwhile;
    /// connection errors after the retry policy; [`Error::InvalidArgument`] for a bad name.
    ///
    /// # Cancel safety
    /// A dropped call may have completed the item; its claim then reports
    /// [`Lost`](ClaimState::Lost) and a second `complete` is refused.
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(work: zk_curator::claims::WorkClaims) -> zk_curator::Result<()> {
    /// for claim in work.claim(10).await? {
    ///     work.complete(claim.item()).await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn complete(&self, item: &str) -> Result<()> {
        let shared = self.take_held(item)?;
        self.fenced(&shared, true).await
    }

    /// Releases the claim on `item` (fenced like [`complete`](Self::complete)): the item is
    /// unclaimed again, for anyone.
    ///
    /// # Errors
    /// As [`complete`](Self::complete).
    ///
    /// # Cancel safety
    /// A dropped call may have released the claim; it then reports [`Lost`](ClaimState::Lost).
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(work: zk_curator::claims::WorkClaims) -> zk_curator::Result<()> {
    /// if let Some(claim) = work.claim(1).await?.pop() {
    ///     work.release(claim.item()).await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn release(&self, item: &str) -> Result<()> {
        let shared = self.take_held(item)?;
        self.fenced(&shared, false).await
    }

    /// Releases every claim this instance holds (pipelined); lost claims are forgotten.
    ///
    /// # Errors
    /// [`Error::Multiple`] with each release's failure other than a lost claim.
    ///
    /// # Cancel safety
    /// As [`release`](Self::release), for each claim.
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(work: zk_curator::claims::WorkClaims) -> zk_curator::Result<()> {
    /// work.release_all().await?;
    /// # Ok(()) }
    /// ```
    pub async fn release_all(&self) -> Result<()> {
        let held: Vec<Arc<ClaimShared>> = self.inner.held.lock().values().cloned().collect();
        let mut releases = Vec::new();
        for shared in &held {
            if shared.may_be_held() {
                releases.push(self.fenced(shared, false));
            } else {
                self.forget(shared);
            }
        }
        let errors: Vec<Error> = futures_join_all(releases)
            .await
            .into_iter()
            .filter_map(|r| r.err())
            .filter(|e| e.kind() != ErrorKind::LockLost)
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(Error::Multiple { errors })
        }
    }

    /// Wakes up items whose claim is older than `age` (by the claim node's server creation time
    /// against this host's clock): each such claim is deleted in a transaction fenced by the item's
    /// version as read with the claim, so a claim made since is never touched. The stuck holder's
    /// [`Claim`] turns [`Lost`](ClaimState::Lost) and its `complete` is refused. A claim whose
    /// item someone deleted is woken up too (its claim node deleted at the version read).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a zero `age`; connection errors after the retry policy.
    ///
    /// # Cancel safety
    /// A dropped call may have reclaimed some items.
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(work: zk_curator::claims::WorkClaims) -> zk_curator::Result<()> {
    /// let woken = work.reclaim_older_than(std::time::Duration::from_secs(600)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn reclaim_older_than(&self, age: Duration) -> Result<Vec<Reclaimed>> {
        if age.is_zero() {
            return Err(Error::invalid_argument("age", format!("{age:?}"), "must be positive"));
        }
        self.make_dirs(None).await?;
        let inner = &self.inner;
        let path = inner.path.as_str();
        let claims = inner.claims.as_str();
        let names = inner
            .client
            .with_retry(path, None, |zk| async move { zk.list_children(claims).await.or_else(no_node_empty) })
            .await?;
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let now = now_ms();
        let mut woken = Vec::new();
        let per_item = |item: &str| self.claim_fixed(item).len() + self.item_fixed(item).len() + 2 * READ_OVERHEAD;
        for chunk in read_chunks(&names, per_item) {
            let read = inner
                .client
                .with_retry(path, None, |zk| {
                    let this = self.clone();
                    async move {
                        let mut reader = zk.new_multi_reader();
                        for item in chunk {
                            reader.add_get_data(&this.claim_fixed(item))?;
                            reader.add_get_data(&this.item_fixed(item))?;
                        }
                        reader.commit().await
                    }
                })
                .await?;
            // The handle the writes go on: waited for under the policy (none during a session's
            // replacement), like the read above.
            let mut retrying = inner.client.retrying(path, None);
            let (zk, _) = inner.client.connected_retrying(&mut retrying).await?;
            let mut pending = Vec::new();
            for (item, pair) in chunk.iter().zip(read.chunks(2)) {
                // The item's version, or None when someone deleted the item under its claim.
                let (data, claim, item_version) = match (&pair[0], &pair[1]) {
                    (zk::MultiReadResult::Data { data, stat: claim }, zk::MultiReadResult::Data { stat: it, .. }) => {
                        (data, claim, Some(it.version))
                    }
                    (
                        zk::MultiReadResult::Data { data, stat: claim },
                        zk::MultiReadResult::Error { err: zk::Error::NoNode },
                    ) => (data, claim, None),
                    _ => continue,
                };
                let held_ms = now.saturating_sub(claim.ctime).max(0) as u64;
                if u128::from(held_ms) < age.as_millis() {
                    continue;
                }
                let text = String::from_utf8_lossy(data);
                let mut parts = text.split('\n');
                let tag = parts.next().unwrap_or_default().to_string();
                let session =
                    i64::from_str_radix(parts.next().unwrap_or_default(), 16).unwrap_or(claim.ephemeral_owner);
                let mut writer = zk.new_multi_writer();
                if let Some(version) = item_version {
                    writer.add_check_version(&self.item_fixed(item), version).map_err(|e| Error::zk(path, e))?;
                }
                writer.add_delete(&self.claim_fixed(item), Some(claim.version)).map_err(|e| Error::zk(path, e))?;
                let found = Reclaimed { item: item.clone(), tag, session, held_for: Duration::from_millis(held_ms) };
                pending.push(async move { (found, writer.commit().await) });
            }
            for (found, result) in futures_join_all(pending).await {
                match result {
                    Ok(_) => {
                        debug!(item = %found.item, tag = %found.tag, "reclaimed a stuck claim");
                        woken.push(found);
                    }
                    Err(zk::MultiWriteError::OperationFailed { .. }) => {}
                    Err(zk::MultiWriteError::RequestFailed { source }) => return Err(Error::zk(path, source)),
                }
            }
        }
        Ok(woken)
    }

    /// The unclaimed items now (one read of the items and one of the claims).
    ///
    /// # Errors
    /// Connection errors after the retry policy.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(work: zk_curator::claims::WorkClaims) -> zk_curator::Result<()> {
    /// println!("{} items waiting", work.unclaimed().await?.len());
    /// # Ok(()) }
    /// ```
    pub async fn unclaimed(&self) -> Result<Vec<String>> {
        let inner = &self.inner;
        let (items, claims) = (inner.items.as_str(), inner.claims.as_str());
        let (items, claimed) = inner
            .client
            .with_retry(&inner.path, None, |zk| async move {
                let (a, b) = tokio::join!(zk.list_children(items), zk.list_children(claims));
                Ok((a.or_else(no_node_empty)?, b.or_else(no_node_empty)?))
            })
            .await?;
        let claimed: HashSet<String> = claimed.into_iter().collect();
        Ok(items.into_iter().filter(|i| !claimed.contains(i)).collect())
    }

    /// Waits until some item is unclaimed, at most `timeout`: `Ok(true)` when there is work,
    /// `Ok(false)` when the timeout passed first. It waits on one pair of children watches (the
    /// items' and the claims'), armed once and re-used by every later wait of this instance until
    /// it fires: repeated timed waits never add watches.
    ///
    /// # Errors
    /// Connection errors; never later than `timeout` (it then answers `Ok(false)`).
    ///
    /// # Cancel safety
    /// Cancel safe: the watches stay armed for the next wait.
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(work: zk_curator::claims::WorkClaims) -> zk_curator::Result<()> {
    /// while work.wait_for_work(std::time::Duration::from_secs(30)).await? {
    ///     for claim in work.claim(50).await? {
    ///         work.complete(claim.item()).await?;
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn wait_for_work(&self, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let timeout = timeout.into().remaining();
        let deadline = crate::deadline::deadline_after(timeout);
        match tokio::time::timeout_at(deadline.into(), self.wait_until_work(deadline)).await {
            Ok(Err(e)) if e.kind() == ErrorKind::DeadlineExceeded => Ok(false),
            Ok(r) => r,
            Err(_) => Ok(false),
        }
    }

    async fn wait_until_work(&self, deadline: Instant) -> Result<bool> {
        self.make_dirs(Some(deadline)).await?;
        loop {
            let armed = self.inner.work.lock().as_ref().filter(|w| !*w.fired.borrow()).map(|w| w.fired.clone());
            let mut fired = match armed {
                Some(fired) => {
                    if !self.unclaimed().await?.is_empty() {
                        return Ok(true);
                    }
                    fired
                }
                None => {
                    let (fired, has_work) = match self.arm_work_watch(deadline).await {
                        Err(e) if e.is(ErrorCode::NoNode) => {
                            self.remake_dirs(Some(deadline)).await?;
                            self.arm_work_watch(deadline).await?
                        }
                        other => other?,
                    };
                    if has_work {
                        return Ok(true);
                    }
                    fired
                }
            };
            let _ = fired.wait_for(|f| *f).await;
        }
    }

    /// Arms the children watches on the items and the claims, and says whether work is there.
    async fn arm_work_watch(&self, deadline: Instant) -> Result<(watch::Receiver<bool>, bool)> {
        let inner = &self.inner;
        let (items, claims) = (inner.items.as_str(), inner.claims.as_str());
        let ((items, w1), (claimed, w2)) = inner
            .client
            .with_retry(&inner.path, Some(deadline), |zk| async move {
                let (a, b) = tokio::join!(zk.list_and_watch_children(items), zk.list_and_watch_children(claims));
                Ok((a?, b?))
            })
            .await?;
        let (tx, rx) = watch::channel(false);
        let task = inner.client.runtime().spawn(async move {
            tokio::select! {
                _ = w1.changed() => {}
                _ = w2.changed() => {}
            }
            tx.send_replace(true);
        });
        if let Some(old) = inner.work.lock().replace(WorkWatch { fired: rx.clone(), task }) {
            old.task.abort();
        }
        let claimed: HashSet<String> = claimed.into_iter().collect();
        Ok((rx, items.iter().any(|i| !claimed.contains(i))))
    }
}

/// Splits `items` into runs of at most [`READS_PER_REQUEST`] items and [`PATH_BYTES_PER_REQUEST`]
/// bytes of paths, `cost` giving an item's bytes (each run holds one item at least).
fn read_chunks(items: &[String], cost: impl Fn(&str) -> usize) -> Vec<&[String]> {
    let mut chunks = Vec::new();
    let (mut start, mut bytes) = (0, 0usize);
    for (i, item) in items.iter().enumerate() {
        let c = cost(item);
        if i > start && (i - start >= READS_PER_REQUEST || bytes + c > PATH_BYTES_PER_REQUEST) {
            chunks.push(&items[start..i]);
            (start, bytes) = (i, 0);
        }
        bytes += c;
    }
    if start < items.len() {
        chunks.push(&items[start..]);
    }
    chunks
}

fn no_node_empty(e: zk::Error) -> std::result::Result<Vec<String>, zk::Error> {
    if e == zk::Error::NoNode {
        Ok(Vec::new())
    } else {
        Err(e)
    }
}

/// Awaits every future (they were all sent when made), in order.
async fn futures_join_all<F: std::future::Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut out = Vec::with_capacity(futures.len());
    // The requests are already on the wire; awaiting in order costs no round trips.
    for f in futures {
        out.push(f.await);
    }
    out
}
