//! Leadership among several sweepers: exactly one expires and archives, the others stand by.
//!
//! Distributed mode uses a PostgreSQL session advisory lock (`pg_try_advisory_lock`) on a
//! dedicated connection held for as long as we lead: the server releases it the moment that
//! connection dies, so a crashed leader is replaced after one standby retry period, with no
//! lease expiry to tune and no clock to trust. Embedded mode (`Lease::Local`) has one process
//! by construction and always leads.
//!
//! Deliberately not a correctness mechanism: two leaders at once (e.g. during a network
//! partition) cannot double-expire — the per-signal compare-and-set prevents it — they only
//! waste work. So we check the lease every `retry` period rather than fencing every append.

use std::time::Duration;

use sqlx::{Connection, PgConnection};
use tokio_util::sync::CancellationToken;

use crate::error::Result;

/// How the sweeper decides it may work.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Lease {
    /// Embedded mode: a single process, always the leader.
    #[default]
    Local,
    /// Distributed mode: the holder of a PostgreSQL advisory lock in this database leads.
    Postgres { database_url: String },
}

/// The advisory lock key: one sweeper leader per read-model database. ASCII "sbsweepr".
pub const ADVISORY_LOCK_KEY: i64 = 0x7362_7377_6565_7072;

const CHECK_TIMEOUT: Duration = Duration::from_secs(5);

/// A lease we hold. Dropping it releases the lock (the connection closes).
#[derive(Debug)]
pub enum Held {
    Local,
    Postgres(PgConnection),
}

impl Lease {
    /// Waits until we hold the lease, retrying every `retry`. `None` when `cancel` fired first.
    pub async fn acquire(&self, retry: Duration, cancel: &CancellationToken) -> Option<Held> {
        let Lease::Postgres { database_url } = self else {
            return Some(Held::Local);
        };
        let mut conn: Option<PgConnection> = None;
        let mut announced = false;
        loop {
            match try_lock(&mut conn, database_url).await {
                Ok(true) => return conn.map(Held::Postgres),
                Ok(false) if !announced => {
                    tracing::info!(retry_seconds = retry.as_secs_f64(), "another sweeper leads; standing by");
                    announced = true;
                }
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "sweeper lease database unreachable; retrying");
                    conn = None;
                }
            }
            tokio::select! {
                _ = cancel.cancelled() => return None,
                _ = tokio::time::sleep(retry) => {}
            }
        }
    }
}

/// One attempt on `conn` (opened if needed): whether we now hold the lock.
async fn try_lock(conn: &mut Option<PgConnection>, url: &str) -> Result<bool> {
    if conn.is_none() {
        *conn = Some(PgConnection::connect(url).await?);
    }
    let c = conn.as_mut().expect("just opened");
    let held: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)").bind(ADVISORY_LOCK_KEY).fetch_one(c).await?;
    Ok(held)
}

impl Held {
    /// Whether we still hold the lease. A session lock lives exactly as long as its connection,
    /// so a live connection means a held lock.
    pub async fn check(&mut self) -> bool {
        match self {
            Held::Local => true,
            // Bounded: a half-open TCP connection would otherwise keep us "leading" for minutes.
            Held::Postgres(conn) => matches!(tokio::time::timeout(CHECK_TIMEOUT, conn.ping()).await, Ok(Ok(()))),
        }
    }

    /// Gives the lease up at once, so a standby can take over without waiting for a timeout.
    pub async fn release(self) {
        if let Held::Postgres(mut conn) = self {
            let _ = sqlx::query("SELECT pg_advisory_unlock($1)").bind(ADVISORY_LOCK_KEY).execute(&mut conn).await;
            let _ = conn.close().await;
        }
    }
}
