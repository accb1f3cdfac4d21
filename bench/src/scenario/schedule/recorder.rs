//! `ReleaseLag`: the `metrics` recorder `schedule` installs in its process, keeping one series
//! — the in-process sweeper's `signalbus_sweeper_release_lag_seconds` (`deliver_at` → its
//! `signal.released` appended) — in an hdrhistogram of microseconds, so the sweeper's own view
//! of its lag is reported exactly, beside what the recipients saw.
//!
//! Deliberately every other series is a no-op and nothing is exported. Not the Prometheus
//! exporter: its summaries drop samples drained out of order (a trial run reported a mean above
//! the maximum), and its histograms have the binary's coarse buckets.

use std::sync::{Arc, Mutex};

use hdrhistogram::Histogram;
use metrics::{Counter, Gauge, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString, Unit};

use super::flow::lateness_histogram;

/// The series kept (`sweeper::metrics::SWEEPER_RELEASE_LAG_SECONDS`).
const RELEASE_LAG: &str = "signalbus_sweeper_release_lag_seconds";

/// A handle on the kept histogram.
#[derive(Clone)]
pub(super) struct ReleaseLag(Arc<Mutex<Histogram<u64>>>);

impl ReleaseLag {
    /// Installs the recorder; `None` when this process has one already.
    pub fn install() -> Option<ReleaseLag> {
        let lag = ReleaseLag(Arc::new(Mutex::new(lateness_histogram())));
        metrics::set_global_recorder(Keep(lag.clone())).ok()?;
        Some(lag)
    }

    /// The releases recorded so far, by their lag in µs.
    pub fn snapshot(&self) -> Histogram<u64> {
        self.0.lock().expect("release lag lock").clone()
    }

    /// How many releases were recorded so far.
    pub fn count(&self) -> u64 {
        self.0.lock().expect("release lag lock").len()
    }
}

impl HistogramFn for ReleaseLag {
    fn record(&self, seconds: f64) {
        let us = (seconds * 1e6).round().max(1.0) as u64;
        self.0.lock().expect("release lag lock").saturating_record(us);
    }
}

struct Keep(ReleaseLag);

impl Recorder for Keep {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, _: &Key, _: &Metadata<'_>) -> Counter {
        Counter::noop()
    }

    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> metrics::Histogram {
        if key.name() == RELEASE_LAG {
            metrics::Histogram::from_arc(Arc::new(self.0.clone()))
        } else {
            metrics::Histogram::noop()
        }
    }
}
