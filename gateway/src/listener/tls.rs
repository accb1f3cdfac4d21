//! The listener's TLS certificate (`Tls`): the rustls acceptor a connection's handshake uses.
//!
//! Deliberately does not read PEM files or pick a crypto provider: the binary builds the
//! rustls configuration and hands it over. The handshake itself is `handshake.rs`.

use std::fmt::Debug;
use std::sync::Arc;

use tokio_rustls::{rustls, TlsAcceptor};

/// A certificate to serve HTTPS and `wss://` with (`ConnLimits::tls`).
#[derive(Clone)]
pub struct Tls(pub(super) TlsAcceptor);

impl Tls {
    pub fn new(config: Arc<rustls::ServerConfig>) -> Self {
        Tls(TlsAcceptor::from(config))
    }
}

impl Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tls")
    }
}

impl PartialEq for Tls {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(self.0.config(), other.0.config())
    }
}

impl Eq for Tls {}
