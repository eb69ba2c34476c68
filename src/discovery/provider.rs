//! [`ServiceProvider`] (Curator's `ServiceProvider`/`ServiceProviderImpl`, with its
//! `DownInstanceManager` and instance filters): picks one instance of a service from a
//! [`ServiceCache`].

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};

use crate::cache::CacheState;
use crate::error::Result;

use super::cache::{Instances, ServiceCache};
use super::discovery::{Payload, ServiceDiscovery};
use super::instance::ServiceInstance;
use super::strategy::{Candidates, ProviderStrategy, RoundRobinStrategy};

/// When an instance is taken as down (Curator's `DownInstancePolicy`): after
/// `error_threshold` errors ([`ServiceProvider::note_error`]) within a window from the first, it
/// is skipped until the window has passed. Default: 2 errors, 30 s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DownInstancePolicy {
    timeout: Duration,
    error_threshold: u32,
}

impl Default for DownInstancePolicy {
    fn default() -> Self {
        Self { timeout: Duration::from_secs(30), error_threshold: 2 }
    }
}

impl DownInstancePolicy {
    /// Down after `error_threshold` errors within `window` (Curator's `timeout`) of the first,
    /// until `window` has passed since it.
    pub fn new(window: Duration, error_threshold: u32) -> Self {
        Self { timeout: window, error_threshold: error_threshold.max(1) }
    }

    /// The window (Curator's `timeout`).
    pub fn window(&self) -> Duration {
        self.timeout
    }

    /// The errors within the window that make an instance down.
    pub fn error_threshold(&self) -> u32 {
        self.error_threshold
    }
}

/// A filter of the instances a provider picks from (Curator's `InstanceFilter`): true to keep.
pub type InstanceFilter<T> = Arc<dyn Fn(&ServiceInstance<T>) -> bool + Send + Sync>;

/// Options of a [`ServiceProvider`], from [`ServiceDiscovery::provider_builder`].
#[must_use = "a builder does nothing until start()"]
pub struct ServiceProviderBuilder<T> {
    discovery: ServiceDiscovery<T>,
    name: String,
    strategy: Arc<dyn ProviderStrategy<T>>,
    filters: Vec<InstanceFilter<T>>,
    skip_disabled: bool,
    down_policy: DownInstancePolicy,
}

impl<T> fmt::Debug for ServiceProviderBuilder<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServiceProviderBuilder")
            .field("name", &self.name)
            .field("filters", &self.filters.len())
            .field("skip_disabled", &self.skip_disabled)
            .field("down_policy", &self.down_policy)
            .finish_non_exhaustive()
    }
}

impl<T: Payload> ServiceProviderBuilder<T> {
    pub(crate) fn new(discovery: &ServiceDiscovery<T>, name: &str) -> Self {
        Self {
            discovery: discovery.clone(),
            name: name.to_string(),
            strategy: Arc::new(RoundRobinStrategy::new()),
            filters: Vec::new(),
            skip_disabled: true,
            down_policy: DownInstancePolicy::default(),
        }
    }

    /// How to pick (default [`RoundRobinStrategy`]).
    pub fn strategy(mut self, strategy: impl ProviderStrategy<T>) -> Self {
        self.strategy = Arc::new(strategy);
        self
    }

    /// A filter of its own (Curator's `additionalFilter`): only instances for which every filter
    /// returns true are picked.
    pub fn filter(mut self, filter: impl Fn(&ServiceInstance<T>) -> bool + Send + Sync + 'static) -> Self {
        self.filters.push(Arc::new(filter));
        self
    }

    /// Whether disabled instances ([`ServiceInstance::is_enabled`] false) are skipped (true, the
    /// default, as Curator's provider always does).
    pub fn skip_disabled(mut self, skip: bool) -> Self {
        self.skip_disabled = skip;
        self
    }

    /// When an instance noted with errors is skipped (default [`DownInstancePolicy::default`]).
    pub fn down_instance_policy(mut self, policy: DownInstancePolicy) -> Self {
        self.down_policy = policy;
        self
    }

