//! One WebSocket session from open to close: welcome, `session.opened`, startup drain, the
//! read loop (frames, heartbeats, pings, silence timeout, ack batches), and an orderly close
//! that records `session.closed`.
//!
//! Deliberately leaves writing to `writer.rs` (so a slow socket never stalls the read loop)
//! and the meaning of each operation to `dispatch.rs`.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, WebSocket};
use bus::event::{SessionKind, Surface};
use chrono::Utc;
use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, SplitStream};
use futures::{FutureExt, SinkExt, StreamExt};
use tokio::sync::mpsc;
use tokio::time::Instant;
use uuid::Uuid;

use crate::api::ws::dispatch::{self, Work};
use crate::api::ws::frames::{self, ClientFrame, Op, Step, MAX_ACK_IDS};
use crate::api::ws::writer;
use crate::auth::Agent;
use crate::error::ApiError;
use crate::metrics;
use crate::sessions::hub::{CloseReason, Control, SessionHandle};
use crate::state::Gateway;

/// How long a closing session waits for its writer to end (it gives its close frame 3 s).
const WRITER_GRACE: Duration = Duration::from_secs(4);
/// Operations of one session running at once; a client's `send` window beyond this waits in
/// its socket.
const MAX_IN_FLIGHT: usize = 32;
/// Ack ids of one session received and not yet recorded (waiting for the next batch, or being
/// recorded): a batch being recorded plus one full frame. Beyond this the session stops
/// reading its socket until a batch is recorded, so acks cost bounded memory however fast a
/// client sends them.
const MAX_PENDING_ACKS: usize = 2 * MAX_ACK_IDS;

/// What a unit of a session's work yields: the frame to answer with, and how many ack ids it
/// recorded (they stop counting against `MAX_PENDING_ACKS`).
type Done = (Option<String>, usize);

pub async fn serve(gw: Gateway, socket: WebSocket, agent: Agent, kind: SessionKind) {
    let cfg = gw.config().clone();
    let id = Uuid::new_v4();
    let (mut sink, mut stream) = socket.split();
    let (out_tx, out_rx) = mpsc::channel(cfg.outbound_buffer.max(2));
    let (ctl_tx, ctl_rx) = mpsc::unbounded_channel();
    let handle = Arc::new(SessionHandle::new(id, &agent, kind, out_tx, ctl_tx));
    let heartbeat_ms = cfg.heartbeat_interval().as_millis() as u64;
    // Queued before the session is reachable, so the welcome is always the first frame.
    let _ = handle.out.try_send(frames::welcome(id, &agent.tenant, &agent.identity, heartbeat_ms));

    let now = Utc::now();
    let entry = gw.lifecycle().entry(&agent, kind, Surface::Ws, now);
    gw.presence().open(id, entry);
    gw.hub().insert(handle.clone());
    // A rotation or a removal applied between authentication and the insert above did not see
    // this session: both update the registry before they close sessions, so asking it now
    // closes exactly the sessions they missed.
    if gw.registry().lookup(&agent.token_hash).is_none() {
        let removed = !gw.registry().is_registered(&agent.tenant, &agent.identity);
        handle.close(if removed { CloseReason::AgentRemoved } else { CloseReason::TokenRotated });
    }
    if let Err(e) = gw.lifecycle().record_opened(id, &agent, kind, Surface::Ws, now).await {
        tracing::warn!(error = %e, identity = %agent.identity, "session could not be recorded; closing it");
        gw.hub().remove(id);
        gw.presence().close(id);
        let frame = CloseFrame { code: CloseReason::Error.code(), reason: "the event stream is unavailable".into() };
        let _ = sink.send(Message::Close(Some(frame))).await;
        return;
    }
    metrics::session_opened(kind, Surface::Ws);
    tracing::info!(session_id = %id, tenant = %agent.tenant, identity = %agent.identity, kind = kind.as_str(), "session opened");

    let writer = tokio::spawn(writer::run(sink, out_rx, ctl_rx));
    let drain = tokio::spawn(gw.deliverer().clone().startup_drain(handle.clone()));

    let reason = read_loop(&gw, &handle, &mut stream).await;
    handle.close(reason);
    let reason = handle.reason().unwrap_or(reason);
    drain.abort();

    gw.hub().remove(id);
    gw.presence().close(id);
    if let Err(e) = gw.lifecycle().record_closed(id, &agent.tenant, &agent.identity, reason).await {
        tracing::warn!(error = %e, session_id = %id, "session close could not be recorded");
    }
    metrics::session_closed(handle.kind, Surface::Ws, reason.label());
    tracing::info!(session_id = %id, identity = %agent.identity, reason = reason.label(), "session closed");
    let _ = handle.control.send(Control::Close(reason));
    // The writer ends within its close-send timeout; should it not, the socket and the queue
    // still go now (an abandoned writer would hold both until the client hung up).
    let abort = writer.abort_handle();
    if tokio::time::timeout(WRITER_GRACE, writer).await.is_err() {
        tracing::warn!(session_id = %id, "writer did not finish in time; aborting it");
        abort.abort();
    }
}

