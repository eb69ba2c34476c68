//! The crate's own TLS and SASL options (features `tls`, `sasl`), given to
//! [`CuratorClientBuilder::tls`](crate::CuratorClientBuilder::tls) and
//! [`CuratorClientBuilder::sasl`](crate::CuratorClientBuilder::sasl). Neither prints its key
//! material or credentials in `Debug`.

#[cfg(any(feature = "tls", feature = "sasl"))]
use zookeeper_client as zk;

#[cfg(feature = "tls")]
use crate::error::{Error, Result};

/// How a client connects over TLS (feature `tls`): the CA certificates it trusts and the
/// certificate it presents if the server asks for one. The server's certificate must name the
/// host as written in the connect string (a DNS name or an IP address).
///
/// ```no_run
/// # fn demo() -> zk_curator::Result<()> {
/// use zk_curator::CuratorClient;
/// use zk_curator::framework::TlsOptions;
///
/// let ca = std::fs::read_to_string("/etc/zookeeper/tls/ca.pem").unwrap();
/// let cert = std::fs::read_to_string("/etc/zookeeper/tls/client.pem").unwrap();
/// let key = std::fs::read_to_string("/etc/zookeeper/tls/client.key").unwrap();
/// let tls = TlsOptions::new().with_pem_ca(&ca)?.with_pem_identity(&cert, &key)?;
/// let builder = CuratorClient::builder("zk1.example.com:2281").tls(tls);
/// # let _ = builder; Ok(()) }
/// ```
#[cfg(feature = "tls")]
#[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
#[derive(Clone, Default)]
pub struct TlsOptions(pub(crate) zk::TlsOptions);

#[cfg(feature = "tls")]
impl TlsOptions {
    /// Options that trust no CA yet: add one with [`with_pem_ca`](Self::with_pem_ca).
    pub fn new() -> TlsOptions {
        TlsOptions(zk::TlsOptions::new())
    }

    /// Trusts the CA certificates (and revocation lists) of PEM text `ca`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `tls ca` when the text holds no usable certificate.
    pub fn with_pem_ca(self, ca: &str) -> Result<TlsOptions> {
        self.0
            .with_pem_ca(ca)
            .map(TlsOptions)
            .map_err(|_| Error::invalid_argument("tls ca", pem_summary(ca), "holds no usable PEM CA certificate"))
    }

    /// Presents the certificate chain `cert` with private key `key` (both PEM text) when the
    /// server asks for a client certificate.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `tls identity` when either text is unusable; the key
    /// is never printed.
    pub fn with_pem_identity(self, cert: &str, key: &str) -> Result<TlsOptions> {
        self.0.with_pem_identity(cert, key).map(TlsOptions).map_err(|_| {
            Error::invalid_argument(
                "tls identity",
                pem_summary(cert),
                "needs a PEM certificate chain and a PEM private key that parse",
            )
        })
    }
}

/// A short, secret-free description of PEM text for an error message.
#[cfg(feature = "tls")]
fn pem_summary(pem: &str) -> String {
    let blocks = pem.matches("-----BEGIN ").count();
    format!("<{} bytes of PEM, {blocks} block(s)>", pem.len())
}

#[cfg(feature = "tls")]
impl std::fmt::Debug for TlsOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TlsOptions(<redacted>)")
    }
}

/// SASL credentials a client authenticates every session with (feature `sasl`).
///
/// ```
/// use zk_curator::CuratorClient;
/// use zk_curator::framework::SaslOptions;
///
/// let builder = CuratorClient::builder("127.0.0.1:2181").sasl(SaslOptions::digest_md5("alice", "secret"));
/// assert!(!format!("{builder:?}").contains("secret"));
/// ```
#[cfg(feature = "sasl")]
#[cfg_attr(docsrs, doc(cfg(feature = "sasl")))]
#[derive(Clone)]
pub struct SaslOptions(pub(crate) zk::SaslOptions);

#[cfg(feature = "sasl")]
impl SaslOptions {
    /// DIGEST-MD5 as `user` with `password`, for a server whose JAAS `Server` section uses
    /// `DigestLoginModule`.
    pub fn digest_md5(user: impl Into<String>, password: impl Into<String>) -> SaslOptions {
        SaslOptions(zk::SaslOptions::digest_md5(user.into(), password.into()).into())
    }
}

#[cfg(feature = "sasl")]
impl std::fmt::Debug for SaslOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SaslOptions(<redacted>)")
    }
}
