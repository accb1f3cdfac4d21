//! Process-wide telemetry: the tracing subscriber and the Prometheus recorder behind `/metrics`,
//! plus the small operations router of roles that run without the gateway.
//!
//! Deliberately defines no series but `signalbus_build_info` and the standard `process_*` ones
//! (collected at each scrape by `metrics-process`): each crate's `metrics.rs` does the rest,
//! and `init_series` asks the crates of the roles this process runs to describe theirs.

use std::io::IsTerminal;
use std::sync::Arc;

use anyhow::Context;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use bus::log::SharedLog;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::cli::LogFormat;

/// Log lines to stderr: `text` coloured only when stderr is a terminal, or one JSON object a line.
pub fn init_tracing(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,sqlx=warn,async_nats=warn"));
    let logs = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match format {
        LogFormat::Text => logs.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => logs.json().init(),
    }
}

pub fn install_metrics() -> anyhow::Result<PrometheusHandle> {
    PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), bus::metrics::LATENCY_BUCKETS)
        .context("histogram buckets")?
        .install_recorder()
        .context("cannot install the metrics recorder")
}

/// `signalbus_build_info{version}` (gauge, always 1): which build a process runs.
pub const BUILD_INFO: &str = "signalbus_build_info";

/// Describes (`# HELP`) and registers, at 0 where their labels are known up front, the series
/// of the roles this process runs, plus `signalbus_build_info`. Each role's series then show in
/// the first scrape — a standby sweeper's too — and a rare event's first occurrence is an
/// increase `rate()` sees.
pub fn init_series(gateway: bool, projector: bool, sweeper: bool, types: &bus::catalog::TypeTable) {
    metrics::describe_gauge!(BUILD_INFO, "Always 1; the version label names the build this process runs.");
    metrics::gauge!(BUILD_INFO, "version" => env!("CARGO_PKG_VERSION")).set(1.0);
    let process = metrics_process::Collector::default();
    process.describe();
    process.collect();
    bus::metrics::init();
    if gateway {
        gateway::metrics::init(types);
    } else {
        gateway::metrics::init_listener();
    }
    if projector {
        projector::metrics::init();
    }
    if sweeper {
        sweeper::metrics::init(types);
    }
}

/// `GET /metrics`, the `process_*` series read afresh for each scrape; other methods get the
/// gateway's JSON 405.
pub fn metrics_router(handle: PrometheusHandle) -> Router {
    let process = metrics_process::Collector::default();
    let render = get(move || {
        process.collect();
        std::future::ready(handle.render())
    })
    .fallback(gateway::method_not_allowed);
    Router::new().route("/metrics", render)
}

#[derive(Clone)]
struct Ops {
    log: SharedLog,
    queries: Arc<dyn projector::queries::Queries>,
}

/// `/healthz` and `/readyz` for processes that run no gateway.
pub fn ops_router(log: SharedLog, queries: Arc<dyn projector::queries::Queries>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .with_state(Ops { log, queries })
}

/// As the gateway's: the stream and the database answer, and projection is healthy (no dead
/// letter, not stuck), answered with the public summaries only.
async fn readyz(State(ops): State<Ops>) -> (StatusCode, String) {
    let unavailable = |why: &str| (StatusCode::SERVICE_UNAVAILABLE, why.to_string());
    if ops.log.ping().await.is_err() {
        return unavailable("stream unreachable");
    }
    if ops.queries.ping().await.is_err() {
        return unavailable("database unreachable");
    }
    match projector::health::problems(&ops.log, ops.queries.as_ref()).await {
        Ok(problems) if problems.is_empty() => (StatusCode::OK, "ready".into()),
        Ok(problems) => unavailable(&problems.iter().map(|p| p.summary.as_str()).collect::<Vec<_>>().join("; ")),
        Err(_) => unavailable("the health of the read models cannot be checked"),
    }
}
