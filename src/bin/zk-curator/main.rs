//! `zk-curator`: run a command under a Curator-compatible ZooKeeper lock or only while leader of an
//! election, and look at or hold locks.
//!
//! ```text
//! zk-curator --connect 127.0.0.1:2181 lock /locks/nightly-report --timeout 0 -- ./generate-report
//! zk-curator --connect 127.0.0.1:2181 participants /locks/nightly-report
//! zk-curator --connect 127.0.0.1:2181 inspect /locks --older-than 3600
//! zk-curator --connect 127.0.0.1:2181 hold /locks/nightly-report --seconds 30 --timeout 5
//! zk-curator --connect 127.0.0.1:2181 elect /election/billing --id "$(hostname)" -- ./billing-daemon
//! ```

mod elect_command;
mod hold_command;
mod inspect_command;
mod lock_command;
mod participants;
mod supervise;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use zk_curator::{CuratorClient, TlsOptions};

use elect_command::ElectArgs;
use hold_command::HoldArgs;
use inspect_command::InspectArgs;
use lock_command::LockArgs;

#[derive(Parser, Debug)]
#[command(
    version,
    about = "Run commands under Curator-compatible ZooKeeper locks or leader elections; inspect and hold locks"
)]
struct Cli {
    #[command(flatten)]
    connection: Connection,
    #[command(subcommand)]
    command: Command,
}

/// How to reach ZooKeeper (global options).
#[derive(Args, Debug, Clone)]
pub(crate) struct Connection {
    /// ZooKeeper connect string (host:port[,host:port...][/chroot]).
    #[arg(long, env = "ZK_CONNECT", default_value = "127.0.0.1:2181", global = true)]
    connect: String,
    /// Client namespace (Curator's `namespace`): lock paths are relative to it.
    #[arg(long, default_value = "", global = true)]
    namespace: String,
    /// Session timeout in seconds (fractions allowed; default 15).
    #[arg(long, value_name = "SECS", value_parser = parse_session_timeout, global = true)]
    session_timeout: Option<Duration>,
    /// Session timeout in milliseconds (older spelling of --session-timeout).
    #[arg(long, hide = true, conflicts_with = "session_timeout", value_parser = parse_session_timeout_ms, global = true)]
    session_timeout_ms: Option<u64>,
    /// Authenticate every session: SCHEME:CREDENTIALS, e.g. digest:user:password (repeatable).
    /// Visible to `ps`: prefer --auth-file or the ZK_AUTH environment variable.
    #[arg(long, value_name = "SCHEME:CREDENTIALS", value_parser = parse_auth, global = true)]
    auth: Vec<(String, String)>,
    /// Read credentials from FILE: one SCHEME:CREDENTIALS per line (blank lines and lines
    /// starting with # are skipped). ZK_AUTH (SCHEME:CREDENTIALS, one per line) is read as well.
    #[arg(long, value_name = "FILE", global = true)]
    auth_file: Option<PathBuf>,
    /// Connect over TLS, trusting the CA certificate(s) in this PEM file.
    #[arg(long, value_name = "PEM", global = true)]
    tls_ca: Option<PathBuf>,
    /// Client certificate (PEM) for servers that ask for one; needs --tls-key and --tls-ca.
    #[arg(long, value_name = "PEM", requires = "tls_key", requires = "tls_ca", global = true)]
    tls_cert: Option<PathBuf>,
    /// The client certificate's private key (PEM); needs --tls-cert.
    #[arg(long, value_name = "PEM", requires = "tls_cert", global = true)]
    tls_key: Option<PathBuf>,
}

/// The connection settings with credentials and TLS material read and checked.
pub(crate) struct Resolved {
    connect: String,
    namespace: String,
    session_timeout: Duration,
    credentials: Vec<(String, Vec<u8>)>,
    tls: Option<TlsOptions>,
}

impl Connection {
    fn session_timeout(&self) -> Duration {
        self.session_timeout.or(self.session_timeout_ms.map(Duration::from_millis)).unwrap_or(Duration::from_secs(15))
    }

