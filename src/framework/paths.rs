//! ZooKeeper path rules (Curator's `PathUtils` / `ZKPaths`), joining, and namespace handling.

use crate::error::{Error, Result};

/// Checks a path against ZooKeeper's (and Curator's) rules.
///
/// A valid path starts with `/`, has no trailing `/` (except the root itself), no empty, `.` or `..`
/// segments, and no NUL, control or otherwise forbidden characters — including every character
/// above U+FFFF, which ZooKeeper's (UTF-16) check rejects as a surrogate.
///
/// # Errors
/// [`Error::InvalidPath`] naming the path and the broken rule.
pub fn validate_path(path: &str) -> Result<()> {
    let bad = |reason| Err(Error::InvalidPath { path: path.to_string(), reason });
    if path.is_empty() {
        return bad("path must not be empty");
    }
    if !path.starts_with('/') {
        return bad("path must start with '/'");
    }
    if path.len() == 1 {
        return Ok(());
    }
    if path.ends_with('/') {
        return bad("path must not end with '/'");
    }
    for segment in path[1..].split('/') {
        match segment {
            "" => return bad("path must not contain an empty segment ('//')"),
            "." | ".." => return bad("relative segments ('.', '..') are not allowed"),
            _ => {}
        }
    }
    for c in path.chars() {
        let forbidden = c == '\0'
            || ('\u{1}'..='\u{1f}').contains(&c)
            || ('\u{7f}'..='\u{9f}').contains(&c)
            || ('\u{e000}'..='\u{f8ff}').contains(&c)
            || ('\u{fff0}'..='\u{ffff}').contains(&c);
        if forbidden {
            return bad("path contains a forbidden character");
        }
        // Java strings hold these as surrogate pairs (U+D800..U+DFFF), which ZooKeeper rejects.
        if c > '\u{ffff}' {
            return bad("path contains a character above U+FFFF, which ZooKeeper rejects");
        }
    }
    Ok(())
}

/// Checks a single node name (no `/`), such as a lock name or a child name.
///
/// # Errors
/// [`Error::InvalidArgument`] naming the value.
pub fn validate_node_name(what: &'static str, name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::invalid_argument(what, "\"\"", "must not be empty"));
    }
    if name.contains('/') {
        return Err(Error::invalid_argument(what, name, "must not contain '/'"));
    }
    validate_path(&format!("/{name}")).map_err(|_| Error::invalid_argument(what, name, "is not a valid node name"))
}

/// Joins a parent path and a child name with exactly one `/` (Curator's `ZKPaths.makePath`).
pub fn join(parent: &str, child: &str) -> String {
    let parent = parent.trim_end_matches('/');
    let child = child.trim_start_matches('/');
    if child.is_empty() {
        return if parent.is_empty() { "/".to_string() } else { parent.to_string() };
    }
    format!("{parent}/{child}")
}

/// The last segment of a path (`/a/b` → `b`).
pub fn node_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The parent of a path (`/a/b` → `/a`, `/a` → `/`).
pub fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

/// Refuses a namespace in ZooKeeper's own `/zookeeper` subtree (quotas, the dynamic config):
/// every write of the client would land there.
fn refuse_reserved(namespace: &str, prefix: &str) -> Result<()> {
    if prefix == "/zookeeper" || prefix.starts_with("/zookeeper/") {
        return Err(Error::InvalidPath {
            path: namespace.to_string(),
            reason: "the /zookeeper subtree is reserved for ZooKeeper itself",
        });
    }
    Ok(())
}

/// A client namespace: every recipe path is sent as `/<namespace><path>` and stripped on the way back.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Namespace {
    /// `""` for none, else `/ns` (validated, no trailing slash).
    prefix: String,
}

impl Namespace {
    /// Parses a namespace like Curator's builder does: `"app"` or `"app/sub"`, no leading slash
    /// needed; empty means none.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] when `/<namespace>` is not a valid path.
    pub fn new(namespace: &str) -> Result<Namespace> {
        let trimmed = namespace.trim_start_matches('/');
        if trimmed.is_empty() {
            return Ok(Namespace::default());
        }
        let prefix = format!("/{trimmed}");
        validate_path(&prefix)?;
        refuse_reserved(namespace, &prefix)?;
        Ok(Namespace { prefix })
    }

