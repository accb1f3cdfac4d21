//! Plugin facts over HTTP (CONTRACT §8): `POST /v1/plugins/{plugin}/facts`,
//! `GET /v1/plugins/{plugin}/state`, `GET /v1/plugins/{plugin}/facts?fact_type=&limit=&before_seq=`
//! (pages bounded in bytes as well as rows).
//!
//! Deliberately reuses `commands::fact` (ownership, size limit, per-plugin seq) so the HTTP
//! and WebSocket paths cannot disagree; reads come from the read models.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Query, State};
use axum::Json;
use bus::names::validate_plugin;
use projector::queries::FactsPage;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::api::http::extract::{json_object, limit_param, only_fields, opt_str, PathPlugin};
use crate::auth::{Authed, Principal};
use crate::commands::{self, FactAuthor};
use crate::error::ApiError;
use crate::reads;
use crate::state::Gateway;
use crate::wire::{self, ts, Payload};

fn tenant_of(gw: &Gateway, principal: &Principal, q: &HashMap<String, String>) -> Result<String, ApiError> {
    principal.tenant(q.get("tenant").map(String::as_str), &gw.config().tenant_default)
}

/// Appends a plugin fact (owner or admin) and answers its per-plugin `seq`.
#[utoipa::path(post, path = "/v1/plugins/{plugin}/facts", tag = "plugins", operation_id = "record_plugin_fact",
    params(("plugin" = String, Path, description = "a `/` inside the name is percent-encoded"), ("tenant" = Option<String>, Query, description = "admin only")),
    request_body = crate::openapi::schemas::FactRequest,
    responses((status = 200, description = "recorded", body = crate::openapi::schemas::FactSeq)))]
pub async fn record(
    State(gw): State<Gateway>,
    Authed(principal): Authed,
    PathPlugin(plugin): PathPlugin,
    Query(q): Query<HashMap<String, String>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let tenant = tenant_of(&gw, &principal, &q)?;
    let mut map = json_object(body)?;
    only_fields(&map, &["fact_type", "state"])?;
    let fact_type = opt_str(&map, "fact_type")?.ok_or_else(|| ApiError::invalid("fact_type is required"))?.to_string();
    let state = map.remove("state").ok_or_else(|| ApiError::invalid("state is required"))?;
    let author = match &principal {
        Principal::Agent(a) => FactAuthor::Agent(&a.identity),
        Principal::Admin(_) => FactAuthor::Admin,
    };
    let recorded = commands::fact(&gw, &tenant, author, &plugin, &fact_type, state).await?;
    Ok(Json(wire::fact_recorded(&recorded)))
}

/// The compatibility view: the newest fact's state (`{}` and seq 0 without facts).
#[utoipa::path(get, path = "/v1/plugins/{plugin}/state", tag = "plugins", operation_id = "get_plugin_state",
    params(("plugin" = String, Path), ("tenant" = Option<String>, Query, description = "admin only")),
    responses((status = 200, description = "the state", body = crate::openapi::schemas::PluginState)))]
pub async fn state(
    State(gw): State<Gateway>,
    Authed(principal): Authed,
    PathPlugin(plugin): PathPlugin,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let tenant = tenant_of(&gw, &principal, &q)?;
    Ok(Json(reads::plugin_state(&gw, &tenant, &plugin).await?))
}

/// One fact as `GET /v1/plugins/{plugin}/facts` lists it; `state` is the stored JSON as it is.
#[derive(Debug, Serialize)]
pub struct FactOut {
    seq: i64,
    fact_type: String,
    state: Payload,
    recorded_by: String,
    created_at: String,
}

#[derive(Debug, Serialize)]
pub struct FactsOut {
    facts: Vec<FactOut>,
    /// Pass as `before_seq` for the next (older) page; `null` when there is none.
    next_before_seq: Option<i64>,
}

/// A plugin's facts, newest first, a page at a time: at most `limit` facts, and no more once
/// the page holds `fact_page_bytes` of state (a page always has at least one fact).
#[utoipa::path(get, path = "/v1/plugins/{plugin}/facts", tag = "plugins", operation_id = "list_plugin_facts",
    params(("plugin" = String, Path), ("fact_type" = Option<String>, Query),
           ("limit" = Option<u32>, Query, minimum = 1, maximum = 1000),
           ("before_seq" = Option<i64>, Query, minimum = 1, description = "only facts older than this seq: next_before_seq of the previous page"),
           ("tenant" = Option<String>, Query, description = "admin only")),
    responses((status = 200, description = "facts, newest first", body = crate::openapi::schemas::PluginFacts)))]
pub async fn facts(
    State(gw): State<Gateway>,
    Authed(principal): Authed,
    PathPlugin(plugin): PathPlugin,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<FactsOut>, ApiError> {
    let tenant = tenant_of(&gw, &principal, &q)?;
    validate_plugin(&plugin)?;
    // No stored fact_type holds a NUL, and PostgreSQL cannot even compare against one.
    if let Some(t) = q.get("fact_type") {
        bus::nul::refuse_in_str("fact_type", t)?;
    }
    let limit = limit_param(&q, 100)?;
    let before_seq = match q.get("before_seq") {
        None => None,
        Some(s) => Some(
            s.parse::<i64>()
                .ok()
                .filter(|n| *n >= 1)
                .ok_or_else(|| ApiError::invalid("before_seq must be a whole number of at least 1"))?,
        ),
    };
    reads::consistent(&gw).await;
    let page = FactsPage {
        tenant,
        plugin,
        fact_type: q.get("fact_type").cloned(),
        before_seq,
        limit,
        max_bytes: gw.config().fact_page_bytes as u64,
    };
    let answer = gw.queries().plugin_facts(&page).await?;
    let facts = answer
        .facts
        .into_iter()
        .map(|f| FactOut {
            seq: f.seq,
            fact_type: f.fact_type,
            state: RawValue::from_string(f.state_json).map_or(Payload::Value(Value::Null), Payload::Raw),
            recorded_by: f.recorded_by,
            created_at: ts(f.created_at),
        })
        .collect();
    Ok(Json(FactsOut { facts, next_before_seq: answer.next_before_seq }))
}
