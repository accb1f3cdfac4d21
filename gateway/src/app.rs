//! The assembled service: `app` builds the router, `run` serves it until shutdown and then
//! closes every session in order (each records `session.closed`).
//!
//! Deliberately mounts no `/metrics`: the binary installs the recorder and the exporter.

use std::future::Future;

use axum::extract::DefaultBodyLimit;
use axum::routing::get;
use axum::Router;

use crate::error::ApiError;
use crate::state::Gateway;
use crate::{http, ws};

/// Largest HTTP request body: room for a 1 MiB plugin state plus its envelope.
const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;

/// The gateway's router, state included.
pub fn app(gateway: Gateway) -> Router {
    let piggyback = axum::middleware::from_fn_with_state(gateway.clone(), crate::piggyback::middleware);
    Router::new()
        .merge(http::api_routes().route_layer(piggyback))
        .merge(http::ops_routes())
        .route("/v1/ws", get(ws::upgrade))
        .fallback(|| async { ApiError::NotFound("no such endpoint".into()) })
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(gateway)
}

/// Serves `gateway` on `listener` until `shutdown` resolves, then stops taking connections,
/// closes every WebSocket session (close 1001, `session.closed` recorded) and waits for them.
pub async fn run(
    listener: tokio::net::TcpListener,
    gateway: Gateway,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let router = app(gateway.clone());
    serve_router(listener, router, gateway, shutdown).await
}

/// `run` with a router the caller extended (e.g. the binary merging `/metrics` into `app`).
pub async fn serve_router(
    listener: tokio::net::TcpListener,
    router: Router,
    gateway: Gateway,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let gw = gateway.clone();
    let result = axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            shutdown.await;
            tracing::info!(sessions = gw.local_sessions(), "shutting down; closing sessions");
            gw.begin_shutdown();
        })
        .await;
    gateway.begin_shutdown();
    gateway.drained().await;
    result
}
