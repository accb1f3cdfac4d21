//! The listener's TLS: the certificate it is given (`Tls`) and each connection's handshake,
//! run in the connection's own task under the head deadline, before HTTP is served on it.
//!
//! Deliberately does not read PEM files or pick a crypto provider: the binary builds the
//! rustls configuration and hands it over.

use std::fmt::Debug;
use std::sync::Arc;

use axum::Router;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{watch, OwnedSemaphorePermit};
use tokio_rustls::{rustls, TlsAcceptor};

use super::serve_connection;
use crate::config::ConnLimits;
use crate::metrics;

/// A certificate to serve HTTPS and `wss://` with (`ConnLimits::tls`).
#[derive(Clone)]
pub struct Tls(TlsAcceptor);

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

/// Completes the TLS handshake within the head deadline (or until shutdown), then serves the
/// connection.
pub(super) async fn handshake<I>(
    tls: Tls,
    io: I,
    router: Router,
    limits: ConnLimits,
    permit: OwnedSemaphorePermit,
    mut stop: watch::Receiver<bool>,
) where
    I: AsyncRead + AsyncWrite + super::TcpSocket + Unpin + Send + 'static,
{
    let accepted = tokio::select! {
        a = tokio::time::timeout(limits.header_read_timeout, tls.0.accept(io)) => a,
        _ = stop.wait_for(|s| *s) => return,
    };
    match accepted {
        Ok(Ok(io)) => serve_connection(io, router, limits, permit, stop).await,
        Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake failed"),
        Err(_) => {
            metrics::connection_timed_out("header");
            tracing::debug!("closing a connection that did not finish its TLS handshake in time");
        }
    }
}
