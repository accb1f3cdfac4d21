//! Rebuilding the PostgreSQL read models: build every table afresh in a scratch schema from the
//! stream, then, holding the writer lock, catch up the last events and swap the scratch tables
//! in with `ALTER TABLE .. SET SCHEMA` in one transaction.
//!
//! Deliberately never touches the live tables before the swap, so readers see the old model
//! until the commit and the new one after it, never a half-built one; and since the final
//! catch-up happens under the lock the live projector also takes, no event falls in between.
//!
//! Built for bulk speed, since nobody reads the scratch tables: big batches (`BULK_CHUNK`, so
//! most signals' send, delivery and ack land in one batch and their row is written once), no
//! secondary indexes during the load (created in one sorted pass each before the swap; the
//! swap moves them with their tables), and no commit flush per batch (`synchronous_commit`
//! off: a crash loses only scratch work, and the swap's own synchronous commit flushes the
//! WAL before it).
//!
//! Dead letters are met exactly as the live projector meets them (`bisect.rs`); under the lock,
//! each attempt runs in a savepoint, so a failed one does not abort the swap's transaction.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use bus::log::SharedLog;
use chrono::Utc;
use sqlx::{Connection, Executor, PgConnection};
use uuid::Uuid;

use super::{PgModels, MIGRATOR, PG_TABLES, TABLES, WRITER_LOCK};
use crate::apply;
use crate::batch::Batch;
use crate::bisect::Sink;
use crate::dead_letter::{read_entries, AsEntry, Entry};
use crate::error::Result;
use crate::rebuild_pass::{apply_page, RebuildReport, BULK_CHUNK, CHUNK};
use crate::sql::Conn;

/// The bulk load: each batch in its own transaction in the scratch schema, without a flush.
struct Bulk<'c> {
    conn: &'c mut PgConnection,
    scratch: &'c str,
    stale_after: Duration,
}

#[async_trait]
impl Sink for Bulk<'_> {
    async fn apply(&mut self, batch: &Batch, expected: u64) -> Result<bool> {
        let mut tx = self.conn.begin().await?;
        let setup = format!("SET LOCAL search_path TO {}; SET LOCAL synchronous_commit TO off", self.scratch);
        // Through `Executor` rather than `RawSql::execute`: with the latter rustc cannot prove
        // the future `Send` (sqlx's higher-ranked executor bound), which `async_trait` needs.
        (&mut *tx).execute(sqlx::raw_sql(&setup)).await?;
        // Dropped uncommitted on `false` or an error: rolled back.
        if !apply::apply_in(&mut Conn::Pg(&mut tx), batch, expected, Utc::now(), self.stale_after).await? {
            return Ok(false);
        }
        tx.commit().await?;
        Ok(true)
    }
}

/// The catch-up under the writer lock: each batch in a savepoint of the swap's transaction.
struct Locked<'c> {
    tx: &'c mut PgConnection,
    stale_after: Duration,
}

#[async_trait]
impl Sink for Locked<'_> {
    async fn apply(&mut self, batch: &Batch, expected: u64) -> Result<bool> {
        let mut savepoint = self.tx.begin().await?;
        if !apply::apply_in(&mut Conn::Pg(&mut savepoint), batch, expected, Utc::now(), self.stale_after).await? {
            return Ok(false);
        }
        savepoint.commit().await?;
        Ok(true)
    }
}

pub(crate) async fn rebuild(m: &PgModels, log: &SharedLog, stale_after: Duration) -> Result<RebuildReport> {
    let started = Instant::now();
    let scratch = format!("sb_rebuild_{}", Uuid::new_v4().simple());
    let mut conn = m.pool.acquire().await?;
    let result = build_and_swap(&mut conn, m, log, &scratch, stale_after).await;
    if result.is_err() {
        // Best effort: a failed rebuild leaves the live model as it was; only the scratch goes.
        let _ = sqlx::raw_sql(&format!("DROP SCHEMA IF EXISTS {scratch} CASCADE")).execute(&mut *conn).await;
    }
    let (events, last_seq) = result?;
    Ok(RebuildReport { events, last_seq, elapsed: started.elapsed() })
}

