//! Piggyback sessions over HTTP (CONTRACT §8): `POST /v1/sessions` opens one,
//! `DELETE /v1/sessions/{id}` closes it.
//!
//! Deliberately thin: opening and heartbeats live in `sessions::lifecycle` (through
//! `api::piggyback`), the drain in `delivery::drain`, the
//! compare-and-set close in `Lifecycle::close` (the same one the reaper gives a silent session).

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::Json;
use bus::event::{SessionKind, Surface};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::api::http::extract::{json_object, only_fields, opt_str, PathId};
use crate::auth::AgentAuth;
use crate::close::CloseReason;
use crate::error::ApiError;
use crate::metrics;
use crate::openapi::schemas::OpenSession;
use crate::state::Gateway;

/// A piggyback session just opened.
#[derive(Debug, Serialize, ToSchema)]
pub struct SessionOpenedBody {
    pub session_id: Uuid,
    /// `daemon`, `shim` or `interactive`.
    pub kind: String,
    /// Always `piggyback`.
    pub surface: String,
    /// Call at least this often to stay `available`.
    pub stale_after_ms: u64,
}

/// A piggyback session just closed.
#[derive(Debug, Serialize, ToSchema)]
pub struct SessionClosedBody {
    pub session_id: Uuid,
    pub closed: bool,
}

/// Opens a piggyback session for the caller.
#[utoipa::path(post, path = "/v1/sessions", tag = "sessions", operation_id = "open_session", request_body(content = OpenSession, description = "optional; an empty body means interactive"),
    responses((status = 200, description = "the session is open", body = SessionOpenedBody)))]
pub async fn open(
    State(gw): State<Gateway>,
    AgentAuth(agent): AgentAuth,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<SessionOpenedBody>, ApiError> {
    let map = json_object(body)?;
    only_fields(&map, &["kind"])?;
    let kind = match opt_str(&map, "kind")? {
        None => SessionKind::Interactive,
        Some(k) => SessionKind::parse(k)
            .ok_or_else(|| ApiError::invalid(format!("kind {k:?} must be daemon, shim or interactive")))?,
    };
    let id = gw.lifecycle().open_piggyback(&agent, kind).await?;
    Ok(Json(SessionOpenedBody {
        session_id: id,
        kind: kind.as_str().to_string(),
        surface: Surface::Piggyback.as_str().to_string(),
        stale_after_ms: gw.config().stale_after.as_millis() as u64,
    }))
}

/// Closes one of the caller's piggyback sessions. What was delivered to it and never acked
/// goes out again, `redelivered: true`, on the caller's next session.
#[utoipa::path(delete, path = "/v1/sessions/{id}", tag = "sessions", operation_id = "close_session",
    params(("id" = String, Path, description = "the session id")),
    responses((status = 200, description = "the session is closed", body = SessionClosedBody)))]
pub async fn close(
    State(gw): State<Gateway>,
    AgentAuth(agent): AgentAuth,
    PathId(id): PathId,
) -> Result<Json<SessionClosedBody>, ApiError> {
    let not_found = || ApiError::NotFound("no open piggyback session with that id for this agent".into());
    let entry = gw
        .presence()
        .get(id)
        .filter(|e| e.surface == Surface::Piggyback && e.tenant == agent.tenant && e.identity == agent.identity)
        .ok_or_else(not_found)?;
    if !gw.lifecycle().close(&agent.tenant, &agent.identity, id, CloseReason::ClientClosed, None).await? {
        return Err(not_found());
    }
    metrics::session_closed(entry.kind, Surface::Piggyback, CloseReason::ClientClosed.label());
    tracing::info!(session_id = %id, identity = %agent.identity, "piggyback session closed");
    Ok(Json(SessionClosedBody { session_id: id, closed: true }))
}
