//! Secured ensembles against a real ZooKeeper: digest authorization that survives session
//! replacement, prompt typed errors without it, ACL providers, and errors that never show a secret.

use crate::support;

use std::time::{Duration, Instant};

use zk_curator::framework::AclProvider;
use zk_curator::locks::{InterProcessMutex, InterProcessReadWriteLock, InterProcessSemaphoreV2};
use zk_curator::raw as zkc;
use zk_curator::testing::expire_session;
use zk_curator::{Acl, Id, Permissions};
use zk_curator::{CuratorClient, ErrorKind};

/// An upper bound for calls that must fail promptly; only a hang exceeds it.
const PROMPT: Duration = Duration::from_secs(10);

/// `/secure-…` writable (CREATE) only by the digest identity `alice`; readable by anyone.
async fn alice_only_path(connect: &str, name: &str) -> String {
    let path = format!("/{}", support::unique_path(name).trim_start_matches('/').replace('/', "-"));
    let admin = CuratorClient::builder(connect).authorization("digest", "alice:secret").connect().await.unwrap();
    // `auth` scheme: the server writes alice's digest identity into the ACL.
    let acls = vec![Acl::new(Permissions::ALL, Id::authenticated()), Acl::new(Permissions::READ, Id::anyone())];
    admin.create(&path).with_acl(acls).await.expect("create the protected path");
    admin.close().await;
    path
}

