//! A key's node: its two states (a claim, an outcome) as data, read and parsed, and the claim's
//! conditional delete.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tracing::debug;
use zookeeper_client as zk;

use crate::error::{Error, ErrorKind, Result};
use crate::framework::backoff::Backoff;
use crate::framework::SessionIdentity;
use crate::CuratorClient;

pub(super) const CLAIM_TAG: &str = "zk-curator-idempotency-claim";
pub(super) const OUTCOME_TAG: &str = "zk-curator-idempotency-outcome";
/// A claim's data version: it is created and never written.
pub(super) const CLAIM_VERSION: i32 = 0;

/// A state of a key node, as read.
pub(super) enum Found {
    Absent,
    Claim { owner: i64, mark: String, holder: String, czxid: i64, ctime: i64 },
    Outcome { mark: String, result: Vec<u8>, mtime: i64 },
}

pub(super) fn parse(path: &str, data: Vec<u8>, stat: &zk::Stat) -> Result<Found> {
    let corrupted = || Error::CorruptedValue {
        path: path.to_string(),
        len: data.len(),
        expected: "an idempotency claim or outcome (a tag line, a mark line, then the holder or result)",
    };
    let mut lines = data.splitn(3, |b| *b == b'\n');
    let (Some(tag), Some(mark), Some(rest)) = (lines.next(), lines.next(), lines.next()) else {
        return Err(corrupted());
    };
    let Ok(mark) = std::str::from_utf8(mark) else { return Err(corrupted()) };
    let mark = mark.to_string();
    match tag {
        t if t == CLAIM_TAG.as_bytes() && stat.ephemeral_owner != 0 => {
            let holder = String::from_utf8_lossy(rest).into_owned();
            Ok(Found::Claim { owner: stat.ephemeral_owner, mark, holder, czxid: stat.czxid, ctime: stat.ctime })
        }
        t if t == OUTCOME_TAG.as_bytes() && stat.ephemeral_owner == 0 => {
            let result = rest.to_vec();
            Ok(Found::Outcome { mark, result, mtime: stat.mtime })
        }
        _ => Err(corrupted()),
    }
}

/// Reads the key node on `zk` (one attempt).
pub(super) async fn read(zk: &zk::Client, path: &str, fixed: &str) -> Result<Found> {
    match zk.get_data(fixed).await {
        Ok((data, stat)) => parse(path, data, &stat),
        Err(zk::Error::NoNode) => Ok(Found::Absent),
        Err(e) => Err(Error::zk(path, e)),
    }
}

/// Runs `fut` until `deadline` (if any); past it, a deadline error for `path`.
pub(super) async fn until<T>(
    deadline: Option<Instant>,
    path: &str,
    started: Instant,
    during: &'static str,
    fut: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    match deadline {
        Some(d) => tokio::time::timeout_at(d.into(), fut)
            .await
            .unwrap_or_else(|_| Err(Error::deadline_exceeded(path, during, started.elapsed()))),
        None => fut.await,
    }
}

/// Deletes the claim at `fixed` if it is still the one `mark` made on `session` (ephemeral, that
/// session's, that mark: then only we can remove it while the session lives). Sent only while the
/// client is connected on that very session, through its handle, so a delete can never reach a
/// later claim at the path: once the session ended for the client (given up, replaced, closed)
/// nothing is sent and the claim goes with its session. Retries connection trouble until
/// `deadline` (None: until done or the session ends).
pub(super) async fn release_if_ours(
    client: &CuratorClient,
    session: SessionIdentity,
    path: &str,
    fixed: &str,
    mark: &str,
    deadline: Option<Instant>,
) -> Result<()> {
    let started = Instant::now();
    let mut backoff = Backoff::new(Duration::from_millis(20), Duration::from_secs(1));
    loop {
        if client.session_ended(session) {
            return Ok(());
        }
        let attempt = async {
            let (zk, now) = client.connected(path, deadline).await?;
            if now != session {
                return Ok(());
            }
            match read(&zk, path, fixed).await? {
                Found::Claim { owner, mark: m, .. } if owner == session.id && m == mark => {
                    match zk.delete(fixed, Some(CLAIM_VERSION)).await {
                        Ok(()) | Err(zk::Error::NoNode) | Err(zk::Error::BadVersion) => Ok(()),
                        Err(e) => Err(Error::zk(path, e)),
                    }
                }
                // Gone, someone else's, or our recorded outcome: nothing of this claim to free.
                _ => Ok(()),
            }
        };
        match until(deadline, path, started, "abandoning the idempotency claim", attempt).await {
            Ok(()) => return Ok(()),
            // The session ended (the server removed its ephemeral claim) or the client closed.
            Err(e) if matches!(e.kind(), ErrorKind::SessionLost | ErrorKind::Closed) => return Ok(()),
            Err(e) if e.kind() == ErrorKind::Retryable => {
                debug!(%e, path, "releasing an idempotency claim will retry");
                backoff.wait().await;
            }
            Err(e) => return Err(e),
        }
    }
}

pub(super) fn random_mark() -> String {
    uuid::Uuid::new_v4().to_string()
}

pub(super) fn now_millis() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
