//! [`DistributedDoubleBarrier`] (Curator's `DistributedDoubleBarrier`), reusable round after
//! round on one path.
//!
//! # Layout (Curator's)
//! Each member creates an EPHEMERAL `<path>/<uuid>`; the member that finds `member_count` of
//! them creates the persistent `<path>/ready`, which lets everyone in. Leaving deletes the
//! member's node and waits until the round's others are gone; the last one out deletes `ready`.
//! As in Curator, the member holding the lowest-named node deletes it last: Curator's leaving
//! members watch that node and take its deletion as "the others are gone" (a Curator member that
//! then finds a single node left leaves), so ours holding it keeps it until the round's other
//! members are gone.
//!
//! # Rounds on one path
//! Curator 5.4 cannot reuse a path: a member still leaving round R waits for every node it sees,
//! including those of members who already entered round R+1, and an entrant that finds round R's
//! `ready` still there walks straight in. Here a round is told apart by zxids:
//!
//! * the first member to leave *closes* the round: a versioned `setData` on `ready` (version
//!   0 → 1; Curator never looks at `ready`'s data). Its `mzxid` is the round's close.
//! * The round's members are exactly the member nodes created before the close (`czxid <
//!   mzxid`): an entrant only counts itself in when it finds `ready` open, or closed after its
//!   own node was created. A leaving member waits for those nodes only; nodes created after the
//!   close belong to the next round and are never waited for.
//! * An entrant that finds a closed `ready` created before its own node waits until the closed
//!   round's members are gone, deletes `ready` (only that one: same `czxid`) and counts again.
//!   So a round whose last members gave up leaving (timed out) never blocks the next.
//! * An entrant that finds an open `ready` created before its own node walks in late only
//!   while a node older than `ready` (a member that round counted) is still there; otherwise
//!   the round was abandoned (its members dropped, sessions lost) and the nodes there are the
//!   next round's, not yet counted: it deletes `ready` (version 0, same `czxid`) and counts.

use std::time::{Duration, Instant};

use tracing::debug;
use zookeeper_client as zk;

use super::{wake_up, Woken};
use crate::deadline::deadline_after;
use crate::error::{Error, ErrorCode, ErrorKind, Result};
use crate::framework::guaranteed_delete::DeleteTarget;
use crate::framework::paths;
use crate::framework::retry_loop::Retrying;
use crate::framework::SessionIdentity;
use crate::CuratorClient;

/// The name of the node whose presence lets a double barrier's members in (Curator's `READY_NODE`).
pub const READY_NODE_NAME: &str = "ready";

/// The data written into `ready` by the member that closes a round (first to leave).
const CLOSED_DATA: &[u8] = b"leaving";

/// This member's node, while it is in the barrier.
#[derive(Debug)]
struct Member {
    /// Namespace-fixed path.
    fixed: String,
    /// The node's name (a UUID).
    name: String,
    czxid: i64,
    session: SessionIdentity,
}

/// A double barrier (Curator's `DistributedDoubleBarrier`): `member_count` processes
/// [`enter`](Self::enter) — each waits until that many have entered — do their work, and
/// [`leave`](Self::leave) — each waits until all of them have left. As in Curator the count is a
/// threshold: more members may enter (a member arriving while the round is entered walks in).
///
/// Wire-compatible with Curator for a round: Curator and Rust members enter and leave one barrier
/// together. Unlike Curator 5.4 it can be used round after round on one path (see the module
/// documentation of `src/barriers/double_barrier.rs` and [docs/failure-semantics.md](crate::guide::failure_semantics)); when Curator
/// members take part, give each round a fresh path, since they do not know rounds.
///
/// One value is one member: `enter` then `leave`, any number of times. Dropping it while entered
/// deletes its node in the background (no runtime needed).
///
/// A member whose session is lost — expired, or given up by the client
/// ([`ConnectionState::Lost`](crate::ConnectionState::Lost), even before a new session is
/// connected) — has lost its node (it was ephemeral): its `enter` or `leave` returns a
/// [`SessionLost`](crate::ErrorKind::SessionLost) error
/// ([`ErrorCode::SessionExpired`](crate::ErrorCode::SessionExpired), naming the node), and the
/// others go on without it.
///
/// Not `Clone`: it is one member's place in the barrier (`enter`/`leave` take `&mut self`, and
/// a clone would be a second member counted once). Share it behind a `tokio::sync::Mutex`.
#[derive(Debug)]
pub struct DistributedDoubleBarrier {
    client: CuratorClient,
    path: String,
    fixed: String,
    ready: String,
    member_count: usize,
    member: Option<Member>,
    /// The barrier's node was there at this member's last create: no need to send its create.
    dir_seen: bool,
    /// `recipe="double_barrier"`.
    metrics: crate::metrics::RecipeLabels,
}

