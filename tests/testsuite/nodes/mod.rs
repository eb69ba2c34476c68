//! Nodes kept present while started: `PersistentNode`, `PersistentTtlNode`, and `GroupMember`
//! built on them (Curator's `recipes/nodes`), against a real ZooKeeper.

mod blocking_facade;
mod curator_interop;
mod flapping_links;
mod given_up_session;
mod group_member;
mod inspect_membership;
mod lost_create_reply;
mod persistent_node;
mod ttl_node;

use std::time::Duration;

/// A hang guard, never a performance bound.
const WITHIN: Duration = Duration::from_secs(20);
