//! The backstop of directive effects: the lifecycle signals and recalls an appended directive
//! event causes are carried out by the gateway that appended it, right after the append — and
//! again here, a grace period later, for every directive event the sweeper's tail reads. A
//! gateway killed between its append and its sends leaves them undone; this does them.
//!
//! Deliberately idempotent rather than coordinated: every lifecycle signal carries a dedupe key
//! derived from the directive and the event (`bus::directive::lifecycle`), so when the gateway
//! did its part, this records nothing (one read per signal), and a recall repeated is a no-op.
//! Expiries are not followed: the sweeper appends those and carries them out itself.

use std::time::Duration;

use bus::catalog::TypeTable;
use bus::directive::{DirectiveEffects, DirectiveState};
use bus::event::{Entity, Event, EventBody};
use bus::fold::Fold;
use bus::store::SignalStore;
use chrono::Utc;
use projector::queries::Queries;
use uuid::Uuid;

use crate::error::Result;

/// How long after an event the backstop looks: well past a gateway's own sends.
pub const GRACE: Duration = Duration::from_secs(5);

/// Most backstop checks waiting at once; beyond it, new events are not followed (logged), since
/// the gateways carry out their own effects and this only covers their crashes.
pub const MAX_PENDING: usize = 20_000;

/// The directive event `event` names, if the backstop follows it: one with effects that a
/// gateway (not the sweeper) appended.
pub fn followed(event: &Event) -> Option<Uuid> {
    match &event.body {
        EventBody::DirectiveExpired(_) | EventBody::DirectiveProgressed(_) => None,
        body => body.directive_id(),
    }
}

/// Carries out, again, the effects of the event at `seq` on directive `id`: folds its subject up
/// to that event, derives the effects, and records them (nothing twice). Returns how many
/// lifecycle signals this call recorded (0 when the gateway had done it all).
pub async fn carry_out(
    store: &SignalStore,
    queries: &dyn Queries,
    types: &TypeTable,
    tenant: &str,
    id: Uuid,
    seq: u64,
) -> Result<usize> {
    let subject = store.log().subjects().of(tenant, Entity::Directive(id));
    let stored = store.log().read_subject(&subject).await?;
    let mut state = DirectiveState::default();
    let mut effects = DirectiveEffects::default();
    for s in &stored {
        state.apply(&s.event.body);
        if s.seq == seq {
            effects = DirectiveEffects::of(tenant, &state, &s.event.body);
        }
    }
    // Work that is gone is handed to nobody: a request is only sent late while the directive
    // still waits for a claim (the final state is what the fold above ended with).
    if state.status != bus::event::DirectiveStatus::Requested {
        effects.signals.retain(|s| s.signal_type != "DirectiveRequested");
    }
    if effects.is_empty() {
        return Ok(0);
    }
    let roster = crate::directives::Roster::read(queries, tenant).await?;
    let view = |to: &str| roster.view(to);
    let sent = store.send_lifecycle(tenant, types, &effects, view, Utc::now()).await?;
    let created = sent.sent.iter().filter(|(_, r)| r.created).count();
    if created > 0 {
        tracing::warn!(tenant, directive_id = %id, seq, signals = created, "directive lifecycle signals a gateway left undone were recorded");
    }
    Ok(created)
}