impl Drop for DistributedDoubleBarrier {
    fn drop(&mut self) {
        if let Some(member) = self.member.take() {
            debug!(node = %member.fixed, "double barrier dropped while entered: deleting its node in the background");
            drop(self.client.delete_fixed_in_background(member.fixed));
        }
    }
}

impl DistributedDoubleBarrier {
    /// A member of the double barrier at `path` for `member_count` members.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] naming the path; [`Error::InvalidArgument`] for a member count of 0
    /// or over `i32::MAX` (Curator's `int`).
    ///
    /// # Examples
    /// ```no_run
    /// # fn demo(client: &zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// let barrier = zk_curator::barriers::DistributedDoubleBarrier::new(client, "/barriers/batch", 4)?;
    /// # Ok(()) }
    /// ```
    pub fn new(client: &CuratorClient, path: &str, member_count: usize) -> Result<Self> {
        paths::validate_path(path)?;
        if member_count == 0 {
            return Err(Error::invalid_argument("member_count", 0, "a double barrier needs at least one member"));
        }
        if member_count > i32::MAX as usize {
            return Err(Error::invalid_argument(
                "member_count",
                member_count,
                "over i32::MAX (Curator's memberQty is an int)",
            ));
        }
        let fixed = client.fix_path(path);
        let ready = paths::join(&fixed, READY_NODE_NAME);
        // A member's node (a 36-character UUID) is the longest path the barrier sends.
        client.check_path_size(path, &paths::join(&fixed, &uuid::Uuid::nil().to_string()))?;
        Ok(Self {
            client: client.clone(),
            path: path.to_string(),
            fixed,
            ready,
            member_count,
            member: None,
            dir_seen: false,
            metrics: client.recipe_labels("double_barrier", path),
        })
    }

    /// The barrier's path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The number of members a round waits for.
    pub fn member_count(&self) -> usize {
        self.member_count
    }

    /// This member's node (as the caller sees paths), while it has entered and not left.
    pub fn member_node(&self) -> Option<&str> {
        self.member.as_ref().map(|m| self.client.unfix_path(&m.fixed))
    }

