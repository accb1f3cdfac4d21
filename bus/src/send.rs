//! The send rules (CONTRACT §4) as a pure function: validate a request, apply the per-type
//! defaults and overrides, redact secrets, schedule it when it asks to be (`schedule.rs`,
//! CONTRACT §16), and choose between queueing and bouncing from the recipient's state.
//!
//! Deliberately no I/O: presence is given as a `RecipientView`, the clock as `now`, and the
//! compare-and-set that makes a dedupe key's first send win is `store.rs`'s job.

use chrono::{DateTime, Duration, Utc};
use serde_json::Value;
use uuid::Uuid;

use crate::catalog::{validate_ttl, DeliveryClass, TypeTable};
use crate::error::{DomainError, DomainResult};
use crate::event::{PublishPath, RecipientState, SignalBounced, SignalSent};
use crate::names::{validate_identity, validate_signal_type};
use crate::nul::{refuse_in_json, refuse_in_str};
use crate::redact::redact;
use crate::schedule::{deliver_at_for, Asked};

/// Default payload limit: 64 KiB of encoded JSON.
pub const DEFAULT_MAX_PAYLOAD_BYTES: usize = 64 * 1024;
pub const MAX_CORRELATION_ID_CHARS: usize = 64;
pub const MAX_DEDUPE_KEY_CHARS: usize = 200;

/// Namespace of signal ids derived from dedupe keys (UUID v5).
const DEDUPE_NAMESPACE: Uuid = Uuid::from_u128(0x5b1e_7a2c_94d3_4e0f_a1c6_0d8e_3f27_b904);

/// A send as the sender asked for it. The sender is not a field: it is the authenticated caller.
#[derive(Debug, Clone, PartialEq)]
pub struct SendRequest {
    pub to: String,
    pub signal_type: String,
    pub payload: Value,
    pub delivery_class: Option<DeliveryClass>,
    pub ttl_seconds: Option<u64>,
    pub correlation_id: Option<String>,
    pub dedupe_key: Option<String>,
    /// Deliver this many seconds from now (CONTRACT §16); at most one of this and `deliver_at`.
    pub deliver_after_seconds: Option<u64>,
    /// Deliver at this instant (CONTRACT §16).
    pub deliver_at: Option<DateTime<Utc>>,
}

/// What a send is checked against besides the type table: the deployment's payload limit and
/// the stream's retention (a scheduled signal must end before the stream forgets it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendLimits {
    pub max_payload_bytes: usize,
    /// How long the stream keeps events; `None`: no bound is checked.
    pub retention: Option<std::time::Duration>,
}

impl Default for SendLimits {
    fn default() -> Self {
        Self { max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES, retention: None }
    }
}

impl SendLimits {
    /// Only a payload limit (sends that are never scheduled: lifecycle signals).
    pub fn payload(max_payload_bytes: usize) -> Self {
        Self { max_payload_bytes, retention: None }
    }
}

/// What presence knows about the recipient at send time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecipientView {
    pub registered: bool,
    pub state: RecipientState,
    /// At least one fresh WebSocket session (else a fresh session is piggyback-only).
    pub has_live_ws: bool,
    /// The recipient's freshest live session, which a send that is not queued offline
    /// resolves to (recorded, so a dedupe repeat answers the same session).
    pub freshest_session: Option<Uuid>,
}

/// The facts a send produces.
#[derive(Debug, Clone, PartialEq)]
pub enum SendDecision {
    Accepted(Box<SignalSent>),
    Bounced(SignalBounced),
}

/// The id a signal gets: derived from `(tenant, sender, dedupe_key)` when there is a key, so
/// every repeat of the send contends for the same stream subject and the first one wins;
/// otherwise a fresh one (`new_signal_id`).
pub fn signal_id_for(tenant: &str, from: &str, dedupe_key: Option<&str>) -> Uuid {
    match dedupe_key {
        Some(key) => Uuid::new_v5(&DEDUPE_NAMESPACE, format!("{tenant}\0{from}\0{key}").as_bytes()),
        None => new_signal_id(),
    }
}

/// A fresh signal (or fan-out) id: a UUID v7, whose leading bits are the time of the send.
/// Why not v4: every read model keys a signal's row by its id, and a random key lands each new
/// row in a random leaf of the primary-key index (and dirties a different page, with a full
/// page image in the write-ahead log after each checkpoint) where a time-ordered key appends at
/// the index's right edge, beside the rows its later deliveries and acks update
/// (docs/performance.md, "Stages, UUID v7 ids, and what a stream's reader costs"). The id stays opaque: nothing reads its time back.
pub fn new_signal_id() -> Uuid {
    Uuid::now_v7()
}

/// The least time a send may have left before its `expires_at` and still be gathered: a gathered
/// send counts only with its whole `sends.recorded`, which must be stored before the earliest
/// `expires_at` of the pushes in it (`acceptance::store_by`) — far beyond the append's own
/// acceptance window, so no entry's deadline ever decides for the others.
pub const GATHER_MIN_TTL: Duration = Duration::seconds(60);

/// Whether an accepted send may be recorded gathered with others (`sends.recorded`) instead of
/// on its own signal's subject: only one whose first append needs no compare-and-set — a fresh
/// v7 id (no dedupe key makes it, no repeat can contend for it), not scheduled (its release is
/// decided on the send's own subject), not one member's part of a fan-out — and with at least
/// `GATHER_MIN_TTL` left.
pub fn may_gather(sent: &SignalSent, now: DateTime<Utc>) -> bool {
    sent.dedupe_key.is_none()
        && sent.deliver_at.is_none()
        && sent.fanout_id.is_none()
        && crate::event::send_window(sent.signal_id).is_some()
        && sent.expires_at - now >= GATHER_MIN_TTL
}

