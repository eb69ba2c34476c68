//! [`DiscoveryPathConstructor`] (Curator's `DiscoveryPathConstructor` /
//! `DiscoveryPathConstructorImpl`): where a registry keeps its services and their instances.

use crate::error::Result;
use crate::framework::paths;

/// Where a registry's nodes are (Curator's `DiscoveryPathConstructor`): the base path, whose
/// children are the service names ([`query_for_names`](super::ServiceDiscovery::query_for_names)),
/// and, per service, the node whose children are its instances (`ID` nodes holding the JSON).
///
/// The standard layout is [`StandardPathConstructor`] (`base/NAME/ID`, what
/// [`ServiceDiscovery::builder`](super::ServiceDiscovery::builder)'s base path gives). Another
/// layout, set with
/// [`ServiceDiscoveryBuilder::path_constructor`](super::ServiceDiscoveryBuilder::path_constructor),
/// must be the same for every reader and writer of the registry, Java ones included (give
/// Curator's builder a `pathConstructor` of the same layout).
///
/// ```
/// use zk_curator::discovery::DiscoveryPathConstructor;
///
/// /// Services under `/services`, their instances in a `hosts` child: `/services/NAME/hosts/ID`.
/// struct HostsLayout;
///
/// impl DiscoveryPathConstructor for HostsLayout {
///     fn base_path(&self) -> &str {
///         "/services"
///     }
///     fn path_for_instances(&self, service_name: &str) -> String {
///         format!("/services/{service_name}/hosts")
///     }
/// }
/// assert_eq!(HostsLayout.path_for_instances("api"), "/services/api/hosts");
/// ```
pub trait DiscoveryPathConstructor: Send + Sync + 'static {
    /// The path whose children are the services' names (Curator's `getBasePath`).
    fn base_path(&self) -> &str;

    /// The path whose children are the instances of `service_name` (Curator's
    /// `getPathForInstances`); `service_name` is checked first (not empty, no `/`). A path that is
    /// not a valid ZooKeeper path is an [`Error::InvalidPath`](crate::Error::InvalidPath) of the
    /// call that uses it.
    fn path_for_instances(&self, service_name: &str) -> String;
}

/// The standard layout, `base/NAME/ID` (Curator's `DiscoveryPathConstructorImpl`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StandardPathConstructor {
    base_path: String,
}

impl StandardPathConstructor {
    /// The layout under `base_path`.
    ///
    /// # Errors
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) naming `base_path` if it is not a valid
    /// ZooKeeper path.
    pub fn new(base_path: &str) -> Result<Self> {
        paths::validate_path(base_path)?;
        Ok(Self { base_path: base_path.to_string() })
    }
}

impl DiscoveryPathConstructor for StandardPathConstructor {
    fn base_path(&self) -> &str {
        &self.base_path
    }

    fn path_for_instances(&self, service_name: &str) -> String {
        paths::join(&self.base_path, service_name)
    }
}
