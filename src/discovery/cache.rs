//! [`ServiceCache`] (Curator's `ServiceCache`/`ServiceCacheImpl`): the instances of one service,
//! held locally on a converging [`CuratorCache`] and parsed once per change.

use std::collections::BTreeMap;
use std::fmt;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use parking_lot::{Mutex, RwLock};
use tokio::sync::watch;
use tracing::warn;

use crate::cache::{CacheEntry, CacheEvent, CacheEventStream, CacheMode, CacheSink, CacheState, CuratorCache};
use crate::error::{Error, Result};
use crate::framework::paths;

use super::discovery::{parse, Payload, ServiceDiscovery};
use super::instance::ServiceInstance;
use super::serializer::InstanceSerializer;

/// The instances of a [`ServiceCache`] at one moment, sorted by node name: shared, never copied.
pub type Instances<T> = Arc<[Arc<ServiceInstance<T>>]>;

/// A change of a [`ServiceCache`], for one subscriber ([`ServiceCache::events`]).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum ServiceCacheEvent<T> {
    /// An instance registered (or was there when the stream started).
    Added(Arc<ServiceInstance<T>>),
    /// A registered instance's data changed (or its node was re-created during a gap).
    Updated(Arc<ServiceInstance<T>>),
    /// An instance's node was deleted: its node name (the instance id, with its sequence for a
    /// sequential instance) and the instance it held, if readable.
    Removed {
        /// The node's name.
        node: String,
        /// The instance it held.
        instance: Option<Arc<ServiceInstance<T>>>,
    },
    /// A node under the service holds data that is not an instance (written by someone else):
    /// skipped, and listed by [`ServiceCache::unparsable`] until it is fixed or deleted.
    Unparsable {
        /// Its path.
        path: String,
        /// Why ([`Error::MalformedData`]).
        error: Error,
    },
    /// The stream's instances are complete: after those of the cache's first load (and after a
    /// replay, once that load is in).
    Initialized,
    /// This subscriber fell behind and missed `missed` changes; the stream goes on with an
    /// [`Added`](Self::Added) for every instance held now (and [`Initialized`](Self::Initialized)):
    /// a subscriber folding events into a map clears it here.
    Lagged {
        /// How many changes it missed.
        missed: u64,
    },
}

/// The instances of one service, held locally and kept current (Curator's `ServiceCache`).
///
/// Built on a [`CuratorCache`] of `base/NAME` in [`CacheMode::Children`], so it **converges**
/// like it: after a disconnect, an expiry, a server restart it re-reads the service and applies the
/// difference ([`state`](Self::state) says whether it follows the server now). Each node is parsed
/// once per change; [`instances`](Self::instances) is a shared snapshot (one reference count, from
/// any thread, no copy of the list). The cache only reads: it creates nothing (Curator creates
/// `base/NAME`; a service with no node yet simply has no instances).
///
/// A node whose data is not an instance is skipped and reported: a `warn` event,
/// [`unparsable`](Self::unparsable), and [`ServiceCacheEvent::Unparsable`].
///
/// A cheap [`Clone`] shares one cache; dropping the last clone stops it.
///
/// ```no_run
/// # async fn demo(discovery: zk_curator::discovery::ServiceDiscovery) -> zk_curator::Result<()> {
/// let cache = discovery.service_cache("api")?;
/// if cache.wait_initialized_timeout(std::time::Duration::from_secs(5)).await? {
///     for instance in cache.instances().iter() {
///         println!("{} {:?}:{:?}", instance.id(), instance.address(), instance.port());
///     }
/// }
/// # Ok(()) }
/// ```
pub struct ServiceCache<T = serde_json::Value> {
    /// Shared by the clones: dropping the last one drops the cache, which stops it.
    shared: Arc<Shared<T>>,
}

impl<T> Clone for ServiceCache<T> {
    fn clone(&self) -> Self {
        Self { shared: self.shared.clone() }
    }
}

pub(crate) struct Shared<T> {
    name: String,
    cache: CuratorCache,
    serializer: Arc<dyn InstanceSerializer<T>>,
    view: Arc<View<T>>,
}

