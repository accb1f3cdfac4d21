//! Accepting and serving HTTP/1.1 connections (and the WebSocket upgrades on them) with the
//! limits of a public server: a cap on open connections (one more is answered 503 and closed,
//! counted and logged), a deadline for each request head, and a deadline for a keep-alive
//! connection that starts no new request. Without them, silent sockets held forever exhausted
//! the process's descriptors and locked every real client out. With `Tls`, each connection's
//! TLS handshake runs in its own task under the head deadline (a slow handshake holds no one
//! else up), and a connection over the cap is closed without an answer.
//!
//! Deliberately knows nothing of routes or sessions: it serves the router it is given, and an
//! upgraded connection (a WebSocket session) leaves its deadlines behind — the session has its
//! own heartbeat timeout — while still counting against the cap until its socket closes.

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::serve::Listener;
use axum::Router;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{watch, Semaphore};
use tokio_util::task::TaskTracker;

mod connection;
mod handshake;
mod limits;
mod socket;
mod tls;
use crate::metrics;
use connection::{serve_connection, Serving};
use handshake::handshake;
pub use limits::ConnLimits;
pub use socket::CloseRoom;
use socket::TcpSocket;
pub use tls::Tls;

/// At most one "connection cap reached" line per this long (each refusal is still counted).
const REJECT_LOG_EVERY: Duration = Duration::from_secs(10);
/// How long a refused connection gets to take its 503 before it is dropped.
const REJECT_WRITE_TIMEOUT: Duration = Duration::from_millis(200);
/// Refused connections being answered at once; past this a refused connection is closed
/// without an answer, so a flood of connects at the cap cannot spend descriptors on 503s.
const REFUSALS_AT_ONCE: usize = 16;

/// Serves `router` on `listener` until `shutdown` resolves; then stops accepting, lets the
/// requests in progress finish (idle connections close at once) and returns.
pub async fn serve<L>(
    mut listener: L,
    router: Router,
    limits: ConnLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()>
where
    L: Listener,
    L::Addr: Debug,
    L::Io: TcpSocket,
{
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let answering = Arc::new(Semaphore::new(REFUSALS_AT_ONCE));
    let (stop_tx, stop) = watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    let connections = TaskTracker::new();
    let mut refused = Refusals::default();
    let mut stopping = stop.clone();
    loop {
        let (io, addr) = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stopping.wait_for(|s| *s) => break,
        };
        match permits.clone().try_acquire_owned() {
            Ok(permit) => {
                let serving = Serving { router: router.clone(), limits: limits.clone(), permit, stop: stop.clone() };
                match limits.tls.clone() {
                    None => {
                        connections.spawn(serve_connection(io, serving));
                    }
                    Some(tls) => {
                        connections.spawn(handshake(tls, io, serving));
                    }
                }
            }
            Err(_) => {
                refused.note(&addr, limits.max_connections);
                if limits.tls.is_some() {
                    // A plain 503 means nothing inside TLS, and a handshake is what the cap saves.
                    drop(io);
                } else if let Ok(answer) = answering.clone().try_acquire_owned() {
                    connections.spawn(async move {
                        refuse(io).await;
                        drop(answer);
                    });
                }
            }
        }
    }
    drop(listener);
    connections.close();
    connections.wait().await;
    Ok(())
}

/// Answers a connection over the cap with 503 and closes it.
async fn refuse<I: AsyncWrite + Unpin>(mut io: I) {
    let body = r#"{"error":{"code":"unavailable","message":"too many open connections; retry later"}}"#;
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         retry-after: 1\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(REJECT_WRITE_TIMEOUT, async {
        io.write_all(answer.as_bytes()).await?;
        io.shutdown().await
    })
    .await;
}

/// Counts refusals and logs them, at most once per `REJECT_LOG_EVERY`.
#[derive(Debug, Default)]
struct Refusals {
    logged: Option<Instant>,
    unlogged: u64,
}

impl Refusals {
    fn note(&mut self, addr: &impl Debug, cap: usize) {
        metrics::connection_refused();
        self.unlogged += 1;
        if self.logged.is_none_or(|t| t.elapsed() >= REJECT_LOG_EVERY) {
            tracing::warn!(
                max_connections = cap,
                refused = self.unlogged,
                last_peer = ?addr,
                "connection cap reached; refusing new connections with 503"
            );
            self.logged = Some(Instant::now());
            self.unlogged = 0;
        }
    }
}
