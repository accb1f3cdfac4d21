//! Piggyback sessions (CONTRACT §1, §8): HTTP-only sessions whose pending signals ride on the
//! JSON responses to their own calls. Opening one, the throttled heartbeat of a call carrying
//! `X-Signalbus-Session`, the HTTP drain (shared with `GET /v1/inbox?drain=true`), and the
//! middleware that heartbeats a call and adds `"signals"` to its answer.
//!
//! Deliberately never pushes and never enters the hub: nothing is written to a piggyback
//! session between its calls. Closing sessions that fell silent is `reaper.rs`'s job.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use bus::event::{DeliveredVia, Event, EventBody, SessionHeartbeat, SessionKind, SessionOpened, Surface};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::auth::{bearer, Agent, Principal};
use crate::delivery::Recipient;
use crate::error::ApiError;
use crate::presence::Entry;
use crate::state::Gateway;
use crate::wire::PushSignal;
use crate::{delivery, metrics, splice};

/// The request header naming the caller's piggyback session.
pub const HEADER: &str = "x-signalbus-session";

/// How long a call naming a session this node has not seen yet waits for the stream.
const UNKNOWN_SESSION_WAIT: Duration = Duration::from_secs(2);

/// Per-session heartbeat throttle of this node: at most one `session.heartbeat` per interval,
/// and a call inside the interval is owed one (recorded by the reaper's next tick with the
/// call's time), so other nodes never see a session as quieter than it was by more than that.
#[derive(Debug, Default)]
pub struct Tracker {
    beats: Mutex<HashMap<Uuid, Beat>>,
}

#[derive(Debug)]
struct Beat {
    tenant: String,
    identity: String,
    recorded: Instant,
    last_call: DateTime<Utc>,
    owed: bool,
}

/// A heartbeat to record: (session, tenant, identity, when the call happened).
pub type Owed = (Uuid, String, String, DateTime<Utc>);

impl Tracker {
    /// Notes a call at `now`; true when its heartbeat should be recorded at once.
    fn call(&self, id: Uuid, agent: &Agent, now: DateTime<Utc>, interval: Duration) -> bool {
        let mut beats = self.beats.lock().unwrap();
        match beats.get_mut(&id) {
            Some(b) if b.recorded.elapsed() < interval => {
                b.owed = true;
                b.last_call = now;
                false
            }
            Some(b) => {
                b.recorded = Instant::now();
                b.owed = false;
                b.last_call = now;
                true
            }
            None => {
                let beat = Beat {
                    tenant: agent.tenant.clone(),
                    identity: agent.identity.clone(),
                    recorded: Instant::now(),
                    last_call: now,
                    owed: false,
                };
                beats.insert(id, beat);
                true
            }
        }
    }

    /// Heartbeats owed whose interval has passed; they count as recorded from now.
    pub fn take_owed(&self, interval: Duration) -> Vec<Owed> {
        let mut beats = self.beats.lock().unwrap();
        beats
            .iter_mut()
            .filter(|(_, b)| b.owed && b.recorded.elapsed() >= interval)
            .map(|(id, b)| {
                b.owed = false;
                b.recorded = Instant::now();
                (*id, b.tenant.clone(), b.identity.clone(), b.last_call)
            })
            .collect()
    }

    pub fn forget(&self, id: Uuid) {
        self.beats.lock().unwrap().remove(&id);
    }
}

/// Opens a piggyback session for `agent`: `session.opened` with surface `piggyback`.
pub async fn open(gw: &Gateway, agent: &Agent, kind: SessionKind) -> Result<Uuid, ApiError> {
    let id = Uuid::new_v4();
    let now = Utc::now();
    let node = gw.config().node.clone();
    let body = EventBody::SessionOpened(SessionOpened {
        session_id: id,
        identity: agent.identity.clone(),
        kind,
        surface: Surface::Piggyback,
        node: node.clone(),
    });
    gw.store().record(&Event::new(&agent.tenant, Some(agent.identity.clone()), now, body)).await?;
    let entry = Entry {
        tenant: agent.tenant.clone(),
        identity: agent.identity.clone(),
        kind,
        surface: Surface::Piggyback,
        node,
        last_heartbeat: now,
    };
    gw.presence().open(id, entry);
    gw.piggyback().call(id, agent, now, gw.config().heartbeat_interval());
    metrics::session_opened(kind, Surface::Piggyback);
    tracing::info!(session_id = %id, tenant = %agent.tenant, identity = %agent.identity, kind = kind.as_str(), "piggyback session opened");
    Ok(id)
}