    /// Reads the credentials (--auth, --auth-file, ZK_AUTH) and the TLS files. The message of an
    /// error names the option, file and line, never a secret.
    fn resolve(&self) -> Result<Resolved, String> {
        let mut credentials: Vec<(String, Vec<u8>)> =
            self.auth.iter().map(|(scheme, auth)| (scheme.clone(), auth.as_bytes().to_vec())).collect();
        if let Some(file) = &self.auth_file {
            let text = std::fs::read_to_string(file)
                .map_err(|e| format!("--auth-file {}: cannot read it: {e}", file.display()))?;
            credentials.extend(credential_lines(&text, &format!("--auth-file {}", file.display()))?);
        }
        match std::env::var("ZK_AUTH") {
            Ok(text) => credentials.extend(credential_lines(&text, "ZK_AUTH")?),
            Err(std::env::VarError::NotPresent) => {}
            Err(std::env::VarError::NotUnicode(_)) => return Err("ZK_AUTH is not valid UTF-8".to_string()),
        }
        Ok(Resolved {
            connect: self.connect.clone(),
            namespace: self.namespace.clone(),
            session_timeout: self.session_timeout(),
            credentials,
            tls: self.tls_options()?,
        })
    }

    fn tls_options(&self) -> Result<Option<TlsOptions>, String> {
        let Some(ca) = &self.tls_ca else { return Ok(None) };
        let read = |option: &str, file: &Path| {
            std::fs::read_to_string(file).map_err(|e| format!("{option} {}: cannot read it: {e}", file.display()))
        };
        let options = TlsOptions::new()
            .with_pem_ca(&read("--tls-ca", ca)?)
            .map_err(|e| format!("--tls-ca {}: not a PEM CA certificate: {e}", ca.display()))?;
        match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => {
                options.with_pem_identity(&read("--tls-cert", cert)?, &read("--tls-key", key)?).map(Some).map_err(|e| {
                    format!(
                        "--tls-cert {} / --tls-key {}: not a PEM certificate and key: {e}",
                        cert.display(),
                        key.display()
                    )
                })
            }
            _ => Ok(Some(options)),
        }
    }
}

/// `SCHEME:CREDENTIALS` lines, trimmed of surrounding white space (as a config file's lines are);
/// blank lines and `#` comments skipped.
fn credential_lines(text: &str, source: &str) -> Result<Vec<(String, Vec<u8>)>, String> {
    let mut credentials = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (scheme, auth) = parse_auth(line).map_err(|e| format!("{source}: line {}: {e}", number + 1))?;
        credentials.push((scheme, auth.into_bytes()));
    }
    Ok(credentials)
}

impl Resolved {
    /// Connects; the connection attempt gives up after `connection_timeout`.
    pub(crate) async fn connect(&self, connection_timeout: Duration) -> zk_curator::Result<CuratorClient> {
        // Our nodes' data (Curator's and the library's default is the local IP address): which
        // host and which process, for `inspect` and `participants` (docs/cli.md, "Node data").
        let mut builder = CuratorClient::builder(&self.connect)
            .default_data(host_and_pid())
            .namespace(&self.namespace)
            .session_timeout(self.session_timeout)
            .connection_timeout(connection_timeout);
        for (scheme, auth) in &self.credentials {
            builder = builder.authorization(scheme, auth.clone());
        }
        if let Some(tls) = &self.tls {
            builder = builder.tls(tls.clone());
        }
        builder.connect().await
    }
}

/// `HOSTNAME:PID` (`localhost:PID` if the host name cannot be read): the data of our lock nodes
/// and `elect`'s default participant id.
pub(crate) fn host_and_pid() -> String {
    let host = gethostname::gethostname().to_string_lossy().into_owned();
    let host = if host.is_empty() { "localhost".to_string() } else { host };
    format!("{host}:{}", std::process::id())
}

