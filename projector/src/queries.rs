//! What the gateway and the sweeper may ask of the read models, backend-independent.
//!
//! Deliberately read-only: nothing here changes a row. Answers may lag the stream; a caller that
//! needs everything up to a stream position calls `wait_for(seq)` first.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

use crate::error::Result;

/// One `signal_queue` (or `signal_history`) row, with the CONTRACT §10 columns.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SignalRow {
    pub id: Uuid,
    pub tenant: String,
    pub from_identity: String,
    pub to_identity: String,
    pub signal_type: String,
    pub category: String,
    pub priority: i16,
    pub payload: serde_json::Value,
    pub delivery_class: String,
    pub recipient_state: String,
    pub publish_path: Option<String>,
    pub correlation_id: Option<String>,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    pub delivered_at: Option<DateTime<Utc>>,
    pub expired_at: Option<DateTime<Utc>>,
    pub recalled_at: Option<DateTime<Utc>>,
    pub delivered_via: Option<String>,
    pub resolved_to_session: Option<Uuid>,
    pub acked_at: Option<DateTime<Utc>>,
    pub last_event_seq: i64,
}

/// `status` filter of signal lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusFilter {
    Pending,
    Delivered,
    Expired,
    Recalled,
}

/// `role` filter of signal lists: signals the caller sent, or received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Sent,
    Received,
}

/// A page request of `list_signals`: newest first, continuing strictly after `cursor`.
#[derive(Debug, Clone, PartialEq)]
pub struct ListSignals {
    pub tenant: String,
    pub identity: String,
    pub role: Option<Role>,
    pub status: Option<StatusFilter>,
    pub limit: u32,
    /// `(created_at, id)` of the last row of the previous page.
    pub cursor: Option<(DateTime<Utc>, Uuid)>,
}

/// A signal the sweeper should expire, with what its `signal.expired` event needs, so the
/// sweeper can append it without reading the stream first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overdue {
    pub tenant: String,
    pub id: Uuid,
    pub signal_type: String,
    pub expires_at: DateTime<Utc>,
    pub correlation_id: Option<String>,
    /// The stream sequence of the newest event the read model folded into this row: the
    /// expected subject sequence of a compare-and-set expiry (a newer event makes it fail).
    pub last_event_seq: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgentRow {
    pub tenant: String,
    pub identity: String,
    pub kind: String,
    pub registered_at: DateTime<Utc>,
    /// From `recipient_state`.
    pub state: String,
    pub live_sessions: i32,
    pub last_heartbeat: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PluginStateRow {
    pub plugin: String,
    pub state: serde_json::Value,
    pub seq: i64,
    pub updated_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PluginFactRow {
    pub seq: i64,
    pub fact_type: String,
    pub state: serde_json::Value,
    pub recorded_by: String,
    pub created_at: DateTime<Utc>,
}

#[async_trait]
pub trait Queries: Send + Sync + std::fmt::Debug + 'static {
    /// The stream sequence every read model has applied up to (inclusive).
    async fn applied_seq(&self) -> Result<u64>;

    /// Waits until `applied_seq() >= seq`, or fails with `Error::Lagging` after `timeout`.
    async fn wait_for(&self, seq: u64, timeout: Duration) -> Result<()>;

    /// What a session of `identity` should be handed, in drain order (`priority DESC,
    /// created_at ASC`): pending signals, and signals delivered but never acked whose delivering
    /// session has since closed (they go out again with `redelivered: true`). Rows past
    /// `expires_at` are left out.
    async fn drainable(&self, tenant: &str, identity: &str, now: DateTime<Utc>, limit: u32) -> Result<Vec<SignalRow>>;

    /// One signal by id, from the hot table or the history.
    async fn signal(&self, tenant: &str, id: Uuid) -> Result<Option<SignalRow>>;

    /// A page of the caller's signals, newest first.
    async fn list_signals(&self, q: &ListSignals) -> Result<Vec<SignalRow>>;

    /// Pending signals with `expires_at <= now`, in `(expires_at, id)` order, strictly after
    /// `after` (the last row of the previous page) when given.
    async fn overdue(
        &self,
        now: DateTime<Utc>,
        after: Option<(DateTime<Utc>, Uuid)>,
        limit: u32,
    ) -> Result<Vec<Overdue>>;

    /// The roster of a tenant with recipient state.
    async fn agents(&self, tenant: &str) -> Result<Vec<AgentRow>>;

    /// The compatibility view of a plugin (`{}` and seq 0 when it has no facts).
    async fn plugin_state(&self, tenant: &str, plugin: &str) -> Result<PluginStateRow>;

    /// A plugin's facts, newest first.
    async fn plugin_facts(
        &self,
        tenant: &str,
        plugin: &str,
        fact_type: Option<&str>,
        limit: u32,
    ) -> Result<Vec<PluginFactRow>>;

    /// Whether the database answers.
    async fn ping(&self) -> Result<()>;
}
