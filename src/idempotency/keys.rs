//! The handle: [`IdempotencyKeys`], and what a
//! [`begin`](IdempotencyKeys::begin) or a wait finds ([`Begin`], [`Settled`]).

use std::time::{Duration, Instant};

use tracing::{debug, debug_span, warn, Instrument};
use zookeeper_client as zk;

use crate::error::{Error, ErrorCode, Result};
use crate::framework::paths;
use crate::{CreateMode, CuratorClient};

use super::claim::{disarm, ClaimNode, IdempotencyClaim};
use super::node::{now_millis, parse, random_mark, read, until, Found, CLAIM_TAG};
use super::retention::Retention;

/// The longest key, in bytes (ZooKeeper has no limit of its own on a node name; the key is also in
/// every reply and listing).
pub const MAX_IDEMPOTENCY_KEY_LEN: usize = 256;

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
    pub(super) client: CuratorClient,
    base: String,
    pub(super) retention: Retention,
    pub(super) holder: String,
    /// `recipe="idempotency"`.
    metrics: crate::metrics::RecipeLabels,
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
        let metrics = client.recipe_labels("idempotency", base);
        Ok(Self { client: client.clone(), base: base.to_string(), retention, holder, metrics })
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
        let begun =
            until(deadline, &path, started, "beginning idempotency key", self.begin_loop(key, path.clone(), deadline))
                .instrument(span)
                .await;
        let outcome = match &begun {
            Ok(Begin::Started(_)) => "started",
            Ok(Begin::InProgress { .. }) => "in_progress",
            Ok(Begin::Done { .. }) => "done",
            Err(_) => "error",
        };
        self.metrics.claims(outcome, 1);
        begun
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
                _keep: client.session_keep(session),
                session,
                retention: self.retention,
                armed: true,
                commit_sent: false,
                hold: None,
            };
            let created = zk.create(&fixed, data.as_bytes(), &CreateMode::Ephemeral.options(&acls)).await;
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
                Ok(_) | Err(zk::Error::NodeExists) => match read(&zk, &path, &fixed).await {
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
