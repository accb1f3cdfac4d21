//! Maintenance over the read models, in either dialect: archiving settled rows, purging old
//! history, the canonical snapshot used to compare a live model with a rebuild, and the
//! doctor's probes.
//!
//! Deliberately no projection here: archiving moves rows, it never changes a column the
//! stream decides.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::apply::inflight;
use crate::backend::Backend;
use crate::batch::PROJECTION;
use crate::dead_letter::DeadLetter;
use crate::error::{Error, Result};
use crate::queries::ProjectionStatus;
use crate::read::SIGNAL_COLS;
use crate::snapshot::{Snapshot, SNAPSHOT_TABLES};
use crate::sql::RowSet;

impl Backend {
    /// Moves up to `batch` settled rows per transaction to `signal_history`, until none is left.
    /// Settled: expired, recalled, acked, or delivered and past its TTL (no longer redeliverable).
    /// In its own task, for the reason given at `Backend::apply`.
    pub async fn archive(&self, older_than: DateTime<Utc>, batch: u32) -> Result<u64> {
        let this = self.clone();
        tokio::spawn(async move { this.archive_now(older_than, batch).await })
            .await
            .map_err(|e| Error::Invariant(format!("archive task failed: {e}")))?
    }

    async fn archive_now(&self, older_than: DateTime<Utc>, batch: u32) -> Result<u64> {
        let limit = i64::from(batch.max(1));
        let mut total = 0;
        loop {
            // The writer lock keeps a batch that stamps a row from racing its move.
            let mut tx = self.begin_writer().await?;
            let mut conn = tx.conn();
            let args = conn.args().bind(older_than).bind(limit);
            let ids = conn
                .fetch_all(
                    "SELECT id FROM signal_queue \
                     WHERE expired_at < $1 OR recalled_at < $1 OR acked_at < $1 \
                        OR (delivered_at IS NOT NULL AND expires_at < $1) LIMIT $2",
                    args,
                )
                .await?
                .iter()
                .map(|r| r.uuid("id"))
                .collect::<Result<Vec<Uuid>>>()?;
            if !ids.is_empty() {
                let mut args = conn.args();
                let now = conn.dialect().now(&mut args, Utc::now());
                let src = args.rows(RowSet::new().col("id", ids.iter().copied()));
                let sql = format!(
                    "INSERT INTO signal_history ({SIGNAL_COLS}, archived_at) SELECT {SIGNAL_COLS}, {now} \
                     FROM signal_queue WHERE id IN (SELECT id FROM {src})"
                );
                conn.execute(&sql, args).await?;
                let mut args = conn.args();
                let delete = format!(
                    "DELETE FROM signal_queue WHERE id IN (SELECT id FROM {})",
                    args.rows(RowSet::new().col("id", ids.iter().copied()))
                );
                conn.execute(&inflight::delete(conn.dialect(), delete), args).await?;
            }
            tx.commit().await?;
            total += ids.len() as u64;
            if (ids.len() as i64) < limit {
                return Ok(total);
            }
        }
    }

    /// Deletes `signal_history` rows archived before `older_than`, and terminal `directives`
    /// (with their candidates) that ended before it, `batch` per statement: both age out with
    /// the stream's retention. A directive has no history table: once its events have left the
    /// stream, a rebuild would not bring it back either.
    pub async fn purge_history(&self, older_than: DateTime<Utc>, batch: u32) -> Result<u64> {
        let signals = self.purge_signal_history(older_than, batch).await?;
        Ok(signals + self.purge_directives(older_than, batch).await?)
    }

    async fn purge_directives(&self, older_than: DateTime<Utc>, batch: u32) -> Result<u64> {
        let mut total = 0;
        loop {
            let mut tx = self.begin_writer().await?;
            let mut conn = tx.conn();
            let args = conn.args().bind(older_than).bind(i64::from(batch.max(1)));
            let ids = conn
                .fetch_all(
                    "SELECT directive_id FROM directives WHERE finished_at < $1 \
                     AND status NOT IN ('requested', 'started') LIMIT $2",
                    args,
                )
                .await?
                .iter()
                .map(|r| r.uuid("directive_id"))
                .collect::<Result<Vec<Uuid>>>()?;
            for table in ["directive_candidates", "directives"] {
                let mut args = conn.args();
                let src = args.rows(RowSet::new().col("id", ids.iter().copied()));
                let sql = format!("DELETE FROM {table} WHERE directive_id IN (SELECT id FROM {src})");
                conn.execute(&sql, args).await?;
            }
            tx.commit().await?;
            total += ids.len() as u64;
            if ids.len() < batch.max(1) as usize {
                return Ok(total);
            }
        }
    }

    async fn purge_signal_history(&self, older_than: DateTime<Utc>, batch: u32) -> Result<u64> {
        let mut c = self.acquire().await?;
        let mut conn = c.conn();
        let mut total = 0;
        loop {
            let args = conn.args().bind(older_than).bind(i64::from(batch.max(1)));
            let n = conn
                .execute(
                    "DELETE FROM signal_history WHERE id IN \
                     (SELECT id FROM signal_history WHERE archived_at < $1 LIMIT $2)",
                    args,
                )
                .await?;
            total += n;
            if n < u64::from(batch.max(1)) {
                return Ok(total);
            }
        }
    }

