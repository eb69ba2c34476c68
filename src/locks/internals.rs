//! Layer 2: `LockInternals`, the loop every lock recipe shares (Curator's `LockInternals`).
//!
//! Create our node through the driver; list the children; ask the driver for a [`Verdict`]; if not
//! held, watch only what the driver names (one node, or the children) and wait for its event, the
//! deadline or a session change. A vanished predecessor means look again; our own node missing
//! means our session died: start over with a new node (retry policy, within the deadline). On
//! timeout, error or cancellation our node is deleted.
//!
//! Two rules make a grant trustworthy:
//! * **Only on the node's own session.** A listing or a watch event that arrives on another session
//!   than our node's says nothing about our node (the server may still show a dead session's node
//!   until it expires it), so it counts as a session change and we queue again.
//! * **Only `Held`.** A verdict of "acquired" is handed out once the client is connected on that
//!   session and has not declared it LOST; while suspended we wait (within the deadline).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::debug;
use zookeeper_client as zk;

use super::driver::{Contender, LockDriver, Verdict};
use super::hold::{Hold, HoldState};
use crate::deadline::deadline_after;
use crate::error::{Error, ErrorKind, Result};
use crate::framework::guaranteed_delete::{DeleteOnDrop, DeleteTarget, OwnedMark};
use crate::framework::paths;
use crate::framework::{CreatedNode, SessionIdentity};
use crate::metrics::{measure_acquire, LockLabels};
use crate::CuratorClient;

/// After its deadline, how long a failed or timed-out acquire still waits for the delete of its
/// node (so a caller told "not acquired" normally finds no node of ours). A delete that takes longer
/// goes on in the background; the call has returned by then.
pub(crate) const CLEANUP_SLACK: Duration = Duration::from_millis(20);

/// How long an acquire may wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wait {
    /// Until acquired (or an error).
    Forever,
    /// Until this instant, strictly: the call returns by then, whatever the connection does.
    Until(Instant),
    /// One attempt (a create and a listing) if connected now; "not acquired" at once if not.
    OneAttempt,
}

impl Wait {
    /// `OneAttempt` for a zero timeout (Curator's `acquire(0, ..)`), else a strict deadline.
    pub(crate) fn from_timeout(timeout: Duration) -> Wait {
        if timeout.is_zero() {
            return Wait::OneAttempt;
        }
        Wait::Until(deadline_after(timeout))
    }

    pub(crate) fn deadline(self) -> Option<Instant> {
        match self {
            Wait::Until(d) => Some(d),
            Wait::Forever | Wait::OneAttempt => None,
        }
    }
}

/// The engine behind a lock recipe: a base path, a driver, and a number of leases.
pub struct LockInternals<D: LockDriver> {
    client: CuratorClient,
    /// Shared with `labels` (and `fixed_base`, without a namespace): every instance of a lock on a
    /// path — often one per task — keeps its path once.
    base: Arc<str>,
    fixed_base: Arc<str>,
    driver: D,
    /// The recipe and lock path for the spans and the metrics.
    labels: LockLabels,
    /// A watch, so that waiters look again when it changes (a semaphore's shared count).
    /// Made on first use: most instances of a mutex never acquire themselves (their guards wait in
    /// a local queue that acquires through another instance), and a channel costs about 400 bytes.
    max_leases: std::sync::OnceLock<tokio::sync::watch::Sender<usize>>,
    initial_max_leases: usize,
    /// Contenders race for one node named by the driver's lock name instead of queueing (see
    /// [`racing`](Self::racing)).
    race: bool,
}

impl<D: LockDriver> std::fmt::Debug for LockInternals<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockInternals").field("base", &self.base).field("lock_name", &self.driver.lock_name()).finish()
    }
}

/// What one wait ended with.
enum WaitOutcome {
    /// Look at the children again.
    Relist,
    /// The watched node was the only one ahead and is gone.
    Acquired,
    /// Our session changed (or was given up): our node is dead.
    SessionChanged,
    DeadlinePassed,
    Closed,
    /// The hold the attempt stands on is `Lost` (released, deleted, or its session ended).
    BasisLost,
}

