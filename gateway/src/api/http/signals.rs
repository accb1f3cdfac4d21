//! `POST /v1/signals`, `POST /v1/signals/{id}/recall`, `GET /v1/signals/{id}`, and
//! `GET /v1/signals?role=&status=&limit=&cursor=` (newest first, opaque cursor paging).
//!
//! Deliberately thin: the send flow and recall live in `send.rs` and `commands.rs`, shared
//! with the WebSocket.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use bus::signal::RecallOutcome;
use chrono::{DateTime, Utc};
use projector::queries::{ListSignals, Role, StatusFilter};
use serde::Serialize;
use serde_json::{json, Value};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::api::http::extract::{json_object, limit_param, PathId};
use crate::api::piggyback::OwnSignals;
use crate::auth::AgentAuth;
use crate::error::ApiError;
use crate::openapi::schemas::{RecallBody, SendAccepted, SendRequestBody, SignalRowBody};
use crate::state::Gateway;
use crate::{commands, reads, send, wire};

/// Sends a signal as the authenticated agent (CONTRACT §4).
#[utoipa::path(post, path = "/v1/signals", tag = "signals", operation_id = "send_signal", request_body = SendRequestBody,
    responses((status = 200, description = "accepted: pushed, buffered or queued", body = SendAccepted)))]
pub async fn send(
    State(gw): State<Gateway>,
    AgentAuth(agent): AgentAuth,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let req = wire::parse_send(&json_object(body)?)?;
    Ok(Json(send::send(&gw, &agent.tenant, &agent.identity, req).await?))
}

/// Recalls a signal the caller sent (CONTRACT §6).
#[utoipa::path(post, path = "/v1/signals/{id}/recall", tag = "signals", operation_id = "recall_signal",
    params(("id" = String, Path, description = "the signal id")),
    responses((status = 200, description = "recalled, already_delivered or already_expired", body = RecallBody),
              (status = 404, description = "not_found: unknown id, someone else's signal or a bounce", body = RecallBody)))]
pub async fn recall(State(gw): State<Gateway>, AgentAuth(agent): AgentAuth, PathId(id): PathId) -> Response {
    let outcome = match commands::recall(&gw, &agent.tenant, &agent.identity, id).await {
        Ok(o) => o,
        Err(e) => return e.into_response(),
    };
    let status = if outcome == RecallOutcome::NotFound { StatusCode::NOT_FOUND } else { StatusCode::OK };
    (status, Json(json!({ "outcome": outcome.as_str() }))).into_response()
}

/// One signal's row, for its sender or recipient.
#[utoipa::path(get, path = "/v1/signals/{id}", tag = "signals", operation_id = "get_signal",
    params(("id" = String, Path, description = "the signal id")),
    responses((status = 200, description = "the row (CONTRACT §10 columns)", body = SignalRowBody)))]
pub async fn show(
    State(gw): State<Gateway>,
    AgentAuth(agent): AgentAuth,
    PathId(id): PathId,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(reads::signal(&gw, &agent, &id.to_string()).await?))
}

/// A page of the caller's signals.
#[derive(Debug, Serialize, ToSchema)]
pub struct SignalPage {
    #[schema(value_type = Vec<SignalRowBody>)]
    pub signals: Vec<Value>,
    /// Pass as `cursor` for the next page; `null` on the last one.
    pub next_cursor: Option<String>,
}

/// The caller's signals, newest first.
#[utoipa::path(get, path = "/v1/signals", tag = "signals", operation_id = "list_signals",
    params(("role" = Option<String>, Query, description = "sent or received (default both)"),
           ("status" = Option<String>, Query, description = "pending, delivered, expired or recalled"),
           ("limit" = Option<u32>, Query, minimum = 1, maximum = 1000, description = "page size (default 100)"),
           ("cursor" = Option<String>, Query, description = "next_cursor of the previous page")),
    responses((status = 200, description = "a page, newest first", body = SignalPage)))]
