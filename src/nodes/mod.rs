//! Curator's `recipes/nodes` and `recipes/nodes/GroupMember`: nodes kept present while a process
//! lives ([`PersistentNode`], [`PersistentTtlNode`]) and group membership built on them
//! ([`GroupMember`]).

mod group;
mod persistent;
mod ttl;

pub use group::{GroupMember, MembershipEvent, MembershipStream};
pub use persistent::{NodeState, PersistentNode};
pub use ttl::{PersistentTtlNode, TTL_TOUCH_NODE_NAME};
