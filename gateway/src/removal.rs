//! Removing an agent (CONTRACT §8 `DELETE /v1/agents/{identity}`): record `agent.removed`, stop
//! its token at once, close its sessions (1008), expire what was still pending for it, and take it out of its groups.
//!
//! Deliberately deletes nothing: the removal is an event, every expiry is an ordinary
//! `signal.expired` (`reason: removed`) decided by `bus::signal` under the per-signal
//! compare-and-set (`SignalCommand::RecipientRemoved`), so a delivery or a recall racing the
//! removal wins or loses cleanly, and the signals' history stays. Other gateways close their own
//! sessions of the agent when their tail reads the removal (`delivery/tail.rs`).

use bus::agent::AgentCommand;
use bus::event::{ExpiryReason, Surface};
use bus::signal::SignalCommand;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use projector::queries::{ListSignals, Role, StatusFilter};

use crate::close::CloseReason;
use crate::error::ApiError;
use crate::metrics;
use crate::state::Gateway;

/// The actor of the expiries a removal causes.
const REMOVAL_ACTOR: &str = "signalbus/gateway";

/// Pending signals read per page, and expired concurrently (each is its own compare-and-set).
const PAGE: u32 = 500;
const IN_FLIGHT: usize = 16;

/// What a removal did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removed {
    pub removed_at: DateTime<Utc>,
    /// Pending signals this call expired.
    pub signals_expired: u64,
}

/// Removes `identity` from `tenant`; `not_found` when it is not registered.
pub async fn remove(gw: &Gateway, tenant: &str, identity: &str) -> Result<Removed, ApiError> {
    if !gw.registry().is_registered(tenant, identity) {
        return Err(ApiError::NotFound(format!("no agent {identity:?} in tenant {tenant}")));
    }
    let now = Utc::now();
    let command = AgentCommand::Remove { identity: identity.to_string() };
    let (seq, event) = match gw.store().execute_agent(tenant, identity, &command, "admin", now).await {
        Err(bus::Error::Domain(bus::DomainError::UnknownAgent(_))) => {
            return Err(ApiError::NotFound(format!("no agent {identity:?} in tenant {tenant}")))
        }
        other => other?,
    };
    // Applied now, not when the tail catches up: the token must stop working at once.
    gw.registry().apply(seq, &event);
    let ws = gw.hub().close_identity(tenant, identity, CloseReason::AgentRemoved);
    let piggyback = close_piggyback(gw, tenant, identity).await;
    tracing::info!(tenant, identity, ws_sessions = ws, piggyback_sessions = piggyback, "agent removed");
    // Everything sent before the removal is in the read models once they reach it.
    if let Err(e) = gw.queries().wait_for(seq, gw.config().drain_wait).await {
        tracing::warn!(error = %e, tenant, identity, "read models lag; expiring the pending signals they hold");
    }
    let signals_expired = expire_pending(gw, tenant, identity).await?;
    tracing::info!(tenant, identity, signals_expired, "pending signals of a removed agent expired");
    // A removed agent leaves every group (CONTRACT §15), announced as `signalbus`.
    match crate::groups::leave_all(gw, tenant, identity).await {
        Ok(left) => tracing::info!(tenant, identity, groups_left = left, "removed agent left its groups"),
        Err(e) => tracing::warn!(tenant, identity, error = %e, "removed agent not taken out of every group"),
    }
    Ok(Removed { removed_at: now, signals_expired })
}

/// Records the close of the agent's piggyback sessions (any node may; one close sticks).
async fn close_piggyback(gw: &Gateway, tenant: &str, identity: &str) -> usize {
    let reason = CloseReason::AgentRemoved;
    let mut closed = 0;
    for (id, entry) in gw.presence().sessions_of(tenant, identity) {
        if entry.surface != Surface::Piggyback {
            continue;
        }
        match gw.lifecycle().close(tenant, identity, id, reason, None).await {
            Ok(true) => {
                closed += 1;
                metrics::session_closed(entry.kind, Surface::Piggyback, reason.label());
            }
            Ok(false) => {}
            Err(e) => tracing::warn!(error = %e, session_id = %id, "piggyback session of a removed agent not closed"),
        }
    }
    closed
}

/// Expires every pending signal to `identity` the read models know, page by page. A signal that
/// was delivered, recalled or expired meanwhile is left as it is (the domain refuses).
async fn expire_pending(gw: &Gateway, tenant: &str, identity: &str) -> Result<u64, ApiError> {
    let mut query = ListSignals {
        tenant: tenant.to_string(),
        identity: identity.to_string(),
        role: Some(Role::Received),
        status: Some(StatusFilter::Pending),
        limit: PAGE,
        cursor: None,
    };
    let mut expired = 0;
    loop {
        let rows = gw.queries().list_signals(&query).await?;
        let Some(last) = rows.last() else { break };
        query.cursor = Some((last.created_at, last.id));
        let full = rows.len() == PAGE as usize;
        let outcomes: Vec<Result<bool, ApiError>> = futures::stream::iter(rows)
            .map(|row| async move {
                let outcome = gw
                    .store()
                    .execute(tenant, row.id, &SignalCommand::RecipientRemoved, REMOVAL_ACTOR, Utc::now())
                    .await;
                match outcome {
                    Ok(executed) if !executed.appended.is_empty() => {
                        metrics::expired(&gw.config().types, &row.signal_type, ExpiryReason::Removed);
                        Ok(true)
                    }
                    Ok(_) | Err(bus::Error::Domain(_)) => Ok(false),
                    Err(e) => Err(ApiError::from(e)),
                }
            })
            .buffer_unordered(IN_FLIGHT)
            .collect()
            .await;
        for outcome in outcomes {
            expired += u64::from(outcome?);
        }
        if !full {
            break;
        }
    }
    Ok(expired)
}
