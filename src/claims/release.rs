//! Background releases: claims of a cancelled call, and claim transactions of unknown outcome,
//! released after the caller left; the handle counts them so that the next claim waits for them.

use std::sync::Arc;
use std::time::Duration;

use tracing::debug;
use zookeeper_client as zk;

use crate::error::Result;
use crate::framework::SessionIdentity;

use super::claim::Claim;
use super::work_claims::{Inner, WorkClaims};

/// One pending background release of a cancelled claim; counts down when dropped.
pub(super) struct PendingRelease(pub(super) Arc<Inner>);

impl Drop for PendingRelease {
    fn drop(&mut self) {
        self.0.releasing.send_modify(|n| *n = n.saturating_sub(1));
    }
}

impl WorkClaims {
    pub(super) async fn release_abandoned(&self, result: Result<Vec<Claim>>) {
        if let Ok(claims) = result {
            debug!(count = claims.len(), "claim cancelled: releasing its claims");
            for claim in claims {
                let _ = self.release(claim.item()).await;
            }
        }
    }

    /// A claim transaction whose outcome stayed unknown: delete the claim node once the connection
    /// is back, if it is this session's.
    pub(super) fn release_unknown_in_background(&self, item: String, session: SessionIdentity, mark: Vec<u8>) {
        let this = self.clone();
        // Counted as a pending release, which the next claim waits for.
        self.inner.releasing.send_modify(|n| *n += 1);
        let pending = PendingRelease(self.inner.clone());
        self.inner.client.runtime().spawn(async move {
            let _pending = pending;
            let claim = this.claim_fixed(&item);
            let client = &this.inner.client;
            let mut failed_requests = 0;
            // Until the session ends (which removes the node anyway): a cut longer than the
            // connection timeout must not leave the node behind on a session that lives on.
            while failed_requests < 100 {
                let (zk, now) = match client.connected(&this.inner.path, None).await {
                    Ok(connected) => connected,
                    Err(e) if e.is_retryable() && !client.status_now().has_ended(session) => {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                    Err(_) => return,
                };
                if now != session {
                    return;
                }
                match zk.get_data(&claim).await {
                    // Only the node this call made: one another call on this session made is held.
                    Ok((data, s)) if s.ephemeral_owner == session.id && data == mark => {
                        if zk.delete(&claim, Some(s.version)).await.is_ok() {
                            return;
                        }
                    }
                    Ok(_) | Err(zk::Error::NoNode) => return,
                    Err(_) => {}
                }
                failed_requests += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
    }
}
