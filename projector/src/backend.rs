//! `Backend`: PostgreSQL or SQLite behind one handle — a pooled connection, the writer
//! transaction, and a batch applied in it. The statements themselves are written once
//! (`apply.rs`, `read.rs`, `maint.rs`); this is where the two backends' mechanics meet them.
//!
//! Deliberately no SQL beyond what `pg/` and `sqlite/` do to open a writer transaction.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::apply;
use crate::batch::Batch;
use crate::error::{Error, Result};
use crate::pg::PgModels;
use crate::sql::{Pooled, Tx};
use crate::sqlite::SqliteModels;

#[derive(Debug, Clone)]
pub(crate) enum Backend {
    Pg(PgModels),
    Sqlite(SqliteModels),
}

impl Backend {
    pub async fn acquire(&self) -> Result<Pooled> {
        Ok(match self {
            Backend::Pg(m) => Pooled::Pg(m.pool.acquire().await?),
            Backend::Sqlite(m) => Pooled::Sqlite(m.pool.acquire().await?),
        })
    }

    /// A transaction holding the writer lock of the live tables (PostgreSQL's advisory lock,
    /// SQLite's write lock), as the projector, the archiver and a rebuild's swap take it.
    pub async fn begin_writer(&self) -> Result<Tx> {
        Ok(match self {
            Backend::Pg(m) => Tx::Pg(m.begin_writer().await?),
            Backend::Sqlite(m) => Tx::Sqlite(m.begin_writer().await?),
        })
    }

    /// Applies `batch` on top of checkpoint `expected` in one writer transaction. `Ok(false)`
    /// when the checkpoint was not `expected` (someone else applied it, or a rebuild moved it):
    /// nothing was written.
    ///
    /// On SQLite it runs in its own task, so that cancelling the caller (an aborted projector)
    /// cannot stop it between `BEGIN IMMEDIATE` and the point where sqlx knows to roll back: a
    /// pooled connection left holding SQLite's write lock would stall every later writer.
    /// PostgreSQL rolls back a dropped connection's transaction by itself, so it spares the
    /// batch's copy.
    pub async fn apply(&self, batch: &Batch, expected: u64, now: DateTime<Utc>, stale_after: Duration) -> Result<bool> {
        match self {
            Backend::Pg(_) => self.apply_now(batch, expected, now, stale_after).await,
            Backend::Sqlite(_) => {
                let (this, batch) = (self.clone(), batch.clone());
                tokio::spawn(async move { this.apply_now(&batch, expected, now, stale_after).await })
                    .await
                    .map_err(|e| Error::Invariant(format!("embedded batch task failed: {e}")))?
            }
        }
    }

    async fn apply_now(&self, batch: &Batch, expected: u64, now: DateTime<Utc>, stale_after: Duration) -> Result<bool> {
        let mut tx = self.begin_writer().await?;
        if !apply::apply_in(&mut tx.conn(), batch, expected, now, stale_after).await? {
            tx.rollback().await?;
            return Ok(false);
        }
        tx.commit().await?;
        Ok(true)
    }

    /// Recomputes the recipient state of every identity with an open session.
    pub async fn refresh(&self, now: DateTime<Utc>, stale_after: Duration) -> Result<u64> {
        let mut c = self.acquire().await?;
        apply::refresh_open(&mut c.conn(), now, stale_after).await
    }
}
