//! The claim: [`IdempotencyClaim`], a key begun by this process, completed with its outcome or
//! abandoned.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tracing::{debug, debug_span, warn, Instrument};
use zookeeper_client as zk;

use crate::error::{Error, ErrorCode, ErrorKind, Result};
use crate::framework::backoff::Backoff;
use crate::framework::retry_loop::Retrying;
use crate::framework::session::SessionKeep;
use crate::framework::{CreatedNode, SessionIdentity};
use crate::locks::hold::{Hold, HoldState, HoldStateStream};
use crate::metrics::HoldMeter;
use crate::CuratorClient;

use super::node::{parse, read, release_if_ours, until, Found, CLAIM_VERSION, OUTCOME_TAG};
use super::retention::Retention;

/// A claim on an idempotency key ([`Begin::Started`](super::Begin::Started)): the caller does the
/// work once, then
/// [`complete`](Self::complete)s it with the result, or [`abandon`](Self::abandon)s it. Dropping it
/// abandons it (a background delete; no runtime needed, never panics).
///
/// A claim keeps its session open while it lives, as a lock's hold does: once the client gave the
/// session up (the claim is [`Lost`](HoldState::Lost)), nothing of ours ends it — freeing the key
/// to a retry, should the link heal before the server expired the session — until the claim is
/// dropped or the server could have expired the session anyway, whichever is first.
#[derive(Debug)]
pub struct IdempotencyClaim {
    pub(super) client: CuratorClient,
    pub(super) node: Box<ClaimNode>,
    /// Keeps the claim's session open while the claim lives, also once the client gave it up:
    /// nothing of ours ends it (freeing the claim node) before the holder let go, or the server
    /// could have expired it anyway — a lost claim kept for ever does not keep its key for ever,
    /// as a raw handle on the session would (see `SessionKeep`). Requests are never sent through
    /// it: only while the client is connected on the claim's session.
    pub(super) _keep: Option<Arc<SessionKeep>>,
    /// The session the claim node is made on: its requests are sent only while the client is
    /// served on it.
    pub(super) session: SessionIdentity,
    pub(super) retention: Retention,
    /// True while the claim may exist and is ours to free on drop.
    pub(super) armed: bool,
    /// True while a commit of the outcome was sent and not known to have failed: a deadline then
    /// leaves the outcome unknown, not unrecorded.
    pub(super) commit_sent: bool,
    /// The claim node as a hold (set once it is known to be made): its creation zxid, and its
    /// `Held`/`Suspended`/`Lost` state — connection and session changes, and a watch on that very
    /// node (by creation zxid).
    pub(super) hold: Option<Granted>,
}

/// A made claim's hold and grant time.
#[derive(Debug)]
pub(super) struct Granted {
    hold: Arc<Hold>,
    at: SystemTime,
}

/// Which node a claim is, and the mark that tells it from another claim at the same path.
#[derive(Debug)]
pub(super) struct ClaimNode {
    pub(super) key: String,
    pub(super) path: String,
    pub(super) fixed: String,
    pub(super) mark: String,
}

impl IdempotencyClaim {
    /// The claim node, made with `data` on the claim's session, created at `czxid` and `ctime`
    /// (server milliseconds): its hold, watched from now on.
    pub(super) fn grant(&mut self, czxid: i64, ctime: i64, data: &[u8]) {
        let node = CreatedNode {
            path: self.node.path.clone(),
            name: self.node.key.clone(),
            sequence: -1,
            czxid,
            session: self.session,
        };
        let hold = Hold::new(&self.client, node, self.node.fixed.clone(), data, HoldMeter::unrecorded());
        drop(hold.watch_state());
        let at = UNIX_EPOCH + Duration::from_millis(u64::try_from(ctime).unwrap_or(0));
        self.hold = Some(Granted { hold, at });
    }

