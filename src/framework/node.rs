//! The crate's own node types: [`CreateMode`], [`Stat`], [`WatchedEvent`]. They mirror
//! ZooKeeper's, so that the public API does not depend on `zookeeper-client`'s 0.x types.

use std::time::Duration;

use zookeeper_client as zk;

use crate::error::{Error, Result};

/// Largest TTL ZooKeeper accepts: five bytes of milliseconds (`EphemeralType.MAX_VALUE`).
const TTL_MAX: Duration = Duration::from_millis(0x00FF_FFFF_FFFF);

/// The kind of node a create makes (ZooKeeper's `CreateMode`).
///
/// TTL modes need a server started with `zookeeper.extendedTypesEnabled=true` (otherwise the
/// create fails with [`ErrorCode::Unimplemented`](crate::ErrorCode::Unimplemented) or
/// [`BadArguments`](crate::ErrorCode::BadArguments)); the server deletes such a node once it has
/// had no children and no change for the TTL.
///
/// ```
/// use std::time::Duration;
/// use zk_curator::CreateMode;
///
/// let mode = CreateMode::PersistentWithTtl(Duration::from_secs(60));
/// assert!(!mode.is_sequential() && !mode.is_ephemeral());
/// assert!(CreateMode::EphemeralSequential.is_sequential());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CreateMode {
    /// A node that lives until deleted.
    #[default]
    Persistent,
    /// A persistent node whose name gets a 10-digit sequence number appended.
    PersistentSequential,
    /// A node deleted when the creating session ends.
    Ephemeral,
    /// An ephemeral node whose name gets a sequence number appended (what lock nodes are).
    EphemeralSequential,
    /// A node the server deletes once its last child is gone (after it had one).
    Container,
    /// A persistent node the server deletes after the TTL without children or changes.
    PersistentWithTtl(Duration),
    /// A persistent sequential node with a TTL.
    PersistentSequentialWithTtl(Duration),
}

impl CreateMode {
    /// True for the modes that append a sequence number.
    pub fn is_sequential(self) -> bool {
        matches!(
            self,
            CreateMode::PersistentSequential
                | CreateMode::EphemeralSequential
                | CreateMode::PersistentSequentialWithTtl(_)
        )
    }

    /// True for the modes whose node ends with the session.
    pub fn is_ephemeral(self) -> bool {
        matches!(self, CreateMode::Ephemeral | CreateMode::EphemeralSequential)
    }

    /// The TTL, for the TTL modes.
    pub fn ttl(self) -> Option<Duration> {
        match self {
            CreateMode::PersistentWithTtl(ttl) | CreateMode::PersistentSequentialWithTtl(ttl) => Some(ttl),
            _ => None,
        }
    }

    /// Checks what the server would refuse: a zero TTL, or one over ZooKeeper's maximum.
    pub(crate) fn validate(self) -> Result<()> {
        match self.ttl() {
            Some(ttl) if ttl.is_zero() => Err(Error::invalid_argument("ttl", format!("{ttl:?}"), "must be positive")),
            Some(ttl) if ttl > TTL_MAX => {
                Err(Error::invalid_argument("ttl", format!("{ttl:?}"), "exceeds ZooKeeper's maximum of 2^40-1 ms"))
            }
            _ => Ok(()),
        }
    }

    /// zookeeper-client's mode and TTL.
    pub(crate) fn to_raw(self) -> (zk::CreateMode, Option<Duration>) {
        match self {
            CreateMode::Persistent => (zk::CreateMode::Persistent, None),
            CreateMode::PersistentSequential => (zk::CreateMode::PersistentSequential, None),
            CreateMode::Ephemeral => (zk::CreateMode::Ephemeral, None),
            CreateMode::EphemeralSequential => (zk::CreateMode::EphemeralSequential, None),
            CreateMode::Container => (zk::CreateMode::Container, None),
            CreateMode::PersistentWithTtl(ttl) => (zk::CreateMode::Persistent, Some(ttl)),
            CreateMode::PersistentSequentialWithTtl(ttl) => (zk::CreateMode::PersistentSequential, Some(ttl)),
        }
    }

