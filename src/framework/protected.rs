//! Protected ephemeral(-sequential) create (Curator's `withProtection()`).
//!
//! The node is named `_c_<uuid>-<name>` so that, after a connection loss hid the create's outcome,
//! the client can find its node by that prefix instead of creating a second one. A match owned by an
//! older session is discarded and deleted (CURATOR-498). If the create finally fails, or the caller
//! drops the future, any node it may have left is deleted in the background.

use std::time::Instant;

use tracing::debug;
use zookeeper_client as zk;

use super::client::{CuratorClient, SessionIdentity};
use super::paths;
use crate::error::{Error, ErrorKind, Result};

/// Curator's protection prefix: `_c_` + 36-char UUID + `-`.
pub const PROTECTED_PREFIX_LEN: usize = 40;

/// Builds the protected name prefix `_c_<uuid>-` for a fresh random id.
pub fn new_protected_prefix() -> String {
    format!("_c_{}-", uuid::Uuid::new_v4())
}

/// True when `name` carries Curator's protection prefix (`ProtectedUtils.isProtectedZNode`).
pub fn is_protected(name: &str) -> bool {
    name.len() > PROTECTED_PREFIX_LEN
        && name.starts_with("_c_")
        && name.as_bytes()[39] == b'-'
        && uuid::Uuid::try_parse(&name[3..39]).is_ok()
}

/// Strips a protection prefix, if any (`ProtectedUtils.normalize`).
pub fn strip_protection(name: &str) -> &str {
    if is_protected(name) {
        &name[PROTECTED_PREFIX_LEN..]
    } else {
        name
    }
}

/// A node made by a protected create.
#[derive(Clone, Debug)]
pub struct CreatedNode {
    /// Full path as recipes see it (without namespace).
    pub path: String,
    /// The node's name (last segment).
    pub name: String,
    /// The sequence number ZooKeeper appended (-1 for non-sequential nodes).
    pub sequence: i64,
    /// The zxid of the create: strictly increasing across the whole ensemble's history.
    pub czxid: i64,
    /// The session that owns the (ephemeral) node.
    pub session: SessionIdentity,
}

/// Arms a background clean-up of `_c_<uuid>-` nodes until the create is known to have failed
/// or succeeded and been handed over.
struct CleanupOnDrop<'a> {
    client: &'a CuratorClient,
    fixed_parent: &'a str,
    prefix: &'a str,
    armed: bool,
}

impl Drop for CleanupOnDrop<'_> {
    fn drop(&mut self) {
        if self.armed {
            debug!(parent = self.fixed_parent, prefix = self.prefix, "protected create abandoned; cleaning up");
            drop(self.client.inner.deletes.delete_protected(self.fixed_parent.to_string(), self.prefix.to_string()));
        }
    }
}

