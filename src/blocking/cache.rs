//! [`CuratorCache`]: the blocking cache, and [`CacheEvents`], the blocking iterator of its changes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::{Core, CuratorClient};
use crate::cache::{CacheEntry, CacheEvent, CacheMode, CacheState};
use crate::error::Result;
use crate::Error;

/// A blocking [`CuratorCache`](crate::cache::CuratorCache): the same cache (one persistent recursive
/// watch, re-armed then re-read after every gap, so that it always converges to the server), its
/// task on the client's runtime thread. Reads never wait; [`wait_initialized_timeout`](Self::wait_initialized_timeout),
/// [`wait_synced_timeout`](Self::wait_synced_timeout), [`close`](Self::close) and the [`CacheEvents`] iterator wait on the calling thread.
///
/// Dropping it — on any thread — stops its task.
///
/// # Examples
/// ```no_run
/// use std::time::Duration;
/// use zk_curator::blocking::{CuratorCache, CuratorClient};
/// use zk_curator::cache::CacheMode;
///
/// fn services() -> zk_curator::Result<()> {
///     let client = CuratorClient::connect("127.0.0.1:2181")?;
///     let cache = CuratorCache::start(&client, "/services", CacheMode::Children)?;
///     if !cache.wait_initialized_timeout(Duration::from_secs(10))? {
///         return Ok(()); // not loaded yet
///     }
///     println!("services: {:?}", cache.children("/services"));
///     for event in cache.events() {
///         println!("{event:?}");
///         # break;
///     }
///     cache.close()
/// }
/// ```
///
/// A cheap [`Clone`] shares one cache, as the async [`CuratorCache`](crate::cache::CuratorCache) does:
/// closing through any clone closes it for all, and dropping the last clone stops it.
#[derive(Clone)]
pub struct CuratorCache {
    inner: crate::cache::CuratorCache,
    core: Arc<Core>,
}

impl std::fmt::Debug for CuratorCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl CuratorCache {
    /// Starts a cache of `path` in `mode` (see [`CacheMode`]); for the other options build an
    /// async [`CuratorCacheBuilder`](crate::cache::CuratorCacheBuilder) on
    /// [`CuratorClient::async_client`] and pass the cache to [`from_async`](Self::from_async).
    ///
    /// # Errors
    /// As [`CuratorCacheBuilder::start`](crate::cache::CuratorCacheBuilder::start): [`Error::InvalidPath`]
    /// naming `path`, [`Error::Closed`].
    pub fn start(client: &CuratorClient, path: &str, mode: CacheMode) -> Result<CuratorCache> {
        let core = client.core().clone();
        let inner = core.enter(|| crate::cache::CuratorCache::builder(core.client(), path).mode(mode).start())?;
        Ok(CuratorCache { inner, core })
    }

    /// Wraps a cache started on `client`'s [`async_client`](CuratorClient::async_client).
    pub fn from_async(client: &CuratorClient, cache: crate::cache::CuratorCache) -> CuratorCache {
        CuratorCache { inner: cache, core: client.core().clone() }
    }

    /// The cached path.
    pub fn path(&self) -> &str {
        self.inner.path()
    }

    /// See [`CuratorCache::entry`](crate::cache::CuratorCache::entry).
    pub fn entry(&self, path: &str) -> Option<CacheEntry> {
        self.inner.entry(path)
    }

    /// See [`CuratorCache::children`](crate::cache::CuratorCache::children).
    pub fn children(&self, path: &str) -> Vec<String> {
        self.inner.children(path)
    }

    /// See [`CuratorCache::snapshot`](crate::cache::CuratorCache::snapshot).
    pub fn snapshot(&self) -> BTreeMap<String, CacheEntry> {
        self.inner.snapshot()
    }

    /// See [`CuratorCache::size`](crate::cache::CuratorCache::size).
    pub fn size(&self) -> usize {
        self.inner.size()
    }

    /// See [`CuratorCache::unreadable`](crate::cache::CuratorCache::unreadable).
    pub fn unreadable(&self) -> Vec<String> {
        self.inner.unreadable()
    }

    /// See [`CuratorCache::state`](crate::cache::CuratorCache::state).
    pub fn state(&self) -> CacheState {
        self.inner.state()
    }

    /// See [`CuratorCache::error`](crate::cache::CuratorCache::error).
    pub fn error(&self) -> Option<Error> {
        self.inner.error()
    }

    /// See [`CuratorCache::latest`](crate::cache::CuratorCache::latest) (`borrow()` on it never waits).
    pub fn latest(&self) -> watch::Receiver<Option<CacheEntry>> {
        self.inner.latest()
    }

    /// Waits on the calling thread until the first full load is in, at most `timeout` (a
    /// [`Duration`] or an instant, see [`Deadline`](crate::Deadline)): `Ok(true)` once it is,
    /// `Ok(false)` when the time ran out first.
    ///
    /// # Errors
    /// As [`CuratorCache::wait_initialized_timeout`](crate::cache::CuratorCache::wait_initialized_timeout);
    /// [`Error::InvalidArgument`] naming `runtime` inside a tokio runtime context.
    pub fn wait_initialized_timeout(&self, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let timeout = timeout.into();
        self.core.block_on(self.inner.wait_initialized_timeout(timeout))?
    }

