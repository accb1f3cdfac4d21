//! `POST /v1/agents` (register), `POST /v1/agents/{identity}/token` (rotate),
//! `DELETE /v1/agents/{identity}` (remove), `GET /v1/agents`.
//!
//! Deliberately reads the request and shapes the answer only: registering and rotating are
//! `registration`, removing is `removal`. The token is shown once, in the response.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Query, State};
use axum::Json;
use bus::event::SessionKind;
use bus::names::validate_new_identity;
use serde_json::{json, Value};

use crate::api::http::extract::{json_object, only_fields, opt_str, PathIdentity};
use crate::auth::{AdminAuth, Authed};
use crate::error::ApiError;
use crate::reads;
use crate::registration;
use crate::state::Gateway;
use crate::wire::ts;

/// The tenant an admin call acts in (a tenant admin's own; see `AdminAuth::tenant`).
pub(crate) fn admin_tenant(gw: &Gateway, admin: &AdminAuth, named: Option<&str>) -> Result<String, ApiError> {
    admin.tenant(named, &gw.config().tenant_default)
}

/// Registers an agent and answers its token, once.
#[utoipa::path(post, path = "/v1/agents", tag = "agents", operation_id = "register_agent", request_body = crate::openapi::schemas::RegisterRequest,
    responses((status = 200, description = "registered", body = crate::openapi::schemas::AgentToken)))]
pub async fn register(
    State(gw): State<Gateway>,
    admin: AdminAuth,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let map = json_object(body)?;
    only_fields(&map, &["tenant", "identity", "kind"])?;
    let tenant = admin_tenant(&gw, &admin, opt_str(&map, "tenant")?)?;
    let identity = opt_str(&map, "identity")?.ok_or_else(|| ApiError::invalid("identity is required"))?.to_string();
    validate_new_identity(&identity)?;
    let kind = match opt_str(&map, "kind")? {
        None => SessionKind::Interactive,
        Some(k) => SessionKind::parse(k)
            .ok_or_else(|| ApiError::invalid(format!("kind {k:?} must be daemon, shim or interactive")))?,
    };
    let token = registration::register(&gw, &tenant, &identity, kind).await?;
    Ok(Json(json!({ "tenant": tenant, "identity": identity, "token": token })))
}

/// Rotates an agent's token: the old one stops working at once and its sessions close.
#[utoipa::path(post, path = "/v1/agents/{identity}/token", tag = "agents", operation_id = "rotate_agent_token",
    params(("identity" = String, Path), ("tenant" = Option<String>, Query, description = "default `default`")),
    responses((status = 200, description = "the new token", body = crate::openapi::schemas::AgentToken)))]
pub async fn rotate(
    State(gw): State<Gateway>,
    admin: AdminAuth,
    PathIdentity(identity): PathIdentity,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let tenant = admin_tenant(&gw, &admin, q.get("tenant").map(String::as_str))?;
    let token = registration::rotate(&gw, &tenant, &identity).await?;
    Ok(Json(json!({ "tenant": tenant, "identity": identity, "token": token })))
}

/// Removes an agent: its token stops working at once, its sessions close (1008), sends to it
/// are `unknown_recipient`, and its pending signals expire. Its history stays.
#[utoipa::path(delete, path = "/v1/agents/{identity}", tag = "agents", operation_id = "remove_agent",
    params(("identity" = String, Path), ("tenant" = Option<String>, Query, description = "default `default`")),
    responses((status = 200, description = "removed", body = crate::openapi::schemas::AgentRemoved)))]
pub async fn remove(
    State(gw): State<Gateway>,
    admin: AdminAuth,
    PathIdentity(identity): PathIdentity,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let tenant = admin_tenant(&gw, &admin, q.get("tenant").map(String::as_str))?;
    let removed = crate::removal::remove(&gw, &tenant, &identity).await?;
    Ok(Json(json!({
        "tenant": tenant,
        "identity": identity,
        "removed_at": ts(removed.removed_at),
        "signals_expired": removed.signals_expired,
    })))
}

/// The roster with recipient state: an agent's own tenant; the admin's `?tenant=`.
#[utoipa::path(get, path = "/v1/agents", tag = "agents", operation_id = "list_agents",
    params(("tenant" = Option<String>, Query)),
    responses((status = 200, description = "the roster", body = crate::openapi::schemas::AgentList)))]
pub async fn list(
    State(gw): State<Gateway>,
    Authed(principal): Authed,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let tenant = principal.tenant(q.get("tenant").map(String::as_str), &gw.config().tenant_default)?;
    Ok(Json(reads::roster(&gw, &tenant)))
}
