//! A claim's life: bad keys refused with a typed error, abandon and drop free the key, an
//! oversized result is refused, and cancelled begins and completes leave nothing behind.

use std::time::Duration;

use zk_curator::idempotency::{IdempotencyKeys, Retention, MAX_IDEMPOTENCY_KEY_LEN};
use zk_curator::{Error, ErrorKind};

use super::{keys, kind, started};
use crate::support::{self, eventually, observer, server_and_clients};

#[tokio::test]
async fn bad_keys_are_refused_with_a_typed_error_naming_the_key_and_nothing_is_created() {
    let (server, clients) = server_and_clients(1).await;
    let keys = keys(&clients[0], "idem-bad");
    let long = "k".repeat(MAX_IDEMPOTENCY_KEY_LEN + 1);
    for bad in ["", "a/b", "/", ".", "..", long.as_str()] {
        match keys.begin(bad).await {
            Err(Error::InvalidArgument { name, value, .. }) => {
                assert_eq!(name, "key");
                assert!(value.contains(&format!("{} bytes", bad.len())), "the value is named: {value}");
            }
            other => panic!("key {bad:?}: expected InvalidArgument, got {other:?}"),
        }
        assert!(matches!(
            keys.wait_done_timeout(bad, Duration::from_millis(10)).await,
            Err(Error::InvalidArgument { .. })
        ));
    }
    // A character ZooKeeper refuses in a name: the path error.
    assert!(matches!(keys.begin("a\u{0}b").await, Err(Error::InvalidPath { .. })));
    assert!(!support::exists(&observer(&server.connect_string()).await, keys.base()).await, "nothing was created");
    // The longest key is fine.
    let max = "k".repeat(MAX_IDEMPOTENCY_KEY_LEN);
    started(keys.begin(&max).await.expect("the longest key"), "longest key").abandon().await.expect("abandon");
    // And the base and retention are checked up front.
    assert!(matches!(
        IdempotencyKeys::new(&clients[0], "/x", Retention::Ttl(Duration::ZERO)),
        Err(Error::InvalidArgument { name: "retention", .. })
    ));
    assert!(matches!(
        IdempotencyKeys::new(&clients[0], "no-slash", Retention::Sweep(Duration::from_secs(1))),
        Err(Error::InvalidPath { .. })
    ));
}

#[tokio::test]
async fn abandoning_or_dropping_a_claim_frees_the_key() {
    let (server, clients) = server_and_clients(1).await;
    let keys = keys(&clients[0], "idem-abandon");
    let zk = observer(&server.connect_string()).await;
    let claim = started(keys.begin("a").await.expect("begin"), "a");
    let path = claim.path().to_string();
    claim.abandon().await.expect("abandon");
    assert!(!support::exists(&zk, &path).await, "abandon deleted the claim");
    started(keys.begin("a").await.expect("begin again"), "a again").abandon().await.expect("abandon");
    // Dropped, in a task whose runtime is gone by the time the delete runs: still freed.
    let claim = started(keys.begin("b").await.expect("begin"), "b");
    let path = claim.path().to_string();
    std::thread::spawn(move || drop(claim)).join().expect("dropping a claim on a thread without a runtime");
    eventually(Duration::from_secs(10), "the dropped claim is deleted", || async {
        !support::exists(&zk, &path).await
    })
    .await;
    assert_eq!(super::kind(&keys.begin("b").await.expect("begin")), "started");
}

#[tokio::test]
async fn an_oversized_result_is_refused_with_a_typed_error_and_the_key_is_freed() {
    let (server, clients) = server_and_clients(1).await;
    let keys = keys(&clients[0], "idem-big");
    let claim = started(keys.begin("big").await.expect("begin"), "big");
    let path = claim.path().to_string();
    let too_big = vec![b'x'; clients[0].max_data_size()];
    match claim.complete(too_big).await {
        Err(Error::InvalidArgument { name: "result", value, .. }) => assert!(value.contains(&path), "{value}"),
        other => panic!("expected InvalidArgument naming result, got {other:?}"),
    }
    let zk = observer(&server.connect_string()).await;
    eventually(Duration::from_secs(10), "the refused claim is abandoned", || async {
        !support::exists(&zk, &path).await
    })
    .await;
}

#[tokio::test]
async fn cancelled_begins_and_completes_leave_no_claim_behind() {
    let (server, clients) = server_and_clients(1).await;
    let keys = keys(&clients[0], "idem-cancel");
    let zk = observer(&server.connect_string()).await;
    // Warm up the base path, so that the cancellations land around the claim's create.
    started(keys.begin("warm").await.expect("begin"), "warm").abandon().await.expect("abandon");
    for i in 0..40u64 {
        let key = format!("k{i}");
        let cut = Duration::from_micros(50 * i);
        let _ = tokio::time::timeout(cut, keys.begin(&key)).await;
        // Cancelled completes: the outcome is recorded or not, and no claim stays.
        if let Ok(Ok(zk_curator::idempotency::Begin::Started(claim))) =
            tokio::time::timeout(Duration::from_secs(10), keys.begin(&format!("c{i}"))).await
        {
            let _ = tokio::time::timeout(cut, claim.complete(b"done".to_vec())).await;
        }
    }
    // A timed begin past its deadline: DeadlineExceeded, nothing held.
    let timed = keys.begin_within("timed", Duration::ZERO).await;
    assert!(timed.as_ref().is_err_and(|e| e.kind() == ErrorKind::DeadlineExceeded), "{:?}", timed.map(|b| kind(&b)));
    let claim = started(keys.begin("timed-complete").await.expect("begin"), "timed-complete");
    let timed = claim.complete_within(b"late".to_vec(), Duration::ZERO).await;
    assert!(timed.as_ref().is_err_and(|e| e.kind() == ErrorKind::DeadlineExceeded), "{timed:?}");
    let base = keys.base().to_string();
    eventually(Duration::from_secs(20), "no claim outlives its cancelled call", || async {
        for child in support::sorted_children(&zk, &base).await {
            let stat = support::stat(&zk, &format!("{base}/{child}")).await;
            if stat.is_some_and(|s| s.ephemeral_owner != 0) {
                return false;
            }
        }
        true
    })
    .await;
    assert_eq!(kind(&keys.begin("timed").await.expect("begin")), "started", "a timed-out begin holds nothing");
    assert_eq!(
        kind(&keys.begin("timed-complete").await.expect("begin")),
        "started",
        "a timed-out complete records nothing"
    );
    // Every key is free or done: a retry never sees a stale claim.
    for i in 0..40u64 {
        for key in [format!("k{i}"), format!("c{i}")] {
            let begun = keys.begin(&key).await.expect("begin");
            let k = kind(&begun);
            assert!(k == "started" || k == "done:done", "{key}: {k}");
            if let zk_curator::idempotency::Begin::Started(claim) = begun {
                claim.abandon().await.expect("abandon");
            }
        }
    }
}
