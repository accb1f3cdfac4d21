//! `GET /v1/ws` (CONTRACT §7): authenticates the upgrade and hands the socket to a session.
//!
//! Deliberately only the entry point: frames, the session's open and close, its read loop, the
//! writer and the dispatcher each live in their own file.

pub mod frames;

mod dispatch;
mod reader;
#[cfg(test)]
mod reader_tests;
mod session;
mod writer;

use std::collections::HashMap;

use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::{Query, State, WebSocketUpgrade};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Extension;
use bus::event::SessionKind;

use crate::auth::{bearer, Principal};
use crate::error::ApiError;
use crate::listener::CloseRoom;
use crate::state::Gateway;

/// Bytes read from a session's socket per read call (and what an idle session keeps).
const READ_BUFFER_BYTES: usize = 2 * 1024;
/// Frames buffered before tungstenite writes them out even without a flush (`writer.rs`
/// flushes after each burst).
const WRITE_BATCH_BYTES: usize = 16 * 1024;

pub async fn upgrade(
    State(gw): State<Gateway>,
    Query(params): Query<HashMap<String, String>>,
    headers: HeaderMap,
    room: Option<Extension<CloseRoom>>,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    match accept(&gw, &params, &headers) {
        Ok((agent, kind)) => {
            // A plain GET (no upgrade) gets the JSON error body every other endpoint gives.
            let Ok(ws) = ws else {
                return ApiError::invalid("this endpoint needs a websocket upgrade (see docs/protocol.md)")
                    .into_response();
            };
            let limit = gw.config().max_frame_bytes;
            let tasks = gw.tasks().clone();
            let room = room.map(|Extension(r)| r);
            ws.max_message_size(limit)
                .max_frame_size(limit)
                // tungstenite's defaults (128 KiB read, 128 KiB write target) were most of an
                // idle session's memory. The read buffer is only the per-read chunk: a larger
                // frame's buffer grows as its bytes arrive (the workspace's patched tungstenite,
                // vendor/tungstenite/PATCHED.md; upstream reserves the length a header merely
                // announces, so 14 bytes pinned a megabyte). Writes collect up to
                // `WRITE_BATCH_BYTES` of a burst of frames before the writer's flush; an idle
                // session never fills it, so it keeps only what its largest write needed.
                .read_buffer_size(READ_BUFFER_BYTES)
                .write_buffer_size(WRITE_BATCH_BYTES)
                // Bounds what piles up only if writes keep failing: two of the largest frames.
                .max_write_buffer_size(2 * limit.max(READ_BUFFER_BYTES))
                .on_upgrade(move |socket| tasks.track_future(session::serve(gw, socket, agent, kind, room)))
        }
        Err(e) => e.into_response(),
    }
}

fn accept(
    gw: &Gateway,
    params: &HashMap<String, String>,
    headers: &HeaderMap,
) -> Result<(crate::agent::Agent, SessionKind), ApiError> {
    if gw.shutdown_token().is_cancelled() {
        return Err(ApiError::Unavailable("the server is shutting down".into()));
    }
    let token = bearer(headers)
        .or(params.get("token").map(String::as_str))
        .ok_or_else(|| ApiError::Unauthorized("missing token: send Authorization: Bearer or ?token=".into()))?;
    let agent = match gw.authenticator().authenticate(token)? {
        Principal::Agent(a) => a,
        Principal::Admin(_) => {
            return Err(ApiError::Forbidden("sessions need an agent token, not an admin token".into()))
        }
    };
    let kind = match params.get("kind") {
        None => SessionKind::Interactive,
        Some(k) => SessionKind::parse(k)
            .ok_or_else(|| ApiError::invalid(format!("kind {k:?} must be daemon, shim or interactive")))?,
    };
    Ok((agent, kind))
}
