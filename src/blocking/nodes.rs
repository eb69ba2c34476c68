//! [`PersistentNode`], [`PersistentTtlNode`] and [`GroupMember`]: the blocking nodes kept present
//! while started, and [`MembershipChanges`], the blocking iterator of a group's changes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::{Core, CuratorClient};
use crate::error::Result;
use crate::nodes::{MembershipEvent, NodeState, Protection};
use crate::CreateMode;

/// A blocking [`PersistentNode`](crate::nodes::PersistentNode): the same node (Curator's
/// `PersistentNode`), its background work on the client's runtime thread, waited for on the
/// calling thread. Dropping a started node — on any thread — deletes it in the background.
///
/// # Examples
/// ```no_run
/// use std::time::Duration;
/// use zk_curator::blocking::{CuratorClient, PersistentNode};
/// use zk_curator::CreateMode;
/// use zk_curator::nodes::Protection;
///
/// fn register() -> zk_curator::Result<()> {
///     let client = CuratorClient::connect("127.0.0.1:2181")?;
///     let node = PersistentNode::new(&client, "/services/api/host-a", CreateMode::Ephemeral, Protection::Unprotected, b"10.0.0.7:8080".to_vec())?;
///     node.start()?;
///     node.wait_for_initial_create(Duration::from_secs(5))?;
///     // ... serve ...
///     node.close()
/// }
/// ```
///
/// A cheap [`Clone`] shares one instance, as the async [`PersistentNode`](crate::nodes::PersistentNode) does.
#[derive(Clone, Debug)]
pub struct PersistentNode {
    // Dropped before `core`: its drop hands the node to the client's background deletes.
    inner: crate::nodes::PersistentNode,
    core: Arc<Core>,
}

impl PersistentNode {
    /// See [`PersistentNode::new`](crate::nodes::PersistentNode::new).
    ///
    /// # Errors
    /// As [`PersistentNode::new`](crate::nodes::PersistentNode::new).
    pub fn new(
        client: &CuratorClient,
        path: &str,
        mode: CreateMode,
        protection: Protection,
        data: impl Into<Vec<u8>>,
    ) -> Result<Self> {
        let inner = crate::nodes::PersistentNode::new(client.core().client(), path, mode, protection, data)?;
        Ok(Self { inner, core: client.core().clone() })
    }

    /// The path asked for.
    pub fn path(&self) -> &str {
        self.inner.path()
    }

    /// Where the node is in its life.
    pub fn state(&self) -> NodeState {
        self.inner.state()
    }

    /// The path of the node now kept, `None` while it is being (re-)created or once closed.
    pub fn actual_path(&self) -> Option<String> {
        self.inner.actual_path()
    }

    /// The data the node is (re-)created with.
    pub fn data(&self) -> Vec<u8> {
        self.inner.data()
    }

    /// Starts keeping the node (in the background; does not wait).
    ///
    /// # Errors
    /// As [`PersistentNode::start`](crate::nodes::PersistentNode::start).
    pub fn start(&self) -> Result<()> {
        self.inner.start()
    }

    /// Sets the node's data (applied in the background).
    ///
    /// # Errors
    /// As [`PersistentNode::set_data`](crate::nodes::PersistentNode::set_data).
    pub fn set_data(&self, data: impl Into<Vec<u8>>) -> Result<()> {
        self.inner.set_data(data)
    }

    /// Waits until the node was created once: `Ok(false)` when `timeout` passed first. Returns
    /// within `timeout` whatever the connection does.
    ///
    /// # Errors
    /// As [`PersistentNode::wait_for_initial_create`](crate::nodes::PersistentNode::wait_for_initial_create);
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `runtime` inside a tokio runtime context.
    pub fn wait_for_initial_create(&self, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let timeout = timeout.into().remaining();
        self.core.block_on(self.inner.wait_for_initial_create(timeout))?
    }

    /// Stops keeping the node and deletes exactly it, waiting for the delete.
    ///
    /// # Errors
    /// As [`PersistentNode::close`](crate::nodes::PersistentNode::close); [`Error::InvalidArgument`](crate::Error::InvalidArgument)
    /// naming `runtime` inside a tokio runtime context (dropping the node closes it in the
    /// background).
    pub fn close(&self) -> Result<()> {
        self.core.block_on(self.inner.close())?
    }
}

