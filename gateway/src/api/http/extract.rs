//! What the HTTP handlers read from a request besides auth: the one path parameter, typed
//! (`PathId`, `PathIdentity`, `PathPlugin`), the `limit` and `wait` query parameters, and a JSON-object body
//! with its fields.
//!
//! Deliberately knows no route and no handler: it turns request parts into values or an
//! `invalid_request`, and the handlers decide what the values mean.

use std::collections::HashMap;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::error::ApiError;

/// The one path parameter of a route, as text. Unlike axum's `Path`, whose rejections are
/// `text/plain`, a parameter that is not UTF-8 once percent-decoded (`/v1/signals/%FF`)
/// answers `invalid_request` with the JSON error body. Handlers take one of the typed
/// extractors below, so every malformed path is answered here, the same way.
#[derive(Debug)]
struct PathParam(String);

impl<S: Send + Sync> FromRequestParts<S> for PathParam {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match Path::<String>::from_request_parts(parts, state).await {
            Ok(Path(value)) => Ok(PathParam(value)),
            Err(PathRejection::FailedToDeserializePathParams(e)) => match e.into_kind() {
                axum::extract::path::ErrorKind::InvalidUtf8InPathParam { key } => {
                    Err(ApiError::invalid(format!("path parameter {key} is not valid utf-8 once percent-decoded")))
                }
                _ => Err(ApiError::invalid("the path parameter could not be read")),
            },
            Err(_) => Err(ApiError::invalid("the path parameter could not be read")),
        }
    }
}

/// The one path parameter of a route that names something by id (a signal, a session): a uuid
/// in the one spelling the bus writes, hyphenated, in any case (`wire::canonical_uuid`). Any
/// other text answers `invalid_request` with the JSON error body, so one signal has one name.
#[derive(Debug)]
pub struct PathId(pub Uuid);

impl<S: Send + Sync> FromRequestParts<S> for PathId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let PathParam(text) = PathParam::from_request_parts(parts, state).await?;
        crate::wire::canonical_uuid(&text).map(PathId).ok_or_else(|| {
            ApiError::invalid("the id in the path must be a uuid written as 8-4-4-4-12 hex digits with hyphens")
        })
    }
}

/// The identity in a path (`/v1/agents/{identity}`), held to the rule of every identity.
#[derive(Debug)]
pub struct PathIdentity(pub String);

impl<S: Send + Sync> FromRequestParts<S> for PathIdentity {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let PathParam(text) = PathParam::from_request_parts(parts, state).await?;
        bus::names::validate_identity(&text)?;
        Ok(PathIdentity(text))
    }
}

/// The plugin name in a path (`/v1/plugins/{plugin}/...`, a `/` inside it percent-encoded),
/// held to the rule of every plugin name.
#[derive(Debug)]
pub struct PathPlugin(pub String);

impl<S: Send + Sync> FromRequestParts<S> for PathPlugin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let PathParam(text) = PathParam::from_request_parts(parts, state).await?;
        bus::names::validate_plugin(&text)?;
        Ok(PathPlugin(text))
    }
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

/// `?wait=S`, a whole number of seconds from 0 to `max`, as a duration (`None` when absent).
pub fn wait_param(q: &HashMap<String, String>, max: Duration) -> Result<Option<Duration>, ApiError> {
    let Some(w) = q.get("wait") else { return Ok(None) };
    let bad = || ApiError::invalid(format!("wait must be a whole number of seconds from 0 to {}", max.as_secs()));
    let secs: u64 = w.parse().map_err(|_| bad())?;
    if secs > max.as_secs() {
        return Err(bad());
    }
    Ok(Some(Duration::from_secs(secs)))
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
