//! [`TestingServer`]: one standalone ZooKeeper server in a child JVM; plus the helpers shared
//! with [`TestingCluster`](super::TestingCluster) (config, JVM flags, readiness, ports, logs).

use std::ffi::OsString;
use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::Path;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::install::Installation;
use super::isolation::{isolated_connect_string, remove_isolated_tree};
use super::process::{JvmSpec, Supervisor};
use super::session::zk_connect_override;
use super::{TestingError, TestingResult};

/// How long a server gets to answer `ruok`/`srvr` after its JVM was spawned.
pub(crate) const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// Poll interval of readiness checks.
const READY_POLL: Duration = Duration::from_millis(50);
/// Timeout of a single four-letter-word exchange.
pub(crate) const FOUR_LETTER_TIMEOUT: Duration = Duration::from_secs(2);
/// Main class of a standalone server.
const STANDALONE_MAIN: &str = "org.apache.zookeeper.server.ZooKeeperServerMain";
/// File (in the server directory) that slf4j-simple logs to.
pub(crate) const LOG_FILE: &str = "zookeeper.log";
/// File (in the server directory) receiving the JVM's stdout and stderr.
pub(crate) const JVM_OUTPUT_FILE: &str = "jvm.out";
/// Config file name (in the server directory).
pub(crate) const CONFIG_FILE: &str = "zoo.cfg";

/// Timing knobs of a server, shared by standalone servers and cluster nodes.
#[derive(Clone, Debug)]
pub(crate) struct ServerSettings {
    pub(crate) tick_time: Duration,
    pub(crate) min_session_timeout: Option<Duration>,
    pub(crate) max_session_timeout: Duration,
    pub(crate) container_check_interval: Duration,
    /// TTL nodes (and the other extended types) enabled: `extendedTypesEnabled`.
    pub(crate) extended_types: bool,
}

impl Default for ServerSettings {
    fn default() -> Self {
        ServerSettings {
            tick_time: Duration::from_millis(200),
            min_session_timeout: None,
            max_session_timeout: Duration::from_secs(60),
            container_check_interval: Duration::from_millis(100),
            extended_types: true,
        }
    }
}

impl ServerSettings {
    fn min_session_timeout(&self) -> Duration {
        self.min_session_timeout.unwrap_or(self.tick_time * 2)
    }

    /// The `zoo.cfg` lines common to standalone servers and ensemble members.
    pub(crate) fn base_config(&self, dir: &Path, client_port: u16) -> String {
        let mut cfg = String::new();
        let _ = writeln!(cfg, "tickTime={}", self.tick_time.as_millis().max(1));
        let _ = writeln!(cfg, "dataDir={}", dir.display());
        let _ = writeln!(cfg, "dataLogDir={}", dir.join("datalog").display());
        let _ = writeln!(cfg, "clientPort={client_port}");
        cfg.push_str("clientPortAddress=127.0.0.1\n");
        cfg.push_str("maxClientCnxns=0\n");
        cfg.push_str("admin.enableServer=false\n");
        cfg.push_str("4lw.commands.whitelist=*\n");
        let _ = writeln!(cfg, "extendedTypesEnabled={}", self.extended_types);
        let _ = writeln!(cfg, "minSessionTimeout={}", self.min_session_timeout().as_millis());
        let _ = writeln!(cfg, "maxSessionTimeout={}", self.max_session_timeout.as_millis());
        // Tests only: skip fsync of the transaction log. Data still reaches the page cache
        // before the server answers, so it survives `kill -9` of the JVM (not of the machine).
        cfg.push_str("forceSync=no\n");
        cfg
    }

