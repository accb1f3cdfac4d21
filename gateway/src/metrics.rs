//! The CONTRACT §11 series the gateway records, with exact names and labels. Signal types
//! outside the configured table are folded into `other` so label sets stay bounded.
//!
//! Deliberately installs no recorder and no exporter: the binary does, and without one these
//! calls are no-ops (which keeps tests free of global state).

use bus::catalog::TypeTable;
use bus::event::{DeliveredVia, PublishPath, RecipientState, SessionKind, Surface};
use bus::signal::RecallOutcome;
use chrono::{DateTime, Utc};

pub const SIGNALS_SENT_TOTAL: &str = "signalbus_signals_sent_total";
pub const SIGNALS_BOUNCED_TOTAL: &str = "signalbus_signals_bounced_total";
pub const UNKNOWN_RECIPIENT_REJECTIONS_TOTAL: &str = "signalbus_unknown_recipient_rejections_total";
pub const SIGNALS_DELIVERED_TOTAL: &str = "signalbus_signals_delivered_total";
pub const SIGNAL_RECALLS_TOTAL: &str = "signalbus_signal_recalls_total";
pub const TIME_TO_DELIVERY_SECONDS: &str = "signalbus_time_to_delivery_seconds";
pub const SESSIONS: &str = "signalbus_sessions";
pub const DISCONNECTS_TOTAL: &str = "signalbus_disconnects_total";
/// Sends refused by the per-identity send rate (beyond CONTRACT §11; no labels, so bounded).
pub const SENDS_RATE_LIMITED_TOTAL: &str = "signalbus_sends_rate_limited_total";

pub fn rate_limited() {
    metrics::counter!(SENDS_RATE_LIMITED_TOTAL).increment(1);
}

pub fn sent(
    types: &TypeTable,
    signal_type: &str,
    class: bus::catalog::DeliveryClass,
    state: RecipientState,
    path: PublishPath,
) {
    metrics::counter!(SIGNALS_SENT_TOTAL,
        "signal_type" => types.metric_label(signal_type).to_string(),
        "delivery_class" => class.as_str(),
        "recipient_state" => state.as_str(),
        "publish_path" => path.as_str())
    .increment(1);
}

pub fn bounced(types: &TypeTable, signal_type: &str, state: RecipientState) {
    metrics::counter!(SIGNALS_BOUNCED_TOTAL,
        "signal_type" => types.metric_label(signal_type).to_string(),
        "recipient_state" => state.as_str())
    .increment(1);
}

pub fn unknown_recipient(types: &TypeTable, signal_type: &str, sender: &str) {
    metrics::counter!(UNKNOWN_RECIPIENT_REJECTIONS_TOTAL,
        "signal_type" => types.metric_label(signal_type).to_string(),
        "sender" => sender.to_string())
    .increment(1);
}

pub fn delivered(types: &TypeTable, signal_type: &str, via: DeliveredVia, created_at: DateTime<Utc>) {
    let label = types.metric_label(signal_type).to_string();
    metrics::counter!(SIGNALS_DELIVERED_TOTAL, "signal_type" => label.clone(), "via" => via.as_str()).increment(1);
    let secs = (Utc::now() - created_at).to_std().map(|d| d.as_secs_f64()).unwrap_or(0.0);
    metrics::histogram!(TIME_TO_DELIVERY_SECONDS, "signal_type" => label, "via" => via.as_str()).record(secs);
}

pub fn recall(outcome: RecallOutcome) {
    metrics::counter!(SIGNAL_RECALLS_TOTAL, "outcome" => outcome.as_str()).increment(1);
}

pub fn session_opened(kind: SessionKind, surface: Surface) {
    metrics::gauge!(SESSIONS, "kind" => kind.as_str(), "surface" => surface.as_str()).increment(1.0);
}

pub fn session_closed(kind: SessionKind, surface: Surface, reason: &'static str) {
    metrics::gauge!(SESSIONS, "kind" => kind.as_str(), "surface" => surface.as_str()).decrement(1.0);
    metrics::counter!(DISCONNECTS_TOTAL, "reason" => reason).increment(1);
}

/// A session closed by a node that did not hold it (its holder is gone, and so is its gauge).
pub fn disconnected(reason: &'static str) {
    metrics::counter!(DISCONNECTS_TOTAL, "reason" => reason).increment(1);
}
