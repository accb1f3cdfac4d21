//! The commands other than send, shared by HTTP and WebSocket: recall (CONTRACT §6), ack
//! (CONTRACT §5) and plugin facts (CONTRACT §8).
//!
//! Deliberately thin: `bus::store` decides and appends; this file adds who may ask, what the
//! caller is told, and the metrics.

use bus::event::{Event, EventBody, PluginFactRecorded, SignalAcked};
use bus::log::Expect;
use bus::names::{plugin_owned_by, validate_plugin};
use bus::signal::{RecallOutcome, SignalCommand};
use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

use crate::error::ApiError;
use crate::hub::SessionHandle;
use crate::metrics;
use crate::state::Gateway;

/// Largest plugin fact state, encoded (CONTRACT §8).
pub const MAX_FACT_STATE_BYTES: usize = 1024 * 1024;

/// Recalls `signal_id` on behalf of its sender `by`. Another's signal, a bounce and an unknown
/// id all answer `not_found`, so ids cannot be probed.
pub async fn recall(gw: &Gateway, tenant: &str, by: &str, signal_id: Uuid) -> Result<RecallOutcome, ApiError> {
    let command = SignalCommand::Recall { by: by.to_string() };
    let executed = gw.store().execute(tenant, signal_id, &command, by, Utc::now()).await?;
    let outcome = RecallOutcome::of(&executed.state, by);
    metrics::recall(outcome);
    Ok(outcome)
}

/// Records acks of `by` for signals delivered to it. Signals that are not its own, not
/// delivered, or already acked are skipped: an ack is a hint, never an error.
///
/// A WebSocket `session` knows where each delivery it made landed on the stream, so an ack of
/// one of those is a single append conditional on that delivery still being the signal's
/// newest event, with no read. Anything else (HTTP acks, a lost race, a signal this session
/// did not deliver) reads the signal and decides. All ids are recorded concurrently.
pub async fn ack(gw: &Gateway, tenant: &str, by: &str, session: Option<&SessionHandle>, ids: &[Uuid]) {
    let now = Utc::now();
    let results = futures::future::join_all(ids.iter().map(|id| ack_one(gw, tenant, by, session, *id, now))).await;
    for (id, r) in ids.iter().zip(results) {
        match r {
            Ok(()) | Err(bus::Error::Domain(_)) => {}
            Err(e) => tracing::warn!(error = %e, signal_id = %id, "ack not recorded"),
        }
    }
}

async fn ack_one(
    gw: &Gateway,
    tenant: &str,
    by: &str,
    session: Option<&SessionHandle>,
    id: Uuid,
    now: DateTime<Utc>,
) -> Result<(), bus::Error> {
    let session_id = session.map(|s| s.id);
    if let Some(at) = session.and_then(|s| s.take_delivery(id)) {
        // This session appended the delivery at `at.seq`, to `by` (a session only receives its
        // own identity's signals): if it is still the newest event, the signal is delivered
        // and unacked, exactly what `decide` would check after reading it.
        let body = EventBody::SignalAcked(SignalAcked { signal_id: id, by: by.to_string(), session_id });
        let mut event = Event::new(tenant, Some(by.to_string()), now, body);
        event.correlation_id = at.correlation_id;
        match gw.store().append(&event, Expect::LastSubjectSeq(at.seq)).await {
            Ok(_) => return Ok(()),
            // Something followed the delivery (an ack over HTTP, a redelivery): decide afresh.
            Err(bus::Error::Conflict { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    let command = SignalCommand::Ack { by: by.to_string(), session_id };
    gw.store().execute(tenant, id, &command, by, now).await.map(|_| ())
}

/// Who records a plugin fact: an agent, for the plugins it owns, or the admin, for any.
#[derive(Debug, Clone, Copy)]
pub enum FactAuthor<'a> {
    Agent(&'a str),
    Admin,
}

/// `recorded_by` of facts the admin records.
pub const ADMIN_RECORDER: &str = "admin";

/// Appends a plugin fact for `author` and returns its per-plugin `seq`.
pub async fn fact(
    gw: &Gateway,
    tenant: &str,
    author: FactAuthor<'_>,
    plugin: &str,
    fact_type: &str,
    state: &Value,
) -> Result<u64, ApiError> {
    let by = match author {
        FactAuthor::Agent(identity) => identity,
        FactAuthor::Admin => ADMIN_RECORDER,
    };
    validate_plugin(plugin)?;
    if matches!(author, FactAuthor::Agent(_)) && !plugin_owned_by(plugin, by) {
        return Err(ApiError::Forbidden(format!("{by} may only record facts for the plugins {by:?} and \"{by}/...\"")));
    }
    if fact_type.is_empty() || fact_type.chars().count() > 128 {
        return Err(ApiError::invalid("fact_type must be 1 to 128 characters"));
    }
    if !state.is_object() {
        return Err(ApiError::invalid("state must be a JSON object"));
    }
    let encoded = state.to_string();
    if encoded.len() > MAX_FACT_STATE_BYTES {
        return Err(ApiError::PayloadTooLarge(format!(
            "state is {} bytes encoded, the limit is {MAX_FACT_STATE_BYTES}",
            encoded.len()
        )));
    }
    let fact = PluginFactRecorded {
        plugin: plugin.to_string(),
        seq: 0,
        fact_type: fact_type.to_string(),
        state: encoded,
        recorded_by: by.to_string(),
    };
    Ok(gw.store().record_fact(tenant, by, fact, Utc::now()).await?)
}