/// Alice's client: her credential, and every node she creates writable only by her.
fn alice(connect: &str) -> zk_curator::CuratorClientBuilder {
    CuratorClient::builder(connect)
        .session_timeout(Duration::from_secs(10))
        .authorization("digest", "alice:secret")
        .acls(vec![Acl::new(Permissions::ALL, Id::authenticated()), Acl::new(Permissions::READ, Id::anyone())])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn digest_authorization_survives_session_replacement_and_nobody_else_gets_in() {
    support::init_tracing();
    let server = support::owned_server().await;
    let connect = server.connect_string();
    let secure = alice_only_path(&connect, "secure").await;
    let lock_path = format!("{secure}/report/lock");

    let client = alice(&connect).connect().await.expect("alice connects");
    let mutex = InterProcessMutex::new(&client, &lock_path).unwrap();
    mutex.lock().await.expect("alice locks under her path").release().await.unwrap();

    // The server expires alice's session; the replacement must authenticate again by itself.
    let first = client.session();
    expire_session(&connect, &client).await.expect("expire alice's session");
    support::eventually(Duration::from_secs(20), "a replacement session", || async {
        client.is_connected() && client.session() != first
    })
    .await;
    // A fresh path: only alice may create its parents under `secure`.
    let after = InterProcessMutex::new(&client, &format!("{secure}/after-expiry/lock")).unwrap();
    let guard = after.try_lock_for(Duration::from_secs(10)).await.expect("alice after the replacement").unwrap();
    guard.release().await.unwrap();
    let rw = InterProcessReadWriteLock::new(&client, &format!("{secure}/rw")).unwrap();
    rw.write_lock().lock().await.unwrap().release().await.unwrap();

    // Without the credential: a typed error naming the path, at once (NoAuth is not retried),
    // for a path of its own under alice's and for alice's lock while she holds it.
    let held = mutex.lock().await.expect("alice locks again");
    let stranger = support::client(&connect).await;
    for (what, path) in [("a new lock", format!("{secure}/other/lock")), ("alice's lock", lock_path.clone())] {
        let started = Instant::now();
        let got = InterProcessMutex::new(&stranger, &path).unwrap().try_lock_for(Duration::from_secs(30)).await;
        let elapsed = started.elapsed();
        let err = got.map(|g| g.is_some()).expect_err(what);
        assert_eq!(err.kind(), ErrorKind::NotAuthorized, "{what}: {err}");
        assert!(err.to_string().contains(&secure), "{what}: the error names the path: {err}");
        assert!(elapsed < PROMPT, "{what}: NoAuth took {elapsed:?}");
    }
    let semaphore = InterProcessSemaphoreV2::new(&stranger, &format!("{secure}/sem"), 2).unwrap();
    let err = semaphore.acquire_timeout(Duration::from_secs(30)).await.map(|l| l.is_some()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotAuthorized, "{err}");
    held.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_authorization_names_the_scheme_never_the_secret() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let started = Instant::now();
    let result = CuratorClient::builder(&connect)
        .connection_timeout(Duration::from_secs(5))
        .authorization("no-such-scheme", "very-secret-value")
        .connect()
        .await;
    let err = result.map(|_| ()).expect_err("an unknown scheme is refused by the server");
    let text = err.to_string();
    assert!(text.contains("no-such-scheme"), "the scheme is named: {text}");
    assert!(!text.contains("very-secret-value"), "the secret leaked: {text}");
    assert!(!format!("{err:?}").contains("very-secret-value"), "the secret leaked in Debug: {err:?}");
    assert_eq!(err.kind(), ErrorKind::NotAuthorized, "{text}");
    assert!(started.elapsed() < PROMPT, "an auth failure at connect took {:?}", started.elapsed());

    let builder = CuratorClient::builder(&connect).authorization("digest", "alice:very-secret-value");
    assert!(!format!("{builder:?}").contains("very-secret-value"), "the builder's Debug shows the secret");
    let err = CuratorClient::builder(&connect).authorization("", "x").connect().await.map(|_| ()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadArgument, "{err}");
}

/// Read-only for everyone but the loopback address under `/leases`; all for the loopback address
/// everywhere (the test client connects from 127.0.0.1, so it may do everything).
#[derive(Debug)]
struct LoopbackOnly;

fn loopback_all() -> Acl {
    Acl::new(Permissions::ALL, Id::new("ip", "127.0.0.1"))
}

impl AclProvider for LoopbackOnly {
    fn default_acl(&self) -> Vec<Acl> {
        vec![loopback_all()]
    }

    fn acl_for_path(&self, path: &str) -> Vec<Acl> {
        if path.contains("/leases") {
            vec![loopback_all(), Acl::new(Permissions::READ, Id::anyone())]
        } else {
            Vec::new() // the default
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_made_by_recipes_carry_the_acl_providers_answer() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let obs = support::observer(&connect).await;
    let namespace = format!("acl-{}", std::process::id());
    let client =
        CuratorClient::builder(&connect).namespace(&namespace).acl_provider(LoopbackOnly).connect().await.unwrap();

    let mutex = InterProcessMutex::new(&client, "/jobs/nightly").unwrap();
    let guard = mutex.lock().await.unwrap();
    let semaphore = InterProcessSemaphoreV2::new(&client, "/jobs/throttle", 2).unwrap();
    let lease = semaphore.acquire().await.unwrap();

    let acl_of = |path: String| {
        let obs = obs.clone();
        async move {
            let (acls, _) = obs.get_acl(&path).await.unwrap_or_else(|e| panic!("get_acl {path}: {e}"));
            zkc::acls_from_raw(&acls)
        }
    };
    let ns = format!("/{namespace}");
    for node in [ns.clone(), format!("{ns}/jobs"), format!("{ns}/jobs/nightly"), format!("{ns}{}", guard.node_path())] {
        assert_eq!(acl_of(node.clone()).await, vec![loopback_all()], "{node}");
    }
    // The internal-lock container exists only while someone is in it (the server reaps it once
    // empty): fill the semaphore, and a third acquirer waits there, holding its turn.
    let second = semaphore.acquire().await.unwrap();
    let waiter = {
        let semaphore = semaphore.clone();
        crate::support::spawn(async move { semaphore.acquire().await })
    };
    let locks = format!("{ns}/jobs/throttle/locks");
    support::eventually_queued(&obs, &locks, 1, "a waiter in the internal lock").await;
    assert_eq!(acl_of(locks.clone()).await, vec![loopback_all()], "{locks}");
    waiter.abort();
    let _ = waiter.await;
    second.release().await.unwrap();
    let leases = vec![loopback_all(), Acl::new(Permissions::READ, Id::anyone())];
    for node in [format!("{ns}/jobs/throttle/leases"), format!("{ns}{}", lease.node_path())] {
        assert_eq!(acl_of(node.clone()).await, leases, "{node}");
    }
    lease.release().await.unwrap();
    guard.release().await.unwrap();
}

/// As Curator's builder: a second `authorization` replaces the first (the client is bob only, and
/// cannot create under alice's path), while `authorizations` sends every credential given.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_authorization_replaces_the_first_as_in_curator() {
    support::init_tracing();
    let server = support::server().await;
    let connect = server.connect_string();
    let secure = alice_only_path(&connect, "replaced").await;

    let replaced = CuratorClient::builder(&connect)
        .authorization("digest", "alice:secret")
        .authorization("digest", "bob:other-secret")
        .connect()
        .await
        .expect("connect");
    let err = replaced.create(&format!("{secure}/by-bob")).await.expect_err("alice's credential was replaced");
    assert_eq!(err.kind(), ErrorKind::NotAuthorized, "{err}");
    replaced.close().await;

    let both = CuratorClient::builder(&connect)
        .authorizations([("digest", "bob:other-secret"), ("digest", "alice:secret")])
        .connect()
        .await
        .expect("connect");
    both.create(&format!("{secure}/by-both")).await.expect("alice's credential is among them");
    both.delete(&secure).deleting_children_if_needed().await.expect("alice deletes her path");
    both.close().await;
}
