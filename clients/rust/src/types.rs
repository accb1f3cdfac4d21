//! The wire shapes of CONTRACT.md as serde types: the send request (§4), the bus's answers
//! (§4 send result, §5 signals, §6 recall, §8 rows, roster, plugin facts, registrations), and
//! the §3 default TTLs a spooled send needs.
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

/// A send (§4). Build it with [`SendRequest::new`] and the setters; every send the client makes
/// carries a `dedupe_key` (the caller's, or a generated `sbc-<uuid>`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SendRequest {
    pub to: String,
    #[serde(rename = "type")]
    pub signal_type: String,
    #[serde(default)]
    pub payload: Value,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub delivery_class: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub ttl_seconds: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub correlation_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub dedupe_key: Option<String>,
}

impl SendRequest {
    pub fn new(to: impl Into<String>, signal_type: impl Into<String>) -> Self {
        SendRequest {
            to: to.into(),
            signal_type: signal_type.into(),
            payload: Value::Object(Default::default()),
            delivery_class: None,
            ttl_seconds: None,
            correlation_id: None,
            dedupe_key: None,
        }
    }
    pub fn payload(mut self, payload: Value) -> Self {
        self.payload = payload;
        self
    }
    /// `sync` or `async` (default: the type's, CONTRACT §3).
    pub fn delivery_class(mut self, class: impl Into<String>) -> Self {
        self.delivery_class = Some(class.into());
        self
    }
    pub fn ttl_seconds(mut self, ttl: u64) -> Self {
        self.ttl_seconds = Some(ttl);
        self
    }
    pub fn correlation_id(mut self, id: impl Into<String>) -> Self {
        self.correlation_id = Some(id.into());
        self
    }
    pub fn dedupe_key(mut self, key: impl Into<String>) -> Self {
        self.dedupe_key = Some(key.into());
        self
    }
}

/// The bus accepted a send (§4 accepted response).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct SendResult {
    pub signal_id: String,
    #[serde(default)]
    pub delivered: bool,
    #[serde(default)]
    pub queued: bool,
    pub recipient_state: String,
    pub delivery_class: String,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    #[serde(default)]
    pub resolved_to_session: Option<String>,
    pub publish_path: String,
    /// Payload paths the redaction guard replaced.
    #[serde(default)]
    pub redacted: Vec<String>,
    /// The key the send carried (the caller's or the generated one); not a wire field.
    #[serde(skip)]
    pub dedupe_key: String,
}

/// The bus could not take the send; it waits in the spool and is replayed (same dedupe_key).
#[derive(Debug, Clone, PartialEq)]
pub struct Spooled {
    pub dedupe_key: String,
    /// The spool file's name.
    pub entry: String,
    /// Why it was spooled (the error's code and message).
    pub reason: String,
    pub spooled_at: DateTime<Utc>,
    pub ttl_seconds: u64,
}

/// What `send` did: accepted by the bus, or spooled for later.
#[derive(Debug, Clone, PartialEq)]
pub enum SendOutcome {
    Sent(SendResult),
    Spooled(Spooled),
}

impl SendOutcome {
    pub fn dedupe_key(&self) -> &str {
        match self {
            SendOutcome::Sent(r) => &r.dedupe_key,
            SendOutcome::Spooled(s) => &s.dedupe_key,
        }
    }
    /// `true` when the spool took the send (Python `out.spooled`, TypeScript `out.spooled`).
    pub fn is_spooled(&self) -> bool {
        matches!(self, SendOutcome::Spooled(_))
    }
    /// The signal's id, or `None` when it was spooled: the bus gives it an id when the replay is
    /// accepted (`on_replay`). Python `out.signal_id`, TypeScript `out.signalId` (`null`).
    pub fn signal_id(&self) -> Option<&str> {
        self.sent().map(|r| r.signal_id.as_str())
    }
    /// The accepted result, or `None` when it was spooled.
    pub fn sent(&self) -> Option<&SendResult> {
        match self {
            SendOutcome::Sent(r) => Some(r),
            SendOutcome::Spooled(_) => None,
        }
    }
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

/// One page of `list`, newest first; `next_cursor` continues.
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

/// CONTRACT §3: the delivery class the bus gives a send of `signal_type` that names none
/// (`Blocker` and `Question` are sync, every other type async).
pub(crate) fn default_delivery_class(signal_type: &str) -> &'static str {
    match signal_type {
        "Blocker" | "Question" => "sync",
        _ => "async",
    }
}

/// CONTRACT §3: the type's default TTL in seconds. A spooled send without `ttl_seconds` is
/// stored with this so a replay can send the TTL it has left. A deployment that overrides the
/// defaults should pass `ttl_seconds` explicitly.
pub fn default_ttl(signal_type: &str) -> u64 {
    const H: u64 = 3600;
    match signal_type {
        "Blocker" => 4 * H,
        "Question" | "Acknowledgment" => H,
        "TaskAssigned" => 7 * 24 * H,
        "MasterPreempted" => 120,
        "PeerJoined" | "PeerLeft" => 300,
        _ => 24 * H,
    }
}
