//! The sweeper's configuration and its defaults (CONTRACT §9: `--sweep-interval` 60 s; issue 5:
//! `--archive-after` 24 h, retention 30 days).
//!
//! Deliberately plain data: parsing flags and files is the binary's job.

use std::time::Duration;

use bus::catalog::TypeTable;

use crate::lease::Lease;

#[derive(Debug, Clone)]
pub struct SweeperConfig {
    /// Period of the backstop scan + retention run. The first run starts at once.
    pub sweep_interval: Duration,
    /// Terminal rows older than this move from `signal_queue` to `signal_history`.
    pub archive_after: Duration,
    /// History older than this is deleted.
    pub retention: Duration,
    /// Label table for `signalbus_signals_expired_total{signal_type}`.
    pub types: TypeTable,
    pub lease: Lease,
    /// How often a standby retries the lease, and a leader checks it still holds it.
    pub lease_retry: Duration,
    /// Extra look-ahead of the timers beyond two sweep intervals. Timers hold only signals
    /// due within `2 × sweep_interval + lookahead_slack`; each run loads the next window.
    pub lookahead_slack: Duration,
    /// Most signals one run loads into the timers from the read models.
    pub preload_limit: u32,
    /// Rows per `overdue` page.
    pub page: u32,
    /// Expiries in flight at once (scan and timers each). Each is one JetStream round trip
    /// (a conditional append), pipelined on the one connection, so more in flight keeps the
    /// server busy while the projector and the database share the cores.
    pub concurrency: usize,
    /// Rows per archive/purge batch (each its own short transaction).
    pub archive_batch: u32,
    /// This process's name in the status fact's `leader` field.
    pub node: String,
}

impl Default for SweeperConfig {
    fn default() -> Self {
        Self {
            sweep_interval: Duration::from_secs(60),
            archive_after: Duration::from_secs(24 * 3600),
            retention: Duration::from_secs(30 * 24 * 3600),
            types: TypeTable::default(),
            lease: Lease::Local,
            lease_retry: Duration::from_secs(5),
            lookahead_slack: Duration::from_secs(30),
            preload_limit: 100_000,
            page: 2_000,
            concurrency: 256,
            archive_batch: 500,
            node: default_node(),
        }
    }
}

impl SweeperConfig {
    /// How far ahead the timers reach: two sweep intervals plus slack, so a signal enters the
    /// timers at the latest one full run before it falls due.
    pub fn lookahead(&self) -> Duration {
        self.sweep_interval.saturating_mul(2).saturating_add(self.lookahead_slack)
    }
}

/// `<hostname>:<pid>`, good enough to tell sweepers apart in the status fact.
pub fn default_node() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "sweeper".to_string());
    format!("{host}:{}", std::process::id())
}
