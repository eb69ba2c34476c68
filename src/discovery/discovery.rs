//! [`ServiceDiscovery`] (Curator's `ServiceDiscovery`/`ServiceDiscoveryImpl`): registers this
//! process's instances and queries the registry.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use serde::de::DeserializeOwned;
use serde::Serialize;
use tracing::warn;

use crate::error::{Error, ErrorCode, Result};
use crate::framework::paths;
use crate::nodes::{PersistentNode, Protection};
use crate::CuratorClient;

use super::cache::{ServiceCache, ServiceCacheEvent};
use super::instance::{check_node_name, ServiceInstance};
use super::path_constructor::{DiscoveryPathConstructor, StandardPathConstructor};
use super::provider::ServiceProviderBuilder;
use super::serializer::{InstanceSerializer, JsonInstanceSerializer};

/// What a [`ServiceDiscovery`]'s payload must be: serde both ways, cloneable, shareable between
/// tasks (implemented for every such type).
pub trait Payload: Serialize + DeserializeOwned + Clone + Send + Sync + 'static {}
impl<T: Serialize + DeserializeOwned + Clone + Send + Sync + 'static> Payload for T {}

/// Options of a [`ServiceDiscovery`], from [`ServiceDiscovery::builder`].
#[must_use = "a builder does nothing until build()"]
pub struct ServiceDiscoveryBuilder<T> {
    client: CuratorClient,
    base_path: String,
    path_constructor: Option<Arc<dyn DiscoveryPathConstructor>>,
    serializer: Arc<dyn InstanceSerializer<T>>,
    this_instance: Option<ServiceInstance<T>>,
    watch_instances: bool,
}

impl<T: Payload> ServiceDiscoveryBuilder<T> {
    /// Whether to follow changes made by others to the instances registered here (Curator's
    /// `watchInstances`, default false): a change written to a registered instance's node by
    /// someone else becomes this discovery's copy ([`registered`](ServiceDiscovery::registered))
    /// and the data the node is re-created with. One [`ServiceCache`] per service name registered.
    pub fn watch_instances(mut self, watch: bool) -> Self {
        self.watch_instances = watch;
        self
    }

    /// How instances become node data (default: [`JsonInstanceSerializer::new`], Curator's JSON
    /// in compatible mode). Every reader and writer of the registry must agree.
    pub fn serializer(mut self, serializer: impl InstanceSerializer<T>) -> Self {
        self.serializer = Arc::new(serializer);
        self
    }

    /// Where the services and instances are (Curator's `pathConstructor`): replaces the
    /// builder's base path and its `base/NAME/ID` layout ([`StandardPathConstructor`]). Every
    /// reader and writer of the registry must use the same layout.
    ///
    /// ```no_run
    /// use zk_curator::discovery::{DiscoveryPathConstructor, ServiceDiscovery};
    ///
    /// struct HostsLayout;
    /// impl DiscoveryPathConstructor for HostsLayout {
    ///     fn base_path(&self) -> &str {
    ///         "/services"
    ///     }
    ///     fn path_for_instances(&self, service_name: &str) -> String {
    ///         format!("/services/{service_name}/hosts")
    ///     }
    /// }
    /// # fn demo(client: &zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// let discovery = ServiceDiscovery::<()>::builder(client, "/unused").path_constructor(HostsLayout).build()?;
    /// assert_eq!(discovery.path_for_instance("api", "a1"), "/services/api/hosts/a1");
    /// # Ok(()) }
    /// ```
    pub fn path_constructor(mut self, constructor: impl DiscoveryPathConstructor) -> Self {
        self.path_constructor = Some(Arc::new(constructor));
        self
    }

    /// An instance registered by [`start`](ServiceDiscovery::start) (Curator's `thisInstance`).
    pub fn this_instance(mut self, instance: ServiceInstance<T>) -> Self {
        self.this_instance = Some(instance);
        self
    }

