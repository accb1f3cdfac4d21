//! Operational endpoints: liveness and readiness.
//!
//! Deliberately not `/metrics`: the binary owns the recorder and mounts the exporter.

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

use crate::error::ApiError;
use crate::state::Gateway;

/// The process is up.
#[utoipa::path(get, path = "/healthz", tag = "ops", responses((status = 200, description = "up", body = crate::openapi::schemas::Status)))]
pub async fn healthz() -> Json<Value> {
    Json(json!({ "status": "ok" }))
}

/// The stream and the database both answer.
#[utoipa::path(get, path = "/readyz", tag = "ops", responses((status = 200, description = "ready", body = crate::openapi::schemas::Status)))]
pub async fn readyz(State(gw): State<Gateway>) -> Result<Json<Value>, ApiError> {
    if let Err(e) = gw.log().ping().await {
        tracing::warn!(error = %e, "readiness: event stream unreachable");
        return Err(ApiError::Unavailable("the event stream is unreachable".into()));
    }
    if let Err(e) = gw.queries().ping().await {
        tracing::warn!(error = %e, "readiness: database unreachable");
        return Err(ApiError::Unavailable("the database is unreachable".into()));
    }
    Ok(Json(json!({ "status": "ready" })))
}
