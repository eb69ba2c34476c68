//! The runnable programs in `recipes/` (the README's demo among them) work end to end: each is run
//! as its own process against the test's server, with the arguments CI has always given it, and
//! each checks its own claims (no ticket sold twice, never two leaders, every item completed once,
//! ...) and exits non-zero if one fails. `cargo test` and `cargo nextest` build these programs
//! with the tests; here they share the run's server instead of starting a JVM each.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support;

/// The built program `name` (cargo puts examples next to the test binaries' `deps` directory).
fn program(name: &str) -> PathBuf {
    let test_binary = std::env::current_exe().expect("the test binary's path");
    let profile_dir = test_binary.parent().and_then(|deps| deps.parent()).expect("a cargo target directory");
    let path = profile_dir.join("examples").join(name);
    assert!(
        path.is_file(),
        "{} is not built: build the recipe programs with `cargo build --all-features --examples`",
        path.display()
    );
    path
}

/// Runs `recipes/<name>.rs` with `args` against a server of this test's; fails with the
/// program's output unless it exits successfully within `limit` (a hang bound).
async fn run_program(name: &str, args: &[&str], limit: Duration) {
    let server = support::server().await;
    let mut command = Command::new(program(name));
    command
        .args(args)
        .env("ZK_CONNECT", server.connect_string())
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = tokio::process::Command::from(command).kill_on_drop(true).spawn().expect("start the program");
    let output = match tokio::time::timeout(limit, child.wait_with_output()).await {
        Ok(output) => output.expect("wait for the program"),
        Err(_) => panic!("{name} {args:?} did not finish within {limit:?}"),
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{name} {args:?} failed ({}):\n{stdout}\n{stderr}", output.status);
    drop(server);
}

#[tokio::test]
async fn ticket_sale_never_oversells() {
    run_program("ticket_sale", &["--tickets", "20", "--workers", "3"], Duration::from_secs(120)).await;
}

#[tokio::test]
async fn fenced_write_refuses_the_stale_holder() {
    run_program("fenced_write", &[], Duration::from_secs(120)).await;
}

#[tokio::test]
async fn config_reload_readers_never_see_a_half_written_config() {
    run_program("config_reload", &["--readers", "3", "--reloads", "4"], Duration::from_secs(120)).await;
}

#[tokio::test]
async fn job_throttle_never_runs_more_jobs_than_the_limit() {
    run_program("job_throttle", &["--workers", "4", "--limit", "2"], Duration::from_secs(120)).await;
}

#[tokio::test]
async fn leader_service_never_has_two_active_workers() {
    run_program("leader_service", &[], Duration::from_secs(180)).await;
}

#[tokio::test]
async fn idempotent_endpoint_executes_each_key_once() {
    run_program("idempotent_endpoint", &[], Duration::from_secs(120)).await;
}

#[tokio::test]
async fn work_claims_completes_every_item_once_despite_a_killed_worker() {
    run_program("work_claims", &["--workers", "4", "--items", "300", "--batch", "25"], Duration::from_secs(180)).await;
}

#[tokio::test]
async fn queue_workers_process_every_item_once_despite_a_killed_consumer() {
    run_program("queue_workers", &["--producers", "2", "--consumers", "3", "--items", "400"], Duration::from_secs(180))
        .await;
}

#[tokio::test]
async fn service_discovery_calls_only_live_providers_while_providers_are_killed() {
    run_program("service_discovery", &["--providers", "4", "--kills", "2"], Duration::from_secs(120)).await;
}