async fn read_loop(gw: &Gateway, handle: &Arc<SessionHandle>, stream: &mut SplitStream<WebSocket>) -> CloseReason {
    let cfg = gw.config();
    let interval = cfg.heartbeat_interval();
    let mut tick = tokio::time::interval_at(Instant::now() + interval, interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut flush = tokio::time::interval(cfg.ack_flush_interval);
    flush.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_seen = Instant::now();
    let mut heard_since_heartbeat = false;
    let mut acks: Vec<Uuid> = Vec::new();
    // Ids in `acks` plus ids in batches being recorded.
    let mut acks_pending = 0usize;
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
                gw.hub().acks_recorded(acked);
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
                gw.presence().touch(handle.id, Utc::now());
                let reply = match msg {
                    Message::Text(text) => {
                        if text.len() > cfg.max_frame_bytes {
                            break CloseReason::FrameTooLarge;
                        }
                        match frames::step(text.as_str()) {
                            Step::Reply(r) => r,
                            Step::Run(ClientFrame { reference, op: Op::Ack(ids) }) => {
                                let reply = dispatch::acked(reference.as_deref(), ids.len());
                                acks_pending += ids.len();
                                gw.hub().acks_received(ids.len());
                                acks.extend(ids);
                                // A full frame's worth is recorded at once, not at the next tick.
                                if acks.len() >= MAX_ACK_IDS {
                                    inflight.push(record_acks(gw, handle, std::mem::take(&mut acks)));
                                }
                                reply
                            }
                            Step::Run(frame) => {
                                inflight.push(dispatch::run(gw, handle, Work::Op(frame)).map(|f| (f, 0)).boxed());
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
                    inflight.push(dispatch::run(gw, handle, Work::Heartbeat).map(|f| (f, 0)).boxed());
                }
            }
            _ = flush.tick(), if !acks.is_empty() => {
                inflight.push(record_acks(gw, handle, std::mem::take(&mut acks)));
            }
        }
    };
    // Operations already started finish (their appends may have happened; the client may
    // still read the answer), and acks received before the close still count: both are
    // recorded before `session.closed`.
    if !acks.is_empty() {
        inflight.push(record_acks(gw, handle, acks));
    }
    while let Some((reply, acked)) = inflight.next().await {
        gw.hub().acks_recorded(acked);
        if let Some(frame) = reply {
            handle.send(frame);
        }
    }
    reason
}

/// A batch of acks to record, counting its ids.
fn record_acks<'a>(gw: &'a Gateway, handle: &'a Arc<SessionHandle>, ids: Vec<Uuid>) -> BoxFuture<'a, Done> {
    let n = ids.len();
    dispatch::run(gw, handle, Work::Acks(ids)).map(move |f| (f, n)).boxed()
}

/// A read error is an oversized frame (close 1009), a text frame that is not UTF-8 (1007), any
/// other protocol violation (1002), or a connection that went away. axum hides tungstenite's
/// error type, so its text is what there is to go by.
fn classify(e: &axum::Error) -> CloseReason {
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
