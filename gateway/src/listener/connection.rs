//! One accepted connection, served until it ends: HTTP/1.1 (with upgrades) over the router,
//! its request-head and idle deadlines, and the open-connection permit it holds until its
//! socket closes.
//!
//! Deliberately knows nothing of accepting, the cap or TLS: `listener.rs` accepts and refuses,
//! `tls.rs` shakes hands, and both hand the connection here.

use std::convert::Infallible;
use std::pin::{pin, Pin};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::Router;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{watch, Notify, OwnedSemaphorePermit};
use tower::ServiceExt;

use super::limits::ConnLimits;
use super::socket::{self, CloseRoom, TcpSocket};
use crate::metrics;

/// What serving one connection takes besides its socket.
pub(super) struct Serving {
    pub router: Router,
    pub limits: ConnLimits,
    /// The open-connection permit, held until the socket closes.
    pub permit: OwnedSemaphorePermit,
    /// Turns true at shutdown.
    pub stop: watch::Receiver<bool>,
}

/// Serves one connection until it ends, its deadline passes, or shutdown closes it.
pub(super) async fn serve_connection<I>(io: I, serving: Serving)
where
    I: AsyncRead + AsyncWrite + TcpSocket + Unpin + Send + 'static,
{
    let Serving { router, limits, permit, mut stop } = serving;
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
