//! [`HoldStateChanges`]: a hold's state changes (a claim's, an idempotency claim's), waited for
//! on the calling thread.

use std::sync::Arc;
use std::time::Duration;

use tracing::warn;

use super::Core;
use crate::deadline::deadline_after;
use crate::error::{Error, Result};
use crate::{HoldState, HoldStateStream};

/// The blocking form of a [`HoldStateStream`]: each change of a hold's state once, in order —
/// `Suspended`, `Held` again, ... — ending after `Lost`.
///
/// As an [`Iterator`] it ends (with a `tracing` warning) if used inside a tokio runtime context,
/// where it cannot wait; [`recv`](Self::recv) says so with a typed error instead.
///
/// # Examples
/// ```no_run
/// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
/// # let work = zk_curator::blocking::WorkClaims::new(&client, "/work/emails", "mailer-1")?;
/// for claim in work.claim(1)? {
///     let changes = work.state_changes(&claim);
///     std::thread::spawn(move || {
///         for state in changes {
///             println!("claim: {state:?}"); // pause on Suspended, stop on Lost
///         }
///     });
/// }
/// # Ok::<(), zk_curator::Error>(())
/// ```
#[derive(Debug)]
pub struct HoldStateChanges {
    inner: HoldStateStream,
    path: String,
    core: Arc<Core>,
}

impl HoldStateChanges {
    pub(crate) fn new(inner: HoldStateStream, path: &str, core: &Arc<Core>) -> Self {
        Self { inner, path: path.to_string(), core: core.clone() }
    }

    /// Waits for the next change: `Ok(None)` once `Lost` was returned.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `runtime` when called inside a tokio runtime context
    /// (nothing is taken from the stream).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let work = zk_curator::blocking::WorkClaims::new(&client, "/work/emails", "mailer-1")?;
    /// # let claim = work.claim(1)?.pop().unwrap();
    /// let mut changes = work.state_changes(&claim);
    /// while let Some(state) = changes.recv()? {
    ///     println!("{state:?}");
    /// }
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn recv(&mut self) -> Result<Option<HoldState>> {
        self.core.block_on(self.inner.next())
    }

    /// Like [`recv`](Self::recv), giving up after `timeout`. Returns within `timeout` (plus a few
    /// ms); a change not returned stays for the next call.
    ///
    /// # Errors
    /// [`Error::DeadlineExceeded`] naming the hold's node when no change came within `timeout`;
    /// otherwise as [`recv`](Self::recv).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let work = zk_curator::blocking::WorkClaims::new(&client, "/work/emails", "mailer-1")?;
    /// # let claim = work.claim(1)?.pop().unwrap();
    /// let mut changes = work.state_changes(&claim);
    /// match changes.recv_timeout(std::time::Duration::from_secs(1)) {
    ///     Ok(Some(state)) => println!("{state:?}"),
    ///     Ok(None) => println!("lost"),
    ///     Err(e) if e.kind() == zk_curator::ErrorKind::DeadlineExceeded => println!("no change"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<Option<HoldState>> {
        let deadline = deadline_after(timeout);
        let next = async { tokio::time::timeout_at(deadline.into(), self.inner.next()).await };
        match self.core.block_on(next)? {
            Ok(next) => Ok(next),
            Err(_) => Err(Error::deadline_exceeded(&self.path, "waiting for a state change of the hold of", timeout)
                .naming_timeout(timeout, timeout)),
        }
    }
}

impl Iterator for HoldStateChanges {
    type Item = HoldState;

    fn next(&mut self) -> Option<HoldState> {
        match self.recv() {
            Ok(next) => next,
            Err(e) => {
                warn!(path = %self.path, %e, "hold state changes cannot be waited for here: the iterator ends");
                None
            }
        }
    }
}
