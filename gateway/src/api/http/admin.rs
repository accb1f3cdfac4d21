//! `POST /v1/admin/rebuild` and `GET /v1/admin/doctor` (admin only), through the optional
//! `AdminOps` hook of the configuration; `POST /v1/admin/signals/expire`, the operator's
//! force-expire (CONTRACT §16).
//!
//! Deliberately does no work itself: the projector rebuilds and diagnoses (a process started
//! without the hook answers `unavailable`); `force_expire` expires.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::Json;
use serde_json::Value;

use crate::admin::{AdminOps, DoctorSummary, RebuildSummary};
use crate::api::http::extract::json_object;
use crate::auth::AdminAuth;
use crate::error::ApiError;
use crate::force_expire;
use crate::openapi::expire_schemas::{ForceExpireAnswer, ForceExpireBody};
use crate::state::Gateway;
use crate::wire::expire::{dry_run_json, expired_json, parse_force_expire};

fn ops(gw: &Gateway) -> Result<Arc<dyn AdminOps>, ApiError> {
    gw.config()
        .admin_ops
        .clone()
        .ok_or_else(|| ApiError::Unavailable("admin operations are not available on this process".into()))
}

/// Rebuilds every read model from the stream and swaps the result in.
#[utoipa::path(post, path = "/v1/admin/rebuild", tag = "admin", operation_id = "rebuild_read_models",
    responses((status = 200, description = "the read models were rebuilt", body = RebuildSummary)))]
pub async fn rebuild(State(gw): State<Gateway>, admin: AdminAuth) -> Result<Json<RebuildSummary>, ApiError> {
    admin.global()?;
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
pub async fn doctor(State(gw): State<Gateway>, admin: AdminAuth) -> Result<Json<DoctorSummary>, ApiError> {
    admin.global()?;
    match ops(&gw)?.doctor().await {
        Ok(r) => Ok(Json(r)),
        Err(detail) => {
            tracing::error!(error = %detail, "doctor failed");
            Err(ApiError::Unavailable("the doctor could not run; check the stream and the database".into()))
        }
    }
}

/// Expires every pending signal the filters match, each by compare-and-set against its
/// delivery (a signal being delivered at that instant ends delivered or expired, never both);
/// with `dry_run`, expires nothing and lists what would expire.
#[utoipa::path(post, path = "/v1/admin/signals/expire", tag = "admin", operation_id = "force_expire_signals",
    request_body = ForceExpireBody,
    responses((status = 200, description = "`{expired, skipped}`; with `dry_run`, `{would_expire, count}`", body = ForceExpireAnswer)))]
pub async fn force_expire(
    State(gw): State<Gateway>,
    admin: AdminAuth,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let req = parse_force_expire(&json_object(body)?)?;
    // The filter names its tenant (required); a tenant admin may only name its own.
    admin.tenant(Some(&req.filter.tenant), &gw.config().tenant_default)?;
    if req.dry_run {
        let found = force_expire::dry_run(&gw, req.filter).await?;
        return Ok(Json(dry_run_json(&found.listed, found.count)));
    }
    let tenant = req.filter.tenant.clone();
    let done = force_expire::expire(&gw, req.filter).await?;
    tracing::info!(tenant, expired = done.expired, skipped = done.skipped, "signals force-expired");
    Ok(Json(expired_json(done.expired, done.skipped)))
}
