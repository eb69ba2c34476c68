//! `zk-curator`: a small command line tool for looking at and holding Curator-compatible locks.
//!
//! ```text
//! zk-curator --connect 127.0.0.1:2181 participants /locks/report
//! zk-curator --connect 127.0.0.1:2181 hold /locks/report --seconds 30 --timeout 5
//! ```

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use zk_curator::{CuratorClient, HoldState, InterProcessMutex};

#[derive(Parser, Debug)]
#[command(version, about = "Inspect and hold Curator-compatible ZooKeeper locks")]
struct Cli {
    /// ZooKeeper connect string (host:port[,host:port...][/chroot]).
    #[arg(long, env = "ZK_CONNECT", default_value = "127.0.0.1:2181")]
    connect: String,
    /// Client namespace (Curator's `namespace`).
    #[arg(long, default_value = "")]
    namespace: String,
    /// Session timeout in milliseconds.
    #[arg(long, default_value_t = 15_000)]
    session_timeout_ms: u64,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// List a mutex's contenders in lock order (the holder first), with their node data.
    Participants {
        /// The lock path.
        path: String,
    },
    /// Acquire a mutex, hold it, report hold-state changes, release it.
    Hold {
        /// The lock path.
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
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("zk-curator: cannot start a runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
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

async fn run(cli: Cli) -> zk_curator::Result<ExitCode> {
    let client = CuratorClient::builder(&cli.connect)
        .namespace(&cli.namespace)
        .session_timeout(Duration::from_millis(cli.session_timeout_ms))
        .connect()
        .await?;
    let code = match cli.command {
        Command::Participants { path } => {
            let mutex = InterProcessMutex::new(&client, &path)?;
            let zk = client.zookeeper()?;
            for (i, node) in mutex.participant_nodes().await?.iter().enumerate() {
                let data = match zk.get_data(&format!("{}{node}", client.namespace())).await {
                    Ok((data, _)) => String::from_utf8_lossy(&data).into_owned(),
                    Err(_) => "<gone>".to_string(),
                };
                say(format!("{}{node}  data={data:?}", if i == 0 { "HOLDER " } else { "WAITER " }));
            }
            ExitCode::SUCCESS
        }
        Command::Hold { path, seconds, timeout } => {
            let mutex = InterProcessMutex::new(&client, &path)?;
            let guard = match timeout {
                Some(t) => mutex.try_lock_for(Duration::from_secs(t)).await?,
                None => Some(mutex.lock().await?),
            };
            let Some(guard) = guard else {
                say("NOT_ACQUIRED");
                client.close().await;
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
            ExitCode::SUCCESS
        }
    };
    client.close().await;
    Ok(code)
}
