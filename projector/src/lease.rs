//! Leadership among several processes of one role (projectors, sweepers): exactly one works,
//! the others stand by, decided by a PostgreSQL session advisory lock (`pg_try_advisory_lock`)
//! on a dedicated connection held for as long as the holder leads.
//!
//! Why a session lock: it needs no expiry, heartbeat or clock — the server releases it the
//! moment the connection dies. A kill -9 closes the socket at once; a lost host is noticed by
//! the server's TCP keepalives, which the lease connection tightens for itself
//! (`KEEPALIVE_SETTINGS`: about 11 s instead of the operating system's two hours). The holder
//! checks its connection every retry period, so it stops leading when it cannot reach the
//! server either. Embedded mode (`Lease::Local`) is one process and always leads.
//!
//! Deliberately not a correctness mechanism: two holders at once (a partition, a standby that
//! took over while the old holder's check is pending) stay correct through the compare-and-sets
//! underneath (the projector's checkpoint, the sweeper's per-signal append); the lease only
//! keeps them from wasting work on each other.

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection, PgConnection};
use tokio_util::sync::CancellationToken;

use crate::error::Result;

/// The projector's lock key: one projector leads per read-model database. ASCII "sbprojld".
pub const PROJECTOR_LEASE_KEY: i64 = 0x7362_7072_6f6a_6c64;

/// How long a holder's liveness check may take before it counts as lost.
const CHECK_TIMEOUT: Duration = Duration::from_secs(5);

/// Server-side keepalives on the lease connection (startup parameters): a holder whose host
/// vanished (no FIN, no RST) releases the lock after idle + interval × count = 5 + 2 × 3 = 11 s.
const KEEPALIVE_SETTINGS: [(&str, &str); 3] =
    [("tcp_keepalives_idle", "5"), ("tcp_keepalives_interval", "2"), ("tcp_keepalives_count", "3")];

/// How a process decides it may work.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Lease {
    /// One process by construction (embedded mode): always the leader.
    #[default]
    Local,
    /// The holder of advisory lock `key` in this database leads.
    Postgres { database_url: String, key: i64 },
}

/// A lease we hold. Dropping it releases the lock (the connection closes).
#[derive(Debug)]
pub enum Held {
    Local,
    Postgres { conn: PgConnection, key: i64 },
}

impl Lease {
    /// Waits until we hold the lease, retrying every `retry`; `None` when `cancel` fired first.
    /// `role` names the role in logs.
    pub async fn acquire(&self, retry: Duration, cancel: &CancellationToken, role: &'static str) -> Option<Held> {
        let Lease::Postgres { database_url, key } = self else {
            return Some(Held::Local);
        };
        let mut conn: Option<PgConnection> = None;
        let mut announced = false;
        loop {
            match try_lock(&mut conn, database_url, *key).await {
                Ok(true) => return conn.map(|conn| Held::Postgres { conn, key: *key }),
                Ok(false) if !announced => {
                    tracing::info!(role, retry_seconds = retry.as_secs_f64(), "another process leads; standing by");
                    announced = true;
                }
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(role, error = %e, "lease database unreachable; retrying");
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

/// One attempt on `conn` (opened, with tight keepalives, if needed): whether we hold the lock.
async fn try_lock(conn: &mut Option<PgConnection>, url: &str, key: i64) -> Result<bool> {
    if conn.is_none() {
        let options = PgConnectOptions::from_str(url)?.application_name("signalbus-lease").options(KEEPALIVE_SETTINGS);
        *conn = Some(PgConnection::connect_with(&options).await?);
    }
    let c = conn.as_mut().expect("just opened");
    let held: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)").bind(key).fetch_one(c).await?;
    Ok(held)
}

impl Held {
    /// Whether we still hold the lease: a session lock lives exactly as long as its connection.
    pub async fn check(&mut self) -> bool {
        match self {
            Held::Local => true,
            // Bounded: a half-open TCP connection would otherwise keep us "leading" for minutes.
            Held::Postgres { conn, .. } => matches!(tokio::time::timeout(CHECK_TIMEOUT, conn.ping()).await, Ok(Ok(()))),
        }
    }

    /// Gives the lease up at once, so a standby can take over without waiting for a timeout.
    pub async fn release(self) {
        if let Held::Postgres { mut conn, key } = self {
            let _ = sqlx::query("SELECT pg_advisory_unlock($1)").bind(key).execute(&mut conn).await;
            let _ = conn.close().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One holder at a time; a release hands over at once, and so does the holder's death (its
    /// connection closing), without waiting for any expiry.
    #[tokio::test]
    async fn one_holder_at_a_time_and_a_dead_holder_hands_over() {
        let db = testkit::TestDb::create().await;
        let lease = Lease::Postgres { database_url: db.url().to_string(), key: PROJECTOR_LEASE_KEY };
        let other_key = Lease::Postgres { database_url: db.url().to_string(), key: PROJECTOR_LEASE_KEY + 1 };
        let cancel = CancellationToken::new();
        let retry = Duration::from_millis(50);
        let mut first = lease.acquire(retry, &cancel, "test").await.expect("a free lease is taken");
        assert!(first.check().await);
        let standby = tokio::time::timeout(Duration::from_millis(500), lease.acquire(retry, &cancel, "test")).await;
        assert!(standby.is_err(), "a second holder while the first lives");
        let unrelated = other_key.acquire(retry, &cancel, "test").await;
        assert!(unrelated.is_some(), "another key is another lease");

        first.release().await;
        let second = tokio::time::timeout(Duration::from_secs(2), lease.acquire(retry, &cancel, "test")).await;
        let second = second.expect("a released lease is taken within a retry").expect("not cancelled");
        // Dropped without a release: the connection closes, and the server frees the lock.
        drop(second);
        let third = tokio::time::timeout(Duration::from_secs(5), lease.acquire(retry, &cancel, "test")).await;
        assert!(matches!(third, Ok(Some(_))), "a dead holder's lease is taken");

        // Held by `third`: a cancelled standby gives up.
        cancel.cancel();
        assert!(lease.acquire(retry, &cancel, "test").await.is_none(), "cancelled while standing by");
    }
}