    /// The discovery. Nothing is registered until [`start`](ServiceDiscovery::start) or
    /// [`register`](ServiceDiscovery::register).
    ///
    /// # Errors
    /// [`Error::InvalidPath`] naming the base path (the path constructor's, if set) if it is not
    /// a valid ZooKeeper path.
    pub fn build(self) -> Result<ServiceDiscovery<T>> {
        let layout: Arc<dyn DiscoveryPathConstructor> = match self.path_constructor {
            Some(layout) => {
                paths::validate_path(layout.base_path())?;
                layout
            }
            None => Arc::new(StandardPathConstructor::new(&self.base_path)?),
        };
        Ok(ServiceDiscovery {
            inner: Arc::new(Inner {
                client: self.client,
                layout,
                serializer: self.serializer,
                this_instance: parking_lot::Mutex::new(self.this_instance),
                watch_instances: self.watch_instances,
                watchers: parking_lot::Mutex::new(HashMap::new()),
                registered: parking_lot::Mutex::new(HashMap::new()),
                changes: tokio::sync::Mutex::new(()),
                abandoned: parking_lot::Mutex::new(HashMap::new()),
                closed: std::sync::atomic::AtomicBool::new(false),
            }),
        })
    }
}

impl<T> std::fmt::Debug for ServiceDiscoveryBuilder<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceDiscoveryBuilder").field("base_path", &self.base_path).finish_non_exhaustive()
    }
}

/// Service discovery on ZooKeeper, wire-compatible with Curator's `curator-x-discovery`: a Java
/// service and a Rust service share one registry.
///
/// The registry: `base/NAME/ID` per instance, its data the instance's JSON
/// ([`JsonInstanceSerializer`]); an ephemeral node for [`Dynamic`](super::ServiceType::Dynamic)
/// instances (ephemeral sequential, `ID` followed by a sequence, for
/// [`DynamicSequential`](super::ServiceType::DynamicSequential)), a persistent one for `Static`
/// and `Permanent`; parents made as containers.
///
/// A registration is kept by a [`PersistentNode`]: re-created after a session expiry, a server
/// restart or a delete by someone else, with the latest data (an [`update`](Self::update) made
/// while disconnected is written once connected). [`close`](Self::close) unregisters everything
/// this discovery registered; so does dropping its last clone (in the background).
///
/// Beyond Curator: an ephemeral node of the same path held by *another* session (a previous run
/// of the process whose session has not expired yet) is not deleted from under it: the
/// registration waits for it to go (Curator deletes it and creates its own).
///
/// A cheap [`Clone`] shares one discovery.
///
/// ```no_run
/// use zk_curator::discovery::{ServiceDiscovery, ServiceInstance};
///
/// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
/// let discovery = ServiceDiscovery::<serde_json::Value>::builder(&client, "/services").build()?;
/// let me = ServiceInstance::builder("api").port(8080).build()?;
/// discovery.register(&me).await?;
/// for instance in discovery.query_for_instances("api").await? {
///     println!("{} at {:?}:{:?}", instance.id(), instance.address(), instance.port());
/// }
/// discovery.close().await?;
/// # Ok(()) }
/// ```
pub struct ServiceDiscovery<T = serde_json::Value> {
    inner: Arc<Inner<T>>,
}

impl<T> Clone for ServiceDiscovery<T> {
    fn clone(&self) -> Self {
        Self { inner: self.inner.clone() }
    }
}

struct Inner<T> {
    client: CuratorClient,
    /// Where the services and instances are.
    layout: Arc<dyn DiscoveryPathConstructor>,
    serializer: Arc<dyn InstanceSerializer<T>>,
    this_instance: parking_lot::Mutex<Option<ServiceInstance<T>>>,
    watch_instances: bool,
    /// With `watch_instances`: a cache per service name registered, and its follower task.
    watchers: parking_lot::Mutex<HashMap<String, (ServiceCache<T>, crate::nodes::HelperTask)>>,
    /// By instance id.
    registered: parking_lot::Mutex<HashMap<String, Registration<T>>>,
    /// Registers, unregisters and close one at a time (each waits for its node).
    changes: tokio::sync::Mutex<()>,
    /// By path: the close of a node whose register was dropped mid-flight. A later register of
    /// the path waits for it (it would otherwise take that node as its own, then see it deleted).
    abandoned: parking_lot::Mutex<HashMap<String, tokio::task::JoinHandle<()>>>,
    closed: std::sync::atomic::AtomicBool,
}

