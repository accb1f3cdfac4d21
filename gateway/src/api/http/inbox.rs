//! `GET /v1/inbox[?drain=true&limit=&wait=]` — the caller's pending signals in drain order,
//! optionally delivered (`delivered_via: inbox`), with `wait` answered once one is pending
//! (CONTRACT §16) — and `POST /v1/inbox/ack`, the HTTP ack for signals delivered to a piggyback
//! session.
//!
//! Deliberately thin: reading, waiting and draining are `inbox::read` (over
//! `Deliverer::pending`/`Deliverer::drain`, the same code a piggyback response uses, so both
//! hand out a signal at most once).

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Query, State};
use axum::{Extension, Json};
use serde::Serialize;
use utoipa::ToSchema;

use crate::api::http::extract::{json_object, limit_param, wait_param};
use crate::api::piggyback::{CallingSession, OwnSignals};
use crate::auth::AgentAuth;
use crate::commands;
use crate::error::ApiError;
use crate::inbox::{self, InboxRead, Reader};
use crate::openapi::schemas::{AckRequest, PushedSignal};
use crate::state::Gateway;
use crate::wire::{self, PushSignal};

/// Pending signals, drain order.
#[derive(Debug, Serialize, ToSchema)]
pub struct InboxBody {
    #[schema(value_type = Vec<PushedSignal>)]
    pub signals: Vec<PushSignal>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AckedBody {
    /// How many ids were taken (ids that are not the caller's, not delivered or already acked
    /// are ignored, as over the WebSocket).
    pub acked: usize,
}

/// The caller's pending signals; with `drain=true` they are delivered by this answer; with
/// `wait=S`, answered as soon as one is pending, or after S seconds with none.
#[utoipa::path(get, path = "/v1/inbox", tag = "signals", operation_id = "get_inbox",
    params(("drain" = Option<bool>, Query, description = "deliver them (delivered_via inbox)"),
           ("limit" = Option<u32>, Query, minimum = 1, maximum = 1000, description = "at most this many (default 100)"),
           ("wait" = Option<u32>, Query, minimum = 0, maximum = 60,
            description = "when nothing is pending, wait up to this many seconds for a signal (default 0); the X-Signalbus-Session named is heartbeat meanwhile")),
    responses((status = 200, description = "pending signals, drain order (empty when none arrived within the wait)", body = InboxBody)))]
pub async fn inbox(
    State(gw): State<Gateway>,
    AgentAuth(agent): AgentAuth,
    session: Option<Extension<CallingSession>>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<(Extension<OwnSignals>, Json<InboxBody>), ApiError> {
    let drain = match q.get("drain").map(String::as_str) {
        None | Some("false") => false,
        Some("true") => true,
        Some(_) => return Err(ApiError::invalid("drain must be true or false")),
    };
    let limit = limit_param(&q, 100)?;
    let wait = wait_param(&q, inbox::MAX_WAIT)?.unwrap_or_default();
    let reader = Reader { agent: &agent, drain_into: None, keep_alive: session.map(|Extension(s)| s.0) };
    let signals = inbox::read(&gw, reader, InboxRead { drain, limit, wait }).await?;
    Ok((Extension(OwnSignals), Json(InboxBody { signals })))
}

/// Acks signals delivered to the caller (piggyback sessions have no socket to ack over).
#[utoipa::path(post, path = "/v1/inbox/ack", tag = "signals", operation_id = "ack_signals", request_body = AckRequest,
    responses((status = 200, description = "the acks are recorded", body = AckedBody)))]
pub async fn ack(
    State(gw): State<Gateway>,
    AgentAuth(agent): AgentAuth,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<AckedBody>, ApiError> {
    let ids = wire::parse_ack_ids(&json_object(body)?)?;
    commands::ack(&gw, &agent.tenant, &agent.identity, None, &ids).await;
    Ok(Json(AckedBody { acked: ids.len() }))
}
