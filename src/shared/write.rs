//! The conditional write both the shared values and the atomic counters stand on: a versioned
//! set (or a create where the node is absent) whose lost reply is never re-applied blindly.
//!
//! A versioned set retried after a lost reply carries the same version, so at most one of its
//! sends can apply. What a retry cannot tell by itself is whether the *first* send applied when
//! the retry is refused (`BadVersion`, `NodeExists`, `NoNode`): the node is read again and the
//! write counts as not applied only when the node proves it (one version past the expected one,
//! holding other data: someone else's write won that version). Otherwise the outcome is
//! [`Error::OutcomeUnknown`].
//!
//! A versioned set is followed by a read of the node in the same pipeline (both requests are
//! queued at once; ZooKeeper answers a session's requests in order, so the read sees the node
//! right after the set was applied or refused). A refused set thus comes with the node's current
//! data and version, and the next attempt needs no read round trip of its own.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use zookeeper_client as zk;

use crate::error::{Error, ErrorCode, Result};
use crate::framework::paths;
use crate::CuratorClient;

/// A node's data and metadata, or `None` when it does not exist.
pub(crate) type Node = Option<(Vec<u8>, zk::Stat)>;

/// What a conditional write did.
pub(crate) enum Written {
    /// Applied (exactly once); the node's new metadata.
    Applied(zk::Stat),
    /// Not applied: the node was not at the expected version (or existed, for a create). `now`:
    /// the node as read right behind the refused set, when that read came back.
    Conflict { now: Option<Node> },
}

/// The node's data and metadata, or `None` when it does not exist.
pub(crate) async fn read(client: &CuratorClient, path: &str, deadline: Option<Instant>) -> Result<Node> {
    let fixed = client.fix_path(path);
    let f = fixed.as_str();
    match client.with_retry(path, deadline, |zk| async move { zk.get_data(f).await }).await {
        Ok(found) => Ok(Some(found)),
        Err(e) if e.is(ErrorCode::NoNode) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Writes `data` to `path` if the node's version is `expected`, or creates it (parents as
/// containers) when `expected` is `None`. Retried under the client's retry policy until
/// `deadline`; see the module's documentation for a lost reply.
pub(crate) async fn conditional_write(
    client: &CuratorClient,
    path: &str,
    expected: Option<i32>,
    data: &[u8],
    deadline: Option<Instant>,
    during: &'static str,
) -> Result<Written> {
    let fixed = client.fix_path(path);
    let f = fixed.as_str();
    let sends = AtomicU32::new(0);
    // The node as read behind the last refused set (`None`: not read, or no set refused).
    let mut now: Option<Node> = None;
    let result = match expected {
        Some(version) => {
            let set = client
                .with_retry(path, deadline, |zk| {
                    sends.fetch_add(1, Ordering::Relaxed);
                    // Both queued now, in this order: the read sees the node right after the set.
                    let set = zk.set_data(f, data, Some(version));
                    read_behind(set, zk.get_data(f))
                })
                .await;
            refused(path, set, &mut now)
        }
        None => {
            let acls = client.raw_acls_for(f);
            let options = &zk::CreateMode::Persistent.with_acls(zk::Acls::new(&acls));
            let mut made_parents = false;
            loop {
                let created = client
                    .with_retry(path, deadline, |zk| {
                        sends.fetch_add(1, Ordering::Relaxed);
                        // As for the set: the read sees the node right after the create.
                        async move {
                            let create = zk.create(f, data, options);
                            let read = zk.get_data(f);
                            read_behind(async move { create.await.map(|(stat, _)| stat) }, read).await
                        }
                    })
                    .await;
                let created = refused(path, created, &mut now);
                match created {
                    Err(e) if e.is(ErrorCode::NoNode) && !made_parents && paths::parent(f) != "/" => {
                        // No parent: nothing was created. Make the parents and try once more.
                        made_parents = true;
                        client.create_parents(paths::parent(f), deadline).await?;
                        sends.store(0, Ordering::Relaxed);
                    }
                    other => break other,
                }
            }
        }
    };
    match result {
        Ok(stat) => Ok(Written::Applied(stat)),
        Err(e) if [ErrorCode::BadVersion, ErrorCode::NodeExists, ErrorCode::NoNode].iter().any(|c| e.is(*c)) => {
            if sends.load(Ordering::Relaxed) <= 1 {
                return Ok(Written::Conflict { now });
            }
            // A send before this refusal may have applied: only the node can tell.
            let next_version = expected.map_or(0, |v| v.wrapping_add(1));
            let node = match now {
                Some(node) => node,
                None => read(client, path, deadline).await?,
            };
            match node {
                Some((now, stat)) if stat.version == next_version && now != data => {
                    Ok(Written::Conflict { now: Some(Some((now, stat))) })
                }
                _ => Err(Error::OutcomeUnknown { path: path.to_string(), during }),
            }
        }
        Err(e) => Err(e),
    }
}

type ZkResult<T> = std::result::Result<T, zk::Error>;

/// A write's outcome, with (when the node's state refused it) the node as read right behind it.
type Behind = std::result::Result<zk::Stat, (zk::Error, Option<Node>)>;

/// Awaits `write`, and when the server refused it for the node's state (a version, an existing
/// or missing node) also `read`, queued right behind it; otherwise `read` is dropped unawaited
/// (its reply is discarded).
async fn read_behind(
    write: impl std::future::Future<Output = ZkResult<zk::Stat>>,
    read: impl std::future::Future<Output = ZkResult<(Vec<u8>, zk::Stat)>>,
) -> ZkResult<Behind> {
    match write.await {
        Ok(stat) => Ok(Ok(stat)),
        Err(e @ (zk::Error::BadVersion | zk::Error::NoNode | zk::Error::NodeExists)) => {
            let now = match read.await {
                Ok(found) => Some(Some(found)),
                Err(zk::Error::NoNode) => Some(None),
                Err(_) => None,
            };
            Ok(Err((e, now)))
        }
        Err(e) => Err(e),
    }
}

/// The write's outcome as a `Result`, keeping in `now` the node read behind a refusal.
fn refused(path: &str, outcome: Result<Behind>, now: &mut Option<Node>) -> Result<zk::Stat> {
    match outcome {
        Ok(Ok(stat)) => Ok(stat),
        Ok(Err((e, read))) => {
            *now = read;
            Err(Error::zk(path, e))
        }
        Err(e) => Err(e),
    }
}
