//! [`ServiceInstance`] (Curator's `ServiceInstance` and `ServiceInstanceBuilder`) and
//! [`ServiceType`]: one registered instance of a service, as stored in its node.

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::{Error, Result};

use super::uri_spec::UriSpec;

/// How an instance's node lives (Curator's `ServiceType`), which decides its create mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ServiceType {
    /// An ephemeral node `base/name/id`: gone with the registering session, re-created on the next
    /// one while registered. Curator's default.
    #[default]
    Dynamic,
    /// A persistent node: stays until unregistered.
    Static,
    /// A persistent node: stays until unregistered (Curator makes no difference from `Static`).
    Permanent,
    /// An ephemeral sequential node `base/name/id<sequence>`.
    DynamicSequential,
}

impl ServiceType {
    /// True for the ephemeral types (Curator's `isDynamic`).
    pub fn is_dynamic(self) -> bool {
        matches!(self, ServiceType::Dynamic | ServiceType::DynamicSequential)
    }

    /// The name in Curator's JSON (`DYNAMIC`, `STATIC`, `PERMANENT`, `DYNAMIC_SEQUENTIAL`).
    pub fn wire_name(self) -> &'static str {
        match self {
            ServiceType::Dynamic => "DYNAMIC",
            ServiceType::Static => "STATIC",
            ServiceType::Permanent => "PERMANENT",
            ServiceType::DynamicSequential => "DYNAMIC_SEQUENTIAL",
        }
    }

    /// The type of a name in Curator's JSON.
    pub fn from_wire_name(name: &str) -> Option<Self> {
        Some(match name {
            "DYNAMIC" => ServiceType::Dynamic,
            "STATIC" => ServiceType::Static,
            "PERMANENT" => ServiceType::Permanent,
            "DYNAMIC_SEQUENTIAL" => ServiceType::DynamicSequential,
            _ => return None,
        })
    }

    pub(crate) fn create_mode(self) -> crate::CreateMode {
        match self {
            ServiceType::Dynamic => crate::CreateMode::Ephemeral,
            ServiceType::DynamicSequential => crate::CreateMode::EphemeralSequential,
            ServiceType::Static | ServiceType::Permanent => crate::CreateMode::Persistent,
        }
    }
}

/// One instance of a service (Curator's `ServiceInstance`): stored as JSON in the node
/// `base/name/id` (see [`JsonInstanceSerializer`](super::JsonInstanceSerializer)).
///
/// The payload `T` is any serde type (`serde_json::Value`, the default, for a payload of unknown
/// shape; `()` or `Option` for none). Made with [`builder`](Self::builder), which gives Curator's
/// defaults: a random UUID id, this host's address, the registration time now, type
/// [`ServiceType::Dynamic`], enabled.
///
/// ```
/// use zk_curator::discovery::ServiceInstance;
///
/// #[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
/// struct Details { region: String }
///
/// let instance = ServiceInstance::builder("api").port(8080).payload(Details { region: "eu".into() }).build()?;
/// assert_eq!(instance.name(), "api");
/// assert_eq!(instance.id().len(), 36);
/// # Ok::<(), zk_curator::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct ServiceInstance<T = serde_json::Value> {
    pub(crate) name: String,
    pub(crate) id: String,
    pub(crate) address: Option<String>,
    pub(crate) port: Option<u16>,
    pub(crate) ssl_port: Option<u16>,
    pub(crate) payload: Option<T>,
    pub(crate) registration_time_utc: i64,
    pub(crate) service_type: ServiceType,
    pub(crate) uri_spec: Option<UriSpec>,
    pub(crate) enabled: bool,
}

impl<T> ServiceInstance<T> {
    /// A builder of an instance of service `name` with Curator's defaults (see the type).
    pub fn builder(name: impl Into<String>) -> ServiceInstanceBuilder<T> {
        ServiceInstanceBuilder {
            instance: ServiceInstance {
                name: name.into(),
                id: uuid::Uuid::new_v4().to_string(),
                address: local_address(),
                port: None,
                ssl_port: None,
                payload: None,
                registration_time_utc: now_millis(),
                service_type: ServiceType::Dynamic,
                uri_spec: None,
                enabled: true,
            },
        }
    }

    /// The service's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The instance's id, unique within the service.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The address (host name or IP), if any.
    pub fn address(&self) -> Option<&str> {
        self.address.as_deref()
    }

    /// The port, if any.
    pub fn port(&self) -> Option<u16> {
        self.port
    }

    /// The SSL port, if any.
    pub fn ssl_port(&self) -> Option<u16> {
        self.ssl_port
    }

    /// The payload, if any.
    pub fn payload(&self) -> Option<&T> {
        self.payload.as_ref()
    }

    /// When the instance was registered: milliseconds since the Unix epoch (UTC).
    pub fn registration_time_utc(&self) -> i64 {
        self.registration_time_utc
    }

