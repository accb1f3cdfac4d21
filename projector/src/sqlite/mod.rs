//! The embedded backend of the read models: one SQLite file, `<data_dir>/readmodels.sqlite`,
//! with the same tables and columns as PostgreSQL.
//!
//! Deliberately mirrors `pg/` statement for statement where SQLite allows it, so one test
//! suite holds both to the same behaviour. SQLite's write lock (`BEGIN IMMEDIATE`) plays the
//! part of PostgreSQL's advisory writer lock.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, NaiveDateTime, Utc};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::SqlitePool;
use uuid::Uuid;

use crate::batch::{Batch, PROJECTION};
use crate::error::{migrate_error, Error, Result};

mod apply;
mod maint;
mod queries;
mod rebuild;

pub(crate) use rebuild::rebuild;

pub(crate) static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../schema/sqlite");

/// The file name of the read models inside the data dir.
pub const FILE_NAME: &str = "readmodels.sqlite";

/// How long a writer waits for SQLite's write lock (a rebuild's swap may hold it a while).
const BUSY_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone)]
pub(crate) struct SqliteModels {
    pub pool: SqlitePool,
    pub path: PathBuf,
}

/// Timestamps as fixed-width UTC text, so text order is time order (see the migration).
pub(crate) fn ts(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

pub(crate) fn parse_ts(s: &str) -> Result<DateTime<Utc>> {
    NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.fZ")
        .map(|n| n.and_utc())
        .map_err(|e| Error::Invariant(format!("bad timestamp {s:?} in the embedded read models: {e}")))
}

pub(crate) fn parse_opt_ts(s: Option<String>) -> Result<Option<DateTime<Utc>>> {
    s.as_deref().map(parse_ts).transpose()
}

pub(crate) fn parse_uuid(s: &str) -> Result<Uuid> {
    Uuid::parse_str(s).map_err(|e| Error::Invariant(format!("bad uuid {s:?} in the embedded read models: {e}")))
}

impl SqliteModels {
    pub async fn open(data_dir: &Path) -> Result<SqliteModels> {
        bus::files::private_dir(data_dir)?;
        Self::open_file(&data_dir.join(FILE_NAME)).await
    }

    /// Opens (creating, 0600) one read-model file: the live one or a rebuild's scratch file.
    pub async fn open_file(path: &Path) -> Result<SqliteModels> {
        bus::files::private_file(path)?;
        let options = SqliteConnectOptions::from_str("sqlite:")?
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(BUSY_TIMEOUT);
        let pool = SqlitePoolOptions::new().max_connections(4).connect_with(options).await?;
        MIGRATOR.run(&pool).await.map_err(migrate_error)?;
        Ok(SqliteModels { pool, path: path.to_path_buf() })
    }

    pub async fn checkpoint(&self) -> Result<u64> {
        let seq: i64 = sqlx::query_scalar("SELECT last_seq FROM projection_checkpoints WHERE projection = ?1")
            .bind(PROJECTION)
            .fetch_one(&self.pool)
            .await?;
        Ok(seq as u64)
    }

    /// Runs in its own task so that cancelling the caller (an aborted projector) cannot stop it
    /// between `BEGIN IMMEDIATE` and the point where sqlx knows to roll back: a pooled
    /// connection left holding SQLite's write lock would stall every later writer.
    pub async fn apply(&self, batch: &Batch, expected: u64, now: DateTime<Utc>, stale_after: Duration) -> Result<bool> {
        let pool = self.pool.clone();
        let batch = batch.clone();
        let task = tokio::spawn(async move {
            let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
            if !apply::apply_in(&mut tx, &batch, expected, now, stale_after).await? {
                tx.rollback().await?;
                return Ok(false);
            }
            tx.commit().await?;
            Ok(true)
        });
        task.await.map_err(|e| Error::Invariant(format!("embedded batch task failed: {e}")))?
    }

    pub async fn refresh(&self, now: DateTime<Utc>, stale_after: Duration) -> Result<u64> {
        let mut conn = self.pool.acquire().await?;
        apply::refresh_open(&mut conn, now, stale_after).await
    }
}