/// What a waiter watches besides its watch event.
struct Watching<'a> {
    /// Our node's session: its end ends the wait.
    session: SessionIdentity,
    deadline: Option<Instant>,
    /// A change of the lease count means look again.
    max_leases: &'a mut tokio::sync::watch::Receiver<usize>,
}

/// A hold an attempt stands on: its node is created on this hold's session (a suspended basis is
/// waited out first) and granted on that session only while this hold is not `Lost` (the grant
/// itself needs the session connected). Once the hold is lost the attempt ends with [`Error::LockLost`] naming it
/// (and leaves no node): a node on another session, or granted after its basis was lost, would
/// let two holders in.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Basis<'a> {
    /// The attempt stands alone.
    None,
    /// A downgrade: the caller holds this node of the same lock path, and the new node takes its
    /// place in line (the driver sees it as [`Contender::caller_holds`]); its fencing token
    /// follows this hold's ([`Hold::in_place_of`]).
    InQueue(&'a Hold),
    /// The caller holds this other lock while it waits (a semaphore's internal mutex).
    Elsewhere(&'a Hold),
}

impl<'a> Basis<'a> {
    fn hold(self) -> Option<&'a Hold> {
        match self {
            Basis::None => None,
            Basis::InQueue(hold) | Basis::Elsewhere(hold) => Some(hold),
        }
    }

    fn caller_holds(self) -> Vec<String> {
        match self {
            Basis::InQueue(hold) => vec![hold.name().to_string()],
            Basis::None | Basis::Elsewhere(_) => Vec::new(),
        }
    }

    fn lost(hold: &Hold) -> Error {
        Error::LockLost { node: hold.path().to_string(), reason: "the hold this call stands on was lost" }
    }
}

/// What [`LockInternals::grant`] decided.
enum Grant {
    Held,
    SessionChanged,
    DeadlinePassed,
}

impl<D: LockDriver> LockInternals<D> {
    /// An engine for locks under `base` (validated), granting `max_leases` holders at once,
    /// traced and measured with `labels`.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for a bad `base`; [`Error::InvalidArgument`] for zero leases or a bad lock name.
    pub(crate) fn new(
        client: &CuratorClient,
        base: &str,
        driver: D,
        max_leases: usize,
        labels: LockLabels,
    ) -> Result<Self> {
        paths::validate_path(base)?;
        if base == "/" {
            return Err(Error::InvalidPath { path: base.to_string(), reason: "a lock cannot live at the root" });
        }
        paths::validate_node_name("lock name", driver.lock_name())?;
        if max_leases == 0 {
            return Err(Error::invalid_argument("max_leases", 0, "must be at least 1"));
        }
        let shared_base = if &**labels.shared_path() == base { labels.shared_path().clone() } else { Arc::from(base) };
        let fixed = client.fix_path(base);
        let fixed_base = if fixed == base { shared_base.clone() } else { Arc::from(fixed) };
        Ok(Self {
            client: client.clone(),
            fixed_base,
            base: shared_base,
            driver,
            labels,
            max_leases: std::sync::OnceLock::new(),
            initial_max_leases: max_leases,
            race: false,
        })
    }

    /// Makes contenders race for one EPHEMERAL node, `<base>/<lock name>`, instead of queueing
    /// with sequential nodes (the non-fair mutex): whoever creates it holds the lock; the others
    /// watch it and race again when it is deleted. No order, no queue.
    pub(crate) fn racing(mut self) -> Self {
        self.race = true;
        self
    }

    /// Contenders race for one node (see [`racing`](Self::racing)).
    pub(crate) fn races(&self) -> bool {
        self.race
    }

    /// The lock's base path.
    pub fn base_path(&self) -> &str {
        &self.base
    }

    /// The client.
    pub fn client(&self) -> &CuratorClient {
        &self.client
    }

    /// The driver.
    pub(crate) fn driver(&self) -> &D {
        &self.driver
    }

