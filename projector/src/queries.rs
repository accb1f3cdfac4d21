//! What the gateway and the sweeper may ask of the read models, backend-independent.
//!
//! Deliberately read-only: nothing here changes a row. Answers may lag the stream; a caller that
//! needs everything up to a stream position calls `wait_for(seq)` first.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

use crate::dead_letter::DeadLetter;
use crate::error::Result;

mod directives;
mod pending;
pub use directives::{DirectiveFilter, DirectiveRole, DirectiveRow, ListDirectives, OverdueDirective};
pub use pending::{PendingSignal, PendingSignals};

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
    /// The group send this signal is one member's part of (CONTRACT §15).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fanout_id: Option<Uuid>,
    /// A scheduled signal's due time (CONTRACT §16).
    pub deliver_at: Option<DateTime<Utc>>,
    /// When a scheduled signal was released (its `signal.released`).
    pub released_at: Option<DateTime<Utc>>,
    /// Why it expired: `ttl`, `forced`, `undeliverable` or `removed` (`bus::event::ExpiryReason`);
    /// `None` while it has not.
    pub expired_reason: Option<String>,
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

/// A page of one conversation (`conversation`): the signals `identity` sent or received with
/// `correlation_id`, oldest first, continuing strictly after `after`.
#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    pub tenant: String,
    pub identity: String,
    pub correlation_id: String,
    pub role: Option<Role>,
    pub status: Option<StatusFilter>,
    pub limit: u32,
    /// `(created_at, id)` of the last row of the previous page.
    pub after: Option<(DateTime<Utc>, Uuid)>,
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

/// A scheduled signal the sweeper should release (CONTRACT §16): pending, not released, due,
/// with what its `signal.released` needs, so the sweeper can append it without reading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueRelease {
    pub tenant: String,
    pub id: Uuid,
    pub to_identity: String,
    pub deliver_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub correlation_id: Option<String>,
    /// As `Overdue::last_event_seq`: the release's compare-and-set expectation.
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

/// A group with its members (`groups` and `group_members`, CONTRACT §15).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupRow {
    pub tenant: String,
    /// The name with its `@`.
    pub group: String,
    pub self_join: bool,
    pub announce: bool,
    pub created_at: DateTime<Utc>,
    /// Sorted by identity.
    pub members: Vec<GroupMemberRow>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupMemberRow {
    pub identity: String,
    pub added_at: DateTime<Utc>,
    pub added_by: String,
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
    /// The fact's `state` as stored JSON text: handed out as it is, never parsed on the way.
    pub state_json: String,
    pub recorded_by: String,
    pub created_at: DateTime<Utc>,
}

/// A page request of `plugin_facts`: newest first, strictly older than `before_seq` when
/// given, at most `limit` facts, and no fact past the one whose encoded state brings the page
/// to `max_bytes` (so a page always holds at least one fact, and at most `max_bytes` plus one
/// fact).
#[derive(Debug, Clone, PartialEq)]
pub struct FactsPage {
    pub tenant: String,
    pub plugin: String,
    pub fact_type: Option<String>,
    pub before_seq: Option<i64>,
    pub limit: u32,
    pub max_bytes: u64,
}

/// A page of facts, and where the next one starts (`None`: there are no older facts).
#[derive(Debug, Clone, PartialEq)]
pub struct FactsAnswer {
    pub facts: Vec<PluginFactRow>,
    pub next_before_seq: Option<i64>,
}

impl FactsPage {
    /// Given the `(seq, bytes)` of up to `limit + 1` facts, newest first, the seq range to read
    /// (`oldest..=newest`) and whether older facts remain past it.
    pub fn cut(&self, sizes: &[(i64, i64)]) -> Option<(i64, i64, bool)> {
        let newest = sizes.first()?.0;
        let mut total: u64 = 0;
        let mut oldest = newest;
        let mut taken = 0usize;
        for &(seq, bytes) in sizes.iter().take(self.limit as usize) {
            if taken > 0 && total >= self.max_bytes {
                break;
            }
            total += bytes.max(0) as u64;
            oldest = seq;
            taken += 1;
        }
        Some((oldest, newest, sizes.len() > taken))
    }
}

