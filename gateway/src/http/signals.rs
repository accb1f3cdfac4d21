//! `POST /v1/signals`, `POST /v1/signals/{id}/recall`, `GET /v1/signals/{id}`, and
//! `GET /v1/signals?role=&status=&limit=&cursor=` (newest first, opaque cursor paging).
//!
//! Deliberately thin: the send flow and recall live in `send.rs` and `commands.rs`, shared
//! with the WebSocket.

use std::collections::HashMap;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use bus::signal::RecallOutcome;
use chrono::{DateTime, Utc};
use projector::queries::{ListSignals, Role, StatusFilter};
use serde::Serialize;
use serde_json::{json, Value};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::AgentAuth;
use crate::error::ApiError;
use crate::http::{json_object, limit_param};
use crate::openapi::schemas::{RecallBody, SendAccepted, SendRequestBody, SignalRowBody};
use crate::state::Gateway;
use crate::{commands, metrics, send, wire};

/// How long a read waits for the read models to reach the stream's position.
const READ_CONSISTENCY_WAIT: Duration = Duration::from_secs(2);

/// Sends a signal as the authenticated agent (CONTRACT §4).
#[utoipa::path(post, path = "/v1/signals", tag = "signals", request_body = SendRequestBody,
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
#[utoipa::path(post, path = "/v1/signals/{id}/recall", tag = "signals",
    params(("id" = String, Path, description = "the signal id")),
    responses((status = 200, description = "recalled, already_delivered or already_expired", body = RecallBody),
              (status = 404, description = "not_found: unknown id, someone else's signal or a bounce", body = RecallBody)))]
pub async fn recall(State(gw): State<Gateway>, AgentAuth(agent): AgentAuth, Path(id): Path<String>) -> Response {
    let outcome = match Uuid::parse_str(&id) {
        Ok(id) => match commands::recall(&gw, &agent.tenant, &agent.identity, id).await {
            Ok(o) => o,
            Err(e) => return e.into_response(),
        },
        Err(_) => {
            metrics::recall(RecallOutcome::NotFound);
            RecallOutcome::NotFound
        }
    };
    let status = if outcome == RecallOutcome::NotFound { StatusCode::NOT_FOUND } else { StatusCode::OK };
    (status, Json(json!({ "outcome": outcome.as_str() }))).into_response()
}

/// One signal's row, for its sender or recipient.
#[utoipa::path(get, path = "/v1/signals/{id}", tag = "signals",
    params(("id" = String, Path, description = "the signal id")),
    responses((status = 200, description = "the row (CONTRACT §10 columns)", body = SignalRowBody)))]
pub async fn show(
    State(gw): State<Gateway>,
    AgentAuth(agent): AgentAuth,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let not_found = || ApiError::NotFound("signal not found".into());
    let id = Uuid::parse_str(&id).map_err(|_| not_found())?;
    // Read-your-writes: let the read models reach what the stream holds now, briefly.
    if let Ok(seq) = gw.log().last_seq().await {
        let _ = gw.queries().wait_for(seq, READ_CONSISTENCY_WAIT).await;
    }
    let row = gw.queries().signal(&agent.tenant, id).await?.ok_or_else(not_found)?;
    if row.from_identity != agent.identity && row.to_identity != agent.identity {
        return Err(not_found());
    }
    Ok(Json(wire::row_json(&row)))
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
#[utoipa::path(get, path = "/v1/signals", tag = "signals",
    params(("role" = Option<String>, Query, description = "sent or received (default both)"),
           ("status" = Option<String>, Query, description = "pending, delivered, expired or recalled"),
           ("limit" = Option<u32>, Query, minimum = 1, maximum = 1000, description = "page size (default 100)"),
           ("cursor" = Option<String>, Query, description = "next_cursor of the previous page")),
    responses((status = 200, description = "a page, newest first", body = SignalPage)))]
pub async fn list(
    State(gw): State<Gateway>,
    AgentAuth(agent): AgentAuth,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<SignalPage>, ApiError> {
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
    if let Ok(seq) = gw.log().last_seq().await {
        let _ = gw.queries().wait_for(seq, READ_CONSISTENCY_WAIT).await;
    }
    let query = ListSignals { tenant: agent.tenant, identity: agent.identity, role, status, limit, cursor };
    let rows = gw.queries().list_signals(&query).await?;
    let next_cursor = match rows.last() {
        Some(last) if rows.len() as u32 >= limit => Some(encode_cursor(last.created_at, last.id)),
        _ => None,
    };
    Ok(Json(SignalPage { signals: rows.iter().map(wire::row_json).collect(), next_cursor }))
}

/// The cursor is opaque to clients: hex of `created_at|id` of the last row of a page.
fn encode_cursor(at: DateTime<Utc>, id: Uuid) -> String {
    hex::encode(format!("{}|{id}", wire::ts(at)))
}

fn decode_cursor(c: &str) -> Result<(DateTime<Utc>, Uuid), ApiError> {
    let bad = || ApiError::invalid("cursor is not one this bus handed out");
    let text = hex::decode(c).ok().and_then(|b| String::from_utf8(b).ok()).ok_or_else(bad)?;
    let (at, id) = text.split_once('|').ok_or_else(bad)?;
    let at = DateTime::parse_from_rfc3339(at).map_err(|_| bad())?.with_timezone(&Utc);
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
        assert!(decode_cursor("zz").is_err());
        assert!(decode_cursor(&hex::encode("nope")).is_err());
    }
}
