//! The conversation answer of `Queries` (CONTRACT §16): the signals one identity sent or
//! received under one correlation id, hot or archived, oldest first, paged by keyset.
//!
//! Deliberately read-only and lock-free, like every reader (`read.rs`); who may ask is the
//! gateway's business (it passes the caller as `identity`).

use crate::backend::Backend;
use crate::error::Result;
use crate::queries::{Conversation, Role, SignalRow};
use crate::read::{signal_row, status_sql, SIGNAL_COLS};

impl Backend {
    pub async fn conversation(&self, q: &Conversation) -> Result<Vec<SignalRow>> {
        let role = match q.role {
            Some(Role::Sent) => "from_identity = $2",
            Some(Role::Received) => "to_identity = $2",
            None => "(from_identity = $2 OR to_identity = $2)",
        };
        let status = status_sql(q.status);
        // Two statements rather than `$4 IS NULL OR ..`, so the keyset is always a plain bound.
        let keyset = if q.after.is_some() { "AND (created_at, id) > ($5, $6)" } else { "" };
        let cond = format!("tenant = $1 AND correlation_id = $3 AND {role} AND {status} {keyset}");
        let sql = format!(
            "SELECT {SIGNAL_COLS} FROM ( \
               SELECT * FROM (SELECT {SIGNAL_COLS} FROM signal_queue WHERE {cond} \
                 ORDER BY created_at ASC, id ASC LIMIT $4) h \
               UNION ALL \
               SELECT * FROM (SELECT {SIGNAL_COLS} FROM signal_history WHERE {cond} \
                 ORDER BY created_at ASC, id ASC LIMIT $4) a \
             ) s ORDER BY created_at ASC, id ASC LIMIT $4"
        );
        let mut c = self.acquire().await?;
        let mut conn = c.conn();
        let mut args = conn.args().bind(&q.tenant).bind(&q.identity).bind(&q.correlation_id).bind(i64::from(q.limit));
        if let Some((at, id)) = q.after {
            args = args.bind(at).bind(id);
        }
        conn.fetch_all(&sql, args).await?.iter().map(signal_row).collect()
    }
}
