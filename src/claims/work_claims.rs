//! The handle: [`WorkClaims`], its state, and everything but claiming and background releases.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use tokio::sync::watch;
use tracing::debug;
use zookeeper_client as zk;

use crate::error::{Error, ErrorCode, ErrorKind, Result};
use crate::framework::guaranteed_delete::DeleteTarget;
use crate::framework::{limits, paths, SessionIdentity};
use crate::CuratorClient;

use super::claim::{Claim, ClaimShared, Reclaimed};

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
pub(super) const READ_OVERHEAD: usize = 16;

struct WorkWatch {
    /// Fires (turns true) when the items' or the claims' children change, or the watches' session
    /// ends.
    fired: watch::Receiver<bool>,
    pub(super) task: tokio::task::JoinHandle<()>,
}

pub(super) struct Inner {
    pub(super) client: CuratorClient,
    /// `recipe="work_claims"`.
    pub(super) metrics: crate::metrics::RecipeLabels,
    pub(super) path: String,
    pub(super) tag: String,
    pub(super) items: String,
    pub(super) claims: String,
    pub(super) members: String,
    pub(super) fair_share: bool,
    dirs_made: AtomicBool,
    pub(super) held: Mutex<HashMap<String, Arc<ClaimShared>>>,
    work: Mutex<Option<WorkWatch>>,
    /// Cancelled claims whose claims are still being released.
    pub(super) releasing: watch::Sender<usize>,
    /// Under the fair share, the member node made last (fixed path) and its session id.
    pub(super) member: Mutex<Option<(String, i64)>>,
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

/// Lock-tag batch claims (the seeds' "lock tags"; Kazoo's `LockingQueue`, done without its flaws):
/// work items are nodes under a path, each process claims a batch of unclaimed items under its own
/// tag in one call, processes them, and completes or releases them one by one or all at once.
///
/// * [`claim`](Self::claim) claims up to `n` unclaimed items with pipelined ephemeral claim nodes
///   (see the module layout in [docs/failure-semantics.md](crate::guide::failure_semantics) and README): a dead process's claims go
///   with its session.
/// * [`complete`](Self::complete) deletes the item and its claim in one transaction fenced by the
///   claim; refused once the claim was lost.
/// * [`reclaim_older_than`](Self::reclaim_older_than) wakes up items of a live but stuck holder,
///   whose [`Claim`] turns [`Lost`](super::ClaimState::Lost) and whose `complete` is refused.
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
    pub(super) inner: Arc<Inner>,
}

impl std::fmt::Debug for WorkClaims {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkClaims").field("path", &self.inner.path).field("tag", &self.inner.tag).finish()
    }
}

pub(super) fn now_ms() -> i64 {
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
                metrics: client.recipe_labels("work_claims", path),
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

    pub(super) fn item_fixed(&self, item: &str) -> String {
        paths::join(&self.inner.items, item)
    }

    pub(super) fn claim_fixed(&self, item: &str) -> String {
        paths::join(&self.inner.claims, item)
    }

    fn item_path(&self, item: &str) -> String {
        paths::join(&paths::join(&self.inner.path, "items"), item)
    }

    /// Refuses an item whose claim transaction (its payload rewritten, its claim node created)
    /// would be larger than one request the server reads: sent, it would make the server drop the
    /// connection, and the item could never be claimed.
    pub(super) fn check_claim_size(&self, item: &str, data_len: usize) -> Result<()> {
        let rest = self.item_fixed(item).len()
            + self.claim_fixed(item).len()
            + self.inner.tag.len()
            + CLAIM_DATA_OVERHEAD
            + 2 * limits::OPERATION_OVERHEAD;
        limits::check_request_size(self.inner.client.max_data_size(), "data", &self.item_path(item), data_len, rest)
    }

    pub(super) async fn make_dirs(&self, deadline: Option<Instant>) -> Result<()> {
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
    pub(super) async fn remake_dirs(&self, deadline: Option<Instant>) -> Result<()> {
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

    /// The claims this instance holds now: [`Held`](super::ClaimState::Held) or
    /// [`Suspended`](super::ClaimState::Suspended) (lost and finished ones are left out, and
    /// forgotten).
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

    pub(super) fn forget(&self, shared: &Arc<ClaimShared>) {
        let mut held = self.inner.held.lock();
        if held.get(&shared.item).is_some_and(|c| Arc::ptr_eq(c, shared)) {
            held.remove(&shared.item);
        }
    }

    /// Runs the fenced transaction `ops` for the claim on its own session.
    pub(super) async fn fenced(&self, shared: &Arc<ClaimShared>, complete: bool) -> Result<()> {
        let ended = self.fenced_unmeasured(shared, complete).await;
        let outcome = match (&ended, complete) {
            (Ok(()), true) => "completed",
            (Ok(()), false) => "released",
            (Err(_), _) => "lost",
        };
        self.inner.metrics.claims(outcome, 1);
        ended
    }

    async fn fenced_unmeasured(&self, shared: &Arc<ClaimShared>, complete: bool) -> Result<()> {
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
    /// the claim and the item it claimed were gone (that send may have completed the item). A send
    /// is repeated only while the claim node is still this claim's (its session, its creation), so
    /// a repeat never touches an item reclaimed, or completed and added again, meanwhile;
    /// connection errors after the retry policy; [`Error::InvalidArgument`] for a bad name.
    ///
    /// # Cancel safety
    /// A dropped call may have completed the item; its claim then reports
    /// [`Lost`](super::ClaimState::Lost) and a second `complete` is refused.
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
    /// A dropped call may have released the claim; it then reports
    /// [`Lost`](super::ClaimState::Lost).
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
    /// [`Claim`] turns [`Lost`](super::ClaimState::Lost) and its `complete` is refused. A claim
    /// whose item someone deleted is woken up too (its claim node deleted at the version read).
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
        inner.metrics.claims("reclaimed", woken.len());
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
pub(super) fn read_chunks(items: &[String], cost: impl Fn(&str) -> usize) -> Vec<&[String]> {
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
pub(super) async fn futures_join_all<F: std::future::Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut out = Vec::with_capacity(futures.len());
    // The requests are already on the wire; awaiting in order costs no round trips.
    for f in futures {
        out.push(f.await);
    }
    out
}
