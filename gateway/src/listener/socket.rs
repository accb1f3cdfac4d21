//! What the kernel holds of a connection's outgoing bytes, and how a closing connection makes
//! room for its close frame.
//!
//! The session's own queue is the bound CONTRACT §7 speaks of (a slow consumer is closed with
//! 1013 and its queued frames are dropped). The kernel's send buffer, though, autotunes to
//! megabytes on a fast link, so a client that stopped reading had megabytes of frames sitting
//! in the kernel and the close frame could only go in behind them once the client read — after
//! the socket had already been let go, so the client read its pushes and then a bare EOF.
//! `TCP_NOTSENT_LOWAT` keeps the kernel's unsent bytes small, so queued frames wait in the
//! process where a close can drop them, and `CloseRoom` lifts that limit (and grows a small
//! send buffer) when the connection closes, so the close frame is taken at once, ahead of
//! everything still queued in the process.
//!
//! Deliberately only socket options: when to close and what to write is the session's call.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use socket2::SockRef;
use tokio::net::TcpStream;

/// Most unsent bytes the kernel takes for a connection before writes wait (the bytes in flight
/// to the client are not counted). Enough to keep a fast link busy between two writes.
pub const UNSENT_BYTES: u32 = 128 * 1024;
/// The send buffer a closing connection gets if its own is smaller (the kernel doubles it and
/// caps it at `net.core.wmem_max`): room for what the kernel already holds plus a close frame.
const CLOSING_SEND_BUFFER: usize = 256 * 1024;

/// A connection's TCP socket, under TLS or not.
pub trait TcpSocket {
    fn tcp(&self) -> &TcpStream;
}

impl TcpSocket for TcpStream {
    fn tcp(&self) -> &TcpStream {
        self
    }
}

impl<I: TcpSocket> TcpSocket for tokio_rustls::server::TlsStream<I> {
    fn tcp(&self) -> &TcpStream {
        self.get_ref().0.tcp()
    }
}

/// Limits the kernel's unsent bytes of a freshly accepted connection.
pub fn limit_unsent(tcp: &TcpStream) {
    if let Err(e) = SockRef::from(tcp).set_tcp_notsent_lowat(UNSENT_BYTES) {
        tracing::debug!(error = %e, "could not set TCP_NOTSENT_LOWAT on an accepted socket");
    }
}

/// Asks a connection to make room for its last frames: asked by whoever holds the connection's
/// socket half (a closing WebSocket writer), applied by the connection's I/O on its next write.
/// Cheap to clone; one per connection, handed to its requests as an extension.
#[derive(Debug, Clone, Default)]
pub struct CloseRoom(Arc<AtomicU8>);

const ASKED: u8 = 1;
const MADE: u8 = 2;

impl CloseRoom {
    /// The connection is closing: from its next write on, the kernel takes what it can hold.
    pub fn make(&self) {
        let _ = self.0.compare_exchange(0, ASKED, Ordering::AcqRel, Ordering::Acquire);
    }

    /// Called before every write of the connection: makes the room once it was asked for.
    pub(super) fn before_write(&self, tcp: &TcpStream) {
        if self.0.load(Ordering::Acquire) == ASKED
            && self.0.compare_exchange(ASKED, MADE, Ordering::AcqRel, Ordering::Acquire).is_ok()
        {
            lift(tcp);
        }
    }
}

/// Lifts the unsent-bytes limit of `tcp` and grows a small send buffer.
fn lift(tcp: &TcpStream) {
    let sock = SockRef::from(tcp);
    if let Err(e) = sock.set_tcp_notsent_lowat(u32::MAX) {
        tracing::debug!(error = %e, "could not lift TCP_NOTSENT_LOWAT on a closing socket");
    }
    // SO_SNDBUF reads back doubled; a buffer already past what we would set is left as it is
    // (setting it would shrink an autotuned one).
    if sock.send_buffer_size().is_ok_and(|now| now < 2 * CLOSING_SEND_BUFFER) {
        if let Err(e) = sock.set_send_buffer_size(CLOSING_SEND_BUFFER) {
            tracing::debug!(error = %e, "could not grow the send buffer of a closing socket");
        }
    }
}
