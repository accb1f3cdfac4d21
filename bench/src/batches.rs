//! Per-batch timings of the live projector, read off its own `batch applied` debug event
//! (`projector::runner`: events and elapsed µs per batch) by a tracing layer, so the bench
//! times exactly the batches `signalbus projector` applies without instrumenting the projector.
//!
//! Deliberately only collects and summarises: the scenarios decide which window to report.

use std::sync::Mutex;

use tracing::field::{Field, Visit};
use tracing::Level;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::{Context, Layer};

use crate::report::round;

/// (events, elapsed µs) of every batch applied since the last `take`.
static SAMPLES: Mutex<Vec<(u64, u64)>> = Mutex::new(Vec::new());

/// The layer, filtered to the projector runner's debug events.
pub fn layer<S>() -> impl Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    Collect.with_filter(Targets::new().with_target("projector::runner", Level::DEBUG))
}

/// The samples collected so far, leaving none behind.
pub fn take() -> Vec<(u64, u64)> {
    std::mem::take(&mut *SAMPLES.lock().unwrap_or_else(|e| e.into_inner()))
}

struct Collect;

#[derive(Default)]
struct Fields {
    batch: bool,
    events: Option<u64>,
    elapsed_us: Option<u64>,
}

impl Visit for Fields {
    fn record_u64(&mut self, field: &Field, value: u64) {
        match field.name() {
            "events" => self.events = Some(value),
            "elapsed_us" => self.elapsed_us = Some(value),
            _ => {}
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.batch = format!("{value:?}") == "batch applied";
        }
    }
}

impl<S: tracing::Subscriber> Layer<S> for Collect {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        let mut f = Fields::default();
        event.record(&mut f);
        if let (true, Some(events), Some(us)) = (f.batch, f.events, f.elapsed_us) {
            SAMPLES.lock().unwrap_or_else(|e| e.into_inner()).push((events, us));
        }
    }
}

/// Percentiles of a run's batches.
pub struct BatchStats {
    pub count: usize,
    pub mean_events: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub us_per_event: f64,
}

impl BatchStats {
    pub fn of(samples: &[(u64, u64)]) -> BatchStats {
        let mut us: Vec<u64> = samples.iter().map(|s| s.1).collect();
        us.sort_unstable();
        let at = |q: f64| -> f64 {
            if us.is_empty() {
                return 0.0;
            }
            let i = ((us.len() as f64 * q).ceil() as usize).clamp(1, us.len()) - 1;
            round(us[i] as f64 / 1_000.0, 2)
        };
        let events: u64 = samples.iter().map(|s| s.0).sum();
        let total_us: u64 = us.iter().sum();
        BatchStats {
            count: samples.len(),
            mean_events: events as f64 / samples.len().max(1) as f64,
            p50_ms: at(0.5),
            p99_ms: at(0.99),
            max_ms: at(1.0),
            us_per_event: total_us as f64 / events.max(1) as f64,
        }
    }
}
