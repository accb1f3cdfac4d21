//! The assembled service: `app` builds the router, `run` serves it until shutdown and then
//! closes every session in order (each records `session.closed`).
//!
//! Deliberately mounts no `/metrics`: the binary installs the recorder and the exporter.

use std::future::Future;

use axum::extract::DefaultBodyLimit;
use axum::routing::get;
use axum::serve::ListenerExt;
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
        .merge(crate::mcp::routes(&gateway, MAX_BODY_BYTES))
        .fallback(|| async { ApiError::NotFound("no such endpoint".into()) })
        // Last, so it replaces the default 405 of every route above, outside the piggyback layer.
        .method_not_allowed_fallback(http::method_not_allowed)
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
    // Nagle on the accepted sockets holds a small frame back until the client ACKs the previous
    // one, and clients delay their ACKs (up to ~40 ms on Linux): every result and push frame
    // would pay that. Each frame is written whole, so there is nothing for Nagle to coalesce.
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "could not set TCP_NODELAY on an accepted socket");
        }
    });
    let limits = gateway.config().connections.clone();
    let result = crate::listener::serve(listener, router, limits, async move {
        shutdown.await;
        tracing::info!(sessions = gw.local_sessions(), "shutting down; closing sessions");
        gw.begin_shutdown();
    })
    .await;
    gateway.begin_shutdown();
    gateway.drained().await;
    result
}
