//! The facts of a signal's life (CONTRACT §4–§6, §16): sent or bounced, released (a scheduled
//! one, when due), delivered, acked, expired, recalled. Each lives on its signal's subject,
//! except ack batches (their recipient's).
//!
//! Deliberately only the facts: which may follow which is `signal.rs`'s to decide.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{DeliveredVia, PublishPath, RecipientState};
use crate::catalog::{Category, DeliveryClass};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SignalSent {
    pub signal_id: Uuid,
    pub from: String,
    pub to: String,
    pub signal_type: String,
    pub category: Category,
    pub priority: i16,
    /// The (redacted) payload as JSON text, stored verbatim so read models can keep it as jsonb.
    pub payload: String,
    pub delivery_class: DeliveryClass,
    #[serde(with = "super::ts")]
    pub created_at: DateTime<Utc>,
    #[serde(with = "super::ts")]
    pub expires_at: DateTime<Utc>,
    pub recipient_state: RecipientState,
    pub publish_path: PublishPath,
    #[serde(default)]
    pub correlation_id: Option<String>,
    #[serde(default)]
    pub dedupe_key: Option<String>,
    #[serde(default)]
    pub redacted: Vec<String>,
    /// The session the send resolved to (the recipient's freshest live session), as the send
    /// answered it; `None` when queued offline. Recorded so a dedupe repeat answers the same.
    #[serde(default)]
    pub resolved_to_session: Option<Uuid>,
    /// Set when this one event records the send **and** its delivery: the sending gateway held
    /// the recipient's session, reserved room in its queue before appending, and queues the push
    /// as soon as this append is accepted (`delivered_via: ws_push` to this session). Such a
    /// signal is born delivered: nothing can have recalled or expired it before its first event,
    /// so no compare-and-set is lost by skipping the separate `signal.delivered`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pushed_to: Option<Uuid>,
    /// The send to a group this signal is one member's part of (CONTRACT §15): every member's
    /// signal of one group send carries the same id, so they can be recalled together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fanout_id: Option<Uuid>,
    /// A scheduled send (CONTRACT §16): invisible to its recipient until this instant, when the
    /// sweeper records `signal.released`. `expires_at` counts from it. `None`: visible at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deliver_at: Option<DateTime<Utc>>,
}

