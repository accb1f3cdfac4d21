//! `Kept`: the `metrics` recorder the bench installs in its own process, where an in-process
//! bus runs, keeping a few of the bus's histograms whole in hdrhistograms of microseconds:
//! the sweeper's release lag (`schedule`), and the append and time-to-delivery of every send
//! and its wait for back-pressure, paced and held apart (`throughput` and `latency`: their
//! per-stage breakdown, `drive.rs`). Every other label set of a series is kept in one histogram.
//!
//! Every series, the kept ones too, is also recorded by a Prometheus recorder built as the
//! binary builds its own (`bus::metrics::LATENCY_BUCKETS`), drained every 5 s as a scrape
//! would: the bus pays in the bench what it pays in `signalbus serve` per counter and histogram
//! (a no-op recorder made every series free). Installed when the bench's backends start, before
//! any traffic, as the binary installs its recorder before it serves.
//!
//! Deliberately nothing is exported. The kept numbers are not read off the Prometheus
//! recorder: its summaries drop samples drained out of order (a trial run reported a mean above
//! the maximum), and its histograms have the binary's coarse buckets.

use std::sync::{Arc, Mutex, OnceLock};

use hdrhistogram::Histogram;
use metrics::{Counter, Gauge, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString, Unit};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusRecorder};

/// `sweeper::metrics::SWEEPER_RELEASE_LAG_SECONDS`: `deliver_at` → its `signal.released` appended.
const RELEASE_LAG: &str = "signalbus_sweeper_release_lag_seconds";
/// `bus::metrics::EVENT_APPEND_SECONDS`: one append, compare-and-set and outcome resolution included.
const APPEND: &str = "signalbus_event_append_seconds";
/// The gateway's `signalbus_backpressure_wait_seconds`: a send's wait at a paced or held gate.
const BACKPRESSURE_WAIT: &str = "signalbus_backpressure_wait_seconds";
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
    /// Sends that met a paced gate (`gate="paced"`), and a held one.
    pub paced_wait: Series,
    pub held_wait: Series,
}

/// The process's recorder, installed by the first call; `None` when another recorder was
/// installed first.
pub fn kept() -> Option<&'static Kept> {
    static KEPT: OnceLock<Option<Kept>> = OnceLock::new();
    KEPT.get_or_init(|| {
        let kept = Kept {
            release_lag: Series::new(),
            append: Series::new(),
            time_to_delivery: Series::new(),
            paced_wait: Series::new(),
            held_wait: Series::new(),
        };
        let prometheus = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), bus::metrics::LATENCY_BUCKETS)
            .ok()?
            .build_recorder();
        let handle = prometheus.handle();
        metrics::set_global_recorder(Keep { kept: kept.clone(), prometheus }).ok()?;
        // What a scrape does to the histograms' pending samples, so they do not pile up.
        std::thread::Builder::new()
            .name("bench-metrics".into())
            .spawn(move || loop {
                std::thread::sleep(std::time::Duration::from_secs(5));
                handle.run_upkeep();
            })
            .ok()?;
        Some(kept)
    })
    .as_ref()
}

struct Keep {
    kept: Kept,
    prometheus: PrometheusRecorder,
}

/// A kept series that the Prometheus recorder records too.
struct Both(Series, metrics::Histogram);

impl HistogramFn for Both {
    fn record(&self, seconds: f64) {
        self.0.record(seconds);
        self.1.record(seconds);
    }
}

impl Recorder for Keep {
    fn describe_counter(&self, key: KeyName, unit: Option<Unit>, text: SharedString) {
        self.prometheus.describe_counter(key, unit, text)
    }
    fn describe_gauge(&self, key: KeyName, unit: Option<Unit>, text: SharedString) {
        self.prometheus.describe_gauge(key, unit, text)
    }
    fn describe_histogram(&self, key: KeyName, unit: Option<Unit>, text: SharedString) {
        self.prometheus.describe_histogram(key, unit, text)
    }

    fn register_counter(&self, key: &Key, metadata: &Metadata<'_>) -> Counter {
        self.prometheus.register_counter(key, metadata)
    }

    fn register_gauge(&self, key: &Key, metadata: &Metadata<'_>) -> Gauge {
        self.prometheus.register_gauge(key, metadata)
    }

    fn register_histogram(&self, key: &Key, metadata: &Metadata<'_>) -> metrics::Histogram {
        let forwarded = self.prometheus.register_histogram(key, metadata);
        let series = match key.name() {
            RELEASE_LAG => &self.kept.release_lag,
            APPEND => &self.kept.append,
            TIME_TO_DELIVERY => &self.kept.time_to_delivery,
            BACKPRESSURE_WAIT => match key.labels().find(|l| l.key() == "gate").map(|l| l.value()) {
                Some("paced") => &self.kept.paced_wait,
                Some("held") => &self.kept.held_wait,
                _ => return forwarded,
            },
            _ => return forwarded,
        };
        metrics::Histogram::from_arc(Arc::new(Both(series.clone(), forwarded)))
    }
}