/// A blocking [`PersistentTtlNode`](crate::nodes::PersistentTtlNode) (Curator's `PersistentTtlNode`: a
/// container with a `touch` TTL child touched every half TTL).
///
/// # Examples
/// ```no_run
/// use std::time::Duration;
/// use zk_curator::blocking::{CuratorClient, PersistentTtlNode};
///
/// fn announce() -> zk_curator::Result<()> {
///     let client = CuratorClient::connect("127.0.0.1:2181")?;
///     let node = PersistentTtlNode::new(&client, "/workers/w1", Duration::from_secs(30), b"busy".to_vec())?;
///     node.start()?;
///     node.wait_for_initial_create(Duration::from_secs(5))?;
///     node.close()
/// }
/// ```
///
/// A cheap [`Clone`] shares one instance, as the async [`PersistentTtlNode`](crate::nodes::PersistentTtlNode) does.
#[derive(Clone, Debug)]
pub struct PersistentTtlNode {
    inner: crate::nodes::PersistentTtlNode,
    core: Arc<Core>,
}

impl PersistentTtlNode {
    /// See [`PersistentTtlNode::new`](crate::nodes::PersistentTtlNode::new).
    ///
    /// # Errors
    /// As [`PersistentTtlNode::new`](crate::nodes::PersistentTtlNode::new).
    pub fn new(client: &CuratorClient, path: &str, ttl: Duration, data: impl Into<Vec<u8>>) -> Result<Self> {
        let inner = crate::nodes::PersistentTtlNode::new(client.core().client(), path, ttl, data)?;
        Ok(Self { inner, core: client.core().clone() })
    }

    /// The path of the node.
    pub fn path(&self) -> &str {
        self.inner.path()
    }

    /// Starts keeping and touching the node (in the background).
    ///
    /// # Errors
    /// As [`PersistentTtlNode::start`](crate::nodes::PersistentTtlNode::start).
    pub fn start(&self) -> Result<()> {
        self.inner.start()
    }

    /// Sets the node's data.
    ///
    /// # Errors
    /// As [`PersistentTtlNode::set_data`](crate::nodes::PersistentTtlNode::set_data).
    pub fn set_data(&self, data: impl Into<Vec<u8>>) -> Result<()> {
        self.inner.set_data(data)
    }

    /// Waits until the node exists and was touched once.
    ///
    /// # Errors
    /// As [`PersistentTtlNode::wait_for_initial_create`](crate::nodes::PersistentTtlNode::wait_for_initial_create);
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `runtime` inside a tokio runtime context.
    pub fn wait_for_initial_create(&self, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let timeout = timeout.into().remaining();
        self.core.block_on(self.inner.wait_for_initial_create(timeout))?
    }

    /// Stops touching, leaving the node to expire after the TTL.
    ///
    /// # Errors
    /// As [`PersistentTtlNode::close`](crate::nodes::PersistentTtlNode::close).
    pub fn close(&self) -> Result<()> {
        self.core.block_on(self.inner.close())?
    }
}

/// A blocking [`GroupMember`](crate::nodes::GroupMember) (Curator's `GroupMember`).
///
/// # Examples
/// ```no_run
/// use std::time::Duration;
/// use zk_curator::blocking::{CuratorClient, GroupMember};
///
/// fn join() -> zk_curator::Result<()> {
///     let client = CuratorClient::connect("127.0.0.1:2181")?;
///     let member = GroupMember::new(&client, "/groups/workers", "w1", b"10.0.0.7".to_vec())?;
///     member.start()?;
///     member.wait_for_initial_create(Duration::from_secs(5))?;
///     for (id, data) in member.current_members() {
///         println!("{id}: {}", String::from_utf8_lossy(&data));
///     }
///     member.close()
/// }
/// ```
///
/// A cheap [`Clone`] shares one instance, as the async [`GroupMember`](crate::nodes::GroupMember) does.
#[derive(Clone, Debug)]
pub struct GroupMember {
    inner: crate::nodes::GroupMember,
    core: Arc<Core>,
}

impl GroupMember {
    /// See [`GroupMember::new`](crate::nodes::GroupMember::new).
    ///
    /// # Errors
    /// As [`GroupMember::new`](crate::nodes::GroupMember::new).
    pub fn new(client: &CuratorClient, path: &str, id: &str, data: impl Into<Vec<u8>>) -> Result<Self> {
        let inner = crate::nodes::GroupMember::new(client.core().client(), path, id, data)?;
        Ok(Self { inner, core: client.core().clone() })
    }

