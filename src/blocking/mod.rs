//! A blocking facade over the client (its data API included) and the recipes — the mutex, the
//! read-write lock, the semaphores, the multi-lock, leader election (`LeaderLatch`,
//! `LeaderSelector`), the barriers ([`DistributedBarrier`], [`DistributedDoubleBarrier`]), the cache
//! (`CuratorCache`), the shared values, the atomic counters and the nodes kept present
//! (`PersistentNode`, `PersistentTtlNode`, `GroupMember`), the queues ([`SimpleDistributedQueue`], and [`DistributedQueue`] whose consumer is an
//! iterator of [`QueueItem`]s to acknowledge) and, with the `discovery` feature,
//! service discovery (`ServiceDiscovery`, `ServiceCache`, `ServiceProvider`) — for programs that are not async (like
//! `reqwest::blocking`).
//!
//! [`CuratorClient`] owns a small tokio runtime on a background thread; every type here wraps its
//! async counterpart and waits for it on the calling thread: the locks ([`InterProcessMutex`],
//! [`InterProcessReadWriteLock`], [`InterProcessSemaphoreV2`], [`InterProcessSemaphoreMutex`],
//! [`InterProcessMultiLock`]) and the elections ([`LeaderLatch`], and [`LeaderSelector`], whose
//! leadership work runs on a plain thread of its own and is told — [`Leadership::is_cancelled`] —
//! when to stop), the shared values ([`SharedValue`], [`SharedCount`], whose follower runs on the
//! client's runtime, and their [`SharedValueChanges`]) and the atomic counters
//! ([`DistributedAtomicValue`], [`DistributedAtomicLong`], [`DistributedAtomicInteger`]). The
//! promises are the async API's:
//!
//! * **Guards release on drop** — on any thread, also one that never saw a runtime: dropping a
//!   [`MutexGuard`] or a [`Lease`] hands the delete to the client's background queue. `release()`
//!   waits for the delete and reports its outcome.
//! * **Strict deadlines** — `try_lock_for`, `acquire_timeout` and the other timed calls return
//!   within their timeout (plus a few ms) whatever the connection does, the server down included.
//! * **Curator-style re-entrancy per thread, as in Curator** — `acquire()`/`release()` holds belong
//!   to the calling OS thread: the thread that acquired may acquire again (no round trip) and must
//!   release as often; another thread's `release()` fails with [`Error::NotOwner`].
//!   Guards belong to no thread: they move between threads, the hold with them.
//! * **Leadership only while `Held`; the next leader after the last one's work** — a latch or
//!   selector reports leadership only while its hold is `Held` on the current session; a
//!   selector's node is deleted only after its work's thread has returned (also when leadership
//!   is lost, interrupted or the selector closed or dropped).
//!
//! **Change feeds** ([`CacheEvents`], [`MembershipChanges`], [`LeadershipChanges`],
//! [`HoldStateChanges`], [`SharedValueChanges`]) are drained as the async streams are, by the same
//! names: each is an [`Iterator`] whose `next()` waits (`for change in feed`, or
//! `while let Some(change) = feed.next()` as `feed.next().await` in async code), with
//! `next_timeout(d)` for a bounded wait (`Err` [`DeadlineExceeded`](Error::DeadlineExceeded)
//! when nothing came, `Ok(None)` once the feed ended) and, where the async stream has it,
//! `try_next()` that never waits. The older names (`recv`, `recv_timeout`, `try_recv`) are
//! deprecated. Their bounds and what a slow reader misses are the async feeds' (see
//! [docs/failure-semantics.md](crate::guide::failure_semantics), "Change feeds").
//!
//! Call it from plain threads. A waiting call made inside a tokio runtime context (an async task,
//! `block_on`, `spawn_blocking`, a `Handle::enter` guard) returns
//! [`Error::InvalidArgument`] naming `runtime` instead of blocking
//! the runtime or panicking: use the async API there ([`CuratorClient::async_client`]).
//!
//! ```no_run
//! use std::time::Duration;
//! use zk_curator::blocking::{CuratorClient, InterProcessMutex};
//!
//! fn nightly_report() -> zk_curator::Result<()> {
//!     let client = CuratorClient::connect("127.0.0.1:2181")?;
//!     let mutex = InterProcessMutex::new(&client, "/locks/nightly-report")?;
//!     if let Some(guard) = mutex.try_lock_for(Duration::from_secs(5))? {
//!         // ... generate the report, passing guard.fencing_token() to the store ...
//!         guard.release()?;
//!     }
//!     client.close()
//! }
//! ```

