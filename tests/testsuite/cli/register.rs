//! `zk-curator register NAME --port P -- COMMAND` and `zk-curator services [BASE]` as real
//! processes: the instance is registered exactly while COMMAND runs, in Curator's layout and JSON
//! (real Curator's ServiceDiscovery finds it), and a `kill -9`'d `register` leaves the registry
//! within the session timeout.

use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::Command;
use zk_curator::discovery::ServiceDiscovery;

use crate::support;
use crate::support::curator_peer::CuratorPeer;

const BIN: &str = env!("CARGO_BIN_EXE_zk-curator");
/// Hang guard of one wait.
const HANG: Duration = Duration::from_secs(30);

async fn services(connect: &str, base: &str, json: bool) -> String {
    let mut cmd = Command::new(BIN);
    cmd.args(["--connect", connect, "services", base]);
    if json {
        cmd.arg("--json");
    }
    let out = tokio::time::timeout(HANG, cmd.output()).await.expect("services hung").expect("run services");
    assert!(out.status.success(), "services: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn register_keeps_the_instance_exactly_while_the_command_runs_and_curator_and_services_see_it() {
    let server = support::server().await;
    let connect = server.connect_string();
    let base = support::unique_path("cli-register");
    let dir = tempfile::tempdir().unwrap();
    let stop = dir.path().join("stop");
    let env_file = dir.path().join("env");
    // Runs until told, then exits 7; writes what it was given in its environment.
    let script = format!(
        "echo \"$ZK_SERVICE_NAME $ZK_SERVICE_ID $ZK_SERVICE_NODE\" > {env}; while [ ! -e {stop} ]; do sleep 0.05; done; exit 7",
        env = env_file.display(),
        stop = stop.display()
    );
    let node = format!("{base}/api/cli-1");
    let obs = support::observer(&connect).await;
    // A long session: the instance must go because `register` unregisters it, not with the session.
    let mut child = Command::new(BIN)
        .args(["--connect", &connect, "--session-timeout", "30", "register", "api", "--base", &base])
        .args(["--port", "8080", "--address", "10.1.2.3", "--id", "cli-1", "--payload", r#"{"region":"eu"}"#])
        .arg("--")
        .args(["sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // The shell creates the file before it writes the line: wait for the whole line.
    support::eventually(HANG, "the command runs", || async {
        std::fs::read_to_string(&env_file).is_ok_and(|written| written.ends_with('\n'))
    })
    .await;
    assert!(obs.check_stat(&node).await.unwrap().is_some(), "registered before the command runs");
    let env = std::fs::read_to_string(&env_file).unwrap();
    assert_eq!(env.trim(), format!("api cli-1 {node}"));

    // Real Curator's ServiceDiscovery reads it.
    let mut peer = CuratorPeer::start(&connect).await;
    let listed = peer.cmd(&format!("dlist {base} api")).await;
    assert!(listed.starts_with("INSTANCES cli-1|"), "{listed}");
    assert!(listed.contains("10.1.2.3") && listed.contains("8080"), "{listed}");
    // Ours reads the payload.
    let client = support::client(&connect).await;
    let ours = ServiceDiscovery::<serde_json::Value>::builder(&client, &base).build().unwrap();
    let found = ours.query_for_instance("api", "cli-1").await.unwrap().expect("the instance");
    assert_eq!(found.payload(), Some(&serde_json::json!({"region": "eu"})));

    // `services`: text and JSON (Curator's field names).
    let text = services(&connect, &base, false).await;
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "api  (1 instance)", "{text}");
    assert!(lines[1].starts_with("  cli-1  10.1.2.3:8080  DYNAMIC"), "{text}");
    let json: serde_json::Value = serde_json::from_str(&services(&connect, &base, true).await).unwrap();
    let instance = &json["services"][0]["instances"][0];
    assert_eq!(json["services"][0]["name"], "api");
    assert_eq!((instance["id"].as_str(), instance["port"].as_u64()), (Some("cli-1"), Some(8080)));
    assert_eq!(instance["serviceType"], "DYNAMIC");
    // A malformed instance written by someone else is listed as such.
    obs.create(
        &format!("{base}/api/broken"),
        b"{not json",
        &zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all()),
    )
    .await
    .unwrap();
    let text = services(&connect, &base, false).await;
    assert!(text.contains("  broken  UNPARSABLE:"), "{text}");
    let json: serde_json::Value = serde_json::from_str(&services(&connect, &base, true).await).unwrap();
    assert_eq!(json["services"][0]["unparsable"][0]["id"], "broken");
    obs.delete(&format!("{base}/api/broken"), None).await.unwrap();

    std::fs::write(&stop, b"").unwrap();
    let status = tokio::time::timeout(HANG, child.wait()).await.expect("register hung").unwrap();
    assert_eq!(status.code(), Some(7), "the command's status");
    assert!(obs.check_stat(&node).await.unwrap().is_none(), "unregistered when the command ended");
    let listed = peer.cmd(&format!("dlist {base} api")).await;
    assert_eq!(listed.trim(), "INSTANCES", "{listed}");
}

/// `kill -9` of `register`: its command is told (PR_SET_PDEATHSIG) and its instance leaves a
/// consumer's `ServiceCache` within the session timeout (the session is the only thing left
/// holding it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_9_d_register_leaves_a_consumers_cache_within_the_session_timeout() {
    let server = support::server().await;
    let connect = server.connect_string();
    let base = support::unique_path("cli-register-kill");
    let session_timeout = Duration::from_secs(2);
    let client = support::client(&connect).await;
    let consumer = ServiceDiscovery::<serde_json::Value>::builder(&client, &base).build().unwrap();
    let cache = consumer.service_cache("api").unwrap();
    assert!(cache.wait_initialized_timeout(HANG).await.unwrap());
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    // Written aside and renamed: the file appears whole (a reader could see it created empty).
    let script = format!("echo $$ > {0}.new && mv {0}.new {0}; exec sleep 60", pid_file.display());
    let mut child = Command::new(BIN)
        .args(["--connect", &connect, "--session-timeout", "2", "register", "api", "--base", &base])
        .args(["--port", "9000", "--id", "victim", "--"])
        .args(["sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    support::eventually(HANG, "the consumer sees the instance", || async {
        cache.instances().iter().any(|i| i.id() == "victim")
    })
    .await;
    support::eventually(HANG, "the command runs", || async { pid_file.exists() }).await;
    let command_pid: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();

    // SAFETY: kill(2) on a child we own.
    assert_eq!(unsafe { libc::kill(child.id().unwrap() as i32, libc::SIGKILL) }, 0);
    child.wait().await.unwrap();
    let killed = Instant::now();
    // A hang guard well past the bound; the bound itself is asserted below.
    support::eventually(HANG, "the killed instance leaves the consumer's cache", || async {
        !cache.instances().iter().any(|i| i.id() == "victim")
    })
    .await;
    let gone_after = killed.elapsed();
    // The server expires the session within its timeout (plus a tick of its expiry sweep, 200 ms
    // here); the cache sees it one watch + read later. The bound leaves room for a loaded machine
    // and is still far below the command's own end (60 s), the only other way the instance goes.
    assert!(
        gone_after <= session_timeout * 5,
        "gone {gone_after:?} after the kill, session timeout {session_timeout:?}"
    );
    support::eventually(HANG, "the command was told of the kill", || async {
        // SAFETY: kill(2) with signal 0 only checks.
        unsafe { libc::kill(command_pid, 0) != 0 }
    })
    .await;
}
