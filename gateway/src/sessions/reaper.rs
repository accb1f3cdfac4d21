//! Closing sessions nobody will close otherwise: piggyback sessions silent for twice the stale
//! threshold, and WebSocket sessions of a gateway process that died (its own session loop would
//! have closed them). Any node may do it; a compare-and-set on the session's subject makes
//! exactly one node record each `session.closed`. Also records the piggyback heartbeats owed.
//!
//! Deliberately leaves this process's own WebSocket sessions alone: their session loop closes
//! them (with the close frame the client should see). The `session.closed` it records is built
//! by `lifecycle.rs`; this only decides which sessions are due.

use std::sync::Arc;
use std::time::Duration;

use bus::event::Surface;
use bus::log::nodes::NODE_BEAT;
use bus::log::SharedLog;
use chrono::Utc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::close::CloseReason;
use crate::config::GatewayConfig;
use crate::metrics;
use crate::ratelimit::SendLimiter;
use crate::sessions::heartbeats::Heartbeats;
use crate::sessions::hub::Hub;
use crate::sessions::lifecycle::Lifecycle;
use crate::sessions::presence::Presence;

/// What the reaper and the node watch need: the sessions to look at, the lifecycle to close
/// them with, and the quotas to prune on the same tick.
#[derive(Debug, Clone)]
pub struct Reaper {
    pub lifecycle: Lifecycle,
    pub log: SharedLog,
    pub hub: Arc<Hub>,
    pub presence: Arc<Presence>,
    pub heartbeats: Arc<Heartbeats>,
    /// Pruned every tick: the send and the plugin fact quotas.
    pub limiters: [Arc<SendLimiter>; 2],
    pub config: Arc<GatewayConfig>,
    pub shutdown: CancellationToken,
}

/// Starts the node watch: announces this node every `NODE_BEAT` and closes the WebSocket
/// sessions of nodes that went silent — and, at start, the ones an earlier process under this
/// node's name left open. Presence stops claiming a dead gateway's sessions within
/// `NODE_SILENCE` plus a beat (CONTRACT §13: 15 s).
pub fn spawn_node_watch(r: Reaper, tasks: &TaskTracker) {
    tasks.spawn(async move {
        let stop = r.shutdown.clone();
        let me = r.config.node.clone();
        let mut tick = tokio::time::interval(NODE_BEAT);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut first = true;
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            if let Err(e) = r.log.announce_node(&me).await {
                tracing::debug!(error = %e, "could not announce this node");
            }
            let log = r.log.clone();
            let orphans = r.presence.ws_sessions_where(|node| if node == me { first } else { log.node_is_dead(node) });
            first = false;
            for (id, entry) in orphans {
                if r.hub.get(id).is_some() {
                    continue;
                }
                match r.lifecycle.close(&entry.tenant, &entry.identity, id, CloseReason::Timeout, None).await {
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
pub fn spawn(r: Reaper, tasks: &TaskTracker) {
    tasks.spawn(async move {
        let stop = r.shutdown.clone();
        let interval = r.config.heartbeat_interval();
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            for (id, tenant, identity, at) in r.heartbeats.take_owed(interval) {
                r.lifecycle.record_heartbeat(id, &tenant, &identity, at).await;
            }
            reap(&r, interval).await;
            for limiter in &r.limiters {
                limiter.prune();
            }
        }
    });
}

async fn reap(r: &Reaper, interval: Duration) {
    // One extra interval: another node's heartbeats reach the stream up to an interval late,
    // and a live node closes its own silent ws sessions at 2 x stale_after itself.
    let silent = r.config.stale_after * 2 + interval;
    let Ok(silent) = chrono::Duration::from_std(silent) else { return };
    let before = Utc::now() - silent;
    for (id, entry) in r.presence.silent_since(before) {
        if r.hub.get(id).is_some() {
            continue;
        }
        match r.lifecycle.close(&entry.tenant, &entry.identity, id, CloseReason::Timeout, Some(before)).await {
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