mod atomic;
mod barrier;
mod cache;
mod claims;
mod client;
#[cfg(feature = "discovery")]
mod discovery;
mod distributed_queue;
mod hold_states;
mod idempotency;
mod leader_latch;
mod leader_selector;
mod multi_lock;
mod mutex;
mod nodes;
mod nonfair;
mod read_write;
mod semaphore;
mod shared;
mod simple_queue;

use std::future::Future;
use std::sync::Arc;

use tokio::sync::oneshot;

use crate::error::{Error, Result};
use crate::locks::reentrancy::HolderId;

pub use atomic::{DistributedAtomicInteger, DistributedAtomicLong, DistributedAtomicNumber, DistributedAtomicValue};
pub use barrier::{DistributedBarrier, DistributedDoubleBarrier};
pub use cache::{CacheEvents, CuratorCache};
pub use claims::WorkClaims;
pub use client::CuratorClient;
#[cfg(feature = "discovery")]
#[cfg_attr(docsrs, doc(cfg(feature = "discovery")))]
pub use discovery::{ServiceCache, ServiceCacheChanges, ServiceDiscovery, ServiceProvider};
pub use distributed_queue::{DistributedQueue, QueueItem, QueueItems};
pub use hold_states::HoldStateChanges;
pub use idempotency::{Begin, IdempotencyClaim, IdempotencyKeys};
pub use leader_latch::{LeaderLatch, LeadershipChanges};
pub use leader_selector::{LeaderSelector, Leadership};
pub use multi_lock::InterProcessMultiLock;
pub use mutex::{InterProcessMutex, MutexGuard};
pub use nodes::{GroupMember, MembershipChanges, PersistentNode, PersistentTtlNode};
pub use nonfair::InterProcessNonFairMutex;
pub use read_write::{InterProcessReadWriteLock, ReadLock, ReadLockGuard, WriteLock, WriteLockGuard};
pub use semaphore::{return_all, InterProcessSemaphoreMutex, InterProcessSemaphoreV2, Lease};
pub use shared::{SharedCount, SharedValue, SharedValueChanges};
pub use simple_queue::SimpleDistributedQueue;

/// The runtime of one blocking client and the client itself, shared (through an `Arc`) by the
/// client's clones, its recipes and their guards: the runtime lives as long as anything that may
/// still need it.
///
/// # Why a current-thread runtime on a thread of its own, polled from the callers' threads
///
/// * One thread is plenty: the client's own work (the session, its pings, background deletes,
///   hold monitors) is a few light tasks. A `current_thread` runtime needs no extra tokio feature,
///   and its thread does nothing but drive I/O, timers and those tasks (`Runtime::block_on` of a
///   future that ends only when the last handle is dropped).
/// * A blocking call polls its future on the calling thread with `Handle::block_on` (tokio
///   documents that this works on a `current_thread` runtime while another thread is in
///   `Runtime::block_on`, which drives the I/O and timers). So the future may borrow (a guard, a
///   `GuardedWrite`), a panic in it reaches the caller, and callers on several threads wait at
///   once without queueing behind each other.
/// * The future runs as the calling thread ([`HolderId::scope`]): Curator-style holds belong to
///   the thread, as in Curator — explicitly, not only because a future polled by `block_on` is no
///   tokio task.
pub(crate) struct Core {
    client: crate::CuratorClient,
    runtime: RuntimeThread,
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Core").field("client", &self.client).finish()
    }
}

impl Core {
    /// Starts a runtime thread and connects a client on it with `connect`.
    fn start<F, Fut>(connect: F) -> Result<Arc<Core>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<crate::CuratorClient>>,
    {
        outside_runtime()?;
        let runtime = RuntimeThread::start("zk-curator-blocking")?;
        // On an error, dropping `runtime` stops its thread (and drops the half-made session).
        let client = runtime.block_on(connect())??;
        Ok(Arc::new(Core { client, runtime }))
    }

    pub(crate) fn client(&self) -> &crate::CuratorClient {
        &self.client
    }

    /// Waits for `future` on the calling thread, run as that thread's holder (see the type's
    /// notes).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `runtime` when called inside a tokio runtime context:
    /// `future` is dropped unpolled.
    pub(crate) fn block_on<F: Future>(&self, future: F) -> Result<F::Output> {
        self.runtime.block_on(future)
    }

    /// The next item of a feed, waited for on the calling thread: what a blocking feed's
    /// `Iterator::next` returns. `None` once the feed ended — or when called inside a tokio runtime
    /// context, which an iterator cannot report otherwise: logged (naming `path`), nothing taken.
    pub(crate) fn feed_next<T>(&self, next: impl Future<Output = Option<T>>, path: &str) -> Option<T> {
        match self.block_on(next) {
            Ok(next) => next,
            Err(e) => {
                tracing::warn!(path, %e, "a blocking feed cannot be waited for here: the iterator ends");
                None
            }
        }
    }

