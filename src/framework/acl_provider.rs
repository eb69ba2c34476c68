//! [`AclProvider`] (Curator's `ACLProvider`): which ACL a node gets when this client creates it.

use std::fmt::Debug;

use super::acl::Acl;

/// Chooses the ACL of every node the client creates: container parents (the namespace
/// included), lock and lease nodes, and nodes created through [`CuratorClient::create`] or a
/// guarded write. Curator's `ACLProvider`.
///
/// `path` is the node's full ZooKeeper path, namespace included, as in Curator; for a sequential
/// node it is the path before the server appends the sequence (e.g. `/app/locks/x/_c_…-lock-`).
/// An empty list from [`acl_for_path`](Self::acl_for_path) means "use the default".
///
/// [`CuratorClient::create`]: crate::CuratorClient::create
///
/// # Examples
/// ```
/// use zk_curator::{Acl, Id, Permissions};
/// use zk_curator::framework::AclProvider;
///
/// /// Everything open to read; writes only for the `digest` identity `ops`.
/// #[derive(Debug)]
/// struct OpsOnly(String);
///
/// impl AclProvider for OpsOnly {
///     fn default_acl(&self) -> Vec<Acl> {
///         vec![
///             Acl::new(Permissions::READ, Id::anyone()),
///             Acl::new(Permissions::ALL, Id::new("digest", &self.0)),
///         ]
///     }
/// }
/// ```
pub trait AclProvider: Debug + Send + Sync + 'static {
    /// The ACL of nodes no path-specific rule covers.
    fn default_acl(&self) -> Vec<Acl>;

    /// The ACL of the node at `path`; by default [`default_acl`](Self::default_acl).
    fn acl_for_path(&self, path: &str) -> Vec<Acl> {
        let _ = path;
        self.default_acl()
    }
}

/// Curator's `DefaultACLProvider`: every node open to everyone (`world:anyone`, all permissions).
#[derive(Clone, Copy, Debug, Default)]
pub struct DefaultAclProvider;

impl AclProvider for DefaultAclProvider {
    fn default_acl(&self) -> Vec<Acl> {
        Acl::open_unsafe()
    }
}

/// The same ACL for every node ([`CuratorClientBuilder::acls`](crate::CuratorClientBuilder::acls)).
#[derive(Clone, Debug)]
pub(crate) struct FixedAcls(pub Vec<Acl>);

impl AclProvider for FixedAcls {
    fn default_acl(&self) -> Vec<Acl> {
        self.0.clone()
    }
}