    /// The JVM command line: fast-start flags, logging to `dir`, then `main_class dir/zoo.cfg`.
    pub(crate) fn jvm_spec(&self, install: &Installation, dir: &Path, main_class: &str) -> JvmSpec {
        let mut args: Vec<OsString> = [
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-XX:-UsePerfData",
            "-Djava.awt.headless=true",
            "-Dzookeeper.admin.enableServer=false",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        args.push(format!("-Dzookeeper.extendedTypesEnabled={}", self.extended_types).into());
        args.push(format!("-Dznode.container.checkIntervalMs={}", self.container_check_interval.as_millis()).into());
        if install.slf4j_simple {
            let mut log = OsString::from("-Dorg.slf4j.simpleLogger.logFile=");
            log.push(dir.join(LOG_FILE));
            args.push(log);
            args.push("-Dorg.slf4j.simpleLogger.showDateTime=true".into());
            args.push("-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS".into());
        }
        args.push("-cp".into());
        args.push(install.classpath.clone());
        args.push(main_class.into());
        args.push(dir.join(CONFIG_FILE).into());
        JvmSpec { program: install.java.clone(), args, cwd: dir.to_path_buf(), output: dir.join(JVM_OUTPUT_FILE) }
    }
}

/// Prefix of every server directory the harness creates in the system temp directory.
const DIR_PREFIX: &str = "zk-curator-";
/// Marker file in a server directory holding the pid of the test process that owns it.
const OWNER_FILE: &str = "owner.pid";

/// Creates a fresh temporary directory for one server (`zk-curator-<kind>-XXXXXX`), marked
/// with the owning process id. The first call per process also removes directories left behind
/// by test processes that were killed before they could clean up.
pub(crate) fn temp_dir(kind: &str) -> TestingResult<tempfile::TempDir> {
    static SWEEP: std::sync::Once = std::sync::Once::new();
    SWEEP.call_once(sweep_stale_dirs);
    let dir = tempfile::Builder::new()
        .prefix(&format!("{DIR_PREFIX}{kind}-"))
        .tempdir()
        .map_err(|source| TestingError::Io { context: "creating a temporary server directory".into(), source })?;
    write_file(dir.path(), OWNER_FILE, &owner_marker())?;
    Ok(dir)
}

/// `"<pid> <pid namespace>"` of this process; the namespace keeps a sweep in one container from
/// mistaking a live owner in another (sharing `/tmp`) for a dead one.
fn owner_marker() -> String {
    format!("{} {}", std::process::id(), pid_namespace().unwrap_or_default())
}

fn pid_namespace() -> Option<String> {
    std::fs::read_link("/proc/self/ns/pid").ok().map(|ns| ns.to_string_lossy().into_owned())
}

/// Removes `zk-curator-*` directories whose owner process no longer exists (their JVMs died
/// with it). Best effort: errors are ignored, unmarked directories are left alone.
fn sweep_stale_dirs() {
    let Some(namespace) = pid_namespace() else {
        return; // cannot tell dead owners from owners in other namespaces
    };
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        if !entry.file_name().to_string_lossy().starts_with(DIR_PREFIX) {
            continue;
        }
        let path = entry.path();
        let Ok(owner) = std::fs::read_to_string(path.join(OWNER_FILE)) else {
            continue;
        };
        let mut fields = owner.split_whitespace();
        let (Some(Ok(pid)), Some(owner_namespace)) = (fields.next().map(str::parse::<u32>), fields.next()) else {
            continue;
        };
        if owner_namespace == namespace && pid != std::process::id() && !process_exists(pid) {
            tracing::debug!(path = %path.display(), pid, "removing server directory of a dead test process");
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

/// Whether a process with this pid exists in our pid namespace.
fn process_exists(pid: u32) -> bool {
    Path::new("/proc").join(pid.to_string()).exists()
}

/// Writes `contents` to `dir/name`.
pub(crate) fn write_file(dir: &Path, name: &str, contents: &str) -> TestingResult<()> {
    let path = dir.join(name);
    std::fs::write(&path, contents)
        .map_err(|source| TestingError::Io { context: format!("writing {}", path.display()), source })
}

/// `n` distinct free ports on 127.0.0.1 (all bound at once, then released).
pub(crate) fn free_ports(n: usize) -> TestingResult<Vec<u16>> {
    let listeners = (0..n)
        .map(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| TestingError::Io { context: "binding 127.0.0.1:0 to find a free port".into(), source })?;
    listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| TestingError::Io { context: "reading a bound port".into(), source })
}

/// Sends a four-letter word to `127.0.0.1:port` and returns the whole answer.
pub(crate) async fn four_letter(port: u16, word: &str) -> std::io::Result<String> {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(SocketAddr::from((Ipv4Addr::LOCALHOST, port))).await?;
        stream.write_all(word.as_bytes()).await?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await?;
        Ok(answer)
    };
    match tokio::time::timeout(FOUR_LETTER_TIMEOUT, exchange).await {
        Ok(result) => result,
        Err(_) => Err(std::io::Error::new(std::io::ErrorKind::TimedOut, format!("`{word}` timed out"))),
    }
}

/// The `Mode:` a server reports through `srvr` (`standalone`, `leader`, `follower`, ...), or
/// `None` when it does not answer or does not serve requests yet.
pub(crate) async fn server_mode(port: u16) -> Option<String> {
    let answer = four_letter(port, "srvr").await.ok()?;
    answer.lines().find_map(|line| line.strip_prefix("Mode:")).map(|mode| mode.trim().to_owned())
}

/// Whether the server on `port` answers `ruok` with `imok`.
pub(crate) async fn is_ok(port: u16) -> bool {
    matches!(four_letter(port, "ruok").await, Ok(answer) if answer.trim() == "imok")
}

/// The last lines of a server's log and JVM output, for error messages.
pub(crate) fn log_tail(dir: &Path) -> String {
    const LINES: usize = 30;
    let mut out = String::new();
    for name in [LOG_FILE, JVM_OUTPUT_FILE] {
        let path = dir.join(name);
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        let text = String::from_utf8_lossy(&bytes);
        let lines: Vec<&str> = text.lines().collect();
        if lines.is_empty() {
            continue;
        }
        let _ = writeln!(out, "--- last lines of {} ---", path.display());
        for line in &lines[lines.len().saturating_sub(LINES)..] {
            let _ = writeln!(out, "{line}");
        }
    }
    if out.is_empty() {
        out.push_str("(no server output)");
    }
    out
}

/// What "ready" means for [`wait_ready`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Readiness {
    /// `ruok` answers `imok` (the process listens; an ensemble member may still lack a quorum).
    Alive,
    /// `ruok` answers `imok` and `srvr` reports a `Mode:`, i.e. the server serves requests.
    Serving,
}

