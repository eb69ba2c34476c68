//! [`SimpleDistributedQueue`], blocking.

use std::sync::Arc;

use super::{Core, CuratorClient};
use crate::error::Result;

/// A blocking [`SimpleDistributedQueue`](crate::queue::SimpleDistributedQueue): a FIFO of byte
/// items, wire-compatible with Curator's `SimpleDistributedQueue`.
///
/// # Examples
/// ```no_run
/// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
/// let queue = zk_curator::blocking::SimpleDistributedQueue::new(&client, "/queues/jobs")?;
/// queue.offer(b"job".to_vec())?;
/// assert_eq!(queue.take()?, b"job");
/// # Ok::<(), zk_curator::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct SimpleDistributedQueue {
    inner: crate::queue::SimpleDistributedQueue,
    core: Arc<Core>,
}

impl SimpleDistributedQueue {
    /// The queue at `path`.
    ///
    /// # Errors
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) naming the path.
    pub fn new(client: &CuratorClient, path: &str) -> Result<Self> {
        let inner = crate::queue::SimpleDistributedQueue::new(client.core().client(), path)?;
        Ok(Self { inner, core: client.core().clone() })
    }

    /// The queue's path.
    pub fn path(&self) -> &str {
        self.inner.path()
    }

    /// As [`SimpleDistributedQueue::offer`](crate::queue::SimpleDistributedQueue::offer).
    ///
    /// # Errors
    /// As the async call; [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming
    /// `runtime` inside a tokio runtime context.
    pub fn offer(&self, data: impl Into<Vec<u8>>) -> Result<String> {
        self.core.block_on(self.inner.offer(data))?
    }

    /// As [`SimpleDistributedQueue::take`](crate::queue::SimpleDistributedQueue::take).
    ///
    /// # Errors
    /// As [`offer`](Self::offer).
    pub fn take(&self) -> Result<Vec<u8>> {
        self.core.block_on(self.inner.take())?
    }

    /// As [`SimpleDistributedQueue::poll_timeout`](crate::queue::SimpleDistributedQueue::poll_timeout):
    /// `Ok(None)` when no item came within `timeout`.
    ///
    /// # Errors
    /// As [`offer`](Self::offer).
    pub fn poll_timeout(&self, timeout: impl Into<crate::Deadline>) -> Result<Option<Vec<u8>>> {
        let timeout = timeout.into().remaining();
        self.core.block_on(self.inner.poll_timeout(timeout))?
    }

    /// As [`SimpleDistributedQueue::try_take`](crate::queue::SimpleDistributedQueue::try_take).
    ///
    /// # Errors
    /// As [`offer`](Self::offer).
    pub fn try_take(&self) -> Result<Option<Vec<u8>>> {
        self.core.block_on(self.inner.try_take())?
    }

    /// As [`SimpleDistributedQueue::remove`](crate::queue::SimpleDistributedQueue::remove).
    ///
    /// # Errors
    /// [`Error::QueueEmpty`](crate::Error::QueueEmpty); otherwise as [`offer`](Self::offer).
    pub fn remove(&self) -> Result<Vec<u8>> {
        self.core.block_on(self.inner.remove())?
    }

    /// As [`SimpleDistributedQueue::peek`](crate::queue::SimpleDistributedQueue::peek).
    ///
    /// # Errors
    /// As [`offer`](Self::offer).
    pub fn peek(&self) -> Result<Option<Vec<u8>>> {
        self.core.block_on(self.inner.peek())?
    }

    /// As [`SimpleDistributedQueue::element`](crate::queue::SimpleDistributedQueue::element).
    ///
    /// # Errors
    /// [`Error::QueueEmpty`](crate::Error::QueueEmpty); otherwise as [`offer`](Self::offer).
    pub fn element(&self) -> Result<Vec<u8>> {
        self.core.block_on(self.inner.element())?
    }

    /// The async queue underneath.
    pub fn as_async(&self) -> &crate::queue::SimpleDistributedQueue {
        &self.inner
    }
}