    /// The recipe and lock path of the spans and metrics.
    pub(crate) fn labels(&self) -> &LockLabels {
        &self.labels
    }

    /// How many contenders may hold at once.
    pub fn max_leases(&self) -> usize {
        *self.leases().borrow()
    }

    /// Changes the number of leases (Curator's `setMaxLeases`, a semaphore following its shared
    /// count); waiters see it at their next look. Zero grants nothing.
    pub(crate) fn set_max_leases(&self, max_leases: usize) {
        self.leases().send_if_modified(|current| std::mem::replace(current, max_leases) != max_leases);
    }

    /// The channel of the number of leases.
    fn leases(&self) -> &tokio::sync::watch::Sender<usize> {
        self.max_leases.get_or_init(|| tokio::sync::watch::Sender::new(self.initial_max_leases))
    }

    /// The children of the base path, sorted by the driver, as full paths (Curator's
    /// `getParticipantNodes`). Empty if the base path does not exist. Bounded by `deadline`.
    pub(crate) async fn participant_nodes(&self, deadline: Option<Instant>) -> Result<Vec<String>> {
        let (mut children, _) = self.children(deadline).await?;
        self.driver.sort(&mut children);
        for child in children.iter_mut() {
            *child = paths::join(&self.base, child);
        }
        Ok(children)
    }

    /// The children of the base path in server order (empty if it does not exist), with the
    /// session of the handle that listed them.
    async fn children(&self, deadline: Option<Instant>) -> Result<(Vec<String>, i64)> {
        let fixed = &*self.fixed_base;
        let listed = self.client.with_retry(&self.base, deadline, |zk| async move {
            let session = zk.session_id().0;
            match zk.list_children(fixed).await {
                Ok(children) => Ok((children, session)),
                Err(zk::Error::NoNode) => Ok((Vec::new(), session)),
                Err(e) => Err(e),
            }
        });
        listed.await
    }

    /// Tries to get a lease: `Ok(Some(hold))` when held, `Ok(None)` when the wait ended first.
    /// `basis` is a hold the attempt stands on (see [`Basis`]).
    ///
    /// # Errors
    /// [`Error::Closed`] once the client is closing; [`Error::LockLost`] naming the basis once it
    /// is lost; server errors after the retry policy gave up (including a lost session when the
    /// policy refuses to queue again). Our node is deleted first.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call's node (created, or with its create in flight) is deleted in the
    /// background.
    pub(crate) async fn attempt_lock(&self, wait: Wait, data: &[u8], basis: Basis<'_>) -> Result<Option<Arc<Hold>>> {
        let attempt = self.attempt_lock_unmeasured(wait, data, basis);
        measure_acquire(&self.labels, self.driver.lock_name(), |hold: &Arc<Hold>| hold.path(), attempt).await
    }

    /// [`attempt_lock`](Self::attempt_lock) without its span and metrics, for a recipe that
    /// measures a larger acquire around it (a semaphore's lease, taken under its internal mutex).
    pub(crate) async fn attempt_lock_unmeasured(
        &self,
        wait: Wait,
        data: &[u8],
        basis: Basis<'_>,
    ) -> Result<Option<Arc<Hold>>> {
        self.attempt(wait, data, basis, true).await
    }

    /// The node of a local queue's turn: [`attempt_lock_unmeasured`](Self::attempt_lock_unmeasured)
    /// whose hold records no metrics (each local holder of the node records its own).
    pub(crate) async fn attempt_shared_node(&self, wait: Wait, data: &[u8]) -> Result<Option<Arc<Hold>>> {
        self.attempt(wait, data, Basis::None, false).await
    }