    /// Starts the provider: its [`ServiceCache`] loads in the background (see
    /// [`ServiceProvider::wait_initialized_timeout`]). Must be called within the client's runtime.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a service name that is empty
    /// or holds `/`; as [`CuratorCacheBuilder::start`](crate::cache::CuratorCacheBuilder::start).
    pub fn start(self) -> Result<ServiceProvider<T>> {
        let cache = ServiceCache::start(&self.discovery, &self.name)?;
        Ok(ServiceProvider {
            inner: Arc::new(Inner {
                lookups: crate::metrics::LookupMeter::new(&self.name),
                cache,
                strategy: self.strategy,
                filters: self.filters,
                skip_disabled: self.skip_disabled,
                down: DownInstances {
                    policy: self.down_policy,
                    errors: Mutex::new(HashMap::new()),
                    generation: AtomicU64::new(0),
                },
                filtered: RwLock::new(Filtered {
                    cache_generation: u64::MAX,
                    down_generation: u64::MAX,
                    valid_until: None,
                    generation: 0,
                    list: Arc::from(Vec::new()),
                }),
            }),
        })
    }
}

/// Picks an instance of one service (Curator's `ServiceProvider`): from its [`ServiceCache`],
/// among the instances that pass its filters (enabled ones by default, those of its own, and not
/// down: see [`note_error`](Self::note_error)), by its strategy.
///
/// [`get_instance`](Self::get_instance) costs no round trip and no copy of the list: the filtered
/// list is made once per change of the cache (or of the down instances) and shared; a pick is a
/// few atomic operations. From any thread.
///
/// A cheap [`Clone`] shares one provider.
///
/// ```no_run
/// use std::time::Duration;
///
/// # async fn demo(discovery: zk_curator::discovery::ServiceDiscovery) -> zk_curator::Result<()> {
/// let provider = discovery.provider_builder("api").start()?;
/// provider.wait_initialized_timeout(Duration::from_secs(5)).await?;
/// if let Some(instance) = provider.get_instance() {
///     let url = instance.build_uri();
///     // ... call it; on a failure:
///     provider.note_error(&instance);
/// }
/// # Ok(()) }
/// ```
pub struct ServiceProvider<T = serde_json::Value> {
    inner: Arc<Inner<T>>,
}

impl<T> Clone for ServiceProvider<T> {
    fn clone(&self) -> Self {
        Self { inner: self.inner.clone() }
    }
}

struct Inner<T> {
    cache: ServiceCache<T>,
    strategy: Arc<dyn ProviderStrategy<T>>,
    filters: Vec<InstanceFilter<T>>,
    skip_disabled: bool,
    down: DownInstances,
    filtered: RwLock<Filtered<T>>,
    lookups: crate::metrics::LookupMeter,
}

/// The candidates, as of a cache generation and a down-set generation.
struct Filtered<T> {
    cache_generation: u64,
    down_generation: u64,
    /// When the first down instance comes back (the list must be made again then).
    valid_until: Option<Instant>,
    /// The provider's own generation of the list (given to strategies).
    generation: u64,
    list: Instances<T>,
}

struct DownInstances {
    policy: DownInstancePolicy,
    /// By instance id: when the window started, how many errors in it.
    errors: Mutex<HashMap<String, (Instant, u32)>>,
    /// Bumped whenever the set of down instances changes.
    generation: AtomicU64,
}

