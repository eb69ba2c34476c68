//! `zk-curator register NAME --port P -- COMMAND`: a service instance registered (Curator's
//! curator-x-discovery layout and JSON) exactly while COMMAND runs.
//!
//! The instance is ephemeral (`Dynamic`): it is deleted when COMMAND exits, and goes with our
//! session when we are killed. COMMAND runs as under `lock` (the `supervise` module): its own
//! process group, signals passed on, told by the kernel if we die. When the session is lost the
//! instance is gone from the registry, so COMMAND is stopped as a lost lock's is (SIGTERM, SIGKILL
//! before the server can expire the session) and we exit 75: a supervisor restarts it, registered
//! again.

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use tokio::sync::watch;
use zk_curator::discovery::{ServiceDiscovery, ServiceInstance};
use zk_curator::locks::HoldState;
use zk_curator::{ConnectionState, CuratorClient};

use crate::common::{exit, parse_lock_path, parse_seconds, signal_exit, Signals, EXIT_LOCK_LOST, EXIT_UNAVAILABLE};
use crate::connection::{close, start, Resolved};
use crate::supervise::{supervise, Ended, Guard, Supervision};

/// The registry's base path when none is given (`services` lists the same).
pub(crate) const DEFAULT_BASE: &str = "/services";

#[derive(Args, Debug)]
#[command(after_help = "\
Exit status: COMMAND's own status (128+N if a signal N ended it); 2 for usage errors; 69 when \
ZooKeeper could not be reached or the instance could not be registered; 75 when the session was \
lost while COMMAND ran (its instance was gone; COMMAND was sent SIGTERM, then SIGKILL before the \
server could expire the session); 126/127 when COMMAND could not be executed / was not found.

COMMAND runs in a process group of its own with ZK_SERVICE_NAME, ZK_SERVICE_ID and \
ZK_SERVICE_NODE in its environment. The instance is Curator's JSON (curator-x-discovery's \
JsonInstanceSerializer): Java services using Curator's ServiceDiscovery find it.")]
pub(crate) struct RegisterArgs {
    /// The service name.
    name: String,
    /// The instance's port.
    #[arg(long)]
    port: u16,
    /// The instance's address (default: this host's, as Curator's).
    #[arg(long)]
    address: Option<String>,
    /// The instance's SSL port.
    #[arg(long)]
    ssl_port: Option<u16>,
    /// The instance id (default: a random UUID, as Curator's).
    #[arg(long)]
    id: Option<String>,
    /// The instance's payload: a JSON value.
    #[arg(long, value_name = "JSON", value_parser = parse_payload)]
    payload: Option<serde_json::Value>,
    /// The registry's base path (relative to --namespace).
    #[arg(long, default_value = DEFAULT_BASE, value_parser = parse_lock_path)]
    base: String,
    /// After the session is lost and COMMAND got SIGTERM, SIGKILL its group after SECS at the
    /// latest (earlier when the session could expire sooner, as `lock`).
    #[arg(long, value_name = "SECS", default_value = "5", value_parser = parse_seconds)]
    kill_after: Duration,
    /// The command and its arguments, after `--`.
    #[arg(required = true, last = true, num_args = 1.., value_name = "COMMAND")]
    command: Vec<OsString>,
}

fn parse_payload(text: &str) -> Result<serde_json::Value, String> {
    serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))
}

pub(crate) async fn run(connection: &Resolved, args: RegisterArgs) -> ExitCode {
    let (client, _, mut signals) = match start(connection, None).await {
        Ok(started) => started,
        Err(code) => return code,
    };
    let code = run_connected(&client, &args, &mut signals).await;
    close(&client, &mut signals, code).await
}

fn instance(args: &RegisterArgs) -> zk_curator::Result<ServiceInstance> {
    let mut builder = ServiceInstance::builder(args.name.clone()).port(args.port);
    if let Some(address) = &args.address {
        builder = builder.address(address.clone());
    }
    if let Some(port) = args.ssl_port {
        builder = builder.ssl_port(port);
    }
    if let Some(id) = &args.id {
        builder = builder.id(id.clone());
    }
    if let Some(payload) = &args.payload {
        builder = builder.payload(payload.clone());
    }
    builder.build()
}

async fn run_connected(client: &CuratorClient, args: &RegisterArgs, signals: &mut Signals) -> ExitCode {
    let instance = match instance(args) {
        Ok(instance) => instance,
        Err(e) => {
            eprintln!("zk-curator: {}", crate::common::Report(&e));
            return exit(crate::common::EXIT_USAGE);
        }
    };
    let discovery = match ServiceDiscovery::builder(client, &args.base).build() {
        Ok(discovery) => discovery,
        Err(e) => {
            eprintln!("zk-curator: {}", crate::common::Report(&e));
            return exit(crate::common::EXIT_USAGE);
        }
    };
    // Watched from before the register: a session lost during it must not go unseen.
    let guard = session_guard(client, discovery.path_for_instance(instance.name(), instance.id()));
    tokio::select! {
        registered = discovery.register(&instance) => {
            if let Err(e) = registered {
                eprintln!("zk-curator: cannot register {}: {}", instance.id(), crate::common::Report(&e));
                return exit(match e {
                    zk_curator::Error::InvalidArgument { .. } => crate::common::EXIT_USAGE,
                    _ => EXIT_UNAVAILABLE,
                });
            }
        }
        signal = signals.next() => return signal_exit(signal),
    }
    let run = Supervision {
        command: &args.command,
        env: vec![
            ("ZK_SERVICE_NAME", instance.name().to_string()),
            ("ZK_SERVICE_ID", instance.id().to_string()),
            ("ZK_SERVICE_NODE", guard.path.clone()),
        ],
        kill_after: args.kill_after,
        what: format!("registration of {} {}", instance.name(), instance.id()),
        node: "instance node",
        report_suspension: false,
        stop_group_on_exit: false,
    };
    let code = match supervise(client, &guard, &run, signals).await.ended {
        Ended::Exited(code) | Ended::NotRun(code) => exit(code),
        Ended::Lost => exit(EXIT_LOCK_LOST),
    };
    // Unregisters (the node is deleted now, not at the session's end); a signal cuts it short.
    tokio::select! {
        closed = discovery.close() => {
            if let Err(e) = closed {
                eprintln!("zk-curator: unregistering {}: {}", instance.id(), crate::common::Report(&e));
            }
            code
        }
        signal = signals.next() => if code == exit(EXIT_LOCK_LOST) { code } else { signal_exit(signal) },
    }
}

/// The registration's state as a hold's: held while the session lasts, suspended while the
/// connection is, lost for good with the session (its ephemeral node is gone then).
fn session_guard(client: &CuratorClient, path: String) -> Guard {
    let session = client.session();
    let (state, states) = watch::channel(HoldState::Held);
    let mut changes = client.connection_states();
    let follower = client.clone();
    tokio::spawn(async move {
        let lost = |state: &watch::Sender<HoldState>| state.send_replace(HoldState::Lost);
        if follower.session() != session {
            lost(&state);
            return;
        }
        while let Some(change) = changes.next().await {
            match change {
                ConnectionState::Suspended => state.send_replace(HoldState::Suspended),
                ConnectionState::Lost => {
                    lost(&state);
                    return;
                }
                ConnectionState::Reconnected | ConnectionState::Connected if follower.session() != session => {
                    lost(&state);
                    return;
                }
                ConnectionState::Reconnected | ConnectionState::Connected => state.send_replace(HoldState::Held),
                _ => HoldState::Held,
            };
            if state.is_closed() {
                return;
            }
        }
    });
    Guard { states, session, path }
}
