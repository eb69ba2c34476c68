//! SASL DIGEST-MD5 against a real ZooKeeper whose JAAS `Server` section uses `DigestLoginModule`
//! (`TestingServerBuilder::sasl_digest`): the `sasl:<user>` identity locks under ACLs that only it
//! passes, on the first session and on a replacement after a server-side expiry; a wrong password
//! is a prompt typed error naming no secret; the options never show in `Debug`.

use crate::support;

use std::time::{Duration, Instant};

use zk_curator::framework::SaslOptions;
use zk_curator::locks::InterProcessMutex;
use zk_curator::raw as zkc;
use zk_curator::testing::{expire_session, TestingServer};
use zk_curator::{Acl, Id, Permissions};
use zk_curator::{CuratorClient, CuratorClientBuilder, ErrorKind};

/// An upper bound for calls that must fail promptly; only a hang exceeds it.
const PROMPT: Duration = Duration::from_secs(15);

const ALICE_PASSWORD: &str = "alice-pa55-5ecret";
/// With a quote and a backslash: the harness must escape them in the JAAS file.
const BOB_PASSWORD: &str = r#"bob-"pa\55"#;

async fn sasl_server() -> TestingServer {
    support::server_with(
        TestingServer::builder().owned().sasl_digest(&[("alice", ALICE_PASSWORD), ("bob", BOB_PASSWORD)]),
    )
    .await
}

fn alice_acls() -> Vec<Acl> {
    vec![Acl::new(Permissions::ALL, Id::new("sasl", "alice")), Acl::new(Permissions::READ, Id::anyone())]
}

/// `/sasl-…`, created by a client without SASL: writable only by `sasl:alice`, readable by anyone.
async fn alice_only_path(connect: &str, name: &str) -> String {
    let path = format!("/{}", support::unique_path(name).trim_start_matches('/').replace('/', "-"));
    let admin = support::client(connect).await;
    admin.create(&path).with_acl(alice_acls()).await.expect("create the protected path");
    admin.close().await;
    path
}

fn sasl_client(connect: &str, user: &'static str, password: &'static str) -> CuratorClientBuilder {
    CuratorClient::builder(connect)
        .session_timeout(Duration::from_secs(10))
        .sasl(SaslOptions::digest_md5(user, password))
        .acls(alice_acls())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn digest_md5_identity_locks_under_sasl_acls_and_survives_session_expiry() {
    support::init_tracing();
    let server = sasl_server().await;
    let connect = server.connect_string();
    let secure = alice_only_path(&connect, "sasl").await;
    let lock_path = format!("{secure}/report/lock");
    let obs = support::observer(&connect).await;

    let client = sasl_client(&connect, "alice", ALICE_PASSWORD).connect().await.expect("alice connects with SASL");
    let mutex = InterProcessMutex::new(&client, &lock_path).unwrap();
    let guard = mutex.lock().await.expect("alice (sasl:alice) locks under her path");
    // The nodes the recipe made carry the ACL the client's provider asked for.
    for node in [format!("{secure}/report"), lock_path.clone(), guard.node_path().to_string()] {
        let (acls, _) = obs.get_acl(&node).await.unwrap_or_else(|e| panic!("get_acl {node}: {e}"));
        assert_eq!(zkc::acls_from_raw(&acls), alice_acls(), "{node}");
    }
    guard.release().await.unwrap();

    // The ACL really decides: no SASL, and another SASL user, are refused at once.
    let stranger = support::client(&connect).await;
    let bob = sasl_client(&connect, "bob", BOB_PASSWORD).connect().await.expect("bob connects with SASL");
    for (who, other) in [("no SASL", &stranger), ("sasl:bob", &bob)] {
        let started = Instant::now();
        let got = InterProcessMutex::new(other, &format!("{secure}/other/lock")).unwrap().try_lock_for(PROMPT).await;
        let err = got.map(|g| g.is_some()).expect_err(who);
        assert_eq!(err.kind(), ErrorKind::NotAuthorized, "{who}: {err}");
        assert!(started.elapsed() < PROMPT, "{who}: NoAuth took {:?}", started.elapsed());
    }

    // The server expires alice's session; the replacement must run the SASL exchange by itself.
    let first = client.session();
    expire_session(&connect, &client).await.expect("expire alice's session");
    support::eventually(Duration::from_secs(20), "a replacement session", || async {
        client.is_connected() && client.session() != first
    })
    .await;
    // A fresh path: only sasl:alice may create its parents under `secure`.
    let after = InterProcessMutex::new(&client, &format!("{secure}/after-expiry/lock")).unwrap();
    let guard = after
        .try_lock_for(Duration::from_secs(10))
        .await
        .expect("alice locks after the replacement session")
        .expect("alice gets the lock after the replacement session");
    guard.release().await.unwrap();
    mutex.lock().await.expect("alice's first lock after the replacement").release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_sasl_exchange_is_a_prompt_typed_error_naming_no_secret() {
    support::init_tracing();
    let server = sasl_server().await;
    let connect = server.connect_string();
    for (what, user, password) in
        [("a wrong password", "alice", "wrong-pa55-5ecret"), ("an unknown user", "mallory", "mallory-pa55")]
    {
        let started = Instant::now();
        // A connection timeout far above PROMPT: a hang cannot pass as a timely failure.
        let result = sasl_client(&connect, user, password).connection_timeout(Duration::from_secs(60)).connect().await;
        let elapsed = started.elapsed();
        let err = result.map(|_| ()).expect_err(what);
        let text = err.to_string();
        assert_eq!(err.kind(), ErrorKind::NotAuthorized, "{what}: {text}");
        assert!(text.contains("sasl"), "{what}: the error names SASL: {text}");
        for secret in [password, user] {
            assert!(!text.contains(secret), "{what}: {secret:?} leaked: {text}");
            assert!(!format!("{err:?}").contains(secret), "{what}: {secret:?} leaked in Debug: {err:?}");
        }
        assert!(elapsed < PROMPT, "{what}: the refusal took {elapsed:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_options_never_show_in_debug() {
    support::init_tracing();
    let server = sasl_server().await;
    let connect = server.connect_string();
    // bob: a user no ACL of `sasl_client` names, so any "bob" in the text comes from the options.
    let builder = sasl_client(&connect, "bob", BOB_PASSWORD);
    let shown = format!("{builder:?}");
    assert!(!shown.contains(BOB_PASSWORD), "the builder's Debug shows the password: {shown}");
    assert!(!shown.contains("bob"), "the builder's Debug shows the user: {shown}");
    assert!(shown.contains("SaslOptions(<redacted>)"), "the builder's Debug says SASL is set: {shown}");
    let client = builder.connect().await.expect("bob connects with SASL");
    let shown = format!("{client:?}");
    assert!(!shown.contains("bob"), "the client's Debug shows the user or password: {shown}");
    // The harness's own builder shows user names only.
    let harness = format!("{:?}", TestingServer::builder().sasl_digest(&[("alice", ALICE_PASSWORD)]));
    assert!(!harness.contains(ALICE_PASSWORD), "the harness builder's Debug shows the password: {harness}");
}
