//! `POST /v1/agents` (register), `POST /v1/agents/{identity}/token` (rotate), `GET /v1/agents`.
//!
//! Deliberately keeps no token: only its SHA-256 goes into the event, and the token itself is
//! shown once, in the response.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, Query, State};
use axum::Json;
use bus::event::{AgentRegistered, Entity, Event, EventBody, SessionKind, TokenRotated};
use bus::log::Expect;
use bus::names::{validate_identity, validate_tenant};
use chrono::Utc;
use serde_json::{json, Value};

use crate::auth::{hash_token, new_token, AdminAuth, Authed, Principal};
use crate::error::ApiError;
use crate::http::{json_object, only_fields, opt_str};
use crate::state::Gateway;
use crate::wire::ts;

const ADMIN: &str = "admin";

fn tenant_or_default(gw: &Gateway, tenant: Option<&str>) -> Result<String, ApiError> {
    let tenant = tenant.unwrap_or(&gw.config().tenant_default).to_string();
    validate_tenant(&tenant)?;
    Ok(tenant)
}

/// Registers an agent and answers its token, once.
#[utoipa::path(post, path = "/v1/agents", tag = "agents", request_body = crate::openapi::schemas::RegisterRequest,
    responses((status = 200, description = "registered", body = crate::openapi::schemas::AgentToken)))]
pub async fn register(
    State(gw): State<Gateway>,
    _admin: AdminAuth,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let map = json_object(body)?;
    only_fields(&map, &["tenant", "identity", "kind"])?;
    let tenant = tenant_or_default(&gw, opt_str(&map, "tenant")?)?;
    let identity = opt_str(&map, "identity")?.ok_or_else(|| ApiError::invalid("identity is required"))?.to_string();
    validate_identity(&identity)?;
    let kind = match opt_str(&map, "kind")? {
        None => SessionKind::Interactive,
        Some(k) => SessionKind::parse(k)
            .ok_or_else(|| ApiError::invalid(format!("kind {k:?} must be daemon, shim or interactive")))?,
    };
    let already = || ApiError::AlreadyRegistered(format!("{identity} is already registered in tenant {tenant}"));
    if gw.registry().is_registered(&tenant, &identity) {
        return Err(already());
    }
    let token = new_token();
    let body = EventBody::AgentRegistered(AgentRegistered {
        identity: identity.clone(),
        kind,
        token_hash: hash_token(&token),
    });
    let event = Event::new(&tenant, Some(ADMIN.to_string()), Utc::now(), body);
    // "Subject empty" makes the first registration win across every gateway process.
    match gw.store().append(&event, Expect::LastSubjectSeq(0)).await {
        Ok(_) => {}
        Err(bus::Error::Conflict { .. }) => return Err(already()),
        Err(e) => return Err(e.into()),
    }
    gw.registry().apply(&event);
    tracing::info!(tenant = %tenant, identity = %identity, "agent registered");
    Ok(Json(json!({ "tenant": tenant, "identity": identity, "token": token })))
}

/// Rotates an agent's token: the old one stops working at once and its sessions close.
#[utoipa::path(post, path = "/v1/agents/{identity}/token", tag = "agents",
    params(("identity" = String, Path), ("tenant" = Option<String>, Query, description = "default `default`")),
    responses((status = 200, description = "the new token", body = crate::openapi::schemas::AgentToken)))]
pub async fn rotate(
    State(gw): State<Gateway>,
    _admin: AdminAuth,
    Path(identity): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let tenant = tenant_or_default(&gw, q.get("tenant").map(String::as_str))?;
    if gw.registry().get(&tenant, &identity).is_none() {
        return Err(ApiError::NotFound(format!("no agent {identity:?} in tenant {tenant}")));
    }
    let token = new_token();
    let token_hash = hash_token(&token);
    let body = EventBody::TokenRotated(TokenRotated { identity: identity.clone(), token_hash: token_hash.clone() });
    let event = Event::new(&tenant, Some(ADMIN.to_string()), Utc::now(), body);
    debug_assert_eq!(gw.log().subjects().for_event(&event), gw.log().subjects().of(&tenant, Entity::Agent(&identity)));
    gw.store().append(&event, Expect::Any).await?;
    // Apply now rather than when the tail catches up: the old token must stop working at once.
    gw.registry().apply(&event);
    gw.hub().close_stale_tokens(&tenant, &identity, &token_hash);
    tracing::info!(tenant = %tenant, identity = %identity, "agent token rotated");
    Ok(Json(json!({ "tenant": tenant, "identity": identity, "token": token })))
}

/// The roster with recipient state: an agent's own tenant; the admin's `?tenant=`.
#[utoipa::path(get, path = "/v1/agents", tag = "agents",
    params(("tenant" = Option<String>, Query)),
    responses((status = 200, description = "the roster", body = crate::openapi::schemas::AgentList)))]
pub async fn list(
    State(gw): State<Gateway>,
    Authed(principal): Authed,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let tenant = match principal {
        Principal::Admin => tenant_or_default(&gw, q.get("tenant").map(String::as_str))?,
        Principal::Agent(a) => match q.get("tenant") {
            Some(t) if *t != a.tenant => {
                return Err(ApiError::Forbidden("agents may only list their own tenant".into()))
            }
            _ => a.tenant,
        },
    };
    let now = Utc::now();
    let agents: Vec<Value> = gw
        .registry()
        .roster(&tenant)
        .into_iter()
        .map(|(identity, entry)| {
            let r = gw.presence().resolve(&tenant, &identity, now, gw.config().stale_after);
            json!({
                "tenant": tenant,
                "identity": identity,
                "kind": entry.kind.as_str(),
                "registered_at": ts(entry.registered_at),
                "state": r.state.as_str(),
                "live_sessions": r.live_sessions,
                "last_heartbeat": r.last_heartbeat.map(ts),
            })
        })
        .collect();
    Ok(Json(json!({ "tenant": tenant, "agents": agents })))
}
