//! The series the projector records (CONTRACT §11): lag in events and events applied, both
//! labelled by projection.
//!
//! Deliberately only names and recording helpers: installing an exporter is the binary's job.

/// Events stored on the stream that the projection has not applied yet.
pub const LAG_EVENTS: &str = "signalbus_projector_lag_events";
/// Events applied to the read models (a batch applied twice counts once).
pub const APPLIED_EVENTS_TOTAL: &str = "signalbus_projector_applied_events_total";

pub fn record_lag(projection: &'static str, lag: u64) {
    metrics::gauge!(LAG_EVENTS, "projection" => projection).set(lag as f64);
}

pub fn record_applied(projection: &'static str, events: u64) {
    metrics::counter!(APPLIED_EVENTS_TOTAL, "projection" => projection).increment(events);
}
