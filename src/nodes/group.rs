//! [`GroupMember`] (Curator's `GroupMember`): membership of a group, each member an ephemeral
//! node `<path>/<memberId>` holding the member's data, and the members seen by watching them.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tracing::debug;

use super::persistent::{NodeState, PersistentNode};
use crate::deadline::deadline_after;
use crate::error::{Error, ErrorCode, Result};
use crate::feed::WatchChanges;
use crate::framework::{backoff::Backoff, paths};
use crate::shared::value::reconnected;
use crate::{CreateMode, CuratorClient};

/// The members of a group: id → data.
type Members = BTreeMap<String, Vec<u8>>;

/// A change of a group's membership, as a [`MembershipStream`] reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MembershipEvent {
    /// A member joined, with its data.
    Joined {
        /// The member id.
        id: String,
        /// Its data.
        data: Vec<u8>,
    },
    /// A member left (closed, or its session ended).
    Left {
        /// The member id.
        id: String,
    },
    /// A member's data changed.
    DataChanged {
        /// The member id.
        id: String,
        /// Its new data.
        data: Vec<u8>,
    },
}

/// Membership of a group, wire-compatible with Curator's `GroupMember`: this member is an
/// EPHEMERAL node `<path>/<id>` holding its data, kept by a [`PersistentNode`] (re-created after
/// a session loss or a delete by someone else); the group is every child of `<path>`, followed by
/// a watch on the children and on each member's data (re-armed after every change, reconnection
/// and new session).
///
/// [`current_members`](Self::current_members) is the group as last seen (this member included,
/// with its own data, as Curator does), [`changes`](Self::changes) a stream of joins, leaves and
/// data changes.
///
/// A cheap [`Clone`] shares one member: closing through any clone closes it for all. Dropping the
/// last clone of a started member leaves the group: its node is deleted in the background. Prefer
/// [`close`](Self::close), which waits for the delete.
#[derive(Clone)]
pub struct GroupMember {
    node: PersistentNode,
    id: String,
    path: String,
    client: CuratorClient,
    members: Arc<watch::Sender<Members>>,
    follower: Arc<super::HelperTask>,
}

impl std::fmt::Debug for GroupMember {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupMember").field("path", &self.path).field("id", &self.id).finish_non_exhaustive()
    }
}

impl GroupMember {
    /// Membership of the group at `path` as `id`, holding `data`. Not started: see
    /// [`start`](Self::start).
    ///
    /// # Errors
    /// [`Error::InvalidPath`] naming `path`; [`Error::InvalidArgument`] naming `member id` when
    /// `id` is not a valid node name (empty, `.`, `..`, containing `/`), or naming the data's size
    /// when over the client's max data size.
    pub fn new(client: &CuratorClient, path: &str, id: &str, data: impl Into<Vec<u8>>) -> Result<Self> {
        paths::validate_path(path)?;
        paths::validate_node_name("member id", id)?;
        let member = paths::join(path, id);
        let node = PersistentNode::build(
            client,
            &member,
            CreateMode::Ephemeral,
            false,
            data.into(),
            true,
            // By the group: a label per member id would be a series per process start.
            client.recipe_labels("group_member", path),
        )?;
        Ok(Self {
            node,
            id: id.to_string(),
            path: path.to_string(),
            client: client.clone(),
            members: Arc::new(watch::Sender::new(Members::new())),
            follower: Arc::default(),
        })
    }

    /// The group path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// This member's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Where this member is in its life.
    pub fn state(&self) -> NodeState {
        self.node.state()
    }

    /// Joins the group and starts following it (on the client's runtime).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if already started or closed.
    pub fn start(&self) -> Result<()> {
        self.node.start()?;
        let follow = follow(self.client.clone(), self.path.clone(), self.members.clone());
        *self.follower.lock() = Some(self.client.runtime().spawn(follow));
        Ok(())
    }

    /// Sets this member's data (Curator's `setThisData`): written to its node, and used for
    /// every re-creation.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming its size when over the client's max data size.
    pub fn set_this_data(&self, data: impl Into<Vec<u8>>) -> Result<()> {
        self.node.set_data(data)
    }

    /// The group as last seen: member id → data (Curator's `getCurrentMembers`). This member is
    /// always in it, with its latest data, while started.
    pub fn current_members(&self) -> BTreeMap<String, Vec<u8>> {
        let mut members = self.members.borrow().clone();
        if self.node.state() == NodeState::Started {
            members.insert(self.id.clone(), self.node.data());
        } else {
            // Closed (or not started): our node is not ours to list, whatever was last seen.
            members.remove(&self.id);
        }
        members
    }

