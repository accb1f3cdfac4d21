//! `POST|GET /v1/agents/{identity}/tokens`, `DELETE /v1/agents/{identity}/tokens/{token_id}`
//! (an agent's scoped, expiring tokens) and `POST|GET /v1/admin/tokens`,
//! `DELETE /v1/admin/tokens/{token_id}` (tenant admin tokens) — CONTRACT §17.
//!
//! Deliberately reads the request and shapes the answer only: the rules are `tokens` (and
//! `bus`), the tenant check `AdminAuth`. A token's secret appears in its issue answer, once.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Json;
use bus::scope::ScopeSet;
use chrono::Utc;
use serde_json::{json, Map, Value};
use uuid::Uuid;

use crate::api::http::agents::admin_tenant;
use crate::api::http::extract::{json_object, only_fields, opt_str, PathIdentity};
use crate::auth::AdminAuth;
use crate::error::ApiError;
use crate::openapi::token_schemas::{
    AdminTokenIssued, AdminTokenList, IssueTokenBody, IssuedTokenBody, NewAdminTokenBody, TokenList, TokenRevoked,
};
use crate::state::Gateway;
use crate::tokens::{self, MAX_EXPIRES_IN_SECONDS};
use crate::wire::ts;

/// The id the registration token is listed under.
const REGISTRATION: &str = "registration";

fn scopes_of(map: &Map<String, Value>) -> Result<ScopeSet, ApiError> {
    let names = match map.get("scopes") {
        None | Some(Value::Null) => return Ok(ScopeSet::all()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().ok_or_else(|| ApiError::invalid("scopes must be a list of scope names")))
            .collect::<Result<Vec<_>, _>>()?,
        Some(_) => return Err(ApiError::invalid("scopes must be a list of scope names")),
    };
    let scopes = ScopeSet::parse(names).map_err(|unknown| {
        ApiError::invalid(format!("unknown scope {unknown:?}: one of send, receive, recall, facts, directives, read"))
    })?;
    if scopes.is_empty() {
        return Err(ApiError::invalid("scopes must name at least one scope (omit it for every scope)"));
    }
    Ok(scopes)
}

fn expires_in_of(map: &Map<String, Value>) -> Result<Option<u64>, ApiError> {
    match map.get("expires_in_seconds") {
        None | Some(Value::Null) => Ok(None),
        // A whole number written as a float (`3600.0`) is still that whole number (JSON Schema's
        // `integer` says so).
        Some(v) => v
            .as_u64()
            .or_else(|| v.as_f64().filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= u64::MAX as f64).map(|f| f as u64))
            .filter(|s| (1..=MAX_EXPIRES_IN_SECONDS).contains(s))
            .map(Some)
            .ok_or_else(|| {
                ApiError::invalid(format!(
                "expires_in_seconds must be a whole number from 1 to {MAX_EXPIRES_IN_SECONDS} (omit it for no expiry)"
            ))
            }),
    }
}

fn token_id_of(text: &str) -> Result<Uuid, ApiError> {
    if text == REGISTRATION {
        return Err(ApiError::invalid(
            "the registration token is replaced by rotating it (POST /v1/agents/{identity}/token), not revoked",
        ));
    }
    crate::wire::canonical_uuid(text).ok_or_else(|| ApiError::NotFound(format!("no token {text:?}")))
}

/// Issues a token of the agent with the scopes asked (every scope when omitted); the secret is
/// in this answer only.
#[utoipa::path(post, path = "/v1/agents/{identity}/tokens", tag = "tokens", operation_id = "issue_agent_token",
    params(("identity" = String, Path), ("tenant" = Option<String>, Query, description = "default `default`; a tenant admin's own")),
    request_body = IssueTokenBody,
    responses((status = 201, description = "the token, once", body = IssuedTokenBody)))]
pub async fn issue(
    State(gw): State<Gateway>,
    admin: AdminAuth,
    PathIdentity(identity): PathIdentity,
    Query(q): Query<HashMap<String, String>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let tenant = admin_tenant(&gw, &admin, q.get("tenant").map(String::as_str))?;
    let map = json_object(body)?;
    only_fields(&map, &["scopes", "expires_in_seconds", "label"])?;
    let scopes = scopes_of(&map)?;
    let expires_in = expires_in_of(&map)?;
    let label = opt_str(&map, "label")?.map(str::to_string);
    tokens::check_label(label.as_deref())?;
    let t = tokens::issue(&gw, &tenant, &identity, scopes, expires_in, label).await?;
    let body = json!({
        "token_id": t.token_id, "token": t.token, "scopes": t.scopes.names(),
        "expires_at": t.expires_at.map(ts), "label": t.label,
    });
    Ok((StatusCode::CREATED, Json(body)))
}

/// The agent's tokens, without secrets: the registration token first, then the issued ones.
#[utoipa::path(get, path = "/v1/agents/{identity}/tokens", tag = "tokens", operation_id = "list_agent_tokens",
    params(("identity" = String, Path), ("tenant" = Option<String>, Query)),
    responses((status = 200, description = "the tokens", body = TokenList)))]
