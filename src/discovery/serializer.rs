//! How an instance becomes its node's bytes: the [`InstanceSerializer`] trait (Curator's
//! `InstanceSerializer`) and [`JsonInstanceSerializer`], Curator's JSON byte for byte.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use serde_json::Value;

use super::instance::{ServiceInstance, ServiceType};
use super::uri_spec::{UriPart, UriSpec};

/// Why an instance could not be written or read.
pub type SerializeError = Box<dyn std::error::Error + Send + Sync>;

/// Turns an instance into its node's bytes and back (Curator's `InstanceSerializer`).
/// [`JsonInstanceSerializer`] is the default; another one must be shared by every reader and
/// writer of the registry.
pub trait InstanceSerializer<T>: Send + Sync + 'static {
    /// The node data of `instance`.
    ///
    /// # Errors
    /// Why it cannot be written (e.g. a payload serde refuses).
    fn serialize(&self, instance: &ServiceInstance<T>) -> std::result::Result<Vec<u8>, SerializeError>;

    /// The instance in `bytes`.
    ///
    /// # Errors
    /// Why it cannot be read (not an instance, a payload of another shape).
    fn deserialize(&self, bytes: &[u8]) -> std::result::Result<ServiceInstance<T>, SerializeError>;
}

/// The Java class named in a JSON object payload's type info when none is set
/// ([`JsonInstanceSerializer::payload_class`]): what Jackson reads an untyped object as.
pub const DEFAULT_PAYLOAD_CLASS: &str = "java.util.LinkedHashMap";
/// The Java class of a JSON array payload's type info (Jackson's wrapper array).
const ARRAY_PAYLOAD_CLASS: &str = "java.util.ArrayList";

/// Curator's `JsonInstanceSerializer`, byte for byte: the fields in Curator's order, `null`s
/// written, the payload with Jackson's type info (`@class` first in an object payload, an array
/// payload as `["java.util.ArrayList", [...]]`, strings, numbers and booleans bare).
///
/// **Compatible mode** (the default, as Curator's): the `enabled` field is not written, so that
/// Curator clients older than CURATOR-275 can read the node — a disabled instance is then read
/// back as enabled. [`compatible(false)`](Self::compatible) writes it (Curator's
/// `JsonInstanceSerializer(payloadClass, false)`).
///
/// Reading is as lenient as Curator's: unknown fields are ignored, missing ones take Curator's
/// defaults (an `enabled` missing reads as true), type info is dropped from the payload, which is
/// then read as `T`.
///
/// ```
/// use zk_curator::discovery::{InstanceSerializer, JsonInstanceSerializer, ServiceInstance};
///
/// let serializer = JsonInstanceSerializer::new().payload_class("com.example.Details");
/// let instance = ServiceInstance::builder("api").id("a1").no_address().registration_time_utc(1)
///     .payload(serde_json::json!({"region": "eu"})).build()?;
/// let bytes = serializer.serialize(&instance).unwrap();
/// assert_eq!(
///     String::from_utf8(bytes.clone()).unwrap(),
///     r#"{"name":"api","id":"a1","address":null,"port":null,"sslPort":null,"payload":{"@class":"com.example.Details","region":"eu"},"registrationTimeUTC":1,"serviceType":"DYNAMIC","uriSpec":null}"#
/// );
/// assert_eq!(serializer.deserialize(&bytes).unwrap(), instance);
/// # Ok::<(), zk_curator::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct JsonInstanceSerializer {
    compatible: bool,
    payload_class: String,
}

impl Default for JsonInstanceSerializer {
    fn default() -> Self {
        Self::new()
    }
}

impl JsonInstanceSerializer {
    /// Curator's default: compatible mode, object payloads typed `java.util.LinkedHashMap`.
    pub fn new() -> Self {
        Self { compatible: true, payload_class: DEFAULT_PAYLOAD_CLASS.to_string() }
    }

    /// Whether to leave the `enabled` field out (true, the default, as Curator's).
    pub fn compatible(mut self, compatible: bool) -> Self {
        self.compatible = compatible;
        self
    }

