//! The framework layer (Curator's `CuratorFramework`): the client and its builder, session
//! supervision and connection states, ACL providers, retry policies and the retry loop, paths and namespaces,
//! protected create, guaranteed delete.

pub(crate) mod acl_provider;
pub(crate) mod backoff;
pub(crate) mod builder;
pub(crate) mod client;
pub(crate) mod guaranteed_delete;
pub(crate) mod paths;
pub(crate) mod protected;
pub(crate) mod retry;
pub(crate) mod session;
pub(crate) mod state;
