//! Each TLS connection's handshake, run in the connection's own task under the head deadline,
//! before HTTP is served on it.
//!
//! Deliberately holds no certificate (`tls.rs` does) and serves no HTTP (`connection.rs` does).

use tokio::io::{AsyncRead, AsyncWrite};

use super::connection::{serve_connection, Serving};
use super::tls::Tls;
use crate::metrics;

/// Completes the TLS handshake within the head deadline (or until shutdown), then serves the
/// connection.
pub(super) async fn handshake<I>(tls: Tls, io: I, mut serving: Serving)
where
    I: AsyncRead + AsyncWrite + super::socket::TcpSocket + Unpin + Send + 'static,
{
    let accepted = tokio::select! {
        a = tokio::time::timeout(serving.limits.header_read_timeout, tls.0.accept(io)) => a,
        _ = serving.stop.wait_for(|s| *s) => return,
    };
    match accepted {
        Ok(Ok(io)) => serve_connection(io, serving).await,
        Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake failed"),
        Err(_) => {
            metrics::connection_timed_out("header");
            tracing::debug!("closing a connection that did not finish its TLS handshake in time");
        }
    }
}
