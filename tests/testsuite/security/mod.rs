//! Secured ensembles: digest authorization and ACLs, SASL DIGEST-MD5, TLS.

mod digest_and_acls;
mod sasl;
#[cfg(feature = "tls")]
mod tls;
