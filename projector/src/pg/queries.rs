//! The `Queries` answers from PostgreSQL.
//!
//! Deliberately read-only and lock-free: readers never take the writer lock, so a long
//! projection batch or a rebuild never blocks them (the swap itself is a brief DDL lock).

use chrono::{DateTime, Utc};
use sqlx::postgres::PgRow;
use sqlx::Row;
use uuid::Uuid;

use super::PgModels;
use crate::error::Result;
use crate::queries::{
    AgentRow, FactsAnswer, FactsPage, ListSignals, Overdue, PluginFactRow, PluginStateRow, Role, SignalRow,
    StatusFilter,
};

pub(crate) const SIGNAL_COLS: &str = "id, tenant, from_identity, to_identity, signal_type, category, priority, \
    payload, delivery_class, recipient_state, publish_path, correlation_id, created_at, expires_at, delivered_at, \
    expired_at, recalled_at, delivered_via, resolved_to_session, acked_at, last_event_seq";

fn signal_row(r: &PgRow) -> Result<SignalRow> {
    Ok(SignalRow {
        id: r.try_get("id")?,
        tenant: r.try_get("tenant")?,
        from_identity: r.try_get("from_identity")?,
        to_identity: r.try_get("to_identity")?,
        signal_type: r.try_get("signal_type")?,
        category: r.try_get("category")?,
        priority: r.try_get("priority")?,
        payload: r.try_get("payload")?,
        delivery_class: r.try_get("delivery_class")?,
        recipient_state: r.try_get("recipient_state")?,
        publish_path: r.try_get("publish_path")?,
        correlation_id: r.try_get("correlation_id")?,
        created_at: r.try_get("created_at")?,
        expires_at: r.try_get("expires_at")?,
        delivered_at: r.try_get("delivered_at")?,
        expired_at: r.try_get("expired_at")?,
        recalled_at: r.try_get("recalled_at")?,
        delivered_via: r.try_get("delivered_via")?,
        resolved_to_session: r.try_get("resolved_to_session")?,
        acked_at: r.try_get("acked_at")?,
        last_event_seq: r.try_get("last_event_seq")?,
    })
}

fn status_sql(s: Option<StatusFilter>) -> &'static str {
    match s {
        None => "TRUE",
        Some(StatusFilter::Pending) => "delivered_at IS NULL AND expired_at IS NULL AND recalled_at IS NULL",
        Some(StatusFilter::Delivered) => "delivered_at IS NOT NULL",
        Some(StatusFilter::Expired) => "expired_at IS NOT NULL",
        Some(StatusFilter::Recalled) => "recalled_at IS NOT NULL",
    }
}

