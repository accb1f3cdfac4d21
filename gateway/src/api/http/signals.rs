//! `POST /v1/signals`, `POST /v1/signals/{id}/recall`, `GET /v1/signals/{id}`, and
//! `GET /v1/signals?role=&status=&correlation_id=&limit=&cursor=` (newest first, or one
//! conversation oldest first; opaque cursor paging).
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
use serde::Serialize;
use serde_json::{json, Value};
use utoipa::ToSchema;

use crate::api::http::extract::{json_object, PathId};
use crate::api::piggyback::OwnSignals;
use crate::auth::AgentAuth;
use crate::error::ApiError;
use crate::openapi::schemas::{RecallBody, SendAccepted, SendRequestBody, SignalRowBody};
use crate::state::Gateway;
use crate::{commands, fanout, reads, wire};

/// Sends a signal as the authenticated agent (CONTRACT §4).
#[utoipa::path(post, path = "/v1/signals", tag = "signals", operation_id = "send_signal", request_body = SendRequestBody,
    responses((status = 200, description = "accepted: pushed, buffered or queued", body = SendAccepted)))]
pub async fn send(
    State(gw): State<Gateway>,
    AgentAuth(agent): AgentAuth,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<wire::SendAnswer>, ApiError> {
    let req = wire::parse_send(json_object(body)?)?;
    Ok(Json(fanout::send_any(&gw, &agent.tenant, &agent.identity, req).await?))
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

/// The caller's signals, newest first; with `correlation_id`, that conversation's, oldest first.
#[utoipa::path(get, path = "/v1/signals", tag = "signals", operation_id = "list_signals",
    params(("role" = Option<String>, Query, description = "sent or received (default both)"),
           ("status" = Option<String>, Query, description = "pending, delivered, expired or recalled"),
           ("correlation_id" = Option<String>, Query,
            description = "only the signals you sent or received with this correlation id (a conversation), oldest first"),
           ("limit" = Option<u32>, Query, minimum = 1, maximum = 1000, description = "page size (default 100)"),
           ("cursor" = Option<String>, Query, description = "next_cursor of the previous page of the same listing")),
    responses((status = 200, description = "a page, newest first (oldest first with correlation_id)", body = SignalPage)))]
pub async fn list(
    State(gw): State<Gateway>,
    AgentAuth(agent): AgentAuth,
    Query(q): Query<HashMap<String, String>>,
) -> Result<(Extension<OwnSignals>, Json<Value>), ApiError> {
    let req = wire::SignalList::from_query(&q)?;
    Ok((Extension(OwnSignals), Json(reads::signals(&gw, &agent, req).await?)))
}
