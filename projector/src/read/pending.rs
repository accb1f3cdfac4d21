//! `Queries::pending_signals`, in either dialect: the pending rows a force-expire's filters
//! match, paged by keyset over the sweeper's index (`ix_signal_queue_expires_at`, pending rows
//! by `(expires_at, id)`), so a whole scan reads each pending row once, without an index of its
//! own on the hot table.
//!
//! Deliberately read-only and lock-free, like every reader (`read.rs`); only the hot table is
//! read, since archived rows are never pending.

use crate::backend::Backend;
use crate::error::Result;
use crate::queries::{PendingSignal, PendingSignals};
use crate::sql::RowSet;

impl Backend {
    pub async fn pending_signals(&self, q: &PendingSignals) -> Result<Vec<PendingSignal>> {
        let f = &q.filter;
        let mut c = self.acquire().await?;
        let mut conn = c.conn();
        let mut args = conn
            .args()
            .bind(&f.tenant)
            .bind(&f.to)
            .bind(&f.from)
            .bind(&f.signal_type)
            .bind(q.created_until)
            .bind(i64::from(q.limit));
        let mut cond = String::new();
        if let Some((at, id)) = q.after {
            let (at, id) = (args.arg(at), args.arg(id));
            cond.push_str(&format!(" AND (expires_at, id) > ({at}, {id})"));
        }
        if !f.signal_ids.is_empty() {
            let ids = args.rows(RowSet::new().col("id", f.signal_ids.iter().copied()));
            cond.push_str(&format!(" AND id IN (SELECT id FROM {ids})"));
        }
        let sql = format!(
            "SELECT id, from_identity, to_identity, signal_type, created_at, expires_at, correlation_id, last_event_seq \
             FROM signal_queue \
             WHERE expires_at IS NOT NULL AND delivered_at IS NULL AND expired_at IS NULL AND recalled_at IS NULL \
               AND tenant = $1 AND ($2 IS NULL OR to_identity = $2) AND ($3 IS NULL OR from_identity = $3) \
               AND ($4 IS NULL OR signal_type = $4) AND created_at <= $5{cond} \
             ORDER BY expires_at ASC, id ASC LIMIT $6"
        );
        conn.fetch_all(&sql, args)
            .await?
            .iter()
            .map(|r| {
                Ok(PendingSignal {
                    id: r.uuid("id")?,
                    from_identity: r.get("from_identity")?,
                    to_identity: r.get("to_identity")?,
                    signal_type: r.get("signal_type")?,
                    created_at: r.ts("created_at")?,
                    expires_at: r.ts("expires_at")?,
                    correlation_id: r.get("correlation_id")?,
                    last_event_seq: r.get::<i64>("last_event_seq")? as u64,
                })
            })
            .collect()
    }
}
