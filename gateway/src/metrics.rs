//! The CONTRACT §11 series the gateway records, with exact names and labels. Signal types
//! outside the configured table are folded into `other` so label sets stay bounded.
//!
//! Deliberately installs no recorder and no exporter: the binary does, and without one these
//! calls are no-ops (which keeps tests free of global state). The per-signal series keep their
//! handles (`handles.rs`), so the recorder is installed before the first send.

use std::sync::LazyLock;

use bus::catalog::{DeliveryClass, TypeTable};
use bus::event::{DeliveredVia, ExpiryReason, PublishPath, RecipientState, SessionKind, Surface};
use bus::signal::RecallOutcome;
use chrono::{DateTime, Utc};
use metrics::{Counter, Histogram};

mod handles;

/// `signalbus_signals_sent_total` by type, then class, recipient state and publish path.
static SENT: LazyLock<handles::ByType<(DeliveryClass, RecipientState, PublishPath), Counter>> =
    LazyLock::new(Default::default);
/// `signalbus_signals_delivered_total` and `signalbus_time_to_delivery_seconds` by type, then path.
static DELIVERED: LazyLock<handles::ByType<DeliveredVia, (Counter, Histogram)>> = LazyLock::new(Default::default);

pub const SIGNALS_SENT_TOTAL: &str = "signalbus_signals_sent_total";
pub const SIGNALS_BOUNCED_TOTAL: &str = "signalbus_signals_bounced_total";
/// Accepted sends scheduled for later (CONTRACT §16); each also counts in `SIGNALS_SENT_TOTAL`
/// with `publish_path="scheduled"`.
pub const SIGNALS_SCHEDULED_TOTAL: &str = "signalbus_signals_scheduled_total";
pub const UNKNOWN_RECIPIENT_REJECTIONS_TOTAL: &str = "signalbus_unknown_recipient_rejections_total";
pub const SIGNALS_DELIVERED_TOTAL: &str = "signalbus_signals_delivered_total";
/// Also recorded by the sweeper (the same series, `reason="ttl"`): the gateway expires the
/// pending signals of a removed agent (`removed`) and an operator's force-expire (`forced`).
pub const SIGNALS_EXPIRED_TOTAL: &str = "signalbus_signals_expired_total";

/// The `reason` label values the gateway records on `signalbus_signals_expired_total`.
pub const EXPIRY_REASONS: [ExpiryReason; 2] = [ExpiryReason::Forced, ExpiryReason::Removed];
pub const SIGNAL_RECALLS_TOTAL: &str = "signalbus_signal_recalls_total";
pub const TIME_TO_DELIVERY_SECONDS: &str = "signalbus_time_to_delivery_seconds";
pub const SESSIONS: &str = "signalbus_sessions";
pub const DISCONNECTS_TOTAL: &str = "signalbus_disconnects_total";
/// Sends refused by the per-identity send rate (beyond CONTRACT §11; no labels, so bounded).
pub const SENDS_RATE_LIMITED_TOTAL: &str = "signalbus_sends_rate_limited_total";

/// Plugin facts refused by the per-identity fact rate (no labels, so bounded).
pub const FACTS_RATE_LIMITED_TOTAL: &str = "signalbus_facts_rate_limited_total";

/// Refused authentications and authorizations (CONTRACT §17), by reason.
pub const AUTH_FAILURES_TOTAL: &str = "signalbus_auth_failures_total";

/// Why a caller was refused: `bad_token`, `expired`, `revoked` (401) or `scope`, `tenant` (403).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthFailure {
    BadToken,
    Expired,
    Revoked,
    Scope,
    Tenant,
}

impl AuthFailure {
    pub const ALL: [AuthFailure; 5] =
        [AuthFailure::BadToken, AuthFailure::Expired, AuthFailure::Revoked, AuthFailure::Scope, AuthFailure::Tenant];

    pub fn as_str(self) -> &'static str {
        match self {
            AuthFailure::BadToken => "bad_token",
            AuthFailure::Expired => "expired",
            AuthFailure::Revoked => "revoked",
            AuthFailure::Scope => "scope",
            AuthFailure::Tenant => "tenant",
        }
    }
}

pub fn auth_failure(reason: AuthFailure) {
    metrics::counter!(AUTH_FAILURES_TOTAL, "reason" => reason.as_str()).increment(1);
}