    pub async fn snapshot(&self) -> Result<Snapshot> {
        let mut c = self.acquire().await?;
        let mut conn = c.conn();
        let d = conn.dialect();
        let mut snap = Snapshot::default();
        for (name, cols, from, order) in SNAPSHOT_TABLES {
            let from = from.replace("{SIGNAL_COLS}", SIGNAL_COLS);
            let sql = format!("SELECT {} AS r FROM {from} ORDER BY {order}", d.json_array(cols));
            let args = conn.args();
            let rows = conn.fetch_all(&sql, args).await?.iter().map(|r| r.get("r")).collect::<Result<_>>()?;
            snap.tables.insert(name, rows);
        }
        Ok(snap)
    }

    /// The checkpoint, when it moved, and the dead letters (their count and the first).
    pub async fn projection_status(&self) -> Result<ProjectionStatus> {
        let mut c = self.acquire().await?;
        let mut conn = c.conn();
        let sql = "SELECT last_seq, updated_at FROM projection_checkpoints WHERE projection = $1";
        let row = conn.fetch_one(sql, conn.args().bind(PROJECTION)).await?;
        let (checkpoint, checkpoint_at) = (row.get::<i64>("last_seq")?, row.ts("updated_at")?);
        let sql = "SELECT count(*) AS n FROM projection_dead_letters WHERE projection = $1";
        let dead_letters = conn.fetch_one(sql, conn.args().bind(PROJECTION)).await?.get::<i64>("n")?;
        let first = if dead_letters > 0 {
            let sql = "SELECT seq, subject, event_type, reason FROM projection_dead_letters WHERE projection = $1 \
                       ORDER BY seq LIMIT 1";
            conn.fetch_optional(sql, conn.args().bind(PROJECTION)).await?
        } else {
            None
        };
        let first_dead_letter = match first {
            Some(r) => Some(DeadLetter {
                seq: r.get::<i64>("seq")? as u64,
                subject: r.get("subject")?,
                event_type: r.get("event_type")?,
                reason: r.get("reason")?,
            }),
            None => None,
        };
        Ok(ProjectionStatus {
            checkpoint: checkpoint as u64,
            checkpoint_at,
            dead_letters: dead_letters as u64,
            first_dead_letter,
        })
    }

    /// Rows (hot or archived) with more than one terminal stamp: their count and a few ids.
    pub async fn multi_terminal(&self) -> Result<(u64, Vec<Uuid>)> {
        let cond = "CASE WHEN delivered_at IS NOT NULL THEN 1 ELSE 0 END \
                    + CASE WHEN expired_at IS NOT NULL THEN 1 ELSE 0 END \
                    + CASE WHEN recalled_at IS NOT NULL THEN 1 ELSE 0 END > 1";
        let sql =
            format!("SELECT id FROM signal_queue WHERE {cond} UNION ALL SELECT id FROM signal_history WHERE {cond}");
        let mut c = self.acquire().await?;
        let mut conn = c.conn();
        let rows = conn.fetch_all(&sql, conn.args()).await?;
        let sample = rows.iter().take(10).map(|r| r.uuid("id")).collect::<Result<Vec<_>>>()?;
        Ok((rows.len() as u64, sample))
    }

    /// See `ReadModels::inflight_mismatches`.
    pub async fn inflight_mismatches(&self) -> Result<(u64, Vec<Uuid>)> {
        let mut c = self.acquire().await?;
        let mut conn = c.conn();
        if !inflight::listed(conn.dialect()) {
            return Ok((0, Vec::new()));
        }
        let sql = "SELECT q.id FROM signal_queue q WHERE q.delivered_at IS NOT NULL AND q.acked_at IS NULL \
                     AND NOT EXISTS (SELECT 1 FROM signal_inflight f \
                       WHERE f.tenant = q.tenant AND f.to_identity = q.to_identity AND f.id = q.id) \
                   UNION ALL SELECT f.id FROM signal_inflight f WHERE NOT EXISTS (SELECT 1 FROM signal_queue q \
                     WHERE q.id = f.id AND q.tenant = f.tenant AND q.to_identity = f.to_identity \
                       AND q.delivered_at IS NOT NULL AND q.acked_at IS NULL)";
        let rows = conn.fetch_all(sql, conn.args()).await?;
        let sample = rows.iter().take(10).map(|r| r.uuid("id")).collect::<Result<Vec<_>>>()?;
        Ok((rows.len() as u64, sample))
    }

    /// Which of `ids` have a row (hot or archived).
    pub async fn existing(&self, ids: &[Uuid]) -> Result<Vec<Uuid>> {
        if ids.is_empty() {
            return Ok(vec![]);
        }
        let mut c = self.acquire().await?;
        let mut conn = c.conn();
        let mut args = conn.args();
        let src = args.rows(RowSet::new().col("id", ids.iter().copied()));
        // One parameter, read twice: the same row set serves both halves.
        let sql = format!(
            "WITH wanted AS (SELECT id FROM {src}) \
             SELECT id FROM signal_queue WHERE id IN (SELECT id FROM wanted) \
             UNION ALL SELECT id FROM signal_history WHERE id IN (SELECT id FROM wanted)"
        );
        conn.fetch_all(&sql, args).await?.iter().map(|r| r.uuid("id")).collect()
    }
}
