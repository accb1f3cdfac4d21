//! The reads shared by the HTTP API, MCP and the operations: a recipient's view for a send
//! decision, one signal's row for its sender or recipient (a scheduled one for its recipient only
//! once due, `seen_by_recipient`), a page of the caller's signals (newest first) or of one
//! conversation (a correlation id, oldest first), a tenant's roster with recipient state, and a
//! plugin's compatibility state — each answered as the JSON body `GET /v1/signals/{id}`,
//! `GET /v1/signals`, `GET /v1/agents` and `GET /v1/plugins/{plugin}/state` give, so both
//! surfaces answer byte-for-byte alike.
//!
//! Deliberately no authentication and no request parsing: the caller has already decided who
//! asks and in which tenant.

use std::time::Duration;

use bus::names::validate_plugin;
use chrono::Utc;
use projector::queries::{Conversation, ListSignals, SignalRow};
use serde_json::{json, Value};

use crate::agent::Agent;
use crate::error::ApiError;
use crate::state::Gateway;
use crate::wire::{self, ts};

/// How long a read waits for the read models to reach the stream's position.
const READ_CONSISTENCY_WAIT: Duration = Duration::from_secs(2);

/// What this process's registry and presence say of `to` as a recipient at `now`: the view every
/// send decision is made on (`bus::send::RecipientView`).
pub fn recipient_view(gw: &Gateway, tenant: &str, to: &str, now: chrono::DateTime<Utc>) -> bus::send::RecipientView {
    let r = gw.presence().resolve(tenant, to, now, gw.config().stale_after);
    bus::send::RecipientView {
        registered: gw.registry().is_registered(tenant, to),
        state: r.state,
        has_live_ws: r.has_live_ws,
        freshest_session: r.resolved.map(|(id, _)| id),
    }
}

/// Read-your-writes: lets the read models reach what the stream holds now, briefly.
pub async fn consistent(gw: &Gateway) {
    if let Ok(seq) = gw.log().last_seq().await {
        let _ = gw.queries().wait_for(seq, READ_CONSISTENCY_WAIT).await;
    }
}

/// The row of signal `id` (any text; one that is not a hyphenated uuid is simply not found) when `agent`
/// sent or received it; `not_found` otherwise, so ids cannot be probed.
pub async fn signal(gw: &Gateway, agent: &Agent, id: &str) -> Result<Value, ApiError> {
    let not_found = || ApiError::NotFound("signal not found".into());
    let id = wire::canonical_uuid(id).ok_or_else(not_found)?;
    consistent(gw).await;
    let row = gw.queries().signal(&agent.tenant, id).await?.ok_or_else(not_found)?;
    if row.from_identity != agent.identity && (row.to_identity != agent.identity || !seen_by_recipient(&row)) {
        return Err(not_found());
    }
    Ok(wire::row_json(&row))
}

/// A page of `agent`'s signals: `{"signals": [...], "next_cursor": cursor|null}` — newest first,
/// or with a `correlation_id` that conversation's signals it sent or received, oldest first.
pub async fn signals(gw: &Gateway, agent: &Agent, req: wire::SignalList) -> Result<Value, ApiError> {
    consistent(gw).await;
    let (tenant, identity) = (agent.tenant.clone(), agent.identity.clone());
    let (role, status, limit) = (req.role, req.status, req.limit);
    let rows: Vec<SignalRow> = match req.correlation_id {
        None => {
            let query = ListSignals { tenant, identity, role, status, limit, cursor: req.cursor };
            gw.queries().list_signals(&query).await?
        }
        Some(correlation_id) => {
            let query = Conversation { tenant, identity, correlation_id, role, status, limit, after: req.cursor };
            gw.queries().conversation(&query).await?
        }
    };
    let next_cursor = match rows.last() {
        Some(last) if rows.len() as u32 >= limit => Some(wire::cursor::encode(last.created_at, last.id)),
        _ => None,
    };
    // The cursor is the page's as read: a page that hid a scheduled signal may be short.
    let seen = |r: &&SignalRow| r.from_identity == agent.identity || seen_by_recipient(r);
    let signals: Vec<Value> = rows.iter().filter(seen).map(wire::row_json).collect();
    Ok(json!({ "signals": signals, "next_cursor": next_cursor }))
}

/// Whether the recipient of `row` may see it now: a scheduled signal is invisible to its
/// recipient until due or released (CONTRACT §16; `bus::schedule::is_visible`), in lists and
/// lookups as in drains. Its sender always sees it.
pub fn seen_by_recipient(row: &SignalRow) -> bool {
    bus::schedule::is_visible(row.deliver_at, row.released_at.is_some(), Utc::now())
}

/// The roster of `tenant` with each agent's recipient state, from this node's presence.
pub fn roster(gw: &Gateway, tenant: &str) -> Value {
    let now = Utc::now();
    let agents: Vec<Value> = gw
        .registry()
        .roster(tenant)
        .into_iter()
        .map(|(identity, entry)| {
            let r = gw.presence().resolve(tenant, &identity, now, gw.config().stale_after);
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
    json!({ "tenant": tenant, "agents": agents })
}

/// The compatibility view of `plugin` in `tenant`: the newest fact's state (`{}` and seq 0
/// without facts).
pub async fn plugin_state(gw: &Gateway, tenant: &str, plugin: &str) -> Result<Value, ApiError> {
    validate_plugin(plugin)?;
    consistent(gw).await;
    let row = gw.queries().plugin_state(tenant, plugin).await?;
    Ok(json!({
        "plugin": plugin,
        "state": row.state,
        "seq": row.seq,
        "updated_at": row.updated_at.map(ts),
    }))
}
