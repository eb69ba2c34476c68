//! [`IdempotencyKeys`]: Stripe-style idempotency keys on ZooKeeper — one execution per key, and
//! every duplicate answered with the recorded outcome.
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
//! claim or which outcome is there. A request sent on a session can only ever act on that session:
//! the claim keeps its session's handle, so a release after the session ended fails instead of
//! deleting someone else's new claim at the same path.
//!
//! [`sweep_expired`]: IdempotencyKeys::sweep_expired

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tracing::{debug, debug_span, warn, Instrument};
use zookeeper_client as zk;

use crate::error::{Error, ErrorCode, ErrorKind, Result};
use crate::framework::backoff::Backoff;
use crate::framework::paths;
use crate::framework::{CreatedNode, SessionIdentity};
use crate::locks::hold::{Hold, HoldState, HoldStateStream};
use crate::metrics::HoldMeter;
use crate::{CreateMode, CuratorClient};

/// The longest key, in bytes (ZooKeeper has no limit of its own on a node name; the key is also in
/// every reply and listing).
pub const MAX_IDEMPOTENCY_KEY_LEN: usize = 256;

const CLAIM_TAG: &str = "zk-curator-idempotency-claim";
const OUTCOME_TAG: &str = "zk-curator-idempotency-outcome";
/// A claim's data version: it is created and never written.
const CLAIM_VERSION: i32 = 0;

/// How long recorded outcomes are kept, and who removes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Retention {
    /// Outcomes are TTL nodes (`CreateMode::PersistentWithTtl`): the server removes each one this
    /// long after it was recorded. Needs a server with `zookeeper.extendedTypesEnabled=true`;
    /// otherwise [`IdempotencyClaim::complete`] fails with [`Error::InvalidArgument`] naming
    /// `retention`.
    Ttl(Duration),
    /// Outcomes are plain persistent nodes; [`IdempotencyKeys::sweep_expired`] removes those
    /// recorded longer ago than this (run it periodically).
    Sweep(Duration),
}

impl Retention {
    fn duration(self) -> Duration {
        match self {
            Retention::Ttl(d) | Retention::Sweep(d) => d,
        }
    }

    fn outcome_mode(self) -> CreateMode {
        match self {
            Retention::Ttl(ttl) => CreateMode::PersistentWithTtl(ttl),
            Retention::Sweep(_) => CreateMode::Persistent,
        }
    }
}

/// How a key in progress settled, as [`IdempotencyKeys::wait_done_timeout`] saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settled {
    /// The request was processed: its recorded result.
    Done {
        /// The bytes given to [`complete`](IdempotencyClaim::complete).
        result: Vec<u8>,
    },
    /// The key is free: its claimant abandoned it or died; the caller may
    /// [`begin`](IdempotencyKeys::begin) it.
    Free,
}

/// What [`IdempotencyKeys::begin`] found for a key.
#[derive(Debug)]
#[must_use = "a Started claim must be completed or abandoned"]
#[non_exhaustive]
pub enum Begin {
    /// The key was free and is now claimed by the caller: do the work, then
    /// [`complete`](IdempotencyClaim::complete) (or [`abandon`](IdempotencyClaim::abandon)).
    Started(IdempotencyClaim),
    /// Someone else's claim is live: the request is being processed.
    InProgress {
        /// The claimant's description (host, process, session).
        holder: String,
    },
    /// The request was processed: its recorded result.
    Done {
        /// The bytes given to [`complete`](IdempotencyClaim::complete).
        result: Vec<u8>,
    },
}

/// Idempotency keys under one base path: [`begin`](Self::begin) a key, do the work once,
/// [`complete`](IdempotencyClaim::complete) it with its result; every duplicate gets the result.
///
/// ```no_run
/// use std::time::Duration;
/// use zk_curator::CuratorClient;
/// use zk_curator::idempotency::{Begin, IdempotencyKeys, Retention};
///
/// # async fn demo(client: CuratorClient) -> zk_curator::Result<()> {
/// let keys = IdempotencyKeys::new(&client, "/payments/idempotency", Retention::Ttl(Duration::from_secs(86_400)))?;
/// match keys.begin("order-1234").await? {
///     Begin::Started(claim) => {
///         let receipt = b"charged 42.00".to_vec(); // ... the work, once ...
///         claim.complete(receipt).await?;
///     }
///     Begin::InProgress { holder } => println!("still being processed by {holder}"),
///     Begin::Done { result } => println!("already done: {}", String::from_utf8_lossy(&result)),
///     _ => {}
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct IdempotencyKeys {
    client: CuratorClient,
    base: String,
    retention: Retention,
    holder: String,
}

