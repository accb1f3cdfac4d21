//! What an appended directive event asks of the signal side, as data (`DirectiveEffects`): the
//! lifecycle signals to send and the pending `DirectiveRequested` signals to recall; and how one
//! lifecycle signal becomes an ordinary send decision (`lifecycle_request`, `lifecycle_decision`).
//!
//! Deliberately pure: `SignalStore::send_lifecycle` records the decisions and the recalls. The
//! send goes through `send::decide_send` like any signal (validation, redaction, presence), so
//! a lifecycle signal queues, drains, expires and piggybacks like every other.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{lifecycle_signals, requested_signal_id, requests_to_recall, DirectiveState, LifecycleSignal};
use crate::catalog::{TypeTable, MIN_TTL_SECONDS};
use crate::error::DomainResult;
use crate::event::EventBody;
use crate::send::{decide_send, RecipientView, SendDecision, SendLimits, SendRequest, DEFAULT_MAX_PAYLOAD_BYTES};

/// The effects of one appended directive event, for the caller to carry out after the append.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DirectiveEffects {
    pub signals: Vec<LifecycleSignal>,
    /// Ids of `DirectiveRequested` signals to recall (`requested_signal_id`); recalling one
    /// delivered, expired or never sent changes nothing.
    pub recalls: Vec<Uuid>,
    /// Who recalls them: the issuer, the sender of every `DirectiveRequested` signal.
    pub recall_by: String,
}

impl DirectiveEffects {
    /// The effects of `event`, just applied to give `after`.
    pub fn of(tenant: &str, after: &DirectiveState, event: &EventBody) -> Self {
        let Some(req) = after.requested.as_deref() else { return Self::default() };
        let recalls = requests_to_recall(after, event).iter().map(|to| requested_signal_id(tenant, req, to)).collect();
        DirectiveEffects { signals: lifecycle_signals(after, event), recalls, recall_by: req.issuer.clone() }
    }

    pub fn is_empty(&self) -> bool {
        self.signals.is_empty() && self.recalls.is_empty()
    }
}

/// `signal` as a send request from `signal.from`: async, its dedupe key, its correlation id, and
/// a TTL that runs to its `expires_at` from `now` (a send retried late never outlives the
/// deadline by more than the one-second minimum TTL).
pub fn lifecycle_request(signal: &LifecycleSignal, now: DateTime<Utc>) -> SendRequest {
    // Rounded up: a request's TTL reaches the deadline (never stops a second short of it); the
    // expiry of the directive recalls whatever is still pending then.
    let ms = (signal.expires_at - now).num_milliseconds().max(0);
    let ttl = ((ms + 999) / 1000).max(MIN_TTL_SECONDS as i64) as u64;
    SendRequest {
        to: signal.to.clone(),
        signal_type: signal.signal_type.to_string(),
        payload: signal.payload.clone(),
        delivery_class: Some(signal.delivery_class),
        ttl_seconds: Some(ttl.min(signal.ttl_seconds.max(MIN_TTL_SECONDS))),
        correlation_id: Some(signal.correlation_id.clone()),
        dedupe_key: Some(signal.dedupe_key.clone()),
        deliver_after_seconds: None,
        deliver_at: None,
    }
}

/// The send decision for `signal` to a recipient presence sees as `recipient`: `decide_send`'s,
/// with the category and priority of the contract's lifecycle table (the deployment's type
/// table does not name these types). Async, so it queues whatever the recipient's state; a
/// recipient no longer registered is `UnknownRecipient`.
pub fn lifecycle_decision(
    table: &TypeTable,
    tenant: &str,
    signal: &LifecycleSignal,
    recipient: RecipientView,
    now: DateTime<Utc>,
) -> DomainResult<SendDecision> {
    // The directive object is bounded (params and result ≤ 64 KiB each), so its payload is
    // allowed what two of them and the envelope need, whatever the deployment's signal limit.
    let limit = SendLimits::payload(4 * DEFAULT_MAX_PAYLOAD_BYTES);
    let mut decision = decide_send(table, tenant, &signal.from, lifecycle_request(signal, now), recipient, now, limit)?;
    if let SendDecision::Accepted(sent) = &mut decision {
        sent.category = signal.category;
        sent.priority = signal.priority;
    }
    Ok(decision)
}
