//! Projector lag, in time: how long the oldest event the projector has not applied yet has been
//! on the stream, sampled every 5 ms.
//!
//! The stream does not say when an event was appended, so the sampler follows this process's
//! shared tail (which hands it each event when its append is answered, with no read of its own)
//! and keeps a small ring of (seq, first seen); the projector's commits come from its in-process
//! notifications. The lag of a sample is now − when the oldest unapplied event was first seen (0
//! when nothing is unapplied). It can understate only by the tail's hand-over, microseconds.
//!
//! Deliberately in-process only (it needs the log's tail and the read models' notifications),
//! and without a request of its own inside the measured window: it polled the stream's info and
//! the checkpoint row ~200 times a second each, and that load on a 2-core machine was visible in
//! the very latencies measured beside it (docs/performance.md).

use std::collections::VecDeque;
use std::time::Duration;

use bus::log::SharedLog;
use futures::StreamExt;
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

/// (seq, when the stream was first seen holding it), oldest first, strictly increasing.
#[derive(Debug, Default)]
struct Ring {
    seen: VecDeque<(u64, Instant)>,
}

impl Ring {
    /// Notes that the stream holds `last` since `at`.
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
        // Two reads before the window, none inside it: where the stream ends, and the checkpoint
        // in case this process's projector has not committed since it started.
        let (Ok(last), Ok(checkpoint)) = (log.last_seq().await, models.applied_seq().await) else {
            result.errors += 1;
            return result;
        };
        let mut events = match log.tail(last + 1).await {
            Ok(events) => events,
            Err(_) => {
                result.errors += 1;
                return result;
            }
        };
        let commits = models.applied_changes();
        let mut tick = tokio::time::interval_at(start, SAMPLE_EVERY);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                // Events first: one that came before the tick is on the stream by the sample.
                biased;
                event = events.next() => match event {
                    Some(Ok(stored)) => {
                        ring.observe(stored.seq, Instant::now());
                        // Before the window nothing samples: keep the ring as short as the lag.
                        if ring.seen.len() > 4096 {
                            ring.lag((*commits.borrow()).max(checkpoint), Instant::now());
                        }
                    }
                    Some(Err(_)) => result.errors += 1,
                    None => break,
                },
                _ = tick.tick() => {
                    let now = Instant::now();
                    if now >= end {
                        break;
                    }
                    let applied = (*commits.borrow()).max(checkpoint);
                    let _ = result.lag.record(ring.lag(applied, now).as_micros() as u64);
                }
            }
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