impl SendRequest {
    /// The schedule part of this request, for `schedule::deliver_at_for`.
    pub fn asked(&self) -> Asked<'_> {
        Asked {
            deliver_after_seconds: self.deliver_after_seconds,
            deliver_at: self.deliver_at,
            signal_type: &self.signal_type,
            explicit_class: self.delivery_class,
        }
    }
}

/// Validates `req` and decides what a send from `from` at `now` records.
pub fn decide_send(
    table: &TypeTable,
    tenant: &str,
    from: &str,
    req: SendRequest,
    recipient: RecipientView,
    now: DateTime<Utc>,
    limits: SendLimits,
) -> DomainResult<SendDecision> {
    let max_payload_bytes = limits.max_payload_bytes;
    refuse_nul(&req)?;
    validate_identity(&req.to).map_err(|_| DomainError::invalid(format!("to {:?} is not a valid identity", req.to)))?;
    validate_signal_type(&req.signal_type)?;
    if let Some(ttl) = req.ttl_seconds {
        validate_ttl(ttl)?;
    }
    if let Some(c) = &req.correlation_id {
        if c.chars().count() > MAX_CORRELATION_ID_CHARS {
            return Err(DomainError::invalid("correlation_id must be at most 64 characters"));
        }
    }
    if let Some(k) = &req.dedupe_key {
        if k.is_empty() || k.chars().count() > MAX_DEDUPE_KEY_CHARS {
            return Err(DomainError::invalid("dedupe_key must be 1 to 200 characters"));
        }
    }
    // The text is built once: it is what is stored unless the redaction guard changes the payload.
    let text = crate::json::to_text(&req.payload);
    let encoded_len = text.len();
    if encoded_len > max_payload_bytes {
        return Err(DomainError::PayloadTooLarge(format!(
            "payload is {encoded_len} bytes encoded, the limit is {max_payload_bytes}"
        )));
    }
    let defaults = table.get(&req.signal_type);
    let delivery_class = req.delivery_class.unwrap_or(defaults.delivery_class);
    let ttl = req.ttl_seconds.unwrap_or(defaults.ttl_seconds);
    if !recipient.registered {
        return Err(DomainError::UnknownRecipient);
    }
    // After the recipient: whether a schedule is acceptable depends on the clock, which no
    // schema can say, so a send to no one answers `unknown_recipient` whatever it asks for.
    let deliver_at = deliver_at_for(&req.asked(), delivery_class, ttl, now, limits.retention)?;
    let signal_id = signal_id_for(tenant, from, req.dedupe_key.as_deref());

    let publish_path = match (recipient.state, delivery_class) {
        // Invisible until due: never pushed, never resolved to a session at send.
        _ if deliver_at.is_some() => PublishPath::Scheduled,
        (RecipientState::Available, _) if recipient.has_live_ws => PublishPath::PushedToWs,
        (RecipientState::Available, _) => PublishPath::BufferedForPiggyback,
        (_, DeliveryClass::Async) => PublishPath::QueuedOffline,
        (state, DeliveryClass::Sync) => {
            return Ok(SendDecision::Bounced(SignalBounced {
                signal_id,
                from: from.to_string(),
                to: req.to,
                signal_type: req.signal_type,
                delivery_class,
                recipient_state: state,
                dedupe_key: req.dedupe_key,
            }))
        }
    };

    let mut payload = req.payload;
    let redacted = redact(&mut payload);
    let created_at = now;
    Ok(SendDecision::Accepted(Box::new(SignalSent {
        signal_id,
        from: from.to_string(),
        to: req.to,
        signal_type: req.signal_type,
        category: defaults.category,
        priority: defaults.priority(),
        // `redact` names every value it replaced, so nothing named means nothing changed.
        payload: if redacted.is_empty() { text } else { crate::json::to_text(&payload) },
        delivery_class,
        created_at,
        expires_at: deliver_at.unwrap_or(created_at) + Duration::seconds(ttl as i64),
        recipient_state: recipient.state,
        publish_path,
        correlation_id: req.correlation_id,
        dedupe_key: req.dedupe_key,
        redacted,
        resolved_to_session: recipient
            .freshest_session
            .filter(|_| !matches!(publish_path, PublishPath::QueuedOffline | PublishPath::Scheduled)),
        pushed_to: None,
        fanout_id: None,
        deliver_at,
    })))
}

/// Refuses a NUL character in any text the send would store (see `nul.rs`), first, so the
/// message names the field whatever else is wrong with it.
fn refuse_nul(req: &SendRequest) -> DomainResult<()> {
    refuse_in_str("to", &req.to)?;
    refuse_in_str("type", &req.signal_type)?;
    if let Some(c) = &req.correlation_id {
        refuse_in_str("correlation_id", c)?;
    }
    if let Some(k) = &req.dedupe_key {
        refuse_in_str("dedupe_key", k)?;
    }
    refuse_in_json("payload", &req.payload)
}

/// The recipient state a sync send that was given up is answered with: what presence says now,
/// except that a recipient presence still calls `available` (its session is stuck, or its
/// gateway gone unnoticed) is answered `not_available_stale` — the push could not complete.
pub fn unreachable_state(now: RecipientState) -> RecipientState {
    match now {
        RecipientState::Available => RecipientState::NotAvailableStale,
        other => other,
    }
}

#[cfg(test)]
#[path = "send_tests.rs"]
mod tests;