    /// The claim to hand out once it is `Held` (a claim is never handed out `Suspended`), or
    /// `None` when it was lost first (the caller begins again; this claim, dropped, is released
    /// in the background if it still stands). The caller's deadline bounds the wait (dropped, the
    /// claim is released in the background).
    ///
    /// # Errors
    /// [`Error::Closed`].
    pub(super) async fn hand_out(self) -> Result<Option<Self>> {
        let Some(granted) = &self.hold else { return Ok(None) };
        match granted.hold.wait_held(None).await {
            Ok(_) => Ok(Some(self)),
            Err(Error::Closed { path }) => Err(Error::Closed { path }),
            Err(_) => {
                debug!(path = %self.node.path, "an idempotency claim lost before it was handed out: again");
                Ok(None)
            }
        }
    }

    /// The key.
    pub fn key(&self) -> &str {
        &self.node.key
    }

    /// The claim's state now: [`Held`](HoldState::Held) while connected on its session with its
    /// node there; [`Suspended`](HoldState::Suspended) while the connection is lost (the session,
    /// and the claim, may live on: pause the work until `Held` again); [`Lost`](HoldState::Lost)
    /// once its session ended or was given up, or its node was deleted —
    /// [`complete`](Self::complete) is then refused. The claim's node is watched from the moment it
    /// is handed out.
    pub fn state(&self) -> HoldState {
        self.hold.as_ref().map_or(HoldState::Lost, |g| g.hold.hold_state())
    }

    /// The claim's state changes, each once: `Suspended`, `Held` again, ..., ending after `Lost`
    /// (see [`state`](Self::state)).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(claim: zk_curator::idempotency::IdempotencyClaim) {
    /// let mut changes = claim.state_changes();
    /// while let Some(state) = changes.next().await {
    ///     println!("{} is {state:?}", claim.key());
    /// }
    /// # }
    /// ```
    pub fn state_changes(&self) -> HoldStateStream {
        match &self.hold {
            Some(granted) => granted.hold.state_changes(),
            None => HoldStateStream::ended(),
        }
    }