/// Closes a registering node if its register is dropped before it is registered.
struct Registering<'a, T> {
    inner: &'a Inner<T>,
    path: String,
    node: Option<PersistentNode>,
}

impl<T> Drop for Registering<'_, T> {
    fn drop(&mut self) {
        if let Some(node) = self.node.take() {
            let closing = self.inner.client.runtime().spawn(async move {
                let _ = node.close().await;
            });
            self.inner.abandoned.lock().insert(std::mem::take(&mut self.path), closing);
        }
    }
}

/// The builder's `this_instance` while [`ServiceDiscovery::start`] registers it: put back when
/// dropped still holding it, so that a failed or cancelled start leaves it for the next.
struct PendingThisInstance<'a, T> {
    slot: &'a parking_lot::Mutex<Option<ServiceInstance<T>>>,
    instance: Option<ServiceInstance<T>>,
}

impl<T> Drop for PendingThisInstance<'_, T> {
    fn drop(&mut self) {
        if let Some(instance) = self.instance.take() {
            self.slot.lock().get_or_insert(instance);
        }
    }
}

struct Registration<T> {
    instance: ServiceInstance<T>,
    node: PersistentNode,
}

impl<T> std::fmt::Debug for ServiceDiscovery<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceDiscovery")
            .field("base_path", &self.inner.layout.base_path())
            .field("registered", &self.inner.registered.lock().keys().cloned().collect::<Vec<_>>())
            .finish()
    }
}

impl<T: Payload> ServiceDiscovery<T> {
    /// Options for a discovery of the registry under `base_path` (Curator's
    /// `ServiceDiscoveryBuilder`), with Curator's JSON.
    pub fn builder(client: &CuratorClient, base_path: &str) -> ServiceDiscoveryBuilder<T> {
        ServiceDiscoveryBuilder {
            client: client.clone(),
            base_path: base_path.to_string(),
            path_constructor: None,
            serializer: Arc::new(JsonInstanceSerializer::new()),
            this_instance: None,
            watch_instances: false,
        }
    }

    /// The client.
    pub fn client(&self) -> &CuratorClient {
        &self.inner.client
    }

    /// The registry's base path (its path constructor's).
    pub fn base_path(&self) -> &str {
        self.inner.layout.base_path()
    }

    pub(crate) fn serializer(&self) -> Arc<dyn InstanceSerializer<T>> {
        self.inner.serializer.clone()
    }

    /// The path of a service's instances: `base/name` (its path constructor's
    /// [`path_for_instances`](DiscoveryPathConstructor::path_for_instances)).
    pub fn path_for_name(&self, name: &str) -> String {
        self.inner.layout.path_for_instances(name)
    }

    /// The path of an instance: `base/name/id` (under [`path_for_name`](Self::path_for_name)).
    pub fn path_for_instance(&self, name: &str, id: &str) -> String {
        paths::join(&self.path_for_name(name), id)
    }

    /// A [`ServiceCache`] of service `name`, started (Curator's `serviceCacheBuilder().name(..)`
    /// then `start`): it loads in the background (see
    /// [`ServiceCache::wait_initialized_timeout`]). Must be called within the client's runtime.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a name that is empty or holds `/`; as
    /// [`CuratorCacheBuilder::start`](crate::cache::CuratorCacheBuilder::start).
    pub fn service_cache(&self, name: &str) -> Result<ServiceCache<T>> {
        ServiceCache::start(self, name)
    }

    /// Options for a [`ServiceProvider`](super::ServiceProvider) of service `name` (Curator's `serviceProviderBuilder`):
    /// round robin, enabled instances, the default [`DownInstancePolicy`](super::DownInstancePolicy).
    pub fn provider_builder(&self, name: &str) -> ServiceProviderBuilder<T> {
        ServiceProviderBuilder::new(self, name)
    }

