//! Real-ZooKeeper test harness (feature `testing`), modelled on Curator's `curator-test`.
//!
//! Everything here runs a *real* ZooKeeper server as a child JVM, so tests exercise the actual
//! protocol, session expiry and leader elections instead of a mock:
//!
//! * [`TestingServer`]: one standalone server on a free `127.0.0.1` port with its own temporary
//!   data directory; it can be stopped (`kill -9`), restarted on the same port with its data,
//!   and paused/resumed (`SIGSTOP`/`SIGCONT`).
//! * [`TestingCluster`]: an ensemble of `n` servers on loopback, with per-node stop, kill and
//!   restart, leader lookup and a quorum wait; optionally in ZooKeeper's read-only mode
//!   ([`TestingClusterBuilder::read_only_mode`]), so a node cut off from the quorum serves reads.
//! * [`FaultProxy`]: a TCP proxy owned by the test between a client and a server, which can cut
//!   connections ([`ProxyMode::Cut`]) or silently drop all traffic ([`ProxyMode::Blackhole`]) to
//!   make the *server* expire a session, and delay traffic each way by a fixed or random
//!   [`Latency`] (bytes are never reordered), to widen race windows.
//! * [`expire_session`]: ends a session server-side right now, the way older Curator tests do.
//!
//! # Requirements
//!
//! A Java runtime and the ZooKeeper server jars: on Debian/Ubuntu `apt-get install zookeeper`;
//! elsewhere set `ZOOKEEPER_HOME` (an unpacked Apache ZooKeeper release) or `ZK_CLASSPATH`.
//! Without them [`TestingServer::start`] fails with [`TestingError::NotInstalled`], whose message
//! says how to install. Setting `ZK_CONNECT=host:port` makes [`TestingServer::start`] hand out an
//! [external](TestingServer::is_external) handle to that server instead of starting one.
//!
//! # One server for a whole test run
//!
//! Each external handle gets a chroot of its own (`/zk-curator-testing/<random id>`, below
//! `ZK_CONNECT`'s own chroot if it has one) in its [`connect_string`](TestingServer::connect_string),
//! so tests running side by side against one server (a container, or the `zk-testing-server`
//! program this crate builds with `testing`) cannot see each other's nodes; dropping the handle
//! removes that tree. A server that does not answer fails `start` with a message naming
//! `ZK_CONNECT`. Tests that stop, restart or pause the server ask for a process of their own
//! with [`TestingServerBuilder::owned`]; so should tests that need server settings (TLS, SASL,
//! another tick time) or read server-wide counters (four-letter words).
//!
//! # Process hygiene
//!
//! The JVMs never outlive the test: dropping a handle kills and reaps its JVM synchronously (also
//! while unwinding from a panicking test, and without a tokio runtime), and on Linux each JVM is
//! spawned with a parent-death signal so that it is killed even when the test process itself is
//! killed. Data directories (`$TMPDIR/zk-curator-*`) are temporary and removed on drop; those
//! of a test process that was killed are removed by the next harness start.
//!
//! The server configuration favours test speed over durability: `forceSync=no`, a 200 ms tick,
//! container nodes reaped every 100 ms.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use zk_curator::testing::TestingServer;
//!
//! let server = TestingServer::start().await?;
//! let client = zk_curator::CuratorClient::connect(&server.connect_string()).await?;
//! # Ok(()) }
//! ```

mod cluster;
mod install;
mod isolation;
mod process;
mod proxy;
mod server;
mod session;

use std::time::Duration;

pub use cluster::{TestingCluster, TestingClusterBuilder};
pub use proxy::{Direction, FaultProxy, Latency, ProxyMode};
pub use server::{ServerTls, TestingServer, TestingServerBuilder};
pub(crate) use session::expire_raw_session;
pub use session::{expire_session, zk_connect_override};

/// Why a harness operation failed.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum TestingError {
    /// Java or the ZooKeeper server jars are missing; `message` says what is missing and how to
    /// install it (`apt-get install zookeeper`, `ZOOKEEPER_HOME` or `ZK_CLASSPATH`).
    #[error("ZooKeeper is not installed: {message}")]
    NotInstalled {
        /// What is missing, followed by the install hint.
        message: String,
    },

    /// An I/O operation of the harness itself failed (temp dir, config file, spawning). The I/O
    /// error is the `source()` only, not repeated in `Display`.
    #[error("{context}")]
    Io {
        /// What the harness was doing.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// A server or ensemble did not become ready in time; `what` names it and carries the tail
    /// of the server log.
    #[error("not ready after {waited:?}: {what}")]
    NotReady {
        /// What was awaited, plus diagnostics (server log tail, observed modes).
        what: String,
        /// How long the harness waited.
        waited: Duration,
    },

    /// The operation needs a server process the harness owns, but this handle points at an
    /// external server given through `ZK_CONNECT`.
    #[error("cannot {what} an external ZooKeeper server (ZK_CONNECT is set)")]
    External {
        /// The refused operation, e.g. `"stop"`.
        what: &'static str,
    },

    /// The server JVM exited while the harness waited for it to become ready.
    #[error("{what} exited ({status}) during startup; log tail:\n{log_tail}")]
    ServerExited {
        /// Which server.
        what: String,
        /// The exit status as text.
        status: String,
        /// The last lines of the server log and JVM output.
        log_tail: String,
    },

    /// The operation needs a running server, but it is stopped.
    #[error("{what} is not running")]
    NotRunning {
        /// Which server.
        what: String,
    },

    /// A cluster node index was out of range.
    #[error("no node {index} in a cluster of {len}")]
    NoSuchNode {
        /// The requested index.
        index: usize,
        /// The number of nodes.
        len: usize,
    },

    /// An argument was unusable (for example a cluster of zero nodes).
    #[error("invalid argument: {message}")]
    InvalidArgument {
        /// What was wrong.
        message: String,
    },

    /// A ZooKeeper client operation of the harness failed (e.g. in [`expire_session`]).
    #[error("{context}: {source}")]
    ZooKeeper {
        /// What the harness was doing.
        context: String,
        /// The client error.
        #[source]
        source: crate::Error,
    },
}

/// Result of harness operations.
pub type TestingResult<T> = Result<T, TestingError>;

#[cfg(test)]
mod tests {
    use super::*;

    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>(_: T) {}

    /// Handles can be shared across tasks and their futures can be spawned.
    #[test]
    fn handles_are_send_sync_and_futures_send() {
        send_sync::<TestingServer>();
        send_sync::<TestingCluster>();
        send_sync::<FaultProxy>();
        send_sync::<TestingError>();
        send(TestingServer::start());
        send(TestingCluster::start(3));
        send(TestingCluster::builder(3).read_only_mode(true).start());
        send(FaultProxy::start("127.0.0.1:1"));
        #[allow(dead_code)]
        fn methods(server: &mut TestingServer, cluster: &mut TestingCluster, client: &crate::CuratorClient) {
            send(server.stop());
            send(server.restart());
            send(cluster.restart(0));
            send(cluster.stop(0));
            send(cluster.leader());
            send(cluster.wait_for_quorum(Duration::ZERO));
            send(cluster.wait_for_read_only(0, Duration::ZERO));
            send(expire_session("127.0.0.1:1", client));
        }
    }
}
