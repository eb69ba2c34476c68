//! A claim let go of while its link is cut, on a session that is still alive: dropped, its
//! `complete` cancelled, or its `complete_within` timed out while waiting for a connection. Its
//! node must be deleted once the client is connected on that same session again — the release
//! waits out a cut longer than the connection timeout instead of leaving the node to the session —
//! and a timed `complete` still ends at its own deadline.

use std::time::{Duration, Instant};

use zk_curator::idempotency::IdempotencyKeys;
use zk_curator::testing::{FaultProxy, ProxyMode};
use zk_curator::{CuratorClient, ErrorKind};

use super::{keys, started};
use crate::support::{self, cut_off, observer, riding_client};

const HANG: Duration = Duration::from_secs(60);

/// How long the link stays cut once the client noticed: longer than the riding client's 1 s
/// connection timeout (the release's wait for a connection ends twice), well short of the time the
/// client gives its 10 s session up after (the session lives on).
const CUT: Duration = Duration::from_millis(2500);

/// Keys whose base exists already, on a riding client behind a proxy.
async fn setup(name: &str) -> (zk_curator::testing::TestingServer, FaultProxy, CuratorClient, IdempotencyKeys) {
    let server = support::server().await;
    let proxy = FaultProxy::start(&server.connect_string()).await.expect("proxy");
    let client = riding_client(&proxy.connect_string()).await;
    let keys = keys(&client, name);
    started(keys.begin("warm-up").await.expect("begin"), "warm-up").complete(b"w".to_vec()).await.expect("complete");
    (server, proxy, client, keys)
}

/// Heals the link [`CUT`] after `cut_at`, checks the client is back on `session` (so nothing but our release
/// can delete the claims), and waits until none of `paths` exists.
async fn healed_and_released(
    server: &zk_curator::testing::TestingServer,
    proxy: &FaultProxy,
    client: &CuratorClient,
    cut_at: Instant,
    session: i64,
    paths: &[String],
) {
    tokio::time::sleep_until((cut_at + CUT).into()).await;
    proxy.set_mode(ProxyMode::Pass);
    assert!(client.block_until_connected(HANG).await.unwrap(), "reconnects");
    assert_eq!(client.session_id(), session, "the claims' session survived the cut");
    let zk = observer(&server.connect_string()).await;
    for path in paths {
        support::eventually(HANG, "the claim released on its own live session", || async {
            !support::exists(&zk, path).await
        })
        .await;
    }
    assert_eq!(client.session_id(), session, "released while the session lives, not by its end");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_dropped_while_its_link_is_cut_is_deleted_once_the_same_session_reconnects() {
    let (server, proxy, client, keys) = setup("idem-cut-dropped").await;
    let claim = started(keys.begin("req").await.expect("begin"), "a free key");
    let (path, session) = (claim.path().to_string(), claim.session().id);

    cut_off(&proxy, &client).await;
    let cut_at = Instant::now();
    drop(claim);
    healed_and_released(&server, &proxy, &client, cut_at, session, &[path]).await;
    assert!(matches!(keys.begin("req").await.expect("begin"), zk_curator::idempotency::Begin::Started(_)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_complete_cancelled_or_timed_out_while_waiting_for_a_connection_leaves_no_claim_once_the_same_session_reconnects(
) {
    let (server, proxy, client, keys) = setup("idem-cut-complete").await;
    let cancelled = started(keys.begin("cancelled").await.expect("begin"), "a free key");
    let timed = started(keys.begin("timed").await.expect("begin"), "a free key");
    let paths = [cancelled.path().to_string(), timed.path().to_string()];
    let session = cancelled.session().id;

    cut_off(&proxy, &client).await;
    let cut_at = Instant::now();
    let waiting = support::spawn(cancelled.complete(b"never".to_vec()));
    let timeout = Duration::from_millis(1500);
    let started_at = Instant::now();
    let completed = tokio::time::timeout(HANG, timed.complete_within(b"never".to_vec(), timeout))
        .await
        .expect("complete_within hangs");
    let took = started_at.elapsed();
    // Nothing was sent (no connection): not recorded, so a deadline error, not OutcomeUnknown.
    match completed {
        Err(e) => assert_eq!(e.kind(), ErrorKind::DeadlineExceeded, "{e}"),
        Ok(()) => panic!("complete_within recorded an outcome through a cut"),
    }
    // Strict: a margin for scheduling only (the failure guarded against is a wait for the cut).
    assert!(took < timeout + Duration::from_millis(500), "complete_within returned after {took:?}");
    assert!(!waiting.is_finished(), "the complete ended during the cut");
    waiting.abort();
    assert!(waiting.await.unwrap_err().is_cancelled());

    healed_and_released(&server, &proxy, &client, cut_at, session, &paths).await;
}
