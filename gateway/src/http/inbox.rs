//! `GET /v1/inbox[?drain=true&limit=]` — the caller's pending signals in drain order, optionally
//! delivered (`delivered_via: inbox`) — and `POST /v1/inbox/ack`, the HTTP ack for signals
//! delivered to a piggyback session.
//!
//! Deliberately thin: listing and draining are `piggyback::pending`/`piggyback::drain`, the
//! same code a piggyback response uses, so both hand out a signal at most once.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Query, State};
use axum::Json;
use bus::event::DeliveredVia;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::AgentAuth;
use crate::error::ApiError;
use crate::http::{json_object, limit_param, only_fields};
use crate::openapi::schemas::{AckRequest, PushedSignal};
use crate::state::Gateway;
use crate::ws::frames::MAX_ACK_IDS;
use crate::{commands, piggyback};

/// Pending signals, drain order.
#[derive(Debug, Serialize, ToSchema)]
pub struct InboxBody {
    #[schema(value_type = Vec<PushedSignal>)]
    pub signals: Vec<Value>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AckedBody {
    /// How many ids were taken (ids that are not the caller's, not delivered or already acked
    /// are ignored, as over the WebSocket).
    pub acked: usize,
}

/// The caller's pending signals; with `drain=true` they are delivered by this answer.
#[utoipa::path(get, path = "/v1/inbox", tag = "signals",
    params(("drain" = Option<bool>, Query, description = "deliver them (delivered_via inbox)"),
           ("limit" = Option<u32>, Query, minimum = 1, maximum = 1000, description = "at most this many (default 100)")),
    responses((status = 200, description = "pending signals, drain order", body = InboxBody)))]
pub async fn inbox(
    State(gw): State<Gateway>,
    AgentAuth(agent): AgentAuth,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<InboxBody>, ApiError> {
    let drain = match q.get("drain").map(String::as_str) {
        None | Some("false") => false,
        Some("true") => true,
        Some(_) => return Err(ApiError::invalid("drain must be true or false")),
    };
    let limit = limit_param(&q, 100)?;
    let signals = if drain {
        piggyback::drain(&gw, &agent, None, DeliveredVia::Inbox, limit).await?
    } else {
        piggyback::pending(&gw, &agent, limit).await?
    };
    Ok(Json(InboxBody { signals }))
}

/// Acks signals delivered to the caller (piggyback sessions have no socket to ack over).
#[utoipa::path(post, path = "/v1/inbox/ack", tag = "signals", request_body = AckRequest,
    responses((status = 200, description = "the acks are recorded", body = AckedBody)))]
pub async fn ack(
    State(gw): State<Gateway>,
    AgentAuth(agent): AgentAuth,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<AckedBody>, ApiError> {
    let map = json_object(body)?;
    only_fields(&map, &["signal_ids"])?;
    let Some(Value::Array(ids)) = map.get("signal_ids") else {
        return Err(ApiError::invalid("signal_ids is required and must be an array"));
    };
    if ids.is_empty() || ids.len() > MAX_ACK_IDS {
        return Err(ApiError::invalid(format!("signal_ids must hold 1 to {MAX_ACK_IDS} ids")));
    }
    let ids = ids
        .iter()
        .enumerate()
        .map(|(i, v)| {
            v.as_str()
                .and_then(|s| Uuid::parse_str(s).ok())
                .ok_or_else(|| ApiError::invalid(format!("signal_ids[{i}] is not a uuid")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    commands::ack(&gw, &agent.tenant, &agent.identity, None, &ids).await;
    Ok(Json(AckedBody { acked: ids.len() }))
}