/// The instances as the cache's changes leave them, kept by the cache itself ([`CacheSink`]): a
/// change is in the view before the cache's `apply` returns, with no task between.
struct View<T> {
    name: String,
    /// The service's node (the cache's root).
    root: String,
    serializer: Arc<dyn InstanceSerializer<T>>,
    nodes: Mutex<Nodes<T>>,
    current: RwLock<Instances<T>>,
    /// Bumped at every new view (read without the lock by providers).
    generation: AtomicU64,
    /// The view after the first load is in.
    initialized: watch::Sender<bool>,
    /// Set by `Initialized`, sent with the view that holds the load.
    initialized_pending: std::sync::atomic::AtomicBool,
    unparsable: Mutex<BTreeMap<String, Error>>,
}

/// The instances by node name, and whether they changed since the last view.
struct Nodes<T> {
    by_name: BTreeMap<String, Arc<ServiceInstance<T>>>,
    changed: bool,
}

impl<T: Payload> ServiceCache<T> {
    pub(crate) fn start(discovery: &ServiceDiscovery<T>, name: &str) -> Result<Self> {
        let path = discovery.instances_path(name)?;
        let serializer = discovery.serializer();
        let view = Arc::new(View {
            name: name.to_string(),
            root: path.clone(),
            serializer: serializer.clone(),
            nodes: Mutex::new(Nodes { by_name: BTreeMap::new(), changed: false }),
            current: RwLock::new(Arc::from(Vec::new())),
            generation: AtomicU64::new(0),
            initialized: watch::Sender::new(false),
            initialized_pending: std::sync::atomic::AtomicBool::new(false),
            unparsable: Mutex::new(BTreeMap::new()),
        });
        let cache = CuratorCache::builder(discovery.client(), &path)
            .mode(CacheMode::Children)
            .sink(view.clone() as Arc<dyn CacheSink>)
            .start()?;
        let shared = Arc::new(Shared { name: name.to_string(), cache, serializer, view });
        Ok(Self { shared })
    }

    /// The service's name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The instances now, sorted by node name: a shared snapshot (cheap, from any thread).
    pub fn instances(&self) -> Instances<T> {
        self.shared.view.current.read().clone()
    }

    /// The number of instances now.
    pub fn len(&self) -> usize {
        self.shared.view.current.read().len()
    }

    /// True when no instance is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The nodes under the service whose data is not an instance, by path, with why.
    pub fn unparsable(&self) -> BTreeMap<String, Error> {
        self.shared.view.unparsable.lock().clone()
    }

    /// How sure the cache is of its contents (its [`CuratorCache`]'s state).
    pub fn state(&self) -> CacheState {
        self.shared.cache.state()
    }

    /// True once the first full load is in [`instances`](Self::instances).
    pub fn is_initialized(&self) -> bool {
        *self.shared.view.initialized.borrow()
    }

    pub(crate) fn shared(&self) -> &Arc<Shared<T>> {
        &self.shared
    }

    /// Waits until the first full load is in [`instances`](Self::instances), at most `timeout`
    /// (a `Duration` or an instant, see [`Deadline`](crate::Deadline)): `Ok(true)` once it is,
    /// `Ok(false)` when the time ran out first — the call returns then, whatever the connection
    /// does.
    ///
    /// # Errors
    /// The cache's error if it failed; [`Error::Closed`] if it was closed.
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(cache: zk_curator::discovery::ServiceCache) -> zk_curator::Result<()> {
    /// if !cache.wait_initialized_timeout(std::time::Duration::from_secs(5)).await? {
    ///     eprintln!("api's instances are still loading");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn wait_initialized_timeout(&self, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let deadline = timeout.into().instant_from(std::time::Instant::now());
        let mut initialized = self.shared.view.initialized.subscribe();
        let mut states = self.shared.cache.states();
        loop {
            if *initialized.borrow_and_update() {
                return Ok(true);
            }
            let state = *states.borrow_and_update();
            if state == CacheState::Failed {
                let path = self.shared.cache.path().to_string();
                return Err(self.shared.cache.error().unwrap_or(Error::Closed { path }));
            }
            if state == CacheState::Closed {
                return Err(Error::Closed { path: self.shared.cache.path().to_string() });
            }
            let changed = async {
                tokio::select! {
                    _ = initialized.changed() => {}
                    _ = states.changed() => {}
                }
            };
            if tokio::time::timeout_at(deadline.into(), changed).await.is_err() {
                return Ok(*initialized.borrow());
            }
        }
    }

