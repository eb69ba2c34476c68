//! Blocking service discovery: [`ServiceDiscovery`], [`ServiceCache`] (with the
//! [`ServiceCacheChanges`] iterator) and [`ServiceProvider`] over their async counterparts in
//! [`crate::discovery`].

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{Core, CuratorClient};
use crate::discovery::{self as d, Instances, Payload, ServiceCacheEvent, ServiceInstance};
use crate::error::{Error, Result};

/// A blocking [`discovery::ServiceDiscovery`](crate::discovery::ServiceDiscovery): the same
/// registrations (kept through expiries, restarts and deletes by the client's runtime thread),
/// each call waiting on the calling thread.
///
/// ```no_run
/// use zk_curator::blocking::{CuratorClient, ServiceDiscovery};
/// use zk_curator::discovery::ServiceInstance;
///
/// fn serve() -> zk_curator::Result<()> {
///     let client = CuratorClient::connect("127.0.0.1:2181")?;
///     let discovery = ServiceDiscovery::<()>::new(&client, "/services")?;
///     discovery.register(&ServiceInstance::builder("api").port(8080).build()?)?;
///     // ... serve ...
///     discovery.close()
/// }
/// ```
pub struct ServiceDiscovery<T = serde_json::Value> {
    inner: d::ServiceDiscovery<T>,
    core: Arc<Core>,
}

impl<T> Clone for ServiceDiscovery<T> {
    fn clone(&self) -> Self {
        Self { inner: self.inner.clone(), core: self.core.clone() }
    }
}

impl<T> std::fmt::Debug for ServiceDiscovery<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl<T: Payload> ServiceDiscovery<T> {
    /// A discovery of the registry under `base_path` with Curator's JSON; for the other options
    /// build an async one on [`CuratorClient::async_client`] and pass it to
    /// [`from_async`](Self::from_async).
    ///
    /// # Errors
    /// [`Error::InvalidPath`] naming `base_path`.
    pub fn new(client: &CuratorClient, base_path: &str) -> Result<Self> {
        let inner = d::ServiceDiscovery::builder(client.async_client(), base_path).build()?;
        Ok(Self { inner, core: client.core().clone() })
    }

    /// Wraps a discovery built on `client`'s [`async_client`](CuratorClient::async_client).
    pub fn from_async(client: &CuratorClient, discovery: d::ServiceDiscovery<T>) -> Self {
        Self { inner: discovery, core: client.core().clone() }
    }

    /// The async discovery.
    pub fn async_discovery(&self) -> &d::ServiceDiscovery<T> {
        &self.inner
    }

    /// Registers `instance`, waiting on the calling thread (see
    /// [`ServiceDiscovery::register`](crate::discovery::ServiceDiscovery::register)).
    ///
    /// # Errors
    /// As the async `register`; [`Error::InvalidArgument`] naming `runtime` inside a tokio runtime
    /// context.
    pub fn register(&self, instance: &ServiceInstance<T>) -> Result<()> {
        self.core.block_on(self.inner.register(instance))?
    }

    /// See [`ServiceDiscovery::update`](crate::discovery::ServiceDiscovery::update).
    ///
    /// # Errors
    /// As the async `update`.
    pub fn update(&self, instance: &ServiceInstance<T>) -> Result<()> {
        self.inner.update(instance)
    }

    /// Unregisters `instance`'s id and deletes its node, waiting on the calling thread.
    ///
    /// # Errors
    /// As the async `unregister`; [`Error::InvalidArgument`] naming `runtime` inside a tokio
    /// runtime context.
    pub fn unregister(&self, instance: &ServiceInstance<T>) -> Result<()> {
        self.core.block_on(self.inner.unregister(instance))?
    }

    /// See [`ServiceDiscovery::query_for_names`](crate::discovery::ServiceDiscovery::query_for_names).
    ///
    /// # Errors
    /// As the async call; [`Error::InvalidArgument`] naming `runtime` inside a runtime context.
    pub fn query_for_names(&self) -> Result<Vec<String>> {
        self.core.block_on(self.inner.query_for_names())?
    }

