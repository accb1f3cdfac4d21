//! What a directive's transitions tell the parties (CONTRACT §14 "Lifecycle signals"): which
//! async signals each recorded event causes, which pending `DirectiveRequested` signals must be
//! recalled, and the directive object every answer and signal carries.
//!
//! Deliberately does not send or recall anything: the caller turns these into ordinary sends
//! (one per `LifecycleSignal`) and recalls, after the event is appended.

use chrono::{DateTime, Duration, Utc};
use serde_json::{json, Value};
use uuid::Uuid;

use super::DirectiveState;
use crate::catalog::{Category, DeliveryClass};
use crate::event::{DirectiveRequested, EventBody};
use crate::send::signal_id_for;

/// `from` of the signals the bus sends on its own behalf (an expiry).
pub const BUS_IDENTITY: &str = "signalbus";

/// One async signal a transition causes. Its payload is the directive object after the event
/// (`DirectiveState::object`); its `correlation_id` the directive's id.
#[derive(Debug, Clone, PartialEq)]
pub struct LifecycleSignal {
    /// The identity that acted, or `signalbus` for an expiry.
    pub from: String,
    pub to: String,
    /// `DirectiveRequested`, `DirectiveStarted`, …
    pub signal_type: &'static str,
    pub delivery_class: DeliveryClass,
    pub ttl_seconds: u64,
    /// The event's instant plus the TTL; for `DirectiveRequested`, the deadline.
    pub expires_at: DateTime<Utc>,
    pub category: Category,
    pub priority: i16,
    pub correlation_id: String,
    /// `<directive_id>:<signal_type>:<to>`: sending it as the signal's dedupe key makes a
    /// retried send a repeat, and names the signal (`requested_signal_id`) for a recall.
    pub dedupe_key: String,
    pub payload: Value,
}

fn dedupe_key(directive_id: Uuid, signal_type: &str, to: &str) -> String {
    format!("{}:{signal_type}:{to}", directive_id.simple())
}

/// The id of the `DirectiveRequested` signal handed to `to`, when lifecycle signals are sent
/// with their `dedupe_key` from the issuer (`send::signal_id_for`): what a recall names.
pub fn requested_signal_id(tenant: &str, req: &DirectiveRequested, to: &str) -> Uuid {
    signal_id_for(tenant, &req.issuer, Some(&dedupe_key(req.directive_id, "DirectiveRequested", to)))
}

const HOUR: u64 = 3600;

/// The signals `event`, just applied to give `after`, causes. Nobody is told of their own
/// action (an issuer canceling what it assigned to itself); progress and a decline that does
/// not reject send nothing.
pub fn lifecycle_signals(after: &DirectiveState, event: &EventBody) -> Vec<LifecycleSignal> {
    let Some(req) = after.requested.as_deref() else { return vec![] };
    let issuer = || vec![req.issuer.clone()];
    // The claimer; with none, everyone handed the request.
    let workers = || after.claimed_by.clone().map_or_else(|| req.candidates.clone(), |c| vec![c]);
    let (from, at, to, signal_type, ttl, category) = match event {
        EventBody::DirectiveRequested(r) => {
            let ttl = (r.deadline - r.created_at).num_seconds().max(0) as u64;
            (&r.issuer, r.created_at, req.candidates.clone(), "DirectiveRequested", ttl, Category::Task)
        }
        EventBody::DirectiveStarted(e) => (&e.by, e.at, issuer(), "DirectiveStarted", HOUR, Category::Info),
        EventBody::DirectiveCompleted(e) => (&e.by, e.at, issuer(), "DirectiveCompleted", 24 * HOUR, Category::Ask),
        EventBody::DirectiveFailed(e) => (&e.by, e.at, issuer(), "DirectiveFailed", 24 * HOUR, Category::Ask),
        EventBody::DirectiveDeclined(e) if e.rejects => {
            (&e.by, e.at, issuer(), "DirectiveRejected", 24 * HOUR, Category::Ask)
        }
        EventBody::DirectiveCanceled(e) => (&e.by, e.at, workers(), "DirectiveCanceled", HOUR, Category::Info),
        EventBody::DirectiveExpired(e) => {
            let mut to = issuer();
            to.extend(workers());
            (&BUS_IDENTITY.to_string(), e.at, to, "DirectiveExpired", 24 * HOUR, Category::Ask)
        }
        _ => return vec![],
    };
    let mut to: Vec<String> = to.into_iter().filter(|t| t != from).collect();
    to.sort();
    to.dedup();
    let payload = after.object();
    to.into_iter()
        .map(|to| LifecycleSignal {
            from: from.clone(),
            signal_type,
            delivery_class: DeliveryClass::Async,
            ttl_seconds: ttl,
            expires_at: at + Duration::seconds(ttl as i64),
            category,
            priority: category.priority(),
            correlation_id: req.directive_id.to_string(),
            dedupe_key: dedupe_key(req.directive_id, signal_type, &to),
            to,
            payload: payload.clone(),
        })
        .collect()
}

/// Whose `DirectiveRequested` signal, if still pending, the bus recalls once `event` (applied
/// to give `after`) claims or ends the directive: everyone handed the request but the claimer,
/// so nobody is handed work that is gone. Recalling one already delivered or recalled is a
/// no-op, so an end after a claim may list again those the claim listed.
pub fn requests_to_recall(after: &DirectiveState, event: &EventBody) -> Vec<String> {
    let Some(req) = after.requested.as_deref() else { return vec![] };
    let claims_or_ends = match event {
        EventBody::DirectiveDeclined(e) => e.rejects,
        EventBody::DirectiveStarted(_)
        | EventBody::DirectiveCompleted(_)
        | EventBody::DirectiveFailed(_)
        | EventBody::DirectiveCanceled(_)
        | EventBody::DirectiveExpired(_) => true,
        _ => false,
    };
    if !claims_or_ends {
        return vec![];
    }
    req.candidates.iter().filter(|c| after.claimed_by.as_ref() != Some(*c)).cloned().collect()
}

fn json_text(text: Option<&str>) -> Value {
    text.and_then(|t| serde_json::from_str(t).ok()).unwrap_or(Value::Null)
}

impl DirectiveState {
    /// The directive object (CONTRACT §14): every answer, `GET`, and lifecycle signal payload.
    /// `Value::Null` for a directive that does not exist.
    pub fn object(&self) -> Value {
        let Some(req) = self.requested.as_deref() else { return Value::Null };
        let rfc = |t: &DateTime<Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        json!({
            "directive_id": req.directive_id,
            "type": req.directive_type,
            "issuer": req.issuer,
            "assignee": req.assignee,
            "claimed_by": self.claimed_by,
            "params": json_text(Some(&req.params)),
            "status": self.status.as_str(),
            "created_at": rfc(&req.created_at),
            "deadline": rfc(&req.deadline),
            "started_at": self.started_at.as_ref().map(rfc),
            "finished_at": self.finished_at.as_ref().map(rfc),
            "progress": self.progress.as_ref().map(|p| json!({"message": p.message, "percent": p.percent, "at": rfc(&p.at)})),
            "result": json_text(self.result.as_deref()),
            "failure": self.failure.as_ref().map(|f| json!({"code": f.code, "message": f.message})),
            "reason": self.reason,
            "declined_by": self.declined_by,
            "correlation_id": req.correlation_id,
            "idempotency_key": req.idempotency_key,
            "redacted": self.redacted,
        })
    }
}
