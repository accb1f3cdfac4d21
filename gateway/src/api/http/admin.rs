//! `POST /v1/admin/rebuild` and `GET /v1/admin/doctor` (admin only), through the optional
//! `AdminOps` hook of the configuration.
//!
//! Deliberately does no work itself: the projector rebuilds and diagnoses; a process started
//! without the hook answers `unavailable`.

use std::sync::Arc;

use axum::extract::State;
use axum::Json;

use crate::admin::{AdminOps, DoctorSummary, RebuildSummary};
use crate::auth::AdminAuth;
use crate::error::ApiError;
use crate::state::Gateway;

fn ops(gw: &Gateway) -> Result<Arc<dyn AdminOps>, ApiError> {
    gw.config()
        .admin_ops
        .clone()
        .ok_or_else(|| ApiError::Unavailable("admin operations are not available on this process".into()))
}

/// Rebuilds every read model from the stream and swaps the result in.
#[utoipa::path(post, path = "/v1/admin/rebuild", tag = "admin", operation_id = "rebuild_read_models",
    responses((status = 200, description = "the read models were rebuilt", body = RebuildSummary)))]
pub async fn rebuild(State(gw): State<Gateway>, _admin: AdminAuth) -> Result<Json<RebuildSummary>, ApiError> {
    match ops(&gw)?.rebuild().await {
        Ok(r) => Ok(Json(r)),
        Err(detail) => {
            tracing::error!(error = %detail, "rebuild failed");
            Err(ApiError::Unavailable("the rebuild failed; the previous read models stay in place".into()))
        }
    }
}

/// Checks the stream, the database, projector lag and the read-model invariants.
#[utoipa::path(get, path = "/v1/admin/doctor", tag = "admin", operation_id = "run_doctor",
    responses((status = 200, description = "the report; `ok` is false when a check failed", body = DoctorSummary)))]
pub async fn doctor(State(gw): State<Gateway>, _admin: AdminAuth) -> Result<Json<DoctorSummary>, ApiError> {
    match ops(&gw)?.doctor().await {
        Ok(r) => Ok(Json(r)),
        Err(detail) => {
            tracing::error!(error = %detail, "doctor failed");
            Err(ApiError::Unavailable("the doctor could not run; check the stream and the database".into()))
        }
    }
}