    /// Resolves once the claim is [`Lost`](HoldState::Lost): its session ended or its node was
    /// deleted. Select it with the work, so the work stops when it could no longer be recorded.
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn charge() -> Vec<u8> { Vec::new() }
    /// # async fn demo(claim: zk_curator::idempotency::IdempotencyClaim) -> zk_curator::Result<()> {
    /// tokio::select! {
    ///     receipt = charge() => claim.complete(receipt).await?,
    ///     _ = claim.lost() => eprintln!("{} lost: the charge must not be reported", claim.key()),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn lost(&self) {
        if let Some(granted) = &self.hold {
            granted.hold.lost().await;
        }
    }

    /// When the claim was granted: the server's creation time of the claim node.
    pub fn granted_at(&self) -> SystemTime {
        self.hold.as_ref().map_or(UNIX_EPOCH, |g| g.at)
    }

    /// The key's node.
    pub fn path(&self) -> &str {
        &self.node.path
    }

    /// The session the claim lives on: it lasts as long as that session.
    pub fn session(&self) -> SessionIdentity {
        self.session
    }

    /// Records `result` as the key's outcome, atomically with the end of the claim (one
    /// transaction: delete the claim at its version, create the outcome): from then on every
    /// [`begin`](super::IdempotencyKeys::begin) of the key answers
    /// [`Begin::Done`](super::Begin::Done) with `result`, until the retention ends. Refused once
    /// the claim is [`Lost`](HoldState::Lost) — its session ended or was given up by the client,
    /// or its node was deleted — also when that happens while the call waits for a connection:
    /// the commit is sent only while the client is connected on the claim's own session, never on
    /// a session its holder was told is gone (even if that session reaches the server again).
    /// Nothing is recorded then and the caller must not report success.
    ///
    /// A reply lost on the way is resolved by reading the key back (our mark on an outcome:
    /// recorded).
    ///
    /// # Errors
    /// * [`Error::LockLost`] naming the key's node: the claim was lost (before the call, or while
    ///   it waited for a connection), nothing recorded;
    /// * [`Error::InvalidArgument`] naming `result` when it is over the client's
    ///   [`max_data_size`](crate::CuratorClientBuilder::max_data_size) (nothing sent; the claim is
    ///   abandoned), or naming `retention` when the server does not enable TTL nodes (use
    ///   [`Retention::Sweep`] there);
    /// * [`Error::OutcomeUnknown`] when the reply was lost and the key cannot be read back in time;
    ///   server errors; [`Error::Closed`].
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call recorded the outcome or not; if not, the claim is abandoned in
    /// the background.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(claim: zk_curator::idempotency::IdempotencyClaim) -> zk_curator::Result<()> {
    /// claim.complete(br#"{"status":"paid"}"#.to_vec()).await?;
    /// # Ok(()) }
    /// ```
    pub async fn complete(self, result: impl Into<Vec<u8>>) -> Result<()> {
        self.complete_until(result.into(), None).await
    }

    /// [`complete`](Self::complete) within `timeout` (a [`Duration`] or an instant, see
    /// [`Deadline`](crate::Deadline)): an operation, so past it [`Error::DeadlineExceeded`] when
    /// no commit was in flight (nothing recorded), or [`Error::OutcomeUnknown`] when one was: it
    /// may have been applied (every duplicate then gets `result`) or not (the claim is abandoned
    /// in the background, and the key is free again).
    ///
    /// # Errors
    /// As [`complete`](Self::complete), [`Error::DeadlineExceeded`] and [`Error::OutcomeUnknown`].
    ///
    /// # Cancel safety
    /// As [`complete`](Self::complete).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(claim: zk_curator::idempotency::IdempotencyClaim) -> zk_curator::Result<()> {
    /// use std::time::Duration;
    ///
    /// claim.complete_within(b"ok".to_vec(), Duration::from_secs(2)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn complete_within(self, result: impl Into<Vec<u8>>, timeout: impl Into<crate::Deadline>) -> Result<()> {
        let timeout = timeout.into().remaining();
        let complete = self.complete_until(result.into(), Some(crate::deadline::deadline_after(timeout)));
        crate::deadline::naming_timeout(Some(timeout), complete).await
    }

    /// The old name of [`complete_within`](Self::complete_within).
    ///
    /// # Errors
    /// As [`complete_within`](Self::complete_within).
    ///
    /// # Cancel safety
    /// As [`complete_within`](Self::complete_within).
    #[deprecated(
        note = "use `complete_within`: `_for` names a wait that returns `Ok(None)` on time-out (`try_lock_for`); an operation that runs out of time fails, within a `_within` name"
    )]
    pub async fn complete_for(self, result: impl Into<Vec<u8>>, timeout: Duration) -> Result<()> {
        self.complete_within(result, timeout).await
    }

    async fn complete_until(mut self, result: Vec<u8>, deadline: Option<Instant>) -> Result<()> {
        let mut data = format!("{OUTCOME_TAG}\n{}\n", self.node.mark).into_bytes();
        data.extend_from_slice(&result);
        self.client.check_data_size("result", &self.node.path, data.len())?;
        let span = debug_span!("idempotency_complete", path = %self.node.path);
        let started = Instant::now();
        let path = self.node.path.clone();
        let done = until(deadline, &path, started, "completing idempotency key", self.commit_outcome(&data, deadline))
            .instrument(span)
            .await;
        match done {
            // A commit was in flight at the deadline: it may have been applied (the background
            // release keeps an outcome of ours), so "not recorded" would be a lie.
            Err(Error::DeadlineExceeded { .. }) if self.commit_sent => {
                Err(Error::OutcomeUnknown { path, during: "recording the outcome of" })
            }
            done => done,
        }
    }

    async fn commit_outcome(&mut self, data: &[u8], deadline: Option<Instant>) -> Result<()> {
        let acls = self.client.raw_acls_for(&self.node.fixed);
        let mode = self.retention.outcome_mode();
        let lost = || Error::LockLost {
            node: self.node.path.clone(),
            reason: "the idempotency claim was lost (its session ended or its node was deleted); nothing recorded",
        };
        // Its very node (by creation zxid) was seen deleted: whatever claim stands at the path now
        // is someone else's, and the commit (a delete of the claim at the path) must not touch it.
        if self.hold.as_ref().is_some_and(|g| g.hold.node_seen_gone()) {
            self.armed = false;
            return Err(lost());
        }
        let mut backoff = Backoff::new(Duration::from_millis(20), Duration::from_secs(1));
        let mut retrying = self.client.retrying(&self.node.path, deadline);
        loop {
            if retrying.expired() {
                return Err(retrying.deadline_exceeded("completing idempotency key"));
            }
            // Sent only while the client is served on the claim's session: its holder is told the
            // claim is lost once the client gave the session up, and a commit queued on a suspended
            // connection would go out on the old session if that reached the server again before
            // it expired, recording an outcome the holder was told is not. Given up (or replaced)
            // before or while this waits: refused, nothing sent.
            let Some(zk) = self.client.connected_retrying_on(&mut retrying, self.session).await? else {
                return Err(lost());
            };
            let mut writer = zk.new_multi_writer();
            let built = writer
                .add_delete(&self.node.fixed, Some(CLAIM_VERSION))
                .and_then(|()| writer.add_create(&self.node.fixed, &[], &mode.options(&acls)))
                .and_then(|()| writer.add_set_data(&self.node.fixed, data, Some(0)));
            built.map_err(|e| Error::zk(&self.node.path, e))?;
            self.commit_sent = true;
            let source = match writer.commit().await {
                Ok(_) => {
                    self.armed = false;
                    debug!(path = %self.node.path, "idempotency key completed");
                    return Ok(());
                }
                Err(zk::MultiWriteError::OperationFailed { index: 0, .. }) => {
                    // The claim is gone or changed: not ours any more.
                    self.armed = false;
                    return Err(lost());
                }
                Err(zk::MultiWriteError::OperationFailed { index: 1, source })
                    if matches!(self.retention, Retention::Ttl(_))
                        && matches!(ErrorCode::of(&source), ErrorCode::Unimplemented | ErrorCode::BadArguments) =>
                {
                    return Err(Error::invalid_argument(
                        "retention",
                        format!("{:?}", self.retention),
                        "the server does not enable TTL nodes (zookeeper.extendedTypesEnabled=true); use Retention::Sweep",
                    ));
                }
                Err(zk::MultiWriteError::OperationFailed { index, source }) => {
                    return Err(Error::TransactionFailed {
                        index,
                        path: self.node.path.clone(),
                        code: ErrorCode::of(&source),
                    })
                }
                Err(zk::MultiWriteError::RequestFailed { source }) => source,
            };
            let err = Error::zk(&self.node.path, source);
            if !matches!(err.kind(), ErrorKind::Retryable | ErrorKind::SessionLost) {
                return Err(err);
            }
            debug!(%err, path = %self.node.path, "idempotency complete: reply lost, reading back");
            let (client, node, session) = (&self.client, &self.node, self.session);
            let found = read_back(client, &mut retrying, deadline, session, &node.path, &node.fixed).await?;
            match found {
                Found::Outcome { mark, .. } if mark == self.node.mark => {
                    self.armed = false;
                    return Ok(());
                }
                Found::Claim { owner, mark, .. } if owner == self.session.id && mark == self.node.mark => {
                    // Not applied, and the claim still stands: send it again.
                    self.commit_sent = false;
                    backoff.wait().await;
                }
                _ => {
                    self.armed = false;
                    return Err(lost());
                }
            }
        }
    }

    /// Frees the key without recording anything (the request failed; a retry may begin it again).
    /// Only this claim is deleted: the delete is sent only while the client is connected on the
    /// claim's session, after checking its mark. A claim whose session ended or was given up has
    /// nothing to send: its node goes with that session (at the latest once the server could have
    /// expired it).
    ///
    /// # Errors
    /// Server errors; a retryable error when the connection did not come back within the
    /// session timeout — the delete then goes on in the background (and the session's end frees
    /// the key anyway).
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call goes on in the background.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(claim: zk_curator::idempotency::IdempotencyClaim) -> zk_curator::Result<()> {
    /// // The payment provider is down: let the client retry later.
    /// claim.abandon().await?;
    /// # Ok(()) }
    /// ```
    pub async fn abandon(mut self) -> Result<()> {
        let deadline = crate::deadline::deadline_after(self.client.negotiated_session_timeout());
        let span = debug_span!("idempotency_abandon", path = %self.node.path);
        let released = release_if_ours(
            &self.client,
            self.session,
            &self.node.path,
            &self.node.fixed,
            &self.node.mark,
            Some(deadline),
        )
        .instrument(span)
        .await;
        if released.is_ok() {
            self.armed = false;
        }
        released
    }
}