impl PgModels {
    pub async fn drainable(
        &self,
        tenant: &str,
        identity: &str,
        now: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<SignalRow>> {
        // Two index-backed halves (pending; delivered-unacked) rather than one OR, so each uses
        // its partial index.
        let sql = format!(
            "SELECT {SIGNAL_COLS} FROM ( \
               (SELECT * FROM signal_queue WHERE tenant = $1 AND to_identity = $2 \
                  AND delivered_at IS NULL AND expired_at IS NULL AND recalled_at IS NULL \
                  AND (expires_at IS NULL OR expires_at > $3) \
                ORDER BY priority DESC, created_at ASC LIMIT $4) \
               UNION ALL \
               (SELECT q.* FROM signal_queue q JOIN agent_sessions s ON s.session_id = q.resolved_to_session \
                WHERE q.tenant = $1 AND q.to_identity = $2 AND q.delivered_at IS NOT NULL AND q.acked_at IS NULL \
                  AND s.released_at IS NOT NULL AND (q.expires_at IS NULL OR q.expires_at > $3) \
                ORDER BY q.priority DESC, q.created_at ASC LIMIT $4) \
             ) d ORDER BY priority DESC, created_at ASC, id ASC LIMIT $4"
        );
        let rows = sqlx::query(&sql)
            .bind(tenant)
            .bind(identity)
            .bind(now)
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(signal_row).collect()
    }

    pub async fn signal(&self, tenant: &str, id: Uuid) -> Result<Option<SignalRow>> {
        let sql = format!(
            "SELECT {SIGNAL_COLS} FROM signal_queue WHERE tenant = $1 AND id = $2 \
             UNION ALL SELECT {SIGNAL_COLS} FROM signal_history WHERE tenant = $1 AND id = $2 LIMIT 1"
        );
        let row = sqlx::query(&sql).bind(tenant).bind(id).fetch_optional(&self.pool).await?;
        row.as_ref().map(signal_row).transpose()
    }

    pub async fn list_signals(&self, q: &ListSignals) -> Result<Vec<SignalRow>> {
        let role = match q.role {
            Some(Role::Sent) => "from_identity = $2",
            Some(Role::Received) => "to_identity = $2",
            None => "(from_identity = $2 OR to_identity = $2)",
        };
        let status = status_sql(q.status);
        let (cursor_at, cursor_id) = match q.cursor {
            Some((at, id)) => (Some(at), Some(id)),
            None => (None, None),
        };
        let cond = format!(
            "tenant = $1 AND {role} AND {status} AND ($3::timestamptz IS NULL OR (created_at, id) < ($3, $4::uuid))"
        );
        let sql = format!(
            "SELECT {SIGNAL_COLS} FROM ( \
               (SELECT {SIGNAL_COLS} FROM signal_queue WHERE {cond} ORDER BY created_at DESC, id DESC LIMIT $5) \
               UNION ALL \
               (SELECT {SIGNAL_COLS} FROM signal_history WHERE {cond} ORDER BY created_at DESC, id DESC LIMIT $5) \
             ) s ORDER BY created_at DESC, id DESC LIMIT $5"
        );
        let rows = sqlx::query(&sql)
            .bind(&q.tenant)
            .bind(&q.identity)
            .bind(cursor_at)
            .bind(cursor_id)
            .bind(i64::from(q.limit))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(signal_row).collect()
    }

    pub async fn overdue(
        &self,
        now: DateTime<Utc>,
        after: Option<(DateTime<Utc>, Uuid)>,
        limit: u32,
    ) -> Result<Vec<Overdue>> {
        // Two statements rather than `$2 IS NULL OR ..`, so the keyset condition is always an
        // index bound on `ix_signal_queue_expires_at (expires_at, id)`, in generic plans too.
        let keyset = if after.is_some() { "AND (expires_at, id) > ($3, $4)" } else { "" };
        let sql = format!(
            "SELECT tenant, id, signal_type, expires_at, correlation_id, last_event_seq FROM signal_queue \
             WHERE expires_at IS NOT NULL AND delivered_at IS NULL AND expired_at IS NULL AND recalled_at IS NULL \
               AND expires_at <= $1 {keyset} ORDER BY expires_at ASC, id ASC LIMIT $2"
        );
        let mut q = sqlx::query(&sql).bind(now).bind(i64::from(limit));
        if let Some((at, id)) = after {
            q = q.bind(at).bind(id);
        }
        let rows = q.fetch_all(&self.pool).await?;
        rows.iter()
            .map(|r| {
                Ok(Overdue {
                    tenant: r.try_get("tenant")?,
                    id: r.try_get("id")?,
                    signal_type: r.try_get("signal_type")?,
                    expires_at: r.try_get("expires_at")?,
                    correlation_id: r.try_get("correlation_id")?,
                    last_event_seq: r.try_get::<i64, _>("last_event_seq")? as u64,
                })
            })
            .collect()
    }

    pub async fn agents(&self, tenant: &str) -> Result<Vec<AgentRow>> {
        let rows = sqlx::query(
            "SELECT a.tenant, a.identity, a.kind, a.registered_at, \
               COALESCE(r.state, 'not_available_offline') AS state, COALESCE(r.live_sessions, 0) AS live_sessions, \
               r.last_heartbeat \
             FROM agents a LEFT JOIN recipient_state r ON r.tenant = a.tenant AND r.identity = a.identity \
             WHERE a.tenant = $1 ORDER BY a.identity",
        )
        .bind(tenant)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(AgentRow {
                    tenant: r.try_get("tenant")?,
                    identity: r.try_get("identity")?,
                    kind: r.try_get("kind")?,
                    registered_at: r.try_get("registered_at")?,
                    state: r.try_get("state")?,
                    live_sessions: r.try_get("live_sessions")?,
                    last_heartbeat: r.try_get("last_heartbeat")?,
                })
            })
            .collect()
    }

    pub async fn plugin_state(&self, tenant: &str, plugin: &str) -> Result<PluginStateRow> {
        let row = sqlx::query("SELECT state, seq, updated_at FROM plugin_state WHERE tenant = $1 AND plugin_name = $2")
            .bind(tenant)
            .bind(plugin)
            .fetch_optional(&self.pool)
            .await?;
        Ok(match row {
            Some(r) => PluginStateRow {
                plugin: plugin.to_string(),
                state: r.try_get("state")?,
                seq: r.try_get("seq")?,
                updated_at: r.try_get("updated_at")?,
            },
            None => {
                PluginStateRow { plugin: plugin.to_string(), state: serde_json::json!({}), seq: 0, updated_at: None }
            }
        })
    }

    pub async fn plugin_facts(&self, page: &FactsPage) -> Result<FactsAnswer> {
        // Sizes first (the database renders each state to measure it, and sends two numbers),
        // then only the facts that fit: a page never brings more than its budget over the wire.
        let sizes: Vec<(i64, i64)> = sqlx::query_as(
            "SELECT seq, octet_length(fact::text)::bigint FROM plugin_facts \
             WHERE tenant = $1 AND plugin_name = $2 AND ($3::text IS NULL OR fact_type = $3) \
             AND ($4::bigint IS NULL OR seq < $4) ORDER BY seq DESC LIMIT $5",
        )
        .bind(&page.tenant)
        .bind(&page.plugin)
        .bind(&page.fact_type)
        .bind(page.before_seq)
        .bind(i64::from(page.limit) + 1)
        .fetch_all(&self.pool)
        .await?;
        let Some((oldest, newest, more)) = page.cut(&sizes) else {
            return Ok(FactsAnswer { facts: Vec::new(), next_before_seq: None });
        };
        let rows = sqlx::query(
            "SELECT seq, fact_type, fact::text AS fact, recorded_by, created_at FROM plugin_facts \
             WHERE tenant = $1 AND plugin_name = $2 AND ($3::text IS NULL OR fact_type = $3) \
             AND seq BETWEEN $4 AND $5 ORDER BY seq DESC",
        )
        .bind(&page.tenant)
        .bind(&page.plugin)
        .bind(&page.fact_type)
        .bind(oldest)
        .bind(newest)
        .fetch_all(&self.pool)
        .await?;
        let facts = rows
            .iter()
            .map(|r| {
                Ok(PluginFactRow {
                    seq: r.try_get("seq")?,
                    fact_type: r.try_get("fact_type")?,
                    state_json: r.try_get("fact")?,
                    recorded_by: r.try_get("recorded_by")?,
                    created_at: r.try_get("created_at")?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(FactsAnswer { facts, next_before_seq: more.then_some(oldest) })
    }

    pub async fn ping(&self) -> Result<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }
}