/// Waits until the JVM of `supervisor` on `port` is ready, failing early when it exits.
pub(crate) async fn wait_ready(
    supervisor: &Supervisor,
    port: u16,
    dir: &Path,
    what: &str,
    readiness: Readiness,
    timeout: Duration,
) -> TestingResult<()> {
    let started = Instant::now();
    loop {
        if let Some(status) = supervisor.exit_status().await? {
            return Err(TestingError::ServerExited {
                what: what.to_owned(),
                status: status.to_string(),
                log_tail: log_tail(dir),
            });
        }
        if is_ok(port).await && (readiness == Readiness::Alive || server_mode(port).await.is_some()) {
            return Ok(());
        }
        if started.elapsed() >= timeout {
            return Err(TestingError::NotReady {
                what: format!("{what} (ruok/srvr on 127.0.0.1:{port})\n{}", log_tail(dir)),
                waited: started.elapsed(),
            });
        }
        tokio::time::sleep(READY_POLL).await;
    }
}

/// Builder for a [`TestingServer`] with non-default timing or a fixed port.
///
/// Defaults: tick 200 ms, minimum session timeout two ticks, maximum session timeout 60 s,
/// container nodes checked every 100 ms, a free port chosen by the harness.
///
/// ```no_run
/// # async fn demo() -> zk_curator::testing::TestingResult<()> {
/// use std::time::Duration;
/// use zk_curator::testing::TestingServer;
///
/// // Sessions as short as 1 s, for quick expiry tests, on a server this test may stop.
/// let server = TestingServer::builder()
///     .tick_time(Duration::from_millis(100))
///     .min_session_timeout(Duration::from_secs(1))
///     .owned()
///     .start()
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default)]
#[must_use = "a builder does nothing until `start` is awaited"]
pub struct TestingServerBuilder {
    settings: ServerSettings,
    port: Option<u16>,
    owned: bool,
    shared: Option<String>,
    tls: Option<ServerTls>,
    sasl: Option<ServerSasl>,
}

/// SASL DIGEST-MD5 users of a [`TestingServer`] (see [`TestingServerBuilder::sasl_digest`]);
/// `Debug` shows the user names, never the passwords.
#[derive(Clone, Default)]
struct ServerSasl {
    users: Vec<(String, String)>,
}

impl std::fmt::Debug for ServerSasl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerSasl")
            .field("users", &self.users.iter().map(|(user, _)| format!("{user}:<redacted>")).collect::<Vec<_>>())
            .finish()
    }
}

/// TLS for a [`TestingServer`]: a second, TLS-only client port (`secureClientPort`, served by
/// Netty's connection factory) using these PEM texts. The plain client port stays open.
#[derive(Clone, Default)]
pub struct ServerTls {
    /// The server's private key (PKCS#8) followed by its certificate chain, PEM: ZooKeeper's PEM
    /// key store. The certificate should name `127.0.0.1` (an IP address SAN), the host of
    /// [`TestingServer::secure_connect_string`].
    pub key_and_certificate_pem: String,
    /// When set, the server requires a client certificate signed by one of these CAs (PEM);
    /// otherwise it asks for none.
    pub client_ca_pem: Option<String>,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("key_and_certificate_pem", &"<redacted>")
            .field("client_ca_pem", &self.client_ca_pem.is_some())
            .finish()
    }
}

