//! The listener's TLS: reads a PEM certificate chain and its private key into a rustls server
//! configuration (ring, TLS 1.2 and 1.3, ALPN `http/1.1`).
//!
//! Deliberately does not serve anything (the gateway's `listener.rs` does the handshakes) and
//! does not reload: a renewed certificate takes a restart (or a reverse proxy in front).

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

pub fn server_config(cert: &Path, key: &Path) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .with_context(|| format!("cannot read the TLS certificate {}", cert.display()))?;
    anyhow::ensure!(!chain.is_empty(), "no certificate in {}", cert.display());
    let key_der = PrivateKeyDer::from_pem_file(key)
        .with_context(|| format!("cannot read the TLS private key {}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_no_client_auth()
        .with_single_cert(chain, key_der)
        .with_context(|| format!("{} and {} do not make a usable certificate", cert.display(), key.display()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