/// A duration (clap value parser): seconds, fractions allowed (`90`, `0.5`), or with units as
/// humantime reads them (`90s`, `15m`, `1h 30m`, `500ms`, `2days`).
pub(crate) fn parse_seconds(text: &str) -> Result<Duration, String> {
    let trimmed = text.trim();
    if let Ok(seconds) = trimmed.parse::<f64>() {
        return Duration::try_from_secs_f64(seconds)
            .map_err(|_| format!("{text:?} is not a non-negative number of seconds"));
    }
    humantime::parse_duration(trimmed)
        .map_err(|e| format!("{text:?} is not a duration (seconds, or e.g. 90s, 15m, 1h 30m): {e}"))
}

/// A session timeout: seconds, at most what ZooKeeper can carry (2^31 ms, about 24.8 days).
fn parse_session_timeout(text: &str) -> Result<Duration, String> {
    let timeout = parse_seconds(text)?;
    if timeout.is_zero() {
        return Err(format!("{text:?}: a session timeout must be longer than 0"));
    }
    if timeout > Duration::from_millis(i32::MAX as u64) {
        return Err(format!("{text:?} is longer than ZooKeeper's longest session timeout (about 24.8 days)"));
    }
    Ok(timeout)
}

/// `--session-timeout-ms`: as [`parse_session_timeout`], in milliseconds.
fn parse_session_timeout_ms(text: &str) -> Result<u64, String> {
    let ms: u64 = text.trim().parse().map_err(|_| format!("{text:?} is not a whole number of milliseconds"))?;
    if ms == 0 || ms > i32::MAX as u64 {
        return Err(format!("{text:?}: a session timeout must be 1 to {} ms", i32::MAX));
    }
    Ok(ms)
}

fn parse_auth(text: &str) -> Result<(String, String), String> {
    match text.split_once(':') {
        Some((scheme, credentials)) if !scheme.is_empty() => Ok((scheme.to_string(), credentials.to_string())),
        // Never echo the text: it may hold a secret.
        _ => Err("expected SCHEME:CREDENTIALS, e.g. digest:user:password".to_string()),
    }
}

pub(crate) fn parse_lock_path(text: &str) -> Result<String, String> {
    zk_curator::validate_path(text).map_err(|e| e.to_string())?;
    if text == "/" {
        // The recipes refuse it too, but only once connected (which made it status 69).
        return Err(format!("{text:?}: a lock cannot live at the root"));
    }
    Ok(text.to_string())
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Acquire a lock, run COMMAND while holding it, release it; exit with COMMAND's status.
    Lock(LockArgs),
    /// List a lock's participants, holders first, with their node data: mutexes, read-write
    /// locks (`__READ__`/`__WRIT__` nodes) and semaphores (`leases` and `locks` below the path).
    Participants {
        /// The lock path.
        #[arg(value_parser = parse_lock_path)]
        path: String,
    },
    /// Every lock below ROOT (Curator's or ours, of any kind): holders, since when, waiters.
    /// `--older-than SECS` lists only older holds and exits 1 if there is any.
    Inspect(InspectArgs),
    /// Acquire a lock, hold it, report hold-state changes, release it (exit statuses as `lock`).
    Hold(HoldArgs),
    /// Take part in a leader election (a Curator LeaderLatch) on PATH and run COMMAND only while
    /// leader; queue again after each term (`--once`: exit after the first, with its status).
    Elect(ElectArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let connection = match cli.connection.resolve() {
        Ok(connection) => connection,
        Err(e) => {
            eprintln!("zk-curator: {e}");
            return ExitCode::from(lock_command::EXIT_USAGE);
        }
    };
    // One thread: the `lock` and `elect` commands' child gets PR_SET_PDEATHSIG, which follows the thread that
    // spawned it, so that thread must live as long as the process.
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("zk-curator: cannot start a runtime: {e}");
            return ExitCode::from(lock_command::EXIT_UNAVAILABLE);
        }
    };
    match cli.command {
        Command::Lock(args) => runtime.block_on(lock_command::run(&connection, args)),
        Command::Participants { path } => runtime.block_on(participants::run(&connection, &path)),
        Command::Hold(args) => runtime.block_on(hold_command::run(&connection, args)),
        Command::Inspect(args) => runtime.block_on(inspect_command::run(&connection, args)),
        Command::Elect(args) => runtime.block_on(elect_command::run(&connection, args)),
    }
}
