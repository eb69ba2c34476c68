//! Cooperative revocation (Curator's `Revoker` / `RevocationListener`): anyone may ask the holder
//! of a lock node to release it by writing `__REVOKE__` into the node; a holder learns of it through
//! [`Hold::revocation_requested`](crate::locks::Hold::revocation_requested) (its monitor watches the node's
//! data) and decides whether to release. Wire-compatible with Curator in both directions.

use crate::error::Result;
use crate::framework::paths;
use crate::CuratorClient;

/// The bytes Curator writes into a node to ask its holder to release (`__REVOKE__`, ASCII).
pub(crate) const REVOKE_MESSAGE: &[u8] = b"__REVOKE__";

/// Asks lock holders to release (Curator's `Revoker`).
#[derive(Debug)]
#[non_exhaustive]
pub struct Revoker;

impl Revoker {
    /// Writes `__REVOKE__` into `node_path` (a full lock-node path, e.g. from
    /// `participant_nodes()`), asking its holder to release. A node that is already gone is not an
    /// error. Works on Curator's holders (made revocable with `makeRevocable`) and on ours.
    ///
    /// # Errors
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) naming the path; server errors after the client's retries (e.g.
    /// `NoAuth`); [`Error::Closed`](crate::Error::Closed).
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call may or may not have written the request.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// let mutex = zk_curator::locks::InterProcessMutex::new(&client, "/locks/report")?;
    /// if let Some(holder) = mutex.participant_nodes().await?.first() {
    ///     zk_curator::locks::Revoker::attempt_revoke(&client, holder).await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn attempt_revoke(client: &CuratorClient, node_path: &str) -> Result<()> {
        paths::validate_path(node_path)?;
        let fixed = client.fix_path(node_path);
        let fixed = fixed.as_str();
        let written =
            client.with_retry(node_path, None, |zk| async move { zk.set_data(fixed, REVOKE_MESSAGE, None).await });
        match written.await {
            Ok(_) => Ok(()),
            Err(e) if e.is(crate::ErrorCode::NoNode) => Ok(()),
            Err(e) => Err(e),
        }
    }
}
