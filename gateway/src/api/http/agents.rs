//! `POST /v1/agents` (register), `POST /v1/agents/{identity}/token` (rotate),
//! `DELETE /v1/agents/{identity}` (remove), `GET /v1/agents`.
//!
//! Deliberately keeps no token: only its SHA-256 goes into the event, and the token itself is
//! shown once, in the response. A removed identity may be registered again: it gets a new
//! token, and the old one stays refused.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Query, State};
use axum::Json;
use bus::event::{AgentRegistered, Entity, Event, EventBody, SessionKind, TokenRotated};
use bus::log::Expect;
use bus::names::{validate_new_identity, validate_tenant};
use chrono::Utc;
use serde_json::{json, Value};

use crate::api::http::extract::{json_object, only_fields, opt_str, PathParam};
use crate::auth::{hash_token, new_token, AdminAuth, Authed, Principal};
use crate::error::ApiError;
use crate::reads;
use crate::state::Gateway;
use crate::wire::ts;

const ADMIN: &str = "admin";

fn tenant_or_default(gw: &Gateway, tenant: Option<&str>) -> Result<String, ApiError> {
    let tenant = tenant.unwrap_or(&gw.config().tenant_default).to_string();
    validate_tenant(&tenant)?;
    Ok(tenant)
}

/// Registers an agent and answers its token, once.
#[utoipa::path(post, path = "/v1/agents", tag = "agents", operation_id = "register_agent", request_body = crate::openapi::schemas::RegisterRequest,
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
    validate_new_identity(&identity)?;
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
    let seq = append_registration(&gw, &event, &identity).await?.ok_or_else(already)?;
    gw.registry().apply(seq, &event);
    tracing::info!(tenant = %tenant, identity = %identity, "agent registered");
    Ok(Json(json!({ "tenant": tenant, "identity": identity, "token": token })))
}

/// Appends a registration expecting the agent's subject to end where this process last saw it
/// (empty, or an `agent.removed`), so of concurrent registrations across every gateway process
/// exactly one wins. `None`: the identity is registered. A process whose tail is behind re-reads
/// the subject once: a removal it has not applied yet still lets the registration through.
async fn append_registration(gw: &Gateway, event: &Event, identity: &str) -> Result<Option<u64>, ApiError> {
    let subject = gw.log().subjects().of(&event.tenant, Entity::Agent(identity));
    let mut expected = gw.registry().last_seq(&event.tenant, identity);
    for _ in 0..2 {
        match gw.store().append(event, Expect::LastSubjectSeq(expected)).await {
            Ok(a) => return Ok(Some(a.seq)),
            Err(bus::Error::Conflict { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        match gw.log().last_on_subject(&subject).await? {
            Some(last) if matches!(last.event.body, EventBody::AgentRemoved(_)) && last.seq != expected => {
                expected = last.seq;
            }
            _ => return Ok(None),
        }
    }
    Ok(None)
}

/// Rotates an agent's token: the old one stops working at once and its sessions close.
#[utoipa::path(post, path = "/v1/agents/{identity}/token", tag = "agents", operation_id = "rotate_agent_token",
    params(("identity" = String, Path), ("tenant" = Option<String>, Query, description = "default `default`")),
    responses((status = 200, description = "the new token", body = crate::openapi::schemas::AgentToken)))]
pub async fn rotate(
    State(gw): State<Gateway>,
    _admin: AdminAuth,
    PathParam(identity): PathParam,
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
    let appended = gw.store().append(&event, Expect::Any).await?;
    // Apply now rather than when the tail catches up: the old token must stop working at once.
    gw.registry().apply(appended.seq, &event);
    gw.hub().close_stale_tokens(&tenant, &identity, &token_hash);
    tracing::info!(tenant = %tenant, identity = %identity, "agent token rotated");
    Ok(Json(json!({ "tenant": tenant, "identity": identity, "token": token })))
}

/// Removes an agent: its token stops working at once, its sessions close (1008), sends to it
/// are `unknown_recipient`, and its pending signals expire. Its history stays.
#[utoipa::path(delete, path = "/v1/agents/{identity}", tag = "agents", operation_id = "remove_agent",
    params(("identity" = String, Path), ("tenant" = Option<String>, Query, description = "default `default`")),
    responses((status = 200, description = "removed", body = crate::openapi::schemas::AgentRemoved)))]
pub async fn remove(
    State(gw): State<Gateway>,
    _admin: AdminAuth,
    PathParam(identity): PathParam,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let tenant = tenant_or_default(&gw, q.get("tenant").map(String::as_str))?;
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
    let tenant = match principal {
        Principal::Admin => tenant_or_default(&gw, q.get("tenant").map(String::as_str))?,
        Principal::Agent(a) => match q.get("tenant") {
            Some(t) if *t != a.tenant => {
                return Err(ApiError::Forbidden("agents may only list their own tenant".into()))
            }
            _ => a.tenant,
        },
    };
    Ok(Json(reads::roster(&gw, &tenant)))
}