/// The share of `max_projector_lag` back-pressure paces against (`backpressure::target`): 1
/// while the lag's peaks stay within the bound, down to 0.5 while they pass it (beyond CONTRACT
/// §11; no labels). Set once per projector commit the watch measures, never per signal.
pub const BACKPRESSURE_PACING_SHARE: &str = "signalbus_backpressure_pacing_share";

pub fn pacing_share(share: f64) {
    metrics::gauge!(BACKPRESSURE_PACING_SHARE).set(share);
}

/// How long a send waited at the back-pressure gate before its append, by the gate it met
/// (`paced`, `held`; `backpressure::Met`). Only sends that met a closed gate are recorded: at
/// rest nothing is, and `_count` ÷ `signalbus_signals_sent_total` is the share of sends slowed
/// (beyond CONTRACT §11).
pub const BACKPRESSURE_WAIT_SECONDS: &str = "signalbus_backpressure_wait_seconds";

/// Registered on first use, like the per-signal handles (`handles`): flat out most sends are paced.
static BACKPRESSURE_WAITS: LazyLock<[Histogram; 2]> = LazyLock::new(|| {
    crate::backpressure::Met::ALL.map(|gate| metrics::histogram!(BACKPRESSURE_WAIT_SECONDS, "gate" => gate.label()))
});

pub fn backpressure_wait(gate: crate::backpressure::Met, seconds: f64) {
    BACKPRESSURE_WAITS[gate as usize].record(seconds);
}

/// Ack ids received over WebSockets and not yet recorded (beyond CONTRACT §11; no labels).
pub const WS_ACKS_PENDING: &str = "signalbus_ws_acks_pending";

pub fn acks_pending(delta: f64) {
    metrics::gauge!(WS_ACKS_PENDING).increment(delta);
}

pub const DIRECTIVES_CREATED_TOTAL: &str = "signalbus_directives_created_total";
pub const DIRECTIVES_FINISHED_TOTAL: &str = "signalbus_directives_finished_total";
pub const DIRECTIVE_DURATION_SECONDS: &str = "signalbus_directive_duration_seconds";
pub const FANOUTS_TOTAL: &str = "signalbus_fanouts_total";

/// The outcomes a directive ends with (CONTRACT §14's terminal states).
pub const DIRECTIVE_OUTCOMES: [&str; 5] = ["completed", "failed", "rejected", "canceled", "expired"];

pub fn directive_created(directive_type: &str) {
    let label = bus::metrics::directive_type_label(directive_type);
    metrics::counter!(DIRECTIVES_CREATED_TOTAL, "directive_type" => label).increment(1);
}

/// A directive ended as `outcome` (the sweeper records `expired` in the same series).
pub fn directive_finished(directive_type: &str, outcome: &str, seconds: f64) {
    let label = bus::metrics::directive_type_label(directive_type);
    let outcome = DIRECTIVE_OUTCOMES.into_iter().find(|o| *o == outcome).unwrap_or("failed");
    metrics::counter!(DIRECTIVES_FINISHED_TOTAL, "directive_type" => label.clone(), "outcome" => outcome).increment(1);
    metrics::histogram!(DIRECTIVE_DURATION_SECONDS, "directive_type" => label, "outcome" => outcome).record(seconds);
}

pub fn fanout(types: &TypeTable, signal_type: &str) {
    metrics::counter!(FANOUTS_TOTAL, "signal_type" => types.metric_label(signal_type).to_string()).increment(1);
}

/// Open HTTP connections of this process, WebSocket sessions included (beyond CONTRACT §11).
pub const CONNECTIONS: &str = "signalbus_connections";
/// Connections refused (503, closed) because `max_connections` were open.
pub const CONNECTIONS_REFUSED_TOTAL: &str = "signalbus_connections_refused_total";
/// Connections closed for missing a deadline, by `kind` (`header`, `idle`).
pub const CONNECTION_TIMEOUTS_TOTAL: &str = "signalbus_connection_timeouts_total";

pub fn connection_opened() {
    metrics::gauge!(CONNECTIONS).increment(1.0);
}

pub fn connection_closed() {
    metrics::gauge!(CONNECTIONS).decrement(1.0);
}

pub fn connection_refused() {
    metrics::counter!(CONNECTIONS_REFUSED_TOTAL).increment(1);
}

