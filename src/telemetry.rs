//! Process-wide telemetry: the tracing subscriber and the Prometheus recorder behind `/metrics`,
//! plus the small operations router of roles that run without the gateway.
//!
//! Deliberately defines no series: each crate's `metrics.rs` does.

use std::sync::Arc;

use anyhow::Context;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use bus::log::SharedLog;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Latency buckets (seconds) for every histogram: append, delivery, expiry lag. Exposed as
/// Prometheus histograms (not summaries) so Grafana can aggregate across processes.
const BUCKETS: &[f64] =
    &[0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 3600.0];

pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,sqlx=warn,async_nats=warn"));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
}

pub fn install_metrics() -> anyhow::Result<PrometheusHandle> {
    PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), BUCKETS)
        .context("histogram buckets")?
        .install_recorder()
        .context("cannot install the metrics recorder")
}

pub fn metrics_router(handle: PrometheusHandle) -> Router {
    Router::new().route("/metrics", get(move || std::future::ready(handle.render())))
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

async fn readyz(State(ops): State<Ops>) -> (StatusCode, &'static str) {
    if ops.log.ping().await.is_err() {
        return (StatusCode::SERVICE_UNAVAILABLE, "stream unreachable");
    }
    if ops.queries.ping().await.is_err() {
        return (StatusCode::SERVICE_UNAVAILABLE, "database unreachable");
    }
    (StatusCode::OK, "ready")
}
