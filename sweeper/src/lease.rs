//! Leadership among several sweepers: exactly one expires and archives, the others stand by.
//!
//! Distributed mode holds the PostgreSQL session advisory lock `ADVISORY_LOCK_KEY` through
//! `projector::lease` (the same mechanism the projectors use, under another key): a crashed
//! leader is replaced after one standby retry period, with no lease expiry to tune and no clock
//! to trust. Embedded mode (`Lease::Local`) has one process by construction and always leads.
//!
//! Deliberately not a correctness mechanism: two leaders at once (e.g. during a network
//! partition) cannot double-expire — the per-signal compare-and-set prevents it — they only
//! waste work. So we check the lease every `retry` period rather than fencing every append.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

pub use projector::lease::Held;

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

impl Lease {
    /// Waits until we hold the lease, retrying every `retry`. `None` when `cancel` fired first.
    pub async fn acquire(&self, retry: Duration, cancel: &CancellationToken) -> Option<Held> {
        let lease = match self {
            Lease::Local => projector::lease::Lease::Local,
            Lease::Postgres { database_url } => {
                projector::lease::Lease::Postgres { database_url: database_url.clone(), key: ADVISORY_LOCK_KEY }
            }
        };
        lease.acquire(retry, cancel, "sweeper").await
    }
}
