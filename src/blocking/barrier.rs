//! [`DistributedBarrier`] and [`DistributedDoubleBarrier`], blocking.

use std::sync::Arc;

use super::{Core, CuratorClient};
use crate::error::Result;

/// A blocking [`DistributedBarrier`](crate::barriers::DistributedBarrier): while its node exists, waiters
/// wait.
///
/// # Examples
/// ```no_run
/// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
/// let barrier = zk_curator::blocking::DistributedBarrier::new(&client, "/barriers/deploy")?;
/// barrier.set_barrier()?;
/// // ... elsewhere: barrier.wait_on_barrier()? ...
/// barrier.remove_barrier()?;
/// # Ok::<(), zk_curator::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct DistributedBarrier {
    inner: crate::barriers::DistributedBarrier,
    core: Arc<Core>,
}

impl DistributedBarrier {
    /// The barrier at `path`.
    ///
    /// # Errors
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) naming the path.
    pub fn new(client: &CuratorClient, path: &str) -> Result<Self> {
        let inner = crate::barriers::DistributedBarrier::new(client.core().client(), path)?;
        Ok(Self { inner, core: client.core().clone() })
    }

    /// The barrier's path.
    pub fn path(&self) -> &str {
        self.inner.path()
    }

    /// As [`DistributedBarrier::set_barrier`](crate::barriers::DistributedBarrier::set_barrier).
    ///
    /// # Errors
    /// As the async call; [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming
    /// `runtime` inside a tokio runtime context.
    pub fn set_barrier(&self) -> Result<()> {
        self.core.block_on(self.inner.set_barrier())?
    }

    /// As [`DistributedBarrier::remove_barrier`](crate::barriers::DistributedBarrier::remove_barrier).
    ///
    /// # Errors
    /// As [`set_barrier`](Self::set_barrier).
    pub fn remove_barrier(&self) -> Result<()> {
        self.core.block_on(self.inner.remove_barrier())?
    }

    /// As [`DistributedBarrier::is_set`](crate::barriers::DistributedBarrier::is_set).
    ///
    /// # Errors
    /// As [`set_barrier`](Self::set_barrier).
    pub fn is_set(&self) -> Result<bool> {
        self.core.block_on(self.inner.is_set())?
    }

    /// As [`DistributedBarrier::wait_on_barrier`](crate::barriers::DistributedBarrier::wait_on_barrier).
    ///
    /// # Errors
    /// As [`set_barrier`](Self::set_barrier).
    pub fn wait_on_barrier(&self) -> Result<()> {
        self.core.block_on(self.inner.wait_on_barrier())?
    }

    /// As [`DistributedBarrier::wait_on_barrier_timeout`](crate::barriers::DistributedBarrier::wait_on_barrier_timeout):
    /// `Ok(false)` when `timeout` passed first.
    ///
    /// # Errors
    /// As [`set_barrier`](Self::set_barrier).
    pub fn wait_on_barrier_timeout(&self, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let timeout = timeout.into().remaining();
        self.core.block_on(self.inner.wait_on_barrier_timeout(timeout))?
    }
}

/// A blocking [`DistributedDoubleBarrier`](crate::barriers::DistributedDoubleBarrier): one member, which
/// enters and leaves with the others, round after round.
///
/// # Examples
/// ```no_run
/// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
/// let mut barrier = zk_curator::blocking::DistributedDoubleBarrier::new(&client, "/barriers/batch", 4)?;
/// barrier.enter()?;
/// // ... all four are in: work ...
/// barrier.leave()?;
/// # Ok::<(), zk_curator::Error>(())
/// ```
#[derive(Debug)]
pub struct DistributedDoubleBarrier {
    inner: crate::barriers::DistributedDoubleBarrier,
    core: Arc<Core>,
}

impl DistributedDoubleBarrier {
    /// A member of the double barrier at `path` for `member_count` members.
    ///
    /// # Errors
    /// As [`DistributedDoubleBarrier::new`](crate::barriers::DistributedDoubleBarrier::new).
    pub fn new(client: &CuratorClient, path: &str, member_count: usize) -> Result<Self> {
        let inner = crate::barriers::DistributedDoubleBarrier::new(client.core().client(), path, member_count)?;
        Ok(Self { inner, core: client.core().clone() })
    }

    /// The barrier's path.
    pub fn path(&self) -> &str {
        self.inner.path()
    }

    /// This member's node while it has entered and not left.
    pub fn member_node(&self) -> Option<&str> {
        self.inner.member_node()
    }

    /// As [`DistributedDoubleBarrier::enter`](crate::barriers::DistributedDoubleBarrier::enter).
    ///
    /// # Errors
    /// As the async call; [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming
    /// `runtime` inside a tokio runtime context.
    pub fn enter(&mut self) -> Result<()> {
        self.core.block_on(self.inner.enter())?
    }

    /// As [`DistributedDoubleBarrier::enter_timeout`](crate::barriers::DistributedDoubleBarrier::enter_timeout):
    /// `Ok(false)` when `timeout` passed first (nothing is left behind).
    ///
    /// # Errors
    /// As [`enter`](Self::enter).
    pub fn enter_timeout(&mut self, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let timeout = timeout.into().remaining();
        self.core.block_on(self.inner.enter_timeout(timeout))?
    }

    /// As [`DistributedDoubleBarrier::leave`](crate::barriers::DistributedDoubleBarrier::leave).
    ///
    /// # Errors
    /// As [`enter`](Self::enter).
    pub fn leave(&mut self) -> Result<()> {
        self.core.block_on(self.inner.leave())?
    }

    /// As [`DistributedDoubleBarrier::leave_timeout`](crate::barriers::DistributedDoubleBarrier::leave_timeout):
    /// `Ok(false)` when `timeout` passed first (this member has left anyway).
    ///
    /// # Errors
    /// As [`enter`](Self::enter).
    pub fn leave_timeout(&mut self, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let timeout = timeout.into().remaining();
        self.core.block_on(self.inner.leave_timeout(timeout))?
    }

    /// The async member underneath.
    pub fn as_async(&self) -> &crate::barriers::DistributedDoubleBarrier {
        &self.inner
    }
}
