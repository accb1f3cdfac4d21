//! Every metric the bus crate records, in one place.
//!
//! Deliberately does not install an exporter: the binary does.

use std::time::Duration;

/// Latency buckets (seconds) for every histogram of every crate (append, delivery, expiry
/// lag), as the binary's Prometheus recorder exposes them: histograms, not summaries, so
/// Grafana can aggregate across processes.
pub const LATENCY_BUCKETS: &[f64] =
    &[0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 3600.0];

/// `signalbus_event_append_seconds` (histogram): how long one append to the log took.
pub const EVENT_APPEND_SECONDS: &str = "signalbus_event_append_seconds";

pub fn record_append(elapsed: Duration) {
    metrics::histogram!(EVENT_APPEND_SECONDS).record(elapsed.as_secs_f64());
}

/// Gives this crate's series their `# HELP` text and registers them (the histogram with no
/// observation), so a scrape shows them before the first append. Call once, after the
/// recorder is installed.
pub fn init() {
    metrics::describe_histogram!(
        EVENT_APPEND_SECONDS,
        metrics::Unit::Seconds,
        "Time one append to the event stream took, compare-and-set included."
    );
    let _ = metrics::histogram!(EVENT_APPEND_SECONDS);
}

/// Distinct directive types one process labels series with; later ones are `other`.
pub const MAX_DIRECTIVE_TYPE_LABELS: usize = 100;

/// The `directive_type` label of `directive_type`: the type itself while fewer than
/// `MAX_DIRECTIVE_TYPE_LABELS` distinct types have been labelled by this process, else `other`
/// — directive types are free text, and a label set must stay bounded.
pub fn directive_type_label(directive_type: &str) -> String {
    use std::collections::HashSet;
    use std::sync::{Mutex, OnceLock};
    static SEEN: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    let mut seen = SEEN.get_or_init(Default::default).lock().expect("label set lock");
    if seen.contains(directive_type) {
        return directive_type.to_string();
    }
    if seen.len() < MAX_DIRECTIVE_TYPE_LABELS && !directive_type.is_empty() {
        seen.insert(directive_type.to_string());
        return directive_type.to_string();
    }
    "other".to_string()
}
