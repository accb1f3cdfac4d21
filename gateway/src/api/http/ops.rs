//! Operational endpoints: liveness and readiness.
//!
//! Deliberately not `/metrics`: the binary owns the recorder and mounts the exporter.

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

use crate::error::ApiError;
use crate::state::Gateway;

/// The process is up.
#[utoipa::path(get, path = "/healthz", tag = "ops", operation_id = "healthz", responses((status = 200, description = "up", body = crate::openapi::schemas::Status)))]
pub async fn healthz() -> Json<Value> {
    Json(json!({ "status": "ok" }))
}

/// The stream and the database both answer, and projection is healthy: nothing was
/// dead-lettered and the read models are not stuck behind the stream (`projector::health`).
#[utoipa::path(get, path = "/readyz", tag = "ops", operation_id = "readyz", responses((status = 200, description = "ready", body = crate::openapi::schemas::Status)))]
pub async fn readyz(State(gw): State<Gateway>) -> Result<Json<Value>, ApiError> {
    if let Err(e) = gw.log().ping().await {
        tracing::warn!(error = %e, "readiness: event stream unreachable");
        return Err(ApiError::Unavailable("the event stream is unreachable".into()));
    }
    if let Err(e) = gw.queries().ping().await {
        tracing::warn!(error = %e, "readiness: database unreachable");
        return Err(ApiError::Unavailable("the database is unreachable".into()));
    }
    match projector::health::problems(gw.log(), gw.queries().as_ref()).await {
        Ok(problems) if problems.is_empty() => {}
        Ok(problems) => {
            for p in &problems {
                tracing::warn!(check = p.check, detail = %p.detail, fix = %p.fix, "readiness: projection unhealthy");
            }
            // The summaries only: `/readyz` answers anyone, and the detail names tenants.
            let summary: Vec<&str> = problems.iter().map(|p| p.summary.as_str()).collect();
            return Err(ApiError::Unavailable(summary.join("; ")));
        }
        Err(e) => {
            tracing::warn!(error = %e, "readiness: projection health unknown");
            return Err(ApiError::Unavailable("the health of the read models cannot be checked".into()));
        }
    }
    Ok(Json(json!({ "status": "ready" })))
}