pub async fn list(
    State(gw): State<Gateway>,
    AgentAuth(agent): AgentAuth,
    Query(q): Query<HashMap<String, String>>,
) -> Result<(Extension<OwnSignals>, Json<SignalPage>), ApiError> {
    let role = match q.get("role").map(String::as_str) {
        None => None,
        Some("sent") => Some(Role::Sent),
        Some("received") => Some(Role::Received),
        Some(_) => return Err(ApiError::invalid("role must be sent or received")),
    };
    let status = match q.get("status").map(String::as_str) {
        None => None,
        Some("pending") => Some(StatusFilter::Pending),
        Some("delivered") => Some(StatusFilter::Delivered),
        Some("expired") => Some(StatusFilter::Expired),
        Some("recalled") => Some(StatusFilter::Recalled),
        Some(_) => return Err(ApiError::invalid("status must be pending, delivered, expired or recalled")),
    };
    let limit = limit_param(&q, 100)?;
    let cursor = q.get("cursor").map(|c| decode_cursor(c)).transpose()?;
    reads::consistent(&gw).await;
    let query = ListSignals { tenant: agent.tenant, identity: agent.identity, role, status, limit, cursor };
    let rows = gw.queries().list_signals(&query).await?;
    let next_cursor = match rows.last() {
        Some(last) if rows.len() as u32 >= limit => Some(encode_cursor(last.created_at, last.id)),
        _ => None,
    };
    Ok((Extension(OwnSignals), Json(SignalPage { signals: rows.iter().map(wire::row_json).collect(), next_cursor })))
}

/// What a cursor looks like (declared in the OpenAPI document): every string of this shape is
/// a position `decode_cursor` accepts, and nothing else is.
pub const CURSOR_PATTERN: &str = "^[0-9]{1,16}-[0-9a-f]{32}$";

/// The cursor is opaque to clients: `<created_at in µs since the epoch>-<id, 32 hex digits>` of
/// the last row of a page.
fn encode_cursor(at: DateTime<Utc>, id: Uuid) -> String {
    format!("{}-{}", at.timestamp_micros(), id.simple())
}

fn decode_cursor(c: &str) -> Result<(DateTime<Utc>, Uuid), ApiError> {
    let bad = || ApiError::invalid("cursor is not one this bus handed out");
    let (micros, id) = c.split_once('-').ok_or_else(bad)?;
    let digits = |s: &str, max: usize, ok: fn(&u8) -> bool| (1..=max).contains(&s.len()) && s.bytes().all(|b| ok(&b));
    if !digits(micros, 16, u8::is_ascii_digit)
        || id.len() != 32
        || !digits(id, 32, |b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    {
        return Err(bad());
    }
    let at = micros.parse().ok().and_then(DateTime::from_timestamp_micros).ok_or_else(bad)?;
    Ok((at, Uuid::parse_str(id).map_err(|_| bad())?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_garbage_is_refused() {
        let at = DateTime::parse_from_rfc3339("2026-05-03T12:00:00.123456Z").unwrap().with_timezone(&Utc);
        let id = Uuid::new_v4();
        assert_eq!(decode_cursor(&encode_cursor(at, id)).unwrap(), (at, id));
        assert!(encode_cursor(at, id).len() <= 16 + 1 + 32);
        for garbage in ["zz", "", "-", "1-", &format!("-{}", id.simple()), &format!("1-{}", id.simple()).to_uppercase()]
        {
            assert!(decode_cursor(garbage).is_err(), "{garbage:?}");
        }
        assert!(decode_cursor(&format!("{}-{id}", at.timestamp_micros())).is_err(), "hyphenated ids are not cursors");
        // Every string of the declared shape is a cursor, the extremes included.
        for ok in [format!("0-{}", "0".repeat(32)), format!("{}-{}", "9".repeat(16), "f".repeat(32))] {
            assert!(decode_cursor(&ok).is_ok(), "{ok}");
        }
    }
}
