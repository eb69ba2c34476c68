//! [`UriSpec`] (Curator's `UriSpec`): a URI template such as `{scheme}://{address}:{port}/api`,
//! filled from an instance's fields and the caller's own variables.

use std::collections::HashMap;
use std::fmt;

use crate::error::{Error, Result};

use super::instance::ServiceInstance;

/// One part of a [`UriSpec`]: literal text, or the name of a variable to replace.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct UriPart {
    /// The text, or the variable's name.
    pub value: String,
    /// True for a variable (`{value}` in the raw spec).
    pub variable: bool,
}

/// A URI template (Curator's `UriSpec`), stored with an instance and built into a URI for it.
///
/// Variables are written `{name}`; [`build`](Self::build) replaces, from the instance:
/// `{scheme}` (`https` when the instance has an SSL port, else `http`), `{name}`, `{id}`,
/// `{address}`, `{port}`, `{ssl-port}`, `{registration-time-utc}`, `{service-type}` (lower case),
/// and always `{[}` with `{` and `{]}` with `}`. The caller's variables override these; a variable
/// with no value is left out (as Curator does).
///
/// ```
/// use zk_curator::discovery::{ServiceInstance, UriSpec};
///
/// let spec = UriSpec::parse("{scheme}://{address}:{port}/v1/{tenant}")?;
/// let instance = ServiceInstance::<()>::builder("api").address("10.0.0.7").port(8080).uri_spec(spec).build()?;
/// let vars = [("tenant", "acme")].into_iter().collect();
/// assert_eq!(instance.build_uri_with(&vars), "http://10.0.0.7:8080/v1/acme");
/// # Ok::<(), zk_curator::Error>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct UriSpec {
    parts: Vec<UriPart>,
}

impl UriSpec {
    /// Parses a raw spec as Curator does: `{` opens a variable (its name trimmed), `}` closes it.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the spec for a `{` inside a variable, a `}` without its
    /// `{`, or a variable left open.
    pub fn parse(raw: &str) -> Result<Self> {
        let bad = |reason| Error::invalid_argument("uri spec", raw, reason);
        let mut parts = Vec::new();
        let mut inside = false;
        let mut token = String::new();
        let flush = |token: &mut String, inside: bool, parts: &mut Vec<UriPart>| {
            if !token.is_empty() {
                let value = if inside { token.trim().to_string() } else { std::mem::take(token) };
                token.clear();
                parts.push(UriPart { value, variable: inside });
            }
        };
        for c in raw.chars() {
            match c {
                '{' => {
                    if inside {
                        return Err(bad("{ is not allowed inside of a variable specification"));
                    }
                    flush(&mut token, inside, &mut parts);
                    inside = true;
                }
                '}' => {
                    if !inside {
                        return Err(bad("} must be preceded by {"));
                    }
                    flush(&mut token, inside, &mut parts);
                    inside = false;
                }
                c => token.push(c),
            }
        }
        if inside {
            return Err(bad("final variable not closed: expected }"));
        }
        flush(&mut token, inside, &mut parts);
        Ok(Self { parts })
    }

    /// A spec of the given parts.
    pub fn from_parts(parts: Vec<UriPart>) -> Self {
        Self { parts }
    }

    /// The parts, in order.
    pub fn parts(&self) -> &[UriPart] {
        &self.parts
    }

    /// Builds the URI with `instance`'s fields (if given) and `variables` (which win).
    pub fn build<T>(&self, instance: Option<&ServiceInstance<T>>, variables: &HashMap<&str, &str>) -> String {
        let mut out = String::new();
        for part in &self.parts {
            if !part.variable {
                out.push_str(&part.value);
                continue;
            }
            if let Some(value) = variables.get(part.value.as_str()) {
                out.push_str(value);
                continue;
            }
            match builtin(&part.value, instance) {
                Some(value) => out.push_str(&value),
                None => tracing::debug!(variable = %part.value, "uri spec variable not found"),
            }
        }
        out
    }
}

/// The value of a predefined variable; `None` when it has none (left out).
fn builtin<T>(name: &str, instance: Option<&ServiceInstance<T>>) -> Option<String> {
    let opt = |v: Option<String>| Some(v.unwrap_or_default());
    match (name, instance) {
        ("[", _) => Some("{".into()),
        ("]", _) => Some("}".into()),
        ("scheme", Some(i)) if i.ssl_port().is_some() => Some("https".into()),
        ("scheme", _) => Some("http".into()),
        ("name", Some(i)) => Some(i.name().to_string()),
        ("id", Some(i)) => Some(i.id().to_string()),
        ("address", Some(i)) => opt(i.address().map(str::to_string)),
        ("port", Some(i)) => opt(i.port().map(|p| p.to_string())),
        ("ssl-port", Some(i)) => opt(i.ssl_port().map(|p| p.to_string())),
        ("registration-time-utc", Some(i)) => Some(i.registration_time_utc().to_string()),
        ("service-type", Some(i)) => Some(i.service_type().wire_name().to_ascii_lowercase()),
        _ => None,
    }
}

impl fmt::Display for UriSpec {
    /// The raw spec (variables in braces).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for part in &self.parts {
            if part.variable {
                write!(f, "{{{}}}", part.value)?;
            } else {
                f.write_str(&part.value)?;
            }
        }
        Ok(())
    }
}
