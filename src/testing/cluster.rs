//! [`TestingCluster`]: a ZooKeeper ensemble of child JVMs on loopback.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use super::install::Installation;
use super::process::Supervisor;
use super::server::{
    free_ports, log_tail, server_mode, temp_dir, wait_ready, write_file, Readiness, ServerSettings, CONFIG_FILE,
    STARTUP_TIMEOUT,
};
use super::{TestingError, TestingResult};

/// Main class of an ensemble member.
const QUORUM_MAIN: &str = "org.apache.zookeeper.server.quorum.QuorumPeerMain";
/// Grace period of [`TestingCluster::stop`] between SIGTERM and SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// Poll interval of [`TestingCluster::wait_for_quorum`].
const QUORUM_POLL: Duration = Duration::from_millis(50);

struct Node {
    // Field order matters: the supervisor (and its JVM) goes before the directory.
    supervisor: Supervisor,
    client_port: u16,
    running: bool,
    dir: tempfile::TempDir,
}

/// A ZooKeeper ensemble for tests, like Curator's `TestingCluster`.
///
/// `n` servers run as child JVMs on `127.0.0.1`, each with its own client, quorum and election
/// port, its own temporary data directory and `myid` file, and `standaloneEnabled=false` (so
/// even `n == 1` is a real quorum peer). Nodes are addressed by index `0..n` (their ZooKeeper
/// `myid` is `index + 1`). Timing is the [`TestingServer`](super::TestingServer) default (tick
/// 200 ms) with `initLimit=20`, `syncLimit=10`.
///
/// Dropping the cluster kills and reaps every JVM and removes the directories; this also happens
/// when the owning test panics. `ZK_CONNECT` is not consulted: a cluster is always local.
///
/// [`TestingCluster::builder`] starts one with options, e.g. read-only mode
/// ([`TestingClusterBuilder::read_only_mode`]).
pub struct TestingCluster {
    nodes: Vec<Node>,
}

/// Options of a [`TestingCluster`], made by [`TestingCluster::builder`].
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until `start` is awaited"]
pub struct TestingClusterBuilder {
    nodes: usize,
    read_only_mode: bool,
}

impl TestingClusterBuilder {
    /// Runs every node with ZooKeeper's read-only mode (`-Dreadonlymode.enabled=true` on its JVM;
    /// off by default): a node cut off from the quorum then serves reads to clients that allow
    /// it (`can_be_read_only(true)`) and answers `srvr` with `Mode: read-only` (see
    /// [`TestingCluster::wait_for_read_only`]). ZooKeeper starts its read-only server about 2 s
    /// after the node lost the quorum. A read-only server can only open *local* sessions, so
    /// this also sets `localSessionsEnabled=true` and `localSessionsUpgradingEnabled=true`: every
    /// new session starts local to its server and becomes a global one at its first ephemeral
    /// node.
    pub fn read_only_mode(mut self, enabled: bool) -> Self {
        self.read_only_mode = enabled;
        self
    }

    /// Starts the ensemble as [`TestingCluster::start`] does, with these options.
    ///
    /// # Errors
    /// As for [`TestingCluster::start`].
    ///
    /// # Cancel safety
    /// Cancel safe: nodes already started are killed and their directories removed.
    ///
    /// # Examples
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use zk_curator::testing::TestingCluster;
    ///
    /// let mut cluster = TestingCluster::builder(3).read_only_mode(true).start().await?;
    /// cluster.stop(0).await?;
    /// cluster.stop(1).await?;
    /// cluster.wait_for_read_only(2, Duration::from_secs(30)).await?; // node 2 serves reads only
    /// # Ok(()) }
    /// ```
    pub async fn start(self) -> TestingResult<TestingCluster> {
        TestingCluster::start_with(self).await
    }
}

impl std::fmt::Debug for TestingCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestingCluster")
            .field("connect_string", &self.connect_string())
            .field("running", &self.nodes.iter().map(|n| n.running).collect::<Vec<_>>())
            .finish()
    }
}

