//! Nodes kept present while a process lives, and group membership built on them (Curator's
//! `recipes/nodes` and `recipes/nodes/GroupMember`).
//!
//! * [`PersistentNode`] (Curator's `PersistentNode`): start from it — a node (often ephemeral,
//!   optionally [`Protection`]-named) re-created after every session loss, with its
//!   [`NodeState`];
//! * [`PersistentTtlNode`] (Curator's `PersistentTtlNode`): a TTL node kept alive by touching a
//!   child ([`TTL_TOUCH_NODE_NAME`]);
//! * [`GroupMember`] (Curator's `GroupMember`): a member's node plus the group's current members,
//!   with a [`MembershipStream`] of [`MembershipEvent`]s.
//!
//! ```no_run
//! use std::time::Duration;
//! use zk_curator::CreateMode;
//! use zk_curator::nodes::{PersistentNode, Protection};
//!
//! # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
//! let node = PersistentNode::new(
//!     &client,
//!     "/services/api/host-a",
//!     CreateMode::Ephemeral,
//!     Protection::Unprotected,
//!     b"10.0.0.7:8080".to_vec(),
//! )?;
//! node.start()?;
//! node.wait_for_initial_create(Duration::from_secs(5)).await?;
//! # Ok(()) }
//! ```

mod group;
mod persistent;
mod ttl;

pub use group::{GroupMember, MembershipEvent, MembershipStream};
pub use persistent::{NodeState, PersistentNode, Protection};
pub use ttl::{PersistentTtlNode, TTL_TOUCH_NODE_NAME};

/// A recipe's helper task, shared by the clones of its handle and aborted when the last one is
/// dropped (aborting needs no runtime and never panics).
#[derive(Default)]
pub(crate) struct HelperTask(parking_lot::Mutex<Option<tokio::task::JoinHandle<()>>>);

impl std::ops::Deref for HelperTask {
    type Target = parking_lot::Mutex<Option<tokio::task::JoinHandle<()>>>;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl Drop for HelperTask {
    fn drop(&mut self) {
        if let Some(task) = self.0.get_mut().take() {
            task.abort();
        }
    }
}
