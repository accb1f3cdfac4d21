//! What every `bench memory` phase measures with: the bus's RSS now, a sampler of its peak, and
//! the shape of one phase's result.
//!
//! Deliberately runs no workload (the phases in `mod.rs` and `announced.rs` do).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use serde_json::Value;

use crate::args::Args;
use crate::report::rss_kib;

/// How long a phase's aftermath is given before its "after" RSS is read.
pub(super) const SETTLE: Duration = Duration::from_secs(3);

/// One phase's measurements.
pub(super) struct Phase {
    pub before: u64,
    pub peak: u64,
    pub after: u64,
    pub detail: Value,
    pub summary: String,
}

pub(super) fn rss(args: &Args) -> anyhow::Result<u64> {
    rss_kib(args.bus_pid).context("cannot read VmRSS")
}

/// Samples RSS every 20 ms until dropped; `peak` is the largest sample so far.
pub(super) struct Sampler {
    peak: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Sampler {
    pub fn start(pid: Option<u32>) -> Self {
        let peak = Arc::new(AtomicU64::new(0));
        let p = peak.clone();
        let task = tokio::spawn(async move {
            loop {
                if let Some(kib) = rss_kib(pid) {
                    p.fetch_max(kib, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
        Sampler { peak, task }
    }

    pub fn peak(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.task.abort();
    }
}