impl TestingCluster {
    /// Starts an ensemble of `nodes` servers and waits (at most 30 s) until it has elected a
    /// leader and every other node follows it.
    ///
    /// # Errors
    /// * [`TestingError::InvalidArgument`] for `nodes == 0`;
    /// * [`TestingError::NotInstalled`] without java or the ZooKeeper jars;
    /// * [`TestingError::NotReady`] / [`TestingError::ServerExited`] (with log tails) when the
    ///   ensemble does not form;
    /// * [`TestingError::Io`] when directories, configs or processes cannot be created.
    ///
    /// # Cancel safety
    /// Cancel safe: nodes already started are killed and their directories removed.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let cluster = zk_curator::testing::TestingCluster::start(3).await?;
    /// let client = zk_curator::CuratorClient::connect(&cluster.connect_string()).await?;
    /// # Ok(()) }
    /// ```
    pub async fn start(nodes: usize) -> TestingResult<TestingCluster> {
        TestingCluster::builder(nodes).start().await
    }

    /// A builder for an ensemble of `nodes` servers with options (see [`TestingClusterBuilder`]);
    /// [`TestingClusterBuilder::start`] starts it.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let cluster = zk_curator::testing::TestingCluster::builder(3).read_only_mode(true).start().await?;
    /// # Ok(()) }
    /// ```
    pub fn builder(nodes: usize) -> TestingClusterBuilder {
        TestingClusterBuilder { nodes, read_only_mode: false }
    }

    async fn start_with(options: TestingClusterBuilder) -> TestingResult<TestingCluster> {
        let nodes = options.nodes;
        if nodes == 0 {
            return Err(TestingError::InvalidArgument { message: "a cluster needs at least one node".into() });
        }
        let install = Installation::detect()?;
        let settings = ServerSettings::default();
        let ports = free_ports(nodes * 3)?;
        let mut servers = String::new();
        for i in 0..nodes {
            let _ = writeln!(servers, "server.{}=127.0.0.1:{}:{}", i + 1, ports[nodes + i], ports[2 * nodes + i]);
        }
        let mut cluster = TestingCluster { nodes: Vec::with_capacity(nodes) };
        for (i, &client_port) in ports.iter().take(nodes).enumerate() {
            let dir = temp_dir(&format!("node{}", i + 1))?;
            let mut cfg = settings.base_config(dir.path(), client_port);
            cfg.push_str("initLimit=20\nsyncLimit=10\nstandaloneEnabled=false\nreconfigEnabled=false\n");
            if options.read_only_mode {
                // A read-only server creates only local sessions (a global one is a transaction
                // of the quorum): without them it refuses every new session with NOTREADONLY.
                // Upgrading makes a local session global at its first ephemeral node.
                cfg.push_str("localSessionsEnabled=true\nlocalSessionsUpgradingEnabled=true\n");
            }
            cfg.push_str(&servers);
            write_file(dir.path(), CONFIG_FILE, &cfg)?;
            write_file(dir.path(), "myid", &format!("{}\n", i + 1))?;
            let mut spec = settings.jvm_spec(&install, dir.path(), QUORUM_MAIN);
            if options.read_only_mode {
                // A system property only (not a zoo.cfg key); JVM options go before `-cp`.
                spec.args.insert(0, "-Dreadonlymode.enabled=true".into());
            }
            let supervisor = Supervisor::new(&format!("node{}-{client_port}", i + 1), spec)?;
            // Pushed before spawning so that a failure below still kills what was started.
            cluster.nodes.push(Node { supervisor, client_port, running: false, dir });
        }
        for node in &mut cluster.nodes {
            node.supervisor.spawn().await?;
            node.running = true;
        }
        let started = Instant::now();
        for i in 0..nodes {
            let node = &cluster.nodes[i];
            let what = format!("ensemble node {i} (127.0.0.1:{})", node.client_port);
            let remaining = STARTUP_TIMEOUT.saturating_sub(started.elapsed());
            wait_ready(&node.supervisor, node.client_port, node.dir.path(), &what, Readiness::Alive, remaining).await?;
        }
        cluster.wait_for_quorum(STARTUP_TIMEOUT.saturating_sub(started.elapsed())).await?;
        Ok(cluster)
    }

    /// Connect string of all nodes: `127.0.0.1:p1,127.0.0.1:p2,...` (stopped ones included).
    pub fn connect_string(&self) -> String {
        let hosts: Vec<String> = self.nodes.iter().map(|n| format!("127.0.0.1:{}", n.client_port)).collect();
        hosts.join(",")
    }

    /// Connect string of node `i` alone: `127.0.0.1:PORT`.
    ///
    /// # Panics
    /// If `i >= self.len()`.
    pub fn node_connect_string(&self, i: usize) -> String {
        format!("127.0.0.1:{}", self.nodes[i].client_port)
    }

    /// Number of nodes (running or not).
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Always `false`: a cluster has at least one node.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    fn node(&mut self, index: usize) -> TestingResult<&mut Node> {
        let len = self.nodes.len();
        self.nodes.get_mut(index).ok_or(TestingError::NoSuchNode { index, len })
    }

