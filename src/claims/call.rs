//! One claim call: the batch claimed on a task of its own, shared with its caller, so that a
//! cancelled call still has what it claimed released.

use std::collections::HashSet;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use parking_lot::Mutex;
use tracing::{debug, warn};
use zookeeper_client as zk;

use crate::error::{Error, ErrorCode, Result};
use crate::framework::CreatedNode;
use crate::framework::{paths, SessionIdentity};
use crate::locks::hold::Hold;
use crate::metrics::HoldMeter;

use super::claim::{Claim, ClaimShared, ClaimState};
use super::release::PendingRelease;
use super::work_claims::{futures_join_all, now_ms, read_chunks, Inner, WorkClaims, READ_OVERHEAD};

/// One [`WorkClaims::claim`] call, shared by its caller and the task that runs it. Whoever
/// ends second sees what the other did under one lock: a result the caller will never read is
/// released, and the handle's count of pending releases goes up and down exactly once.
struct ClaimCall {
    pub(super) inner: Arc<Inner>,
    pub(super) state: Mutex<CallState>,
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
    pub(super) fn finish(self: &Arc<Self>, result: Result<Vec<Claim>>) -> Option<(Result<Vec<Claim>>, PendingRelease)> {
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
struct ClaimTask(pub(super) Arc<ClaimCall>);

impl Drop for ClaimTask {
    fn drop(&mut self) {
        let closed = Error::Closed { path: self.0.inner.path.clone() };
        // A pending release of an abandoned call ends here: nothing was claimed after all.
        drop(self.0.finish(Err(closed)));
    }
}

/// The caller side of a [`ClaimCall`]; dropped before it took the result, it abandons the call.
struct ClaimCaller(pub(super) Arc<ClaimCall>);

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

impl WorkClaims {
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
            if let Ok(claims) = &result {
                this.inner.metrics.claims("claimed", claims.len());
            }
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
}
