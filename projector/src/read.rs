//! The `Queries` answers, in either dialect, decoded into the shared row types.
//!
//! Deliberately read-only and lock-free: readers never take the writer lock, so a long
//! projection batch or a rebuild never blocks them (PostgreSQL's swap is a brief DDL lock;
//! SQLite's WAL lets readers read while a batch commits).

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::apply::inflight;
use crate::backend::Backend;
use crate::batch::PROJECTION;
use crate::error::Result;
use crate::queries::{
    AgentRow, FactsAnswer, FactsPage, ListSignals, Overdue, PluginFactRow, PluginStateRow, Role, SignalRow,
    StatusFilter,
};
use crate::sql::Row;

mod conversations;
mod directives;
mod pending;
mod scheduled;

pub(crate) const SIGNAL_COLS: &str = "id, tenant, from_identity, to_identity, signal_type, category, priority, \
    payload, delivery_class, recipient_state, publish_path, correlation_id, created_at, expires_at, delivered_at, \
    expired_at, recalled_at, delivered_via, resolved_to_session, acked_at, last_event_seq, fanout_id, deliver_at, \
    released_at, expired_reason";

pub(crate) fn signal_row(r: &Row) -> Result<SignalRow> {
    Ok(SignalRow {
        id: r.uuid("id")?,
        tenant: r.get("tenant")?,
        from_identity: r.get("from_identity")?,
        to_identity: r.get("to_identity")?,
        signal_type: r.get("signal_type")?,
        category: r.get("category")?,
        priority: r.get("priority")?,
        payload: r.json("payload")?,
        delivery_class: r.get("delivery_class")?,
        recipient_state: r.get("recipient_state")?,
        publish_path: r.get("publish_path")?,
        correlation_id: r.get("correlation_id")?,
        created_at: r.ts("created_at")?,
        expires_at: r.opt_ts("expires_at")?,
        delivered_at: r.opt_ts("delivered_at")?,
        expired_at: r.opt_ts("expired_at")?,
        recalled_at: r.opt_ts("recalled_at")?,
        delivered_via: r.get("delivered_via")?,
        resolved_to_session: r.opt_uuid("resolved_to_session")?,
        acked_at: r.opt_ts("acked_at")?,
        last_event_seq: r.get("last_event_seq")?,
        fanout_id: r.opt_uuid("fanout_id")?,
        deliver_at: r.opt_ts("deliver_at")?,
        released_at: r.opt_ts("released_at")?,
        expired_reason: r.get("expired_reason")?,
    })
}

pub(crate) fn status_sql(s: Option<StatusFilter>) -> &'static str {
    match s {
        None => "TRUE",
        Some(StatusFilter::Pending) => "delivered_at IS NULL AND expired_at IS NULL AND recalled_at IS NULL",
        Some(StatusFilter::Delivered) => "delivered_at IS NOT NULL",
        Some(StatusFilter::Expired) => "expired_at IS NOT NULL",
        Some(StatusFilter::Recalled) => "recalled_at IS NOT NULL",
    }
}

impl Backend {
    /// The stream sequence the read models have applied.
    pub async fn checkpoint(&self) -> Result<u64> {
        let mut c = self.acquire().await?;
        let mut conn = c.conn();
        let args = conn.args().bind(PROJECTION);
        let row = conn.fetch_one("SELECT last_seq FROM projection_checkpoints WHERE projection = $1", args).await?;
        Ok(row.get::<i64>("last_seq")? as u64)
    }

