//! `zk-curator services [BASE]`: the services of a curator-x-discovery registry and their
//! instances, read now. Text: a line per service, an indented line per instance (id, address and
//! ports, what else is set); an instance whose data cannot be read is listed with why. `--json`:
//! one object, each instance as Curator's JSON.

use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use zk_curator::discovery::{InstanceSerializer, JsonInstanceSerializer, ServiceDiscovery, ServiceInstance};
use zk_curator::{CuratorClient, ErrorCode};

use crate::commands::register::DEFAULT_BASE;
use crate::common::{exit, parse_lock_path, EXIT_UNAVAILABLE};
use crate::connection::Resolved;

#[derive(Args, Debug)]
#[command(after_help = "\
Exit status: 0 (also for a registry that does not exist: no services); 2 for usage errors; 69 \
when ZooKeeper could not be reached or failed.")]
pub(crate) struct ServicesArgs {
    /// The registry's base path (relative to --namespace).
    #[arg(default_value = DEFAULT_BASE, value_parser = parse_lock_path)]
    base: String,
    /// One JSON object: {"base", "services": [{"name", "instances": [Curator's instance JSON],
    /// "unparsable": [{"id", "path", "error"}]}]}.
    #[arg(long)]
    json: bool,
}

struct Service {
    name: String,
    instances: Vec<ServiceInstance>,
    /// id, path, why.
    unparsable: Vec<(String, String, String)>,
}

pub(crate) async fn run(connection: &Resolved, args: ServicesArgs) -> ExitCode {
    let client = match connection.connect(Duration::from_secs(15)).await {
        Ok(client) => client,
        Err(e) => {
            eprintln!("zk-curator: {}", crate::common::Report(&e));
            return exit(EXIT_UNAVAILABLE);
        }
    };
    let listed = list(&client, &args.base).await;
    client.close().await;
    let services = match listed {
        Ok(services) => services,
        Err(e) => {
            eprintln!("zk-curator: {}", crate::common::Report(&e));
            return exit(EXIT_UNAVAILABLE);
        }
    };
    if args.json {
        println!("{}", as_json(&args.base, &services));
    } else {
        for line in as_text(&services) {
            println!("{line}");
        }
    }
    exit(0)
}

async fn list(client: &CuratorClient, base: &str) -> zk_curator::Result<Vec<Service>> {
    let discovery = ServiceDiscovery::<serde_json::Value>::builder(client, base).build()?;
    let mut services = Vec::new();
    for name in discovery.query_for_names().await? {
        let mut service = Service { name, instances: Vec::new(), unparsable: Vec::new() };
        let mut ids = match client.get_children(&discovery.path_for_name(&service.name)).await {
            Ok(ids) => ids,
            Err(e) if e.code() == Some(ErrorCode::NoNode) => Vec::new(),
            Err(e) => return Err(e),
        };
        ids.sort();
        for id in ids {
            match discovery.query_for_instance(&service.name, &id).await {
                Ok(Some(instance)) => service.instances.push(instance),
                Ok(None) => {}
                Err(e @ zk_curator::Error::MalformedData { .. }) => {
                    let path = discovery.path_for_instance(&service.name, &id);
                    service.unparsable.push((id, path, e.to_string()));
                }
                Err(e) => return Err(e),
            }
        }
        services.push(service);
    }
    Ok(services)
}

fn as_text(services: &[Service]) -> Vec<String> {
    let mut lines = Vec::new();
    for service in services {
        let count = service.instances.len();
        lines.push(format!("{}  ({count} instance{})", service.name, if count == 1 { "" } else { "s" }));
        for instance in &service.instances {
            let mut line = format!("  {}  {}", instance.id(), instance.address().unwrap_or("-"));
            if let Some(port) = instance.port() {
                line.push_str(&format!(":{port}"));
            }
            if let Some(port) = instance.ssl_port() {
                line.push_str(&format!("  ssl:{port}"));
            }
            line.push_str(&format!("  {}", instance.service_type().wire_name()));
            if !instance.is_enabled() {
                line.push_str("  DISABLED");
            }
            if let Some(payload) = instance.payload() {
                line.push_str(&format!("  payload={payload}"));
            }
            lines.push(line);
        }
        for (id, _, why) in &service.unparsable {
            lines.push(format!("  {id}  UNPARSABLE: {why}"));
        }
    }
    lines
}

fn as_json(base: &str, services: &[Service]) -> serde_json::Value {
    let serializer = JsonInstanceSerializer::new();
    let services: Vec<serde_json::Value> = services
        .iter()
        .map(|service| {
            let instances: Vec<serde_json::Value> = service
                .instances
                .iter()
                .map(|instance| {
                    // Curator's own JSON for it: the field names a Java user knows.
                    serializer
                        .serialize(instance)
                        .ok()
                        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
                        .unwrap_or(serde_json::Value::Null)
                })
                .collect();
            let unparsable: Vec<serde_json::Value> = service
                .unparsable
                .iter()
                .map(|(id, path, why)| serde_json::json!({ "id": id, "path": path, "error": why }))
                .collect();
            serde_json::json!({ "name": service.name, "instances": instances, "unparsable": unparsable })
        })
        .collect();
    serde_json::json!({ "base": base, "services": services })
}
