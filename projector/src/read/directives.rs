//! The directive answers of `Queries`, in either dialect, decoded into `DirectiveRow`.
//!
//! Deliberately read-only and lock-free, like every reader (`read.rs`).

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::queries::{DirectiveFilter, DirectiveRole, DirectiveRow, ListDirectives, OverdueDirective};
use crate::sql::{Dialect, Row};

/// The row's columns, JSON ones as text (nullable ones decode alike on both backends), and its
/// candidates as one JSON array.
fn cols(d: Dialect) -> String {
    let candidates = match d {
        Dialect::Postgres => {
            "(SELECT COALESCE(json_agg(c.identity ORDER BY c.identity), '[]'::json)::text \
             FROM directive_candidates c WHERE c.directive_id = d.directive_id)"
        }
        Dialect::Sqlite => {
            "(SELECT json_group_array(identity) FROM (SELECT c.identity FROM directive_candidates c \
             WHERE c.directive_id = d.directive_id ORDER BY c.identity))"
        }
    };
    let j = |c: &str| format!("{} AS {c}", d.json_text(&format!("d.{c}")));
    format!(
        "d.directive_id, d.tenant, d.issuer, d.assignee, {candidates} AS candidates, d.claimed_by, d.directive_type, \
         {params}, d.status, d.idempotency_key, d.correlation_id, d.created_at, d.deadline, d.started_at, \
         d.finished_at, {progress}, {result}, {failure}, d.reason, {declined}, d.last_event_seq",
        params = j("params"),
        progress = j("progress"),
        result = j("result"),
        failure = j("failure"),
        declined = j("declined_by"),
    )
}

fn json<T: serde::de::DeserializeOwned>(r: &Row, col: &str) -> Result<Option<T>> {
    r.get::<Option<String>>(col)?
        .map(|t| serde_json::from_str(&t).map_err(|e| Error::Invariant(format!("bad JSON in directives.{col}: {e}"))))
        .transpose()
}

fn row(r: &Row) -> Result<DirectiveRow> {
    let required = |col: &str| Error::Invariant(format!("unexpected NULL in directives.{col}"));
    Ok(DirectiveRow {
        directive_id: r.uuid("directive_id")?,
        tenant: r.get("tenant")?,
        issuer: r.get("issuer")?,
        assignee: r.get("assignee")?,
        candidates: json(r, "candidates")?.unwrap_or_default(),
        claimed_by: r.get("claimed_by")?,
        directive_type: r.get("directive_type")?,
        params: json(r, "params")?.ok_or_else(|| required("params"))?,
        status: r.get("status")?,
        idempotency_key: r.get("idempotency_key")?,
        correlation_id: r.get("correlation_id")?,
        created_at: r.ts("created_at")?,
        deadline: r.ts("deadline")?,
        started_at: r.opt_ts("started_at")?,
        finished_at: r.opt_ts("finished_at")?,
        progress: json(r, "progress")?,
        result: json(r, "result")?,
        failure: json(r, "failure")?,
        reason: r.get("reason")?,
        declined_by: json(r, "declined_by")?.unwrap_or_default(),
        last_event_seq: r.get("last_event_seq")?,
    })
}

/// The open directives, spelled as the partial indexes' predicate (so both planners use them).
const OPEN: &str = "(d.status = 'requested' OR d.status = 'started')";

impl Backend {
    pub async fn directive(&self, tenant: &str, directive_id: Uuid) -> Result<Option<DirectiveRow>> {
        let mut c = self.acquire().await?;
        let mut conn = c.conn();
        let sql =
            format!("SELECT {} FROM directives d WHERE d.tenant = $1 AND d.directive_id = $2", cols(conn.dialect()));
        let args = conn.args().bind(tenant).bind(directive_id);
        conn.fetch_optional(&sql, args).await?.as_ref().map(row).transpose()
    }

    pub async fn list_directives(&self, q: &ListDirectives) -> Result<Vec<DirectiveRow>> {
        let assigned = "d.directive_id IN (SELECT directive_id FROM directive_candidates \
                        WHERE tenant = $1 AND identity = $2)";
        let role = match q.role {
            Some(DirectiveRole::Issued) => "d.issuer = $2".to_string(),
            Some(DirectiveRole::Assigned) => format!("(d.assignee = $2 OR {assigned})"),
            None => format!("(d.issuer = $2 OR d.assignee = $2 OR {assigned})"),
        };
        let status = match q.status {
            None => "TRUE",
            Some(DirectiveFilter::Open) => OPEN,
            Some(DirectiveFilter::Is(s)) => match s.as_str() {
                "requested" => "d.status = 'requested'",
                "started" => "d.status = 'started'",
                "completed" => "d.status = 'completed'",
                "failed" => "d.status = 'failed'",
                "rejected" => "d.status = 'rejected'",
                "canceled" => "d.status = 'canceled'",
                "expired" => "d.status = 'expired'",
                _ => "FALSE",
            },
        };
        let (before_at, before_id) = q.before.map_or((None, None), |(at, id)| (Some(at), Some(id)));
        let mut c = self.acquire().await?;
        let mut conn = c.conn();
        let sql = format!(
            "SELECT {} FROM directives d WHERE d.tenant = $1 AND {role} AND {status} \
               AND ($3 IS NULL OR d.directive_type = $3) \
               AND ($4 IS NULL OR (d.created_at, d.directive_id) < ($4, $5)) \
             ORDER BY d.created_at DESC, d.directive_id DESC LIMIT $6",
            cols(conn.dialect())
        );
        let args = conn
            .args()
            .bind(&q.tenant)
            .bind(&q.caller)
            .bind(&q.directive_type)
            .bind(before_at)
            .bind(before_id)
            .bind(i64::from(q.limit));
        conn.fetch_all(&sql, args).await?.iter().map(row).collect()
    }

    pub async fn overdue_directives(
        &self,
        now: DateTime<Utc>,
        after: Option<(DateTime<Utc>, Uuid)>,
        limit: u32,
    ) -> Result<Vec<OverdueDirective>> {
        // As `overdue`: two spellings, so the keyset is always a bound on the partial index.
        let keyset = if after.is_some() { "AND (d.deadline, d.directive_id) > ($3, $4)" } else { "" };
        let sql = format!(
            "SELECT d.tenant, d.directive_id, d.deadline FROM directives d WHERE {OPEN} AND d.deadline <= $1 {keyset} \
             ORDER BY d.deadline ASC, d.directive_id ASC LIMIT $2"
        );
        self.due_page(&sql, now, after, limit, |r| {
            Ok(OverdueDirective {
                tenant: r.get("tenant")?,
                directive_id: r.uuid("directive_id")?,
                deadline: r.ts("deadline")?,
            })
        })
        .await
    }
}