    /// Stops node `i` gracefully-ish: `SIGTERM`, then `SIGKILL` if it is still alive after 5 s;
    /// returns once the JVM has exited. A no-op for a stopped node.
    ///
    /// # Errors
    /// [`TestingError::NoSuchNode`] for a bad index; [`TestingError::Io`] if its supervisor
    /// thread is gone.
    ///
    /// # Cancel safety
    /// Cancel safe: the node is stopped or being stopped; call again to wait.
    ///
    /// # Examples
    /// ```no_run
    /// # use std::time::Duration;
    /// # use zk_curator::testing::TestingCluster;
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let mut cluster = TestingCluster::start(3).await?;
    /// let leader = cluster.leader().await.expect("a 3-node ensemble has a leader");
    /// cluster.stop(leader).await?;
    /// cluster.wait_for_quorum(Duration::from_secs(30)).await?; // the other two elect a new leader
    /// # Ok(()) }
    /// ```
    pub async fn stop(&mut self, i: usize) -> TestingResult<()> {
        let node = self.node(i)?;
        node.supervisor.terminate(STOP_GRACE).await?;
        node.running = false;
        Ok(())
    }

    /// Kills node `i` with `SIGKILL` and waits until the JVM has exited. A no-op for a stopped
    /// node.
    ///
    /// # Errors
    /// As for [`stop`](Self::stop).
    ///
    /// # Cancel safety
    /// Cancel safe: the signal is sent at the first poll.
    ///
    /// # Examples
    /// ```no_run
    /// # use zk_curator::testing::TestingCluster;
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let mut cluster = TestingCluster::start(3).await?;
    /// cluster.kill(0).await?;
    /// cluster.kill(1).await?; // no quorum left: clients go SUSPENDED
    /// cluster.restart(1).await?; // a quorum again
    /// # Ok(()) }
    /// ```
    pub async fn kill(&mut self, i: usize) -> TestingResult<()> {
        let node = self.node(i)?;
        node.supervisor.kill().await?;
        node.running = false;
        Ok(())
    }

    /// Starts node `i` again with its ports and data (a running node is killed first). If that
    /// makes a majority of nodes run, waits until the node has joined the quorum (reports
    /// leader or follower); otherwise only until it answers `ruok`.
    ///
    /// # Errors
    /// [`TestingError::NoSuchNode`] for a bad index; [`TestingError::NotReady`] or
    /// [`TestingError::ServerExited`] when it does not come back within 30 s.
    ///
    /// # Cancel safety
    /// Cancel safe: a node being started is killed with the cluster.
    ///
    /// # Examples
    /// ```no_run
    /// # use zk_curator::testing::TestingCluster;
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let mut cluster = TestingCluster::start(3).await?;
    /// cluster.stop(2).await?;
    /// // ... the ensemble serves on with two nodes ...
    /// cluster.restart(2).await?; // back in the quorum when this returns
    /// # Ok(()) }
    /// ```
    pub async fn restart(&mut self, i: usize) -> TestingResult<()> {
        let node = self.node(i)?;
        node.supervisor.kill().await?;
        node.running = false;
        node.supervisor.spawn().await?;
        node.running = true;
        let readiness = if self.running_count() > self.nodes.len() / 2 { Readiness::Serving } else { Readiness::Alive };
        let node = &self.nodes[i];
        let what = format!("ensemble node {i} (127.0.0.1:{})", node.client_port);
        wait_ready(&node.supervisor, node.client_port, node.dir.path(), &what, readiness, STARTUP_TIMEOUT).await
    }

    fn running_count(&self) -> usize {
        self.nodes.iter().filter(|n| n.running).count()
    }

    /// Modes (`leader`, `follower`, ...) of the running nodes per `srvr`; `None` for stopped or
    /// unresponsive nodes.
    async fn modes(&self) -> Vec<Option<String>> {
        let mut modes = Vec::with_capacity(self.nodes.len());
        for node in &self.nodes {
            modes.push(if node.running { server_mode(node.client_port).await } else { None });
        }
        modes
    }

    /// Index of the node that currently reports `Mode: leader` through the `srvr` four-letter
    /// word, if any.
    ///
    /// # Cancel safety
    /// Cancel safe (read only).
    ///
    /// # Examples
    /// ```no_run
    /// # use zk_curator::testing::TestingCluster;
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let cluster = TestingCluster::start(3).await?;
    /// if let Some(i) = cluster.leader().await {
    ///     println!("leader: node {i} at {}", cluster.node_connect_string(i));
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn leader(&self) -> Option<usize> {
        self.modes().await.iter().position(|mode| mode.as_deref() == Some("leader"))
    }

