//! One batch into SQLite: the checkpoint compare-and-set, then one statement per row set, each
//! reading its rows from a JSON array parameter through `json_each` (SQLite's UNNEST).
//!
//! Deliberately never one statement per event, and never opens or commits the transaction.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use sqlx::SqliteConnection;

use super::ts;
use crate::batch::{Batch, PROJECTION};
use crate::error::Result;

fn opt_ts(t: Option<DateTime<Utc>>) -> Value {
    t.map_or(Value::Null, |t| Value::String(ts(t)))
}

/// `json_extract(value, '$[i]') AS name` for each name, in order.
fn cols(names: &[&str]) -> String {
    names
        .iter()
        .enumerate()
        .map(|(i, n)| format!("json_extract(value, '$[{i}]') AS {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub(crate) async fn apply_in(
    conn: &mut SqliteConnection,
    b: &Batch,
    expected: u64,
    now: DateTime<Utc>,
    stale_after: Duration,
) -> Result<bool> {
    // First, so an already-applied batch touches nothing (see pg/apply.rs).
    let cas = sqlx::query(
        "UPDATE projection_checkpoints SET last_seq = ?1, updated_at = ?2 WHERE projection = ?3 AND last_seq = ?4",
    )
    .bind(b.to_seq as i64)
    .bind(ts(now))
    .bind(PROJECTION)
    .bind(expected as i64)
    .execute(&mut *conn)
    .await?;
    if cas.rows_affected() != 1 {
        return Ok(false);
    }
    if !b.sent.is_empty() {
        let rows: Vec<Value> = b
            .sent
            .iter()
            .map(|r| {
                json!([
                    r.id.to_string(),
                    r.tenant,
                    r.from,
                    r.to,
                    r.signal_type,
                    r.category,
                    r.priority,
                    r.payload,
                    r.delivery_class,
                    r.recipient_state,
                    r.publish_path,
                    r.correlation_id,
                    ts(r.created_at),
                    ts(r.expires_at),
                    r.seq
                ])
            })
            .collect();
        let names =
            ["id", "tenant", "f", "t", "st", "cat", "pri", "payload", "dc", "rs", "pp", "corr", "ca", "ea", "seq"];
        let sql = format!(
            "INSERT INTO signal_queue (id, tenant, from_identity, to_identity, signal_type, category, priority, \
               payload, delivery_class, recipient_state, publish_path, correlation_id, created_at, expires_at, \
               last_event_seq) \
             SELECT {} FROM json_each(?1) WHERE true ON CONFLICT (id) DO NOTHING",
            cols(&names)
        );
        sqlx::query(&sql).bind(Value::Array(rows).to_string()).execute(&mut *conn).await?;
    }
    if !b.signal_patches.is_empty() {
        let rows: Vec<Value> = b
            .signal_patches
            .iter()
            .map(|p| {
                json!([
                    p.id.to_string(),
                    opt_ts(p.delivered_at),
                    p.via,
                    p.session.map(|s| s.to_string()),
                    opt_ts(p.acked_at),
                    opt_ts(p.expired_at),
                    opt_ts(p.recalled_at),
                    p.seq
                ])
            })
            .collect();
        let rows = Value::Array(rows).to_string();
        let u = cols(&["id", "delivered_at", "via", "session", "acked_at", "expired_at", "recalled_at", "seq"]);
        // The hot table and the history: a late event for an archived row still lands.
        for table in ["signal_queue", "signal_history"] {
            let sql = format!(
                "UPDATE {table} AS q SET \
                   delivered_at = COALESCE(q.delivered_at, u.delivered_at), \
                   delivered_via = COALESCE(u.via, q.delivered_via), \
                   resolved_to_session = CASE WHEN u.via IS NOT NULL THEN u.session ELSE q.resolved_to_session END, \
                   acked_at = COALESCE(q.acked_at, u.acked_at), \
                   expired_at = COALESCE(q.expired_at, u.expired_at), \
                   recalled_at = COALESCE(q.recalled_at, u.recalled_at), \
                   last_event_seq = max(q.last_event_seq, u.seq) \
                 FROM (SELECT {u} FROM json_each(?1)) AS u WHERE q.id = u.id"
            );
            sqlx::query(&sql).bind(&rows).execute(&mut *conn).await?;
        }
    }
    if !b.removed_agents.is_empty() {
        // See pg/apply.rs::remove_agents.
        let rows: Vec<Value> = b.removed_agents.iter().map(|(t, i)| json!([t, i])).collect();
        let rows = Value::Array(rows).to_string();
        for table in ["agents", "recipient_state"] {
            let sql = format!(
                "DELETE FROM {table} WHERE (tenant, identity) IN (SELECT {} FROM json_each(?1))",
                cols(&["tenant", "identity"])
            );
            sqlx::query(&sql).bind(&rows).execute(&mut *conn).await?;
        }
    }
    if !b.agents.is_empty() {
        let rows: Vec<Value> =
            b.agents.iter().map(|a| json!([a.tenant, a.identity, a.kind, ts(a.registered_at)])).collect();
        let sql = format!(
            "INSERT INTO agents (tenant, identity, kind, registered_at) SELECT {} FROM json_each(?1) WHERE true \
             ON CONFLICT (tenant, identity) DO NOTHING",
            cols(&["tenant", "identity", "kind", "at"])
        );
        sqlx::query(&sql).bind(Value::Array(rows).to_string()).execute(&mut *conn).await?;
    }
    sessions(conn, b).await?;
    facts(conn, b).await?;
    if !b.dead_letters.is_empty() {
        let rows: Vec<Value> =
            b.dead_letters.iter().map(|d| json!([d.seq, d.subject, d.event_type, d.reason])).collect();
        let sql = format!(
            "INSERT INTO projection_dead_letters (projection, seq, subject, event_type, reason, recorded_at) \
             SELECT ?2, seq, subject, et, reason, ?3 FROM (SELECT {} FROM json_each(?1)) WHERE true \
             ON CONFLICT (projection, seq) DO NOTHING",
            cols(&["seq", "subject", "et", "reason"])
        );
        sqlx::query(&sql)
            .bind(Value::Array(rows).to_string())
            .bind(PROJECTION)
            .bind(ts(now))
            .execute(&mut *conn)
            .await?;
    }
    if !b.touched.is_empty() {
        let rows: Vec<Value> = b.touched.iter().map(|(t, i)| json!([t, i])).collect();
        let ids = format!("SELECT DISTINCT {} FROM json_each(?2)", cols(&["tenant", "identity"]));
        sqlx::query(&refresh_sql(&ids))
            .bind(ts(threshold(now, stale_after)))
            .bind(Value::Array(rows).to_string())
            .execute(&mut *conn)
            .await?;
    }
    Ok(true)
}

fn threshold(now: DateTime<Utc>, stale_after: Duration) -> DateTime<Utc> {
    now - chrono::Duration::from_std(stale_after).unwrap_or(chrono::Duration::seconds(60))
}

/// See `pg/apply.rs::refresh_sql`; `?1` is the stale threshold.
fn refresh_sql(ids: &str) -> String {
    format!(
        "WITH ids AS ({ids}), computed AS ( \
           SELECT i.tenant AS tenant, i.identity AS identity, \
             count(s.session_id) FILTER (WHERE s.released_at IS NULL) AS live, \
             max(s.last_heartbeat) FILTER (WHERE s.released_at IS NULL) AS live_hb, \
             max(s.last_heartbeat) AS last_hb \
           FROM ids i JOIN agents a ON a.tenant = i.tenant AND a.identity = i.identity \
           LEFT JOIN agent_sessions s ON s.tenant = i.tenant AND s.identity = i.identity \
           GROUP BY i.tenant, i.identity) \
         INSERT INTO recipient_state (tenant, identity, state, live_sessions, last_heartbeat) \
         SELECT tenant, identity, \
           CASE WHEN live = 0 THEN 'not_available_offline' \
                WHEN live_hb > ?1 THEN 'available' ELSE 'not_available_stale' END, \
           live, last_hb FROM computed WHERE true \
         ON CONFLICT (tenant, identity) DO UPDATE SET state = excluded.state, \
           live_sessions = excluded.live_sessions, last_heartbeat = excluded.last_heartbeat \
         WHERE recipient_state.state IS NOT excluded.state \
            OR recipient_state.live_sessions IS NOT excluded.live_sessions \
            OR recipient_state.last_heartbeat IS NOT excluded.last_heartbeat"
    )
}

pub(crate) async fn refresh_open(
    conn: &mut SqliteConnection,
    now: DateTime<Utc>,
    stale_after: Duration,
) -> Result<u64> {
    let ids = "SELECT DISTINCT tenant, identity FROM agent_sessions WHERE released_at IS NULL \
               UNION SELECT tenant, identity FROM recipient_state WHERE live_sessions > 0";
    let r = sqlx::query(&refresh_sql(ids)).bind(ts(threshold(now, stale_after))).execute(conn).await?;
    Ok(r.rows_affected())
}

async fn sessions(conn: &mut SqliteConnection, b: &Batch) -> Result<()> {
    if !b.sessions.is_empty() {
        let rows: Vec<Value> = b
            .sessions
            .iter()
            .map(|s| {
                json!([s.session_id.to_string(), s.tenant, s.identity, s.kind, s.surface, s.node, ts(s.opened_at)])
            })
            .collect();
        let sql = format!(
            "INSERT INTO agent_sessions (session_id, tenant, identity, kind, surface, node, opened_at, last_heartbeat) \
             SELECT id, tenant, identity, kind, surface, node, at, at FROM (SELECT {} FROM json_each(?1)) WHERE true \
             ON CONFLICT (session_id) DO NOTHING",
            cols(&["id", "tenant", "identity", "kind", "surface", "node", "at"])
        );
        sqlx::query(&sql).bind(Value::Array(rows).to_string()).execute(&mut *conn).await?;
    }
    if !b.session_patches.is_empty() {
        let rows: Vec<Value> = b
            .session_patches
            .iter()
            .map(|p| json!([p.session_id.to_string(), opt_ts(p.heartbeat), opt_ts(p.released_at)]))
            .collect();
        let sql = format!(
            "UPDATE agent_sessions AS s SET \
               last_heartbeat = max(s.last_heartbeat, COALESCE(u.hb, s.last_heartbeat)), \
               released_at = COALESCE(s.released_at, u.released) \
             FROM (SELECT {} FROM json_each(?1)) AS u WHERE s.session_id = u.id",
            cols(&["id", "hb", "released"])
        );
        sqlx::query(&sql).bind(Value::Array(rows).to_string()).execute(&mut *conn).await?;
    }
    Ok(())
}

async fn facts(conn: &mut SqliteConnection, b: &Batch) -> Result<()> {
    if b.facts.is_empty() {
        return Ok(());
    }
    let row = |f: &crate::batch::FactRow| {
        json!([f.tenant, f.plugin, f.seq, f.fact_type, f.fact, f.recorded_by, ts(f.created_at)])
    };
    let names = ["tenant", "plugin", "seq", "ft", "fact", "rb", "at"];
    let facts: Vec<Value> = b.facts.iter().map(row).collect();
    let sql = format!(
        "INSERT INTO plugin_facts (tenant, plugin_name, seq, fact_type, fact, recorded_by, created_at) \
         SELECT {} FROM json_each(?1) WHERE true ON CONFLICT (tenant, plugin_name, seq) DO NOTHING",
        cols(&names)
    );
    sqlx::query(&sql).bind(Value::Array(facts).to_string()).execute(&mut *conn).await?;
    let states: Vec<Value> = b.plugin_states.iter().map(row).collect();
    // Only a newer fact replaces the compatibility view.
    let sql = format!(
        "INSERT INTO plugin_state (tenant, plugin_name, state, seq, updated_at) \
         SELECT tenant, plugin, fact, seq, at FROM (SELECT {} FROM json_each(?1)) WHERE true \
         ON CONFLICT (tenant, plugin_name) DO UPDATE SET state = excluded.state, seq = excluded.seq, \
           updated_at = excluded.updated_at WHERE plugin_state.seq < excluded.seq",
        cols(&names)
    );
    sqlx::query(&sql).bind(Value::Array(states).to_string()).execute(&mut *conn).await?;
    Ok(())
}