    /// Registers the [`this_instance`](ServiceDiscoveryBuilder::this_instance) given to the
    /// builder, if any (Curator's `start`); does nothing without one.
    ///
    /// # Errors
    /// As [`register`](Self::register).
    ///
    /// # Cancel safety
    /// As [`register`](Self::register); a dropped call leaves the instance to the next `start`.
    ///
    /// # Examples
    /// ```no_run
    /// # use zk_curator::discovery::{ServiceDiscovery, ServiceInstance};
    /// # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
    /// let me = ServiceInstance::builder("api").port(8080).build()?;
    /// let discovery = ServiceDiscovery::<()>::builder(&client, "/services").this_instance(me).build()?;
    /// discovery.start().await?;
    /// # Ok(()) }
    /// ```
    pub async fn start(&self) -> Result<()> {
        let Some(instance) = self.inner.this_instance.lock().take() else { return Ok(()) };
        // Given back unless registered: on an error, and when this call is dropped mid-register.
        let mut pending = PendingThisInstance { slot: &self.inner.this_instance, instance: Some(instance.clone()) };
        let registered = self.register(&instance).await;
        if registered.is_ok() {
            pending.instance = None;
        }
        registered
    }

    /// Registers `instance` (Curator's `registerService`) and waits until its node is created
    /// (at most the client's connection timeout); from then on it is kept registered — through
    /// expiries, restarts and deletes — until [`unregister`](Self::unregister) or
    /// [`close`](Self::close). Registering an id already registered updates it (a new name or
    /// service type moves it to a new node).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a name or id that is empty or holds `/`, a payload serde
    /// cannot write, or node data over the client's
    /// [`max_data_size`](crate::CuratorClientBuilder::max_data_size) (naming its size and the
    /// path); [`Error::DeadlineExceeded`] naming the path when the node was not created within
    /// the connection timeout (e.g. no connection, or the node held by another session), a create
    /// error retrying cannot cure (e.g. `NoAuth`), [`Error::Closed`] once closed. On every error
    /// nothing is registered and nothing is left behind.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call registers nothing, and a node it created is deleted in the
    /// background (a later register of the same instance waits for that delete).
    ///
    /// # Examples
    /// ```no_run
    /// # use zk_curator::discovery::{ServiceDiscovery, ServiceInstance};
    /// # async fn demo(discovery: ServiceDiscovery) -> zk_curator::Result<()> {
    /// let me = ServiceInstance::builder("api").address("10.0.0.7").port(8080).build()?;
    /// discovery.register(&me).await?;
    /// # Ok(()) }
    /// ```
    pub async fn register(&self, instance: &ServiceInstance<T>) -> Result<()> {
        let _one_at_a_time = self.inner.changes.lock().await;
        self.check_open()?;
        let path = self.checked_path(instance)?;
        let bytes = self.serialize(instance, &path)?;
        if self.replace_registered(instance, &bytes).await? {
            return Ok(());
        }
        self.create_registrations(vec![(instance, path, bytes)]).await
    }

