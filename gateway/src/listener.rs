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

use std::convert::Infallible;
use std::fmt::Debug;
use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::serve::Listener;
use axum::Router;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::sync::{watch, Notify, OwnedSemaphorePermit, Semaphore};
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

use crate::config::ConnLimits;

mod socket;
mod tls;
use crate::metrics;
pub use socket::CloseRoom;
use socket::TcpSocket;
use tls::handshake;
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
            Ok(permit) => match limits.tls.clone() {
                None => {
                    connections.spawn(serve_connection(io, router.clone(), limits.clone(), permit, stop.clone()));
                }
                Some(tls) => {
                    connections.spawn(handshake(tls, io, router.clone(), limits.clone(), permit, stop.clone()));
                }
            },
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

/// Serves one connection until it ends, its deadline passes, or shutdown closes it.
async fn serve_connection<I>(
    io: I,
    router: Router,
    limits: ConnLimits,
    permit: OwnedSemaphorePermit,
    mut stop: watch::Receiver<bool>,
) where
    I: AsyncRead + AsyncWrite + TcpSocket + Unpin + Send + 'static,
{
    socket::limit_unsent(io.tcp());
    let activity = Arc::new(Activity::new());
    let room = CloseRoom::default();
    let io = TokioIo::new(Tracked { io, activity: activity.clone(), room: room.clone(), _open: Open::new(permit) });
    let service = {
        let activity = activity.clone();
        hyper::service::service_fn(move |req: Request<Incoming>| {
            let (router, busy) = (router.clone(), activity.request_started());
            let mut req = req.map(Body::new);
            // A WebSocket session takes it along, to make room for its close frame.
            req.extensions_mut().insert(room.clone());
            async move {
                let response = router.oneshot(req).await.unwrap_or_else(|e| match e {});
                // The request counts as in progress until its answer is written (or dropped).
                Ok::<_, Infallible>(response.map(|body| Body::new(Guarded { body, _busy: busy })))
            }
        })
    };
    let mut conn = pin!(http1::Builder::new().serve_connection(io, service).with_upgrades());
    let mut stopping = false;
    loop {
        tokio::select! {
            done = conn.as_mut() => {
                if let Err(e) = done {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                return;
            }
            _ = stop.wait_for(|s| *s), if !stopping => {
                // A request in progress finishes (and the connection closes after it); a
                // connection between requests, or still sending a head, closes now — shutdown
                // must not wait out anyone's header deadline.
                if !activity.is_busy() {
                    return;
                }
                stopping = true;
                conn.as_mut().graceful_shutdown();
            }
            kind = activity.expired(&limits) => {
                // Nothing is in progress (deadlines only run between requests), so dropping
                // the connection loses nothing.
                metrics::connection_timed_out(kind);
                tracing::debug!(kind, "closing a connection that missed its deadline");
                return;
            }
        }
    }
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

/// Where a connection stands, for its deadlines.
#[derive(Debug, Clone, Copy)]
enum Phase {
    /// Connected at this instant; its first request head is due `header_read_timeout` later.
    Fresh(Instant),
    /// The last answer ended at this instant; a new request is due `idle_timeout` later.
    Idle(Instant),
    /// The first byte of a new request arrived at this instant; its head is due
    /// `header_read_timeout` later.
    Head(Instant),
    /// Requests in progress: no deadline.
    Busy(usize),
}

#[derive(Debug)]
struct Activity {
    phase: Mutex<Phase>,
    changed: Notify,
}

impl Activity {
    fn new() -> Self {
        Activity { phase: Mutex::new(Phase::Fresh(Instant::now())), changed: Notify::new() }
    }

    fn bytes_read(&self) {
        let mut phase = self.phase.lock().unwrap();
        if let Phase::Idle(_) = *phase {
            *phase = Phase::Head(Instant::now());
            self.changed.notify_one();
        }
    }

    fn request_started(self: &Arc<Self>) -> Busy {
        let mut phase = self.phase.lock().unwrap();
        *phase = match *phase {
            Phase::Busy(n) => Phase::Busy(n + 1),
            _ => Phase::Busy(1),
        };
        self.changed.notify_one();
        Busy(self.clone())
    }

    fn request_ended(&self) {
        let mut phase = self.phase.lock().unwrap();
        *phase = match *phase {
            Phase::Busy(n) if n > 1 => Phase::Busy(n - 1),
            _ => Phase::Idle(Instant::now()),
        };
        self.changed.notify_one();
    }

    fn is_busy(&self) -> bool {
        matches!(*self.phase.lock().unwrap(), Phase::Busy(_))
    }

    /// The current deadline and what it is for, if any.
    fn deadline(&self, limits: &ConnLimits) -> Option<(Instant, &'static str)> {
        match *self.phase.lock().unwrap() {
            Phase::Fresh(t) | Phase::Head(t) => Some((t + limits.header_read_timeout, "header")),
            Phase::Idle(t) => Some((t + limits.idle_timeout, "idle")),
            Phase::Busy(_) => None,
        }
    }

    /// Resolves when the connection misses a deadline, with which one.
    async fn expired(&self, limits: &ConnLimits) -> &'static str {
        loop {
            let changed = self.changed.notified();
            match self.deadline(limits) {
                Some((at, kind)) if at <= Instant::now() => return kind,
                Some((at, _)) => {
                    tokio::select! {
                        _ = tokio::time::sleep_until(at.into()) => {}
                        _ = changed => {}
                    }
                }
                None => changed.await,
            }
        }
    }
}

/// A request in progress on its connection; dropped with its answer's body.
#[derive(Debug)]
struct Busy(Arc<Activity>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.request_ended();
    }
}

/// An answer's body, holding its request in progress until it is written or dropped.
#[derive(Debug)]
struct Guarded {
    body: Body,
    _busy: Busy,
}

impl http_body::Body for Guarded {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A connection counted in `signalbus_connections` and holding a place under the cap, for as
/// long as its socket is open (through a WebSocket upgrade too).
#[derive(Debug)]
struct Open {
    _permit: OwnedSemaphorePermit,
}

impl Open {
    fn new(permit: OwnedSemaphorePermit) -> Self {
        metrics::connection_opened();
        Open { _permit: permit }
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        metrics::connection_closed();
    }
}

/// The socket, noting when request bytes arrive, and lifting its unsent-bytes limit on the
/// first write after its `CloseRoom` was asked for.
#[derive(Debug)]
struct Tracked<I> {
    io: I,
    activity: Arc<Activity>,
    room: CloseRoom,
    _open: Open,
}

impl<I: AsyncRead + Unpin> AsyncRead for Tracked<I> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.bytes_read();
        }
        polled
    }
}

impl<I: AsyncWrite + TcpSocket + Unpin> AsyncWrite for Tracked<I> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        self.room.before_write(self.io.tcp());
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        self.room.before_write(self.io.tcp());
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}
