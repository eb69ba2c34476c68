//! Protected ephemeral(-sequential) create (Curator's `withProtection()`).
//!
//! The node is named `_c_<uuid>-<name>` so that, after a connection loss hid the create's outcome,
//! the client can find its node by that prefix instead of creating a second one. A match owned by an
//! older session is discarded and deleted (CURATOR-498). If the create finally fails, or the caller
//! drops the future, any node it may have left is deleted in the background.

use std::time::Instant;

use tracing::debug;
use zookeeper_client as zk;

use super::acl::{self, Acl};
use super::client::CuratorClient;
use super::guaranteed_delete::DeleteTarget;
use super::node::CreateMode;
use super::paths;
use super::session::SessionIdentity;
use crate::error::{Error, ErrorCode, ErrorKind, Result};

/// Curator's protection prefix: `_c_` + 36-char UUID + `-`.
pub(crate) const PROTECTED_PREFIX_LEN: usize = 40;

/// Builds the protected name prefix `_c_<uuid>-` for a fresh random id.
pub(crate) fn new_protected_prefix() -> String {
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
#[non_exhaustive]
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

impl CuratorClient {
    /// Creates `<parent>/_c_<uuid>-<name>` as a protected node (ephemeral-sequential by default in the
    /// recipes), creating missing parents as containers. With `list_after`, the children of `parent`
    /// are listed in the same pipeline right behind the create (ZooKeeper answers a session's
    /// requests in order, so the listing contains the new node) and returned too; the listing is
    /// made on the node's own session.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] / [`Error::InvalidArgument`]; the last server error when retries are
    /// exhausted; [`Error::DeadlineExceeded`]; [`Error::Closed`].
    ///
    /// # Cancel safety
    /// Cancel safe: if dropped, any node the create may have made is deleted in the background.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn create_protected(
        &self,
        parent: &str,
        name: &str,
        data: &[u8],
        mode: CreateMode,
        deadline: Option<Instant>,
        list_after: bool,
        acls: Option<Vec<Acl>>,
    ) -> Result<(CreatedNode, Option<Vec<String>>)> {
        paths::validate_path(parent)?;
        paths::validate_node_name("node name", name)?;
        if self.is_closed() {
            return Err(Error::Closed { path: parent.to_string() });
        }
        let fixed_parent = self.fix_path(parent);
        let prefix = new_protected_prefix();
        let fixed_base = paths::join(&fixed_parent, &format!("{prefix}{name}"));
        let sequential = mode.is_sequential();
        let ephemeral = mode.is_ephemeral();
        let acls = match acls {
            Some(acls) if acls.is_empty() => {
                return Err(Error::invalid_argument("acl", "[]", "a node needs at least one ACL entry"))
            }
            Some(acls) => acl::to_raw(&acls),
            None => self.raw_acls_for(&fixed_base),
        };
        let options = mode.options(&acls);
        let mut cleanup =
            self.delete_on_drop(DeleteTarget::Protected { parent: fixed_parent.clone(), prefix: prefix.clone() });
        let mut retrying = self.retrying(parent, deadline);
        // Parents are made as CONTAINER nodes, which the server deletes once they are empty again;
        // it may do so between our making them and our create (or delete an ancestor while we
        // walk down), so a NoNode gets a few rounds of parent creation, not just one.
        let mut parent_rounds = 0u32;
        let mut need_lookup = false;
        loop {
            // The handle and the identity of its session, read together: the node and any
            // listing made on this handle belong to exactly this session.
            let (zk, session) = self.connected_retrying(&mut retrying).await?;
            if need_lookup {
                // Did the create whose reply we lost actually happen? Look for our prefix, within
                // the deadline (a silent connection must not hold the call past it).
                let lookup = self.find_protected(&zk, session, &fixed_parent, &prefix, ephemeral);
                let found = match deadline {
                    Some(d) => tokio::time::timeout_at(d.into(), lookup).await.unwrap_or(Err(zk::Error::Timeout)),
                    None => lookup.await,
                };
                match found {
                    Err(zk::Error::Timeout) if retrying.expired() => {
                        return Err(retrying.deadline_exceeded("looking for our node under"));
                    }
                    Ok(Some((node, children))) => {
                        cleanup.disarm();
                        return Ok((node, list_after.then_some(children)));
                    }
                    Ok(None) => {}
                    Err(e) => {
                        retrying.backoff_or_fail(Error::zk(parent, e)).await?;
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
                    // The listing rides in the same pipeline, but a silent connection may still
                    // hold its reply: never past the deadline (the caller lists again if need be).
                    let children = match (listing, deadline) {
                        (Some(listing), Some(d)) => {
                            tokio::time::timeout_at(d.into(), listing).await.ok().and_then(|listed| listed.ok())
                        }
                        (Some(listing), None) => listing.await.ok(),
                        (None, _) => None,
                    };
                    let node = CreatedNode {
                        path: paths::join(parent, &name),
                        name,
                        sequence: if sequential { seq.into_i64() } else { -1 },
                        czxid: stat.czxid,
                        session,
                    };
                    cleanup.disarm();
                    return Ok((node, children));
                }
                Err(zk::Error::NoNode) if parent_rounds < 5 => {
                    drop(listing);
                    parent_rounds += 1;
                    match self.create_parents(&fixed_parent, deadline).await {
                        // An ancestor vanished under us (container reaped): next round.
                        Ok(()) | Err(Error::ZooKeeper { code: ErrorCode::NoNode, .. }) => {}
                        Err(e) => return Err(e),
                    }
                }
                Err(zk::Error::Timeout) if retrying.expired() => {
                    return Err(retrying.deadline_exceeded("creating a node under"));
                }
                Err(e) if matches!(crate::error::classify(&e), ErrorKind::Retryable | ErrorKind::SessionLost) => {
                    drop(listing);
                    need_lookup = true;
                    retrying.backoff_or_fail(Error::zk(parent, e)).await?;
                }
                Err(e) => {
                    // The server refused the create: no node was made.
                    cleanup.disarm();
                    return Err(Error::zk(parent, e));
                }
            }
        }
    }

    /// Lists `fixed_parent` on `zk` (whose session is `session`) and returns our protected node if
    /// one exists that belongs to that session. Every other match — an ephemeral node of an older
    /// session (CURATOR-498), or a duplicate — is deleted in the background, so nothing of this
    /// create is left to block the lock path.
    async fn find_protected(
        &self,
        zk: &zk::Client,
        session: SessionIdentity,
        fixed_parent: &str,
        prefix: &str,
        ephemeral: bool,
    ) -> std::result::Result<Option<(CreatedNode, Vec<String>)>, zk::Error> {
        let children = match zk.list_children(fixed_parent).await {
            Ok(children) => children,
            Err(zk::Error::NoNode) => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut ours: Option<(String, zk::Stat)> = None;
        for found in children.iter().filter(|c| c.starts_with(prefix)) {
            let fixed = paths::join(fixed_parent, found);
            let Some(stat) = zk.check_stat(&fixed).await? else {
                continue;
            };
            let owned = !ephemeral || stat.ephemeral_owner == session.id;
            if owned && ours.is_none() {
                ours = Some((found.clone(), stat));
            } else {
                debug!(node = %fixed, owner = stat.ephemeral_owner, "protected match not ours to keep: deleting");
                drop(self.delete_fixed_in_background(fixed));
            }
        }
        let Some((name, stat)) = ours else {
            return Ok(None);
        };
        let node = CreatedNode {
            path: paths::join(self.unfix_path(fixed_parent), &name),
            sequence: parse_sequence(&name).unwrap_or(-1),
            name,
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

/// The lookup after a lost create reply, against a real ZooKeeper: which match it keeps.
#[cfg(all(test, feature = "testing"))]
mod lookup_tests {
    use std::time::Duration;

    use super::*;
    use crate::testing::TestingServer;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn lookup_keeps_the_match_of_the_looking_session_and_deletes_the_others() {
        let server = TestingServer::start().await.expect("ZooKeeper for tests");
        let connect = server.connect_string();
        let client = CuratorClient::builder(&connect).session_timeout(Duration::from_secs(10)).connect().await.unwrap();
        let other = zk::Client::connect(&connect).await.unwrap();
        let parent = "/lookup";
        other.create(parent, b"", &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())).await.unwrap();
        let prefix = new_protected_prefix();
        let base = format!("{parent}/{prefix}lock-");
        let ephemeral = zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
        // A match of another (older) session first, then ours, then a second one of the other:
        // whatever order the server lists them in, only ours may be kept.
        let (zk, session) = client.connected(parent, None).await.unwrap();
        other.create(&base, b"old", &ephemeral).await.unwrap();
        let (_, ours) = zk.create(&base, b"ours", &ephemeral).await.unwrap();
        other.create(&base, b"old", &ephemeral).await.unwrap();

        let (found, children) =
            client.find_protected(&zk, session, parent, &prefix, true).await.unwrap().expect("our node is found");
        assert_eq!(found.name, format!("{prefix}lock-{ours}"));
        assert_eq!(found.session, session);
        assert_eq!(children.len(), 3, "the listing it looked at");
        // Every other match is deleted, so nothing of this create is left to block the lock path.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let left = other.list_children(parent).await.unwrap();
            if left == [found.name.clone()] {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "other matches not deleted: {left:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }

        // A lookup on a session that owns no match finds nothing (and deletes what it sees).
        let fresh = CuratorClient::builder(&connect).connect().await.unwrap();
        let (zk2, session2) = fresh.connected(parent, None).await.unwrap();
        assert!(fresh.find_protected(&zk2, session2, parent, &prefix, true).await.unwrap().is_none());
        client.close().await;
        fresh.close().await;
    }
}
