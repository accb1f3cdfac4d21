//! Every metric the sweeper records, in one place, with the names of CONTRACT §11.
//!
//! Deliberately does not install an exporter or choose histogram buckets: the binary does, for
//! every `*_seconds` histogram at once (`src/telemetry.rs`).

use std::time::Duration;

use bus::catalog::TypeTable;

/// `signalbus_signals_expired_total{signal_type,reason}` (counter): expiries this process
/// appended, all `reason="ttl"` (the gateway records `forced` and `removed` in the same series).
pub const SIGNALS_EXPIRED_TOTAL: &str = "signalbus_signals_expired_total";
/// The `reason` of every expiry the sweeper appends (`bus::event::ExpiryReason::Ttl`).
const TTL: &str = bus::event::ExpiryReason::Ttl.as_str();
/// `signalbus_sweeper_runs_total` (counter): completed backstop runs (scan + retention).
pub const SWEEPER_RUNS_TOTAL: &str = "signalbus_sweeper_runs_total";
/// `signalbus_sweeper_last_run_timestamp_seconds` (gauge): unix time the last run finished.
pub const SWEEPER_LAST_RUN_TIMESTAMP_SECONDS: &str = "signalbus_sweeper_last_run_timestamp_seconds";
/// `signalbus_sweeper_expiry_lag_seconds` (histogram): how long after `expires_at` the
/// `signal.expired` event was appended. The on-time target is p99 < 1 s.
pub const SWEEPER_EXPIRY_LAG_SECONDS: &str = "signalbus_sweeper_expiry_lag_seconds";
/// `signalbus_sweeper_release_lag_seconds` (histogram): how long after `deliver_at` a scheduled
/// signal's `signal.released` was appended (CONTRACT §16; the on-time target is p99 < 1 s). Its
/// `_count` is the releases this process appended.
pub const SWEEPER_RELEASE_LAG_SECONDS: &str = "signalbus_sweeper_release_lag_seconds";
/// `signalbus_sweeper_leader` (gauge): 1 while this process holds the lease, else 0.
pub const SWEEPER_LEADER: &str = "signalbus_sweeper_leader";

/// One expiry this process appended. `signal_type` folds into `other` outside the table, so a
/// sender cannot blow up the label set.
pub fn record_expired(types: &TypeTable, signal_type: &str, lag: Duration) {
    let label = types.metric_label(signal_type).to_string();
    metrics::counter!(SIGNALS_EXPIRED_TOTAL, "signal_type" => label, "reason" => TTL).increment(1);
    metrics::histogram!(SWEEPER_EXPIRY_LAG_SECONDS).record(lag.as_secs_f64());
}

/// One release this process appended, `lag` after its `deliver_at`.
pub fn record_released(lag: Duration) {
    metrics::histogram!(SWEEPER_RELEASE_LAG_SECONDS).record(lag.as_secs_f64());
}

/// `signalbus_directives_finished_total{directive_type,outcome}` and
/// `signalbus_directive_duration_seconds{…}`: the gateway records the other outcomes, the
/// sweeper `expired` (CONTRACT §14).
pub const DIRECTIVES_FINISHED_TOTAL: &str = "signalbus_directives_finished_total";
pub const DIRECTIVE_DURATION_SECONDS: &str = "signalbus_directive_duration_seconds";

/// One directive this process expired, `seconds` after its creation.
pub fn record_directive_expired(directive_type: &str, seconds: f64) {
    let label = bus::metrics::directive_type_label(directive_type);
    metrics::counter!(DIRECTIVES_FINISHED_TOTAL, "directive_type" => label.clone(), "outcome" => "expired")
        .increment(1);
    metrics::histogram!(DIRECTIVE_DURATION_SECONDS, "directive_type" => label, "outcome" => "expired").record(seconds);
}

/// One finished backstop run.
pub fn record_run(finished_unix_seconds: f64) {
    metrics::counter!(SWEEPER_RUNS_TOTAL).increment(1);
    metrics::gauge!(SWEEPER_LAST_RUN_TIMESTAMP_SECONDS).set(finished_unix_seconds);
}

pub fn set_leader(leading: bool) {
    metrics::gauge!(SWEEPER_LEADER).set(if leading { 1.0 } else { 0.0 });
}

/// Gives this crate's series their `# HELP` text and registers them at 0 — expiries per type
/// of the table (and `other`), runs, the lease gauge — so a standby sweeper's scrape shows them
/// too and the leader's first expiry is a visible increase. The last-run timestamp is left
/// unset until a run finishes: 0 would claim a run in 1970. Call once, after the recorder is
/// installed.
pub fn init(types: &TypeTable) {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_counter!(
        SIGNALS_EXPIRED_TOTAL,
        "Signals expired, by type and reason: ttl (the sweeper), removed (a gateway, when their recipient is removed), forced (a gateway, an operator's force-expire)."
    );
    describe_counter!(SWEEPER_RUNS_TOTAL, "Completed sweeper backstop runs (overdue scan and retention).");
    describe_gauge!(SWEEPER_LAST_RUN_TIMESTAMP_SECONDS, Unit::Seconds, "Unix time the last sweeper run finished.");
    describe_histogram!(SWEEPER_EXPIRY_LAG_SECONDS, Unit::Seconds, "How long after expires_at an expiry was appended.");
    describe_gauge!(SWEEPER_LEADER, "1 while this process holds the sweeper lease, else 0.");
    describe_histogram!(
        SWEEPER_RELEASE_LAG_SECONDS,
        Unit::Seconds,
        "How long after deliver_at a scheduled signal's release was appended."
    );
    let _ = metrics::histogram!(SWEEPER_RELEASE_LAG_SECONDS);
    for t in types.types.keys().map(String::as_str).chain(["other"]) {
        metrics::counter!(SIGNALS_EXPIRED_TOTAL, "signal_type" => t.to_string(), "reason" => TTL).increment(0);
    }
    metrics::counter!(SWEEPER_RUNS_TOTAL).increment(0);
    let _ = metrics::histogram!(SWEEPER_EXPIRY_LAG_SECONDS);
    set_leader(false);
    describe_counter!(DIRECTIVES_FINISHED_TOTAL, "Directives ended, by type and outcome.");
    describe_histogram!(
        DIRECTIVE_DURATION_SECONDS,
        Unit::Seconds,
        "Time from a directive's creation to its end, by type and outcome."
    );
    metrics::counter!(DIRECTIVES_FINISHED_TOTAL, "directive_type" => "other", "outcome" => "expired").increment(0);
    let _ = metrics::histogram!(DIRECTIVE_DURATION_SECONDS, "directive_type" => "other", "outcome" => "expired");
}
