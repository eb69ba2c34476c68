//! The framework layer (Curator's `CuratorFramework`): the client and its builder, session
//! supervision and connection states, ACL providers, retry policies and the retry loop, paths and namespaces,
//! protected create, guaranteed delete.

pub(crate) mod acl;
pub(crate) mod acl_provider;
pub(crate) mod backoff;
pub(crate) mod builder;
pub(crate) mod client;
pub(crate) mod guaranteed_delete;
pub(crate) mod node;
pub(crate) mod operations;
pub(crate) mod paths;
pub(crate) mod protected;
pub(crate) mod retry;
pub(crate) mod security;
pub(crate) mod session;
pub(crate) mod state;

/// The instant `timeout` from now; a timeout too long for the clock (`Duration::MAX`) saturates
/// to a date a century away rather than overflowing (and panicking).
pub(crate) fn deadline_after(timeout: std::time::Duration) -> std::time::Instant {
    const CENTURY: std::time::Duration = std::time::Duration::from_secs(100 * 365 * 86_400);
    let now = std::time::Instant::now();
    now.checked_add(timeout).or_else(|| now.checked_add(CENTURY)).unwrap_or(now)
}
