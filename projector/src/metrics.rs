//! The series the projector records (CONTRACT §11): lag in events and events applied, both
//! labelled by projection; and, beyond the contract, the events it dead-lettered and whether
//! this process holds the projector lease.
//!
//! Deliberately only names and recording helpers: installing an exporter is the binary's job.

use crate::batch::PROJECTION;
use crate::dead_letter::DeadLetter;

/// Events stored on the stream that the projection has not applied yet.
pub const LAG_EVENTS: &str = "signalbus_projector_lag_events";
/// Events applied to the read models (a batch applied twice counts once).
pub const APPLIED_EVENTS_TOTAL: &str = "signalbus_projector_applied_events_total";
/// Events the projection could not apply, recorded in `projection_dead_letters` and skipped.
pub const DEAD_LETTERS_TOTAL: &str = "signalbus_projector_dead_letters_total";

/// 1 while this process holds the projector lease (it is the one projecting), else 0.
pub const LEADER: &str = "signalbus_projector_leader";

pub fn set_leader(leading: bool) {
    metrics::gauge!(LEADER).set(if leading { 1.0 } else { 0.0 });
}

pub fn record_lag(projection: &'static str, lag: u64) {
    metrics::gauge!(LAG_EVENTS, "projection" => projection).set(lag as f64);
}

pub fn record_applied(projection: &'static str, events: u64) {
    metrics::counter!(APPLIED_EVENTS_TOTAL, "projection" => projection).increment(events);
}

/// A dead letter was committed (by the live projector or a rebuild): its log line and its
/// count together, so neither is ever emitted without the other.
pub(crate) fn dead_lettered(dead: &DeadLetter) {
    tracing::error!(
        projection = PROJECTION,
        seq = dead.seq,
        subject = %dead.subject,
        event_type = %dead.event_type,
        reason = %dead.reason,
        "event cannot be projected; recorded in projection_dead_letters and skipped"
    );
    metrics::counter!(DEAD_LETTERS_TOTAL, "projection" => PROJECTION).increment(1);
}

/// Gives this crate's series their `# HELP` text and registers each at 0 for the one
/// projection, so a scrape shows them before the first batch. Call once, after the recorder is
/// installed.
pub fn init() {
    metrics::describe_gauge!(LAG_EVENTS, "Events on the stream the projection has not applied yet.");
    metrics::describe_counter!(APPLIED_EVENTS_TOTAL, "Events applied to the read models.");
    metrics::describe_counter!(DEAD_LETTERS_TOTAL, "Events the projection could not apply, recorded and skipped.");
    metrics::describe_gauge!(LEADER, "1 while this process holds the projector lease and projects; 0 on a standby.");
    metrics::gauge!(LEADER).set(0.0);
    metrics::gauge!(LAG_EVENTS, "projection" => PROJECTION).increment(0.0);
    metrics::counter!(APPLIED_EVENTS_TOTAL, "projection" => PROJECTION).increment(0);
    metrics::counter!(DEAD_LETTERS_TOTAL, "projection" => PROJECTION).increment(0);
}
