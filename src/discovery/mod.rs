//! Service discovery, wire-compatible with Curator's `curator-x-discovery`: services register
//! their instances in ZooKeeper, clients find them and pick one. A Java service using Curator and
//! a Rust service using this module share one registry, both ways.
//!
//! One concept per file, as in Curator:
//!
//! * [`ServiceInstance`] (with [`ServiceType`] and a [`UriSpec`]): one instance of a service —
//!   name, id, address, ports, a payload of your own type, registration time, enabled;
//! * [`JsonInstanceSerializer`]: Curator's JSON byte for byte (a Java payload's type info
//!   included, Curator's compatible mode by default); the [`InstanceSerializer`] trait for another;
//! * [`ServiceDiscovery`]: registers instances (`base/NAME/ID`, kept through expiries, restarts
//!   and deletes), updates and unregisters them (following others' changes to them with
//!   `watch_instances`), and queries the registry;
//! * [`ServiceCache`]: one service's instances held locally on a converging
//!   [`CuratorCache`](crate::cache::CuratorCache), with a stream of its changes;
//! * [`ServiceProvider`]: picks one instance from a cache — a [`ProviderStrategy`]
//!   ([`RoundRobinStrategy`], [`RandomStrategy`], [`StickyStrategy`] or your own), instance
//!   filters (enabled ones by default) and a [`DownInstancePolicy`] for instances that fail.
//!
//! Curator's layout: the registry under a base path, a node per service name, under it a node per
//! instance id holding the instance's JSON (another layout: a [`DiscoveryPathConstructor`]). Everything is behind the `discovery` feature (it pulls
//! in serde and serde_json).
//!
//! ```no_run
//! use zk_curator::discovery::{ServiceDiscovery, ServiceInstance};
//!
//! # async fn demo(client: zk_curator::CuratorClient) -> zk_curator::Result<()> {
//! #[derive(serde::Serialize, serde::Deserialize, Clone, Debug)]
//! struct Details { region: String }
//!
//! let discovery = ServiceDiscovery::<Details>::builder(&client, "/services").build()?;
//! let me = ServiceInstance::builder("api").port(8080).payload(Details { region: "eu".into() }).build()?;
//! discovery.register(&me).await?;
//! let all = discovery.query_for_instances("api").await?;
//! # Ok(()) }
//! ```

mod cache;
#[allow(clippy::module_inception)]
mod discovery;
mod instance;
mod path_constructor;
mod provider;
mod serializer;
mod strategy;
mod uri_spec;

pub use cache::{Instances, ServiceCache, ServiceCacheEvent, ServiceCacheEvents};
pub use provider::{DownInstancePolicy, InstanceFilter, ServiceProvider, ServiceProviderBuilder};
pub use strategy::{Candidates, ProviderStrategy, RandomStrategy, RoundRobinStrategy, StickyStrategy};

pub use discovery::{Payload, ServiceDiscovery, ServiceDiscoveryBuilder};
pub use instance::{ServiceInstance, ServiceInstanceBuilder, ServiceType};
pub use path_constructor::{DiscoveryPathConstructor, StandardPathConstructor};
pub use serializer::{InstanceSerializer, JsonInstanceSerializer, SerializeError, DEFAULT_PAYLOAD_CLASS};
pub use uri_spec::{UriPart, UriSpec};
