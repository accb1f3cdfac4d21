//! Closing sessions nobody will close otherwise: piggyback sessions silent for twice the stale
//! threshold, and WebSocket sessions of a gateway process that died (its own session loop would
//! have closed them). Any node may do it; a compare-and-set on the session's subject makes
//! exactly one node record each `session.closed`. Also records the piggyback heartbeats owed.
//!
//! Deliberately leaves this process's own WebSocket sessions alone: their session loop closes
//! them (with the close frame the client should see).

use std::time::Duration;

use bus::event::{Entity, Event, EventBody, SessionClosed, Surface};
use bus::log::nodes::NODE_BEAT;
use bus::log::Expect;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::hub::CloseReason;
use crate::state::Gateway;
use crate::{metrics, piggyback};

/// Starts the node watch: announces this node every `NODE_BEAT` and closes the WebSocket
/// sessions of nodes that went silent — and, at start, the ones an earlier process under this
/// node's name left open. Presence stops claiming a dead gateway's sessions within
/// `NODE_SILENCE` plus a beat (CONTRACT §13: 15 s).
pub fn spawn_node_watch(gw: Gateway) {
    let tasks = gw.tasks().clone();
    tasks.spawn(async move {
        let stop = gw.shutdown_token().clone();
        let me = gw.config().node.clone();
        let mut tick = tokio::time::interval(NODE_BEAT);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut first = true;
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            if let Err(e) = gw.log().announce_node(&me).await {
                tracing::debug!(error = %e, "could not announce this node");
            }
            let log = gw.log().clone();
            let orphans =
                gw.presence().ws_sessions_where(|node| if node == me { first } else { log.node_is_dead(node) });
            first = false;
            for (id, entry) in orphans {
                if gw.hub().get(id).is_some() {
                    continue;
                }
                match close(&gw, &entry.tenant, &entry.identity, id, CloseReason::Timeout, None).await {
                    Ok(true) => {
                        metrics::disconnected(CloseReason::Timeout.label());
                        tracing::info!(session_id = %id, identity = %entry.identity, node = %entry.node,
                            "closed a session of a gateway that is gone");
                    }
                    Ok(false) => {}
                    Err(e) => tracing::warn!(error = %e, session_id = %id, "orphaned session could not be closed"),
                }
            }
        }
    });
}

/// Starts the periodic sweep (every heartbeat interval) until shutdown.
pub fn spawn(gw: Gateway) {
    let tasks = gw.tasks().clone();
    tasks.spawn(async move {
        let stop = gw.shutdown_token().clone();
        let interval = gw.config().heartbeat_interval();
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            for (id, tenant, identity, at) in gw.piggyback().take_owed(interval) {
                piggyback::record_heartbeat(&gw, id, &tenant, &identity, at).await;
            }
            reap(&gw, interval).await;
            gw.limiter().prune();
            gw.fact_limiter().prune();
        }
    });
}

async fn reap(gw: &Gateway, interval: Duration) {
    // One extra interval: another node's heartbeats reach the stream up to an interval late,
    // and a live node closes its own silent ws sessions at 2 x stale_after itself.
    let silent = gw.config().stale_after * 2 + interval;
    let Ok(silent) = chrono::Duration::from_std(silent) else { return };
    let before = Utc::now() - silent;
    for (id, entry) in gw.presence().silent_since(before) {
        if gw.hub().get(id).is_some() {
            continue;
        }
        match close(gw, &entry.tenant, &entry.identity, id, CloseReason::Timeout, Some(before)).await {
            Ok(true) => {
                if entry.surface == Surface::Piggyback {
                    metrics::session_closed(entry.kind, Surface::Piggyback, CloseReason::Timeout.label());
                } else {
                    // Its gauge died with the process that held it; only the disconnect counts.
                    metrics::disconnected(CloseReason::Timeout.label());
                }
                tracing::info!(session_id = %id, identity = %entry.identity, surface = entry.surface.as_str(),
                    node = %entry.node, "closed a silent session");
            }
            Ok(false) => {}
            Err(e) => tracing::warn!(error = %e, session_id = %id, "silent session could not be closed"),
        }
    }
}

/// Records `session.closed` for `id` unless it is already closed or, with `silent_before`,
/// unless its newest event is newer than that. Returns whether this call recorded the close.
pub async fn close(
    gw: &Gateway,
    tenant: &str,
    identity: &str,
    id: Uuid,
    reason: CloseReason,
    silent_before: Option<DateTime<Utc>>,
) -> Result<bool, bus::Error> {
    let subject = gw.log().subjects().of(tenant, Entity::Session(id));
    let Some(last) = gw.log().last_on_subject(&subject).await? else {
        gw.presence().close(id);
        return Ok(false);
    };
    if matches!(last.event.body, EventBody::SessionClosed(_)) {
        gw.presence().close(id);
        gw.piggyback().forget(id);
        return Ok(false);
    }
    if silent_before.is_some_and(|b| last.event.occurred_at > b) {
        return Ok(false);
    }
    let body = EventBody::SessionClosed(SessionClosed {
        session_id: id,
        identity: identity.to_string(),
        reason: reason.label().to_string(),
    });
    let event = Event::new(tenant, Some(identity.to_string()), Utc::now(), body);
    match gw.store().append(&event, Expect::LastSubjectSeq(last.seq)).await {
        Ok(_) => {
            gw.presence().close(id);
            gw.piggyback().forget(id);
            Ok(true)
        }
        // A heartbeat or another node's close got there first; the tail tells us which.
        Err(bus::Error::Conflict { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}