    /// A new, independent subscriber to the cache's changes: an
    /// [`Added`](ServiceCacheEvent::Added) for every instance held now (and
    /// [`Initialized`](ServiceCacheEvent::Initialized) once the first load is in), then each
    /// change. It ends when the cache closes or fails.
    pub fn events(&self) -> ServiceCacheEvents<T> {
        ServiceCacheEvents { events: self.shared.cache.events(), shared: self.shared.clone() }
    }

    /// Stops the cache (its watch and task); the instances stay readable.
    ///
    /// # Cancel safety
    /// Cancel safe: the stop is requested at the first poll.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(cache: zk_curator::discovery::ServiceCache) {
    /// cache.close().await;
    /// # }
    /// ```
    pub async fn close(&self) {
        self.shared.cache.close().await;
    }
}

impl<T> Shared<T> {
    pub(crate) fn generation(&self) -> u64 {
        self.view.generation.load(Ordering::Acquire)
    }

    pub(crate) fn view(&self) -> (u64, Instances<T>) {
        let view = self.view.current.read();
        (self.view.generation.load(Ordering::Acquire), view.clone())
    }

    /// The instance id (node name) of a cached path, `None` for the service node itself.
    fn node_of<'a>(&self, path: &'a str) -> Option<&'a str> {
        node_of(self.cache.path(), path)
    }
}

/// The instance id (node name) of `path` under the service node `root`; `None` otherwise.
fn node_of<'a>(root: &str, path: &'a str) -> Option<&'a str> {
    (paths::parent(path) == root && path != root).then(|| paths::node_name(path))
}

impl<T: 'static> Shared<T> {
    fn parse_entry(&self, entry: &CacheEntry) -> Result<ServiceInstance<T>> {
        parse(&*self.serializer, entry.path(), entry.data())
    }
}

impl<T: Payload> CacheSink for View<T> {
    fn event(&self, event: &CacheEvent) {
        let mut guard = self.nodes.lock();
        let Nodes { by_name: nodes, changed } = &mut *guard;
        match event {
            CacheEvent::Created(entry) | CacheEvent::Changed { new: entry, .. } => {
                let Some(node) = node_of(&self.root, entry.path()) else { return };
                match parse(&*self.serializer, entry.path(), entry.data()) {
                    Ok(instance) => {
                        self.unparsable.lock().remove(entry.path());
                        nodes.insert(node.to_string(), Arc::new(instance));
                    }
                    Err(e) => {
                        warn!(%e, "skipping a service instance that cannot be read");
                        nodes.remove(node);
                        self.unparsable.lock().insert(entry.path().to_string(), e);
                    }
                }
                *changed = true;
            }
            CacheEvent::Deleted(entry) => {
                if let Some(node) = node_of(&self.root, entry.path()) {
                    nodes.remove(node);
                    self.unparsable.lock().remove(entry.path());
                    *changed = true;
                }
            }
            CacheEvent::Initialized => self.initialized_pending.store(true, Ordering::Release),
            // A sink is never behind.
            CacheEvent::Lagged { .. } => {}
        }
    }

    fn flush(&self) {
        {
            let mut guard = self.nodes.lock();
            let Nodes { by_name: nodes, changed } = &mut *guard;
            if std::mem::take(changed) {
                let view: Instances<T> = nodes.values().cloned().collect();
                crate::metrics::discovery_cache_size(&self.name, view.len());
                *self.current.write() = view;
                self.generation.fetch_add(1, Ordering::AcqRel);
            }
        }
        if self.initialized_pending.swap(false, Ordering::AcqRel) {
            self.initialized.send_replace(true);
        }
    }
}