    async fn attempt(&self, wait: Wait, data: &[u8], basis: Basis<'_>, metered: bool) -> Result<Option<Arc<Hold>>> {
        if self.race {
            // Only the non-fair mutex races, and it never stands on another hold.
            debug_assert!(basis.hold().is_none(), "a racing lock stands on no other hold");
            return self.attempt_race(wait, metered).await;
        }
        if self.client.is_closed() {
            return Err(Error::Closed { path: self.base.to_string() });
        }
        if let Some(hold) = basis.hold().filter(|hold| hold.hold_state() == HoldState::Lost) {
            // A lost basis is refused whatever the connection, one attempt included.
            return Err(Basis::lost(hold));
        }
        if wait == Wait::OneAttempt && !self.client.is_connected() {
            // One attempt needs a connection now; waiting for one would be a timed call.
            return Ok(None);
        }
        // The one attempt still gets an operation's normal bound for its round trip.
        let deadline = match wait {
            Wait::OneAttempt => Some(deadline_after(self.client.connection_timeout())),
            _ => wait.deadline(),
        };
        let mut retrying = self.client.retrying(&self.base, deadline);
        let caller_holds = basis.caller_holds();
        let caller_holds = caller_holds.as_slice();
        // Subscribed before the first look, so a change of the maximum after that look is never
        // missed by the wait that follows it.
        let mut max_leases = self.leases().subscribe();
        loop {
            if self.client.is_closed() {
                return Err(Error::Closed { path: self.base.to_string() });
            }
            if let Some(hold) = basis.hold() {
                // Wait out a suspended basis; a lost one ends the call before anything is created.
                if !hold.wait_held(deadline).await? {
                    return Ok(None);
                }
            }
            let spec = self.driver.node_spec(caller_holds);
            let created =
                self.client.create_protected(&self.base, &spec.name, data, spec.mode, deadline, true, None).await;
            let (node, listing) = match created {
                Ok(created) => created,
                Err(Error::DeadlineExceeded { .. }) => return Ok(None),
                Err(e) => return Err(e),
            };
            let fixed_node = paths::join(&self.fixed_base, &node.name);
            let mut cleanup = self.client.delete_on_drop(DeleteTarget::Node(fixed_node.clone()));
            if let Some(hold) = basis.hold().filter(|hold| hold.session() != node.session) {
                // The session was replaced between the check and the create: the basis is gone.
                self.give_up(cleanup, deadline).await;
                return Err(Basis::lost(hold));
            }
            let mut listing = listing.map(|children| (children, node.session.id, None));
            let mut watch_children = false;
            let outcome = loop {
                let (children, listed_on, children_watcher) = match listing.take() {
                    Some(listed) => listed,
                    None => match self.list(watch_children, deadline).await {
                        Ok(listed) => listed,
                        Err(e) => break Err(e),
                    },
                };
                if listed_on != node.session.id {
                    // Another session's view says nothing about our node.
                    break Ok(WaitOutcome::SessionChanged);
                }
                let max = *max_leases.borrow_and_update();
                let contender = Contender { our_name: &node.name, max_leases: max, caller_holds };
                // The listing is consumed here: a long queue's names are not kept alive while we wait.
                let waited = match self.driver.evaluate(children, &contender) {
                    Verdict::Acquired => Ok(WaitOutcome::Acquired),
                    Verdict::NotInQueue => Ok(WaitOutcome::SessionChanged),
                    _ if wait == Wait::OneAttempt => Ok(WaitOutcome::DeadlinePassed),
                    Verdict::Watch { node: watched, acquired_when_deleted } => {
                        let watching = Watching { session: node.session, deadline, max_leases: &mut max_leases };
                        self.wait_for_node(&watched, acquired_when_deleted, watching).await
                    }
                    Verdict::WatchChildren => match children_watcher {
                        // Any change of the children means look again (a deleted base path too).
                        Some(watcher) => Ok(
                            match self
                                .wait_for_event(
                                    watcher,
                                    Watching { session: node.session, deadline, max_leases: &mut max_leases },
                                )
                                .await
                            {
                                WaitOutcome::Acquired => WaitOutcome::Relist,
                                other => other,
                            },
                        ),
                        None => {
                            // Look again, this time setting the children watch with the listing.
                            watch_children = true;
                            Ok(WaitOutcome::Relist)
                        }
                    },
                };
                match waited {
                    Ok(WaitOutcome::Relist) => continue,
                    Ok(WaitOutcome::Acquired) => match self.grant(node.session, deadline).await {
                        Grant::Held if basis.hold().is_some_and(|hold| hold.hold_state() == HoldState::Lost) => {
                            break Ok(WaitOutcome::BasisLost);
                        }
                        Grant::Held => {
                            cleanup.disarm();
                            let meter = if metered {
                                self.labels.hold_meter()
                            } else {
                                crate::metrics::HoldMeter::unrecorded()
                            };
                            return Ok(Some(match basis {
                                // A downgrade's token follows its write hold's (hold order).
                                Basis::InQueue(writer) => {
                                    Hold::in_place_of(writer, &self.client, node, fixed_node, data, meter)
                                }
                                Basis::None | Basis::Elsewhere(_) => {
                                    Hold::new(&self.client, node, fixed_node, data, meter)
                                }
                            }));
                        }
                        Grant::SessionChanged => break Ok(WaitOutcome::SessionChanged),
                        Grant::DeadlinePassed => break Ok(WaitOutcome::DeadlinePassed),
                    },
                    other => break other,
                }
            };
            match outcome {
                // One attempt never queues twice.
                Ok(WaitOutcome::SessionChanged) if wait != Wait::OneAttempt => {}
                Ok(WaitOutcome::Closed) => {
                    self.give_up(cleanup, deadline).await;
                    return Err(Error::Closed { path: self.base.to_string() });
                }
                Ok(WaitOutcome::BasisLost) => {
                    self.give_up(cleanup, deadline).await;
                    return Err(basis
                        .hold()
                        .map_or_else(|| Error::Closed { path: self.base.to_string() }, Basis::lost));
                }
                Ok(_) | Err(Error::DeadlineExceeded { .. }) => {
                    self.give_up(cleanup, deadline).await;
                    return Ok(None);
                }
                Err(e) => {
                    self.give_up(cleanup, deadline).await;
                    return Err(e);
                }
            }
            // Our node is dead (session expired or replaced, or deleted by someone else): queue
            // again with a new node, as Curator does, if the retry policy and the deadline allow.
            // We lose our place. The old node is deleted in the background (harmless if gone).
            drop(cleanup);
            if let Some(hold) = basis.hold().filter(|hold| hold.hold_state() == HoldState::Lost) {
                // Our node died with the basis's session: nothing to queue again for.
                return Err(Basis::lost(hold));
            }
            debug!(node = %node.path, "our lock node is dead or unconfirmed; queueing again with a new node");
            // Classified as a session loss so the retry policy decides, as Curator's NoNode path does.
            let err = Error::code_on(&node.path, crate::ErrorCode::SessionExpired);
            match retrying.backoff_or_fail(err).await {
                Ok(()) => {}
                Err(Error::DeadlineExceeded { .. }) => return Ok(None),
                Err(e) => return Err(e),
            }
        }
    }