pub fn connection_timed_out(kind: &'static str) {
    metrics::counter!(CONNECTION_TIMEOUTS_TOTAL, "kind" => kind).increment(1);
}

pub fn rate_limited() {
    metrics::counter!(SENDS_RATE_LIMITED_TOTAL).increment(1);
}

pub fn facts_rate_limited() {
    metrics::counter!(FACTS_RATE_LIMITED_TOTAL).increment(1);
}

/// An accepted send (and, when it was scheduled, a scheduled one).
pub fn sent(
    types: &TypeTable,
    signal_type: &str,
    class: bus::catalog::DeliveryClass,
    state: RecipientState,
    path: PublishPath,
) {
    if path == PublishPath::Scheduled {
        metrics::counter!(SIGNALS_SCHEDULED_TOTAL, "signal_type" => types.metric_label(signal_type).to_string())
            .increment(1);
    }
    let label = types.metric_label(signal_type);
    let register = || {
        metrics::counter!(SIGNALS_SENT_TOTAL,
            "signal_type" => label.to_string(),
            "delivery_class" => class.as_str(),
            "recipient_state" => state.as_str(),
            "publish_path" => path.as_str())
    };
    SENT.with(label, (class, state, path), register, |c| c.increment(1));
}

pub fn bounced(types: &TypeTable, signal_type: &str, state: RecipientState) {
    metrics::counter!(SIGNALS_BOUNCED_TOTAL,
        "signal_type" => types.metric_label(signal_type).to_string(),
        "recipient_state" => state.as_str())
    .increment(1);
}

pub fn unknown_recipient(types: &TypeTable, signal_type: &str, sender: &str) {
    metrics::counter!(UNKNOWN_RECIPIENT_REJECTIONS_TOTAL,
        "signal_type" => types.metric_label(signal_type).to_string(),
        "sender" => sender.to_string())
    .increment(1);
}

pub fn delivered(types: &TypeTable, signal_type: &str, via: DeliveredVia, created_at: DateTime<Utc>) {
    let label = types.metric_label(signal_type);
    let register = || {
        let labels = [("signal_type", label.to_string()), ("via", via.as_str().to_string())];
        (metrics::counter!(SIGNALS_DELIVERED_TOTAL, &labels), metrics::histogram!(TIME_TO_DELIVERY_SECONDS, &labels))
    };
    let secs = (Utc::now() - created_at).to_std().map(|d| d.as_secs_f64()).unwrap_or(0.0);
    DELIVERED.with(label, via, register, |(count, time)| {
        count.increment(1);
        time.record(secs);
    });
}

/// One pending signal this gateway expired, for `reason` (one of `EXPIRY_REASONS`).
pub fn expired(types: &TypeTable, signal_type: &str, reason: ExpiryReason) {
    metrics::counter!(SIGNALS_EXPIRED_TOTAL,
        "signal_type" => types.metric_label(signal_type).to_string(),
        "reason" => reason.as_str())
    .increment(1);
}

pub fn recall(outcome: RecallOutcome) {
    metrics::counter!(SIGNAL_RECALLS_TOTAL, "outcome" => outcome.as_str()).increment(1);
}

pub fn session_opened(kind: SessionKind, surface: Surface) {
    metrics::gauge!(SESSIONS, "kind" => kind.as_str(), "surface" => surface.as_str()).increment(1.0);
}

pub fn session_closed(kind: SessionKind, surface: Surface, reason: &'static str) {
    metrics::gauge!(SESSIONS, "kind" => kind.as_str(), "surface" => surface.as_str()).decrement(1.0);
    metrics::counter!(DISCONNECTS_TOTAL, "reason" => reason).increment(1);
}

/// A session closed by a node that did not hold it (its holder is gone, and so is its gauge).
pub fn disconnected(reason: &'static str) {
    metrics::counter!(DISCONNECTS_TOTAL, "reason" => reason).increment(1);
}

/// Every signal type a label may carry: the table's rows and `other`.
fn type_labels(types: &TypeTable) -> Vec<String> {
    types.types.keys().cloned().chain(["other".to_string()]).collect()
}

