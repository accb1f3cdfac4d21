//! The wire shapes of CONTRACT.md as serde types: the bus's answers (§5 signals, §6 recall, §8
//! rows with §16's scheduling and expiry columns, roster, plugin facts, registrations). A send's
//! shapes are `types_send.rs`.
//!
//! Deliberately its own mirror of the JSON, not the bus crates' types: this is a wire client,
//! and it must keep working against a bus built from another version of the workspace.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The first frame of a session.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Welcome {
    pub session_id: String,
    pub tenant: String,
    pub identity: String,
    /// How often the client pings (a quarter of the bus's `--stale-after`).
    #[serde(default = "default_heartbeat_ms")]
    pub heartbeat_interval_ms: u64,
}

fn default_heartbeat_ms() -> u64 {
    15_000
}

/// A signal as pushed (§5 push frame) or drained from the inbox.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct Signal {
    pub id: String,
    pub from: String,
    pub to: String,
    #[serde(rename = "type")]
    pub signal_type: String,
    #[serde(default)]
    pub category: String,
    #[serde(default)]
    pub priority: i64,
    #[serde(default)]
    pub payload: Value,
    #[serde(default = "default_class")]
    pub delivery_class: String,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    #[serde(default)]
    pub correlation_id: Option<String>,
    /// True when this is a redelivery of a signal a closed session did not ack.
    #[serde(default)]
    pub redelivered: bool,
}

/// A signal stands for its id where ids are taken: `client.ack([&sig])`, `client.ack(&signals)`
/// (like Python's and TypeScript's `ack(sig)`).
impl AsRef<str> for Signal {
    fn as_ref(&self) -> &str {
        &self.id
    }
}

fn default_class() -> String {
    "async".into()
}

/// §6 recall outcomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RecallOutcome {
    Recalled,
    AlreadyDelivered,
    AlreadyExpired,
    NotFound,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct RecallAnswer {
    pub outcome: RecallOutcome,
}

/// A signal's row (§10 columns), from `get` and `list`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct SignalRow {
    pub id: String,
    #[serde(default)]
    pub tenant: String,
    pub from_identity: String,
    pub to_identity: String,
    pub signal_type: String,
    #[serde(default)]
    pub category: String,
    #[serde(default)]
    pub priority: i64,
    #[serde(default)]
    pub payload: Value,
    #[serde(default = "default_class")]
    pub delivery_class: String,
    #[serde(default)]
    pub recipient_state: Option<String>,
    #[serde(default)]
    pub publish_path: Option<String>,
    #[serde(default)]
    pub correlation_id: Option<String>,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    #[serde(default)]
    pub delivered_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub expired_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub recalled_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub delivered_via: Option<String>,
    #[serde(default)]
    pub resolved_to_session: Option<String>,
    #[serde(default)]
    pub acked_at: Option<DateTime<Utc>>,
    /// A scheduled signal's delivery time (§16); `None` for one that was not scheduled.
    #[serde(default)]
    pub deliver_at: Option<DateTime<Utc>>,
    /// When the bus released a scheduled signal to its recipient (at `deliver_at`).
    #[serde(default)]
    pub released_at: Option<DateTime<Utc>>,
    /// Why it expired (§16): `ttl` (its TTL ran out) or `forced` (an admin's `expire_signals`);
    /// `None` while it has not expired.
    #[serde(default)]
    pub expired_reason: Option<String>,
}

impl SignalRow {
    /// `pending`, `delivered`, `expired` or `recalled`.
    pub fn status(&self) -> &'static str {
        if self.delivered_at.is_some() {
            "delivered"
        } else if self.recalled_at.is_some() {
            "recalled"
        } else if self.expired_at.is_some() {
            "expired"
        } else {
            "pending"
        }
    }
}

/// One page of `list` (newest first) or `conversation` (oldest first); `next_cursor` continues
/// (`None`: the last page).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct SignalPage {
    #[serde(default)]
    pub signals: Vec<SignalRow>,
    #[serde(default)]
    pub next_cursor: Option<String>,
}

/// Filters of `list` (`GET /v1/signals`).
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    /// `sent` or `received`.
    pub role: Option<String>,
    /// `pending`, `delivered`, `expired` or `recalled`.
    pub status: Option<String>,
    pub limit: Option<u32>,
    pub cursor: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Signals {
    #[serde(default)]
    pub signals: Vec<Signal>,
}

/// A roster entry with its recipient state (§2).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Agent {
    pub identity: String,
    #[serde(default)]
    pub tenant: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default = "offline")]
    pub state: String,
    #[serde(default)]
    pub live_sessions: u64,
    #[serde(default)]
    pub last_heartbeat: Option<DateTime<Utc>>,
    #[serde(default)]
    pub registered_at: Option<DateTime<Utc>>,
}

fn offline() -> String {
    "not_available_offline".into()
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Roster {
    #[serde(default)]
    pub tenant: String,
    #[serde(default)]
    pub agents: Vec<Agent>,
}

/// `register` / `rotate` answer: the agent's token, shown once.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Registration {
    #[serde(default)]
    pub tenant: String,
    #[serde(default)]
    pub identity: String,
    pub token: String,
}

/// `remove` answer: what the bus did. `signals_expired` counts the pending signals to the agent
/// that expired with it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Removal {
    #[serde(default)]
    pub tenant: String,
    #[serde(default)]
    pub identity: String,
    pub removed_at: DateTime<Utc>,
    #[serde(default)]
    pub signals_expired: u64,
}

/// A plugin's compatibility view: its newest fact's state.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct PluginState {
    pub plugin: String,
    #[serde(default)]
    pub state: Value,
    #[serde(default)]
    pub seq: i64,
    #[serde(default)]
    pub updated_at: Option<DateTime<Utc>>,
}

/// One plugin fact.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Fact {
    pub seq: i64,
    pub fact_type: String,
    #[serde(default)]
    pub state: Value,
    #[serde(default)]
    pub recorded_by: String,
    #[serde(default)]
    pub created_at: Option<DateTime<Utc>>,
}

/// One page of facts, newest first; `next_before_seq` continues.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct FactPage {
    #[serde(default)]
    pub facts: Vec<Fact>,
    #[serde(default)]
    pub next_before_seq: Option<i64>,
}