impl TestingServerBuilder {
    /// Sets ZooKeeper's `tickTime` (default 200 ms). Session timeouts are negotiated in ticks
    /// and the server checks for expired sessions once per tick, so a small tick makes expiry
    /// tests fast.
    pub fn tick_time(mut self, tick: Duration) -> Self {
        self.settings.tick_time = tick;
        self
    }

    /// Sets `minSessionTimeout` (default two ticks); clients asking for less get this.
    pub fn min_session_timeout(mut self, timeout: Duration) -> Self {
        self.settings.min_session_timeout = Some(timeout);
        self
    }

    /// Sets `maxSessionTimeout` (default 60 s); clients asking for more get this.
    pub fn max_session_timeout(mut self, timeout: Duration) -> Self {
        self.settings.max_session_timeout = timeout;
        self
    }

    /// Sets how often the server deletes empty container nodes (JVM flag
    /// `-Dznode.container.checkIntervalMs`, default here 100 ms, ZooKeeper's own default 60 s).
    pub fn container_check_interval(mut self, interval: Duration) -> Self {
        self.settings.container_check_interval = interval;
        self
    }

    /// Enables or disables TTL nodes (ZooKeeper's `extendedTypesEnabled`, in `zoo.cfg` and as the
    /// JVM flag `-Dzookeeper.extendedTypesEnabled`); enabled by default. Disabling implies
    /// [`owned`](Self::owned) (an external server is what it is).
    pub fn extended_types(mut self, enabled: bool) -> Self {
        self.settings.extended_types = enabled;
        if !enabled {
            self.owned = true;
        }
        self
    }

    /// Always starts a server process owned by the returned handle, even when `ZK_CONNECT` names
    /// an external server: for tests that stop, pause or restart the server, which an external
    /// one cannot do.
    pub fn owned(mut self) -> Self {
        self.owned = true;
        self
    }

    /// Starts no process: the handle uses the running server `connect` names (as `ZK_CONNECT`
    /// does), in a fresh chroot of its own that dropping the handle removes. Overrides
    /// `ZK_CONNECT` and [`owned`](Self::owned).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo() -> zk_curator::testing::TestingResult<()> {
    /// use zk_curator::testing::TestingServer;
    ///
    /// let one = TestingServer::builder().shared("127.0.0.1:2181").start().await?;
    /// let other = TestingServer::builder().shared("127.0.0.1:2181").start().await?;
    /// assert_ne!(one.connect_string(), other.connect_string()); // two chroots, one server
    /// # Ok(()) }
    /// ```
    pub fn shared(mut self, connect: &str) -> Self {
        self.shared = Some(connect.trim().to_owned());
        self
    }

    /// Also serves TLS on a second port (see [`ServerTls`] and
    /// [`TestingServer::secure_connect_string`]). Implies [`owned`](Self::owned).
    pub fn tls(mut self, tls: ServerTls) -> Self {
        self.tls = Some(tls);
        self.owned = true;
        self
    }

    /// Enables SASL DIGEST-MD5 with these `(user, password)` pairs: writes a JAAS file whose
    /// `Server` section uses ZooKeeper's `DigestLoginModule` (`user_<name>="<password>"`), starts
    /// the JVM with `-Djava.security.auth.login.config=<that file>` and sets
    /// `authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider`. A client
    /// that authenticates gets the identity `sasl:<user>`; a failed exchange (wrong password,
    /// unknown user) is answered with `AUTHFAILED` and the session is closed. SASL is not
    /// required: clients without it still connect (as do [`expire_session`](crate::testing::expire_session)
    /// and observers), so ACLs decide who may do what. Implies [`owned`](Self::owned).
    ///
    /// User names are limited to ASCII letters, digits, `_`, `-` and `.` (they become JAAS option
    /// names); [`start`](Self::start) fails with [`TestingError::InvalidArgument`] otherwise.
    pub fn sasl_digest(mut self, users: &[(&str, &str)]) -> Self {
        let users = users.iter().map(|(user, password)| (user.to_string(), password.to_string())).collect();
        self.sasl = Some(ServerSasl { users });
        self.owned = true;
        self
    }