/// A state of a key node, as read.
enum Found {
    Absent,
    Claim { owner: i64, mark: String, holder: String, czxid: i64, ctime: i64 },
    Outcome { mark: String, result: Vec<u8>, mtime: i64 },
}

fn parse(path: &str, data: Vec<u8>, stat: &zk::Stat) -> Result<Found> {
    let corrupted = || Error::CorruptedValue {
        path: path.to_string(),
        len: data.len(),
        expected: "an idempotency claim or outcome (a tag line, a mark line, then the holder or result)",
    };
    let mut lines = data.splitn(3, |b| *b == b'\n');
    let (Some(tag), Some(mark), Some(rest)) = (lines.next(), lines.next(), lines.next()) else {
        return Err(corrupted());
    };
    let Ok(mark) = std::str::from_utf8(mark) else { return Err(corrupted()) };
    let mark = mark.to_string();
    match tag {
        t if t == CLAIM_TAG.as_bytes() && stat.ephemeral_owner != 0 => {
            let holder = String::from_utf8_lossy(rest).into_owned();
            Ok(Found::Claim { owner: stat.ephemeral_owner, mark, holder, czxid: stat.czxid, ctime: stat.ctime })
        }
        t if t == OUTCOME_TAG.as_bytes() && stat.ephemeral_owner == 0 => {
            let result = rest.to_vec();
            Ok(Found::Outcome { mark, result, mtime: stat.mtime })
        }
        _ => Err(corrupted()),
    }
}

/// Reads the key node on `zk` (one attempt).
async fn read(zk: &zk::Client, path: &str, fixed: &str) -> Result<Found> {
    match zk.get_data(fixed).await {
        Ok((data, stat)) => parse(path, data, &stat),
        Err(zk::Error::NoNode) => Ok(Found::Absent),
        Err(e) => Err(Error::zk(path, e)),
    }
}

/// Runs `fut` until `deadline` (if any); past it, a deadline error for `path`.
async fn until<T>(
    deadline: Option<Instant>,
    path: &str,
    started: Instant,
    during: &'static str,
    fut: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    match deadline {
        Some(d) => tokio::time::timeout_at(d.into(), fut)
            .await
            .unwrap_or_else(|_| Err(Error::deadline_exceeded(path, during, started.elapsed()))),
        None => fut.await,
    }
}

/// Deletes the claim at `fixed` if it is still the one `mark` made on the session of `zk`
/// (ephemeral, that session's, that mark: then only we can remove it while the session lives,
/// and a delete sent on an ended session fails). Retries connection trouble until `deadline`
/// (None: until done or the session ends).
async fn release_if_ours(
    zk: &zk::Client,
    path: &str,
    fixed: &str,
    session: i64,
    mark: &str,
    deadline: Option<Instant>,
) -> Result<()> {
    let started = Instant::now();
    let mut backoff = Backoff::new(Duration::from_millis(20), Duration::from_secs(1));
    loop {
        let attempt = async {
            match read(zk, path, fixed).await? {
                Found::Claim { owner, mark: m, .. } if owner == session && m == mark => {
                    match zk.delete(fixed, Some(CLAIM_VERSION)).await {
                        Ok(()) | Err(zk::Error::NoNode) | Err(zk::Error::BadVersion) => Ok(()),
                        Err(e) => Err(Error::zk(path, e)),
                    }
                }
                // Gone, someone else's, or our recorded outcome: nothing of this claim to free.
                _ => Ok(()),
            }
        };
        match until(deadline, path, started, "abandoning the idempotency claim", attempt).await {
            Ok(()) => return Ok(()),
            // The session ended (the server removed its ephemeral claim) or the client closed.
            Err(e) if matches!(e.kind(), ErrorKind::SessionLost | ErrorKind::Closed) => return Ok(()),
            Err(e) if e.kind() == ErrorKind::Retryable => {
                debug!(%e, path, "releasing an idempotency claim will retry");
                backoff.wait().await;
            }
            Err(e) => return Err(e),
        }
    }
}