impl<T> fmt::Debug for ServiceCache<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServiceCache")
            .field("name", &self.shared.name)
            .field("instances", &self.shared.view.current.read().len())
            .field("state", &self.shared.cache.state())
            .finish()
    }
}

/// The changes of a [`ServiceCache`] for one subscriber ([`ServiceCache::events`]), a
/// [`Stream`](futures_core::Stream) of [`ServiceCacheEvent`]s: [`next`](Self::next) and
/// [`try_next`](Self::try_next). Bounded as the cache's
/// ([`CacheEventStream`]): a subscriber that falls behind gets
/// [`Lagged`](ServiceCacheEvent::Lagged), then the instances again.
pub struct ServiceCacheEvents<T> {
    events: CacheEventStream,
    shared: Arc<Shared<T>>,
}

impl<T: Payload> ServiceCacheEvents<T> {
    /// The next change; `None` once the cache closed or failed and every change was read.
    ///
    /// # Cancel safety
    /// Cancel safe: a change not yet returned is returned by the next call.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(cache: zk_curator::discovery::ServiceCache) {
    /// use zk_curator::discovery::ServiceCacheEvent;
    ///
    /// let mut events = cache.events();
    /// while let Some(event) = events.next().await {
    ///     if let ServiceCacheEvent::Added(instance) = event {
    ///         println!("new instance {}", instance.id());
    ///     }
    /// }
    /// # }
    /// ```
    pub async fn next(&mut self) -> Option<ServiceCacheEvent<T>> {
        std::future::poll_fn(|cx| self.poll_event(Some(cx))).await
    }

    /// The next change if one is ready, without waiting; `None` when none is (or the stream
    /// ended).
    pub fn try_next(&mut self) -> Option<ServiceCacheEvent<T>> {
        match self.poll_event(None) {
            Poll::Ready(event) => event,
            Poll::Pending => None,
        }
    }

    fn poll_event(&mut self, mut cx: Option<&mut Context<'_>>) -> Poll<Option<ServiceCacheEvent<T>>> {
        loop {
            let event = match cx.as_deref_mut() {
                Some(cx) => std::task::ready!(futures_core::Stream::poll_next(Pin::new(&mut self.events), cx)),
                None => match self.events.try_next() {
                    Some(event) => Some(event),
                    None => return Poll::Pending,
                },
            };
            let Some(event) = event else { return Poll::Ready(None) };
            if let Some(mapped) = self.map(event) {
                return Poll::Ready(Some(mapped));
            }
        }
    }

    fn map(&self, event: CacheEvent) -> Option<ServiceCacheEvent<T>> {
        let shared = &self.shared;
        let parsed = |entry: &CacheEntry, make: fn(Arc<ServiceInstance<T>>) -> ServiceCacheEvent<T>| {
            shared.node_of(entry.path())?;
            Some(match shared.parse_entry(entry) {
                Ok(instance) => make(Arc::new(instance)),
                Err(error) => ServiceCacheEvent::Unparsable { path: entry.path().to_string(), error },
            })
        };
        match event {
            CacheEvent::Created(entry) => parsed(&entry, ServiceCacheEvent::Added),
            CacheEvent::Changed { new, .. } => parsed(&new, ServiceCacheEvent::Updated),
            CacheEvent::Deleted(entry) => {
                let node = shared.node_of(entry.path())?.to_string();
                let instance = shared.parse_entry(&entry).ok().map(Arc::new);
                Some(ServiceCacheEvent::Removed { node, instance })
            }
            CacheEvent::Initialized => Some(ServiceCacheEvent::Initialized),
            CacheEvent::Lagged { missed } => Some(ServiceCacheEvent::Lagged { missed }),
        }
    }
}

impl<T> fmt::Debug for ServiceCacheEvents<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServiceCacheEvents").field("events", &self.events).finish()
    }
}

impl<T: Payload> futures_core::Stream for ServiceCacheEvents<T> {
    type Item = ServiceCacheEvent<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<ServiceCacheEvent<T>>> {
        self.get_mut().poll_event(Some(cx))
    }
}