impl SignalSent {
    /// The delivery this send recorded in the same event, if it did (`pushed_to`).
    pub fn delivery(&self) -> Option<SignalDelivered> {
        self.pushed_to.map(|session_id| SignalDelivered {
            signal_id: self.signal_id,
            to: self.to.clone(),
            via: DeliveredVia::WsPush,
            session_id: Some(session_id),
            redelivered: false,
            expires_at: Some(self.expires_at),
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SignalBounced {
    pub signal_id: Uuid,
    pub from: String,
    pub to: String,
    pub signal_type: String,
    pub delivery_class: DeliveryClass,
    pub recipient_state: RecipientState,
    #[serde(default)]
    pub dedupe_key: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SignalDelivered {
    pub signal_id: Uuid,
    pub to: String,
    pub via: DeliveredVia,
    #[serde(default)]
    pub session_id: Option<Uuid>,
    #[serde(default)]
    pub redelivered: bool,
    /// The signal's `expires_at`, copied when the delivery was decided: a delivery stored at or
    /// after it does not count (`acceptance::store_by`). `None` in events of older releases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SignalAcked {
    pub signal_id: Uuid,
    pub by: String,
    #[serde(default)]
    pub session_id: Option<Uuid>,
}

/// A batch of acks by one recipient, stored on its identity's acks subject rather than on each
/// signal's: an ack decides nothing (no outcome to win, CONTRACT §5), so it needs no
/// per-signal compare-and-set, and one append records a whole batch. Only signals delivered
/// to `by` are listed (the writer checked); an id listed twice, or in two batches, keeps its
/// first `acked_at`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SignalsAcked {
    pub by: String,
    /// The WebSocket session that acked; `None` for HTTP and MCP acks.
    #[serde(default)]
    pub session_id: Option<Uuid>,
    pub signal_ids: Vec<Uuid>,
}

/// The ack batches of several sessions of one tenant, recorded together by one gateway (its
/// ack batcher, `gateway/src/acks.rs`): each entry is exactly what one `signals.acked` would
/// hold, checked the same way, and folds the same way. One stream message instead of one per
/// session: a session's batch is a handful of ids, and a stream message costs the broker about
/// as much for four ids as for four hundred.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AcksRecorded {
    pub acks: Vec<SignalsAcked>,
}

impl super::EventBody {
    /// The signals an ack event lists (`signals.acked`, or every entry of an `acks.recorded`);
    /// none for any other event.
    pub fn acked_ids(&self) -> impl Iterator<Item = &Uuid> {
        let batches: &[SignalsAcked] = match self {
            super::EventBody::SignalsAcked(a) => std::slice::from_ref(a),
            super::EventBody::AcksRecorded(r) => &r.acks,
            _ => &[],
        };
        batches.iter().flat_map(|a| a.signal_ids.iter())
    }

    /// The events this one stands for: a gathered event's entries (sends of a `sends.recorded`,
    /// ack batches of an `acks.recorded`), one for any other — so a batch or a rate sized in
    /// events means the same whatever was gathered.
    pub fn entries(&self) -> usize {
        match self {
            super::EventBody::SendsRecorded(r) => r.sends.len().max(1),
            super::EventBody::AcksRecorded(r) => r.acks.len().max(1),
            _ => 1,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SignalExpired {
    pub signal_id: Uuid,
    pub expires_at: DateTime<Utc>,
    /// Given up rather than timed out, so it must never be delivered later: a sync push that
    /// could not complete promptly (the sender was answered `recipient_unavailable`), or a
    /// removed recipient. A dedupe repeat of a sync send given up answers as a bounce.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub undeliverable: bool,
    /// Why it expired. Every writer of this release sets it; `None` in events of older
    /// releases, which `reason()` reads from `undeliverable`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<ExpiryReason>,
}

impl SignalExpired {
    /// Why the signal expired, for events of any release: an event without `reason` was written
    /// before reasons were recorded, when only the TTL and a give-up (`undeliverable`) expired
    /// signals (a removal's expiry then reads as `undeliverable`).
    pub fn reason(&self) -> ExpiryReason {
        self.reason.unwrap_or(if self.undeliverable { ExpiryReason::Undeliverable } else { ExpiryReason::Ttl })
    }
}

/// Why a signal expired (`signal.expired`'s `reason`, the read models' `expired_reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExpiryReason {
    /// Its `expires_at` passed (the sweeper; a recall that found it past its TTL).
    Ttl,
    /// An operator's force-expire (CONTRACT §16), whatever its `expires_at`.
    Forced,
    /// Its sync push could not complete promptly; the sender was answered `recipient_unavailable`.
    Undeliverable,
    /// Its recipient was removed (CONTRACT §8 `DELETE /v1/agents/{identity}`).
    Removed,
}

impl ExpiryReason {
    pub const ALL: [ExpiryReason; 4] =
        [ExpiryReason::Ttl, ExpiryReason::Forced, ExpiryReason::Undeliverable, ExpiryReason::Removed];

    pub const fn as_str(self) -> &'static str {
        match self {
            ExpiryReason::Ttl => "ttl",
            ExpiryReason::Forced => "forced",
            ExpiryReason::Undeliverable => "undeliverable",
            ExpiryReason::Removed => "removed",
        }
    }

    /// Whether a signal expired for this reason was given up (`SignalExpired::undeliverable`):
    /// it had a recipient to wait for no longer.
    pub fn gives_up(self) -> bool {
        matches!(self, ExpiryReason::Undeliverable | ExpiryReason::Removed)
    }
}

/// A scheduled signal became due and visible: from here on it is pushed to a live session of its
/// recipient, or waits like any queued async signal. Appended by the sweeper at `deliver_at`,
/// only while the signal is pending and not released yet, with the per-signal compare-and-set —
/// so of a release, a recall and an expiry racing on the stream exactly one follows the send.
/// Carries the recipient and the instants so a reader decides whether to act without reading.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SignalReleased {
    pub signal_id: Uuid,
    pub to: String,
    pub deliver_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SignalRecalled {
    pub signal_id: Uuid,
    pub by: String,
}
