//! Registrations and caches through faults: an update made while cut off is written once the link
//! heals; after a provider's session expiry and a server restart, its instance is back and a
//! consumer's cache converges to the registry; a live provider's instance is never missing for
//! longer than the session timeout plus one retry across cuts and blackholes; `zk-curator
//! register` ends its command and exits 75 when its session is lost.

use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_curator::discovery::ServiceDiscovery;
use zk_curator::testing::{FaultProxy, ProxyMode};

use super::registration::{instance, Details};
use super::WITHIN;
use crate::support;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_made_while_cut_off_is_written_once_the_link_heals() {
    let server = support::server().await;
    let proxy = FaultProxy::start(&server.connect_string()).await.unwrap();
    let client = support::riding_client(&proxy.connect_string()).await;
    let observer = support::client(&server.connect_string()).await;
    let base = support::unique_path("discovery-cut");
    let discovery = ServiceDiscovery::<Details>::builder(&client, &base).build().unwrap();
    let reader = ServiceDiscovery::<Details>::builder(&observer, &base).build().unwrap();
    let me = instance("api", "me", 1);
    discovery.register(&me).await.unwrap();

    support::cut_off(&proxy, &client).await;
    let moved = me.to_builder().port(2).build().unwrap();
    discovery.update(&moved).unwrap();
    // Within the cut (shorter than the session): the server still has the old data.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(reader.query_for_instance("api", "me").await.unwrap(), Some(me));
    proxy.set_mode(ProxyMode::Pass);
    support::eventually(WITHIN, "the update made while cut off is written", || async {
        reader.query_for_instance("api", "me").await.unwrap().as_ref() == Some(&moved)
    })
    .await;
    discovery.close().await.unwrap();
    assert!(reader.query_for_instances("api").await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_an_expiry_and_a_server_restart_the_instance_is_back_and_the_consumers_cache_converges() {
    // Owned: the test restarts its server.
    let mut server = support::owned_server().await;
    let connect = server.connect_string();
    let provider_client = support::client_with(&connect, Duration::from_secs(4)).await;
    let consumer_client = support::client_with(&connect, Duration::from_secs(4)).await;
    let base = support::unique_path("discovery-faults");
    let provider = ServiceDiscovery::<Details>::builder(&provider_client, &base).build().unwrap();
    let consumer = ServiceDiscovery::<Details>::builder(&consumer_client, &base).build().unwrap();
    let cache = consumer.service_cache("api").unwrap();
    assert!(cache.wait_initialized_timeout(WITHIN).await.unwrap());
    let (a, b) = (instance("api", "a", 1), instance("api", "b", 2));
    provider.register(&a).await.unwrap();
    provider.register(&b).await.unwrap();
    let holds = |ids: &'static [&'static str]| {
        let cache = cache.clone();
        move || {
            let cache = cache.clone();
            async move { cache.instances().iter().map(|i| i.id().to_string()).collect::<Vec<_>>() == ids }
        }
    };
    support::eventually(WITHIN, "the consumer sees both", holds(&["a", "b"])).await;

    zk_curator::testing::expire_session(&connect, &provider_client).await.unwrap();
    let moved = b.to_builder().port(22).build().unwrap();
    provider.update(&moved).unwrap();
    support::eventually(WITHIN, "both back after the provider's expiry, b updated", || async {
        let all = cache.instances();
        all.len() == 2 && all[1].port() == Some(22)
    })
    .await;

    server.restart().await.unwrap();
    provider.unregister(&a).await.unwrap();
    support::eventually(WITHIN, "the cache converges after the restart", holds(&["b"])).await;
    assert_eq!(consumer.query_for_instances("api").await.unwrap(), vec![moved]);
    provider.close().await.unwrap();
    support::eventually(WITHIN, "the cache empties once the provider closed", holds(&[])).await;
}

/// The absences of `path` seen by polling the server directly, until `stop` is set: each
/// (gone, back) instant (`back` None while still gone).
fn watch_absences(
    observer: zookeeper_client::Client,
    path: String,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> tokio::task::JoinHandle<Vec<(Instant, Option<Instant>)>> {
    crate::support::spawn(async move {
        let mut absences: Vec<(Instant, Option<Instant>)> = Vec::new();
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let present = observer.check_stat(&path).await.expect("the observer reads").is_some();
            let now = Instant::now();
            match absences.last_mut() {
                Some((_, back @ None)) if present => *back = Some(now),
                Some((_, None)) => {}
                _ if !present => absences.push((now, None)),
                _ => {}
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        absences
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_providers_instance_is_never_missing_longer_than_the_session_timeout_plus_a_retry() {
    let server = support::server().await;
    let proxy = FaultProxy::start(&server.connect_string()).await.unwrap();
    let session_timeout = Duration::from_secs(2);
    let retry = Duration::from_millis(100);
    let client = zk_curator::CuratorClient::builder(&proxy.connect_string())
        .session_timeout(session_timeout)
        .connection_timeout(Duration::from_secs(1))
        .retry_policy(zk_curator::RetryNTimes::new(1000, retry))
        .connect()
        .await
        .unwrap();
    let base = support::unique_path("discovery-never-missing");
    let discovery = ServiceDiscovery::<Details>::builder(&client, &base).build().unwrap();
    let me = instance("api", "me", 1);
    discovery.register(&me).await.unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let path = discovery.path_for_instance("api", "me");
    let absences = watch_absences(support::observer(&server.connect_string()).await, path.clone(), stop.clone());

    // A cut shorter than the session: the session lives, so the node must never go.
    let first_session = client.session_id();
    support::cut_off(&proxy, &client).await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    proxy.set_mode(ProxyMode::Pass);
    support::eventually(WITHIN, "reconnected after the cut", || async {
        client.connection_state() == zk_curator::ConnectionState::Reconnected
            || client.connection_state() == zk_curator::ConnectionState::Connected
    })
    .await;
    // On a stalled machine the reconnection can take longer than the client waits before it gives
    // a suspended session up (LOST): then the cut was not shorter than the session after all, and
    // its node is replaced on the new session.
    let cut_kept_the_session = client.session_id() == first_session;
    let blackholed = Instant::now();
    // A blackhole past the session timeout: the server expires the session (the node goes with
    // it); once the link heals the registration is made again on a new session.
    proxy.set_mode(ProxyMode::Blackhole);
    tokio::time::sleep(session_timeout + Duration::from_secs(1)).await;
    proxy.set_mode(ProxyMode::Pass);
    let healed = Instant::now();
    let observer = support::observer(&server.connect_string()).await;
    support::eventually(WITHIN, "the instance is back after the blackhole", || async {
        observer.check_stat(&path).await.unwrap().is_some()
    })
    .await;
    // A second cut, on the new session.
    support::cut_off(&proxy, &client).await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    proxy.set_mode(ProxyMode::Pass);
    support::eventually(WITHIN, "the instance is there after the second cut", || async {
        observer.check_stat(&path).await.unwrap().is_some()
    })
    .await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let absences = absences.await.unwrap();

    let bound = session_timeout + retry;
    assert!(!absences.is_empty(), "the blackhole past the session must have expired it");
    for (gone, back) in &absences {
        let back = back.expect("back before the observer stopped");
        assert!(
            *gone >= blackholed || !cut_kept_the_session,
            "the instance went during a cut its session outlived ({absences:?})"
        );
        // Missing while the link was dead counts from the heal: the process could not reach the
        // server before (the bound is for a live process that can).
        let missing = back.duration_since((*gone).max(healed));
        assert!(missing <= bound, "missing {missing:?} after the link healed, more than {bound:?}");
        // And in all: at most the part of the blackhole past the session, plus the bound.
        let blackhole_past_session = healed.duration_since(blackholed).saturating_sub(session_timeout);
        assert!(
            back.duration_since(*gone) <= blackhole_past_session + bound,
            "missing {:?} in all, more than {:?} + {bound:?}",
            back.duration_since(*gone),
            blackhole_past_session
        );
    }
    discovery.close().await.unwrap();
}

/// `zk-curator register` when its session is lost (the link blackholed past the session
/// timeout): its command gets SIGTERM and it exits 75, as documented (`lock`'s pattern).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn register_ends_its_command_and_exits_75_when_its_session_is_lost() {
    const BIN: &str = env!("CARGO_BIN_EXE_zk-curator");
    let server = support::server().await;
    let proxy = FaultProxy::start(&server.connect_string()).await.unwrap();
    let base = support::unique_path("discovery-register-lost");
    let dir = tempfile::tempdir().unwrap();
    let (pid_file, term_file) = (dir.path().join("pid"), dir.path().join("term"));
    let script = format!(
        "trap 'echo term > {}; exit 0' TERM; echo $$ > {}; while :; do sleep 0.05; done",
        term_file.display(),
        pid_file.display()
    );
    let mut register = tokio::process::Command::new(BIN)
        .args(["--connect", &proxy.connect_string(), "--session-timeout", "2", "register", "api", "--base", &base])
        .args(["--port", "9000", "--id", "lost", "--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let observer = support::observer(&server.connect_string()).await;
    let path = format!("{base}/api/lost");
    support::eventually(WITHIN, "registered and running", || async {
        pid_file.exists() && observer.check_stat(&path).await.unwrap().is_some()
    })
    .await;

    proxy.set_mode(ProxyMode::Blackhole);
    let ended = tokio::time::timeout(WITHIN, register.wait()).await.expect("register ends on a lost session").unwrap();
    let mut stderr = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut register.stderr.take().unwrap(), &mut stderr).await.unwrap();
    assert_eq!(ended.code(), Some(75), "{stderr}");
    assert!(stderr.contains("session"), "says why: {stderr}");
    assert!(term_file.exists(), "the command was sent SIGTERM");
    proxy.set_mode(ProxyMode::Pass);
    support::eventually(WITHIN, "the lost instance is gone from the server", || async {
        observer.check_stat(&path).await.unwrap().is_none()
    })
    .await;
}