    /// Uses this client port instead of a free one chosen by the harness.
    pub fn port(mut self, port: u16) -> Self {
        self.port = Some(port);
        self
    }

    /// Starts the server and waits until it serves requests (at most 30 s).
    ///
    /// With `ZK_CONNECT` set (and without [`owned`](Self::owned)) no process is started; the
    /// result is an [external](TestingServer::is_external) handle to that server.
    ///
    /// # Errors
    /// * [`TestingError::NotInstalled`] without java or the ZooKeeper jars;
    /// * [`TestingError::NotReady`] / [`TestingError::ServerExited`] (with the log tail) when
    ///   the server does not come up;
    /// * [`TestingError::Io`] when the temp directory, config or process cannot be created.
    ///
    /// # Cancel safety
    /// Cancel safe: a server being started is killed and its directory removed.
    ///
    /// # Examples
    /// ```no_run
    /// # use std::time::Duration;
    /// # use zk_curator::testing::TestingServer;
    /// # async fn demo() -> zk_curator::testing::TestingResult<()> {
    /// let server = TestingServer::builder().max_session_timeout(Duration::from_secs(10)).start().await?;
    /// println!("ZooKeeper at {}", server.connect_string());
    /// # Ok(()) }
    /// ```
    pub async fn start(self) -> TestingResult<TestingServer> {
        let shared = self.shared.clone().or_else(|| zk_connect_override().filter(|_| !self.owned));
        if let Some(shared) = shared {
            let port = external_port(&shared);
            let connect = isolated_connect_string(&shared).await?;
            return Ok(TestingServer { kind: Kind::External { connect, port } });
        }
        if let Some(sasl) = &self.sasl {
            sasl.validate()?;
        }
        let install = Installation::detect()?;
        // A harness-chosen port may be grabbed by someone else between probing and the JVM's
        // bind; retry with another one then.
        let attempts = if self.port.is_some() { 1 } else { 3 };
        let mut attempt = 0;
        loop {
            attempt += 1;
            let ports = free_ports(2)?;
            let port = match self.port {
                Some(port) => port,
                None => ports.first().copied().unwrap_or_default(),
            };
            let secure_port = ports.get(1).copied().unwrap_or_default();
            let tls = self.tls.as_ref().map(|tls| (tls, secure_port));
            let mut local = LocalServer::create(&install, &self.settings, port, tls, self.sasl.as_ref())?;
            match local.start().await {
                Ok(()) => return Ok(TestingServer { kind: Kind::Local(Box::new(local)) }),
                Err(TestingError::ServerExited { log_tail, .. })
                    if attempt < attempts && log_tail.contains("Address already in use") =>
                {
                    tracing::debug!(port, "port taken before the server could bind it; retrying");
                    continue;
                }
                Err(err) => return Err(err),
            }
        }
    }
}

/// First port of a connect string such as `host1:2181,host2:2182/chroot` (2181 if none).
fn external_port(connect: &str) -> u16 {
    let first = connect.split(',').next().unwrap_or_default();
    let first = first.split('/').next().unwrap_or_default();
    first.rsplit_once(':').and_then(|(_, port)| port.trim().parse().ok()).unwrap_or(2181)
}

/// A standalone server process the harness owns.
struct LocalServer {
    // Field order matters: the supervisor (and its JVM) goes before the directory.
    supervisor: Supervisor,
    port: u16,
    secure_port: Option<u16>,
    running: bool,
    dir: tempfile::TempDir,
}

impl LocalServer {
    fn create(
        install: &Installation,
        settings: &ServerSettings,
        port: u16,
        tls: Option<(&ServerTls, u16)>,
        sasl: Option<&ServerSasl>,
    ) -> TestingResult<LocalServer> {
        let dir = temp_dir("server")?;
        let mut config = settings.base_config(dir.path(), port);
        if let Some((tls, secure_port)) = tls {
            config.push_str(&tls_config(dir.path(), tls, secure_port)?);
        }
        let mut spec = settings.jvm_spec(install, dir.path(), STANDALONE_MAIN);
        if let Some(sasl) = sasl {
            config.push_str(&sasl.write(dir.path())?);
            // A JVM flag: it must precede the main class, so it goes first.
            let mut flag = OsString::from("-Djava.security.auth.login.config=");
            flag.push(dir.path().join(JAAS_FILE));
            spec.args.insert(0, flag);
        }
        write_file(dir.path(), CONFIG_FILE, &config)?;
        let supervisor = Supervisor::new(&format!("server-{port}"), spec)?;
        Ok(LocalServer { supervisor, port, secure_port: tls.map(|(_, p)| p), running: false, dir })
    }