    /// Registers every instance of `instances` at once (no Curator counterpart): their creates are
    /// sent together, so a batch costs about one round trip instead of one per instance (a
    /// process registering many instances, or a test fixture). Otherwise as
    /// [`register`](Self::register) of each: an id already registered here is updated (or moved).
    ///
    /// # Errors
    /// As [`register`](Self::register), and [`Error::InvalidArgument`] naming an id given twice.
    /// Every instance is checked before anything is sent: a bad one registers none. When a create
    /// fails, none of the instances new to this discovery stays registered (their nodes are
    /// deleted); updates of ids already registered, made first, stay.
    ///
    /// # Cancel safety
    /// Cancel safe as [`register`](Self::register): a dropped call registers none of the new
    /// instances, and the nodes it created are deleted in the background.
    ///
    /// # Examples
    /// ```no_run
    /// # use zk_curator::discovery::{ServiceDiscovery, ServiceInstance};
    /// # async fn demo(discovery: ServiceDiscovery) -> zk_curator::Result<()> {
    /// let workers = (0..8)
    ///     .map(|i| ServiceInstance::builder("worker").id(format!("w-{i}")).port(9000 + i).build())
    ///     .collect::<zk_curator::Result<Vec<_>>>()?;
    /// discovery.register_all(&workers).await?;
    /// # Ok(()) }
    /// ```
    pub async fn register_all(&self, instances: &[ServiceInstance<T>]) -> Result<()> {
        let _one_at_a_time = self.inner.changes.lock().await;
        self.check_open()?;
        let mut checked = Vec::with_capacity(instances.len());
        let mut ids = std::collections::HashSet::with_capacity(instances.len());
        for instance in instances {
            if !ids.insert(instance.id.as_str()) {
                return Err(Error::invalid_argument("instance id", &instance.id, "is given twice in one register_all"));
            }
            let path = self.checked_path(instance)?;
            let bytes = self.serialize(instance, &path)?;
            checked.push((instance, path, bytes));
        }
        let mut new = Vec::with_capacity(checked.len());
        for (instance, path, bytes) in checked {
            if !self.replace_registered(instance, &bytes).await? {
                new.push((instance, path, bytes));
            }
        }
        self.create_registrations(new).await
    }

    /// For an id already registered here: updates it in place (same name and service type), or
    /// closes its node (moved) and returns false so that it is created again. False for a new id.
    async fn replace_registered(&self, instance: &ServiceInstance<T>, bytes: &[u8]) -> Result<bool> {
        let existing = self.inner.registered.lock().get(&instance.id).map(|r| {
            let same_node = r.instance.name == instance.name && r.instance.service_type == instance.service_type;
            (same_node, r.node.clone())
        });
        let Some((same_node, node)) = existing else { return Ok(false) };
        if same_node {
            node.set_data(bytes.to_vec())?;
            if let Some(registration) = self.inner.registered.lock().get_mut(&instance.id) {
                registration.instance = instance.clone();
            }
            return Ok(true);
        }
        self.inner.registered.lock().remove(&instance.id);
        node.close().await?;
        Ok(false)
    }

    /// Creates the nodes of new registrations, all sent before any reply is awaited, and waits
    /// for every one (at most the connection timeout in all): all registered, or none.
    async fn create_registrations(&self, new: Vec<(&ServiceInstance<T>, String, Vec<u8>)>) -> Result<()> {
        let timeout = self.inner.client.connection_timeout();
        let start = Instant::now();
        let deadline = start + timeout;
        if new.len() > 1 {
            // The service nodes first, once each: else every create of a batch under a new
            // service finds no parent and makes the parents itself (a thousand times the same).
            // Best effort: a node's own create still makes what is missing.
            let mut parents: Vec<&str> = new.iter().map(|(_, path, _)| paths::parent(path)).collect();
            parents.sort_unstable();
            parents.dedup();
            for parent in parents {
                let fixed = self.inner.client.fix_path(parent);
                if let Err(e) = self.inner.client.create_parents(&fixed, Some(deadline)).await {
                    tracing::debug!(%e, parent, "creating a service node before its instances failed");
                }
            }
        }
        let mut registering = Vec::with_capacity(new.len());
        for (instance, path, bytes) in new {
            let abandoned = self.inner.abandoned.lock().remove(&path);
            if let Some(closing) = abandoned {
                let _ = closing.await;
            }
            let mode = instance.service_type.create_mode();
            let node = PersistentNode::new(&self.inner.client, &path, mode, Protection::Unprotected, bytes)?;
            // Pushed before starting: from here a drop of this call deletes what it created.
            registering.push((instance, Registering { inner: &self.inner, path, node: Some(node.clone()) }));
            node.start()?;
        }
        // Every node's task creates it on its own: awaited in turn, the creates still overlap.
        let mut created = Vec::with_capacity(registering.len());
        for (_, r) in &registering {
            let node = r.node.as_ref().expect("set until handed over");
            created.push(node.wait_for_initial_create(deadline).await);
        }
        let mut failure = None;
        for ((_, r), created) in registering.iter().zip(created) {
            let node = r.node.as_ref().expect("set until handed over");
            let error = match created {
                Ok(true) => continue,
                Ok(false) => node.create_errors().borrow().clone().filter(|e| !e.is_retryable()).unwrap_or(
                    Error::DeadlineExceeded {
                        path: r.path.clone(),
                        during: "registering (creating the node of)",
                        waited: start.elapsed(),
                        timeout: Some(timeout),
                    },
                ),
                Err(e) => e,
            };
            failure = Some(error);
            break;
        }
        let nodes: Vec<(&ServiceInstance<T>, PersistentNode)> = registering
            .iter_mut()
            .map(|(instance, r)| (*instance, r.node.take().expect("set until handed over")))
            .collect();
        drop(registering);
        if let Some(error) = failure {
            for (_, node) in &nodes {
                let _ = node.close().await;
            }
            return Err(error);
        }
        let mut names = Vec::new();
        {
            let mut registered = self.inner.registered.lock();
            for (instance, node) in nodes {
                if !names.contains(&instance.name) {
                    names.push(instance.name.clone());
                }
                crate::metrics::discovery_registered(&instance.name);
                registered.insert(instance.id.clone(), Registration { instance: instance.clone(), node });
            }
        }
        if self.inner.watch_instances {
            for name in &names {
                self.watch(name);
            }
        }
        Ok(())
    }

