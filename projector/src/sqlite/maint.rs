//! Maintenance over the embedded read models: archiving, the canonical snapshot, and the
//! doctor's probes (see `pg/maint.rs` for the meaning of each).
//!
//! Deliberately no projection here.

use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

use super::queries::SIGNAL_COLS;
use super::{parse_ts, parse_uuid, ts, SqliteModels};
use crate::batch::PROJECTION;
use crate::dead_letter::DeadLetter;
use crate::error::Result;
use crate::health::ProjectionStatus;
use crate::snapshot::{Snapshot, SNAPSHOT_TABLES};

fn id_list(ids: &[String]) -> String {
    Value::Array(ids.iter().cloned().map(Value::String).collect()).to_string()
}

impl SqliteModels {
    /// In its own task for the reason given at `SqliteModels::apply`.
    pub async fn archive(&self, older_than: DateTime<Utc>, batch: u32) -> Result<u64> {
        let this = self.clone();
        tokio::spawn(async move { this.archive_now(older_than, batch).await })
            .await
            .map_err(|e| crate::error::Error::Invariant(format!("embedded archive task failed: {e}")))?
    }

    async fn archive_now(&self, older_than: DateTime<Utc>, batch: u32) -> Result<u64> {
        let limit = i64::from(batch.max(1));
        let mut total = 0;
        loop {
            // The write lock keeps a batch that stamps a row from racing its move.
            let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
            let ids: Vec<String> = sqlx::query_scalar(
                "SELECT id FROM signal_queue \
                 WHERE expired_at < ?1 OR recalled_at < ?1 OR acked_at < ?1 \
                    OR (delivered_at IS NOT NULL AND expires_at < ?1) LIMIT ?2",
            )
            .bind(ts(older_than))
            .bind(limit)
            .fetch_all(&mut *tx)
            .await?;
            if !ids.is_empty() {
                let list = id_list(&ids);
                sqlx::query(&format!(
                    "INSERT INTO signal_history ({SIGNAL_COLS}, archived_at) SELECT {SIGNAL_COLS}, ?2 \
                     FROM signal_queue WHERE id IN (SELECT value FROM json_each(?1))"
                ))
                .bind(&list)
                .bind(ts(Utc::now()))
                .execute(&mut *tx)
                .await?;
                sqlx::query("DELETE FROM signal_queue WHERE id IN (SELECT value FROM json_each(?1))")
                    .bind(&list)
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
            total += ids.len() as u64;
            if (ids.len() as i64) < limit {
                return Ok(total);
            }
        }
    }

    pub async fn purge_history(&self, older_than: DateTime<Utc>, batch: u32) -> Result<u64> {
        let mut total = 0;
        loop {
            let n = sqlx::query(
                "DELETE FROM signal_history WHERE id IN \
                 (SELECT id FROM signal_history WHERE archived_at < ?1 LIMIT ?2)",
            )
            .bind(ts(older_than))
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
            let sql = format!("SELECT json_array({cols}) FROM {from} ORDER BY {order}");
            let rows: Vec<String> = sqlx::query_scalar(&sql).fetch_all(&self.pool).await?;
            snap.tables.insert(name, rows);
        }
        Ok(snap)
    }

    pub async fn projection_status(&self) -> Result<ProjectionStatus> {
        let (checkpoint, checkpoint_at): (i64, String) =
            sqlx::query_as("SELECT last_seq, updated_at FROM projection_checkpoints WHERE projection = ?1")
                .bind(PROJECTION)
                .fetch_one(&self.pool)
                .await?;
        let dead_letters: i64 =
            sqlx::query_scalar("SELECT count(*) FROM projection_dead_letters WHERE projection = ?1")
                .bind(PROJECTION)
                .fetch_one(&self.pool)
                .await?;
        let first: Option<(i64, String, String, String)> = if dead_letters > 0 {
            sqlx::query_as(
                "SELECT seq, subject, event_type, reason FROM projection_dead_letters WHERE projection = ?1 \
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
            checkpoint_at: parse_ts(&checkpoint_at)?,
            dead_letters: dead_letters as u64,
            first_dead_letter: first.map(|(seq, subject, event_type, reason)| DeadLetter {
                seq: seq as u64,
                subject,
                event_type,
                reason,
            }),
        })
    }

    pub async fn multi_terminal(&self) -> Result<(u64, Vec<Uuid>)> {
        let cond = "(delivered_at IS NOT NULL) + (expired_at IS NOT NULL) + (recalled_at IS NOT NULL) > 1";
        let ids: Vec<String> = sqlx::query_scalar(&format!(
            "SELECT id FROM signal_queue WHERE {cond} UNION ALL SELECT id FROM signal_history WHERE {cond}"
        ))
        .fetch_all(&self.pool)
        .await?;
        let sample = ids.iter().take(10).map(|s| parse_uuid(s)).collect::<Result<Vec<_>>>()?;
        Ok((ids.len() as u64, sample))
    }

    pub async fn existing(&self, ids: &[Uuid]) -> Result<Vec<Uuid>> {
        if ids.is_empty() {
            return Ok(vec![]);
        }
        let list = id_list(&ids.iter().map(Uuid::to_string).collect::<Vec<_>>());
        let found: Vec<String> = sqlx::query_scalar(
            "SELECT id FROM signal_queue WHERE id IN (SELECT value FROM json_each(?1)) \
             UNION ALL SELECT id FROM signal_history WHERE id IN (SELECT value FROM json_each(?1))",
        )
        .bind(list)
        .fetch_all(&self.pool)
        .await?;
        found.iter().map(|s| parse_uuid(s)).collect()
    }
}