    /// Waits until node `i` serves read-only (`srvr` reports `Mode: read-only`): it runs with
    /// [`TestingClusterBuilder::read_only_mode`] and is cut off from the quorum.
    ///
    /// # Errors
    /// [`TestingError::NoSuchNode`] for a bad index; [`TestingError::NotReady`] after `timeout`,
    /// with the node's last mode and log tail.
    ///
    /// # Cancel safety
    /// Cancel safe (read only).
    ///
    /// # Examples
    /// ```no_run
    /// # use std::time::Duration;
    /// # use zk_curator::testing::TestingCluster;
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let mut cluster = TestingCluster::builder(3).read_only_mode(true).start().await?;
    /// cluster.kill(0).await?;
    /// cluster.kill(1).await?;
    /// cluster.wait_for_read_only(2, Duration::from_secs(30)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn wait_for_read_only(&self, i: usize, timeout: Duration) -> TestingResult<()> {
        let len = self.nodes.len();
        let node = self.nodes.get(i).ok_or(TestingError::NoSuchNode { index: i, len })?;
        let started = Instant::now();
        loop {
            let mode = if node.running { server_mode(node.client_port).await } else { None };
            if mode.as_deref() == Some("read-only") {
                return Ok(());
            }
            if started.elapsed() >= timeout {
                let what = format!(
                    "node {i} (127.0.0.1:{}) serving read-only; last mode {mode:?}\n{}",
                    node.client_port,
                    log_tail(node.dir.path())
                );
                return Err(TestingError::NotReady { what, waited: started.elapsed() });
            }
            tokio::time::sleep(QUORUM_POLL).await;
        }
    }

    /// Waits until the running nodes form a working ensemble: exactly one reports `leader`,
    /// every other running node reports `follower`, and together they are a majority.
    ///
    /// # Errors
    /// [`TestingError::NotReady`] after `timeout`, listing each node's last mode and log tail.
    ///
    /// # Cancel safety
    /// Cancel safe (read only).
    ///
    /// # Examples
    /// ```no_run
    /// # use std::time::Duration;
    /// # use zk_curator::testing::TestingCluster;
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let mut cluster = TestingCluster::start(5).await?;
    /// cluster.kill(0).await?;
    /// cluster.kill(1).await?;
    /// cluster.wait_for_quorum(Duration::from_secs(30)).await?; // 3 of 5 still form a quorum
    /// # Ok(()) }
    /// ```
    pub async fn wait_for_quorum(&self, timeout: Duration) -> TestingResult<()> {
        let started = Instant::now();
        let majority = self.nodes.len() / 2 + 1;
        loop {
            let modes = self.modes().await;
            let leaders = modes.iter().filter(|m| m.as_deref() == Some("leader")).count();
            let followers = modes.iter().filter(|m| m.as_deref() == Some("follower")).count();
            let all_running_serve = self.nodes.iter().zip(&modes).all(|(node, mode)| !node.running || mode.is_some());
            if leaders == 1 && all_running_serve && leaders + followers >= majority {
                return Ok(());
            }
            if started.elapsed() >= timeout {
                let mut what = String::from("ZooKeeper ensemble quorum (one leader, the others followers); modes:");
                for (i, (node, mode)) in self.nodes.iter().zip(&modes).enumerate() {
                    let state = match (node.running, mode) {
                        (false, _) => "stopped",
                        (true, None) => "not serving",
                        (true, Some(mode)) => mode.as_str(),
                    };
                    let _ = write!(what, " node {i}={state};");
                }
                for (i, node) in self.nodes.iter().enumerate() {
                    let _ = write!(what, "\n=== node {i} ===\n{}", log_tail(node.dir.path()));
                }
                return Err(TestingError::NotReady { what, waited: started.elapsed() });
            }
            tokio::time::sleep(QUORUM_POLL).await;
        }
    }
}

impl Drop for TestingCluster {
    /// Kills and reaps every JVM, then removes the directories. Never panics and needs no tokio
    /// runtime.
    fn drop(&mut self) {
        for node in &self.nodes {
            node.supervisor.request_kill();
        }
        for node in &mut self.nodes {
            node.supervisor.shutdown_blocking();
            node.running = false;
        }
    }
}