/// Gives every series of this crate its `# HELP` text and registers, at 0, every labelled series
/// whose label values are known up front, so the first event of each is a change `rate()` and
/// `increase()` can see (a series born at 1 reads as no increase). Call once, after the
/// recorder is installed. `sender` (unknown recipients) is not known up front: those series
/// still appear on first use.
pub fn init(types: &TypeTable) {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_counter!(SIGNALS_SENT_TOTAL, "Accepted sends, by type, class, recipient state and publish path.");
    describe_counter!(SIGNALS_BOUNCED_TOTAL, "Sync sends bounced as recipient_unavailable.");
    describe_counter!(
        SIGNALS_SCHEDULED_TOTAL,
        "Accepted sends scheduled for later delivery (deliver_after_seconds or deliver_at), by type."
    );
    describe_counter!(UNKNOWN_RECIPIENT_REJECTIONS_TOTAL, "Sends refused as unknown_recipient, by type and sender.");
    describe_counter!(SIGNALS_DELIVERED_TOTAL, "Signals handed to a session (a redelivery counts again).");
    describe_counter!(
        SIGNALS_EXPIRED_TOTAL,
        "Signals expired, by type and reason: ttl (the sweeper), removed (a gateway, when their recipient is removed), forced (a gateway, an operator's force-expire)."
    );
    describe_counter!(SIGNAL_RECALLS_TOTAL, "Recall requests, by outcome.");
    describe_counter!(
        AUTH_FAILURES_TOTAL,
        "Refused callers, by reason: bad_token, expired, revoked (401); scope, tenant (403)."
    );
    describe_histogram!(
        TIME_TO_DELIVERY_SECONDS,
        Unit::Seconds,
        "Time from a signal's creation to its hand-over to a session."
    );
    describe_gauge!(SESSIONS, "Sessions open on this process, by kind and surface.");
    describe_counter!(DISCONNECTS_TOTAL, "Sessions closed, by reason.");
    describe_counter!(SENDS_RATE_LIMITED_TOTAL, "Sends refused by the per-identity send quota.");
    describe_counter!(FACTS_RATE_LIMITED_TOTAL, "Plugin facts refused by the per-identity fact quota.");
    describe_gauge!(WS_ACKS_PENDING, "Ack ids received over WebSockets and not yet recorded.");
    describe_gauge!(
        BACKPRESSURE_PACING_SHARE,
        "Share of the projector-lag bound sends are paced against: 1, or down to 0.5 while the lag's peaks pass the bound."
    );
    describe_histogram!(
        BACKPRESSURE_WAIT_SECONDS,
        Unit::Seconds,
        "Time a send waited for back-pressure (the read models trailing the stream) before its append, by the gate it met: paced or held."
    );
    describe_counter!(
        DIRECTIVES_CREATED_TOTAL,
        "Directives created, by type (types beyond the first 100 seen are other)."
    );
    describe_counter!(DIRECTIVES_FINISHED_TOTAL, "Directives ended, by type and outcome.");
    describe_histogram!(
        DIRECTIVE_DURATION_SECONDS,
        Unit::Seconds,
        "Time from a directive's creation to its end, by type and outcome."
    );
    describe_counter!(FANOUTS_TOTAL, "Sends to a group (each member's signal also counts as a send), by signal type.");
    init_listener();

    use bus::catalog::DeliveryClass::{Async, Sync};
    use RecipientState::{Available, NotAvailableOffline, NotAvailableStale};
    // The combinations a send can have (bus::send): available ones are pushed or buffered in
    // either class; stale and offline ones are queued when async (sync ones bounce); async ones
    // of any state may be scheduled.
    let sent = [
        (Sync, Available, PublishPath::PushedToWs),
        (Async, Available, PublishPath::PushedToWs),
        (Sync, Available, PublishPath::BufferedForPiggyback),
        (Async, Available, PublishPath::BufferedForPiggyback),
        (Async, NotAvailableStale, PublishPath::QueuedOffline),
        (Async, NotAvailableOffline, PublishPath::QueuedOffline),
        (Async, Available, PublishPath::Scheduled),
        (Async, NotAvailableStale, PublishPath::Scheduled),
        (Async, NotAvailableOffline, PublishPath::Scheduled),
    ];
    let vias = [DeliveredVia::WsPush, DeliveredVia::StartupDrain, DeliveredVia::Piggyback, DeliveredVia::Inbox];
    for t in type_labels(types) {
        for (class, state, path) in sent {
            metrics::counter!(SIGNALS_SENT_TOTAL, "signal_type" => t.clone(), "delivery_class" => class.as_str(),
                "recipient_state" => state.as_str(), "publish_path" => path.as_str())
            .increment(0);
        }
        for state in [NotAvailableStale, NotAvailableOffline] {
            metrics::counter!(SIGNALS_BOUNCED_TOTAL, "signal_type" => t.clone(), "recipient_state" => state.as_str())
                .increment(0);
        }
        for via in vias {
            metrics::counter!(SIGNALS_DELIVERED_TOTAL, "signal_type" => t.clone(), "via" => via.as_str()).increment(0);
            // Registered without an observation: its `_count` and buckets start at 0.
            let _ = metrics::histogram!(TIME_TO_DELIVERY_SECONDS, "signal_type" => t.clone(), "via" => via.as_str());
        }
        for reason in EXPIRY_REASONS {
            metrics::counter!(SIGNALS_EXPIRED_TOTAL, "signal_type" => t.clone(), "reason" => reason.as_str())
                .increment(0);
        }
        metrics::counter!(SIGNALS_SCHEDULED_TOTAL, "signal_type" => t.clone()).increment(0);
    }
    let outcomes = [
        RecallOutcome::Recalled,
        RecallOutcome::AlreadyDelivered,
        RecallOutcome::AlreadyExpired,
        RecallOutcome::NotFound,
    ];
    for outcome in outcomes {
        metrics::counter!(SIGNAL_RECALLS_TOTAL, "outcome" => outcome.as_str()).increment(0);
    }
    for kind in [SessionKind::Daemon, SessionKind::Shim, SessionKind::Interactive] {
        for surface in [Surface::Ws, Surface::Piggyback] {
            metrics::gauge!(SESSIONS, "kind" => kind.as_str(), "surface" => surface.as_str()).increment(0.0);
        }
    }
    for reason in crate::close::CloseReason::ALL {
        metrics::counter!(DISCONNECTS_TOTAL, "reason" => reason.label()).increment(0);
    }
    for counter in [SENDS_RATE_LIMITED_TOTAL, FACTS_RATE_LIMITED_TOTAL] {
        metrics::counter!(counter).increment(0);
    }
    metrics::gauge!(WS_ACKS_PENDING).increment(0.0);
    // Its resting value: pacing against the whole bound.
    pacing_share(1.0);
    // Registered without an observation: both gates' `_count` and buckets start at 0.
    LazyLock::force(&BACKPRESSURE_WAITS);
    for reason in AuthFailure::ALL {
        metrics::counter!(AUTH_FAILURES_TOTAL, "reason" => reason.as_str()).increment(0);
    }
    // Directive types are not known up front: `other` stands for them until the first is seen.
    metrics::counter!(DIRECTIVES_CREATED_TOTAL, "directive_type" => "other").increment(0);
    for outcome in DIRECTIVE_OUTCOMES {
        metrics::counter!(DIRECTIVES_FINISHED_TOTAL, "directive_type" => "other", "outcome" => outcome).increment(0);
        let _ = metrics::histogram!(DIRECTIVE_DURATION_SECONDS, "directive_type" => "other", "outcome" => outcome);
    }
    for t in type_labels(types) {
        metrics::counter!(FANOUTS_TOTAL, "signal_type" => t).increment(0);
    }
}

/// Describes and registers at zero the listener's series: every role serves HTTP through it
/// (the projector's and sweeper's ops ports too), so a process without the gateway calls this
/// alone.
pub fn init_listener() {
    metrics::describe_gauge!(CONNECTIONS, "Open HTTP connections, WebSocket sessions included.");
    metrics::describe_counter!(
        CONNECTIONS_REFUSED_TOTAL,
        "Connections refused because the connection cap was reached."
    );
    metrics::describe_counter!(
        CONNECTION_TIMEOUTS_TOTAL,
        "Connections closed for missing a deadline, by kind (header, idle)."
    );
    for kind in ["header", "idle"] {
        metrics::counter!(CONNECTION_TIMEOUTS_TOTAL, "kind" => kind).increment(0);
    }
    metrics::counter!(CONNECTIONS_REFUSED_TOTAL).increment(0);
    metrics::gauge!(CONNECTIONS).increment(0.0);
}