    pub async fn drainable(
        &self,
        tenant: &str,
        identity: &str,
        now: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<SignalRow>> {
        // Two index-backed halves (pending; delivered-unacked) rather than one OR, so each uses
        // its partial index or, for the second in PostgreSQL, the in-flight list
        // (`apply/inflight.rs`). A scheduled row waits unseen until due or released
        // (`bus::schedule::is_visible`, the rule a delivery is decided by).
        let mut c = self.acquire().await?;
        let mut conn = c.conn();
        let inflight = if inflight::listed(conn.dialect()) {
            "signal_inflight f JOIN signal_queue q ON q.id = f.id \
             JOIN agent_sessions s ON s.session_id = q.resolved_to_session WHERE f.tenant = $1 AND f.to_identity = $2"
        } else {
            "signal_queue q JOIN agent_sessions s ON s.session_id = q.resolved_to_session \
             WHERE q.tenant = $1 AND q.to_identity = $2"
        };
        let sql = format!(
            "SELECT {SIGNAL_COLS} FROM ( \
               SELECT * FROM (SELECT * FROM signal_queue WHERE tenant = $1 AND to_identity = $2 \
                  AND delivered_at IS NULL AND expired_at IS NULL AND recalled_at IS NULL \
                  AND (expires_at IS NULL OR expires_at > $3) \
                  AND (deliver_at IS NULL OR deliver_at <= $3 OR released_at IS NOT NULL) \
                ORDER BY priority DESC, created_at ASC LIMIT $4) p \
               UNION ALL \
               SELECT * FROM (SELECT q.* FROM {inflight} AND q.delivered_at IS NOT NULL AND q.acked_at IS NULL \
                  AND s.released_at IS NOT NULL AND (q.expires_at IS NULL OR q.expires_at > $3) \
                ORDER BY q.priority DESC, q.created_at ASC LIMIT $4) r \
             ) d ORDER BY priority DESC, created_at ASC, id ASC LIMIT $4"
        );
        let args = conn.args().bind(tenant).bind(identity).bind(now).bind(i64::from(limit));
        conn.fetch_all(&sql, args).await?.iter().map(signal_row).collect()
    }

    pub async fn signal(&self, tenant: &str, id: Uuid) -> Result<Option<SignalRow>> {
        let sql = format!(
            "SELECT {SIGNAL_COLS} FROM signal_queue WHERE tenant = $1 AND id = $2 \
             UNION ALL SELECT {SIGNAL_COLS} FROM signal_history WHERE tenant = $1 AND id = $2 LIMIT 1"
        );
        let mut c = self.acquire().await?;
        let mut conn = c.conn();
        let args = conn.args().bind(tenant).bind(id);
        conn.fetch_optional(&sql, args).await?.as_ref().map(signal_row).transpose()
    }

    pub async fn list_signals(&self, q: &ListSignals) -> Result<Vec<SignalRow>> {
        let mut c = self.acquire().await?;
        let mut conn = c.conn();
        let is = |column| conn.dialect().identity_is(column, "$1", "$2");
        let role = match q.role {
            Some(Role::Sent) => is("from_identity"),
            Some(Role::Received) => is("to_identity"),
            None => format!("({} OR {})", is("from_identity"), is("to_identity")),
        };
        let status = status_sql(q.status);
        let (cursor_at, cursor_id) = match q.cursor {
            Some((at, id)) => (Some(at), Some(id)),
            None => (None, None),
        };
        let cond = format!("tenant = $1 AND {role} AND {status} AND ($3 IS NULL OR (created_at, id) < ($3, $4))");
        let sql = format!(
            "SELECT {SIGNAL_COLS} FROM ( \
               SELECT * FROM (SELECT {SIGNAL_COLS} FROM signal_queue WHERE {cond} \
                 ORDER BY created_at DESC, id DESC LIMIT $5) h \
               UNION ALL \
               SELECT * FROM (SELECT {SIGNAL_COLS} FROM signal_history WHERE {cond} \
                 ORDER BY created_at DESC, id DESC LIMIT $5) a \
             ) s ORDER BY created_at DESC, id DESC LIMIT $5"
        );
        let args =
            conn.args().bind(&q.tenant).bind(&q.identity).bind(cursor_at).bind(cursor_id).bind(i64::from(q.limit));
        conn.fetch_all(&sql, args).await?.iter().map(signal_row).collect()
    }

    pub async fn overdue(
        &self,
        now: DateTime<Utc>,
        after: Option<(DateTime<Utc>, Uuid)>,
        limit: u32,
    ) -> Result<Vec<Overdue>> {
        // Two statements rather than `$3 IS NULL OR ..`, so the keyset condition is always an
        // index bound on `ix_signal_queue_expires_at (expires_at, id)`, in PostgreSQL's generic
        // plans too. (SQLite stores timestamps and ids as text in forms that sort like the
        // values they hold, so the row-value comparison is the same keyset order there.)
        let keyset = if after.is_some() { "AND (expires_at, id) > ($3, $4)" } else { "" };
        let sql = format!(
            "SELECT tenant, id, signal_type, expires_at, correlation_id, last_event_seq FROM signal_queue \
             WHERE expires_at IS NOT NULL AND delivered_at IS NULL AND expired_at IS NULL AND recalled_at IS NULL \
               AND expires_at <= $1 {keyset} ORDER BY expires_at ASC, id ASC LIMIT $2"
        );
        self.due_page(&sql, now, after, limit, |r| {
            Ok(Overdue {
                tenant: r.get("tenant")?,
                id: r.uuid("id")?,
                signal_type: r.get("signal_type")?,
                expires_at: r.ts("expires_at")?,
                correlation_id: r.get("correlation_id")?,
                last_event_seq: r.get::<i64>("last_event_seq")? as u64,
            })
        })
        .await
    }

    /// Runs `sql`, a query of what is due by `now` paged by keyset: `$1` is `now`, `$2` the
    /// limit and, after a first page, `$3, $4` the (instant, id) of the last row seen; decodes
    /// each row with `row`.
    pub(crate) async fn due_page<T>(
        &self,
        sql: &str,
        now: DateTime<Utc>,
        after: Option<(DateTime<Utc>, Uuid)>,
        limit: u32,
        row: impl Fn(&Row) -> Result<T>,
    ) -> Result<Vec<T>> {
        let mut c = self.acquire().await?;
        let mut conn = c.conn();
        let mut args = conn.args().bind(now).bind(i64::from(limit));
        if let Some((at, id)) = after {
            args = args.bind(at).bind(id);
        }
        conn.fetch_all(sql, args).await?.iter().map(row).collect()
    }

    pub async fn agents(&self, tenant: &str) -> Result<Vec<AgentRow>> {
        let mut c = self.acquire().await?;
        let mut conn = c.conn();
        let args = conn.args().bind(tenant);
        let rows = conn
            .fetch_all(
                "SELECT a.tenant, a.identity, a.kind, a.registered_at, \
                   COALESCE(r.state, 'not_available_offline') AS state, \
                   COALESCE(r.live_sessions, 0) AS live_sessions, r.last_heartbeat \
                 FROM agents a LEFT JOIN recipient_state r ON r.tenant = a.tenant AND r.identity = a.identity \
                 WHERE a.tenant = $1 ORDER BY a.identity",
                args,
            )
            .await?;
        rows.iter()
            .map(|r| {
                Ok(AgentRow {
                    tenant: r.get("tenant")?,
                    identity: r.get("identity")?,
                    kind: r.get("kind")?,
                    registered_at: r.ts("registered_at")?,
                    state: r.get("state")?,
                    live_sessions: r.get("live_sessions")?,
                    last_heartbeat: r.opt_ts("last_heartbeat")?,
                })
            })
            .collect()
    }

    pub async fn plugin_state(&self, tenant: &str, plugin: &str) -> Result<PluginStateRow> {
        let mut c = self.acquire().await?;
        let mut conn = c.conn();
        let args = conn.args().bind(tenant).bind(plugin);
        let sql = "SELECT state, seq, updated_at FROM plugin_state WHERE tenant = $1 AND plugin_name = $2";
        Ok(match conn.fetch_optional(sql, args).await? {
            Some(r) => PluginStateRow {
                plugin: plugin.to_string(),
                state: r.json("state")?,
                seq: r.get("seq")?,
                updated_at: r.opt_ts("updated_at")?,
            },
            None => {
                PluginStateRow { plugin: plugin.to_string(), state: serde_json::json!({}), seq: 0, updated_at: None }
            }
        })
    }

    pub async fn plugin_facts(&self, page: &FactsPage) -> Result<FactsAnswer> {
        let mut c = self.acquire().await?;
        let mut conn = c.conn();
        let d = conn.dialect();
        // Sizes first (the database renders each fact to measure it, and sends two numbers),
        // then only the facts that fit: a page never brings more than its budget over the wire.
        let sql = format!(
            "SELECT seq, {} AS size FROM plugin_facts \
             WHERE tenant = $1 AND plugin_name = $2 AND ($3 IS NULL OR fact_type = $3) \
             AND ($4 IS NULL OR seq < $4) ORDER BY seq DESC LIMIT $5",
            d.json_bytes("fact")
        );
        let args = conn
            .args()
            .bind(&page.tenant)
            .bind(&page.plugin)
            .bind(&page.fact_type)
            .bind(page.before_seq)
            .bind(i64::from(page.limit) + 1);
        let sizes = conn
            .fetch_all(&sql, args)
            .await?
            .iter()
            .map(|r| Ok((r.get::<i64>("seq")?, r.get::<i64>("size")?)))
            .collect::<Result<Vec<_>>>()?;
        let Some((oldest, newest, more)) = page.cut(&sizes) else {
            return Ok(FactsAnswer { facts: Vec::new(), next_before_seq: None });
        };
        let sql = format!(
            "SELECT seq, fact_type, {} AS fact, recorded_by, created_at FROM plugin_facts \
             WHERE tenant = $1 AND plugin_name = $2 AND ($3 IS NULL OR fact_type = $3) \
             AND seq BETWEEN $4 AND $5 ORDER BY seq DESC",
            d.json_text("fact")
        );
        let args = conn.args().bind(&page.tenant).bind(&page.plugin).bind(&page.fact_type).bind(oldest).bind(newest);
        let facts = conn
            .fetch_all(&sql, args)
            .await?
            .iter()
            .map(|r| {
                Ok(PluginFactRow {
                    seq: r.get("seq")?,
                    fact_type: r.get("fact_type")?,
                    state_json: r.get("fact")?,
                    recorded_by: r.get("recorded_by")?,
                    created_at: r.ts("created_at")?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(FactsAnswer { facts, next_before_seq: more.then_some(oldest) })
    }

    pub async fn ping(&self) -> Result<()> {
        let mut c = self.acquire().await?;
        let mut conn = c.conn();
        let args = conn.args();
        conn.execute("SELECT 1", args).await?;
        Ok(())
    }
}