    /// Waits on the calling thread until the first full load is in, at most `timeout`; past it,
    /// [`Error::DeadlineExceeded`].
    ///
    /// # Errors
    /// [`Error::DeadlineExceeded`], and as
    /// [`wait_initialized_timeout`](Self::wait_initialized_timeout).
    #[deprecated(
        note = "use `wait_initialized_timeout`, which returns `Ok(false)` on time-out (the crate's one rule for waits)"
    )]
    pub fn wait_initialized(&self, timeout: Duration) -> Result<()> {
        #[allow(deprecated)]
        self.core.block_on(self.inner.wait_initialized(timeout))?
    }

    /// Waits on the calling thread until the cache is [`Synced`](CacheState::Synced) (at once when
    /// it is; after a gap it noticed, once it has re-read the tree), at most `timeout` (a
    /// [`Duration`] or an instant, see [`Deadline`](crate::Deadline)): `Ok(true)` once it is,
    /// `Ok(false)` when the time ran out first.
    ///
    /// # Errors
    /// As [`CuratorCache::wait_synced_timeout`](crate::cache::CuratorCache::wait_synced_timeout);
    /// [`Error::InvalidArgument`] naming `runtime` inside a tokio runtime context.
    pub fn wait_synced_timeout(&self, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let timeout = timeout.into();
        self.core.block_on(self.inner.wait_synced_timeout(timeout))?
    }

    /// Waits on the calling thread until the cache is synced, at most `timeout`; past it,
    /// [`Error::DeadlineExceeded`].
    ///
    /// # Errors
    /// [`Error::DeadlineExceeded`], and as [`wait_synced_timeout`](Self::wait_synced_timeout).
    #[deprecated(
        note = "use `wait_synced_timeout`, which returns `Ok(false)` on time-out (the crate's one rule for waits)"
    )]
    pub fn wait_synced(&self, timeout: Duration) -> Result<()> {
        #[allow(deprecated)]
        self.core.block_on(self.inner.wait_synced(timeout))?
    }

    /// A new subscriber to the cache's changes, as a blocking iterator (see
    /// [`CuratorCache::events`](crate::cache::CuratorCache::events)).
    pub fn events(&self) -> CacheEvents {
        CacheEvents { inner: self.inner.events(), path: self.path().to_string(), core: self.core.clone() }
    }

    /// Stops the cache and waits for its task to end.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `runtime` inside a tokio runtime context.
    pub fn close(&self) -> Result<()> {
        self.core.block_on(self.inner.close())
    }
}

/// The changes of a blocking [`CuratorCache`] for one subscriber: an iterator that waits on the
/// calling thread and ends when the cache closes (or when called inside a tokio runtime context).
/// Bounded as [`CacheEventStream`](crate::cache::CacheEventStream) is: a reader that falls behind gets
/// [`CacheEvent::Lagged`] and a replay of the cache.
pub struct CacheEvents {
    inner: crate::cache::CacheEventStream,
    path: String,
    core: Arc<Core>,
}

impl std::fmt::Debug for CacheEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl CacheEvents {
    /// The next event, waiting at most `timeout`; `Ok(None)` once the cache closed and every
    /// event was read.
    ///
    /// # Errors
    /// [`Error::DeadlineExceeded`] naming the cache's path when no event came within `timeout`
    /// (returned then); [`Error::InvalidArgument`] naming `runtime` inside a tokio runtime context.
    ///
    /// # Examples
    /// ```no_run
    /// # let client = zk_curator::blocking::CuratorClient::connect("127.0.0.1:2181")?;
    /// # let cache = zk_curator::blocking::CuratorCache::start(&client, "/config", zk_curator::cache::CacheMode::Tree)?;
    /// let mut events = cache.events();
    /// match events.next_timeout(std::time::Duration::from_secs(1)) {
    ///     Ok(Some(event)) => println!("{event:?}"),
    ///     Ok(None) => println!("the cache closed"),
    ///     Err(e) if e.kind() == zk_curator::ErrorKind::DeadlineExceeded => println!("quiet"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok::<(), zk_curator::Error>(())
    /// ```
    pub fn next_timeout(&mut self, timeout: impl Into<crate::Deadline>) -> Result<Option<CacheEvent>> {
        let timeout = timeout.into().remaining();
        self.core.feed_next_timeout(self.inner.next(), timeout, &self.path, "waiting for an event of the cache of")
    }

    /// The next event if one is ready, without waiting.
    pub fn try_next(&mut self) -> Option<CacheEvent> {
        self.inner.try_next()
    }

    /// The next event, waiting at most `timeout`; `Ok(None)` when none came in time or the cache
    /// closed.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `runtime` inside a tokio runtime context.
    #[deprecated(
        note = "use `next_timeout`, which tells a timeout (`Err(DeadlineExceeded)`) from the end (`Ok(None)`)"
    )]
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<Option<CacheEvent>> {
        let next = self.inner.next();
        // The timer is made inside the runtime.
        Ok(self.core.block_on(async move { tokio::time::timeout(timeout, next).await })?.ok().flatten())
    }

    /// The next event if one is ready, without waiting.
    #[deprecated(note = "use `try_next`")]
    pub fn try_recv(&mut self) -> Option<CacheEvent> {
        self.inner.try_next()
    }
}

impl Iterator for CacheEvents {
    type Item = CacheEvent;

    /// Waits for the next event; `None` once the cache closed and every event was read (or when
    /// called inside a tokio runtime context: logged).
    fn next(&mut self) -> Option<CacheEvent> {
        self.core.feed_next(self.inner.next(), &self.path)
    }
}