    /// The non-fair race (see [`racing`](Self::racing)): create the one node of the lock path;
    /// if it exists, watch it (a data watch, which leaves nothing behind on a missing node) and
    /// race again once it is deleted. Our node carries a fresh unique mark, so a create whose
    /// reply was lost is recognised as ours (its `ephemeralOwner` is our session and its data our
    /// mark) when the next create finds the node existing. Waiting, deadlines, grants and clean-up
    /// follow [`attempt`](Self::attempt)'s rules; a cancelled or failed attempt deletes the node
    /// only while it is ours ([`DeleteTarget::Owned`]).
    async fn attempt_race(&self, wait: Wait, metered: bool) -> Result<Option<Arc<Hold>>> {
        if self.client.is_closed() {
            return Err(Error::Closed { path: self.base.to_string() });
        }
        if wait == Wait::OneAttempt && !self.client.is_connected() {
            return Ok(None);
        }
        let deadline = match wait {
            Wait::OneAttempt => Some(deadline_after(self.client.connection_timeout())),
            _ => wait.deadline(),
        };
        let name = self.driver.lock_name();
        let fixed_node = paths::join(&self.fixed_base, name);
        let path = paths::join(&self.base, name);
        let mark = uuid::Uuid::new_v4().to_string().into_bytes();
        let acls = self.client.raw_acls_for(&fixed_node);
        let options = crate::CreateMode::Ephemeral.options(&acls);
        let mut retrying = self.client.retrying(&self.base, deadline);
        let mut max_leases = self.leases().subscribe();
        let mut parent_rounds = 0u32;
        // Armed, for the session it was sent on, once a create of ours may have made the node. A
        // node of an earlier session goes with it: its delete (queued when replaced) leaves it.
        let mut cleanup: Option<(i64, DeleteOnDrop<'_>)> = None;
        let ended: Result<()> = loop {
            if self.client.is_closed() {
                break Err(Error::Closed { path: self.base.to_string() });
            }
            let (zk, session) = match self.client.connected(&self.base, deadline).await {
                Ok(current) => current,
                Err(e) => match retrying.backoff_or_fail(e).await {
                    Ok(()) => continue,
                    Err(e) => break Err(e),
                },
            };
            if cleanup.as_ref().is_none_or(|(armed, _)| *armed != session.id) {
                let target = DeleteTarget::Owned {
                    path: fixed_node.clone(),
                    session: session.id,
                    mark: OwnedMark::Data(mark.clone()),
                };
                cleanup = Some((session.id, self.client.delete_on_drop(target)));
            }
            let create = zk.create(&fixed_node, &mark, &options);
            let created = match deadline {
                Some(d) => tokio::time::timeout_at(d.into(), create).await.unwrap_or(Err(zk::Error::Timeout)),
                None => create.await,
            };
            let failed = match created {
                Ok((stat, _)) => Ok(stat.czxid),
                Err(zk::Error::NodeExists) => {
                    // Held: by us (a create whose reply was lost) or by someone else, to watch.
                    let look = zk.get_and_watch_data(&fixed_node);
                    let looked = match deadline {
                        Some(d) => tokio::time::timeout_at(d.into(), look).await.unwrap_or(Err(zk::Error::Timeout)),
                        None => look.await,
                    };
                    match looked {
                        Ok((data, stat, _)) if stat.ephemeral_owner == session.id && data == mark => Ok(stat.czxid),
                        Ok((_, _, watcher)) => {
                            // The one node is someone else's, so no create of ours made one on
                            // this session: nothing to clean up (until we create again).
                            if let Some((_, mut none_of_ours)) = cleanup.take() {
                                none_of_ours.disarm();
                            }
                            if wait == Wait::OneAttempt {
                                break Ok(());
                            }
                            let watching = Watching { session, deadline, max_leases: &mut max_leases };
                            match self.wait_for_event(watcher, watching).await {
                                WaitOutcome::Closed => break Err(Error::Closed { path: self.base.to_string() }),
                                WaitOutcome::DeadlinePassed | WaitOutcome::BasisLost => break Ok(()),
                                // Deleted (or changed), or our session changed: race again.
                                _ => continue,
                            }
                        }
                        // Deleted between the create and the look: race again at once.
                        Err(zk::Error::NoNode) => continue,
                        Err(e) => Err(e),
                    }
                }
                Err(zk::Error::NoNode) if parent_rounds < 5 => {
                    parent_rounds += 1;
                    match self.client.create_parents(&self.fixed_base, deadline).await {
                        Ok(()) | Err(Error::ZooKeeper { code: crate::ErrorCode::NoNode, .. }) => continue,
                        Err(e) => break Err(e),
                    }
                }
                Err(e) => Err(e),
            };
            let czxid = match failed {
                Ok(czxid) => czxid,
                Err(zk::Error::Timeout) if retrying.expired() => break Ok(()),
                // A lost reply: the next create finds the node and our mark, if it was made.
                Err(e) => match retrying.backoff_or_fail(Error::zk(&path, e)).await {
                    Ok(()) => continue,
                    Err(e) => break Err(e),
                },
            };
            let node = CreatedNode { path: path.clone(), name: name.to_string(), sequence: -1, czxid, session };
            match self.grant(session, deadline).await {
                Grant::Held => {
                    if let Some((_, mut cleanup)) = cleanup.take() {
                        cleanup.disarm();
                    }
                    let meter =
                        if metered { self.labels.hold_meter() } else { crate::metrics::HoldMeter::unrecorded() };
                    return Ok(Some(Hold::of_fixed_name(&self.client, node, fixed_node, &mark, meter)));
                }
                Grant::DeadlinePassed => break Ok(()),
                Grant::SessionChanged => {
                    // Our node went with its session: race again on the new one.
                    let err = Error::code_on(&node.path, crate::ErrorCode::SessionExpired);
                    if let Err(e) = retrying.backoff_or_fail(err).await {
                        break Err(e);
                    }
                }
            }
        };
        if let Some((_, cleanup)) = cleanup {
            self.give_up(cleanup, deadline).await;
        }
        match ended {
            Ok(()) | Err(Error::DeadlineExceeded { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Lists the children (setting a children watch with the listing when `watch` is set).
    async fn list(
        &self,
        watch: bool,
        deadline: Option<Instant>,
    ) -> Result<(Vec<String>, i64, Option<zk::OneshotWatcher>)> {
        if !watch {
            let (children, session) = self.children(deadline).await?;
            return Ok((children, session, None));
        }
        let fixed = &*self.fixed_base;
        let listed = self.client.with_retry(&self.base, deadline, |zk| async move {
            let session = zk.session_id().0;
            let (children, watcher) = zk.list_and_watch_children(fixed).await?;
            Ok((children, session, Some(watcher)))
        });
        match listed.await {
            // The base path vanished: so did our node.
            Err(e) if e.is(crate::ErrorCode::NoNode) => Ok((Vec::new(), self.client.session().id, None)),
            other => other,
        }
    }

    /// Hands out a verdict of "acquired" only as `Held`: connected on the node's own session, which
    /// the client has not given up. Waits while suspended, within the deadline.
    async fn grant(&self, session: SessionIdentity, deadline: Option<Instant>) -> Grant {
        let mut status = self.client.status();
        let settled = status.wait_for(|s| s.serves(session) || s.has_ended(session));
        let settled = match deadline {
            Some(d) => match tokio::time::timeout_at(d.into(), settled).await {
                Ok(settled) => settled,
                Err(_) => return Grant::DeadlinePassed,
            },
            None => settled.await,
        };
        match settled {
            Ok(s) if s.serves(session) => Grant::Held,
            _ => Grant::SessionChanged,
        }
    }

    /// Deletes our node: now if that finishes within a few ms of the deadline, else in the
    /// background, so a timed call keeps its deadline whatever the connection does.
    async fn give_up(&self, mut cleanup: DeleteOnDrop<'_>, deadline: Option<Instant>) {
        let Some(outcome) = cleanup.queue_now() else { return };
        let limit = deadline.map_or(Instant::now(), |d| d.max(Instant::now())) + CLEANUP_SLACK;
        let _ = tokio::time::timeout_at(limit.into(), outcome.wait()).await;
    }

    /// Watches `node` (a child name) and waits for its event, the deadline, or a session change.
    async fn wait_for_node(
        &self,
        node: &str,
        acquired_when_deleted: bool,
        watching: Watching<'_>,
    ) -> Result<WaitOutcome> {
        let (our_session, deadline) = (watching.session, watching.deadline);
        let fixed = paths::join(&self.fixed_base, node);
        let path = paths::join(&self.base, node);
        if self.client.status_now().has_ended(our_session) {
            return Ok(WaitOutcome::SessionChanged);
        }
        // A data watch, as Curator does (CURATOR-107): no watch is left behind on a missing node.
        let fixed_ref = fixed.as_str();
        let watched = self
            .client
            .with_retry(&path, deadline, |zk| async move {
                let result = zk.get_and_watch_data(fixed_ref).await;
                Ok((result, zk.session_id().0))
            })
            .await;
        let (watcher, ours) = match watched {
            // A watch or an absence seen on another session says nothing about our queue.
            Ok((_, session_id)) if session_id != our_session.id => return Ok(WaitOutcome::SessionChanged),
            Ok((Ok((_, stat, watcher)), _)) => (watcher, stat.ephemeral_owner == our_session.id),
            // Gone before we could watch it, with an owner we cannot know: look again (below).
            Ok((Err(zk::Error::NoNode), _)) => return Ok(WaitOutcome::Relist),
            Ok((Err(e), _)) => {
                return match crate::error::classify(&e) {
                    ErrorKind::Retryable | ErrorKind::SessionLost => Ok(WaitOutcome::Relist),
                    _ => Err(Error::zk(&path, e)),
                }
            }
            Err(Error::DeadlineExceeded { .. }) => return Ok(WaitOutcome::DeadlinePassed),
            Err(Error::Closed { .. }) => return Ok(WaitOutcome::Closed),
            Err(e) => return Err(e),
        };
        // The deletion of the only node ahead grants us the lock without a second listing —
        // unless that node was of our own session: the server's close of our session deletes all
        // its nodes at once, ours too, and the event can arrive before we learn the session ended.
        // Then look again, as Curator always does.
        Ok(match self.wait_for_event(watcher, watching).await {
            WaitOutcome::Acquired if !acquired_when_deleted || ours => WaitOutcome::Relist,
            other => other,
        })
    }

    /// Waits for a watch to fire (a deletion counts as `Acquired`, anything else as `Relist`), a
    /// change of the lease count (`Relist`), the deadline, or the end of our session.
    async fn wait_for_event(&self, watcher: zk::OneshotWatcher, watching: Watching<'_>) -> WaitOutcome {
        let mut status = self.client.status();
        let session_ended = status.wait_for(|s| s.has_ended(watching.session));
        tokio::select! {
            _ = watching.max_leases.changed() => WaitOutcome::Relist,
            event = watcher.changed() => {
                if event.event_type == zk::EventType::NodeDeleted {
                    WaitOutcome::Acquired
                } else {
                    WaitOutcome::Relist
                }
            },
            ended = session_ended => match ended {
                Ok(s) if !s.closed => WaitOutcome::SessionChanged,
                _ => WaitOutcome::Closed,
            },
            _ = sleep_until_opt(watching.deadline) => WaitOutcome::DeadlinePassed,
        }
    }
}

async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d.into()).await,
        None => std::future::pending::<()>().await,
    }
}

#[cfg(all(test, feature = "testing"))]
pub(crate) mod tests {
    use super::*;
    use crate::locks::driver::StandardLockDriver;
    use crate::metrics::Recipe;
    use crate::testing::TestingServer;

    /// A server, a client of it, and a mutex's lock engine on `path` (with its labels' path).
    pub(crate) async fn mutex_internals(
        path: &str,
    ) -> (TestingServer, CuratorClient, LockInternals<StandardLockDriver>, Arc<str>) {
        let server = TestingServer::start().await.expect("ZooKeeper for tests");
        let client = CuratorClient::builder(&server.connect_string())
            .session_timeout(Duration::from_secs(10))
            .connect()
            .await
            .unwrap();
        let labels = client.lock_labels(Recipe::Mutex, path);
        let shared = labels.shared_path().clone();
        let internals = LockInternals::new(&client, path, StandardLockDriver::default(), 1, labels).unwrap();
        (server, client, internals, shared)
    }

    /// Programs make a lock instance per task (10,000 waiting tasks: 10,000 instances): each keeps
    /// its path once, shared by its labels, its base path and (without a namespace) the path it
    /// sends.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lock_instance_keeps_its_path_once() {
        let path = "/locks/one-path";
        let (_server, client, internals, shared) = mutex_internals(path).await;
        assert!(Arc::ptr_eq(&internals.base, &shared), "the base path is the labels' path");
        assert!(Arc::ptr_eq(&internals.fixed_base, &shared), "without a namespace, the path sent is the same");
        assert_eq!(internals.base_path(), path);
        client.close().await;
    }
}