    /// The Java class named in an object payload's `@class` (default `java.util.LinkedHashMap`):
    /// set it to the payload class of the Java services that read the registry with a
    /// `JsonInstanceSerializer<ThatClass>`, which checks it.
    pub fn payload_class(mut self, class: impl Into<String>) -> Self {
        self.payload_class = class.into();
        self
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Read {
    name: Option<String>,
    id: Option<String>,
    address: Option<String>,
    port: Option<u16>,
    #[serde(rename = "sslPort")]
    ssl_port: Option<u16>,
    payload: Option<Value>,
    #[serde(rename = "registrationTimeUTC")]
    registration_time_utc: Option<i64>,
    #[serde(rename = "serviceType")]
    service_type: Option<String>,
    #[serde(rename = "uriSpec")]
    uri_spec: Option<ReadSpec>,
    enabled: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ReadSpec {
    parts: Option<Vec<ReadPart>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ReadPart {
    value: Option<String>,
    variable: bool,
}

impl<T: Serialize + DeserializeOwned + Send + Sync + 'static> InstanceSerializer<T> for JsonInstanceSerializer {
    fn serialize(&self, instance: &ServiceInstance<T>) -> std::result::Result<Vec<u8>, SerializeError> {
        // Written as text, field by field, in Curator's order (Jackson writes a class's fields in
        // declaration order), so that the payload keeps its own field order behind `@class`.
        let payload = match &instance.payload {
            None => "null".to_string(),
            Some(payload) => self.typed(serde_json::to_string(payload)?),
        };
        let opt_port = |port: Option<u16>| port.map_or_else(|| "null".to_string(), |p| p.to_string());
        let mut out = String::with_capacity(160 + payload.len());
        out.push_str("{\"name\":");
        out.push_str(&json_string(&instance.name));
        out.push_str(",\"id\":");
        out.push_str(&json_string(&instance.id));
        out.push_str(",\"address\":");
        out.push_str(&instance.address.as_deref().map_or_else(|| "null".to_string(), json_string));
        out.push_str(",\"port\":");
        out.push_str(&opt_port(instance.port));
        out.push_str(",\"sslPort\":");
        out.push_str(&opt_port(instance.ssl_port));
        out.push_str(",\"payload\":");
        out.push_str(&payload);
        out.push_str(",\"registrationTimeUTC\":");
        out.push_str(&instance.registration_time_utc.to_string());
        out.push_str(",\"serviceType\":\"");
        out.push_str(instance.service_type.wire_name());
        out.push_str("\",\"uriSpec\":");
        match &instance.uri_spec {
            None => out.push_str("null"),
            Some(spec) => {
                out.push_str("{\"parts\":[");
                for (i, part) in spec.parts().iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str("{\"value\":");
                    out.push_str(&json_string(&part.value));
                    out.push_str(",\"variable\":");
                    out.push_str(if part.variable { "true" } else { "false" });
                    out.push('}');
                }
                out.push_str("]}");
            }
        }
        if !self.compatible {
            out.push_str(",\"enabled\":");
            out.push_str(if instance.enabled { "true" } else { "false" });
        }
        out.push('}');
        Ok(out.into_bytes())
    }

    fn deserialize(&self, bytes: &[u8]) -> std::result::Result<ServiceInstance<T>, SerializeError> {
        let read: Read = serde_json::from_slice(bytes)?;
        let service_type = match read.service_type {
            None => ServiceType::Dynamic,
            Some(name) => ServiceType::from_wire_name(&name).ok_or_else(|| {
                format!("unknown serviceType {name:?} (expected DYNAMIC, STATIC, PERMANENT or DYNAMIC_SEQUENTIAL)")
            })?,
        };
        let payload = match read.payload.map(untyped) {
            None | Some(Value::Null) => None,
            Some(value) => Some(serde_json::from_value(value).map_err(|e| format!("payload: {e}"))?),
        };
        Ok(ServiceInstance {
            name: read.name.unwrap_or_default(),
            id: read.id.unwrap_or_default(),
            address: read.address,
            port: read.port,
            ssl_port: read.ssl_port,
            payload,
            registration_time_utc: read.registration_time_utc.unwrap_or(0),
            service_type,
            uri_spec: read.uri_spec.map(|spec| {
                UriSpec::from_parts(
                    spec.parts
                        .unwrap_or_default()
                        .into_iter()
                        .map(|p| UriPart { value: p.value.unwrap_or_default(), variable: p.variable })
                        .collect(),
                )
            }),
            enabled: read.enabled.unwrap_or(true),
        })
    }
}

impl JsonInstanceSerializer {
    /// The payload's JSON text with Jackson's type info (`@JsonTypeInfo(use = CLASS)`): `@class`
    /// first in an object (unless it names one itself), an array wrapped, anything else bare.
    fn typed(&self, text: String) -> String {
        match text.as_bytes().first() {
            Some(b'{') if !text.starts_with("{\"@class\":") => {
                let rest = &text[1..];
                let class = json_string(&self.payload_class);
                if rest.trim_start().starts_with('}') {
                    format!("{{\"@class\":{class}}}")
                } else {
                    format!("{{\"@class\":{class},{rest}")
                }
            }
            Some(b'[') => format!("[{},{text}]", json_string(ARRAY_PAYLOAD_CLASS)),
            _ => text,
        }
    }
}

fn json_string(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

/// The payload without Jackson's type info.
fn untyped(payload: Value) -> Value {
    match payload {
        Value::Object(mut fields) => {
            fields.remove("@class");
            Value::Object(fields)
        }
        Value::Array(mut items) if items.len() == 2 && items[0].is_string() => items.pop().unwrap_or(Value::Null),
        other => other,
    }
}