    fn what(&self) -> String {
        format!("ZooKeeper server 127.0.0.1:{}", self.port)
    }

    async fn start(&mut self) -> TestingResult<()> {
        self.supervisor.spawn().await?;
        self.running = true;
        let what = self.what();
        wait_ready(&self.supervisor, self.port, self.dir.path(), &what, Readiness::Serving, STARTUP_TIMEOUT).await
    }
}

/// The JAAS configuration of a server with [`TestingServerBuilder::sasl_digest`].
const JAAS_FILE: &str = "jaas.conf";

impl ServerSasl {
    fn validate(&self) -> TestingResult<()> {
        let valid = |user: &str| {
            !user.is_empty() && user.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        };
        match self.users.iter().find(|(user, _)| !valid(user)) {
            Some((user, _)) => Err(TestingError::InvalidArgument {
                message: format!("SASL user name {user:?}: only ASCII letters, digits, '_', '-' and '.'"),
            }),
            None => Ok(()),
        }
    }

    /// Writes the JAAS file into `dir` and returns the `zoo.cfg` lines (ZooKeeper turns
    /// `authProvider.1` into the system property `zookeeper.authProvider.1`).
    fn write(&self, dir: &Path) -> TestingResult<String> {
        let mut jaas = String::from("Server {\n    org.apache.zookeeper.server.auth.DigestLoginModule required");
        for (user, password) in &self.users {
            // JAAS reads quoted values with java.io.StreamTokenizer: backslash escapes.
            let quoted = password.replace('\\', "\\\\").replace('"', "\\\"");
            let _ = write!(jaas, "\n    user_{user}=\"{quoted}\"");
        }
        jaas.push_str(";\n};\n");
        write_file(dir, JAAS_FILE, &jaas)?;
        Ok("authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider\n".to_string())
    }
}

/// Writes the PEM files into `dir` and returns the `zoo.cfg` lines of a TLS client port.
/// ZooKeeper turns unknown `zoo.cfg` keys into `zookeeper.`-prefixed system properties, which is
/// where its TLS settings live.
fn tls_config(dir: &Path, tls: &ServerTls, secure_port: u16) -> TestingResult<String> {
    write_file(dir, "keystore.pem", &tls.key_and_certificate_pem)?;
    let mut cfg = String::new();
    let _ = writeln!(cfg, "secureClientPort={secure_port}");
    cfg.push_str("secureClientPortAddress=127.0.0.1\n");
    cfg.push_str("serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n");
    let _ = writeln!(cfg, "ssl.keyStore.location={}", dir.join("keystore.pem").display());
    cfg.push_str("ssl.keyStore.type=PEM\n");
    match &tls.client_ca_pem {
        Some(ca) => {
            write_file(dir, "truststore.pem", ca)?;
            let _ = writeln!(cfg, "ssl.trustStore.location={}", dir.join("truststore.pem").display());
            cfg.push_str("ssl.trustStore.type=PEM\nssl.clientAuth=need\n");
        }
        None => cfg.push_str("ssl.clientAuth=none\n"),
    }
    Ok(cfg)
}

enum Kind {
    Local(Box<LocalServer>),
    External { connect: String, port: u16 },
}

/// A standalone ZooKeeper server for tests, like Curator's `TestingServer`.
///
/// The server runs as a child JVM listening on a free `127.0.0.1` port, with a temporary data
/// directory. Dropping the handle kills the JVM (`kill -9`, reaped before `drop` returns) and
/// removes the directory; this also happens when the owning test panics. With the environment
/// variable `ZK_CONNECT` set, [`TestingServer::start`] starts nothing and returns an
/// [external](TestingServer::is_external) handle instead, whose fault-injection methods fail
/// with [`TestingError::External`].
pub struct TestingServer {
    kind: Kind,
}

impl std::fmt::Debug for TestingServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("TestingServer");
        d.field("connect_string", &self.connect_string());
        match &self.kind {
            Kind::Local(local) => d.field("running", &local.running).field("data_dir", &local.dir.path()),
            Kind::External { .. } => d.field("external", &true),
        };
        d.finish()
    }
}

