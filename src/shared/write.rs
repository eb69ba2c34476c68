//! The conditional write both the shared values and the atomic counters stand on: a versioned
//! set (or a create where the node is absent) whose lost reply is never re-applied blindly.
//!
//! A versioned set retried after a lost reply carries the same version, so at most one of its
//! sends can apply. What a retry cannot tell by itself is whether the *first* send applied when
//! the retry is refused (`BadVersion`, `NodeExists`, `NoNode`): the node is read again and the
//! write counts as not applied only when the node proves it (one version past the expected one,
//! holding other data: someone else's write won that version). Otherwise the outcome is
//! [`Error::OutcomeUnknown`].

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use zookeeper_client as zk;

use crate::error::{Error, ErrorCode, Result};
use crate::framework::paths;
use crate::CuratorClient;

/// What a conditional write did.
pub(crate) enum Written {
    /// Applied (exactly once); the node's new metadata.
    Applied(zk::Stat),
    /// Not applied: the node was not at the expected version (or existed, for a create).
    Conflict,
}

/// The node's data and metadata, or `None` when it does not exist.
pub(crate) async fn read(
    client: &CuratorClient,
    path: &str,
    deadline: Option<Instant>,
) -> Result<Option<(Vec<u8>, zk::Stat)>> {
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
    let result = match expected {
        Some(version) => {
            client
                .with_retry(path, deadline, |zk| {
                    sends.fetch_add(1, Ordering::Relaxed);
                    async move { zk.set_data(f, data, Some(version)).await }
                })
                .await
        }
        None => {
            let acls = client.raw_acls_for(f);
            let options = &zk::CreateMode::Persistent.with_acls(zk::Acls::new(&acls));
            let mut made_parents = false;
            loop {
                let created = client
                    .with_retry(path, deadline, |zk| {
                        sends.fetch_add(1, Ordering::Relaxed);
                        async move { zk.create(f, data, options).await.map(|(stat, _)| stat) }
                    })
                    .await;
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
                return Ok(Written::Conflict);
            }
            // A send before this refusal may have applied: only the node can tell.
            let next_version = expected.map_or(0, |v| v.wrapping_add(1));
            match read(client, path, deadline).await? {
                Some((now, stat)) if stat.version == next_version && now != data => Ok(Written::Conflict),
                _ => Err(Error::OutcomeUnknown { path: path.to_string(), during }),
            }
        }
        Err(e) => Err(e),
    }
}
