//! `Kept`: the `metrics` recorder the bench installs in its own process, where an in-process
//! bus runs, keeping a few of the bus's histograms whole in hdrhistograms of microseconds:
//! the sweeper's release lag (`schedule`), and the append and time-to-delivery of every send
//! (`throughput` and `latency`: their per-stage breakdown, `drive.rs`). Every label set of a
//! series is kept in one histogram.
//!
//! Deliberately every other series is a no-op and nothing is exported. Not the Prometheus
//! exporter: its summaries drop samples drained out of order (a trial run reported a mean above
//! the maximum), and its histograms have the binary's coarse buckets.

use std::sync::{Arc, Mutex, OnceLock};

use hdrhistogram::Histogram;
use metrics::{Counter, Gauge, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString, Unit};

/// `sweeper::metrics::SWEEPER_RELEASE_LAG_SECONDS`: `deliver_at` → its `signal.released` appended.
const RELEASE_LAG: &str = "signalbus_sweeper_release_lag_seconds";
/// `bus::metrics::EVENT_APPEND_SECONDS`: one append, compare-and-set and outcome resolution included.
const APPEND: &str = "signalbus_event_append_seconds";
/// The gateway's `signalbus_time_to_delivery_seconds`: a signal's `created_at` (taken before
/// its append) → its push handed to the recipient's session queue.
const TIME_TO_DELIVERY: &str = "signalbus_time_to_delivery_seconds";

/// One kept series.
#[derive(Clone)]
pub struct Series(Arc<Mutex<Histogram<u64>>>);

impl Series {
    fn new() -> Series {
        // Up to an hour: a starved release can be tens of seconds late.
        Series(Arc::new(Mutex::new(Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds"))))
    }

    /// What was recorded so far, in µs.
    pub fn snapshot(&self) -> Histogram<u64> {
        self.0.lock().expect("kept series lock").clone()
    }

    /// How many samples were recorded so far.
    pub fn count(&self) -> u64 {
        self.0.lock().expect("kept series lock").len()
    }

    /// Forgets what was recorded (the start of a measured window).
    pub fn reset(&self) {
        self.0.lock().expect("kept series lock").reset();
    }
}

impl HistogramFn for Series {
    fn record(&self, seconds: f64) {
        let us = (seconds * 1e6).round().max(1.0) as u64;
        self.0.lock().expect("kept series lock").saturating_record(us);
    }
}

/// The kept series of this process.
#[derive(Clone)]
pub struct Kept {
    pub release_lag: Series,
    pub append: Series,
    pub time_to_delivery: Series,
}

/// The process's recorder, installed by the first call; `None` when another recorder was
/// installed first.
pub fn kept() -> Option<&'static Kept> {
    static KEPT: OnceLock<Option<Kept>> = OnceLock::new();
    KEPT.get_or_init(|| {
        let kept = Kept { release_lag: Series::new(), append: Series::new(), time_to_delivery: Series::new() };
        metrics::set_global_recorder(Keep(kept.clone())).ok()?;
        Some(kept)
    })
    .as_ref()
}

struct Keep(Kept);

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
        let series = match key.name() {
            RELEASE_LAG => &self.0.release_lag,
            APPEND => &self.0.append,
            TIME_TO_DELIVERY => &self.0.time_to_delivery,
            _ => return metrics::Histogram::noop(),
        };
        metrics::Histogram::from_arc(Arc::new(series.clone()))
    }
}
