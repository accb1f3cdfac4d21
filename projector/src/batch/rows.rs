//! The rows and patches a folded batch is made of: new `signal_queue`, `agents`,
//! `agent_sessions` and `plugin_facts` rows, and what a batch stamps on signals and sessions
//! that exist already. Plain data.
//!
//! Deliberately holds no folding rule (`batch.rs`) and no SQL (`apply.rs`).

use bus::event::SignalDelivered;
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// A `signal.sent` as a new `signal_queue` row.
#[derive(Debug, Clone)]
pub struct SentRow {
    pub id: Uuid,
    pub tenant: String,
    pub from: String,
    pub to: String,
    pub signal_type: String,
    pub category: String,
    pub priority: i16,
    pub payload: String,
    pub delivery_class: String,
    pub recipient_state: String,
    pub publish_path: String,
    pub correlation_id: Option<String>,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    /// The group send this signal is one member's part of.
    pub fanout_id: Option<Uuid>,
    /// When a scheduled signal becomes visible (CONTRACT §16).
    pub deliver_at: Option<DateTime<Utc>>,
    pub seq: i64,
}

impl SignalPatch {
    /// Stamps a delivery recorded at `at`, stream sequence `seq`.
    pub(crate) fn delivered(&mut self, d: &SignalDelivered, at: DateTime<Utc>, seq: i64) {
        self.delivered_at.get_or_insert(at);
        self.via = Some(d.via.as_str().to_string());
        self.session = d.session_id;
        self.seq = seq;
    }
}

/// Everything a batch stamps on one existing (or just inserted) signal row.
#[derive(Debug, Clone)]
pub struct SignalPatch {
    pub id: Uuid,
    /// The first delivery in the batch; the row keeps an earlier one if it has it.
    pub delivered_at: Option<DateTime<Utc>>,
    /// The newest delivery's path and session: a redelivery moves the signal to a new session.
    pub via: Option<String>,
    pub session: Option<Uuid>,
    pub acked_at: Option<DateTime<Utc>>,
    pub expired_at: Option<DateTime<Utc>>,
    /// Why it expired (`bus::event::ExpiryReason`), set with `expired_at`.
    pub expired_reason: Option<&'static str>,
    pub recalled_at: Option<DateTime<Utc>>,
    /// A scheduled signal's `signal.released`.
    pub released_at: Option<DateTime<Utc>>,
    pub seq: i64,
}

#[derive(Debug, Clone)]
pub struct AgentRow {
    pub tenant: String,
    pub identity: String,
    pub kind: String,
    pub registered_at: DateTime<Utc>,
}

#[derive(Debug, Clone)]
pub struct SessionRow {
    pub session_id: Uuid,
    pub tenant: String,
    pub identity: String,
    pub kind: String,
    pub surface: String,
    pub node: String,
    pub opened_at: DateTime<Utc>,
}

#[derive(Debug, Clone)]
pub struct SessionPatch {
    pub session_id: Uuid,
    pub heartbeat: Option<DateTime<Utc>>,
    pub released_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone)]
pub struct FactRow {
    pub tenant: String,
    pub plugin: String,
    pub seq: i64,
    pub fact_type: String,
    pub fact: String,
    pub recorded_by: String,
    pub created_at: DateTime<Utc>,
}
