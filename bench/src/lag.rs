//! Projector lag, in time: a sampler that every 5 ms reads the stream's `last_seq()` and the
//! read models' `applied_seq()` and records how long the oldest event the projector has not
//! applied yet has been on the stream.
//!
//! The stream does not say when an event was appended, so the sampler keeps a small ring of
//! (seq, first seen) observations of `last_seq`: the lag of a sample is now − the time the
//! stream was first seen at a sequence above `applied_seq` (0 when nothing is unapplied). An
//! event is seen at most one sampling period (plus a `last_seq` round trip) after it was
//! appended, so each sample can understate the lag by up to ~5 ms; it can overstate it only by
//! the `applied_seq` read's own round trip (the projector may commit while it is in flight).
//!
//! Deliberately in-process only (it needs the log and the read models) and only inside the
//! measured window; both reads are cheap queries (a JetStream stream-info request and the
//! checkpoint row), ~200 of each per second.

use std::collections::VecDeque;
use std::time::Duration;

use bus::log::SharedLog;
use hdrhistogram::Histogram;
use projector::{Queries, ReadModels};
use serde_json::{json, Value};
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};

use crate::report::latency_histogram;

/// How often the sampler reads both positions.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(5);

/// What the sampler measured.
#[derive(Debug)]
pub struct LagResult {
    /// Lag per sample, in microseconds.
    pub lag: Histogram<u64>,
    /// Samples where a read failed (not recorded).
    pub errors: u64,
}

impl LagResult {
    /// `{"samples","p50_ms","p99_ms","max_ms"}` (plus `"errors"` when a read failed).
    pub fn json(&self) -> Value {
        let ms = |us: u64| (us as f64).round() / 1000.0;
        let mut v = json!({
            "samples": self.lag.len(),
            "p50_ms": ms(self.lag.value_at_quantile(0.50)),
            "p99_ms": ms(self.lag.value_at_quantile(0.99)),
            "max_ms": ms(self.lag.max()),
        });
        if self.errors > 0 {
            v["errors"] = json!(self.errors);
        }
        v
    }
}

/// (seq, when `last_seq` was first seen at or above it), oldest first, strictly increasing.
#[derive(Debug, Default)]
struct Ring {
    seen: VecDeque<(u64, Instant)>,
}

impl Ring {
    /// Notes the stream's last sequence as read at `at`.
    fn observe(&mut self, last: u64, at: Instant) {
        if self.seen.back().is_none_or(|&(s, _)| last > s) {
            self.seen.push_back((last, at));
        }
    }

    /// The lag at `now` with everything up to `applied` applied: now − when the stream was
    /// first seen past `applied`. Drops the observations that are now fully applied.
    fn lag(&mut self, applied: u64, now: Instant) -> Duration {
        while self.seen.front().is_some_and(|&(s, _)| s <= applied) {
            self.seen.pop_front();
        }
        self.seen.front().map_or(Duration::ZERO, |&(_, at)| now.saturating_duration_since(at))
    }
}

/// Samples from `start` until `end`, then returns the histogram.
pub fn spawn(log: SharedLog, models: ReadModels, start: Instant, end: Instant) -> JoinHandle<LagResult> {
    tokio::spawn(async move {
        let mut ring = Ring::default();
        let mut result = LagResult { lag: latency_histogram(), errors: 0 };
        let mut tick = tokio::time::interval_at(start, SAMPLE_EVERY);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if Instant::now() >= end {
                break;
            }
            // The stream first, then the models: an event appended in between shows up as
            // unapplied next time, never as applied before it was seen.
            let last = match log.last_seq().await {
                Ok(s) => s,
                Err(_) => {
                    result.errors += 1;
                    continue;
                }
            };
            ring.observe(last, Instant::now());
            let applied = match models.applied_seq().await {
                Ok(s) => s,
                Err(_) => {
                    result.errors += 1;
                    continue;
                }
            };
            let lag = ring.lag(applied, Instant::now());
            let _ = result.lag.record(lag.as_micros() as u64);
        }
        result
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_is_the_age_of_the_first_observation_past_applied() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut ring = Ring::default();
        ring.observe(10, t0);
        ring.observe(10, t0 + ms(5)); // no new event: keeps the first sighting
        ring.observe(20, t0 + ms(10));
        ring.observe(30, t0 + ms(15));
        // Nothing of 1..=10 applied yet: waiting since seq 10 was first seen.
        assert_eq!(ring.lag(0, t0 + ms(20)), ms(20));
        // 1..=12 applied: 13 arrived by the sighting of 20.
        assert_eq!(ring.lag(12, t0 + ms(20)), ms(10));
        assert_eq!(ring.lag(20, t0 + ms(20)), ms(5));
        // Caught up.
        assert_eq!(ring.lag(30, t0 + ms(20)), Duration::ZERO);
        ring.observe(31, t0 + ms(25));
        assert_eq!(ring.lag(30, t0 + ms(27)), ms(2));
    }
}