    /// Parses a namespace as Curator's `usingNamespace` does: `"app"` or `"app/sub"`, without
    /// a leading slash; empty means none.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] naming the namespace as given when `/<namespace>` is not a valid
    /// path (a leading slash included: `"/a"` would be `//a`).
    pub fn strict(namespace: &str) -> Result<Namespace> {
        if namespace.is_empty() {
            return Ok(Namespace::default());
        }
        let prefix = format!("/{namespace}");
        match validate_path(&prefix) {
            Ok(()) => {
                refuse_reserved(namespace, &prefix)?;
                Ok(Namespace { prefix })
            }
            Err(Error::InvalidPath { reason, .. }) => Err(Error::InvalidPath { path: namespace.to_string(), reason }),
            Err(other) => Err(other),
        }
    }

    /// The namespace as a path (`/ns`), or `""` when there is none.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Turns a recipe path into the path sent to ZooKeeper.
    pub fn fix(&self, path: &str) -> String {
        if self.prefix.is_empty() {
            path.to_string()
        } else if path == "/" {
            self.prefix.clone()
        } else {
            format!("{}{}", self.prefix, path)
        }
    }

    /// Turns a path seen on the server back into a recipe path.
    pub fn unfix<'a>(&self, path: &'a str) -> &'a str {
        if self.prefix.is_empty() {
            return path;
        }
        match path.strip_prefix(self.prefix.as_str()) {
            Some("") => "/",
            Some(rest) if rest.starts_with('/') => rest,
            _ => path,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_table() {
        let good = ["/", "/a", "/a/b", "/a-b_c.d", "/ü", "/lock-0000000001", "/a/.b", "/a/b.."];
        for p in good {
            assert!(validate_path(p).is_ok(), "{p} should be valid");
        }
        let bad = [
            ("", "empty"),
            ("a", "start with"),
            ("/a/", "end with"),
            ("//a", "empty segment"),
            ("/a//b", "empty segment"),
            ("/a/./b", "relative"),
            ("/a/..", "relative"),
            ("/.", "relative"),
            ("/a\0b", "forbidden"),
            ("/a\u{1}", "forbidden"),
            ("/a\u{fff5}", "forbidden"),
            ("/emoji-\u{1f600}", "above U+FFFF"),
            ("/a/\u{10000}", "above U+FFFF"),
        ];
        for (p, why) in bad {
            let err = validate_path(p).expect_err(p);
            let text = err.to_string();
            assert!(text.contains(why), "{p:?}: {text}");
            assert!(matches!(err, Error::InvalidPath { ref path, .. } if path == p));
        }
    }

    #[test]
    fn names() {
        assert!(validate_node_name("lock name", "lock-").is_ok());
        assert!(validate_node_name("lock name", "").is_err());
        assert!(validate_node_name("lock name", "a/b").is_err());
        assert!(validate_node_name("lock name", "..").is_err());
    }

    #[test]
    fn joining_and_splitting() {
        assert_eq!(join("/a", "b"), "/a/b");
        assert_eq!(join("/a/", "/b"), "/a/b");
        assert_eq!(join("/", "b"), "/b");
        assert_eq!(join("/a", ""), "/a");
        assert_eq!(parent("/a/b"), "/a");
        assert_eq!(node_name("/a/b"), "b");
        assert_eq!(parent("/a"), "/");
    }

    #[test]
    fn namespace_fix_unfix() {
        let ns = Namespace::new("app").unwrap();
        assert_eq!(ns.fix("/locks/x"), "/app/locks/x");
        assert_eq!(ns.fix("/"), "/app");
        assert_eq!(ns.unfix("/app/locks/x"), "/locks/x");
        assert_eq!(ns.unfix("/app"), "/");
        assert_eq!(ns.unfix("/apple"), "/apple");
        let none = Namespace::new("").unwrap();
        assert_eq!(none.fix("/x"), "/x");
        assert!(Namespace::new("a//b").is_err());
    }
}
