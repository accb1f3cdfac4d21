//! The scheduled-delivery answer of `Queries` (CONTRACT §16): which scheduled signals are due
//! and not released yet, for the sweeper's backstop and its timers' preload.
//!
//! Deliberately read-only, like every reader (`read.rs`), and paged exactly as the expiry scan
//! is (`Backend::due_page`), over its own partial index (`ix_signal_queue_deliver_at`).

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::backend::Backend;
use crate::error::Result;
use crate::queries::DueRelease;

impl Backend {
    pub async fn due_releases(
        &self,
        now: DateTime<Utc>,
        after: Option<(DateTime<Utc>, Uuid)>,
        limit: u32,
    ) -> Result<Vec<DueRelease>> {
        // As `overdue`: two spellings, so the keyset is always a bound on the partial index.
        let keyset = if after.is_some() { "AND (deliver_at, id) > ($3, $4)" } else { "" };
        let sql = format!(
            "SELECT tenant, id, to_identity, deliver_at, expires_at, correlation_id, last_event_seq FROM signal_queue \
             WHERE deliver_at IS NOT NULL AND released_at IS NULL \
               AND delivered_at IS NULL AND expired_at IS NULL AND recalled_at IS NULL \
               AND deliver_at <= $1 {keyset} ORDER BY deliver_at ASC, id ASC LIMIT $2"
        );
        self.due_page(&sql, now, after, limit, |r| {
            Ok(DueRelease {
                tenant: r.get("tenant")?,
                id: r.uuid("id")?,
                to_identity: r.get("to_identity")?,
                deliver_at: r.ts("deliver_at")?,
                expires_at: r.ts("expires_at")?,
                correlation_id: r.get("correlation_id")?,
                last_event_seq: r.get::<i64>("last_event_seq")? as u64,
            })
        })
        .await
    }
}