impl DownInstances {
    fn note(&self, id: &str) {
        let now = Instant::now();
        let mut errors = self.errors.lock();
        let entry = errors.entry(id.to_string()).or_insert((now, 0));
        if now.duration_since(entry.0) >= self.policy.timeout {
            *entry = (now, 0);
        }
        entry.1 += 1;
        if entry.1 == self.policy.error_threshold {
            self.generation.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// The ids down now and when the first of them comes back; expired windows are dropped.
    fn down_now(&self) -> (u64, HashSet<String>, Option<Instant>) {
        let now = Instant::now();
        let mut errors = self.errors.lock();
        let timeout = self.policy.timeout;
        errors.retain(|_, (since, _)| now.duration_since(*since) < timeout);
        let mut down = HashSet::new();
        let mut until: Option<Instant> = None;
        for (id, (since, count)) in errors.iter() {
            if *count >= self.policy.error_threshold {
                down.insert(id.clone());
                // A window too long for an `Instant` never ends: no time to look again.
                if let Some(back) = since.checked_add(timeout) {
                    until = Some(until.map_or(back, |u| u.min(back)));
                }
            }
        }
        (self.generation.load(Ordering::Acquire), down, until)
    }
}

impl<T: Payload> ServiceProvider<T> {
    /// One instance, by the strategy; `None` when no instance passes the filters (Curator's
    /// `null`). No round trip, no copy of the list.
    pub fn get_instance(&self) -> Option<Arc<ServiceInstance<T>>> {
        let (generation, list) = self.candidates();
        let picked =
            self.inner.strategy.choose(&Candidates { instances: &list, generation }).and_then(|i| list.get(i).cloned());
        self.inner.lookups.record(picked.is_some());
        picked
    }

    /// Every instance that passes the filters (Curator's `getAllInstances`): a shared list, sorted
    /// by node name.
    pub fn get_all_instances(&self) -> Instances<T> {
        self.candidates().1
    }

    /// Notes that a call to `instance` failed (Curator's `noteError`): past the
    /// [`DownInstancePolicy`]'s threshold within its window, the instance is skipped until the
    /// window has passed.
    pub fn note_error(&self, instance: &ServiceInstance<T>) {
        self.inner.down.note(instance.id());
    }

    /// The provider's cache.
    pub fn cache(&self) -> &ServiceCache<T> {
        &self.inner.cache
    }

    /// How sure the provider's cache is of its contents.
    pub fn state(&self) -> CacheState {
        self.inner.cache.state()
    }

    /// Waits until the cache's first load is in, at most `timeout` (a `Duration` or an instant,
    /// see [`Deadline`](crate::Deadline)): `Ok(true)` once it is, `Ok(false)` when the time ran
    /// out first — the call returns then, whatever the connection does.
    ///
    /// # Errors
    /// As [`ServiceCache::wait_initialized_timeout`].
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(provider: zk_curator::discovery::ServiceProvider) -> zk_curator::Result<()> {
    /// if provider.wait_initialized_timeout(std::time::Duration::from_secs(5)).await? {
    ///     println!("{:?}", provider.get_instance());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn wait_initialized_timeout(&self, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        self.inner.cache.wait_initialized_timeout(timeout).await
    }

    /// Stops the provider's cache (Curator's `close`).
    ///
    /// # Cancel safety
    /// Cancel safe: the stop is requested at the first poll.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(provider: zk_curator::discovery::ServiceProvider) {
    /// provider.close().await;
    /// # }
    /// ```
    pub async fn close(&self) {
        self.inner.cache.close().await;
    }

    /// The filtered list and its generation: the shared one while neither the cache nor the down
    /// set changed (and no down instance came back), else made again.
    fn candidates(&self) -> (u64, Instances<T>) {
        let inner = &*self.inner;
        let cache_generation = inner.cache.shared().generation();
        let down_generation = inner.down.generation.load(Ordering::Acquire);
        {
            let filtered = inner.filtered.read();
            if filtered.cache_generation == cache_generation
                && filtered.down_generation == down_generation
                && filtered.valid_until.is_none_or(|until| Instant::now() < until)
            {
                return (filtered.generation, filtered.list.clone());
            }
        }
        let (cache_generation, view) = inner.cache.shared().view();
        let (down_generation, down, valid_until) = inner.down.down_now();
        let list: Instances<T> = view
            .iter()
            .filter(|i| !inner.skip_disabled || i.is_enabled())
            .filter(|i| !down.contains(i.id()))
            .filter(|i| inner.filters.iter().all(|keep| keep(i)))
            .cloned()
            .collect();
        let mut filtered = inner.filtered.write();
        let generation = filtered.generation + 1;
        *filtered = Filtered { cache_generation, down_generation, valid_until, generation, list: list.clone() };
        (generation, list)
    }
}

impl<T> fmt::Debug for ServiceProvider<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServiceProvider").field("cache", &self.inner.cache).finish_non_exhaustive()
    }
}