    /// See [`ServiceDiscovery::query_for_instances`](crate::discovery::ServiceDiscovery::query_for_instances).
    ///
    /// # Errors
    /// As the async call; [`Error::InvalidArgument`] naming `runtime` inside a runtime context.
    pub fn query_for_instances(&self, name: &str) -> Result<Vec<ServiceInstance<T>>> {
        self.core.block_on(self.inner.query_for_instances(name))?
    }

    /// See [`ServiceDiscovery::query_for_instance`](crate::discovery::ServiceDiscovery::query_for_instance).
    ///
    /// # Errors
    /// As the async call; [`Error::InvalidArgument`] naming `runtime` inside a runtime context.
    pub fn query_for_instance(&self, name: &str, id: &str) -> Result<Option<ServiceInstance<T>>> {
        self.core.block_on(self.inner.query_for_instance(name, id))?
    }

    /// A started cache of service `name` (see
    /// [`ServiceDiscovery::service_cache`](crate::discovery::ServiceDiscovery::service_cache)).
    ///
    /// # Errors
    /// As the async call.
    pub fn service_cache(&self, name: &str) -> Result<ServiceCache<T>> {
        let inner = self.core.enter(|| self.inner.service_cache(name))?;
        Ok(ServiceCache { inner, core: self.core.clone() })
    }

    /// A started round-robin provider of service `name` with the default filter and policy; for
    /// the other options start an async one ([`provider_builder`](crate::discovery::ServiceDiscovery::provider_builder))
    /// inside [`CuratorClient::block_on`] and pass it to [`ServiceProvider::from_async`].
    ///
    /// # Errors
    /// As [`ServiceProviderBuilder::start`](crate::discovery::ServiceProviderBuilder::start).
    pub fn provider(&self, name: &str) -> Result<ServiceProvider<T>> {
        let inner = self.core.enter(|| self.inner.provider_builder(name).start())?;
        Ok(ServiceProvider { inner, core: self.core.clone() })
    }

    /// Unregisters everything this discovery registered, waiting on the calling thread.
    ///
    /// # Errors
    /// As the async `close`; [`Error::InvalidArgument`] naming `runtime` inside a tokio runtime
    /// context.
    pub fn close(&self) -> Result<()> {
        self.core.block_on(self.inner.close())?
    }
}

/// A blocking [`discovery::ServiceCache`](crate::discovery::ServiceCache): reads never wait;
/// [`wait_initialized_timeout`](Self::wait_initialized_timeout), [`close`](Self::close) and the
/// [`ServiceCacheChanges`] iterator wait on the calling thread.
pub struct ServiceCache<T = serde_json::Value> {
    inner: d::ServiceCache<T>,
    core: Arc<Core>,
}

impl<T> Clone for ServiceCache<T> {
    fn clone(&self) -> Self {
        Self { inner: self.inner.clone(), core: self.core.clone() }
    }
}

impl<T> std::fmt::Debug for ServiceCache<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl<T: Payload> ServiceCache<T> {
    /// See [`ServiceCache::instances`](crate::discovery::ServiceCache::instances).
    pub fn instances(&self) -> Instances<T> {
        self.inner.instances()
    }

    /// The number of instances now.
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    /// True when no instance is held.
    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    /// See [`ServiceCache::unparsable`](crate::discovery::ServiceCache::unparsable).
    pub fn unparsable(&self) -> BTreeMap<String, Error> {
        self.inner.unparsable()
    }

    /// Waits on the calling thread until the first load is in, at most `timeout` (a `Duration`
    /// or an instant, see [`Deadline`](crate::Deadline)): `Ok(true)` once it is, `Ok(false)` when
    /// the time ran out first.
    ///
    /// # Errors
    /// As the async call; [`Error::InvalidArgument`] naming `runtime` inside a runtime context.
    pub fn wait_initialized_timeout(&self, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let timeout = timeout.into();
        self.core.block_on(self.inner.wait_initialized_timeout(timeout))?
    }

    /// A new subscriber to the cache's changes, as a blocking iterator.
    pub fn events(&self) -> ServiceCacheChanges<T> {
        ServiceCacheChanges { inner: self.inner.events(), name: self.inner.name().to_string(), core: self.core.clone() }
    }

