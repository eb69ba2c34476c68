//! [`IdempotencyKeys`], blocking.

use std::sync::Arc;
use std::time::Duration;

use super::{Core, CuratorClient, HoldStateChanges};
use crate::deadline::deadline_after;
use crate::error::Result;
use crate::framework::SessionIdentity;
use crate::idempotency::Retention;
use crate::locks::HoldState;

/// A blocking [`IdempotencyKeys`](crate::idempotency::IdempotencyKeys): one execution per key, every duplicate
/// answered with the recorded result.
///
/// # Examples
/// ```no_run
/// use std::time::Duration;
/// use zk_curator::blocking::{Begin, IdempotencyKeys};
/// use zk_curator::idempotency::Retention;
///
/// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
/// let keys = IdempotencyKeys::new(&client, "/forms/submitted", Retention::Ttl(Duration::from_secs(3600)))?;
/// if let Begin::Started(claim) = keys.begin("form-7f3a")? {
///     claim.complete(b"accepted".to_vec())?;
/// }
/// # Ok::<(), zk_curator::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct IdempotencyKeys {
    inner: crate::idempotency::IdempotencyKeys,
    core: Arc<Core>,
}

/// What [`IdempotencyKeys::begin`] found (the blocking [`Begin`](crate::idempotency::Begin)).
#[derive(Debug)]
#[must_use = "a Started claim must be completed or abandoned"]
#[non_exhaustive]
pub enum Begin {
    /// The key is now claimed by the caller.
    Started(IdempotencyClaim),
    /// Someone else's claim is live.
    InProgress {
        /// The claimant's description.
        holder: String,
    },
    /// The recorded result.
    Done {
        /// The bytes given to `complete`.
        result: Vec<u8>,
    },
}

/// A blocking [`IdempotencyClaim`](crate::idempotency::IdempotencyClaim); dropping it abandons it (on any
/// thread, in the background).
#[derive(Debug)]
pub struct IdempotencyClaim {
    inner: crate::idempotency::IdempotencyClaim,
    core: Arc<Core>,
}

impl IdempotencyKeys {
    /// As [`crate::idempotency::IdempotencyKeys::new`].
    ///
    /// # Errors
    /// As [`crate::idempotency::IdempotencyKeys::new`].
    pub fn new(client: &CuratorClient, base: &str, retention: Retention) -> Result<Self> {
        let inner = crate::idempotency::IdempotencyKeys::new(client.core().client(), base, retention)?;
        Ok(Self { inner, core: client.core().clone() })
    }

    /// The base path.
    pub fn base(&self) -> &str {
        self.inner.base()
    }

    fn wrap(&self, begun: crate::idempotency::Begin) -> Begin {
        match begun {
            crate::idempotency::Begin::Started(inner) => {
                Begin::Started(IdempotencyClaim { inner, core: self.core.clone() })
            }
            crate::idempotency::Begin::InProgress { holder } => Begin::InProgress { holder },
            crate::idempotency::Begin::Done { result } => Begin::Done { result },
        }
    }

    /// As [`crate::idempotency::IdempotencyKeys::begin`].
    ///
    /// # Errors
    /// As [`crate::idempotency::IdempotencyKeys::begin`]; [`Error::InvalidArgument`](crate::Error::InvalidArgument)
    /// naming `runtime` inside a tokio runtime.
    pub fn begin(&self, key: &str) -> Result<Begin> {
        let begun = self.core.block_on(self.inner.begin(key))??;
        Ok(self.wrap(begun))
    }

    /// As [`crate::idempotency::IdempotencyKeys::begin_within`]: returns within `timeout`.
    ///
    /// # Errors
    /// As [`crate::idempotency::IdempotencyKeys::begin_within`].
    pub fn begin_within(&self, key: &str, timeout: impl Into<crate::Deadline>) -> Result<Begin> {
        let timeout = timeout.into();
        let begun = self.core.block_on(self.inner.begin_within(key, timeout))??;
        Ok(self.wrap(begun))
    }

    /// The old name of [`begin_within`](Self::begin_within).
    ///
    /// # Errors
    /// As [`begin_within`](Self::begin_within).
    #[deprecated(
        note = "use `begin_within`: `_for` names a wait that returns `Ok(None)` on time-out (`try_lock_for`); an operation that runs out of time fails, within a `_within` name"
    )]
    pub fn begin_for(&self, key: &str, timeout: Duration) -> Result<Begin> {
        self.begin_within(key, timeout)
    }

    /// As [`crate::idempotency::IdempotencyKeys::wait_done_timeout`]: `Some` once the key settled, `None` when
    /// the time ran out first.
    ///
    /// # Errors
    /// As [`crate::idempotency::IdempotencyKeys::wait_done_timeout`].
    pub fn wait_done_timeout(
        &self,
        key: &str,
        timeout: impl Into<crate::Deadline>,
    ) -> Result<Option<crate::idempotency::Settled>> {
        let timeout = timeout.into();
        self.core.block_on(self.inner.wait_done_timeout(key, timeout))?
    }

    /// As [`crate::idempotency::IdempotencyKeys::wait_done`]: a time-out as
    /// [`Error::DeadlineExceeded`](crate::Error::DeadlineExceeded).
    ///
    /// # Errors
    /// As [`crate::idempotency::IdempotencyKeys::wait_done`].
    #[deprecated(
        note = "use `wait_done_timeout`, which returns `Ok(None)` on time-out (the crate's one rule for waits) and `Settled::Free` for a free key"
    )]
    pub fn wait_done(&self, key: &str, timeout: Duration) -> Result<Option<Vec<u8>>> {
        #[allow(deprecated)]
        self.core.block_on(self.inner.wait_done(key, timeout))?
    }

    /// As [`crate::idempotency::IdempotencyKeys::sweep_expired`].
    ///
    /// # Errors
    /// As [`crate::idempotency::IdempotencyKeys::sweep_expired`].
    pub fn sweep_expired(&self) -> Result<usize> {
        self.core.block_on(self.inner.sweep_expired())?
    }
}