    /// Waits until this member's node exists and the group as read includes it: `Ok(true)`, or
    /// `Ok(false)` when `timeout` passed first. Returns within `timeout` whatever the connection
    /// does.
    ///
    /// # Errors
    /// As [`PersistentNode::wait_for_initial_create`].
    ///
    /// # Cancel safety
    /// Cancel safe: it only watches.
    ///
    /// # Examples
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// let member = zk_curator::nodes::GroupMember::new(&client, "/groups/workers", "w1", b"10.0.0.7".to_vec())?;
    /// member.start()?;
    /// if member.wait_for_initial_create(Duration::from_secs(5)).await? {
    ///     println!("members: {:?}", member.current_members().keys());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn wait_for_initial_create(&self, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let timeout = timeout.into().remaining();
        let deadline = deadline_after(timeout);
        if !self.node.wait_for_initial_create(timeout).await? {
            return Ok(false);
        }
        let mut members = self.members.subscribe();
        let waited = tokio::time::timeout_at(deadline.into(), members.wait_for(|m| m.contains_key(&self.id))).await;
        Ok(matches!(waited, Ok(Ok(_))))
    }

    /// The membership changes as a stream: each call of [`next`](MembershipStream::next) returns
    /// the changes since the group it last saw (the group when the stream was made, at first).
    /// Changes in between may be coalesced (a member that joins and leaves at once may not be
    /// seen); the group it converges on is never missed.
    pub fn changes(&self) -> MembershipStream {
        let mut members = self.members.subscribe();
        let seen = members.borrow_and_update().clone();
        MembershipStream { members: WatchChanges::new(members), seen, pending: Default::default() }
    }

    /// Leaves the group (Curator's `close`): deletes this member's node — exactly the node it
    /// created — and stops following the group. Waits for the delete as
    /// [`PersistentNode::close`] does. Once closed, [`current_members`](Self::current_members)
    /// no longer lists this member, and its [`changes`](Self::changes) streams report its own
    /// `Left`, then nothing more (the group is no longer followed).
    ///
    /// # Errors
    /// As [`PersistentNode::close`].
    ///
    /// # Cancel safety
    /// Cancel safe: closed at the first poll; the delete goes on in the background.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(member: zk_curator::nodes::GroupMember) -> zk_curator::Result<()> {
    /// member.close().await?;
    /// # Ok(()) }
    /// ```
    pub async fn close(&self) -> Result<()> {
        if let Some(follower) = self.follower.lock().take() {
            follower.abort();
        }
        let closed = self.node.close().await;
        // The follower is stopped: tell the stream our own node left (it was deleted, or its
        // delete goes on in the background).
        self.members.send_if_modified(|members| members.remove(&self.id).is_some());
        closed
    }
}

/// The changes of a group's membership ([`GroupMember::changes`]), a
/// [`Stream`](futures_core::Stream) of [`MembershipEvent`]s: [`next`](Self::next) is the same as
/// `StreamExt::next`.
///
/// Bounded by the group, not by the rate of changes: it keeps the group it last reported and
/// diffs it against the group now, so a slow reader gets the net changes (a member that joined
/// and left between two reads is not reported) and never misses the group it converges on.
///
/// ```no_run
/// # async fn demo(member: zk_curator::nodes::GroupMember) {
/// use futures::StreamExt;
/// use zk_curator::nodes::MembershipEvent;
///
/// let mut joins = member.changes().filter(|e| std::future::ready(matches!(e, MembershipEvent::Joined { .. })));
/// while let Some(joined) = joins.next().await {
///     println!("{joined:?}");
/// }
/// # }
/// ```
pub struct MembershipStream {
    members: WatchChanges<Members>,
    seen: Members,
    pending: std::collections::VecDeque<MembershipEvent>,
}

impl std::fmt::Debug for MembershipStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MembershipStream").field("seen", &self.seen.len()).finish_non_exhaustive()
    }
}

impl MembershipStream {
    /// The next change; `None` once the member is dropped. The same as `StreamExt::next`.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call loses nothing (the next call reports the changes since the
    /// group last returned).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(member: zk_curator::nodes::GroupMember) {
    /// let mut changes = member.changes();
    /// while let Some(change) = changes.next().await {
    ///     println!("{change:?}");
    /// }
    /// # }
    /// ```
    pub async fn next(&mut self) -> Option<MembershipEvent> {
        std::future::poll_fn(|cx| self.poll_change(cx)).await
    }

    fn poll_change(&mut self, cx: &mut Context<'_>) -> Poll<Option<MembershipEvent>> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Poll::Ready(Some(event));
            }
            let Some(members) = std::task::ready!(self.members.poll_changed(cx)) else {
                return Poll::Ready(None);
            };
            let now = members.borrow_and_update().clone();
            self.pending.extend(diff(&self.seen, &now));
            self.seen = now;
        }
    }
}

impl futures_core::Stream for MembershipStream {
    type Item = MembershipEvent;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<MembershipEvent>> {
        self.get_mut().poll_change(cx)
    }
}

