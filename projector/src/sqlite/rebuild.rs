//! Rebuilding the embedded read models: build a fresh file next to the live one from the
//! stream, then, holding the live file's write lock, catch the fresh file up to the stream's
//! end and copy it over the live tables in one transaction.
//!
//! Deliberately never writes the live tables before that transaction: WAL readers keep seeing
//! the old model until the commit, and the live projector (which needs the same write lock)
//! resumes after the rebuilt checkpoint, so no event falls in between.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bus::log::SharedLog;
use chrono::Utc;
use sqlx::Connection;

use super::{SqliteModels, FILE_NAME};
use crate::backend::Backend;
use crate::batch::Batch;
use crate::bisect::Sink;
use crate::dead_letter::read_entries;
use crate::error::{Error, Result};
use crate::pg::TABLES;
use crate::rebuild_pass::{apply_page, RebuildReport, CHUNK};

/// The fresh file, batch by batch (dead letters met as the live projector meets them).
struct Scratch<'a> {
    models: &'a Backend,
    stale_after: Duration,
}

#[async_trait]
impl Sink for Scratch<'_> {
    async fn apply(&mut self, batch: &Batch, expected: u64) -> Result<bool> {
        self.models.apply(batch, expected, Utc::now(), self.stale_after).await
    }
}

pub(crate) async fn rebuild(m: &SqliteModels, log: &SharedLog, stale_after: Duration) -> Result<RebuildReport> {
    let started = Instant::now();
    let dir = m.path.parent().map(PathBuf::from).unwrap_or_default();
    let scratch_path = dir.join(format!("{FILE_NAME}.rebuild-{}", uuid::Uuid::new_v4().simple()));
    let result = build_and_swap(m, log, &scratch_path, stale_after).await;
    for suffix in ["", "-wal", "-shm"] {
        let mut p = scratch_path.clone().into_os_string();
        p.push(suffix);
        let _ = std::fs::remove_file(p);
    }
    let (events, last_seq) = result?;
    Ok(RebuildReport { events, last_seq, elapsed: started.elapsed() })
}

async fn build_and_swap(
    m: &SqliteModels,
    log: &SharedLog,
    scratch_path: &std::path::Path,
    stale_after: Duration,
) -> Result<(u64, u64)> {
    let file = SqliteModels::open_file(scratch_path).await?;
    let scratch = Backend::Sqlite(file.clone());
    let mut applied = 0u64;
    let mut events = 0u64;
    // The bulk, without any lock on the live file.
    while let Some(n) = catch_up_chunk(&scratch, log, &mut applied, stale_after).await? {
        events += n;
    }
    let mut conn = m.pool.acquire().await?;
    let path = scratch_path.to_string_lossy().to_string();
    sqlx::query("ATTACH DATABASE ?1 AS rb").bind(&path).execute(&mut *conn).await?;
    let swapped = async {
        let mut tx = conn.begin().await?;
        // A real write to `main` only takes the live file's write lock (BEGIN IMMEDIATE would
        // lock the attached scratch file too, and the catch-up below still writes it).
        sqlx::query("UPDATE main.projection_checkpoints SET updated_at = updated_at").execute(&mut *tx).await?;
        while let Some(n) = catch_up_chunk(&scratch, log, &mut applied, stale_after).await? {
            events += n;
        }
        scratch.refresh(Utc::now(), stale_after).await?;
        for t in TABLES {
            sqlx::query(&format!("DELETE FROM main.{t}")).execute(&mut *tx).await?;
            sqlx::query(&format!("INSERT INTO main.{t} SELECT * FROM rb.{t}")).execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok::<_, Error>(())
    }
    .await;
    let _ = sqlx::query("DETACH DATABASE rb").execute(&mut *conn).await;
    file.pool.close().await;
    swapped?;
    tracing::info!(events, last_seq = applied, "embedded read models rebuilt and swapped in");
    Ok((events, applied))
}

/// Applies the next chunk of the stream to the scratch models; `None` when caught up.
async fn catch_up_chunk(
    scratch: &Backend,
    log: &SharedLog,
    applied: &mut u64,
    stale_after: Duration,
) -> Result<Option<u64>> {
    let page = read_entries(log, *applied + 1, CHUNK).await?;
    if page.is_empty() {
        return Ok(None);
    }
    let mut sink = Scratch { models: scratch, stale_after };
    *applied = apply_page(&mut sink, &page, *applied).await?;
    Ok(Some(page.len() as u64))
}
