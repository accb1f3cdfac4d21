//! The PostgreSQL backend of the read models: connecting, migrating, and the per-batch
//! transaction (advisory lock, checkpoint compare-and-set, set-based writes).
//!
//! Deliberately holds no projection logic of its own beyond SQL: what a batch contains is
//! decided in `batch.rs`, when batches close in `runner.rs`.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Connection, PgPool};
use std::str::FromStr;

use crate::batch::{Batch, PROJECTION};
use crate::error::{migrate_error, Result};

mod apply;
mod maint;
pub(crate) mod queries;
pub(crate) use queries::SIGNAL_COLS;
mod rebuild;

pub(crate) use rebuild::rebuild;

/// The migrations, embedded at build time.
pub(crate) static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../schema/postgres");

/// Advisory lock key every writer of the live tables takes for the length of its transaction:
/// the projector per batch, the archiver per chunk, and the rebuild's swap. ("sbproj" in ASCII.)
pub(crate) const WRITER_LOCK: i64 = 0x7362_7072_6f6a;

/// The tables of the read models, in the order the rebuild swaps them.
pub(crate) const TABLES: [&str; 9] = [
    "signal_queue",
    "signal_history",
    "agents",
    "agent_sessions",
    "recipient_state",
    "plugin_facts",
    "plugin_state",
    "projection_dead_letters",
    "projection_checkpoints",
];

#[derive(Debug, Clone)]
pub(crate) struct PgModels {
    pub pool: PgPool,
    /// The schema the live tables are in (the connection's `current_schema()`).
    pub schema: String,
}

impl PgModels {
    pub async fn open(url: &str) -> Result<PgModels> {
        let options = PgConnectOptions::from_str(url)?.application_name("signalbus-projector");
        let pool = PgPoolOptions::new()
            .max_connections(8)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options)
            .await?;
        MIGRATOR.run(&pool).await.map_err(migrate_error)?;
        let schema: String = sqlx::query_scalar("SELECT current_schema()").fetch_one(&pool).await?;
        Ok(PgModels { pool, schema })
    }

    pub async fn checkpoint(&self) -> Result<u64> {
        let seq: i64 = sqlx::query_scalar("SELECT last_seq FROM projection_checkpoints WHERE projection = $1")
            .bind(PROJECTION)
            .fetch_one(&self.pool)
            .await?;
        Ok(seq as u64)
    }

    /// Applies `batch` on top of checkpoint `expected` in one transaction. `Ok(false)` when the
    /// checkpoint was not `expected` (someone else applied it, or a rebuild moved it): nothing
    /// was written.
    pub async fn apply(&self, batch: &Batch, expected: u64, now: DateTime<Utc>, stale_after: Duration) -> Result<bool> {
        let mut conn = self.pool.acquire().await?;
        let mut tx = conn.begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(WRITER_LOCK).execute(&mut *tx).await?;
        if !apply::apply_in(&mut tx, batch, expected, now, stale_after).await? {
            tx.rollback().await?;
            return Ok(false);
        }
        tx.commit().await?;
        Ok(true)
    }

    /// Recomputes the recipient state of every identity with an open session (only those can
    /// cross the stale threshold by the clock alone).
    pub async fn refresh(&self, now: DateTime<Utc>, stale_after: Duration) -> Result<u64> {
        let mut conn = self.pool.acquire().await?;
        apply::refresh_open(&mut conn, now, stale_after).await
    }
}