    /// Replaces a registered instance's data (Curator's `updateService`), matched by id: written
    /// to its node in the background — kept if the connection is down, and written once it is
    /// back (and used for every re-creation).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when no instance of that id is registered here, the name
    /// differs from the registered one, the payload cannot be written, or the data is over the
    /// client's `max_data_size` (nothing changed then); [`Error::Closed`] once closed.
    pub fn update(&self, instance: &ServiceInstance<T>) -> Result<()> {
        self.check_open()?;
        let path = self.checked_path(instance)?;
        let bytes = self.serialize(instance, &path)?;
        let mut registered = self.inner.registered.lock();
        let Some(registration) = registered.get_mut(&instance.id) else {
            return Err(Error::invalid_argument("instance id", &instance.id, "is not registered by this discovery"));
        };
        if registration.instance.name != instance.name {
            return Err(Error::invalid_argument(
                "service name",
                &instance.name,
                "differs from the registered instance's (register it again to move it)",
            ));
        }
        registration.node.set_data(bytes)?;
        registration.instance = instance.clone();
        Ok(())
    }

    /// Unregisters the instance of `instance`'s id (Curator's `unregisterService`) and deletes
    /// its node, waiting for the delete (at most the connection timeout; past it, the delete goes
    /// on in the background, guaranteed). Nothing to do for an id not registered here.
    ///
    /// # Errors
    /// The delete's error (it goes on in the background then).
    ///
    /// # Cancel safety
    /// Cancel safe: the instance is unregistered at the first poll; its node's delete goes on in
    /// the background.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(discovery: zk_curator::discovery::ServiceDiscovery, me: zk_curator::discovery::ServiceInstance) -> zk_curator::Result<()> {
    /// discovery.unregister(&me).await?;
    /// # Ok(()) }
    /// ```
    pub async fn unregister(&self, instance: &ServiceInstance<T>) -> Result<()> {
        let _one_at_a_time = self.inner.changes.lock().await;
        let registration = self.inner.registered.lock().remove(&instance.id);
        match registration {
            Some(registration) => registration.node.close().await,
            None => Ok(()),
        }
    }

    /// The instances registered by this discovery now, as last given.
    pub fn registered(&self) -> Vec<ServiceInstance<T>> {
        self.inner.registered.lock().values().map(|r| r.instance.clone()).collect()
    }

    /// The path of a registered instance's node as now kept (with its sequence for
    /// [`DynamicSequential`](super::ServiceType::DynamicSequential)); `None` if not registered
    /// here or while it is being re-created.
    pub fn registered_path(&self, id: &str) -> Option<String> {
        self.inner.registered.lock().get(id).and_then(|r| r.node.actual_path())
    }

