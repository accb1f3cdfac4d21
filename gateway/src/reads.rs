//! The reads shared by the HTTP API and MCP: one signal's row for its sender or recipient (a
//! scheduled one for its recipient only once due, `seen_by_recipient`), a tenant's roster with
//! recipient state, and a plugin's compatibility state — each answered as
//! the JSON body `GET /v1/signals/{id}`, `GET /v1/agents` and `GET /v1/plugins/{plugin}/state`
//! give, so both surfaces answer byte-for-byte alike.
//!
//! Deliberately no authentication and no request parsing: the caller has already decided who
//! asks and in which tenant.

use std::time::Duration;

use bus::names::validate_plugin;
use chrono::Utc;
use projector::queries::SignalRow;
use serde_json::{json, Value};

use crate::agent::Agent;
use crate::error::ApiError;
use crate::state::Gateway;
use crate::wire::{self, ts};

/// How long a read waits for the read models to reach the stream's position.
const READ_CONSISTENCY_WAIT: Duration = Duration::from_secs(2);

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
