//! `zk-curator`: run a command under a Curator-compatible ZooKeeper lock or only while leader of an
//! election, look at or hold locks, and watch a tree change.
//!
//! ```text
//! zk-curator --connect 127.0.0.1:2181 lock /locks/nightly-report --timeout 0 -- ./generate-report
//! zk-curator --connect 127.0.0.1:2181 participants /locks/nightly-report
//! zk-curator --connect 127.0.0.1:2181 inspect /locks --older-than 3600
//! zk-curator --connect 127.0.0.1:2181 hold /locks/nightly-report --seconds 30 --timeout 5
//! zk-curator --connect 127.0.0.1:2181 elect /election/billing --id "$(hostname)" -- ./billing-daemon
//! zk-curator --connect 127.0.0.1:2181 watch /config --json
//! zk-curator --connect 127.0.0.1:2181 register api --port 8080 -- ./api-server
//! zk-curator --connect 127.0.0.1:2181 services /services --json
//! ```

mod acquire;
mod commands;
mod common;
mod connection;
mod supervise;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use commands::{elect, hold, inspect, lock, participants, register, services, watch};
use common::{parse_lock_path, EXIT_UNAVAILABLE, EXIT_USAGE};
use connection::Connection;

#[derive(Parser, Debug)]
#[command(
    version,
    about = "Run commands under Curator-compatible ZooKeeper locks or leader elections; inspect and hold locks; watch a tree"
)]
struct Cli {
    #[command(flatten)]
    connection: Connection,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Acquire a lock, run COMMAND while holding it, release it; exit with COMMAND's status.
    Lock(lock::LockArgs),
    /// List a lock's participants, holders first, with their node data: mutexes, read-write
    /// locks (`__READ__`/`__WRIT__` nodes) and semaphores (`leases` and `locks` below the path).
    Participants {
        /// The lock path.
        #[arg(value_parser = parse_lock_path)]
        path: String,
    },
    /// Every lock below ROOT (Curator's or ours, of any kind): holders, since when, waiters.
    /// `--older-than SECS` lists only older holds and exits 1 if there is any.
    Inspect(inspect::InspectArgs),
    /// Acquire a lock, hold it, report hold-state changes, release it (exit statuses as `lock`).
    Hold(hold::HoldArgs),
    /// Take part in a leader election (a Curator LeaderLatch) on PATH and run COMMAND only while
    /// leader; queue again after each term (`--once`: exit after the first, with its status).
    Elect(elect::ElectArgs),
    /// Print the nodes under PATH (a CuratorCache), then every change as it happens, one line per
    /// event (`--json`: one object per line), until SIGINT/SIGTERM.
    Watch(watch::WatchArgs),
    /// Register a service instance (curator-x-discovery's layout and JSON) and run COMMAND; the
    /// instance is registered exactly while COMMAND runs (exit statuses as `lock`).
    Register(register::RegisterArgs),
    /// List the services of a discovery registry (default /services) and their instances.
    Services(services::ServicesArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let connection = match cli.connection.resolve() {
        Ok(connection) => connection,
        Err(e) => {
            eprintln!("zk-curator: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    // One thread: the `lock` and `elect` commands' child gets PR_SET_PDEATHSIG, which follows the thread that
    // spawned it, so that thread must live as long as the process.
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("zk-curator: cannot start a runtime: {e}");
            return ExitCode::from(EXIT_UNAVAILABLE);
        }
    };
    match cli.command {
        Command::Lock(args) => runtime.block_on(lock::run(&connection, args)),
        Command::Participants { path } => runtime.block_on(participants::run(&connection, &path)),
        Command::Hold(args) => runtime.block_on(hold::run(&connection, args)),
        Command::Inspect(args) => runtime.block_on(inspect::run(&connection, args)),
        Command::Elect(args) => runtime.block_on(elect::run(&connection, args)),
        Command::Watch(args) => runtime.block_on(watch::run(&connection, args)),
        Command::Register(args) => runtime.block_on(register::run(&connection, args)),
        Command::Services(args) => runtime.block_on(services::run(&connection, args)),
    }
}