/// What the server holds at the key after a commit whose reply was lost: read on the claim's
/// session while the client is served on it (a session reads its own writes), else — the session
/// ended for the client — on the current one after a `sync`, so a server behind the leader cannot
/// show the claim the commit removed.
///
/// # Errors
/// [`Error::OutcomeUnknown`] when the key cannot be read in time (the policy or the deadline gave
/// up, the client closed); a read's other errors (foreign data, no access).
async fn read_back(
    client: &CuratorClient,
    retrying: &mut Retrying<'_>,
    deadline: Option<Instant>,
    session: SessionIdentity,
    path: &str,
    fixed: &str,
) -> Result<Found> {
    let unknown = || Error::OutcomeUnknown { path: path.to_string(), during: "recording the outcome of" };
    loop {
        let zk = match client.connected_retrying_on(retrying, session).await {
            Ok(Some(zk)) => zk,
            Ok(None) => break,
            Err(_) => return Err(unknown()),
        };
        match read(&zk, path, fixed).await {
            Ok(found) => return Ok(found),
            Err(e) if matches!(e.kind(), ErrorKind::Retryable | ErrorKind::SessionLost) => {
                if retrying.backoff_or_fail(e).await.is_err() {
                    return Err(unknown());
                }
            }
            Err(e) => return Err(e),
        }
    }
    let read = client
        .with_retry(path, deadline, |zk| async move {
            zk.sync(fixed).await?;
            match zk.get_data(fixed).await {
                Ok(read) => Ok(Some(read)),
                Err(zk::Error::NoNode) => Ok(None),
                Err(e) => Err(e),
            }
        })
        .await;
    match read {
        Ok(Some((data, stat))) => parse(path, data, &stat),
        Ok(None) => Ok(Found::Absent),
        Err(_) => Err(unknown()),
    }
}

/// Forgets an attempt's claim without releasing it (another value with the same node and mark
/// takes over).
pub(super) fn disarm(claim: Option<IdempotencyClaim>) {
    if let Some(mut claim) = claim {
        claim.armed = false;
    }
}

impl Drop for IdempotencyClaim {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        debug!(path = %self.node.path, "idempotency claim dropped: releasing it in the background");
        let (client, path, fixed, mark, session) = (
            self.client.clone(),
            self.node.path.clone(),
            self.node.fixed.clone(),
            self.node.mark.clone(),
            self.session,
        );
        // A runtime shut down drops the task unrun; its session's end frees the claim then.
        drop(self.client.runtime().spawn(async move {
            if let Err(e) = release_if_ours(&client, session, &path, &fixed, &mark, None).await {
                warn!(%e, path, "could not release an idempotency claim");
            }
        }));
    }
}