/// Records a heartbeat event for a piggyback session (failures are logged: a missed heartbeat
/// only makes the session look older to other nodes).
pub async fn record_heartbeat(gw: &Gateway, id: Uuid, tenant: &str, identity: &str, at: DateTime<Utc>) {
    let body = EventBody::SessionHeartbeat(SessionHeartbeat { session_id: id, identity: identity.to_string() });
    if let Err(e) = gw.store().record(&Event::new(tenant, Some(identity.to_string()), at, body)).await {
        tracing::warn!(error = %e, session_id = %id, "piggyback heartbeat could not be recorded");
    }
}

/// A call of `agent` on its piggyback session `id`: presence sees it at once, and the
/// throttled `session.heartbeat` is recorded now or owed to the reaper's next tick.
pub async fn called(gw: &Gateway, id: Uuid, agent: &Agent) {
    let now = Utc::now();
    gw.presence().touch(id, now);
    if gw.piggyback().call(id, agent, now, gw.config().heartbeat_interval()) {
        record_heartbeat(gw, id, &agent.tenant, &agent.identity, now).await;
    }
}

/// Waits until the read models and this node's presence have applied the stream up to its
/// current end, so a drain sees every signal sent before the call (as the startup drain does).
async fn catch_up(gw: &Gateway) -> Result<(), ApiError> {
    let target = gw.log().last_seq().await?;
    if let Err(e) = gw.queries().wait_for(target, gw.config().drain_wait).await {
        tracing::warn!(error = %e, target, "read models lag; draining what they have");
    }
    gw.wait_applied(target, gw.config().drain_wait).await;
    Ok(())
}

/// Pending signals of `agent`, drain order, without delivering them.
pub async fn pending(gw: &Gateway, agent: &Agent, limit: u32) -> Result<Vec<PushSignal>, ApiError> {
    catch_up(gw).await?;
    let rows = gw.queries().drainable(&agent.tenant, &agent.identity, Utc::now(), limit).await?;
    Ok(rows.into_iter().map(PushSignal::pending).collect())
}

/// Delivers up to `limit` pending signals of `agent`, drain order, each through the
/// per-signal compare-and-set, and returns the ones this call won, exactly as recorded: every
/// delivery recorded here is in the answer. `session` names the piggyback session they go to
/// (`None`: the inbox drain).
pub async fn drain(
    gw: &Gateway,
    agent: &Agent,
    session: Option<Uuid>,
    via: DeliveredVia,
    limit: u32,
) -> Result<Vec<PushSignal>, ApiError> {
    catch_up(gw).await?;
    let rows = gw.queries().drainable(&agent.tenant, &agent.identity, Utc::now(), limit).await?;
    let to = Recipient { tenant: &agent.tenant, identity: &agent.identity, session_id: session };
    let mut out = Vec::with_capacity(rows.len());
    for row in &rows {
        let redeliver = row.delivered_at.is_some();
        match delivery::record(gw, to, row.id, None, via, redeliver).await {
            Ok(Some(d)) => out.push(PushSignal::delivered(d.sent, d.redelivered)),
            Ok(None) => {}
            // What was recorded as delivered must reach the caller, so a partial drain still answers.
            Err(e) if out.is_empty() => return Err(e.into()),
            Err(e) => {
                tracing::warn!(error = %e, delivered = out.len(), "http drain stopped early; the rest stays pending");
                break;
            }
        }
    }
    Ok(out)
}

/// The caller's open piggyback session named by the header, or why the call is refused.
async fn session_of(gw: &Gateway, headers: &HeaderMap, raw: &HeaderValue) -> Result<(Agent, Uuid), ApiError> {
    let token = bearer(headers).ok_or_else(|| ApiError::Unauthorized("missing bearer token".into()))?;
    let agent = match gw.authenticate(token)? {
        Principal::Agent(a) => a,
        Principal::Admin => return Err(ApiError::Forbidden("piggyback sessions need an agent token".into())),
    };
    let id = raw
        .to_str()
        .ok()
        .and_then(|s| Uuid::parse_str(s.trim()).ok())
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

/// Middleware over the agent routes: a call with `X-Signalbus-Session` heartbeats that session,
/// and its JSON-object answer gets `"signals"`: what was pending for the caller, delivered via
/// `piggyback`. The member is spliced into the answer as it streams (`splice.rs`): the answer
/// is never buffered or parsed, whatever its size.
pub async fn middleware(State(gw): State<Gateway>, req: Request, next: Next) -> Response {
    let Some(raw) = req.headers().get(HEADER).cloned() else { return next.run(req).await };
    let (agent, id) = match session_of(&gw, req.headers(), &raw).await {
        Ok(v) => v,
        Err(e) => return e.into_response(),
    };
    called(&gw, id, &agent).await;
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
    let signals = match drain(&gw, &agent, Some(id), DeliveredVia::Piggyback, gw.config().drain_batch).await {
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
