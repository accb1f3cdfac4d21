//! The JSON shapes of the HTTP API and the WebSocket frames as OpenAPI schemas, for the bodies
//! the handlers build with `serde_json` (send, rows, agents, plugins, errors, frames).
//!
//! Deliberately types for the document only: no handler serializes these. The tests validate
//! real answers against the generated schemas, so a drift between the two fails a test.

#![allow(dead_code)]

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

use chrono::{DateTime, Utc};

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Daemon,
    Shim,
    Interactive,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryClass {
    Sync,
    Async,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RecipientState {
    Available,
    NotAvailableStale,
    NotAvailableOffline,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PublishPath {
    PushedToWs,
    BufferedForPiggyback,
    QueuedOffline,
    Scheduled,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DeliveredVia {
    WsPush,
    StartupDrain,
    Piggyback,
    Inbox,
}

/// Why a signal expired (CONTRACT §16): its TTL passed, an operator forced it, its sync push was
/// given up, or its recipient was removed.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ExpiredReason {
    Ttl,
    Forced,
    Undeliverable,
    Removed,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum Category {
    Blocker,
    Ask,
    Task,
    Info,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RecallOutcome {
    Recalled,
    AlreadyDelivered,
    AlreadyExpired,
    NotFound,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    InvalidRequest,
    Unauthorized,
    Forbidden,
    NotFound,
    UnknownRecipient,
    RecipientUnavailable,
    AlreadyRegistered,
    InvalidTransition,
    AlreadyClaimed,
    IdempotencyConflict,
    UnknownGroup,
    PayloadTooLarge,
    RateLimited,
    Unavailable,
    Internal,
}

/// The error object (CONTRACT §8). A bounce adds `recipient_state` and `signal_id`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorObject {
    pub code: ErrorCode,
    /// Lowercase, specific, never internals.
    pub message: String,
    pub recipient_state: Option<RecipientState>,
    pub signal_id: Option<Uuid>,
    /// `rate_limited`: milliseconds until the quota has room again (HTTP also sends `Retry-After`).
    #[schema(minimum = 1)]
    pub retry_after_ms: Option<u64>,
    /// `invalid_transition`: the directive as it is now.
    pub directive: Option<Value>,
    /// `already_claimed`: the member holding the claim.
    pub claimed_by: Option<String>,
    /// `idempotency_conflict`: the directive the key already names.
    pub directive_id: Option<Uuid>,
}

/// Every error answer: `{"error": {...}}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorObject,
}

/// `POST /v1/signals` and the WebSocket `send` op (CONTRACT §4). The sender is the caller;
/// `from` and unknown fields are refused.
#[derive(Debug, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SendRequestBody {
    pub to: String,
    #[serde(rename = "type")]
    #[schema(pattern = "^[A-Za-z][A-Za-z0-9_.]{0,63}$")]
    pub signal_type: String,
    /// Any JSON, at most 64 KiB encoded; default `{}`.
    pub payload: Option<Value>,
    pub delivery_class: Option<DeliveryClass>,
    #[schema(minimum = 1, maximum = 2592000)]
    pub ttl_seconds: Option<u64>,
    #[schema(max_length = 64)]
    pub correlation_id: Option<String>,
    #[schema(max_length = 200)]
    pub dedupe_key: Option<String>,
    /// Schedule it (CONTRACT §16): deliver this many seconds from now. Async only; not with
    /// `deliver_at`; `deliver_after_seconds + ttl_seconds` must end within the stream's retention.
    #[schema(minimum = 1, maximum = 2592000)]
    pub deliver_after_seconds: Option<u64>,
    /// Schedule it (CONTRACT §16): deliver at this instant, in the future and at most 30 days
    /// ahead. Async only; not with `deliver_after_seconds`.
    pub deliver_at: Option<DateTime<Utc>>,
}

/// The accepted-send answer (CONTRACT §4).
#[derive(Debug, Serialize, ToSchema)]
pub struct SendAccepted {
    pub signal_id: Uuid,
    pub delivered: bool,
    pub queued: bool,
    pub recipient_state: RecipientState,
    pub delivery_class: DeliveryClass,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub resolved_to_session: Option<Uuid>,
    pub publish_path: PublishPath,
    /// When a scheduled signal becomes visible to its recipient (`publish_path: scheduled`).
    pub deliver_at: Option<DateTime<Utc>>,
    /// Dotted paths of payload values replaced by `[REDACTED]`.
    pub redacted: Option<Vec<String>>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RecallBody {
    pub outcome: RecallOutcome,
}

/// A signal's row (CONTRACT §10 columns).
#[derive(Debug, Serialize, ToSchema)]
pub struct SignalRowBody {
    pub id: Uuid,
    pub tenant: String,
    pub from_identity: String,
    pub to_identity: String,
    pub signal_type: String,
    pub category: Category,
    #[schema(minimum = 0, maximum = 3)]
    pub priority: i16,
    pub payload: Value,
    pub delivery_class: DeliveryClass,
    pub recipient_state: RecipientState,
    pub publish_path: Option<PublishPath>,
    pub correlation_id: Option<String>,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    pub delivered_at: Option<DateTime<Utc>>,
    pub expired_at: Option<DateTime<Utc>>,
    pub recalled_at: Option<DateTime<Utc>>,
    pub delivered_via: Option<DeliveredVia>,
    pub resolved_to_session: Option<Uuid>,
    pub acked_at: Option<DateTime<Utc>>,
    pub last_event_seq: i64,
    /// A scheduled signal's due time (CONTRACT §16); `null` for one sent to be seen at once.
    pub deliver_at: Option<DateTime<Utc>>,
    /// When the sweeper released a scheduled signal; `null` until then (and for one not scheduled).
    pub released_at: Option<DateTime<Utc>>,
    /// Set with `expired_at`; null while the signal has not expired.
    pub expired_reason: Option<ExpiredReason>,
}

/// A signal as handed to a session: the push frame's `signal`, and each entry of a
/// piggyback answer's `signals` and of the inbox (CONTRACT §5).
#[derive(Debug, Serialize, ToSchema)]
pub struct PushedSignal {
    pub id: Uuid,
    pub from: String,
    pub to: String,
    #[serde(rename = "type")]
    pub signal_type: String,
    pub category: Category,
    #[schema(minimum = 0, maximum = 3)]
    pub priority: i16,
    pub payload: Value,
    pub delivery_class: DeliveryClass,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    pub correlation_id: Option<String>,
    pub redelivered: bool,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OpenSession {
    pub kind: Option<Kind>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AckRequest {
    #[schema(min_items = 1, max_items = 1000)]
    pub signal_ids: Vec<Uuid>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RegisterRequest {
    /// Default `default`.
    #[schema(pattern = "^[a-z0-9][a-z0-9_-]{0,62}$")]
    pub tenant: Option<String>,
    #[schema(pattern = "^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$")]
    pub identity: String,
    pub kind: Option<Kind>,
}

/// A registered agent's token, shown once.
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentToken {
    pub tenant: String,
    pub identity: String,
    pub token: String,
}

/// The answer to removing an agent.
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentRemoved {
    pub tenant: String,
    pub identity: String,
    pub removed_at: DateTime<Utc>,
    /// Pending signals to the agent that this call expired.
    pub signals_expired: u64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AgentEntry {
    pub tenant: String,
    pub identity: String,
    pub kind: Kind,
    pub registered_at: DateTime<Utc>,
    pub state: RecipientState,
    pub live_sessions: u64,
    pub last_heartbeat: Option<DateTime<Utc>>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AgentList {
    pub tenant: String,
    pub agents: Vec<AgentEntry>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FactRequest {
    #[schema(min_length = 1, max_length = 128)]
    pub fact_type: String,
    /// A JSON object of at most 1 MiB encoded.
    #[schema(value_type = Object)]
    pub state: Value,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct FactSeq {
    pub seq: u64,
    /// Dotted paths of state values replaced by `[REDACTED]` (absent when none were).
    pub redacted: Option<Vec<String>>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PluginState {
    pub plugin: String,
    #[schema(value_type = Object)]
    pub state: Value,
    pub seq: i64,
    pub updated_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Fact {
    pub seq: i64,
    pub fact_type: String,
    #[schema(value_type = Object)]
    pub state: Value,
    pub recorded_by: String,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PluginFacts {
    pub facts: Vec<Fact>,
    /// Pass as `before_seq` for the next (older) page; null when there is none.
    pub next_before_seq: Option<i64>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Status {
    pub status: String,
}