impl TestingServer {
    /// Starts a server with default settings; same as `TestingServer::builder().start()`.
    ///
    /// # Errors
    /// See [`TestingServerBuilder::start`].
    ///
    /// # Cancel safety
    /// Cancel safe: a server being started is killed and its directory removed.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let server = zk_curator::testing::TestingServer::start().await?;
    /// let client = zk_curator::CuratorClient::connect(&server.connect_string()).await?;
    /// let mutex = zk_curator::locks::InterProcessMutex::new(&client, "/locks/test")?;
    /// // ... the test ...
    /// client.close().await;
    /// # Ok(()) }
    /// ```
    pub async fn start() -> TestingResult<TestingServer> {
        Self::builder().start().await
    }

    /// A builder to change timing or pick the port.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo() -> zk_curator::testing::TestingResult<()> {
    /// use std::time::Duration;
    ///
    /// let server = zk_curator::testing::TestingServer::builder().tick_time(Duration::from_millis(50)).start().await?;
    /// # Ok(()) }
    /// ```
    pub fn builder() -> TestingServerBuilder {
        TestingServerBuilder::default()
    }

    /// The connect string for clients: `127.0.0.1:PORT`, or for an external server `ZK_CONNECT`
    /// followed by this handle's own chroot (`/zk-curator-testing/<id>`).
    pub fn connect_string(&self) -> String {
        match &self.kind {
            Kind::Local(local) => format!("127.0.0.1:{}", local.port),
            Kind::External { connect, .. } => connect.clone(),
        }
    }

    /// The TLS connect string, `tcp+tls://127.0.0.1:PORT`, of a server started with
    /// [`TestingServerBuilder::tls`]; None otherwise.
    pub fn secure_connect_string(&self) -> Option<String> {
        match &self.kind {
            Kind::Local(local) => local.secure_port.map(|port| format!("tcp+tls://127.0.0.1:{port}")),
            Kind::External { .. } => None,
        }
    }

    /// The client port (for an external server: the port of the first host in `ZK_CONNECT`).
    pub fn port(&self) -> u16 {
        match &self.kind {
            Kind::Local(local) => local.port,
            Kind::External { port, .. } => *port,
        }
    }

    /// Whether this handle points at an external server given through `ZK_CONNECT`.
    pub fn is_external(&self) -> bool {
        matches!(self.kind, Kind::External { .. })
    }

    fn local(&mut self, what: &'static str) -> TestingResult<&mut LocalServer> {
        match &mut self.kind {
            Kind::Local(local) => Ok(local),
            Kind::External { .. } => Err(TestingError::External { what }),
        }
    }

    fn running_local(&self, what: &'static str) -> TestingResult<&LocalServer> {
        match &self.kind {
            Kind::Local(local) if local.running => Ok(local),
            Kind::Local(local) => Err(TestingError::NotRunning { what: local.what() }),
            Kind::External { .. } => Err(TestingError::External { what }),
        }
    }

    /// Kills the server (`SIGKILL`) and waits until the JVM has exited. Clients see a
    /// disconnect; sessions are not closed, so they can resume after [`restart`](Self::restart).
    /// The port number and data directory are kept for the restart. A no-op when stopped.
    ///
    /// # Errors
    /// [`TestingError::External`] for an external server; [`TestingError::Io`] if the
    /// supervisor thread is gone.
    ///
    /// # Cancel safety
    /// Cancel safe: the process is killed at the first poll.
    ///
    /// # Examples
    /// ```no_run
    /// # use zk_curator::{testing::TestingServer, CuratorClient};
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let mut server = TestingServer::builder().owned().start().await?;
    /// let client = CuratorClient::connect(&server.connect_string()).await?;
    /// server.stop().await?; // the client goes SUSPENDED
    /// server.restart().await?; // the same session comes back: RECONNECTED
    /// # Ok(()) }
    /// ```
    pub async fn stop(&mut self) -> TestingResult<()> {
        let local = self.local("stop")?;
        local.supervisor.kill().await?;
        local.running = false;
        Ok(())
    }

    /// Starts the server again on the same port with the same data directory and waits until
    /// it serves requests (a running server is killed first). Persistent nodes survive; sessions
    /// survive if the downtime was shorter than their timeout.
    ///
    /// # Errors
    /// [`TestingError::External`] for an external server; [`TestingError::NotReady`] or
    /// [`TestingError::ServerExited`] when it does not come back within 30 s (e.g. the port was
    /// taken meanwhile).
    ///
    /// # Cancel safety
    /// Cancel safe: a server being started is killed when the handle drops.
    ///
    /// # Examples
    /// ```no_run
    /// # use zk_curator::testing::TestingServer;
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let mut server = TestingServer::builder().owned().start().await?;
    /// server.stop().await?;
    /// // ... check what clients do without a server ...
    /// server.restart().await?; // same port, same data
    /// # Ok(()) }
    /// ```
    pub async fn restart(&mut self) -> TestingResult<()> {
        let local = self.local("restart")?;
        local.supervisor.kill().await?;
        local.running = false;
        local.start().await
    }

