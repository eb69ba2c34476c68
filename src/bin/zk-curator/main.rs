//! `zk-curator`: run a command under a Curator-compatible ZooKeeper lock, and look at or hold locks.
//!
//! ```text
//! zk-curator --connect 127.0.0.1:2181 lock /locks/nightly-report --timeout 0 -- ./generate-report
//! zk-curator --connect 127.0.0.1:2181 participants /locks/nightly-report
//! zk-curator --connect 127.0.0.1:2181 hold /locks/nightly-report --seconds 30 --timeout 5
//! ```

mod lock_command;

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use zk_curator::{CuratorClient, HoldState, InterProcessMutex};

use lock_command::LockArgs;

#[derive(Parser, Debug)]
#[command(version, about = "Run commands under Curator-compatible ZooKeeper locks; inspect and hold locks")]
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
    #[arg(long, value_name = "SECS", value_parser = parse_seconds, global = true)]
    session_timeout: Option<Duration>,
    /// Session timeout in milliseconds (older spelling of --session-timeout).
    #[arg(long, hide = true, conflicts_with = "session_timeout", global = true)]
    session_timeout_ms: Option<u64>,
    /// Authenticate every session: SCHEME:CREDENTIALS, e.g. digest:user:password (repeatable).
    #[arg(long, value_name = "SCHEME:CREDENTIALS", value_parser = parse_auth, global = true)]
    auth: Vec<(String, String)>,
}

impl Connection {
    pub(crate) fn session_timeout(&self) -> Duration {
        self.session_timeout.or(self.session_timeout_ms.map(Duration::from_millis)).unwrap_or(Duration::from_secs(15))
    }

    /// Connects; the connection attempt gives up after `connection_timeout`.
    pub(crate) async fn connect(&self, connection_timeout: Duration) -> zk_curator::Result<CuratorClient> {
        let builder = CuratorClient::builder(&self.connect)
            .namespace(&self.namespace)
            .session_timeout(self.session_timeout())
            .connection_timeout(connection_timeout);
        self.auth
            .iter()
            .fold(builder, |builder, (scheme, credentials)| builder.authorization(scheme, credentials.as_bytes()))
            .connect()
            .await
    }
}

/// Seconds, fractions allowed, as a Duration (clap value parser).
pub(crate) fn parse_seconds(text: &str) -> Result<Duration, String> {
    let seconds: f64 = text.trim().parse().map_err(|_| format!("{text:?} is not a number of seconds"))?;
    Duration::try_from_secs_f64(seconds).map_err(|_| format!("{text:?} is not a non-negative number of seconds"))
}

fn parse_auth(text: &str) -> Result<(String, String), String> {
    match text.split_once(':') {
        Some((scheme, credentials)) if !scheme.is_empty() => Ok((scheme.to_string(), credentials.to_string())),
        // Never echo the text: it may hold a secret.
        _ => Err("expected SCHEME:CREDENTIALS, e.g. digest:user:password".to_string()),
    }
}

fn parse_lock_path(text: &str) -> Result<String, String> {
    zk_curator::validate_path(text).map(|()| text.to_string()).map_err(|e| e.to_string())
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Acquire a lock, run COMMAND while holding it, release it; exit with COMMAND's status.
    Lock(LockArgs),
    /// List a mutex's contenders in lock order (the holder first), with their node data.
    Participants {
        /// The lock path.
        #[arg(value_parser = parse_lock_path)]
        path: String,
    },
    /// Acquire a mutex, hold it, report hold-state changes, release it.
    Hold {
        /// The lock path.
        #[arg(value_parser = parse_lock_path)]
        path: String,
        /// How long to hold it.
        #[arg(long, default_value_t = 10)]
        seconds: u64,
        /// Give up if not acquired within this many seconds (default: wait forever).
        #[arg(long)]
        timeout: Option<u64>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // One thread: the `lock` command's child gets PR_SET_PDEATHSIG, which follows the thread that
    // spawned it, so that thread must live as long as the process.
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("zk-curator: cannot start a runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let connection = &cli.connection;
    let result = match cli.command {
        Command::Lock(args) => return runtime.block_on(lock_command::run(connection, args)),
        Command::Participants { path } => runtime.block_on(participants(connection, &path)),
        Command::Hold { path, seconds, timeout } => runtime.block_on(hold(connection, &path, seconds, timeout)),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("zk-curator: {e}");
            ExitCode::FAILURE
        }
    }
}

fn say(line: impl std::fmt::Display) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

async fn participants(connection: &Connection, path: &str) -> zk_curator::Result<ExitCode> {
    let client = connection.connect(Duration::from_secs(15)).await?;
    let mutex = InterProcessMutex::new(&client, path)?;
    let zk = client.zookeeper()?;
    for (i, node) in mutex.participant_nodes().await?.iter().enumerate() {
        let data = match zk.get_data(&format!("{}{node}", client.namespace())).await {
            Ok((data, _)) => String::from_utf8_lossy(&data).into_owned(),
            Err(_) => "<gone>".to_string(),
        };
        say(format!("{}{node}  data={data:?}", if i == 0 { "HOLDER " } else { "WAITER " }));
    }
    client.close().await;
    Ok(ExitCode::SUCCESS)
}

async fn hold(connection: &Connection, path: &str, seconds: u64, timeout: Option<u64>) -> zk_curator::Result<ExitCode> {
    let client = connection.connect(Duration::from_secs(15)).await?;
    let code = hold_for(&client, path, seconds, timeout).await;
    client.close().await;
    code
}

async fn hold_for(
    client: &CuratorClient,
    path: &str,
    seconds: u64,
    timeout: Option<u64>,
) -> zk_curator::Result<ExitCode> {
    let mutex = InterProcessMutex::new(client, path)?;
    let guard = match timeout {
        Some(t) => mutex.try_lock_for(Duration::from_secs(t)).await?,
        None => Some(mutex.lock().await?),
    };
    let Some(guard) = guard else {
        say("NOT_ACQUIRED");
        return Ok(ExitCode::from(2));
    };
    say(format!("ACQUIRED {}", guard.node_path()));
    say(format!("TOKEN {}", guard.fencing_token()));
    let mut states = guard.watch_state();
    let until = tokio::time::sleep(Duration::from_secs(seconds));
    tokio::pin!(until);
    loop {
        tokio::select! {
            _ = &mut until => break,
            changed = states.changed() => {
                if changed.is_err() {
                    break;
                }
                let state = *states.borrow_and_update();
                say(format!("{state:?}").to_uppercase());
                if state == HoldState::Lost {
                    break;
                }
            },
        }
    }
    match guard.release().await {
        Ok(()) => say("RELEASED"),
        Err(e) => say(format!("RELEASE_FAILED {e}")),
    }
    Ok(ExitCode::SUCCESS)
}