    /// zookeeper-client's create options for this mode with `acls`.
    pub(crate) fn options(self, acls: &[zk::Acl]) -> zk::CreateOptions<'_> {
        let (mode, ttl) = self.to_raw();
        let options = mode.with_acls(zk::Acls::new(acls));
        match ttl {
            Some(ttl) => options.with_ttl(ttl),
            None => options,
        }
    }
}

/// A node's metadata (ZooKeeper's `Stat`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Stat {
    /// The zxid of the change that created the node.
    pub czxid: i64,
    /// The zxid of the change that last modified its data.
    pub mzxid: i64,
    /// The zxid of the change that last modified its children.
    pub pzxid: i64,
    /// Creation time, milliseconds since the epoch.
    pub ctime: i64,
    /// Last modification time, milliseconds since the epoch.
    pub mtime: i64,
    /// The number of changes to its data: the version a versioned set or delete names.
    pub version: i32,
    /// The number of changes to its children.
    pub cversion: i32,
    /// The number of changes to its ACL.
    pub aversion: i32,
    /// The session that owns it, for an ephemeral node; 0 otherwise.
    pub ephemeral_owner: i64,
    /// The length of its data.
    pub data_length: i32,
    /// The number of its children.
    pub num_children: i32,
}

impl From<zk::Stat> for Stat {
    fn from(s: zk::Stat) -> Stat {
        Stat {
            czxid: s.czxid,
            mzxid: s.mzxid,
            pzxid: s.pzxid,
            ctime: s.ctime,
            mtime: s.mtime,
            version: s.version,
            cversion: s.cversion,
            aversion: s.aversion,
            ephemeral_owner: s.ephemeral_owner,
            data_length: s.data_length,
            num_children: s.num_children,
        }
    }
}

/// What a watch reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EventType {
    /// The watched node was created.
    NodeCreated,
    /// The watched node was deleted.
    NodeDeleted,
    /// The watched node's data changed.
    NodeDataChanged,
    /// The watched node's children changed.
    NodeChildrenChanged,
    /// (Persistent watches) The connection was lost. Events that happen until
    /// [`Reconnected`](Self::Reconnected) may not be delivered (ZOOKEEPER-4698): read again
    /// after it.
    Disconnected,
    /// (Persistent watches) The connection is back on the same session.
    Reconnected,
    /// The session the watch was set on ended (expired or the client closed); the watch will
    /// never fire again. The client goes on with a new session: set a new watch there.
    SessionEnded,
}

/// One event of a watch: a [`Watch`](crate::framework::Watch) fires once with it, a
/// [`WatchStream`](crate::framework::WatchStream) yields many.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct WatchedEvent {
    /// What happened.
    pub event_type: EventType,
    /// The node it happened to, as the caller sees paths (without the client's namespace);
    /// empty for connection and session events.
    pub path: String,
}

impl WatchedEvent {
    /// Our event of a zookeeper-client event; `path` is already without the namespace.
    pub(crate) fn of(event: &zk::WatchedEvent, path: String) -> WatchedEvent {
        let event_type = match event.event_type {
            zk::EventType::NodeCreated => EventType::NodeCreated,
            zk::EventType::NodeDeleted => EventType::NodeDeleted,
            zk::EventType::NodeDataChanged => EventType::NodeDataChanged,
            zk::EventType::NodeChildrenChanged => EventType::NodeChildrenChanged,
            zk::EventType::Session => match event.session_state {
                zk::SessionState::Disconnected => EventType::Disconnected,
                zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly => EventType::Reconnected,
                _ => EventType::SessionEnded,
            },
        };
        let path = if event.event_type == zk::EventType::Session { String::new() } else { path };
        WatchedEvent { event_type, path }
    }
}
