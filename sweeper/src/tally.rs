//! What the sweeper did since its last status fact: expiries and the worst lag, shared by the
//! timer path and the backstop scan (both run at once, in different tasks).
//!
//! Deliberately only counts: recording the fact is `status.rs`'s job, metrics are `metrics.rs`'s.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::expire::Outcome;

#[derive(Debug, Default)]
pub struct Tally {
    expired: AtomicU64,
    lost: AtomicU64,
    failed: AtomicU64,
    lag_max_micros: AtomicU64,
    /// Highest stream sequence we appended: what the read models must reach to show our work.
    max_seq: AtomicU64,
}

/// A reading of a `Tally`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Counts {
    pub expired: u64,
    /// Lost races: the signal was delivered, recalled or expired by someone else first.
    pub lost: u64,
    pub failed: u64,
    pub lag_max: Duration,
    pub max_seq: u64,
}

impl Tally {
    pub fn record(&self, outcome: &Result<Outcome, crate::error::Error>) {
        match outcome {
            Ok(Outcome::Expired { seq, lag, .. }) => {
                self.expired.fetch_add(1, Ordering::Relaxed);
                self.lag_max_micros.fetch_max(lag.as_micros() as u64, Ordering::Relaxed);
                self.max_seq.fetch_max(*seq, Ordering::Relaxed);
            }
            Ok(Outcome::AlreadyTerminal | Outcome::NotFound) => {
                self.lost.fetch_add(1, Ordering::Relaxed);
            }
            Ok(Outcome::NotYetDue) => {}
            Err(_) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    pub fn read(&self) -> Counts {
        Counts {
            expired: self.expired.load(Ordering::Relaxed),
            lost: self.lost.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            lag_max: Duration::from_micros(self.lag_max_micros.load(Ordering::Relaxed)),
            max_seq: self.max_seq.load(Ordering::Relaxed),
        }
    }

    /// Reads and resets the counters (the sequence high-water mark is kept: it only grows).
    pub fn take(&self) -> Counts {
        Counts {
            expired: self.expired.swap(0, Ordering::Relaxed),
            lost: self.lost.swap(0, Ordering::Relaxed),
            failed: self.failed.swap(0, Ordering::Relaxed),
            lag_max: Duration::from_micros(self.lag_max_micros.swap(0, Ordering::Relaxed)),
            max_seq: self.max_seq.load(Ordering::Relaxed),
        }
    }
}
