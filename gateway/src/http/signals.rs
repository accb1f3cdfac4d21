//! `POST /v1/signals`, `POST /v1/signals/{id}/recall`, `GET /v1/signals/{id}`.
//!
//! Deliberately thin: the send flow and recall live in `send.rs` and `commands.rs`, shared
//! with the WebSocket.

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use bus::signal::RecallOutcome;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::auth::AgentAuth;
use crate::error::ApiError;
use crate::http::json_object;
use crate::state::Gateway;
use crate::{commands, metrics, send, wire};

/// How long a read waits for the read models to reach the stream's position.
const READ_CONSISTENCY_WAIT: Duration = Duration::from_secs(2);

pub async fn send(
    State(gw): State<Gateway>,
    AgentAuth(agent): AgentAuth,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let req = wire::parse_send(&json_object(body)?)?;
    Ok(Json(send::send(&gw, &agent.tenant, &agent.identity, req).await?))
}

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
