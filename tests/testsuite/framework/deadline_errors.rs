//! A timed call's `DeadlineExceeded` names the timeout its caller set, whichever inner step (a
//! retry loop, a connection wait, a recipe's own loop) ran into the deadline, and the whole wait.

use std::future::IntoFuture;
use std::time::Duration;

use zk_curator::atomic::DistributedAtomicLong;
use zk_curator::idempotency::{IdempotencyKeys, Retention};
use zk_curator::testing::{FaultProxy, ProxyMode};
use zk_curator::Error;

use crate::support::{self, cut_off, riding_client};

#[tokio::test]
async fn a_timed_calls_deadline_error_names_the_timeout_its_caller_set() {
    let server = support::server().await;
    let proxy = FaultProxy::start(&server.connect_string()).await.expect("proxy");
    let client = riding_client(&proxy.connect_string()).await;
    let path = support::unique_path("deadline-text");
    client.create(&path).creating_parents_if_needed().await.expect("node");
    let counter = DistributedAtomicLong::new(&client, &format!("{path}/counter")).expect("counter");
    let keys = IdempotencyKeys::new(&client, &format!("{path}/keys"), Retention::Sweep(Duration::from_secs(60)))
        .expect("keys");
    // Longer than the connection timeout (1 s): inner steps start late and have a remainder left.
    let timeout = Duration::from_millis(1500);
    let wanted = format!("deadline of {timeout:?} exceeded");

    let timed_counter = counter.timeout(timeout);
    cut_off(&proxy, &client).await;
    let (read, increment, begin) = tokio::join!(
        client.get_data(&path).timeout(timeout).into_future(),
        timed_counter.increment(),
        keys.begin_within("req", timeout),
    );
    proxy.set_mode(ProxyMode::Pass);

    for (call, err) in [("get_data", read.err()), ("increment", increment.err()), ("begin_for", begin.err())] {
        let err = err.unwrap_or_else(|| panic!("{call} succeeded through a cut"));
        assert!(matches!(err, Error::DeadlineExceeded { .. }), "{call}: {err:?}");
        assert!(err.to_string().starts_with(&wanted), "{call}: {err} (wanted: {wanted} ...)");
    }
}
