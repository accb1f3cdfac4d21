//! Maintenance over the PostgreSQL read models: archiving terminal rows, the canonical
//! snapshot used to compare a live model with a rebuild, and the doctor's probes.
//!
//! Deliberately no projection here: archiving moves rows, it never changes a column the
//! stream decides.

use chrono::{DateTime, Utc};
use sqlx::Connection;
use uuid::Uuid;

use super::queries::SIGNAL_COLS;
use super::{PgModels, WRITER_LOCK};
use crate::batch::PROJECTION;
use crate::dead_letter::DeadLetter;
use crate::error::Result;
use crate::health::ProjectionStatus;
use crate::snapshot::{Snapshot, SNAPSHOT_TABLES};

impl PgModels {
    /// Moves up to `batch` settled rows per transaction to `signal_history`, until none is left.
    /// Settled: expired, recalled, acked, or delivered and past its TTL (no longer redeliverable).
    pub async fn archive(&self, older_than: DateTime<Utc>, batch: u32) -> Result<u64> {
        let mut total = 0;
        loop {
            let mut conn = self.pool.acquire().await?;
            let mut tx = conn.begin().await?;
            // The writer lock keeps a batch that stamps a row from racing its move.
            sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(WRITER_LOCK).execute(&mut *tx).await?;
            let moved = sqlx::query(&format!(
                "WITH victims AS ( \
                   SELECT id FROM signal_queue \
                   WHERE expired_at < $1 OR recalled_at < $1 OR acked_at < $1 \
                      OR (delivered_at IS NOT NULL AND expires_at < $1) \
                   LIMIT $2), \
                 moved AS (DELETE FROM signal_queue q USING victims v WHERE q.id = v.id RETURNING q.*) \
                 INSERT INTO signal_history ({SIGNAL_COLS}, archived_at) SELECT {SIGNAL_COLS}, now() FROM moved"
            ))
            .bind(older_than)
            .bind(i64::from(batch.max(1)))
            .execute(&mut *tx)
            .await?
            .rows_affected();
            tx.commit().await?;
            total += moved;
            if moved < u64::from(batch.max(1)) {
                return Ok(total);
            }
        }
    }

    pub async fn purge_history(&self, older_than: DateTime<Utc>, batch: u32) -> Result<u64> {
        let mut total = 0;
        loop {
            let n = sqlx::query(
                "DELETE FROM signal_history WHERE id IN \
                 (SELECT id FROM signal_history WHERE archived_at < $1 LIMIT $2)",
            )
            .bind(older_than)
            .bind(i64::from(batch.max(1)))
            .execute(&self.pool)
            .await?
            .rows_affected();
            total += n;
            if n < u64::from(batch.max(1)) {
                return Ok(total);
            }
        }
    }

    pub async fn snapshot(&self) -> Result<Snapshot> {
        let mut snap = Snapshot::default();
        for (name, cols, from, order) in SNAPSHOT_TABLES {
            let from = from.replace("{SIGNAL_COLS}", SIGNAL_COLS);
            let sql = format!("SELECT json_build_array({cols})::text FROM {from} ORDER BY {order}");
            let rows: Vec<String> = sqlx::query_scalar(&sql).fetch_all(&self.pool).await?;
            snap.tables.insert(name, rows);
        }
        Ok(snap)
    }

    /// The checkpoint, when it moved, and the dead letters (their count and the first).
    pub async fn projection_status(&self) -> Result<ProjectionStatus> {
        let (checkpoint, checkpoint_at): (i64, DateTime<Utc>) =
            sqlx::query_as("SELECT last_seq, updated_at FROM projection_checkpoints WHERE projection = $1")
                .bind(PROJECTION)
                .fetch_one(&self.pool)
                .await?;
        let dead_letters: i64 =
            sqlx::query_scalar("SELECT count(*) FROM projection_dead_letters WHERE projection = $1")
                .bind(PROJECTION)
                .fetch_one(&self.pool)
                .await?;
        let first: Option<(i64, String, String, String)> = if dead_letters > 0 {
            sqlx::query_as(
                "SELECT seq, subject, event_type, reason FROM projection_dead_letters WHERE projection = $1 \
                 ORDER BY seq LIMIT 1",
            )
            .bind(PROJECTION)
            .fetch_optional(&self.pool)
            .await?
        } else {
            None
        };
        Ok(ProjectionStatus {
            checkpoint: checkpoint as u64,
            checkpoint_at,
            dead_letters: dead_letters as u64,
            first_dead_letter: first.map(|(seq, subject, event_type, reason)| DeadLetter {
                seq: seq as u64,
                subject,
                event_type,
                reason,
            }),
        })
    }

    /// Rows (hot or archived) with more than one terminal stamp: their count and a few ids.
    pub async fn multi_terminal(&self) -> Result<(u64, Vec<Uuid>)> {
        let cond =
            "(delivered_at IS NOT NULL)::int + (expired_at IS NOT NULL)::int + (recalled_at IS NOT NULL)::int > 1";
        let ids: Vec<Uuid> = sqlx::query_scalar(&format!(
            "SELECT id FROM signal_queue WHERE {cond} UNION ALL SELECT id FROM signal_history WHERE {cond}"
        ))
        .fetch_all(&self.pool)
        .await?;
        Ok((ids.len() as u64, ids.into_iter().take(10).collect()))
    }

    /// Which of `ids` have a row (hot or archived).
    pub async fn existing(&self, ids: &[Uuid]) -> Result<Vec<Uuid>> {
        if ids.is_empty() {
            return Ok(vec![]);
        }
        Ok(sqlx::query_scalar(
            "SELECT id FROM signal_queue WHERE id = ANY($1) UNION ALL SELECT id FROM signal_history WHERE id = ANY($1)",
        )
        .bind(ids)
        .fetch_all(&self.pool)
        .await?)
    }
}
