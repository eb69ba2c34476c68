//! Curator's `recipes/nodes` and `recipes/nodes/GroupMember`: nodes kept present while a process
//! lives ([`PersistentNode`], [`PersistentTtlNode`]) and group membership built on them
//! ([`GroupMember`]).

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
