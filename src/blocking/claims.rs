//! [`WorkClaims`](crate::claims::WorkClaims), blocking.

use std::sync::Arc;
use std::time::Duration;

use super::{Core, CuratorClient, HoldStateChanges};
use crate::claims::{Claim, Reclaimed};
use crate::deadline::deadline_after;
use crate::error::Result;

/// A blocking [`WorkClaims`](crate::claims::WorkClaims): lock-tag batch claims of work items. The
/// [`Claim`]s it hands out are the async API's (their `item`, `data`, `fence`, `czxid`,
/// `granted_at`, `state` and `is_held` are plain methods); a claim's changes and its loss are
/// waited for here ([`state_changes`](Self::state_changes), [`lost`](Self::lost),
/// [`lost_timeout`](Self::lost_timeout)).
///
/// # Examples
/// ```no_run
/// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
/// let work = zk_curator::blocking::WorkClaims::new(&client, "/work/emails", "mailer-1")?;
/// for claim in work.claim(50)? {
///     // ... process claim.data() ...
///     work.complete(claim.item())?;
/// }
/// # Ok::<(), zk_curator::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct WorkClaims {
    inner: crate::claims::WorkClaims,
    core: Arc<Core>,
}

impl WorkClaims {
    /// Claims under `path` for `tag`; see [`WorkClaims::new`](crate::claims::WorkClaims::new).
    ///
    /// # Errors
    /// As [`WorkClaims::new`](crate::claims::WorkClaims::new).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// let work = zk_curator::blocking::WorkClaims::new(&client, "/work/emails", "mailer-1")?;
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn new(client: &CuratorClient, path: &str, tag: &str) -> Result<Self> {
        let inner = crate::claims::WorkClaims::new(client.core().client(), path, tag)?;
        Ok(Self { inner, core: client.core().clone() })
    }

    /// With the fair share on; see [`WorkClaims::with_fair_share`](crate::claims::WorkClaims::with_fair_share).
    pub fn with_fair_share(self) -> Self {
        Self { inner: self.inner.with_fair_share(), core: self.core }
    }

    /// Adds an item; see [`WorkClaims::add`](crate::claims::WorkClaims::add).
    ///
    /// # Errors
    /// As the async call; [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming
    /// `runtime` inside a tokio runtime context.
    pub fn add(&self, item: &str, data: &[u8]) -> Result<()> {
        self.core.block_on(self.inner.add(item, data))?
    }

    /// Claims up to `n` unclaimed items; see [`WorkClaims::claim`](crate::claims::WorkClaims::claim).
    ///
    /// # Errors
    /// As [`add`](Self::add).
    pub fn claim(&self, n: usize) -> Result<Vec<Claim>> {
        self.core.block_on(self.inner.claim(n))?
    }

    /// The claims held now.
    pub fn my_claims(&self) -> Vec<Claim> {
        self.inner.my_claims()
    }

    /// Completes `item`; see [`WorkClaims::complete`](crate::claims::WorkClaims::complete).
    ///
    /// # Errors
    /// As [`add`](Self::add).
    pub fn complete(&self, item: &str) -> Result<()> {
        self.core.block_on(self.inner.complete(item))?
    }

    /// Releases the claim on `item`; see [`WorkClaims::release`](crate::claims::WorkClaims::release).
    ///
    /// # Errors
    /// As [`add`](Self::add).
    pub fn release(&self, item: &str) -> Result<()> {
        self.core.block_on(self.inner.release(item))?
    }

    /// Releases every claim held; see [`WorkClaims::release_all`](crate::claims::WorkClaims::release_all).
    ///
    /// # Errors
    /// As [`add`](Self::add).
    pub fn release_all(&self) -> Result<()> {
        self.core.block_on(self.inner.release_all())?
    }

    /// Wakes up items claimed longer than `age`; see
    /// [`WorkClaims::reclaim_older_than`](crate::claims::WorkClaims::reclaim_older_than).
    ///
    /// # Errors
    /// As [`add`](Self::add).
    pub fn reclaim_older_than(&self, age: Duration) -> Result<Vec<Reclaimed>> {
        self.core.block_on(self.inner.reclaim_older_than(age))?
    }

    /// The unclaimed items now.
    ///
    /// # Errors
    /// As [`add`](Self::add).
    pub fn unclaimed(&self) -> Result<Vec<String>> {
        self.core.block_on(self.inner.unclaimed())?
    }

    /// Waits at most `timeout` for an unclaimed item (`Ok(true)`); see
    /// [`WorkClaims::wait_for_work`](crate::claims::WorkClaims::wait_for_work).
    ///
    /// # Errors
    /// As [`add`](Self::add).
    pub fn wait_for_work(&self, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let timeout = timeout.into().remaining();
        self.core.block_on(self.inner.wait_for_work(timeout))?
    }

    /// The state changes of `claim` (one of this instance's), waited for on the calling thread:
    /// `Suspended`, `Held` again, ..., ending after `Lost`; see
    /// [`Claim::state_changes`](crate::claims::Claim::state_changes).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let work = zk_curator::blocking::WorkClaims::new(&client, "/work/emails", "mailer-1")?;
    /// for claim in work.claim(1)? {
    ///     let mut changes = work.state_changes(&claim);
    ///     if let Ok(Some(state)) = changes.next_timeout(std::time::Duration::from_millis(10)) {
    ///         println!("{}: {state:?}", claim.item());
    ///     }
    /// }
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn state_changes(&self, claim: &Claim) -> HoldStateChanges {
        let changes = self.core.enter(|| claim.state_changes());
        HoldStateChanges::new(changes, claim.item(), &self.core)
    }

    /// Waits until `claim` is lost; never returns for a claim completed or released (see
    /// [`Claim::lost`](crate::claims::Claim::lost)).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming `runtime` inside a tokio
    /// runtime context.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let work = zk_curator::blocking::WorkClaims::new(&client, "/work/emails", "mailer-1")?;
    /// # let claim = work.claim(1)?.pop().unwrap();
    /// work.lost(&claim)?; // a watchdog thread
    /// eprintln!("{} lost: stop", claim.item());
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn lost(&self, claim: &Claim) -> Result<()> {
        self.core.block_on(claim.lost())
    }

    /// Like [`lost`](Self::lost), giving up after `timeout`: `Ok(true)` once `claim` is lost,
    /// `Ok(false)` if not after `timeout`. Returns within `timeout` (plus a few ms) whatever the
    /// connection does.
    ///
    /// # Errors
    /// As [`lost`](Self::lost).
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let work = zk_curator::blocking::WorkClaims::new(&client, "/work/emails", "mailer-1")?;
    /// # let claim = work.claim(1)?.pop().unwrap();
    /// while !work.lost_timeout(&claim, std::time::Duration::from_millis(100))? {
    ///     // ... one step of the work on claim.item() ...
    /// #   break;
    /// }
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn lost_timeout(&self, claim: &Claim, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let timeout = timeout.into().remaining();
        let deadline = deadline_after(timeout);
        // The timer is made inside the future: it needs the runtime entered by `block_on`.
        let lost = self.core.block_on(async { tokio::time::timeout_at(deadline.into(), claim.lost()).await })?;
        Ok(lost.is_ok())
    }
}
