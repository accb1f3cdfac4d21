//! Plugin facts over HTTP (CONTRACT §8): `POST /v1/plugins/{plugin}/facts`,
//! `GET /v1/plugins/{plugin}/state`, `GET /v1/plugins/{plugin}/facts?fact_type=&limit=`.
//!
//! Deliberately reuses `commands::fact` (ownership, size limit, per-plugin seq) so the HTTP
//! and WebSocket paths cannot disagree; reads come from the read models.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, Query, State};
use axum::Json;
use bus::names::validate_plugin;
use serde_json::{json, Value};

use crate::auth::{Authed, Principal};
use crate::commands::{self, FactAuthor};
use crate::error::ApiError;
use crate::http::{json_object, limit_param, only_fields, opt_str};
use crate::state::Gateway;
use crate::wire::ts;

fn tenant_of(gw: &Gateway, principal: &Principal, q: &HashMap<String, String>) -> Result<String, ApiError> {
    match principal {
        Principal::Admin => {
            let t = q.get("tenant").cloned().unwrap_or_else(|| gw.config().tenant_default.clone());
            bus::names::validate_tenant(&t)?;
            Ok(t)
        }
        Principal::Agent(a) => match q.get("tenant") {
            Some(t) if *t != a.tenant => Err(ApiError::Forbidden("agents may only use their own tenant".into())),
            _ => Ok(a.tenant.clone()),
        },
    }
}

/// Appends a plugin fact (owner or admin) and answers its per-plugin `seq`.
#[utoipa::path(post, path = "/v1/plugins/{plugin}/facts", tag = "plugins",
    params(("plugin" = String, Path, description = "a `/` inside the name is percent-encoded"), ("tenant" = Option<String>, Query, description = "admin only")),
    request_body = crate::openapi::schemas::FactRequest,
    responses((status = 200, description = "recorded", body = crate::openapi::schemas::FactSeq)))]
pub async fn record(
    State(gw): State<Gateway>,
    Authed(principal): Authed,
    Path(plugin): Path<String>,
    Query(q): Query<HashMap<String, String>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let tenant = tenant_of(&gw, &principal, &q)?;
    let map = json_object(body)?;
    only_fields(&map, &["fact_type", "state"])?;
    let fact_type = opt_str(&map, "fact_type")?.ok_or_else(|| ApiError::invalid("fact_type is required"))?;
    let state = map.get("state").ok_or_else(|| ApiError::invalid("state is required"))?;
    let author = match &principal {
        Principal::Agent(a) => FactAuthor::Agent(&a.identity),
        Principal::Admin => FactAuthor::Admin,
    };
    let seq = commands::fact(&gw, &tenant, author, &plugin, fact_type, state).await?;
    Ok(Json(json!({ "seq": seq })))
}

/// The compatibility view: the newest fact's state (`{}` and seq 0 without facts).
#[utoipa::path(get, path = "/v1/plugins/{plugin}/state", tag = "plugins",
    params(("plugin" = String, Path), ("tenant" = Option<String>, Query, description = "admin only")),
    responses((status = 200, description = "the state", body = crate::openapi::schemas::PluginState)))]
pub async fn state(
    State(gw): State<Gateway>,
    Authed(principal): Authed,
    Path(plugin): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let tenant = tenant_of(&gw, &principal, &q)?;
    validate_plugin(&plugin)?;
    consistent_read(&gw).await;
    let row = gw.queries().plugin_state(&tenant, &plugin).await?;
    Ok(Json(json!({
        "plugin": plugin,
        "state": row.state,
        "seq": row.seq,
        "updated_at": row.updated_at.map(ts),
    })))
}

/// A plugin's facts, newest first.
#[utoipa::path(get, path = "/v1/plugins/{plugin}/facts", tag = "plugins",
    params(("plugin" = String, Path), ("fact_type" = Option<String>, Query),
           ("limit" = Option<u32>, Query, minimum = 1, maximum = 1000), ("tenant" = Option<String>, Query, description = "admin only")),
    responses((status = 200, description = "facts, newest first", body = crate::openapi::schemas::PluginFacts)))]
pub async fn facts(
    State(gw): State<Gateway>,
    Authed(principal): Authed,
    Path(plugin): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let tenant = tenant_of(&gw, &principal, &q)?;
    validate_plugin(&plugin)?;
    let limit = limit_param(&q, 100)?;
    consistent_read(&gw).await;
    let rows = gw.queries().plugin_facts(&tenant, &plugin, q.get("fact_type").map(String::as_str), limit).await?;
    let facts: Vec<Value> = rows
        .into_iter()
        .map(|f| {
            json!({
                "seq": f.seq,
                "fact_type": f.fact_type,
                "state": f.state,
                "recorded_by": f.recorded_by,
                "created_at": ts(f.created_at),
            })
        })
        .collect();
    Ok(Json(json!({ "facts": facts })))
}

/// Lets the read models reach the stream's current position (briefly) before reading.
async fn consistent_read(gw: &Gateway) {
    if let Ok(seq) = gw.log().last_seq().await {
        let _ = gw.queries().wait_for(seq, std::time::Duration::from_secs(2)).await;
    }
}
