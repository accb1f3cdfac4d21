//! Every metric the bus crate records, in one place.
//!
//! Deliberately does not install an exporter: the binary does.

use std::time::Duration;

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