    /// Enters the barrier and waits until `member_count` members have entered (Curator's
    /// `enter()`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when this member has entered and not left;
    /// [`ErrorCode::SessionExpired`] (kind [`SessionLost`](crate::ErrorKind::SessionLost)) naming
    /// this member's node when its session was lost while waiting (the node went with it; call
    /// `enter` again to take part); server errors after the retry policy gave up;
    /// [`Error::Closed`].
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call leaves no node behind (its node, if made, is deleted in the
    /// background) and this member has not entered.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// let mut barrier = zk_curator::barriers::DistributedDoubleBarrier::new(&client, "/barriers/batch", 4)?;
    /// barrier.enter().await?;
    /// // ... all four are in: work ...
    /// barrier.leave().await?;
    /// # Ok(()) }
    /// ```
    pub async fn enter(&mut self) -> Result<()> {
        let metrics = self.metrics.clone();
        let timer = crate::metrics::BarrierTimer::start(&metrics, "enter");
        let entered = self.enter_until(None).await;
        timer.finish(&entered);
        entered.map(|_| ())
    }

    /// [`enter`](Self::enter) for at most `timeout` (Curator's `enter(maxWait, unit)`): `Ok(true)`
    /// once entered, `Ok(false)` when `timeout` passed first — then this member has not entered
    /// and its node is deleted (in the background). Returns within `timeout` whatever the
    /// connection does; `Duration::MAX` means "forever".
    ///
    /// # Errors
    /// As [`enter`](Self::enter).
    ///
    /// # Cancel safety
    /// As [`enter`](Self::enter).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(mut barrier: zk_curator::barriers::DistributedDoubleBarrier) -> zk_curator::Result<()> {
    /// use std::time::Duration;
    /// if !barrier.enter_timeout(Duration::from_secs(60)).await? {
    ///     println!("not enough members within a minute");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn enter_timeout(&mut self, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let timeout = timeout.into().remaining();
        let deadline = deadline_after(timeout);
        let metrics = self.metrics.clone();
        let timer = crate::metrics::BarrierTimer::start(&metrics, "enter");
        let done = match tokio::time::timeout_at(deadline.into(), self.enter_until(Some(deadline))).await {
            Ok(Err(Error::DeadlineExceeded { .. })) | Err(_) => Ok(false),
            Ok(result) => result,
        };
        timer.finish(&done);
        done
    }

    /// Leaves the barrier and waits until every member of this round has left (Curator's
    /// `leave()`); members who entered a next round meanwhile are not waited for. As in
    /// Curator, a member whose node is the round's lowest-named keeps it until the others are
    /// gone (Curator's members watch that node), then deletes it.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when this member has not entered;
    /// [`ErrorCode::SessionExpired`] naming this member's node when its session was lost since it
    /// entered and before its node was deleted (its node went with it: it has left, without
    /// waiting) — expired, or given up by the client ([`ConnectionState::Lost`](crate::ConnectionState::Lost)),
    /// also while the new session is not connected yet; server errors after the retry policy gave
    /// up; [`Error::Closed`].
    ///
    /// # Cancel safety
    /// Cancel safe: this member has left once the call started — a dropped call still deletes
    /// its node (in the background); only the wait for the others is cut short.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(mut barrier: zk_curator::barriers::DistributedDoubleBarrier) -> zk_curator::Result<()> {
    /// barrier.enter().await?;
    /// barrier.leave().await?;
    /// # Ok(()) }
    /// ```
    pub async fn leave(&mut self) -> Result<()> {
        let metrics = self.metrics.clone();
        let timer = crate::metrics::BarrierTimer::start(&metrics, "leave");
        let left = self.leave_until(None).await;
        timer.finish(&left);
        left.map(|_| ())
    }