/// The changes from `before` to `after`: leaves, then joins and data changes, by id.
fn diff(before: &Members, after: &Members) -> Vec<MembershipEvent> {
    let mut events: Vec<MembershipEvent> = before
        .keys()
        .filter(|id| !after.contains_key(*id))
        .map(|id| MembershipEvent::Left { id: id.clone() })
        .collect();
    for (id, data) in after {
        match before.get(id) {
            None => events.push(MembershipEvent::Joined { id: id.clone(), data: data.clone() }),
            Some(old) if old != data => {
                events.push(MembershipEvent::DataChanged { id: id.clone(), data: data.clone() })
            }
            Some(_) => {}
        }
    }
    events
}

/// Follows the group: lists the children (watching them), reads new members' data and the data
/// of members whose data watch fired (watching it), until aborted.
async fn follow(client: CuratorClient, path: String, members: Arc<watch::Sender<Members>>) {
    let fixed = client.fix_path(&path);
    let mut states = client.connection_states();
    let mut backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(2));
    // Members whose data watch fired: their data is read again.
    let (fired_tx, mut fired) = mpsc::unbounded_channel::<String>();
    let mut data_watches: BTreeMap<String, AbortOnDrop> = BTreeMap::new();
    let mut dirty = std::collections::BTreeSet::new();
    let mut all_dirty = true;
    loop {
        if client.is_closed() {
            return;
        }
        let f = fixed.as_str();
        let listed = client.with_retry(&path, None, |zk| async move { zk.list_and_watch_children(f).await }).await;
        let (children, children_watch) = match listed {
            Ok((children, watcher)) => (children, Some(watcher)),
            Err(e) if e.is(ErrorCode::NoNode) => {
                // No group yet: wait for the path to appear.
                match client.with_retry(&path, None, |zk| async move { zk.check_and_watch_stat(f).await }).await {
                    Ok((Some(_), _)) => continue,
                    Ok((None, watcher)) => (Vec::new(), Some(watcher)),
                    Err(Error::Closed { .. }) => return,
                    Err(e) => {
                        debug!(%e, %path, "watching the group path failed; again");
                        backoff.wait().await;
                        continue;
                    }
                }
            }
            Err(Error::Closed { .. }) => return,
            Err(e) => {
                debug!(%e, %path, "listing the group failed; again");
                backoff.wait().await;
                continue;
            }
        };
        let mut next = Members::new();
        let mut failed = false;
        for id in children {
            let known = members.borrow().get(&id).cloned();
            let watched = data_watches.get(&id).is_some_and(|w| !w.0.is_finished());
            let read_again = all_dirty || dirty.contains(&id) || !watched || known.is_none();
            if !read_again {
                next.insert(id.clone(), known.expect("known"));
                continue;
            }
            let member = paths::join(&fixed, &id);
            let m = member.as_str();
            match client.with_retry(&path, None, |zk| async move { zk.get_and_watch_data(m).await }).await {
                Ok((data, _, watcher)) => {
                    let tx = fired_tx.clone();
                    let name = id.clone();
                    let task = tokio::spawn(async move {
                        watcher.changed().await;
                        let _ = tx.send(name);
                    });
                    data_watches.insert(id.clone(), AbortOnDrop(task));
                    next.insert(id, data);
                }
                // Left between the listing and the read: the children watch tells.
                Err(e) if e.is(ErrorCode::NoNode) => {}
                Err(Error::Closed { .. }) => return,
                Err(e) => {
                    debug!(%e, %path, "reading a member failed; again");
                    failed = true;
                    break;
                }
            }
        }
        if failed {
            backoff.wait().await;
            continue;
        }
        data_watches.retain(|id, _| next.contains_key(id));
        dirty.clear();
        all_dirty = false;
        members.send_if_modified(|members| {
            let changed = *members != next;
            *members = next;
            changed
        });
        backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(2));
        let children_fired = async {
            match children_watch {
                Some(watcher) => {
                    watcher.changed().await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = children_fired => {}
            Some(id) = fired.recv() => {
                dirty.insert(id);
                while let Ok(id) = fired.try_recv() {
                    dirty.insert(id);
                }
            }
            _ = reconnected(&mut states) => all_dirty = true,
        }
    }
}

/// Aborts its task when dropped (with the follower, or when replaced).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diff_names_leaves_joins_and_data_changes() {
        let before: Members = [("a".into(), b"1".to_vec()), ("b".into(), b"2".to_vec())].into();
        let after: Members = [("b".into(), b"3".to_vec()), ("c".into(), b"4".to_vec())].into();
        assert_eq!(
            diff(&before, &after),
            vec![
                MembershipEvent::Left { id: "a".into() },
                MembershipEvent::DataChanged { id: "b".into(), data: b"3".to_vec() },
                MembershipEvent::Joined { id: "c".into(), data: b"4".to_vec() },
            ]
        );
    }
}
