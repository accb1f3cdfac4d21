//! The PostgreSQL backend of the read models: connecting, migrating, the writer transaction
//! (advisory lock), and the scratch-schema rebuild (`rebuild.rs`).
//!
//! Deliberately holds no statement of the projection, the queries or the maintenance: those
//! are written once for both backends (`apply.rs`, `read.rs`, `maint.rs`).

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Postgres, Transaction};

use crate::error::{migrate_error, Result};

pub(crate) mod rebuild;

/// The migrations, embedded at build time.
pub(crate) static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../schema/postgres");

/// Advisory lock key every writer of the live tables takes for the length of its transaction:
/// the projector per batch, the archiver per chunk, and the rebuild's swap. ("sbproj" in ASCII.)
pub(crate) const WRITER_LOCK: i64 = 0x7362_7072_6f6a;

/// `begin_writer`'s statements, `WRITER_LOCK` spelled out (a simple query takes no parameters;
/// the test below holds the two equal).
const BEGIN_WRITER: &str = "BEGIN; SELECT pg_advisory_xact_lock(126866630537066); \
     SET LOCAL synchronous_commit TO off; SET LOCAL backend_flush_after TO '256kB'";

/// The tables of the read models, in the order a rebuild swaps (or, embedded, copies) them.
pub(crate) const TABLES: [&str; 13] = [
    "signal_queue",
    "signal_history",
    "agents",
    "agent_sessions",
    "recipient_state",
    "plugin_facts",
    "plugin_state",
    "directives",
    "directive_candidates",
    "groups",
    "group_members",
    "projection_dead_letters",
    "projection_checkpoints",
];

/// The tables only PostgreSQL keeps (`apply/inflight.rs`), swapped by a rebuild with `TABLES`.
pub(crate) const PG_TABLES: [&str; 1] = ["signal_inflight"];

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

    /// Another pool to the same database and schema that connects lazily, so its sockets belong
    /// to whichever runtime first uses it (a projector on a runtime of its own: a socket polled
    /// from two runtimes would die with the first one to stop). Two connections: the projector
    /// uses one at a time. No ping before each acquire: the pool pings every connection as it is
    /// returned, and the projector takes one again within its batch cycle, so the ping before
    /// would be a round trip on every batch's critical path that says what the last one said. A
    /// connection that died meanwhile fails that batch, which the runner retries on a fresh one
    /// (the failed one is dropped on return; unavailability is retried, never bisected).
    pub fn sibling(&self) -> PgModels {
        let options = self.pool.connect_options().as_ref().clone();
        let pool = PgPoolOptions::new()
            .max_connections(2)
            .acquire_timeout(Duration::from_secs(10))
            .test_before_acquire(false)
            .connect_lazy_with(options);
        PgModels { pool, schema: self.schema.clone() }
    }

    /// A transaction holding the writer lock until it ends, committed without waiting for its
    /// WAL flush (`synchronous_commit = off`, this transaction only). Safe for read models and
    /// only for them: a crash can lose the last few hundred milliseconds of commits, but never
    /// part of one, and every batch carries its checkpoint — so the tables and the checkpoint
    /// roll back together and the projector simply applies those events again. What it saves
    /// is a disk flush per batch on the projector's critical path. It also asks the kernel to
    /// start writing out, every 256 kB, the table and index pages this backend evicts from
    /// PostgreSQL's buffers (`backend_flush_after`, off by default): a projector writes most of
    /// the database's data, and left in the page cache it all reaches the disk in the fsync at
    /// the end of each checkpoint, a burst that stalled batches for up to 200 ms flat out
    /// (docs/performance.md). The `BEGIN`, the lock and the settings go in one simple query: one
    /// round trip, not three, per batch.
    pub async fn begin_writer(&self) -> Result<Transaction<'static, Postgres>> {
        Ok(self.pool.begin_with(BEGIN_WRITER).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_writer_transaction_takes_the_writer_lock() {
        assert!(BEGIN_WRITER.contains(&format!("pg_advisory_xact_lock({WRITER_LOCK})")));
    }
}
