//! The read half of one WebSocket session: reads frames, answers what needs no work, runs
//! operations concurrently (at most `MAX_IN_FLIGHT`), batches acks (a group commit: recorded at
//! once when none of the session's are being recorded, otherwise together as soon as that batch
//! is — or at once when a frame's worth waits), pings and heartbeats on every interval, and ends
//! the session after twice the stale threshold of silence.
//!
//! Deliberately generic over the frame `Stream` and the `Runner` that does the work, and free of
//! the gateway: it decides *when* things run, `dispatch.rs` decides what they mean, and the
//! tests below drive it with channels and paused time, without a socket or a stream.

use std::time::Duration;

use axum::extract::ws::Message;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use futures::{FutureExt, Stream, StreamExt};
use tokio::time::Instant;
use uuid::Uuid;

use crate::api::ws::dispatch::{self, Work};
use crate::api::ws::frames::{self, ClientFrame, Op, Step, MAX_ACK_IDS};
use crate::close::CloseReason;
use crate::error::ApiError;
use crate::sessions::hub::{Control, SessionHandle};

/// Operations of one session running at once; a client's `send` window beyond this waits in
/// its socket.
pub const MAX_IN_FLIGHT: usize = 32;
/// Ack ids of one session received and not yet recorded (waiting for the next batch, or being
/// recorded): a batch being recorded plus one full frame. Beyond this the session stops
/// reading its socket until a batch is recorded, so acks cost bounded memory however fast a
/// client sends them.
const MAX_PENDING_ACKS: usize = 2 * MAX_ACK_IDS;

/// What a unit of a session's work yields: the frame to answer with, and how many ack ids it
/// recorded (they stop counting against `MAX_PENDING_ACKS`).
type Done = (Option<String>, usize);

/// The timings and limits the loop keeps (from `GatewayConfig`).
#[derive(Debug, Clone)]
pub struct Settings {
    pub heartbeat_interval: Duration,
    pub stale_after: Duration,
    pub max_frame_bytes: usize,
}

impl Settings {
    pub fn of(cfg: &crate::config::GatewayConfig) -> Self {
        Settings {
            heartbeat_interval: cfg.heartbeat_interval(),
            stale_after: cfg.stale_after,
            max_frame_bytes: cfg.max_frame_bytes,
        }
    }
}

/// Does the session's work and keeps its books; the loop only decides when.
pub trait Runner: Sync {
    /// Runs `work` (an operation, an ack batch, the heartbeat) and returns the frame to answer
    /// with, if any.
    fn run(&self, work: Work) -> BoxFuture<'_, Option<String>>;
    /// The client was heard from (presence sees it at once).
    fn heard(&self);
    /// `n` ack ids were received / recorded (the process-wide pending gauge).
    fn acks_received(&self, n: usize);
    fn acks_recorded(&self, n: usize);
}