    /// Freezes the server with `SIGSTOP`. Connections stay open but nothing is answered; note
    /// that this also freezes the server's clock, so the *server* does not expire sessions
    /// while paused (only clients' own timers run). Use a [`FaultProxy`](super::FaultProxy) in
    /// [`Blackhole`](super::ProxyMode::Blackhole) mode for server-side expiry.
    ///
    /// # Errors
    /// [`TestingError::External`] for an external server, [`TestingError::NotRunning`] when
    /// stopped, [`TestingError::Io`] if the signal cannot be sent.
    pub fn pause(&self) -> TestingResult<()> {
        self.running_local("pause")?.supervisor.signal(libc::SIGSTOP)
    }

    /// Resumes a [paused](Self::pause) server with `SIGCONT`.
    ///
    /// # Errors
    /// As for [`pause`](Self::pause).
    pub fn resume(&self) -> TestingResult<()> {
        self.running_local("resume")?.supervisor.signal(libc::SIGCONT)
    }

    /// The server's temporary directory: ZooKeeper's `dataDir`, also holding `zoo.cfg`, the
    /// server log `zookeeper.log` and the JVM output `jvm.out`. Removed on drop. Empty for an
    /// external server.
    pub fn data_dir(&self) -> &Path {
        match &self.kind {
            Kind::Local(local) => local.dir.path(),
            Kind::External { .. } => Path::new(""),
        }
    }
}

impl Drop for TestingServer {
    /// Kills and reaps the JVM, then removes the data directory; for an external server, removes
    /// this handle's chroot and everything in it (best effort, a few seconds at most). Never
    /// panics and needs no tokio runtime.
    fn drop(&mut self) {
        match &mut self.kind {
            Kind::Local(local) => {
                local.supervisor.shutdown_blocking();
                local.running = false;
            }
            Kind::External { connect, .. } => remove_isolated_tree(connect),
        }
        // The TempDir is removed when the fields drop, after the JVM is gone.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn external_port_parsing() {
        assert_eq!(external_port("127.0.0.1:2182"), 2182);
        assert_eq!(external_port("a:1,b:2/chroot"), 1);
        assert_eq!(external_port("zk.example/chroot"), 2181);
        assert_eq!(external_port("[::1]:2190"), 2190);
    }

    #[test]
    fn config_has_test_settings() {
        let cfg = ServerSettings::default().base_config(Path::new("/tmp/x"), 1234);
        for line in
            ["tickTime=200", "clientPort=1234", "minSessionTimeout=400", "maxSessionTimeout=60000", "forceSync=no"]
        {
            assert!(cfg.lines().any(|l| l == line), "{line} missing in\n{cfg}");
        }
    }

    #[test]
    fn sasl_digest_writes_a_jaas_server_section_and_hides_passwords() {
        let dir = tempfile::tempdir().unwrap();
        let sasl = ServerSasl { users: vec![("alice".into(), r#"pa"ss\word"#.into()), ("bob.b-2".into(), "x".into())] };
        sasl.validate().unwrap();
        let cfg = sasl.write(dir.path()).unwrap();
        assert_eq!(cfg, "authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider\n");
        let jaas = std::fs::read_to_string(dir.path().join(JAAS_FILE)).unwrap();
        assert_eq!(
            jaas,
            "Server {\n    org.apache.zookeeper.server.auth.DigestLoginModule required\n    \
             user_alice=\"pa\\\"ss\\\\word\"\n    user_bob.b-2=\"x\";\n};\n"
        );
        let shown = format!("{:?}", TestingServerBuilder::default().sasl_digest(&[("alice", "pa55")]));
        assert!(shown.contains("alice:<redacted>") && !shown.contains("pa55"), "{shown}");
        for bad in ["", "al ice", "al=ice", "al\"ice"] {
            let sasl = ServerSasl { users: vec![(bad.into(), "x".into())] };
            assert!(matches!(sasl.validate(), Err(TestingError::InvalidArgument { .. })), "{bad:?}");
        }
    }
}