    /// The next item of a feed within `timeout` (a blocking feed's `next_timeout`): `Ok(None)`
    /// once the feed ended.
    ///
    /// # Errors
    /// [`Error::DeadlineExceeded`] naming `path` when nothing came within `timeout` (returned
    /// then; an item not yet returned stays for the next call); [`Error::InvalidArgument`] naming
    /// `runtime` inside a tokio runtime context.
    pub(crate) fn feed_next_timeout<T>(
        &self,
        next: impl Future<Output = Option<T>>,
        timeout: std::time::Duration,
        path: &str,
        during: &'static str,
    ) -> Result<Option<T>> {
        let deadline = crate::deadline::deadline_after(timeout);
        // The timer is made inside the future: only the runtime's thread context has a timer.
        let next = async { tokio::time::timeout_at(deadline.into(), next).await };
        match self.block_on(next)? {
            Ok(next) => Ok(next),
            Err(_) => Err(Error::deadline_exceeded(path, during, timeout).naming_timeout(timeout, timeout)),
        }
    }

    /// Runs `f` with the runtime entered, as the calling thread's holder: for the synchronous
    /// methods of the async API that start background work (a hold's monitor) or ask who the
    /// caller is.
    pub(crate) fn enter<R>(&self, f: impl FnOnce() -> R) -> R {
        let _entered = self.runtime.handle.enter();
        current_thread().sync_scope(f)
    }
}

impl Drop for Core {
    /// The last handle is gone: the runtime thread closes the client (letting pending background
    /// deletes finish, bounded by `max_close_wait`) and stops. Never blocks, needs no runtime.
    fn drop(&mut self) {
        let client = self.client.clone();
        self.runtime.stop(Some(Box::pin(async move { client.close().await })));
    }
}

/// What a [`RuntimeThread`] still runs when told to stop (closing a client, a selector).
type LastWork = std::pin::Pin<Box<dyn Future<Output = ()> + Send>>;

/// A `current_thread` runtime driven by a thread of its own until [`stop`](Self::stop)ped.
struct RuntimeThread {
    handle: tokio::runtime::Handle,
    stop: parking_lot::Mutex<Option<oneshot::Sender<Option<LastWork>>>>,
}

impl RuntimeThread {
    fn start(name: &str) -> Result<RuntimeThread> {
        let failed = |e: std::io::Error| {
            Error::invalid_argument("runtime", e, "the blocking client could not start its runtime thread")
        };
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(failed)?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = oneshot::channel::<Option<LastWork>>();
        std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                // Drives the runtime until the last handle is gone (or the sender is dropped).
                if let Ok(Some(last)) = runtime.block_on(stopped) {
                    runtime.block_on(last);
                }
                // Dropping the runtime here, on its own thread, ends the remaining tasks.
            })
            .map_err(failed)?;
        Ok(RuntimeThread { handle, stop: parking_lot::Mutex::new(Some(stop)) })
    }

    fn block_on<F: Future>(&self, future: F) -> Result<F::Output> {
        outside_runtime()?;
        Ok(self.handle.block_on(current_thread().scope(future)))
    }

    /// Tells the thread to run `last` (if any) and stop. Idempotent; never blocks.
    fn stop(&self, last: Option<LastWork>) {
        if let Some(stop) = self.stop.lock().take() {
            let _ = stop.send(last);
        }
    }
}

impl Drop for RuntimeThread {
    fn drop(&mut self) {
        self.stop(None);
    }
}

/// The holder identity of the calling OS thread.
fn current_thread() -> HolderId {
    HolderId::Thread(std::thread::current().id())
}

/// Refuses a waiting call inside a tokio runtime context: tokio's `block_on` would panic there,
/// and blocking a runtime's thread stalls everything else on it. Conservative: tokio offers no way
/// to tell a `spawn_blocking` thread (where waiting would be allowed) from an async one.
fn outside_runtime() -> Result<()> {
    if tokio::runtime::Handle::try_current().is_ok() {
        return Err(Error::invalid_argument(
            "runtime",
            "a tokio runtime context",
            "a blocking call cannot wait inside a tokio runtime (an async task, block_on, spawn_blocking, \
             Handle::enter); use the async API there (blocking::CuratorClient::async_client) or call from a \
             thread outside any runtime",
        ));
    }
    Ok(())
}
