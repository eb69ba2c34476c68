//! How to reach ZooKeeper: the global options (`--connect`, `--namespace`, `--session-timeout`,
//! credentials, TLS), connecting, and what `lock`, `hold` and `elect` do first (`start`) and last
//! (`close`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use tokio::time::Instant;
use zk_curator::framework::TlsOptions;
use zk_curator::CuratorClient;

use crate::common::{exit, host_and_pid, parse_seconds, signal_exit, Signals, Wait, EXIT_LOCK_LOST, EXIT_UNAVAILABLE};

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
    pub(crate) fn resolve(&self) -> Result<Resolved, String> {
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
            .connection_timeout(connection_timeout)
            .authorizations(self.credentials.iter().map(|(scheme, auth)| (scheme, auth.clone())));
        if let Some(tls) = &self.tls {
            builder = builder.tls(tls.clone());
        }
        builder.connect().await
    }
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

/// Everything `lock` and `hold` do before they wait for the lock: signal handlers, the wait a
/// `--timeout` asks for (measured from now), and a client — connecting gets the whole timeout,
/// and at least a second (a connection is not a conflict). `Err` is the status to exit with.
pub(crate) async fn start(
    connection: &Resolved,
    timeout: Option<Duration>,
) -> Result<(CuratorClient, Wait, Signals), ExitCode> {
    let mut signals = match Signals::install() {
        Ok(signals) => signals,
        Err(e) => {
            eprintln!("zk-curator: cannot install signal handlers: {e}");
            return Err(exit(EXIT_UNAVAILABLE));
        }
    };
    let started = Instant::now();
    let wait = match timeout {
        None => Wait::Forever,
        Some(t) if t.is_zero() => Wait::OneAttempt,
        // A timeout too long for the clock means waiting as long as it takes.
        Some(t) => started.checked_add(t).map_or(Wait::Forever, Wait::Until),
    };
    let connection_timeout = timeout.map_or(Duration::from_secs(15), |t| t.max(Duration::from_secs(1)));
    tokio::select! {
        connected = connection.connect(connection_timeout) => match connected {
            Ok(client) => Ok((client, wait, signals)),
            Err(e) => {
                eprintln!("zk-curator: {}", crate::common::Report(&e));
                Err(exit(EXIT_UNAVAILABLE))
            }
        },
        signal = signals.next() => Err(signal_exit(signal)),
    }
}

/// Closes the client (which also removes any node a cancelled wait or a release could not delete
/// in time); a signal cuts it short (the server then removes our nodes when the session expires).
/// A lost lock keeps its status 75 through such a signal: a supervisor must be able to tell a
/// lost lock from an interrupt.
pub(crate) async fn close(client: &CuratorClient, signals: &mut Signals, code: ExitCode) -> ExitCode {
    tokio::select! {
        () = client.close() => code,
        signal = signals.next() => if code == exit(EXIT_LOCK_LOST) { code } else { signal_exit(signal) },
    }
}