pub async fn read_loop<S, E, R>(cfg: &Settings, runner: &R, handle: &SessionHandle, stream: &mut S) -> CloseReason
where
    S: Stream<Item = Result<Message, E>> + Unpin,
    E: std::fmt::Display + std::fmt::Debug,
    R: Runner,
{
    let interval = cfg.heartbeat_interval;
    let mut tick = tokio::time::interval_at(Instant::now() + interval, interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_seen = Instant::now();
    let mut heard_since_heartbeat = false;
    let mut acks: Vec<Uuid> = Vec::new();
    // Ids in `acks` plus ids in batches being recorded.
    let mut acks_pending = 0usize;
    // Ack batches of this session being recorded. Acks that arrive meanwhile wait for them: the
    // gateway's ack batcher (`acks.rs`) gathers every session's batches into one stream message,
    // so waiting here only keeps one session from handing in a batch per frame.
    let mut recording = 0usize;
    // Operations run concurrently, so a client's pipelined sends overlap their round trips to
    // the stream; their results (each carrying its `ref`) go out as they finish. Reading stops
    // while `MAX_IN_FLIGHT` are running or `MAX_PENDING_ACKS` ack ids wait, which pushes back on
    // the client through TCP.
    // Boxed: an empty `FuturesUnordered` still allocates a stub task sized like its future,
    // which every idle session would pay for.
    let mut inflight: FuturesUnordered<BoxFuture<'_, Done>> = FuturesUnordered::new();

    let reason = loop {
        tokio::select! {
            _ = handle.closing().cancelled() => break handle.reason().unwrap_or(CloseReason::Shutdown),
            Some((reply, acked)) = inflight.next(), if !inflight.is_empty() => {
                acks_pending -= acked;
                runner.acks_recorded(acked);
                if acked > 0 {
                    recording -= 1;
                    if recording == 0 && !acks.is_empty() {
                        inflight.push(record_acks(runner, std::mem::take(&mut acks)));
                        recording += 1;
                    }
                }
                if let Some(frame) = reply {
                    if !handle.send(frame) {
                        break handle.reason().unwrap_or(CloseReason::SlowConsumer);
                    }
                }
            }
            msg = stream.next(), if inflight.len() < MAX_IN_FLIGHT && acks_pending < MAX_PENDING_ACKS => {
                let msg = match msg {
                    None => break CloseReason::ClientClosed,
                    Some(Err(e)) => break classify(&e),
                    Some(Ok(m)) => m,
                };
                last_seen = Instant::now();
                heard_since_heartbeat = true;
                handle.touch();
                runner.heard();
                let reply = match msg {
                    Message::Text(text) => {
                        if text.len() > cfg.max_frame_bytes {
                            break CloseReason::FrameTooLarge;
                        }
                        match frames::step(text.as_str()) {
                            Step::Reply(r) => r,
                            // Batched here only if the token may ack; otherwise the op path
                            // answers `forbidden` naming `receive`.
                            Step::Run(ClientFrame { reference, op: Op::Ack(ids) })
                                if handle.scopes.contains(bus::scope::Scope::Receive) =>
                            {
                                let reply = dispatch::acked(reference.as_deref(), ids.len());
                                acks_pending += ids.len();
                                runner.acks_received(ids.len());
                                acks.extend(ids);
                                // A full frame's worth is recorded at once, whatever is being
                                // recorded.
                                if !acks.is_empty() && (recording == 0 || acks.len() >= MAX_ACK_IDS) {
                                    inflight.push(record_acks(runner, std::mem::take(&mut acks)));
                                    recording += 1;
                                }
                                reply
                            }
                            Step::Run(frame) => {
                                inflight.push(runner.run(Work::Op(frame)).map(|f| (f, 0)).boxed());
                                continue;
                            }
                        }
                    }
                    Message::Binary(_) => frames::result_err(
                        None,
                        &ApiError::invalid("binary frames are not supported; send JSON text frames"),
                    ),
                    Message::Close(_) => break CloseReason::ClientClosed,
                    Message::Ping(_) | Message::Pong(_) => continue,
                };
                if !handle.send(reply) {
                    break handle.reason().unwrap_or(CloseReason::SlowConsumer);
                }
            }
            _ = tick.tick() => {
                if last_seen.elapsed() > cfg.stale_after * 2 {
                    break CloseReason::Timeout;
                }
                let _ = handle.control.send(Control::Ping);
                // At most one heartbeat event per interval, and only if the client was heard.
                if std::mem::take(&mut heard_since_heartbeat) {
                    inflight.push(runner.run(Work::Heartbeat).map(|f| (f, 0)).boxed());
                }
            }
        }
    };
    // Operations already started finish (their appends may have happened; the client may
    // still read the answer), and acks received before the close still count: both are
    // recorded before `session.closed`.
    if !acks.is_empty() {
        inflight.push(record_acks(runner, acks));
    }
    while let Some((reply, acked)) = inflight.next().await {
        runner.acks_recorded(acked);
        if let Some(frame) = reply {
            handle.send(frame);
        }
    }
    reason
}

/// A batch of acks to record, counting its ids.
fn record_acks<R: Runner>(runner: &R, ids: Vec<Uuid>) -> BoxFuture<'_, Done> {
    let n = ids.len();
    runner.run(Work::Acks(ids)).map(move |f| (f, n)).boxed()
}

/// A read error is an oversized frame (close 1009), a text frame that is not UTF-8 (1007), any
/// other protocol violation (1002), or a connection that went away. axum hides tungstenite's
/// error type, so its text is what there is to go by (which is also what lets the loop take
/// any stream's error).
fn classify<E: std::fmt::Display + std::fmt::Debug>(e: &E) -> CloseReason {
    let text = format!("{e} {e:?}").to_lowercase();
    if text.contains("space limit") || text.contains("too long") || text.contains("too big") {
        CloseReason::FrameTooLarge
    } else if text.contains("utf-8") || text.contains("utf8") {
        CloseReason::InvalidUtf8
    } else if text.contains("without closing handshake") || text.contains("resetwithoutclosinghandshake") {
        // tungstenite files a dropped TCP connection under protocol errors; it is a client gone.
        CloseReason::ClientClosed
    } else if text.contains("protocol error") || text.contains("protocol(") {
        CloseReason::ProtocolError
    } else {
        CloseReason::ClientClosed
    }
}

#[cfg(test)]
mod tests {
    use tokio_tungstenite::tungstenite::error::{CapacityError, Error, ProtocolError};

    use super::*;

    #[test]
    fn read_errors_map_to_their_close_reasons() {
        let cases = [
            (Error::Utf8("invalid utf-8 sequence of 1 bytes from index 0".into()), CloseReason::InvalidUtf8),
            (Error::Capacity(CapacityError::MessageTooLong { size: 2, max_size: 1 }), CloseReason::FrameTooLarge),
            (Error::Protocol(ProtocolError::UnmaskedFrameFromClient), CloseReason::ProtocolError),
            (Error::Protocol(ProtocolError::ResetWithoutClosingHandshake), CloseReason::ClientClosed),
            (Error::ConnectionClosed, CloseReason::ClientClosed),
            (Error::Io(std::io::ErrorKind::ConnectionReset.into()), CloseReason::ClientClosed),
        ];
        for (e, want) in cases {
            let shown = e.to_string();
            assert_eq!(classify(&axum::Error::new(e)), want, "{shown}");
        }
        assert_eq!((CloseReason::InvalidUtf8.code(), CloseReason::InvalidUtf8.label()), (1007, "protocol_error"));
        assert_eq!((CloseReason::ProtocolError.code(), CloseReason::ProtocolError.label()), (1002, "protocol_error"));
    }
}
