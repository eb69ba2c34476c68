//! A claim whose session the client gave up (LOST, while suspended) and whose link healed before
//! the server could expire that session: its `complete` is refused and records nothing — also a
//! `complete` that was waiting for a connection when the session was given up — and a lost claim
//! its holder keeps does not keep the key from a retry once the server could have expired the
//! session.

use std::time::Duration;

use zk_curator::idempotency::{IdempotencyClaim, IdempotencyKeys};
use zk_curator::locks::HoldState;
use zk_curator::testing::{FaultProxy, ProxyMode};
use zk_curator::{CuratorClient, Error};

use super::{keys, kind, started};
use crate::support::{self, observer};

/// A bound against a hang, and the time a given-up session may take to end on the server (its
/// 8 s timeout, with room to spare).
const WITHIN: Duration = Duration::from_secs(30);

/// A claim of `key` on a given-up-early client behind a proxy, and a direct client's keys on the
/// same base.
struct Setup {
    _server: zk_curator::testing::TestingServer,
    proxy: FaultProxy,
    client: CuratorClient,
    claim: IdempotencyClaim,
    theirs: IdempotencyKeys,
    connect: String,
}

async fn claimed(name: &str, key: &str) -> Setup {
    let server = support::server().await;
    let connect = server.connect_string();
    let proxy = FaultProxy::start(&connect).await.expect("proxy");
    let client = support::client_given_up_early(&proxy.connect_string()).await;
    let ours = keys(&client, name);
    let claim = started(ours.begin(key).await.expect("begin"), "a free key");
    let other = support::client(&connect).await;
    let theirs = IdempotencyKeys::new(&other, ours.base(), ours.retention()).expect("keys");
    Setup { _server: server, proxy, client, claim, theirs, connect }
}

/// Waits until `changes` yields `Lost` (hang-guarded).
async fn lost(changes: &mut zk_curator::locks::HoldStateStream) {
    let seen = tokio::time::timeout(WITHIN, async {
        while let Some(state) = changes.next().await {
            if state == HoldState::Lost {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(seen, Ok(true), "the claim is not told Lost within {WITHIN:?}");
}

/// The key's node is never an outcome, and is gone (the given-up session ended on the server)
/// within [`WITHIN`]: nothing was recorded on the session its holder was told is gone.
async fn nothing_recorded(connect: &str, path: &str) {
    let zk = observer(connect).await;
    support::eventually(WITHIN, "the given-up session's claim gone from the key", || async {
        match support::stat(&zk, path).await {
            Some(stat) => {
                assert_ne!(stat.ephemeral_owner, 0, "an outcome was recorded at {path}");
                false
            }
            None => true,
        }
    })
    .await;
}

/// The link heals right after the client gave the claim's session up: the old session reaches
/// the server again. Its holder was told the claim is `Lost`, so its outcome must not be recorded
/// on that session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_complete_after_the_claim_was_lost_is_refused_though_its_old_session_came_back() {
    let Setup { _server, proxy, client, claim, theirs, connect } = claimed("idem-given-up-complete", "req").await;
    let path = claim.path().to_string();
    let mut changes = claim.state_changes();

    support::cut_off(&proxy, &client).await;
    lost(&mut changes).await;
    proxy.set_mode(ProxyMode::Pass);
    // Time for the old session's handle, if anything still has one, to reach the server again.
    assert!(client.block_until_connected(WITHIN).await.unwrap(), "reconnects");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(claim.state(), HoldState::Lost);
    match claim.complete(b"from-lost".to_vec()).await {
        Err(Error::LockLost { node, .. }) => assert_eq!(node, path, "the error names the key's node"),
        other => panic!("the complete of a claim its holder was told is lost: {other:?}"),
    }

    nothing_recorded(&connect, &path).await;
    let retry = started(theirs.begin("req").await.expect("begin"), "a retry once the key is free");
    retry.complete(b"from-retry".to_vec()).await.expect("the retry records its outcome");
    assert_eq!(kind(&theirs.begin("req").await.expect("begin")), "done:from-retry");
}

/// The complete starts while the link is cut (`Suspended`: not refused yet) and waits for a
/// connection; the client gives the session up meanwhile and the link heals at once. The commit
/// must not go out on the old session once that reconnects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_complete_waiting_for_a_connection_is_refused_once_the_session_is_given_up_though_the_old_session_comes_back()
{
    let Setup { _server, proxy, client, claim, theirs, connect } = claimed("idem-given-up-waiting", "req").await;
    let path = claim.path().to_string();
    let mut changes = claim.state_changes();

    support::cut_off(&proxy, &client).await;
    let complete = support::spawn(claim.complete(b"from-lost".to_vec()));
    lost(&mut changes).await;
    proxy.set_mode(ProxyMode::Pass);
    let completed = support::join("the complete", WITHIN, complete).await;
    assert!(
        matches!(completed, Err(Error::LockLost { .. })),
        "the complete of a claim its holder was told is lost: {completed:?}"
    );

    nothing_recorded(&connect, &path).await;
    let retry = started(theirs.begin("req").await.expect("begin"), "a retry once the key is free");
    retry.complete(b"from-retry".to_vec()).await.expect("the retry records its outcome");
    assert_eq!(kind(&theirs.begin("req").await.expect("begin")), "done:from-retry");
}

/// The holder keeps a lost claim (its work does not watch the claim's state) after the link
/// healed, so the old session could reach the server again: the key is still free for a retry
/// once the server could have expired that session, as a lost lock's node is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_claim_held_on_to_does_not_keep_its_key_from_a_retry() {
    let Setup { _server, proxy, client, claim, theirs, connect } = claimed("idem-given-up-kept", "req").await;
    let path = claim.path().to_string();
    let mut changes = claim.state_changes();

    support::cut_off(&proxy, &client).await;
    lost(&mut changes).await;
    proxy.set_mode(ProxyMode::Pass);
    let zk = observer(&connect).await;
    support::eventually(WITHIN, "the key free while the lost claim is kept", || async {
        !support::exists(&zk, &path).await
    })
    .await;
    let retry = started(theirs.begin("req").await.expect("begin"), "a retry while the lost claim is kept");

    assert_eq!(claim.state(), HoldState::Lost);
    assert!(matches!(claim.complete(b"from-lost".to_vec()).await, Err(Error::LockLost { .. })));
    assert_eq!(kind(&theirs.begin("req").await.expect("begin")), "in-progress", "the retry's claim is untouched");
    retry.complete(b"from-retry".to_vec()).await.expect("the retry records its outcome");
    assert_eq!(kind(&theirs.begin("req").await.expect("begin")), "done:from-retry");
}