    /// Stops the cache, waiting on the calling thread.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `runtime` inside a tokio runtime context.
    pub fn close(&self) -> Result<()> {
        self.core.block_on(self.inner.close())
    }
}

/// The changes of a blocking [`ServiceCache`] for one subscriber: an iterator that waits on the
/// calling thread and ends when the cache closes.
pub struct ServiceCacheChanges<T> {
    inner: d::ServiceCacheEvents<T>,
    name: String,
    core: Arc<Core>,
}

impl<T> std::fmt::Debug for ServiceCacheChanges<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl<T: Payload> ServiceCacheChanges<T> {
    /// The next change, waiting at most `timeout`; `Ok(None)` once the cache closed and every
    /// change was read.
    ///
    /// # Errors
    /// [`Error::DeadlineExceeded`] naming the service when nothing came within `timeout`;
    /// [`Error::InvalidArgument`] naming `runtime` inside a tokio runtime context.
    pub fn next_timeout(&mut self, timeout: impl Into<crate::Deadline>) -> Result<Option<ServiceCacheEvent<T>>> {
        let timeout = timeout.into().remaining();
        let during = "waiting for a change of the service cache of";
        self.core.feed_next_timeout(self.inner.next(), timeout, &self.name, during)
    }

    /// The next change if one is ready, without waiting.
    pub fn try_next(&mut self) -> Option<ServiceCacheEvent<T>> {
        self.inner.try_next()
    }
}

impl<T: Payload> Iterator for ServiceCacheChanges<T> {
    type Item = ServiceCacheEvent<T>;

    /// Waits for the next change; `None` once the cache closed (or when called inside a tokio
    /// runtime context: logged).
    fn next(&mut self) -> Option<ServiceCacheEvent<T>> {
        self.core.feed_next(self.inner.next(), &self.name)
    }
}

/// A blocking [`discovery::ServiceProvider`](crate::discovery::ServiceProvider): picks never wait.
pub struct ServiceProvider<T = serde_json::Value> {
    inner: d::ServiceProvider<T>,
    core: Arc<Core>,
}

impl<T> Clone for ServiceProvider<T> {
    fn clone(&self) -> Self {
        Self { inner: self.inner.clone(), core: self.core.clone() }
    }
}

impl<T> std::fmt::Debug for ServiceProvider<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl<T: Payload> ServiceProvider<T> {
    /// Wraps a provider started on `client`'s [`async_client`](CuratorClient::async_client).
    pub fn from_async(client: &CuratorClient, provider: d::ServiceProvider<T>) -> Self {
        Self { inner: provider, core: client.core().clone() }
    }

    /// See [`ServiceProvider::get_instance`](crate::discovery::ServiceProvider::get_instance).
    pub fn get_instance(&self) -> Option<Arc<ServiceInstance<T>>> {
        self.inner.get_instance()
    }

    /// See [`ServiceProvider::get_all_instances`](crate::discovery::ServiceProvider::get_all_instances).
    pub fn get_all_instances(&self) -> Instances<T> {
        self.inner.get_all_instances()
    }

    /// See [`ServiceProvider::note_error`](crate::discovery::ServiceProvider::note_error).
    pub fn note_error(&self, instance: &ServiceInstance<T>) {
        self.inner.note_error(instance)
    }

    /// Waits on the calling thread until the provider's cache has its first load, at most
    /// `timeout`: `Ok(true)` once it has, `Ok(false)` when the time ran out first.
    ///
    /// # Errors
    /// As the async call; [`Error::InvalidArgument`] naming `runtime` inside a runtime context.
    pub fn wait_initialized_timeout(&self, timeout: impl Into<crate::Deadline>) -> Result<bool> {
        let timeout = timeout.into();
        self.core.block_on(self.inner.wait_initialized_timeout(timeout))?
    }

    /// Stops the provider's cache, waiting on the calling thread.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `runtime` inside a tokio runtime context.
    pub fn close(&self) -> Result<()> {
        self.core.block_on(self.inner.close())
    }
}
