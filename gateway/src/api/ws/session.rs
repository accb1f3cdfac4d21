//! One WebSocket session from open to close: welcome, `session.opened`, startup drain, the
//! read loop, and an orderly close that records `session.closed`.
//!
//! Deliberately leaves reading to `reader.rs` (when work runs), writing to `writer.rs` (so a
//! slow socket never stalls the read loop) and the meaning of each operation to `dispatch.rs`.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, WebSocket};
use bus::event::{SessionKind, Surface};
use chrono::Utc;
use futures::future::BoxFuture;
use futures::{FutureExt, SinkExt, StreamExt};
use tokio::sync::mpsc;
use uuid::Uuid;

use crate::agent::Agent;
use crate::api::ws::dispatch::{self, Work};
use crate::api::ws::frames;
use crate::api::ws::reader::{self, Runner};
use crate::api::ws::writer;
use crate::close::CloseReason;
use crate::listener::CloseRoom;
use crate::metrics;
use crate::sessions::hub::{Control, SessionHandle};
use crate::state::Gateway;

/// How long a closing session waits for its writer to end (it gives its close frame 3 s).
const WRITER_GRACE: Duration = Duration::from_secs(4);

pub async fn serve(gw: Gateway, socket: WebSocket, agent: Agent, kind: SessionKind, room: Option<CloseRoom>) {
    let cfg = gw.config().clone();
    let id = Uuid::new_v4();
    let (mut sink, mut stream) = socket.split();
    let (out_tx, out_rx) = mpsc::channel(cfg.outbound_buffer.max(2));
    let (ctl_tx, ctl_rx) = mpsc::unbounded_channel();
    let handle = Arc::new(SessionHandle::new(id, &agent, kind, out_tx, ctl_tx));
    let heartbeat_ms = cfg.heartbeat_interval().as_millis() as u64;
    // Queued before the session is reachable, so the welcome is always the first frame.
    let _ = handle.out.try_send(frames::welcome(id, &agent.tenant, &agent.identity, heartbeat_ms).into());

    let now = Utc::now();
    // A session whose token lacks `receive` is no presence session (CONTRACT §17): never pushed
    // to, never making its agent available, so nothing of it goes to presence or the stream.
    let receives = agent.receives();
    if receives {
        gw.presence().open(id, gw.lifecycle().entry(&agent, kind, Surface::Ws, now));
    }
    gw.hub().insert(handle.clone());
    // A rotation, revocation or removal applied between authentication and the insert above did
    // not see this session: each updates the registry before it closes sessions, so asking it
    // now closes exactly the sessions they missed.
    if let Err(reason) = gw.authenticator().still_current(&agent, now) {
        handle.close(reason);
    }
    let expiry = agent.expires_at.map(|at| tokio::spawn(close_at_expiry(handle.clone(), at)));
    let opened = if receives {
        gw.lifecycle().record_opened(id, &agent, kind, Surface::Ws, now).await.map(Some)
    } else {
        Ok(None)
    };
    // The startup drain covers the stream up to the session's own `session.opened`, fixed before
    // the client can see the welcome: a signal sent once the client knows it is connected is
    // pushed (`ws_push`, recorded with its send when this node holds the session), never left
    // to the drain.
    if let Ok(Some(seq)) = opened {
        handle.drain_target.send_replace(Some(seq));
    }
    if let Err(e) = opened {
        tracing::warn!(error = %e, identity = %agent.identity, "session could not be recorded; closing it");
        gw.hub().remove(id);
        gw.presence().close(id);
        expiry.inspect(tokio::task::JoinHandle::abort);
        let frame = CloseFrame { code: CloseReason::Error.code(), reason: "the event stream is unavailable".into() };
        let _ = sink.send(Message::Close(Some(frame))).await;
        return;
    }
    metrics::session_opened(kind, Surface::Ws);
    tracing::info!(session_id = %id, tenant = %agent.tenant, identity = %agent.identity, kind = kind.as_str(), "session opened");

    let writer = tokio::spawn(writer::run(sink, out_rx, ctl_rx, room));
    let drain = receives.then(|| tokio::spawn(gw.deliverer().clone().startup_drain(handle.clone())));

    let live = Live { gw: &gw, handle: &handle };
    let reason = reader::read_loop(&reader::Settings::of(&cfg), &live, &handle, &mut stream).await;
    handle.close(reason);
    let reason = handle.reason().unwrap_or(reason);
    drain.inspect(tokio::task::JoinHandle::abort);
    expiry.inspect(tokio::task::JoinHandle::abort);

    gw.hub().remove(id);
    gw.presence().close(id);
    if receives {
        if let Err(e) = gw.lifecycle().record_closed(id, &agent.tenant, &agent.identity, reason).await {
            tracing::warn!(error = %e, session_id = %id, "session close could not be recorded");
        }
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

/// Closes a session when its token expires (CONTRACT §17: 1008, "token expired").
async fn close_at_expiry(handle: Arc<SessionHandle>, at: chrono::DateTime<Utc>) {
    let wait = (at - Utc::now()).to_std().unwrap_or_default();
    tokio::select! {
        _ = handle.closing().cancelled() => {}
        _ = tokio::time::sleep(wait) => handle.close(CloseReason::TokenExpired),
    }
}

/// The runner of a live session: its work goes through `dispatch.rs` against the gateway.
struct Live<'a> {
    gw: &'a Gateway,
    handle: &'a SessionHandle,
}

impl Runner for Live<'_> {
    fn run(&self, work: Work) -> BoxFuture<'_, Option<String>> {
        dispatch::run(self.gw, self.handle, work).boxed()
    }

    fn heard(&self) {
        self.gw.presence().touch(self.handle.id, Utc::now());
    }

    fn acks_received(&self, n: usize) {
        self.gw.hub().acks_received(n);
    }

    fn acks_recorded(&self, n: usize) {
        self.gw.hub().acks_recorded(n);
    }
}
