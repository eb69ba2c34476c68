//! TLS against a real ZooKeeper 3.8 serving a `secureClientPort` (Netty) with certificates this
//! test makes itself (rcgen): locks work over TLS with client certificates, and a client that does
//! not trust the server's certificate fails with a clear error.

use crate::support;

use std::time::{Duration, Instant};

use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose};
use zk_curator::framework::TlsOptions;
use zk_curator::locks::InterProcessMutex;
use zk_curator::testing::{ServerTls, TestingServer};
use zk_curator::CuratorClient;

/// A CA and PEM texts of certificates it signed.
struct Pki {
    ca_cert: rcgen::Certificate,
    ca_key: KeyPair,
}

impl Pki {
    fn new(name: &str) -> Pki {
        let ca_key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca_cert = params.self_signed(&ca_key).unwrap();
        Pki { ca_cert, ca_key }
    }

    fn ca_pem(&self) -> String {
        self.ca_cert.pem()
    }

    /// (certificate PEM, PKCS#8 key PEM) for `names`, for a server or a client.
    fn issue(&self, names: &[&str], usage: ExtendedKeyUsagePurpose) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
        params.distinguished_name.push(DnType::CommonName, names.first().copied().unwrap_or("client"));
        params.extended_key_usages = vec![usage];
        let cert = params.signed_by(&key, &self.ca_cert, &self.ca_key).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

async fn tls_server(pki: &Pki) -> TestingServer {
    let (cert, key) = pki.issue(&["127.0.0.1", "localhost"], ExtendedKeyUsagePurpose::ServerAuth);
    let tls = ServerTls { key_and_certificate_pem: format!("{key}{cert}"), client_ca_pem: Some(pki.ca_pem()) };
    TestingServer::builder().owned().tls(tls).start().await.expect("a ZooKeeper serving TLS")
}

fn client_tls(pki: &Pki, trusted_ca: &str) -> TlsOptions {
    let (cert, key) = pki.issue(&["zk-curator-test-client"], ExtendedKeyUsagePurpose::ClientAuth);
    TlsOptions::new().with_pem_ca(trusted_ca).unwrap().with_pem_identity(&cert, &key).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_work_over_tls_with_client_certificates() {
    support::init_tracing();
    let pki = Pki::new("zk-curator test CA");
    let server = tls_server(&pki).await;
    let secure = server.secure_connect_string().expect("a TLS port");
    let connect = |tls: TlsOptions| {
        CuratorClient::builder(&secure).connection_timeout(Duration::from_secs(10)).tls(tls).connect()
    };
    let a = connect(client_tls(&pki, &pki.ca_pem())).await.expect("a TLS client connects");
    let b = connect(client_tls(&pki, &pki.ca_pem())).await.expect("a second TLS client connects");
    let path = support::unique_path("tls");
    let guard = InterProcessMutex::new(&a, &path).unwrap().lock().await.expect("lock over TLS");
    let other = InterProcessMutex::new(&b, &path).unwrap();
    assert!(other.try_lock_for(Duration::from_millis(300)).await.unwrap().is_none(), "both held the lock");
    guard.release().await.expect("release over TLS");
    other.try_lock_for(Duration::from_secs(5)).await.unwrap().expect("the other TLS client").release().await.unwrap();

    // The secure port really is TLS: a plain client cannot use it.
    let plain = secure.trim_start_matches("tcp+tls://");
    let refused = CuratorClient::builder(plain).connection_timeout(Duration::from_secs(2)).connect().await;
    assert!(refused.is_err(), "a plaintext client connected to the TLS port");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_does_not_trust_the_server_fails_with_a_clear_error() {
    support::init_tracing();
    let pki = Pki::new("zk-curator test CA");
    let server = tls_server(&pki).await;
    let secure = server.secure_connect_string().expect("a TLS port");
    let stranger_ca = Pki::new("some other CA");
    let started = Instant::now();
    let result = CuratorClient::builder(&secure)
        .connection_timeout(Duration::from_secs(3))
        .tls(client_tls(&pki, &stranger_ca.ca_pem()))
        .connect()
        .await;
    let err = result.map(|_| ()).expect_err("connected to a server it does not trust");
    let text = err.to_string();
    eprintln!("untrusted server: {text} (after {:?})", started.elapsed());
    assert!(text.contains(&secure), "the error names where it tried: {text}");
    assert!(text.contains("TLS") && text.contains("certificate"), "the error points at TLS: {text}");
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
}
