//! The framework layer (Curator's `CuratorFramework`): client and builder, connection states,
//! retry policies, paths and namespaces, protected create, guaranteed delete.

pub mod client;
pub mod guaranteed_delete;
pub mod paths;
pub mod protected;
pub mod retry;
pub mod state;
