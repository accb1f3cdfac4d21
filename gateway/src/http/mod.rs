//! The HTTP API (CONTRACT §8): one file per area, merged into one router here.
//!
//! Deliberately holds only the routing table and the shared body/query helpers; each area's
//! handlers live in their own file so new areas (sessions, inbox, plugins, OpenAPI) are added
//! beside them without touching these.

pub(crate) mod admin;
pub(crate) mod agents;
pub(crate) mod inbox;
pub(crate) mod ops;
pub(crate) mod plugins;
pub(crate) mod sessions;
pub(crate) mod signals;

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::routing::{delete, get, post};
use axum::Router;
use serde_json::{Map, Value};

use crate::error::ApiError;
use crate::state::Gateway;

/// The authenticated API (`/v1/...`): the routes a piggyback session header applies to.
pub fn api_routes() -> Router<Gateway> {
    Router::new()
        .route("/v1/agents", post(agents::register).get(agents::list))
        .route("/v1/agents/{identity}/token", post(agents::rotate))
        .route("/v1/signals", post(signals::send).get(signals::list))
        .route("/v1/signals/{id}", get(signals::show))
        .route("/v1/signals/{id}/recall", post(signals::recall))
        .route("/v1/inbox", get(inbox::inbox))
        .route("/v1/inbox/ack", post(inbox::ack))
        .route("/v1/sessions", post(sessions::open))
        .route("/v1/sessions/{id}", delete(sessions::close))
        .route("/v1/plugins/{plugin}/facts", post(plugins::record).get(plugins::facts))
        .route("/v1/plugins/{plugin}/state", get(plugins::state))
        .route("/v1/admin/rebuild", post(admin::rebuild))
        .route("/v1/admin/doctor", get(admin::doctor))
}

/// Operational endpoints anyone may call.
pub fn ops_routes() -> Router<Gateway> {
    Router::new()
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz))
        .route("/openapi.json", get(crate::openapi::serve))
}

/// A `limit` query parameter: 1 to 1000, `default` when absent.
pub fn limit_param(q: &HashMap<String, String>, default: u32) -> Result<u32, ApiError> {
    match q.get("limit") {
        None => Ok(default),
        Some(l) => l
            .parse::<u32>()
            .ok()
            .filter(|l| (1..=1000).contains(l))
            .ok_or_else(|| ApiError::invalid("limit must be a whole number between 1 and 1000")),
    }
}

/// A request body that must be one JSON object. An empty body counts as `{}`.
pub fn json_object(body: Result<Bytes, BytesRejection>) -> Result<Map<String, Value>, ApiError> {
    let bytes = body.map_err(|e| {
        if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::PayloadTooLarge("request body is too large".into())
        } else {
            ApiError::invalid("request body could not be read")
        }
    })?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(ApiError::invalid("request body must be a JSON object")),
        Err(e) => Err(ApiError::invalid(format!("request body is not valid JSON: {}", e.to_string().to_lowercase()))),
    }
}

/// Refuses fields outside `allowed`, naming the first unknown one.
pub fn only_fields(map: &Map<String, Value>, allowed: &[&str]) -> Result<(), ApiError> {
    match map.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(ApiError::invalid(format!("unknown field {k:?}"))),
        None => Ok(()),
    }
}

/// An optional string field.
pub fn opt_str<'a>(map: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>, ApiError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(ApiError::invalid(format!("{key} must be a string"))),
    }
}