async fn build_and_swap(
    conn: &mut PgConnection,
    m: &PgModels,
    log: &SharedLog,
    scratch: &str,
    stale_after: Duration,
) -> Result<(u64, u64)> {
    sqlx::raw_sql(&format!("CREATE SCHEMA {scratch}")).execute(&mut *conn).await?;
    for migration in MIGRATOR.iter() {
        let mut tx = conn.begin().await?;
        sqlx::raw_sql(&format!("SET LOCAL search_path TO {scratch}")).execute(&mut *tx).await?;
        sqlx::raw_sql(&migration.sql).execute(&mut *tx).await?;
        tx.commit().await?;
    }
    let deferred = drop_secondary_indexes(&mut *conn, scratch).await?;
    let mut applied = 0u64;
    let mut events = 0u64;
    // Bulk of the work, without the lock: the live projector keeps going meanwhile. Reading
    // and decoding the log costs about as much as applying, so the next page is read while
    // the current one is applied.
    let (pages_tx, mut pages) = tokio::sync::mpsc::channel::<Result<Vec<Entry>>>(2);
    let reader_log = log.clone();
    let reader = tokio::spawn(async move {
        let mut from = 1;
        loop {
            let page = read_entries(&reader_log, from, BULK_CHUNK).await;
            let done = match &page {
                Ok(p) => p.last().map(|s| from = s.seq() + 1).is_none(),
                Err(_) => true,
            };
            if pages_tx.send(page).await.is_err() || done {
                return;
            }
        }
    });
    while let Some(page) = pages.recv().await {
        let page = page?;
        if page.is_empty() {
            break;
        }
        let mut sink = Bulk { conn: &mut *conn, scratch, stale_after };
        applied = apply_page(&mut sink, &page, applied).await?;
        events += page.len() as u64;
    }
    reader.abort();
    // Still outside the lock: the indexes are built while the live projector keeps going, so
    // the locked catch-up below (a few events, maintained row by row) stays short.
    let mut tx = conn.begin().await?;
    sqlx::raw_sql("SET LOCAL maintenance_work_mem TO '256MB'").execute(&mut *tx).await?;
    for def in &deferred {
        sqlx::raw_sql(def).execute(&mut *tx).await?;
    }
    tx.commit().await?;
    let mut tx = conn.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(WRITER_LOCK).execute(&mut *tx).await?;
    sqlx::raw_sql(&format!("SET LOCAL search_path TO {scratch}")).execute(&mut *tx).await?;
    loop {
        let n = catch_up_chunk(&mut tx, log, &mut applied, stale_after).await?;
        events += n;
        if n == 0 {
            break;
        }
    }
    apply::refresh_open(&mut Conn::Pg(&mut tx), Utc::now(), stale_after).await?;
    let live = format!("\"{}\"", m.schema.replace('"', "\"\""));
    let old = format!("{scratch}_old");
    let mut ddl = format!("CREATE SCHEMA {old};");
    for t in TABLES.iter().chain(&PG_TABLES) {
        ddl.push_str(&format!("ALTER TABLE {live}.{t} SET SCHEMA {old}; ALTER TABLE {scratch}.{t} SET SCHEMA {live};"));
    }
    ddl.push_str(&format!("DROP SCHEMA {old} CASCADE; DROP SCHEMA {scratch};"));
    sqlx::raw_sql(&ddl).execute(&mut *tx).await?;
    tx.commit().await?;
    tracing::info!(events, last_seq = applied, "read models rebuilt and swapped in");
    Ok((events, applied))
}

/// Drops the scratch tables' non-unique indexes and returns their definitions, to be run again
/// after the bulk load. Primary keys and unique indexes stay: the upserts' `ON CONFLICT` and
/// the patches' joins by id need them.
async fn drop_secondary_indexes(conn: &mut PgConnection, scratch: &str) -> Result<Vec<String>> {
    let defs: Vec<(String, String)> = sqlx::query_as(
        "SELECT c.relname::text, pg_get_indexdef(i.indexrelid) FROM pg_index i \
         JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace \
         WHERE n.nspname = $1 AND NOT i.indisunique AND NOT i.indisprimary ORDER BY c.relname",
    )
    .bind(scratch)
    .fetch_all(&mut *conn)
    .await?;
    let drops: String = defs.iter().map(|(name, _)| format!("DROP INDEX {scratch}.\"{name}\";")).collect();
    if !drops.is_empty() {
        sqlx::raw_sql(&drops).execute(&mut *conn).await?;
    }
    // `pg_get_indexdef` names the table with its (scratch) schema, so each runs as is.
    Ok(defs.into_iter().map(|(_, def)| def).collect())
}

/// Applies the next chunk of the stream after `applied`; returns how many events it held.
async fn catch_up_chunk(
    conn: &mut PgConnection,
    log: &SharedLog,
    applied: &mut u64,
    stale_after: Duration,
) -> Result<u64> {
    let page = read_entries(log, *applied + 1, CHUNK).await?;
    if page.is_empty() {
        return Ok(0);
    }
    let mut sink = Locked { tx: conn, stale_after };
    *applied = apply_page(&mut sink, &page, *applied).await?;
    Ok(page.len() as u64)
}