fn random_mark() -> String {
    uuid::Uuid::new_v4().to_string()
}

fn now_millis() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl IdempotencyKeys {
    /// Idempotency keys under `base` whose outcomes are kept for `retention` (a TTL, or a
    /// [`sweep_expired`](Self::sweep_expired) period). Nothing is sent; `base` is created (as
    /// container nodes) by the first [`begin`](Self::begin) that needs it.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for a bad `base`; [`Error::InvalidArgument`] naming `retention` for a
    /// zero retention or a TTL over ZooKeeper's maximum.
    ///
    /// # Examples
    /// ```no_run
    /// # fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// use std::time::Duration;
    /// use zk_curator::idempotency::{IdempotencyKeys, Retention};
    ///
    /// // A server without TTL nodes: plain outcomes, removed by a periodic sweep.
    /// let keys = IdempotencyKeys::new(&client, "/forms/submissions", Retention::Sweep(Duration::from_secs(3600)))?;
    /// # Ok(()) }
    /// ```
    pub fn new(client: &CuratorClient, base: &str, retention: Retention) -> Result<Self> {
        paths::validate_path(base)?;
        if retention.duration().is_zero() {
            return Err(Error::invalid_argument("retention", format!("{retention:?}"), "must be positive"));
        }
        if let Err(Error::InvalidArgument { value, reason, .. }) = retention.outcome_mode().validate() {
            return Err(Error::InvalidArgument { name: "retention", value, reason });
        }
        let host = gethostname::gethostname().to_string_lossy().into_owned();
        let holder = format!("{host}:{}", std::process::id());
        Ok(Self { client: client.clone(), base: base.to_string(), retention, holder })
    }

    /// The base path.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The retention given to [`new`](Self::new).
    pub fn retention(&self) -> Retention {
        self.retention
    }

    /// The path of `key`'s node, after checking the key: not empty, no `/`, not `.` or `..`, at
    /// most [`MAX_IDEMPOTENCY_KEY_LEN`] bytes, and a valid ZooKeeper node name.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `key` and its value; [`Error::InvalidPath`] for
    /// characters ZooKeeper refuses.
    pub fn key_path(&self, key: &str) -> Result<String> {
        let reason = if key.is_empty() {
            Some("an idempotency key must not be empty")
        } else if key.contains('/') {
            Some("an idempotency key must not contain '/'")
        } else if key == "." || key == ".." {
            Some("an idempotency key must not be '.' or '..'")
        } else if key.len() > MAX_IDEMPOTENCY_KEY_LEN {
            Some("an idempotency key must be at most 256 bytes")
        } else {
            None
        };
        if let Some(reason) = reason {
            let shown: String = key.chars().take(64).collect();
            return Err(Error::invalid_argument("key", format!("{shown:?} ({} bytes)", key.len()), reason));
        }
        let path = paths::join(&self.base, key);
        paths::validate_path(&path)?;
        Ok(path)
    }

    /// Claims `key` if it is free ([`Begin::Started`]), or says who is processing it
    /// ([`Begin::InProgress`]) or what its recorded result is ([`Begin::Done`]). The claim is an
    /// ephemeral node: if this process dies, its session's end frees the key for a retry.
    ///
    /// A create whose reply was lost is resolved by reading the node back (our session and our
    /// mark: ours). Connection trouble is retried under the client's retry policy.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] / [`Error::InvalidPath`] for a bad key (nothing sent);
    /// [`Error::CorruptedValue`] when the key's node holds data no idempotency key wrote; server
    /// errors once the retry policy gives up; [`Error::Closed`].
    ///
    /// # Cancel safety
    /// Cancel safe: a claim created by a dropped call is deleted in the background (only that
    /// claim: the delete is checked against its session and mark).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(keys: zk_curator::idempotency::IdempotencyKeys) -> zk_curator::Result<()> {
    /// use zk_curator::idempotency::Begin;
    ///
    /// if let Begin::Started(claim) = keys.begin("form-7f3a").await? {
    ///     claim.complete(b"accepted".to_vec()).await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn begin(&self, key: &str) -> Result<Begin> {
        self.begin_until(key, None).await
    }

    /// [`begin`](Self::begin) within `timeout` (a [`Duration`] or an instant, see
    /// [`Deadline`](crate::Deadline)): an operation, so past it [`Error::DeadlineExceeded`] naming
    /// the key's path and the timeout, and no claim.
    ///
    /// # Errors
    /// As [`begin`](Self::begin), and [`Error::DeadlineExceeded`].
    ///
    /// # Cancel safety
    /// Cancel safe, as [`begin`](Self::begin).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(keys: zk_curator::idempotency::IdempotencyKeys) -> zk_curator::Result<()> {
    /// use std::time::Duration;
    ///
    /// let begun = keys.begin_within("form-7f3a", Duration::from_millis(500)).await?;
    /// # drop(begun);
    /// # Ok(()) }
    /// ```
    pub async fn begin_within(&self, key: &str, timeout: impl Into<crate::Deadline>) -> Result<Begin> {
        let timeout = timeout.into().remaining();
        let begin = self.begin_until(key, Some(crate::deadline::deadline_after(timeout)));
        crate::deadline::naming_timeout(Some(timeout), begin).await
    }

    /// The old name of [`begin_within`](Self::begin_within).
    ///
    /// # Errors
    /// As [`begin_within`](Self::begin_within).
    ///
    /// # Cancel safety
    /// As [`begin_within`](Self::begin_within).
    #[deprecated(
        note = "use `begin_within`: `_for` names a wait that returns `Ok(None)` on time-out (`try_lock_for`); an operation that runs out of time fails, within a `_within` name"
    )]
    pub async fn begin_for(&self, key: &str, timeout: Duration) -> Result<Begin> {
        self.begin_within(key, timeout).await
    }

    async fn begin_until(&self, key: &str, deadline: Option<Instant>) -> Result<Begin> {
        let path = self.key_path(key)?;
        let span = debug_span!("idempotency_begin", path = %path);
        let started = Instant::now();
        until(deadline, &path, started, "beginning idempotency key", self.begin_loop(key, path.clone(), deadline))
            .instrument(span)
            .await
    }

    async fn begin_loop(&self, key: &str, path: String, deadline: Option<Instant>) -> Result<Begin> {
        let client = &self.client;
        let fixed = client.fix_path(&path);
        let fixed_base = client.fix_path(&self.base);
        let acls = client.raw_acls_for(&fixed);
        let mut retrying = client.retrying(&path, deadline);
        // An attempt whose outcome is unknown, kept (armed) while the session lives: the next
        // attempt sends the same mark, so a claim that attempt made is recognised as ours. Were it
        // dropped at once, its background release could delete the claim a later attempt hands out.
        let mut unresolved: Option<IdempotencyClaim> = None;
        loop {
            if client.is_closed() {
                return Err(Error::Closed { path });
            }
            let (zk, session) = client.connected_retrying(&mut retrying).await?;
            // A deadline already passed sends nothing (a create sent now could still be applied).
            if retrying.expired() {
                return Err(retrying.deadline_exceeded("beginning idempotency key"));
            }
            // On a new session the earlier attempt's claim, if any, is not ours to hand out: its
            // release (dropping it) deletes it only through its own session.
            if unresolved.as_ref().is_some_and(|earlier| earlier.session.id != session.id) {
                unresolved = None;
            }
            let mark = unresolved.as_ref().map_or_else(random_mark, |earlier| earlier.node.mark.clone());
            let data = format!("{CLAIM_TAG}\n{mark}\n{} session 0x{:x}", self.holder, session.id);
            // From here until the claim is handed out, a dropped call deletes what it created.
            let mut claim = IdempotencyClaim {
                client: client.clone(),
                node: Box::new(ClaimNode {
                    key: key.to_string(),
                    path: path.clone(),
                    fixed: fixed.clone(),
                    mark: mark.clone(),
                }),
                zk,
                session,
                retention: self.retention,
                armed: true,
                commit_sent: false,
                hold: None,
            };
            let created = claim.zk.create(&fixed, data.as_bytes(), &CreateMode::Ephemeral.options(&acls)).await;
            let err = match created {
                Ok((stat, _)) if !stat.is_invalid() => {
                    debug!(path, "idempotency key claimed");
                    disarm(unresolved.take());
                    claim.grant(stat.czxid, stat.ctime, data.as_bytes());
                    match claim.hand_out().await? {
                        Some(claim) => return Ok(Begin::Started(claim)),
                        None => continue,
                    }
                }
                // Made, but answered without a stat (a client set for a server before 3.5): the
                // read below finds it ours.
                Ok(_) | Err(zk::Error::NodeExists) => match read(&claim.zk, &path, &fixed).await {
                    Ok(Found::Claim { owner, mark: m, czxid, ctime, .. }) if owner == session.id && m == mark => {
                        // Our create's reply (this attempt's or an earlier one's) was lost.
                        disarm(unresolved.take());
                        claim.grant(czxid, ctime, data.as_bytes());
                        match claim.hand_out().await? {
                            Some(claim) => return Ok(Begin::Started(claim)),
                            None => continue,
                        }
                    }
                    Ok(Found::Claim { holder, .. }) => {
                        // Someone else's — or an earlier attempt of this call on a session since
                        // replaced, which holds the key until the server ends that session.
                        claim.armed = false;
                        return Ok(Begin::InProgress { holder });
                    }
                    Ok(Found::Outcome { result, .. }) => {
                        claim.armed = false;
                        return Ok(Begin::Done { result });
                    }
                    // Removed meanwhile: try again at once (this attempt made nothing).
                    Ok(Found::Absent) => {
                        claim.armed = false;
                        continue;
                    }
                    Err(e) => e,
                },
                Err(zk::Error::NoNode) => {
                    claim.armed = false;
                    client.create_parents(&fixed_base, deadline).await?;
                    continue;
                }
                Err(e) => Error::zk(&path, e),
            };
            // The outcome is unknown: keep the claim armed (a failed or dropped call releases
            // whatever it made), one per session and mark.
            disarm(unresolved.replace(claim));
            retrying.backoff_or_fail(err).await?;
        }
    }

    /// Waits until `key` is settled, for a duplicate that wants the in-progress request's result,
    /// at most `timeout` (a [`Duration`] or an instant, see [`Deadline`](crate::Deadline)):
    /// `Some(Settled::Done { result })` once the result is recorded, `Some(Settled::Free)` when
    /// the key is (or becomes) free — its claimant abandoned it or died, and the caller may
    /// [`begin`](Self::begin) it — and `None` when the time ran out first (the key still in
    /// progress, or the connection down: the call returns then, whatever the connection does).
    /// Waits on a watch, never by polling.
    ///
    /// # Errors
    /// As [`begin`](Self::begin) (a bad key, foreign data, server errors, [`Error::Closed`]); a
    /// time-out is `Ok(None)`, not an error.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(keys: zk_curator::idempotency::IdempotencyKeys) -> zk_curator::Result<()> {
    /// use std::time::Duration;
    /// use zk_curator::idempotency::{Begin, Settled};
    ///
    /// if let Begin::InProgress { .. } = keys.begin("order-1234").await? {
    ///     match keys.wait_done_timeout("order-1234", Duration::from_secs(10)).await? {
    ///         Some(Settled::Done { result }) => println!("{}", String::from_utf8_lossy(&result)),
    ///         Some(Settled::Free) => println!("abandoned: begin it again"),
    ///         None => println!("still in progress"),
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn wait_done_timeout(&self, key: &str, timeout: impl Into<crate::Deadline>) -> Result<Option<Settled>> {
        match self.wait_settled(key, timeout.into().remaining()).await {
            Ok(Some(result)) => Ok(Some(Settled::Done { result })),
            Ok(None) => Ok(Some(Settled::Free)),
            Err(Error::DeadlineExceeded { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Waits until `key` is done: `Some(result)` once it is recorded, `None` when the key is (or
    /// becomes) free; [`Error::DeadlineExceeded`] when it is still in progress at the deadline.
    ///
    /// # Errors
    /// As [`wait_done_timeout`](Self::wait_done_timeout), and [`Error::DeadlineExceeded`].
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    #[deprecated(
        note = "use `wait_done_timeout`, which returns `Ok(None)` on time-out (the crate's one rule for waits) and `Settled::Free` for a free key"
    )]
    pub async fn wait_done(&self, key: &str, timeout: Duration) -> Result<Option<Vec<u8>>> {
        self.wait_settled(key, timeout).await
    }

    /// The result recorded at `key` (`None`: the key is free), or a deadline error.
    async fn wait_settled(&self, key: &str, timeout: Duration) -> Result<Option<Vec<u8>>> {
        let path = self.key_path(key)?;
        let deadline = crate::deadline::deadline_after(timeout);
        let started = Instant::now();
        let fixed = self.client.fix_path(&path);
        let span = debug_span!("idempotency_wait_done", path = %path);
        let wait = async {
            loop {
                let f = fixed.as_str();
                let (found, watcher) = self
                    .client
                    .with_retry(&path, Some(deadline), |zk| async move {
                        match zk.get_and_watch_data(f).await {
                            Ok((data, stat, watcher)) => Ok(Some((data, stat, watcher))),
                            Err(zk::Error::NoNode) => Ok(None),
                            Err(e) => Err(e),
                        }
                    })
                    .await
                    .and_then(|read| match read {
                        Some((data, stat, watcher)) => Ok((parse(&path, data, &stat)?, Some(watcher))),
                        None => Ok((Found::Absent, None)),
                    })?;
                match (found, watcher) {
                    (Found::Outcome { result, .. }, _) => return Ok(Some(result)),
                    (Found::Absent, _) => return Ok(None),
                    (Found::Claim { .. }, Some(watcher)) => {
                        // Any change (deleted, recorded) or a session event: read again.
                        let _ = watcher.changed().await;
                    }
                    (Found::Claim { .. }, None) => {}
                }
            }
        };
        let wait = until(Some(deadline), &path, started, "waiting for idempotency key", wait).instrument(span);
        crate::deadline::naming_timeout(Some(timeout), wait).await
    }

    /// Deletes the outcomes recorded longer ago than the retention (by the server's modification
    /// time against this host's clock), for [`Retention::Sweep`]; with [`Retention::Ttl`] the
    /// server does it, and a sweep only removes what it has not reaped yet. Claims are never
    /// touched. Returns how many outcomes it deleted.
    ///
    /// Each outcome is deleted at its version (1), so a claim made at the key meanwhile (version
    /// 0) is never removed.
    ///
    /// # Errors
    /// Server errors once the retry policy gives up; [`Error::Closed`]. A key with foreign data is
    /// skipped (logged), not an error.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped sweep has deleted some expired outcomes, nothing else.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(keys: zk_curator::idempotency::IdempotencyKeys) -> zk_curator::Result<()> {
    /// let removed = keys.sweep_expired().await?;
    /// println!("{removed} expired outcomes removed");
    /// # Ok(()) }
    /// ```
    pub async fn sweep_expired(&self) -> Result<usize> {
        let client = &self.client;
        let base = self.base.as_str();
        let fixed_base = client.fix_path(base);
        let fb = fixed_base.as_str();
        let children = match client.with_retry(base, None, |zk| async move { zk.list_children(fb).await }).await {
            Ok(children) => children,
            Err(e) if e.is(ErrorCode::NoNode) => return Ok(0),
            Err(e) => return Err(e),
        };
        let retention = i64::try_from(self.retention.duration().as_millis()).unwrap_or(i64::MAX);
        let mut removed = 0;
        for child in children {
            let path = paths::join(base, &child);
            let fixed = paths::join(&fixed_base, &child);
            let f = fixed.as_str();
            let read = client.with_retry(&path, None, |zk| async move { zk.get_data(f).await }).await;
            let (data, stat) = match read {
                Ok(read) => read,
                Err(e) if e.is(ErrorCode::NoNode) => continue,
                Err(e) => return Err(e),
            };
            let version = stat.version;
            match parse(&path, data, &stat) {
                Ok(Found::Outcome { mtime, .. }) if mtime.saturating_add(retention) <= now_millis() => {
                    let deleted =
                        client.with_retry(&path, None, |zk| async move { zk.delete(f, Some(version)).await }).await;
                    match deleted {
                        Ok(()) => removed += 1,
                        Err(e) if e.is(ErrorCode::NoNode) || e.is(ErrorCode::BadVersion) => {}
                        Err(e) => return Err(e),
                    }
                }
                Ok(_) => {}
                Err(e) => warn!(%e, "idempotency sweep skips a node it does not know"),
            }
        }
        debug!(base, removed, "idempotency sweep");
        Ok(removed)
    }
}

/// A claim on an idempotency key ([`Begin::Started`]): the caller does the work once, then
/// [`complete`](Self::complete)s it with the result, or [`abandon`](Self::abandon)s it. Dropping it
/// abandons it (a background delete; no runtime needed, never panics).
#[derive(Debug)]
pub struct IdempotencyClaim {
    client: CuratorClient,
    node: Box<ClaimNode>,
    zk: zk::Client,
    session: SessionIdentity,
    retention: Retention,
    /// True while the claim may exist and is ours to free on drop.
    armed: bool,
    /// True while a commit of the outcome was sent and not known to have failed: a deadline then
    /// leaves the outcome unknown, not unrecorded.
    commit_sent: bool,
    /// The claim node as a hold (set once it is known to be made): its creation zxid, and its
    /// `Held`/`Suspended`/`Lost` state — connection and session changes, and a watch on that very
    /// node (by creation zxid).
    hold: Option<Granted>,
}

/// A made claim's hold and grant time.
#[derive(Debug)]
struct Granted {
    hold: Arc<Hold>,
    at: SystemTime,
}

/// Which node a claim is, and the mark that tells it from another claim at the same path.
#[derive(Debug)]
struct ClaimNode {
    key: String,
    path: String,
    fixed: String,
    mark: String,
}

impl IdempotencyClaim {
    /// The claim node, made with `data` on the claim's session, created at `czxid` and `ctime`
    /// (server milliseconds): its hold, watched from now on.
    fn grant(&mut self, czxid: i64, ctime: i64, data: &[u8]) {
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
    async fn hand_out(self) -> Result<Option<Self>> {
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
    /// once its session ended or was given up, or its node was deleted — [`complete`](Self::complete)
    /// is then refused. The claim's node is watched from the moment it is handed out.
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
    /// [`begin`](IdempotencyKeys::begin) of the key answers [`Begin::Done`] with `result`, until
    /// the retention ends. Refused if the claim was lost (its session ended): nothing is recorded
    /// and the caller must not report success.
    ///
    /// A reply lost on the way is resolved by reading the key back (our mark on an outcome:
    /// recorded).
    ///
    /// # Errors
    /// * [`Error::LockLost`] naming the key's node: the claim was lost, nothing recorded;
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
        let retrying = self.client.retrying(&self.node.path, deadline);
        loop {
            if retrying.expired() {
                return Err(retrying.deadline_exceeded("completing idempotency key"));
            }
            let mut writer = self.zk.new_multi_writer();
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
            // The reply was lost: read back what the server holds, on the claim's session while it
            // lives, else on the client's current one.
            debug!(%err, path = %self.node.path, "idempotency complete: reply lost, reading back");
            let found = match err.kind() {
                ErrorKind::Retryable => read(&self.zk, &self.node.path, &self.node.fixed).await,
                _ => Err(err.clone()),
            };
            let found = match found {
                Ok(found) => found,
                Err(e) if matches!(e.kind(), ErrorKind::Retryable | ErrorKind::SessionLost) => {
                    let (f, p) = (self.node.fixed.as_str(), self.node.path.as_str());
                    match self
                        .client
                        .with_retry(p, deadline, |zk| async move {
                            match zk.get_data(f).await {
                                Ok(read) => Ok(Some(read)),
                                Err(zk::Error::NoNode) => Ok(None),
                                Err(e) => Err(e),
                            }
                        })
                        .await
                    {
                        Ok(Some((data, stat))) => parse(p, data, &stat)?,
                        Ok(None) => Found::Absent,
                        Err(_) => {
                            return Err(Error::OutcomeUnknown {
                                path: self.node.path.clone(),
                                during: "recording the outcome of",
                            })
                        }
                    }
                }
                Err(e) => return Err(e),
            };
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
    /// Only this claim is deleted: the delete is sent on its session, after checking its mark.
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
            &self.zk,
            &self.node.path,
            &self.node.fixed,
            self.session.id,
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

/// Forgets an attempt's claim without releasing it (another value with the same node and mark
/// takes over).
fn disarm(claim: Option<IdempotencyClaim>) {
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
        let (zk, path, fixed, mark, session) =
            (self.zk.clone(), self.node.path.clone(), self.node.fixed.clone(), self.node.mark.clone(), self.session.id);
        // A runtime shut down drops the task unrun; its session's end frees the claim then.
        drop(self.client.runtime().spawn(async move {
            if let Err(e) = release_if_ours(&zk, &path, &fixed, session, &mark, None).await {
                warn!(%e, path, "could not release an idempotency claim");
            }
        }));
    }
}
