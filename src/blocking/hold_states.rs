//! [`HoldStateChanges`]: a hold's state changes (a claim's, an idempotency claim's), waited for
//! on the calling thread.

use std::sync::Arc;
use std::time::Duration;

use super::Core;
use crate::error::Result;
use crate::locks::{HoldState, HoldStateStream};

/// The blocking form of a [`HoldStateStream`]: each change of a hold's state once, in order —
/// `Suspended`, `Held` again, ... — ending after `Lost`.
///
/// As an [`Iterator`] it ends (with a `tracing` warning) if used inside a tokio runtime context,
/// where it cannot wait; [`next_timeout`](Self::next_timeout) says so with a typed error instead.
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

    /// The next change within `timeout`: `Ok(None)` once `Lost` was returned. Returns within
    /// `timeout` (plus a few ms); a change not returned stays for the next call.
    ///
    /// # Errors
    /// [`Error::DeadlineExceeded`](crate::Error::DeadlineExceeded) naming the hold's node when no change came within `timeout`;
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `runtime` when called inside a tokio runtime context
    /// (nothing is taken from the stream).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let work = zk_curator::blocking::WorkClaims::new(&client, "/work/emails", "mailer-1")?;
    /// # let claim = work.claim(1)?.pop().unwrap();
    /// let mut changes = work.state_changes(&claim);
    /// match changes.next_timeout(std::time::Duration::from_secs(1)) {
    ///     Ok(Some(state)) => println!("{state:?}"),
    ///     Ok(None) => println!("lost"),
    ///     Err(e) if e.kind() == zk_curator::ErrorKind::DeadlineExceeded => println!("no change"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn next_timeout(&mut self, timeout: impl Into<crate::Deadline>) -> Result<Option<HoldState>> {
        let timeout = timeout.into().remaining();
        self.core.feed_next_timeout(self.inner.next(), timeout, &self.path, "waiting for a state change of the hold of")
    }

    /// Waits for the next change: `Ok(None)` once `Lost` was returned.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `runtime` when called inside a tokio runtime context
    /// (nothing is taken from the stream).
    #[deprecated(note = "use `Iterator::next` (`for state in changes`), or `next_timeout`")]
    pub fn recv(&mut self) -> Result<Option<HoldState>> {
        self.core.block_on(self.inner.next())
    }

    /// Like [`recv`](Self::recv), giving up after `timeout`.
    ///
    /// # Errors
    /// As [`next_timeout`](Self::next_timeout).
    #[deprecated(note = "use `next_timeout`")]
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<Option<HoldState>> {
        self.next_timeout(timeout)
    }
}

impl Iterator for HoldStateChanges {
    type Item = HoldState;

    /// Waits for the next change; `None` after `Lost` (or when called inside a tokio runtime
    /// context: logged).
    fn next(&mut self) -> Option<HoldState> {
        self.core.feed_next(self.inner.next(), &self.path)
    }
}
