//! # zk-curator
//!
//! Apache Curator's ZooKeeper lock recipes for async Rust, wire-compatible with Curator: a Rust
//! service and a Java service using Curator on the same lock path exclude each other.
//!
//! The crate has the same layers as Curator:
//!
//! * [`framework`]: [`CuratorClient`] (Curator's `CuratorFramework`): session recovery, connection
//!   states, retry policies, namespaces, protected creates and guaranteed deletes.
//! * [`locks`]: the lock machinery — a reentrancy map, the `LockInternals` loop, pluggable
//!   [`LockDriver`]s — and the recipes built on them, starting with [`InterProcessMutex`].
//! * `testing` (feature `testing`): a real ZooKeeper for tests, like Curator's `TestingServer`.
//!
//! Beyond Curator, every acquire is cancel safe (a dropped future leaves no node behind), a release
//! never forgets a node it failed to delete, deadlines are honoured, and every hold carries a
//! fencing token.
//!
//! ```no_run
//! use std::time::Duration;
//! use zk_curator::{CuratorClient, InterProcessMutex};
//!
//! # async fn demo() -> zk_curator::Result<()> {
//! let client = CuratorClient::connect("127.0.0.1:2181").await?;
//! let mutex = InterProcessMutex::new(&client, "/locks/nightly-report")?;
//! if let Some(guard) = mutex.try_lock_for(Duration::from_secs(5)).await? {
//!     // ... generate the report, passing guard.fencing_token() to the store ...
//!     guard.release().await?;
//! }
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

pub mod error;
pub mod framework;
pub mod locks;
#[cfg(feature = "testing")]
pub mod testing;

pub use error::{Error, ErrorKind, Result};
pub use framework::client::{CuratorClient, CuratorClientBuilder, SessionIdentity};
pub use framework::guaranteed_delete::DeleteOutcome;
pub use framework::protected::CreatedNode;
pub use framework::retry::{
    BoundedExponentialBackoffRetry, ExponentialBackoffRetry, RetryForever, RetryNTimes, RetryOneTime, RetryPolicy,
    RetryUntilElapsed,
};
pub use framework::state::{ConnectionState, ConnectionStateStream};
pub use locks::*;
/// The `zookeeper-client` crate this one builds on.
pub use zookeeper_client;