    /// The names of the services in the registry (Curator's `queryForNames`); none when the base
    /// path does not exist.
    ///
    /// # Errors
    /// Server errors after the client's retry policy gave up.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(discovery: zk_curator::discovery::ServiceDiscovery) -> zk_curator::Result<()> {
    /// for name in discovery.query_for_names().await? {
    ///     println!("{name}");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn query_for_names(&self) -> Result<Vec<String>> {
        let mut names = self.children_or_none(self.inner.layout.base_path()).await?;
        names.sort();
        Ok(names)
    }

    /// The instances of service `name` read from the server now (Curator's `queryForInstances`),
    /// sorted by node name. A node whose data cannot be read as an instance (written by someone
    /// else) is skipped and reported (a `warn` event naming its path and why); see
    /// [`ServiceCache::unparsable`](super::ServiceCache::unparsable) for a cache's list.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a name that is empty or holds `/`; server errors after the
    /// client's retry policy gave up.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(discovery: zk_curator::discovery::ServiceDiscovery) -> zk_curator::Result<()> {
    /// let instances = discovery.query_for_instances("api").await?;
    /// println!("{} instances of api", instances.len());
    /// # Ok(()) }
    /// ```
    pub async fn query_for_instances(&self, name: &str) -> Result<Vec<ServiceInstance<T>>> {
        let parent = self.instances_path(name)?;
        let mut ids = self.children_or_none(&parent).await?;
        ids.sort();
        let mut instances = Vec::with_capacity(ids.len());
        for id in ids {
            let path = paths::join(&parent, &id);
            match self.read_instance(&path).await {
                Ok(Some(instance)) => instances.push(instance),
                Ok(None) => {}
                Err(e @ Error::MalformedData { .. }) => warn!(%e, "skipping a service instance that cannot be read"),
                Err(e) => return Err(e),
            }
        }
        Ok(instances)
    }

    /// The instance `id` of service `name` read from the server now (Curator's
    /// `queryForInstance`); `None` if there is none.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a name or id that is empty or holds `/`;
    /// [`Error::MalformedData`] naming the path when its data is not an instance; server errors
    /// after the client's retry policy gave up.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(discovery: zk_curator::discovery::ServiceDiscovery) -> zk_curator::Result<()> {
    /// if let Some(instance) = discovery.query_for_instance("api", "a1").await? {
    ///     println!("{}", instance.build_uri());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn query_for_instance(&self, name: &str, id: &str) -> Result<Option<ServiceInstance<T>>> {
        check_node_name("instance id", id)?;
        let path = paths::join(&self.instances_path(name)?, id);
        self.read_instance(&path).await
    }

    /// Unregisters every instance this discovery registered, deleting their nodes (Curator's
    /// `close`); later registers fail with [`Error::Closed`]. Caches and providers made from it
    /// keep working (they only read).
    ///
    /// # Errors
    /// The deletes' errors (each goes on in the background).
    ///
    /// # Cancel safety
    /// Cancel safe: everything is unregistered at the first poll; the deletes go on in the
    /// background.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(discovery: zk_curator::discovery::ServiceDiscovery) -> zk_curator::Result<()> {
    /// discovery.close().await?;
    /// # Ok(()) }
    /// ```
    pub async fn close(&self) -> Result<()> {
        self.inner.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        // Taken before waiting for the lock: a register in flight finishes, and is closed below.
        let mut nodes: Vec<PersistentNode> = self.inner.registered.lock().drain().map(|(_, r)| r.node).collect();
        let _one_at_a_time = self.inner.changes.lock().await;
        nodes.extend(self.inner.registered.lock().drain().map(|(_, r)| r.node));
        self.inner.watchers.lock().clear();
        let mut errors = Vec::new();
        for node in nodes {
            if let Err(e) = node.close().await {
                errors.push(e);
            }
        }
        Error::from_many(errors)
    }

    /// With `watch_instances`: follows service `name`'s instances (once per name), taking others'
    /// changes to the instances registered here.
    fn watch(&self, name: &str) {
        let mut watchers = self.inner.watchers.lock();
        if watchers.contains_key(name) {
            return;
        }
        let cache = match self.service_cache(name) {
            Ok(cache) => cache,
            Err(e) => {
                warn!(%e, name, "cannot watch the instances registered here");
                return;
            }
        };
        let mut events = cache.events();
        let inner = Arc::downgrade(&self.inner);
        let task = self.inner.client.runtime().spawn(async move {
            while let Some(event) = events.next().await {
                let (ServiceCacheEvent::Added(found) | ServiceCacheEvent::Updated(found)) = event else { continue };
                let Some(inner) = inner.upgrade() else { return };
                let mut registered = inner.registered.lock();
                let Some(registration) = registered.get_mut(&found.id) else { continue };
                if registration.instance.name != found.name {
                    continue;
                }
                // Compared as written (the payload need not be `PartialEq`): our own writes come
                // back as events too, and are no change.
                let ours = inner.serializer.serialize(&registration.instance).ok();
                let taken = match inner.serializer.serialize(&found) {
                    Ok(bytes) if Some(&bytes) == ours.as_ref() => continue,
                    Ok(bytes) => registration.node.set_data(bytes).is_ok(),
                    Err(_) => false,
                };
                if taken {
                    registration.instance = (*found).clone();
                } else {
                    warn!(id = %found.id, "cannot take a registered instance changed by someone else");
                }
            }
        });
        let helper = crate::nodes::HelperTask::default();
        *helper.lock() = Some(task);
        watchers.insert(name.to_string(), (cache, helper));
    }

    fn check_open(&self) -> Result<()> {
        if self.inner.closed.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(Error::Closed { path: self.inner.layout.base_path().to_string() });
        }
        Ok(())
    }

    fn checked_path(&self, instance: &ServiceInstance<T>) -> Result<String> {
        check_node_name("instance id", &instance.id)?;
        let path = paths::join(&self.instances_path(&instance.name)?, &instance.id);
        paths::validate_path(&path)?;
        Ok(path)
    }

    /// The path of `name`'s instances, checked: the name is one node name, and the layout's
    /// path for it a valid ZooKeeper path (checked as the layout gives it: joining an instance id
    /// to `""` or `"/a/"` would make a valid path somewhere else).
    pub(crate) fn instances_path(&self, name: &str) -> Result<String> {
        check_node_name("service name", name)?;
        let path = self.path_for_name(name);
        paths::validate_path(&path)?;
        Ok(path)
    }

    fn serialize(&self, instance: &ServiceInstance<T>, path: &str) -> Result<Vec<u8>> {
        let bytes = self.inner.serializer.serialize(instance).map_err(|e| Error::InvalidArgument {
            name: "instance",
            value: format!("{} ({e})", path),
            reason: "the serializer cannot write it",
        })?;
        self.inner.client.check_data_size("instance data", path, bytes.len())?;
        Ok(bytes)
    }

    async fn children_or_none(&self, path: &str) -> Result<Vec<String>> {
        match self.inner.client.get_children(path).await {
            Ok(children) => Ok(children),
            Err(e) if e.code() == Some(ErrorCode::NoNode) => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    async fn read_instance(&self, path: &str) -> Result<Option<ServiceInstance<T>>> {
        match self.inner.client.get_data(path).undecompressed().await {
            Ok((bytes, _)) => parse(&*self.inner.serializer, path, &bytes).map(Some),
            Err(e) if e.code() == Some(ErrorCode::NoNode) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// `bytes` of the node at `path` as an instance, or [`Error::MalformedData`] naming it.
pub(crate) fn parse<T: 'static>(
    serializer: &dyn InstanceSerializer<T>,
    path: &str,
    bytes: &[u8],
) -> Result<ServiceInstance<T>> {
    serializer.deserialize(bytes).map_err(|e| Error::MalformedData {
        path: path.to_string(),
        expected: "a service instance",
        reason: e.to_string(),
    })
}