    /// The group path.
    pub fn path(&self) -> &str {
        self.inner.path()
    }

    /// This member's id.
    pub fn id(&self) -> &str {
        self.inner.id()
    }

    /// Joins the group and follows it (in the background).
    ///
    /// # Errors
    /// As [`GroupMember::start`](crate::nodes::GroupMember::start).
    pub fn start(&self) -> Result<()> {
        self.inner.start()
    }

    /// Sets this member's data.
    ///
    /// # Errors
    /// As [`GroupMember::set_this_data`](crate::nodes::GroupMember::set_this_data).
    pub fn set_this_data(&self, data: impl Into<Vec<u8>>) -> Result<()> {
        self.inner.set_this_data(data)
    }

    /// The group as last seen: member id → data (this member included).
    pub fn current_members(&self) -> BTreeMap<String, Vec<u8>> {
        self.inner.current_members()
    }

    /// Waits until this member's node exists and the group as read includes it.
    ///
    /// # Errors
    /// As [`GroupMember::wait_for_initial_create`](crate::nodes::GroupMember::wait_for_initial_create);
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `runtime` inside a tokio runtime context.
    pub fn wait_for_initial_create(&self, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let timeout = timeout.into().remaining();
        self.core.block_on(self.inner.wait_for_initial_create(timeout))?
    }

    /// The membership changes, as a blocking iterator.
    pub fn changes(&self) -> MembershipChanges {
        MembershipChanges { inner: self.inner.changes(), path: self.path().to_string(), core: self.core.clone() }
    }

    /// Leaves the group, waiting for this member's node to be deleted.
    ///
    /// # Errors
    /// As [`GroupMember::close`](crate::nodes::GroupMember::close); [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming
    /// `runtime` inside a tokio runtime context.
    pub fn close(&self) -> Result<()> {
        self.core.block_on(self.inner.close())?
    }
}

/// The changes of a group, waited for on the calling thread: [`GroupMember::changes`]; an
/// [`Iterator`] (see [`MembershipStream`](crate::nodes::MembershipStream) for what it coalesces).
#[derive(Debug)]
pub struct MembershipChanges {
    inner: crate::nodes::MembershipStream,
    path: String,
    core: Arc<Core>,
}

impl MembershipChanges {
    /// The next change within `timeout`: `Ok(None)` once the member is dropped.
    ///
    /// # Errors
    /// [`Error::DeadlineExceeded`](crate::Error::DeadlineExceeded) naming the group path when no change came within `timeout`
    /// (returned then; nothing is lost); [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `runtime` inside a
    /// tokio runtime context.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let member = zk_curator::blocking::GroupMember::new(&client, "/groups/workers", "w1", vec![])?;
    /// let mut changes = member.changes();
    /// if let Ok(Some(change)) = changes.next_timeout(std::time::Duration::from_secs(1)) {
    ///     println!("{change:?}");
    /// }
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn next_timeout(&mut self, timeout: impl Into<crate::Deadline>) -> Result<Option<MembershipEvent>> {
        let timeout = timeout.into().remaining();
        self.core.feed_next_timeout(self.inner.next(), timeout, &self.path, "waiting for a membership change of")
    }

    /// Waits for the next change: `Ok(None)` once the member is dropped.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `runtime` inside a tokio runtime context.
    #[deprecated(note = "use `Iterator::next` (`for change in changes`), or `next_timeout`")]
    pub fn recv(&mut self) -> Result<Option<MembershipEvent>> {
        self.core.block_on(self.inner.next())
    }

    /// Like [`recv`](Self::recv), giving up after `timeout` (returns within it).
    ///
    /// # Errors
    /// As [`next_timeout`](Self::next_timeout).
    #[deprecated(note = "use `next_timeout`")]
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<Option<MembershipEvent>> {
        self.next_timeout(timeout)
    }
}

impl Iterator for MembershipChanges {
    type Item = MembershipEvent;

    /// Waits for the next change; `None` once the member is dropped (or when called inside a
    /// tokio runtime context: logged).
    fn next(&mut self) -> Option<MembershipEvent> {
        self.core.feed_next(self.inner.next(), &self.path)
    }
}