#[async_trait]
pub trait Queries: Send + Sync + std::fmt::Debug + 'static {
    /// The stream sequence every read model has applied up to (inclusive).
    async fn applied_seq(&self) -> Result<u64>;

    /// Waits until `applied_seq() >= seq`, or fails with `Error::Lagging` after `timeout`.
    async fn wait_for(&self, seq: u64, timeout: Duration) -> Result<()>;

    /// Each checkpoint this process learns of as it happens — every batch its own projector
    /// commits, and what `wait_for` read: a wake-up, never the authority (a projector in another
    /// process moves the checkpoint without it; `applied_seq` is the truth).
    fn applied_changes(&self) -> tokio::sync::watch::Receiver<u64>;

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

    /// Pending scheduled signals not released yet with `deliver_at <= now`, in `(deliver_at, id)`
    /// order, strictly after `after` when given (past their TTL too: the caller skips those).
    async fn due_releases(
        &self,
        now: DateTime<Utc>,
        after: Option<(DateTime<Utc>, Uuid)>,
        limit: u32,
    ) -> Result<Vec<DueRelease>>;
    /// A page of the pending signals a force-expire's filters match (CONTRACT §16), in
    /// `(expires_at, id)` order.
    async fn pending_signals(&self, q: &PendingSignals) -> Result<Vec<PendingSignal>>;

    /// The roster of a tenant with recipient state.
    async fn agents(&self, tenant: &str) -> Result<Vec<AgentRow>>;

    /// The compatibility view of a plugin (`{}` and seq 0 when it has no facts).
    async fn plugin_state(&self, tenant: &str, plugin: &str) -> Result<PluginStateRow>;

    /// A page of a plugin's facts, newest first, bounded in rows and in bytes.
    async fn plugin_facts(&self, page: &FactsPage) -> Result<FactsAnswer>;

    /// One directive by id, whoever asks (the gateway checks the caller is a party).
    async fn directive(&self, tenant: &str, directive_id: Uuid) -> Result<Option<DirectiveRow>>;

    /// A page of the caller's directives, newest first (`assigned` includes those the caller
    /// is a candidate of).
    async fn list_directives(&self, q: &ListDirectives) -> Result<Vec<DirectiveRow>>;

    /// Open directives with `deadline <= now`, in `(deadline, directive_id)` order, strictly
    /// after `after` when given.
    async fn overdue_directives(
        &self,
        now: DateTime<Utc>,
        after: Option<(DateTime<Utc>, Uuid)>,
        limit: u32,
    ) -> Result<Vec<OverdueDirective>>;

    /// The groups of a tenant with their members, sorted by name.
    async fn groups(&self, tenant: &str) -> Result<Vec<GroupRow>>;

    /// One group with its members (`name` with its `@`).
    async fn group(&self, tenant: &str, name: &str) -> Result<Option<GroupRow>>;

    /// The groups `identity` is a member of, sorted (its removal leaves every one of them).
    async fn groups_of(&self, tenant: &str, identity: &str) -> Result<Vec<String>>;

    /// The signals (hot or archived) `sender` sent as one group send, sorted by recipient.
    async fn signals_by_fanout(&self, tenant: &str, sender: &str, fanout_id: Uuid) -> Result<Vec<SignalRow>>;

    /// The signals (hot or archived) `sender` sent with `correlation_id`, sorted by recipient.
    async fn signals_by_correlation(&self, tenant: &str, sender: &str, correlation_id: &str) -> Result<Vec<SignalRow>>;

    /// A page of the signals (hot or archived) the caller sent or received with one
    /// correlation id, oldest first (`created_at`, then `id`).
    async fn conversation(&self, q: &Conversation) -> Result<Vec<SignalRow>>;

    /// Whether the database answers.
    async fn ping(&self) -> Result<()>;

    /// Where projection stands and what it skipped (`health::problems` judges it).
    async fn projection_status(&self) -> Result<ProjectionStatus>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(limit: u32, max_bytes: u64) -> FactsPage {
        FactsPage { tenant: "t".into(), plugin: "p".into(), fact_type: None, before_seq: None, limit, max_bytes }
    }

    #[test]
    fn pages_stop_at_the_byte_budget_but_always_hold_one_fact() {
        let sizes = [(9, 400), (8, 400), (7, 400), (6, 400)];
        assert_eq!(page(10, 1000).cut(&sizes), Some((7, 9, true)), "the fact crossing the budget is the last");
        assert_eq!(page(10, 100).cut(&sizes), Some((9, 9, true)), "one fact even past the budget");
        assert_eq!(page(2, 10_000).cut(&sizes), Some((8, 9, true)), "the row limit");
        assert_eq!(page(4, 10_000).cut(&sizes), Some((6, 9, false)), "limit + 1 rows were asked: nothing older");
        assert_eq!(page(4, 10_000).cut(&[]), None);
    }
}

/// Where projection stands, from the read models.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProjectionStatus {
    pub checkpoint: u64,
    /// When the checkpoint last moved.
    pub checkpoint_at: DateTime<Utc>,
    /// Rows in `projection_dead_letters`.
    pub dead_letters: u64,
    /// The dead letter with the lowest sequence.
    pub first_dead_letter: Option<DeadLetter>,
}