pub async fn list(
    State(gw): State<Gateway>,
    admin: AdminAuth,
    PathIdentity(identity): PathIdentity,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let tenant = admin_tenant(&gw, &admin, q.get("tenant").map(String::as_str))?;
    let entry =
        gw.registry().get(&tenant, &identity).ok_or_else(|| ApiError::NotFound(format!("no agent {identity:?}")))?;
    let now = Utc::now();
    let mut out = vec![json!({
        "token_id": REGISTRATION, "label": REGISTRATION, "scopes": ScopeSet::all().names(),
        "expires_at": null, "issued_at": ts(entry.registered_at), "expired": false,
    })];
    for (id, t) in tokens::list(&gw, &tenant, &identity)? {
        out.push(json!({
            "token_id": id, "label": t.label, "scopes": t.scopes.names(), "expires_at": t.expires_at.map(ts),
            "issued_at": ts(t.issued_at), "expired": t.expires_at.is_some_and(|at| at <= now),
        }));
    }
    Ok(Json(json!({ "tenant": tenant, "identity": identity, "tokens": out })))
}

/// Revokes one token at once, on every gateway; its sessions close with 1008. Idempotent.
#[utoipa::path(delete, path = "/v1/agents/{identity}/tokens/{token_id}", tag = "tokens", operation_id = "revoke_agent_token",
    params(("identity" = String, Path), ("token_id" = String, Path), ("tenant" = Option<String>, Query)),
    responses((status = 200, description = "revoked", body = TokenRevoked)))]
pub async fn revoke(
    State(gw): State<Gateway>,
    admin: AdminAuth,
    path: Result<Path<(String, String)>, PathRejection>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let Path((identity, token_id)) = path.map_err(|_| ApiError::invalid("the path parameters could not be read"))?;
    bus::names::validate_identity(&identity)?;
    let tenant = admin_tenant(&gw, &admin, q.get("tenant").map(String::as_str))?;
    let token_id = token_id_of(&token_id)?;
    tokens::revoke(&gw, &tenant, &identity, token_id).await?;
    Ok(Json(json!({ "token_id": token_id, "revoked": true })))
}

/// Issues a token that is admin inside one tenant only (the global admin only).
#[utoipa::path(post, path = "/v1/admin/tokens", tag = "tokens", operation_id = "create_tenant_admin_token",
    request_body = NewAdminTokenBody,
    responses((status = 201, description = "the token, once", body = AdminTokenIssued)))]
pub async fn create_admin(
    State(gw): State<Gateway>,
    admin: AdminAuth,
    body: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    admin.global()?;
    let map = json_object(body)?;
    only_fields(&map, &["tenant", "label"])?;
    let tenant = opt_str(&map, "tenant")?.ok_or_else(|| ApiError::invalid("tenant is required"))?.to_string();
    bus::names::validate_tenant(&tenant)?;
    let label = opt_str(&map, "label")?.map(str::to_string);
    tokens::check_label(label.as_deref())?;
    let (token_id, token) = tokens::issue_admin(&gw, &tenant, label.clone()).await?;
    let body = json!({ "token_id": token_id, "token": token, "tenant": tenant, "label": label });
    Ok((StatusCode::CREATED, Json(body)))
}

/// The tenant admin tokens in force: a tenant admin sees its own tenant's.
#[utoipa::path(get, path = "/v1/admin/tokens", tag = "tokens", operation_id = "list_tenant_admin_tokens",
    params(("tenant" = Option<String>, Query, description = "all tenants when omitted (global admin)")),
    responses((status = 200, description = "the tokens, without secrets", body = AdminTokenList)))]
pub async fn list_admin(
    State(gw): State<Gateway>,
    admin: AdminAuth,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let named = q.get("tenant").map(String::as_str);
    let tenant = match (&admin.0, named) {
        (crate::auth::AdminRole::Global, None) => None,
        _ => Some(admin.tenant(named, &gw.config().tenant_default)?),
    };
    let out: Vec<Value> = tokens::list_admin(&gw, tenant.as_deref())
        .into_iter()
        .map(|(id, e)| json!({ "token_id": id, "tenant": e.tenant, "label": e.label, "issued_at": ts(e.issued_at) }))
        .collect();
    Ok(Json(json!({ "tokens": out })))
}

/// Revokes a tenant admin token at once (the global admin only). Idempotent.
#[utoipa::path(delete, path = "/v1/admin/tokens/{token_id}", tag = "tokens", operation_id = "revoke_tenant_admin_token",
    params(("token_id" = String, Path)),
    responses((status = 200, description = "revoked", body = TokenRevoked)))]
pub async fn revoke_admin(
    State(gw): State<Gateway>,
    admin: AdminAuth,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<Value>, ApiError> {
    admin.global()?;
    let Path(text) = path.map_err(|_| ApiError::invalid("the path parameter could not be read"))?;
    let token_id =
        crate::wire::canonical_uuid(&text).ok_or_else(|| ApiError::NotFound(format!("no token {text:?}")))?;
    tokens::revoke_admin(&gw, token_id).await?;
    Ok(Json(json!({ "token_id": token_id, "revoked": true })))
}
