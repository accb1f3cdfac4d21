//! A canonical, comparable dump of every read model: what "the live tables equal a rebuild,
//! row for row" means in tests and in the rebuild's own verification.
//!
//! Deliberately leaves out what is not derived from the stream: when a checkpoint was written,
//! when a row was archived and when a dead letter was recorded. Hot and archived signal rows
//! are one set, because archiving only moves rows.

use std::collections::BTreeMap;

/// (name, columns, FROM clause, ORDER BY) of each dumped table; the SQL is valid in both
/// PostgreSQL and SQLite (`maint.rs` substitutes `{SIGNAL_COLS}` and renders each row).
pub(crate) const SNAPSHOT_TABLES: [(&str, &str, &str, &str); 12] = [
    (
        "signals",
        "id, tenant, from_identity, to_identity, signal_type, category, priority, payload, delivery_class, \
         recipient_state, publish_path, correlation_id, created_at, expires_at, delivered_at, expired_at, \
         recalled_at, delivered_via, resolved_to_session, acked_at, last_event_seq, fanout_id, expired_reason",
        "(SELECT {SIGNAL_COLS} FROM signal_queue UNION ALL SELECT {SIGNAL_COLS} FROM signal_history) s",
        "id",
    ),
    ("agents", "tenant, identity, kind, registered_at", "agents", "tenant, identity"),
    (
        "agent_sessions",
        "session_id, tenant, identity, kind, surface, node, opened_at, last_heartbeat, released_at",
        "agent_sessions",
        "session_id",
    ),
    (
        "recipient_state",
        "tenant, identity, state, live_sessions, last_heartbeat",
        "recipient_state",
        "tenant, identity",
    ),
    (
        "plugin_facts",
        "tenant, plugin_name, seq, fact_type, fact, recorded_by, created_at",
        "plugin_facts",
        "tenant, plugin_name, seq",
    ),
    ("plugin_state", "tenant, plugin_name, state, seq, updated_at", "plugin_state", "tenant, plugin_name"),
    (
        "directives",
        "directive_id, tenant, issuer, assignee, claimed_by, directive_type, params, status, idempotency_key, \
         correlation_id, created_at, deadline, started_at, finished_at, progress, result, failure, reason, \
         declined_by, last_event_seq",
        "directives",
        "directive_id",
    ),
    ("directive_candidates", "directive_id, tenant, identity", "directive_candidates", "directive_id, identity"),
    ("groups", "tenant, group_name, self_join, announce, created_at", "groups", "tenant, group_name"),
    (
        "group_members",
        "tenant, group_name, identity, added_at, added_by",
        "group_members",
        "tenant, group_name, identity",
    ),
    ("projection_checkpoints", "projection, last_seq", "projection_checkpoints", "projection"),
    (
        "projection_dead_letters",
        "projection, seq, subject, event_type, reason",
        "projection_dead_letters",
        "projection, seq",
    ),
];

/// Every table's rows, each rendered as a JSON array, in primary-key order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub tables: BTreeMap<&'static str, Vec<String>>,
}

impl Snapshot {
    /// A short human account of where two snapshots differ (empty when equal).
    pub fn diff(&self, other: &Snapshot) -> String {
        let mut out = String::new();
        for (name, rows) in &self.tables {
            let theirs = other.tables.get(name).cloned().unwrap_or_default();
            if *rows == theirs {
                continue;
            }
            out.push_str(&format!("{name}: {} rows vs {} rows\n", rows.len(), theirs.len()));
            let mut shown = 0;
            for i in 0..rows.len().max(theirs.len()) {
                let (a, b) = (rows.get(i), theirs.get(i));
                if a != b && shown < 3 {
                    out.push_str(&format!("  left:  {a:?}\n  right: {b:?}\n"));
                    shown += 1;
                }
            }
        }
        out
    }

    /// Total rows over all tables.
    pub fn rows(&self) -> usize {
        self.tables.values().map(Vec::len).sum()
    }
}
