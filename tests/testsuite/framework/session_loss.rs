//! When a suspended session is given up (`LOST`): the builder's
//! `simulated_session_expiration_percent`, validated, and honoured on a blackholed link.

use crate::support;

use std::time::Duration;

use zk_curator::testing::{FaultProxy, ProxyMode};
use zk_curator::{ConnectionState, CuratorClient, Error, ErrorKind, RetryNTimes};

const WITHIN: Duration = Duration::from_secs(20);

async fn client_through(proxy: &FaultProxy, percent: Option<f64>) -> CuratorClient {
    let mut builder = CuratorClient::builder(&proxy.connect_string())
        .session_timeout(Duration::from_secs(4))
        .connection_timeout(Duration::from_secs(1))
        .retry_policy(RetryNTimes::new(3, Duration::from_millis(100)));
    if let Some(percent) = percent {
        builder = builder.simulated_session_expiration_percent(percent);
    }
    builder.connect().await.expect("connect")
}

/// A client with a smaller percentage gives a blackholed session up first, even when its link
/// was cut after the other's: the default client (85%) is cut first and reports `Suspended`,
/// then the 30% client is cut — and reports `Lost` while the default one is still only
/// suspended. (Were the percentage ignored, the client cut first, whose last reply came first,
/// would be `Lost` first.) The 4 s session leaves about 1.3 s between the two.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_smaller_simulated_expiration_percent_gives_a_cut_off_session_up_first() {
    support::init_tracing();
    let server = support::server().await;
    let patient_link = FaultProxy::start(&server.connect_string()).await.expect("proxy");
    let eager_link = FaultProxy::start(&server.connect_string()).await.expect("proxy");
    let patient = client_through(&patient_link, None).await;
    let eager = client_through(&eager_link, Some(30.0)).await;

    patient_link.set_mode(ProxyMode::Blackhole);
    support::eventually(WITHIN, "the default client notices the blackhole", || async {
        patient.connection_state() == ConnectionState::Suspended
    })
    .await;
    eager_link.set_mode(ProxyMode::Blackhole);
    support::eventually(WITHIN, "the 30% client gives its session up", || async {
        eager.connection_state() == ConnectionState::Lost
    })
    .await;
    assert_eq!(
        patient.connection_state(),
        ConnectionState::Suspended,
        "the default client, cut off first, is still only suspended"
    );
    support::eventually(WITHIN, "the default client gives its session up too", || async {
        patient.connection_state() == ConnectionState::Lost
    })
    .await;

    patient_link.set_mode(ProxyMode::Pass);
    eager_link.set_mode(ProxyMode::Pass);
    for client in [&patient, &eager] {
        support::eventually(WITHIN, "a new session", || async { client.is_connected() }).await;
    }
    patient.close().await;
    eager.close().await;
}

/// A percentage that is not above 0 and at most 100 (NaN included) is refused before anything is
/// sent, with an error naming the setting and the value; 100 (Curator's default) is accepted.
#[tokio::test]
async fn an_absurd_simulated_expiration_percent_is_refused_naming_it() {
    for bad in [0.0, -5.0, 100.5, 250.0, f64::NAN, f64::INFINITY] {
        let builder = CuratorClient::builder("127.0.0.1:1").simulated_session_expiration_percent(bad);
        let err = builder.start().map(|_| ()).expect_err("an absurd percentage");
        assert!(matches!(err, Error::InvalidArgument { .. }) && err.kind() == ErrorKind::BadArgument, "{err:?}");
        let text = err.to_string();
        assert!(text.contains("simulated_session_expiration_percent") && text.contains(&bad.to_string()), "{text}");
    }
    let server = support::server().await;
    let client = CuratorClient::builder(&server.connect_string())
        .simulated_session_expiration_percent(100)
        .connect()
        .await
        .expect("100% is Curator's default");
    client.close().await;
}