    /// The instance's type.
    pub fn service_type(&self) -> ServiceType {
        self.service_type
    }

    /// The URI template, if any.
    pub fn uri_spec(&self) -> Option<&UriSpec> {
        self.uri_spec.as_ref()
    }

    /// Whether the instance takes work (a provider skips disabled ones by default). Curator's
    /// default (compatible) JSON does not store it: see
    /// [`JsonInstanceSerializer::compatible`](super::JsonInstanceSerializer::compatible).
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// The URI built from the [`uri_spec`](Self::uri_spec) with this instance's fields (`""`
    /// without a spec).
    pub fn build_uri(&self) -> String {
        self.build_uri_with(&HashMap::new())
    }

    /// The URI built from the [`uri_spec`](Self::uri_spec) with this instance's fields and
    /// `variables`, which override them.
    pub fn build_uri_with(&self, variables: &HashMap<&str, &str>) -> String {
        self.uri_spec.as_ref().map_or_else(String::new, |spec| spec.build(Some(self), variables))
    }

    /// A builder starting from this instance's fields (for an [`update`](super::ServiceDiscovery::update)).
    pub fn to_builder(&self) -> ServiceInstanceBuilder<T>
    where
        T: Clone,
    {
        ServiceInstanceBuilder { instance: self.clone() }
    }
}

/// Builds a [`ServiceInstance`] ([`ServiceInstance::builder`]).
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until build()"]
pub struct ServiceInstanceBuilder<T> {
    instance: ServiceInstance<T>,
}

impl<T> ServiceInstanceBuilder<T> {
    /// The instance's id (default: a random UUID). No `/`.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.instance.id = id.into();
        self
    }

    /// The address (default: this host's IP address, or its name when it has none).
    pub fn address(mut self, address: impl Into<String>) -> Self {
        self.instance.address = Some(address.into());
        self
    }

    /// No address.
    pub fn no_address(mut self) -> Self {
        self.instance.address = None;
        self
    }

    /// The port.
    pub fn port(mut self, port: u16) -> Self {
        self.instance.port = Some(port);
        self
    }

    /// The SSL port (makes `{scheme}` `https`).
    pub fn ssl_port(mut self, port: u16) -> Self {
        self.instance.ssl_port = Some(port);
        self
    }

    /// The payload.
    pub fn payload(mut self, payload: T) -> Self {
        self.instance.payload = Some(payload);
        self
    }

    /// The registration time in milliseconds since the Unix epoch (default: now).
    pub fn registration_time_utc(mut self, millis: i64) -> Self {
        self.instance.registration_time_utc = millis;
        self
    }

    /// The type (default [`ServiceType::Dynamic`]).
    pub fn service_type(mut self, service_type: ServiceType) -> Self {
        self.instance.service_type = service_type;
        self
    }

    /// The URI template.
    pub fn uri_spec(mut self, spec: UriSpec) -> Self {
        self.instance.uri_spec = Some(spec);
        self
    }

    /// Whether the instance takes work (default true).
    pub fn enabled(mut self, enabled: bool) -> Self {
        self.instance.enabled = enabled;
        self
    }

    /// The instance.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the name or id when empty or containing `/` (each is one
    /// node name of the path `base/name/id`).
    pub fn build(self) -> Result<ServiceInstance<T>> {
        check_node_name("service name", &self.instance.name)?;
        check_node_name("instance id", &self.instance.id)?;
        Ok(self.instance)
    }
}

/// A service name or instance id: one node name.
pub(crate) fn check_node_name(what: &'static str, value: &str) -> Result<()> {
    if value.is_empty() {
        return Err(Error::invalid_argument(what, value, "must not be empty"));
    }
    if value.contains('/') {
        return Err(Error::invalid_argument(what, value, "must not contain '/' (it is one node name)"));
    }
    if value == "." || value == ".." || value.contains('\0') {
        return Err(Error::invalid_argument(what, value, "is not a valid node name"));
    }
    Ok(())
}

fn now_millis() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// This host's address, as Curator's default: the IP address the host would reach the network
/// from (no packet is sent: a UDP socket is only connected), else its host name.
fn local_address() -> Option<String> {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, UdpSocket};
    let probe = |bind: IpAddr, target: IpAddr| -> Option<IpAddr> {
        let socket = UdpSocket::bind((bind, 0)).ok()?;
        socket.connect((target, 9)).ok()?;
        let ip = socket.local_addr().ok()?.ip();
        (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
    };
    // Documentation-range targets: never contacted, only routed.
    probe(IpAddr::V4(Ipv4Addr::UNSPECIFIED), IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)))
        .or_else(|| probe(IpAddr::V6(Ipv6Addr::UNSPECIFIED), IpAddr::V6("2001:db8::1".parse().ok()?)))
        .map(|ip| ip.to_string())
        .or_else(|| gethostname::gethostname().into_string().ok())
}
