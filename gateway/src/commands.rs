//! The commands other than send, shared by HTTP, WebSocket and MCP: recall (CONTRACT §6), ack
//! (CONTRACT §5) and plugin facts (CONTRACT §8).
//!
//! Deliberately thin: `bus` decides (`signal`, `fact`) and `bus::store` appends; this file adds
//! quotas, what the caller is told, and the metrics.

use std::collections::HashSet;

use bus::event::{Event, EventBody, SignalsAcked};
use bus::signal::{decide, RecallOutcome, SignalCommand};
use chrono::{DateTime, Utc};
use futures::StreamExt;
use serde_json::Value;
use uuid::Uuid;

use crate::acks::NotRecorded;
use crate::error::ApiError;
use crate::metrics;
use crate::ratelimit::FactRate;
use crate::sessions::hub::SessionHandle;
use crate::state::Gateway;
use crate::wire::FactRecorded;

/// Recalls `signal_id` on behalf of its sender `by`. Another's signal, a bounce and an unknown
/// id all answer `not_found`, so ids cannot be probed.
pub async fn recall(gw: &Gateway, tenant: &str, by: &str, signal_id: Uuid) -> Result<RecallOutcome, ApiError> {
    let command = SignalCommand::Recall { by: by.to_string() };
    let executed = gw.store().execute(tenant, signal_id, &command, by, Utc::now()).await?;
    let outcome = RecallOutcome::of(&executed.state, by);
    metrics::recall(outcome);
    Ok(outcome)
}

/// `recall` of an id given as text (a path parameter, a tool argument): text that is not a
/// uuid names no signal, so it answers `not_found` like an unknown id.
pub async fn recall_id(gw: &Gateway, tenant: &str, by: &str, signal_id: &str) -> Result<RecallOutcome, ApiError> {
    match crate::wire::canonical_uuid(signal_id) {
        Some(id) => recall(gw, tenant, by, id).await,
        None => {
            metrics::recall(RecallOutcome::NotFound);
            Ok(RecallOutcome::NotFound)
        }
    }
}

/// Records acks of `by` for signals delivered to it, as one `signals.acked` event per
/// `MAX_ACKS_PER_EVENT` ids on `by`'s acks subject. Signals that are not its own or not
/// delivered are left out: an ack is a hint, never an error.
///
/// An ack decides nothing (no outcome to win), so it needs no per-signal compare-and-set, and
/// a whole batch is one append. What goes in is checked first: a delivery this WebSocket
/// `session` made itself is to `by` (a session only receives its own identity's signals) and
/// needs no read; anything else (HTTP acks, another session's delivery, unknown ids) reads the
/// signal, up to `ACK_CONCURRENCY` at once — each read in progress holds a round trip's worth
/// of state, so an ack of a thousand unknown ids must not start a thousand reads together.
pub async fn ack(gw: &Gateway, tenant: &str, by: &str, session: Option<&SessionHandle>, ids: &[Uuid]) {
    let now = Utc::now();
    let mut seen = HashSet::with_capacity(ids.len());
    let (mut verified, mut unverified) = (Vec::with_capacity(ids.len()), Vec::new());
    for &id in ids.iter().filter(|id| seen.insert(**id)) {
        if session.is_some_and(|s| s.take_delivery(id)) {
            verified.push(id);
        } else {
            unverified.push(id);
        }
    }
    let checks = futures::stream::iter(unverified)
        .map(|id| async move { (id, delivered_to(gw, tenant, by, id, now).await) })
        .buffer_unordered(ACK_CONCURRENCY);
    futures::pin_mut!(checks);
    while let Some((id, r)) = checks.next().await {
        match r {
            Ok(true) => verified.push(id),
            Ok(false) => {}
            Err(e) => tracing::warn!(error = %e, signal_id = %id, "ack not recorded"),
        }
    }
    for chunk in verified.chunks(MAX_ACKS_PER_EVENT) {
        let acks = SignalsAcked { by: by.to_string(), session_id: session.map(|s| s.id), signal_ids: chunk.to_vec() };
        // A session's batch goes out with the other sessions' (`acks.rs`); an HTTP or MCP call
        // waits for its own append, and so does a batch the batcher can no longer take.
        if session.is_some() {
            match gw.acks().record(tenant, acks.clone()).await {
                Ok(()) => continue,
                Err(NotRecorded::Failed(e)) => {
                    tracing::warn!(error = %e, acks = chunk.len(), "acks not recorded");
                    continue;
                }
                Err(NotRecorded::Gone) => {}
            }
        }
        let event = Event::new(tenant, Some(by.to_string()), now, EventBody::SignalsAcked(acks));
        if let Err(e) = gw.store().record(&event).await {
            tracing::warn!(error = %e, acks = chunk.len(), "acks not recorded");
        }
    }
}

/// Signals checked against the stream at once.
const ACK_CONCURRENCY: usize = 16;

/// Ids per `signals.acked` event: 1,000 ids are ~40 KB encoded, far under a stream message's limit.
const MAX_ACKS_PER_EVENT: usize = 1000;

/// Whether `id` is a signal delivered to `by` (so `by` may ack it).
async fn delivered_to(gw: &Gateway, tenant: &str, by: &str, id: Uuid, now: DateTime<Utc>) -> Result<bool, bus::Error> {
    let (state, _) = gw.store().load(tenant, id).await?;
    let command = SignalCommand::Ack { by: by.to_string(), session_id: None };
    Ok(decide(&state, &command, now).is_ok_and(|events| !events.is_empty()))
}

pub use bus::fact::FactAuthor;

/// Appends a plugin fact for `author`, its secrets redacted first.
pub async fn fact(
    gw: &Gateway,
    tenant: &str,
    author: FactAuthor<'_>,
    plugin: &str,
    fact_type: &str,
    state: Value,
) -> Result<FactRecorded, ApiError> {
    // Bounded before any rule looks at it: nesting is a wire limit.
    crate::wire::check_depth("state", &state)?;
    let bus::fact::FactDecided { fact, redacted } = bus::fact::decide(author, plugin, fact_type, state)?;
    let by = fact.recorded_by.clone();
    if let Err(wait) = gw.fact_limiter().check_n(tenant, &by, FactRate::cost(fact.state.len())) {
        metrics::facts_rate_limited();
        return Err(ApiError::rate_limited(
            format!("{by} is over its plugin fact rate; retry in {} ms", wait.as_millis().max(1)),
            wait,
        ));
    }
    let seq = gw.store().record_fact(tenant, &by, fact, Utc::now()).await?;
    Ok(FactRecorded { seq, redacted })
}