impl CuratorClient {
    /// Creates `<parent>/_c_<uuid>-<name>` as a protected node (ephemeral-sequential by default in the
    /// recipes), creating missing parents as containers. With `list_after`, the children of `parent`
    /// are listed in the same pipeline right behind the create (ZooKeeper answers a session's
    /// requests in order, so the listing contains the new node) and returned too.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] / [`Error::InvalidArgument`]; the last server error when retries are
    /// exhausted; [`Error::DeadlineExceeded`]; [`Error::Closed`].
    ///
    /// # Cancel safety
    /// Cancel safe: if dropped, any node the create may have made is deleted in the background.
    pub async fn create_protected(
        &self,
        parent: &str,
        name: &str,
        data: &[u8],
        mode: zk::CreateMode,
        deadline: Option<Instant>,
        list_after: bool,
    ) -> Result<(CreatedNode, Option<Vec<String>>)> {
        paths::validate_path(parent)?;
        paths::validate_node_name("node name", name)?;
        if self.is_closed() {
            return Err(Error::Closed { path: parent.to_string() });
        }
        let fixed_parent = self.fix_path(parent);
        let prefix = new_protected_prefix();
        let fixed_base = paths::join(&fixed_parent, &format!("{prefix}{name}"));
        let sequential = matches!(mode, zk::CreateMode::EphemeralSequential | zk::CreateMode::PersistentSequential);
        let ephemeral = matches!(mode, zk::CreateMode::EphemeralSequential | zk::CreateMode::Ephemeral);
        let acls = self.acls();
        let options = mode.with_acls(acls);
        let mut cleanup = CleanupOnDrop { client: self, fixed_parent: &fixed_parent, prefix: &prefix, armed: true };

        let start = Instant::now();
        let first_session = self.session();
        let mut retry_count = 0u32;
        // Parents are made as CONTAINER nodes, which the server deletes once they are empty again;
        // it may do so between our making them and our create (or delete an ancestor while we
        // walk down), so a NoNode gets a few rounds of parent creation, not just one.
        let mut parent_rounds = 0u32;
        let mut need_lookup = false;
        loop {
            let zk = match self.connected_zk(parent, deadline).await {
                Ok(zk) => zk,
                Err(e) => {
                    self.backoff_or_fail(e, &mut retry_count, start, deadline, parent).await?;
                    continue;
                }
            };
            let session = self.session();
            if need_lookup {
                // Did the create whose reply we lost actually happen? Look for our prefix.
                match self.find_protected(&zk, &fixed_parent, &prefix, session, first_session, ephemeral).await {
                    Ok(Some((node, children))) => {
                        cleanup.armed = false;
                        return Ok((node, list_after.then_some(children)));
                    }
                    Ok(None) => {}
                    Err(e) => {
                        self.backoff_or_fail(Error::zk(parent, e), &mut retry_count, start, deadline, parent).await?;
                        continue;
                    }
                }
            }
            // Both requests are queued right now, in this order; they travel in one pipeline.
            let create = zk.create(&fixed_base, data, &options);
            let listing = list_after.then(|| zk.list_children(&fixed_parent));
            let created = match deadline {
                Some(d) => tokio::time::timeout_at(d.into(), create).await.unwrap_or(Err(zk::Error::Timeout)),
                None => create.await,
            };
            match created {
                Ok((stat, seq)) => {
                    let name = if sequential { format!("{prefix}{name}{seq}") } else { format!("{prefix}{name}") };
                    let children = match listing {
                        Some(listing) => listing.await.ok(),
                        None => None,
                    };
                    let node = CreatedNode {
                        path: paths::join(parent, &name),
                        name,
                        sequence: if sequential { seq.into_i64() } else { -1 },
                        czxid: stat.czxid,
                        session,
                    };
                    cleanup.armed = false;
                    return Ok((node, children));
                }
                Err(zk::Error::NoNode) if parent_rounds < 5 => {
                    drop(listing);
                    parent_rounds += 1;
                    match self.create_parents(&fixed_parent, deadline).await {
                        // An ancestor vanished under us (container reaped): next round.
                        Ok(()) | Err(Error::ZooKeeper { source: zk::Error::NoNode, .. }) => {}
                        Err(e) => return Err(e),
                    }
                }
                Err(zk::Error::Timeout) if deadline.is_some_and(|d| Instant::now() >= d) => {
                    return Err(super::client::deadline_exceeded(parent, "creating a node under", start));
                }
                Err(e) if matches!(crate::error::classify(&e), ErrorKind::Retryable | ErrorKind::SessionLost) => {
                    drop(listing);
                    need_lookup = true;
                    self.backoff_or_fail(Error::zk(parent, e), &mut retry_count, start, deadline, parent).await?;
                }
                Err(e) => {
                    // The server refused the create: no node was made.
                    cleanup.armed = false;
                    return Err(Error::zk(parent, e));
                }
            }
        }
    }

    /// Lists `fixed_parent` and returns our protected node if it exists and belongs to the current
    /// session (an ephemeral match from an older session is deleted and ignored: CURATOR-498).
    async fn find_protected(
        &self,
        zk: &zk::Client,
        fixed_parent: &str,
        prefix: &str,
        session: SessionIdentity,
        first_session: SessionIdentity,
        ephemeral: bool,
    ) -> std::result::Result<Option<(CreatedNode, Vec<String>)>, zk::Error> {
        let children = match zk.list_children(fixed_parent).await {
            Ok(children) => children,
            Err(zk::Error::NoNode) => return Ok(None),
            Err(e) => return Err(e),
        };
        let Some(found) = children.iter().find(|c| c.starts_with(prefix)).cloned() else {
            return Ok(None);
        };
        let fixed = paths::join(fixed_parent, &found);
        if ephemeral && session != first_session {
            drop(self.inner.deletes.delete(fixed));
            return Ok(None);
        }
        let Some(stat) = zk.check_stat(&fixed).await? else {
            return Ok(None);
        };
        if ephemeral && stat.ephemeral_owner != session.id {
            drop(self.inner.deletes.delete(fixed));
            return Ok(None);
        }
        let sequence = parse_sequence(&found).unwrap_or(-1);
        let node = CreatedNode {
            path: paths::join(self.unfix_path(fixed_parent), &found),
            name: found,
            sequence,
            czxid: stat.czxid,
            session,
        };
        Ok(Some((node, children)))
    }
}

/// The trailing sequence number of a sequential node name (10 digits, or 19 past `i32::MAX`).
pub fn parse_sequence(name: &str) -> Option<i64> {
    let digits = name.bytes().rev().take_while(u8::is_ascii_digit).count();
    if digits < 10 {
        return None;
    }
    let tail = &name[name.len() - digits.min(19)..];
    tail.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protection_prefix_rules() {
        let p = new_protected_prefix();
        assert_eq!(p.len(), PROTECTED_PREFIX_LEN);
        let name = format!("{p}lock-0000000007");
        assert!(is_protected(&name));
        assert_eq!(strip_protection(&name), "lock-0000000007");
        assert!(!is_protected(&p), "the bare prefix is not a protected node (length must exceed 40)");
        assert!(!is_protected("lock-0000000001"));
        assert!(!is_protected("_c_not-a-uuid-at-all-not-a-uuid-at-alll-lock-"));
        assert_eq!(parse_sequence(&name), Some(7));
        assert_eq!(parse_sequence("lock-12"), None);
        assert_eq!(parse_sequence("x-2147483648000000000"), Some(2147483648000000000));
    }
}
