//! Piggyback sessions at the HTTP edge (CONTRACT §1, §8): HTTP-only sessions whose pending
//! signals ride on the JSON responses to their own calls. The middleware that checks the
//! `X-Signalbus-Session` header, heartbeats the call and adds `"signals"` to its answer.
//!
//! Deliberately never pushes and never enters the hub: nothing is written to a piggyback
//! session between its calls. The events are built by `sessions::lifecycle`, the drain is
//! `delivery::drain`, and closing sessions that fell silent is `sessions::reaper`'s job.

use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use bus::event::{DeliveredVia, Surface};
use uuid::Uuid;

use crate::agent::Agent;
use crate::api::splice;
use crate::auth::{bearer, Principal};
use crate::error::ApiError;
use crate::sessions::presence::Entry;
use crate::state::Gateway;

/// The request header naming the caller's piggyback session.
pub const HEADER: &str = "x-signalbus-session";

/// How long a call naming a session this node has not seen yet waits for the stream.
const UNKNOWN_SESSION_WAIT: Duration = Duration::from_secs(2);

/// The caller's open piggyback session named by the header, or why the call is refused.
async fn session_of(
    gw: &Gateway,
    principal: Option<&Principal>,
    headers: &HeaderMap,
    raw: &HeaderValue,
) -> Result<(Agent, Uuid), ApiError> {
    let agent = match principal {
        Some(Principal::Agent(a)) => a.clone(),
        Some(Principal::Admin(_)) => return Err(ApiError::Forbidden("piggyback sessions need an agent token".into())),
        None => {
            let token = bearer(headers).ok_or_else(|| ApiError::Unauthorized("missing bearer token".into()))?;
            match gw.authenticator().authenticate(token)? {
                Principal::Agent(a) => a,
                Principal::Admin(_) => {
                    return Err(ApiError::Forbidden("piggyback sessions need an agent token".into()))
                }
            }
        }
    };
    // Signals ride on the answers of a piggyback session: that is receiving.
    crate::scopes::require(agent.scopes, bus::scope::Scope::Receive)?;
    let id = raw
        .to_str()
        .ok()
        .and_then(|s| crate::wire::canonical_uuid(s.trim()))
        .ok_or_else(|| ApiError::invalid("X-Signalbus-Session must be a session id (a uuid)"))?;
    let owned = |e: &Entry| e.surface == Surface::Piggyback && e.tenant == agent.tenant && e.identity == agent.identity;
    let mut found = gw.presence().get(id).filter(owned).is_some();
    if !found {
        // Opened through another node a moment ago: let this node's presence catch up once.
        let seq = gw.log().last_seq().await?;
        gw.wait_applied(seq, UNKNOWN_SESSION_WAIT).await;
        found = gw.presence().get(id).filter(owned).is_some();
    }
    if !found {
        return Err(ApiError::NotFound(format!(
            "no open piggyback session {id} for this agent; open one with POST /v1/sessions"
        )));
    }
    Ok((agent, id))
}

/// Set on an answer whose own `signals` field lists signals (`GET /v1/inbox`,
/// `GET /v1/signals`): nothing rides on it, and the call only heartbeats the session.
#[derive(Debug, Clone, Copy)]
pub struct OwnSignals;

/// The piggyback session a call named (`X-Signalbus-Session`), checked to be the caller's and
/// open, for a handler that keeps it alive while it waits (`GET /v1/inbox?wait=`).
#[derive(Debug, Clone, Copy)]
pub struct CallingSession(pub Uuid);

/// Middleware over the agent routes: a call with `X-Signalbus-Session` heartbeats that session,
/// and its JSON-object answer gets `"signals"`: what was pending for the caller, delivered via
/// `piggyback`. The member is spliced into the answer as it streams (`splice.rs`): the answer
/// is never buffered or parsed, whatever its size.
pub async fn middleware(State(gw): State<Gateway>, mut req: Request, next: Next) -> Response {
    let Some(raw) = req.headers().get(HEADER).cloned() else { return next.run(req).await };
    let (agent, id) = match session_of(&gw, req.extensions().get::<Principal>(), req.headers(), &raw).await {
        Ok(v) => v,
        Err(e) => return e.into_response(),
    };
    gw.lifecycle().piggyback_called(id, &agent).await;
    req.extensions_mut().insert(CallingSession(id));
    let response = next.run(req).await;
    // The call may have closed the session (DELETE): nothing more goes to it.
    if !gw.presence().is_open(id) || response.extensions().get::<OwnSignals>().is_some() {
        return response;
    }
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !is_json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    // Only an answer known to be a JSON object gets signals: they are delivered once drained.
    let peeked = match splice::open_object(body).await {
        splice::Opened::Object(p) => p,
        splice::Opened::Other(body) => return Response::from_parts(parts, body),
    };
    let signals = match gw.deliverer().drain(&agent, Some(id), DeliveredVia::Piggyback, gw.config().drain_batch).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, session_id = %id, "piggyback drain failed; signals stay pending");
            Vec::new()
        }
    };
    let encoded = match serde_json::to_vec(&signals) {
        Ok(v) => v,
        Err(e) => {
            // Cannot happen for these types; the deliveries stay unacked and go out again.
            tracing::error!(error = %e, session_id = %id, "drained signals could not be encoded");
            b"[]".to_vec()
        }
    };
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, splice::splice(peeked, "signals", encoded))
}