    /// [`leave`](Self::leave) for at most `timeout` (Curator's `leave(maxWait, unit)`):
    /// `Ok(true)` once every member of the round has left, `Ok(false)` when `timeout` passed first
    /// (this member has left anyway; its node is deleted, in the background if need be). Returns
    /// within `timeout` whatever the connection does; `Duration::MAX` means "forever".
    ///
    /// # Errors
    /// As [`leave`](Self::leave).
    ///
    /// # Cancel safety
    /// As [`leave`](Self::leave).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(mut barrier: zk_curator::barriers::DistributedDoubleBarrier) -> zk_curator::Result<()> {
    /// use std::time::Duration;
    /// barrier.enter().await?;
    /// if !barrier.leave_timeout(Duration::from_secs(60)).await? {
    ///     println!("someone is still working after a minute");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn leave_timeout(&mut self, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let timeout = timeout.into().remaining();
        let deadline = deadline_after(timeout);
        let metrics = self.metrics.clone();
        let timer = crate::metrics::BarrierTimer::start(&metrics, "leave");
        let done = match tokio::time::timeout_at(deadline.into(), self.leave_until(Some(deadline))).await {
            Ok(Err(Error::DeadlineExceeded { .. })) | Err(_) => Ok(false),
            Ok(result) => result,
        };
        timer.finish(&done);
        done
    }

    fn node_path(&self, fixed: &str) -> String {
        self.client.unfix_path(fixed).to_string()
    }

    fn session_lost(&self, member: &Member) -> Error {
        Error::code_on(&self.node_path(&member.fixed), ErrorCode::SessionExpired)
    }

    /// `Ok` while this member's session is still the client's. Not once the client gave it up
    /// (`Lost`), even before the replacement connects: its node went, or goes, with it, and the
    /// others stop waiting for it.
    fn on_own_session(&self, client: &CuratorClient, member: &Member) -> Result<()> {
        if client.is_closed() {
            return Err(Error::Closed { path: self.path.clone() });
        }
        if client.session_ended(member.session) {
            return Err(self.session_lost(member));
        }
        Ok(())
    }

    async fn enter_until(&mut self, deadline: Option<Instant>) -> Result<bool> {
        if self.member.is_some() {
            return Err(Error::invalid_argument(
                "enter",
                &self.path,
                "this member has entered the barrier and not left it; call leave() first",
            ));
        }
        let client = self.client.clone();
        let mut retrying = client.retrying(&self.path, deadline);
        let mut cleanup = client.delete_on_drop(DeleteTarget::Node(String::new()));
        cleanup.disarm();
        // Taken before each look whose watch is waited for (the first is create_member's).
        let mut status = client.status();
        let (member, mut first) = self.create_member(&client, &mut retrying, &mut cleanup, deadline).await?;
        self.dir_seen = true;
        let ready = self.ready.as_str();
        loop {
            self.on_own_session(&client, &member)?;
            let (stat, watcher, children) = match first.take() {
                Some(seen) => seen,
                None => {
                    status = client.status();
                    let (zk, session) = match client.connected(&self.path, deadline).await {
                        Ok(current) => current,
                        Err(e) => {
                            retrying.backoff_or_fail(e).await?;
                            continue;
                        }
                    };
                    if session != member.session {
                        return Err(self.session_lost(&member));
                    }
                    // One pipeline: the watch on `ready` and the listing.
                    let looked = zk.check_and_watch_stat(ready);
                    let listed = zk.list_children(&self.fixed);
                    match within(deadline, async { Ok((looked.await?, listed.await?)) }).await {
                        Ok(((stat, watcher), children)) => (stat, watcher, children),
                        Err(zk::Error::Timeout) if retrying.expired() => return Ok(false),
                        Err(e) => {
                            retrying.backoff_or_fail(Error::zk(&self.path, e)).await?;
                            continue;
                        }
                    }
                }
            };
            let others = children.iter().any(|c| c != READY_NODE_NAME && *c != member.name);
            match stat {
                // Open, made before our node, and nobody else is there: its members all went
                // without leaving (dropped, sessions lost). Cleared away while still open (version
                // 0), then we count. One made after our node is our round's, even when the others
                // have already gone again: we were counted in it.
                Some(stale) if stale.version == 0 && !others && stale.czxid < member.czxid => {
                    drop(watcher);
                    self.delete_ready_of(&client, stale.czxid, Some(0), deadline).await?;
                }
                // Open, made after our node: our round (we were there when it was counted).
                // Open, made before our node: we walk in late only while one of the round's
                // members (a node older than `ready`) is still there; otherwise its members all
                // went without leaving and the nodes here are the next round's entrants, not
                // yet counted: cleared away while still open, then we count.
                Some(open) if open.version == 0 => {
                    if member.czxid < open.czxid
                        || self.round_member_present(&client, &children, &member.name, open.czxid, deadline).await?
                    {
                        break;
                    }
                    drop(watcher);
                    self.delete_ready_of(&client, open.czxid, Some(0), deadline).await?;
                }
                // Closed after our node was made: our round.
                Some(ready) if member.czxid < ready.mzxid => break,
                // A previous round, leaving: wait until its members are gone, then clear it away.
                Some(closed) => {
                    drop(watcher);
                    self.wait_round_over(&client, closed.mzxid, None, deadline).await?;
                    self.delete_ready_of(&client, closed.czxid, None, deadline).await?;
                }
                None => {
                    if !children.contains(&member.name) {
                        // Deleted by someone else (or with a session we have not heard is gone).
                        return Err(Error::code_on(&self.node_path(&member.fixed), ErrorCode::NoNode));
                    }
                    let count = children.iter().filter(|c| *c != READY_NODE_NAME).count();
                    if count >= self.member_count {
                        drop(watcher);
                        let acls = client.raw_acls_for(ready);
                        let options = zk::CreateMode::Persistent.with_acls(zk::Acls::new(&acls));
                        let data = client.default_data();
                        let made = client
                            .with_retry(&self.path, deadline, |zk| {
                                let options = &options;
                                async move { zk.create(ready, data, options).await }
                            })
                            .await;
                        match made {
                            // Created after our node, version 0: our round.
                            Ok(_) => break,
                            // Someone else's: look at it.
                            Err(e) if e.is(ErrorCode::NodeExists) => {}
                            Err(e) => return Err(e),
                        }
                        continue;
                    }
                    match wake_up(&mut status, watcher, deadline).await {
                        // `ready` was created after our watch, which was set after our node
                        // was made (one session, in order): created for a round we are in. No
                        // other wake-up lets us in: we look again.
                        Woken::Event(event) if event.event_type == zk::EventType::NodeCreated => break,
                        Woken::Deadline => return Ok(false),
                        Woken::Event(_) | Woken::Status => {}
                    }
                }
            }
        }
        cleanup.disarm();
        self.member = Some(member);
        Ok(true)
    }

    /// Creates this member's node, with the watch on `ready` and the listing of the barrier in
    /// the same pipeline (they see the node: one session answers in order). `cleanup` is
    /// armed for the node from before the create on.
    #[allow(clippy::type_complexity)]
    async fn create_member(
        &self,
        client: &CuratorClient,
        retrying: &mut Retrying<'_>,
        cleanup: &mut crate::framework::guaranteed_delete::DeleteOnDrop<'_>,
        deadline: Option<Instant>,
    ) -> Result<(Member, Option<(Option<zk::Stat>, zk::OneshotWatcher, Vec<String>)>)> {
        let data = client.default_data();
        let mut name = uuid::Uuid::new_v4().to_string();
        let mut node = paths::join(&self.fixed, &name);
        let acls = client.raw_acls_for(&node);
        let options = zk::CreateMode::Ephemeral.with_acls(zk::Acls::new(&acls));
        let mut parent_rounds = 0u32;
        let mut lookup = false;
        loop {
            if retrying.expired() {
                return Err(retrying.deadline_exceeded("entering"));
            }
            cleanup.retarget(DeleteTarget::Node(node.clone()));
            let (zk, session) = match client.connected(&self.path, deadline).await {
                Ok(current) => current,
                Err(e) => {
                    retrying.backoff_or_fail(e).await?;
                    continue;
                }
            };
            if lookup {
                // Did the create whose reply was lost happen? The name is ours alone.
                match within(deadline, zk.check_stat(&node)).await {
                    Ok(Some(stat)) if stat.ephemeral_owner == session.id => {
                        let member = Member { fixed: node, name, czxid: stat.czxid, session };
                        return Ok((member, None));
                    }
                    Ok(Some(_)) => {
                        // Made on a session given up since; not ours to count on. Deleted in
                        // the background; a fresh name for this session.
                        drop(cleanup.queue_now());
                        name = uuid::Uuid::new_v4().to_string();
                        node = paths::join(&self.fixed, &name);
                        cleanup.retarget(DeleteTarget::Node(node.clone()));
                    }
                    Ok(None) => {}
                    Err(zk::Error::Timeout) if retrying.expired() => {
                        return Err(retrying.deadline_exceeded("entering"));
                    }
                    Err(e) => {
                        retrying.backoff_or_fail(Error::zk(&self.path, e)).await?;
                        continue;
                    }
                }
                lookup = false;
            }
            // The barrier's node, first, in the same pipeline when this member has not seen it
            // yet (a fresh path per round): made or already there, the member's create follows
            // in the same round trip. Missing ancestors fail both, and are made below.
            if !self.dir_seen && parent_rounds == 0 {
                let acls = client.raw_acls_for(&self.fixed);
                let dir_options = client.parent_mode().with_acls(zk::Acls::new(&acls));
                drop(zk.create(&self.fixed, &[], &dir_options));
            }
            // Three requests queued now, in this order: one pipeline.
            let create = zk.create(&node, data, &options);
            let looked = zk.check_and_watch_stat(&self.ready);
            let listed = zk.list_children(&self.fixed);
            match within(deadline, create).await {
                Ok((stat, _)) => {
                    let member = Member { fixed: node, name, czxid: stat.czxid, session };
                    let seen = within(deadline, async { Ok((looked.await?, listed.await?)) }).await;
                    let first = seen.ok().map(|((stat, watcher), children)| (stat, watcher, children));
                    return Ok((member, first));
                }
                Err(zk::Error::NoNode) if parent_rounds < 5 => {
                    parent_rounds += 1;
                    match client.create_parents(&self.fixed, deadline).await {
                        // An ancestor vanished under us (container reaped): next round.
                        Ok(()) | Err(Error::ZooKeeper { code: ErrorCode::NoNode, .. }) => {}
                        Err(e) => return Err(e),
                    }
                }
                Err(zk::Error::Timeout) if retrying.expired() => {
                    return Err(retrying.deadline_exceeded("entering"));
                }
                Err(e) if matches!(crate::error::classify(&e), ErrorKind::Retryable | ErrorKind::SessionLost) => {
                    lookup = true;
                    retrying.backoff_or_fail(Error::zk(&self.path, e)).await?;
                }
                Err(e) => {
                    // Refused: no node was made.
                    cleanup.disarm();
                    return Err(Error::zk(&self.path, e));
                }
            }
        }
    }

    async fn leave_until(&mut self, deadline: Option<Instant>) -> Result<bool> {
        let Some(member) = self.member.take() else {
            return Err(Error::invalid_argument("leave", &self.path, "this member has not entered the barrier"));
        };
        let client = self.client.clone();
        // From here on this member has left: its node goes whatever happens to this call.
        let mut cleanup = client.delete_on_drop(DeleteTarget::Node(member.fixed.clone()));
        self.on_own_session(&client, &member)?;
        // Until our node is deleted, a session lost meanwhile is told as such, whatever the step
        // that failed said: the node went with it, the others stopped waiting for us.
        let (round, lowest) = match self.close_round(&client, &member, deadline).await {
            Ok(found) => found,
            Err(e) => {
                self.on_own_session(&client, &member)?;
                return Err(e);
            }
        };
        // No `ready` while our node was there: a Curator member of this round deleted it (it
        // does so when one node is left). Every node there now is waited for, as Curator does.
        let closed_at = round.map_or(i64::MAX, |(_, closed_at)| closed_at);
        if lowest {
            let waited = self.wait_round_over(&client, closed_at, Some(&member), deadline).await;
            self.on_own_session(&client, &member)?;
            waited?;
            cleanup.disarm();
            client.delete_fixed_guaranteed(&member.fixed, deadline).await?;
        } else {
            self.on_own_session(&client, &member)?;
            cleanup.disarm();
            client.delete_fixed_guaranteed(&member.fixed, deadline).await?;
            self.wait_round_over(&client, closed_at, None, deadline).await?;
        }
        if let Some((ready_czxid, _)) = round {
            self.delete_ready_of(&client, ready_czxid, None, deadline).await?;
        }
        Ok(true)
    }

    /// The first steps of leaving, before this member's node goes: closes the round (the
    /// first to leave does) and returns it — its `ready` (by czxid) and its close (the mzxid of
    /// the close), `None` when `ready` is gone — and whether our node is the round's lowest.
    ///
    /// Curator's leave protocol: the lowest-named member node goes last. Curator's members watch
    /// it and take its deletion as "the others are gone": one that looks again and finds a
    /// single node left leaves. So when ours is the lowest node of the round, it stays until the
    /// round's other members are gone; otherwise it goes now.
    async fn close_round(
        &self,
        client: &CuratorClient,
        member: &Member,
        deadline: Option<Instant>,
    ) -> Result<(Option<(i64, i64)>, bool)> {
        let ready = self.ready.as_str();
        let stat = client.with_retry(&self.path, deadline, |zk| async move { zk.check_stat(ready).await }).await?;
        let round = match stat {
            Some(open) if open.version == 0 => {
                let closed = client
                    .with_retry(
                        &self.path,
                        deadline,
                        |zk| async move { zk.set_data(ready, CLOSED_DATA, Some(0)).await },
                    )
                    .await;
                match closed {
                    Ok(stat) => Some((stat.czxid, stat.mzxid)),
                    // Closed by another member (or by our own attempt whose reply was lost).
                    Err(e) if e.is(ErrorCode::BadVersion) => client
                        .with_retry(&self.path, deadline, |zk| async move { zk.check_stat(ready).await })
                        .await?
                        .map(|s| (s.czxid, s.mzxid)),
                    Err(e) if e.is(ErrorCode::NoNode) => None,
                    Err(e) => return Err(e),
                }
            }
            Some(closed) => Some((closed.czxid, closed.mzxid)),
            None => None,
        };
        let closed_at = round.map_or(i64::MAX, |(_, closed_at)| closed_at);
        let lowest = self.lowest_of_round(client, &member.name, closed_at, deadline).await?;
        Ok((round, lowest))
    }

    /// Whether `own` is the lowest-named member node of the round closed at `closed_at` (Curator's
    /// order: names compared as strings, `ready` left out): no node named lower than it and
    /// created before the close is there.
    async fn lowest_of_round(
        &self,
        client: &CuratorClient,
        own: &str,
        closed_at: i64,
        deadline: Option<Instant>,
    ) -> Result<bool> {
        let fixed = self.fixed.as_str();
        let children =
            match client.with_retry(&self.path, deadline, |zk| async move { zk.list_children(fixed).await }).await {
                Ok(children) => children,
                Err(e) if e.is(ErrorCode::NoNode) => return Ok(true),
                Err(e) => return Err(e),
            };
        let lower: Vec<String> = children
            .iter()
            .filter(|c| *c != READY_NODE_NAME && c.as_str() < own)
            .map(|c| paths::join(fixed, c))
            .collect();
        if lower.is_empty() {
            return Ok(true);
        }
        let stats = self.stats_of(client, &lower, deadline).await?;
        Ok(!stats.iter().flatten().any(|s| s.czxid < closed_at))
    }

    /// The stats of `nodes` (None for a node that is not there), looked at in one pipeline.
    async fn stats_of(
        &self,
        client: &CuratorClient,
        nodes: &[String],
        deadline: Option<Instant>,
    ) -> Result<Vec<Option<zk::Stat>>> {
        client
            .with_retry(&self.path, deadline, |zk| async move {
                let looked: Vec<_> = nodes.iter().map(|n| zk.check_stat(n)).collect();
                let mut stats = Vec::with_capacity(looked.len());
                for l in looked {
                    stats.push(l.await?);
                }
                Ok(stats)
            })
            .await
    }

    /// Waits until no member node created before `closed_at` (a round's close) other than
    /// `own`'s (the lowest member's, still there) is left. With `own`, a session of its that
    /// ended meanwhile ends the wait at once ([`ErrorCode::SessionExpired`]).
    async fn wait_round_over(
        &self,
        client: &CuratorClient,
        closed_at: i64,
        own: Option<&Member>,
        deadline: Option<Instant>,
    ) -> Result<()> {
        let fixed = self.fixed.as_str();
        let except = own.map(|member| member.name.as_str());
        let children =
            match client.with_retry(&self.path, deadline, |zk| async move { zk.list_children(fixed).await }).await {
                Ok(children) => children,
                Err(e) if e.is(ErrorCode::NoNode) => return Ok(()),
                Err(e) => return Err(e),
            };
        let mut waiting: Vec<String> = children
            .into_iter()
            .filter(|c| c != READY_NODE_NAME && Some(c.as_str()) != except)
            .map(|c| paths::join(fixed, &c))
            .collect();
        let mut first_look = true;
        while !waiting.is_empty() {
            // The first is watched; every one is looked at, in one pipeline.
            let nodes = waiting.as_slice();
            let mut status = client.status();
            let looked = client
                .with_retry(&self.path, deadline, |zk| async move {
                    let watched = zk.check_and_watch_stat(&nodes[0]);
                    let rest: Vec<_> = nodes[1..].iter().map(|n| zk.check_stat(n)).collect();
                    let (stat, watcher) = watched.await?;
                    let mut stats = vec![stat];
                    for r in rest {
                        stats.push(r.await?);
                    }
                    Ok((stats, watcher))
                })
                .await?;
            let (stats, watcher) = looked;
            let round_member = |stat: &Option<zk::Stat>| stat.as_ref().is_some_and(|s| s.czxid < closed_at);
            let first_waits = round_member(&stats[0]);
            let mut stats = stats.iter();
            waiting.retain(|_| stats.next().is_some_and(round_member));
            if first_look {
                first_look = false;
                debug!(path = %self.path, left = waiting.len(), "waiting for the round's members to leave");
            }
            if !first_waits {
                continue;
            }
            // Our own node still there (the lowest waits for the others): a session that ended
            // meanwhile (also while the look above was retried onto a new session) took it, so
            // we have left — told now, not once the others are gone.
            if let Some(member) = own {
                self.on_own_session(client, member)?;
            }
            // Any wake-up leads to a fresh look; only the nodes themselves end the wait.
            if let Woken::Deadline = wake_up(&mut status, watcher, deadline).await {
                return Err(Error::deadline_exceeded(&self.path, "waiting for the members to leave", Duration::ZERO));
            }
        }
        Ok(())
    }

    /// Whether a node among `children` other than `own` (and `ready`) was created before
    /// `ready_czxid`: a member of the round that `ready` let in.
    async fn round_member_present(
        &self,
        client: &CuratorClient,
        children: &[String],
        own: &str,
        ready_czxid: i64,
        deadline: Option<Instant>,
    ) -> Result<bool> {
        let others: Vec<String> = children
            .iter()
            .filter(|c| *c != READY_NODE_NAME && *c != own)
            .map(|c| paths::join(&self.fixed, c))
            .collect();
        if others.is_empty() {
            return Ok(false);
        }
        let stats = self.stats_of(client, &others, deadline).await?;
        Ok(stats.iter().flatten().any(|s| s.czxid < ready_czxid))
    }

    /// Deletes `ready` if it is still the one created at `czxid` (and, with `open`, still at that
    /// version: not closed meanwhile).
    async fn delete_ready_of(
        &self,
        client: &CuratorClient,
        czxid: i64,
        open: Option<i32>,
        deadline: Option<Instant>,
    ) -> Result<()> {
        let ready = self.ready.as_str();
        let Some(stat) =
            client.with_retry(&self.path, deadline, |zk| async move { zk.check_stat(ready).await }).await?
        else {
            return Ok(());
        };
        if stat.czxid != czxid {
            return Ok(());
        }
        let version = open.unwrap_or(stat.version);
        match client.with_retry(&self.path, deadline, |zk| async move { zk.delete(ready, Some(version)).await }).await {
            Ok(()) => Ok(()),
            Err(e) if e.is(ErrorCode::NoNode) || e.is(ErrorCode::BadVersion) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// `op` until `deadline` (a deadline passing reads as `zk::Error::Timeout`).
async fn within<T>(
    deadline: Option<Instant>,
    op: impl std::future::Future<Output = std::result::Result<T, zk::Error>>,
) -> std::result::Result<T, zk::Error> {
    match deadline {
        Some(d) => tokio::time::timeout_at(d.into(), op).await.unwrap_or(Err(zk::Error::Timeout)),
        None => op.await,
    }
}