impl IdempotencyClaim {
    /// The key.
    pub fn key(&self) -> &str {
        self.inner.key()
    }

    /// The key's node.
    pub fn path(&self) -> &str {
        self.inner.path()
    }

    /// The session the claim lives on.
    pub fn session(&self) -> SessionIdentity {
        self.inner.session()
    }

    /// The claim's state now; see [`crate::idempotency::IdempotencyClaim::state`].
    pub fn state(&self) -> HoldState {
        self.inner.state()
    }

    /// When the claim was granted (the server's creation time of its node).
    pub fn granted_at(&self) -> std::time::SystemTime {
        self.inner.granted_at()
    }

    /// The claim's state changes, waited for on the calling thread; see
    /// [`crate::idempotency::IdempotencyClaim::state_changes`].
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let keys = zk_curator::blocking::IdempotencyKeys::new(&client, "/idem", zk_curator::idempotency::Retention::Sweep(std::time::Duration::from_secs(60)))?;
    /// if let zk_curator::blocking::Begin::Started(claim) = keys.begin("order-1")? {
    ///     let mut changes = claim.state_changes();
    ///     if let Ok(Some(state)) = changes.next_timeout(std::time::Duration::from_millis(10)) {
    ///         println!("{state:?}");
    ///     }
    ///     claim.complete(b"ok".to_vec())?;
    /// }
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn state_changes(&self) -> HoldStateChanges {
        let changes = self.core.enter(|| self.inner.state_changes());
        HoldStateChanges::new(changes, self.path(), &self.core)
    }

    /// Waits until the claim is lost; see [`crate::idempotency::IdempotencyClaim::lost`].
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `runtime` inside a tokio
    /// runtime context.
    pub fn lost(&self) -> Result<()> {
        self.core.block_on(self.inner.lost())
    }

    /// Like [`lost`](Self::lost), giving up after `timeout`: `Ok(true)` once the claim is lost,
    /// `Ok(false)` if not after `timeout`. Returns within `timeout` (plus a few ms).
    ///
    /// # Errors
    /// As [`lost`](Self::lost).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let keys = zk_curator::blocking::IdempotencyKeys::new(&client, "/idem", zk_curator::idempotency::Retention::Sweep(std::time::Duration::from_secs(60)))?;
    /// if let zk_curator::blocking::Begin::Started(claim) = keys.begin("order-1")? {
    ///     if claim.lost_timeout(std::time::Duration::from_millis(100))? {
    ///         return Ok(()); // the session ended: the work must not be reported
    ///     }
    ///     claim.complete(b"ok".to_vec())?;
    /// }
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn lost_timeout(&self, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let timeout = timeout.into().remaining();
        let deadline = deadline_after(timeout);
        let lost = self.core.block_on(async { tokio::time::timeout_at(deadline.into(), self.inner.lost()).await })?;
        Ok(lost.is_ok())
    }

    /// As [`crate::idempotency::IdempotencyClaim::complete`].
    ///
    /// # Errors
    /// As [`crate::idempotency::IdempotencyClaim::complete`].
    pub fn complete(self, result: impl Into<Vec<u8>>) -> Result<()> {
        self.core.block_on(self.inner.complete(result))?
    }

    /// As [`crate::idempotency::IdempotencyClaim::complete_within`]: returns within `timeout`.
    ///
    /// # Errors
    /// As [`crate::idempotency::IdempotencyClaim::complete_within`].
    pub fn complete_within(self, result: impl Into<Vec<u8>>, timeout: impl Into<crate::Deadline>) -> Result<()> {
        let timeout = timeout.into();
        self.core.block_on(self.inner.complete_within(result, timeout))?
    }

    /// The old name of [`complete_within`](Self::complete_within).
    ///
    /// # Errors
    /// As [`complete_within`](Self::complete_within).
    #[deprecated(
        note = "use `complete_within`: `_for` names a wait that returns `Ok(None)` on time-out (`try_lock_for`); an operation that runs out of time fails, within a `_within` name"
    )]
    pub fn complete_for(self, result: impl Into<Vec<u8>>, timeout: Duration) -> Result<()> {
        self.complete_within(result, timeout)
    }

    /// As [`crate::idempotency::IdempotencyClaim::abandon`].
    ///
    /// # Errors
    /// As [`crate::idempotency::IdempotencyClaim::abandon`].
    pub fn abandon(self) -> Result<()> {
        self.core.block_on(self.inner.abandon())?
    }
}
