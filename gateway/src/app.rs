//! The assembled service: `Gateway::start` starts the background tasks (the stream tail,
//! the reaper, the node watch), `app` builds the router, `run` serves it until shutdown and then
//! closes every session in order (each records `session.closed`).
//!
//! Deliberately mounts no `/metrics`: the binary installs the recorder and the exporter.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::DefaultBodyLimit;
use axum::routing::get;
use axum::serve::ListenerExt;
use axum::Router;
use bus::log::SharedLog;
use projector::queries::Queries;

use crate::acks;
use crate::api::{http, mcp, piggyback, ws};
use crate::backpressure;
use crate::close::CloseReason;
use crate::config::GatewayConfig;
use crate::delivery::tail::{self, Tail};
use crate::error::ApiError;
use crate::openapi;
use crate::sends;
use crate::sessions::reaper::{self, Reaper};
use crate::state::Gateway;

/// How long `start` waits to catch up with the stream before giving up.
const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(120);

/// Largest HTTP request body: room for a 1 MiB plugin state plus its envelope.
const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;

impl Gateway {
    /// Starts following the stream (registry, presence, cross-process push) and returns once
    /// everything stored at the time of the call has been applied, so the first request already
    /// knows every agent and session; then starts the reaper and the node watch.
    pub async fn start(
        log: SharedLog,
        queries: Arc<dyn Queries>,
        config: GatewayConfig,
    ) -> Result<Gateway, StartError> {
        let target = log.last_seq().await?;
        let (gw, applied, acks_inbox, sends_inbox) = Gateway::new(log, queries, config);
        let announcers = gw.announcers().clone();
        let tail = Tail {
            log: gw.log().clone(),
            registry: gw.registry().clone(),
            auth: gw.authenticator().clone(),
            presence: gw.presence().clone(),
            hub: gw.hub().clone(),
            deliverer: gw.deliverer().clone(),
            confirmations: gw.confirmations().clone(),
            directive_ends: gw.directive_ends().clone(),
            inbox_waits: gw.inbox_waits().clone(),
            announce: Arc::new(move |tenant, sent| announcers.announce(tenant, sent)),
            shutdown: gw.shutdown_token().clone(),
        };
        tail::spawn(tail, applied, gw.tasks());
        if !gw.wait_applied(target, CATCH_UP_TIMEOUT).await {
            gw.shutdown_token().cancel();
            return Err(StartError::CatchUp(target));
        }
        let reaper = Reaper {
            lifecycle: gw.lifecycle().clone(),
            log: gw.log().clone(),
            hub: gw.hub().clone(),
            presence: gw.presence().clone(),
            heartbeats: gw.heartbeats().clone(),
            limiters: [gw.limiter().clone(), gw.fact_limiter().clone()],
            config: gw.config_arc().clone(),
            shutdown: gw.shutdown_token().clone(),
        };
        gw.tasks().spawn(acks::run(
            gw.store().clone(),
            acks_inbox,
            gw.config().ack_gather,
            gw.shutdown_token().clone(),
        ));
        gw.tasks().spawn(sends::run(gw.store().clone(), sends_inbox, gw.shutdown_token().clone()));
        reaper::spawn_node_watch(reaper.clone(), gw.tasks());
        reaper::spawn(reaper, gw.tasks());
        if let Some(max_lag) = gw.config().max_projector_lag {
            let watch = backpressure::Watch {
                backpressure: gw.backpressure().clone(),
                queries: gw.queries().clone(),
                applied: gw.applied().clone(),
                max_lag,
                shutdown: gw.shutdown_token().clone(),
            };
            backpressure::spawn(watch, gw.tasks());
        }
        tracing::info!(node = %gw.config().node, seq = target, "gateway caught up with the stream");
        Ok(gw)
    }

    /// Stops accepting work and asks every session to close; `run` waits for them.
    pub fn begin_shutdown(&self) {
        self.shutdown_token().cancel();
        self.hub().close_all(CloseReason::Shutdown);
    }

    /// Waits (up to `shutdown_grace`) for every session and background task to finish.
    pub async fn drained(&self) {
        self.tasks().close();
        if tokio::time::timeout(self.config().shutdown_grace, self.tasks().wait()).await.is_err() {
            tracing::warn!(sessions = self.hub().len(), "shutdown grace elapsed with sessions still open");
        }
    }
}

/// The gateway's router, state included.
pub fn app(gateway: Gateway) -> Router {
    let piggyback = axum::middleware::from_fn_with_state(gateway.clone(), piggyback::middleware);
    // The guard wraps the piggyback layer: a call refused by it never touches a session.
    let guard = axum::middleware::from_fn_with_state(gateway.clone(), http::guard::middleware);
    Router::new()
        .merge(http::api_routes().route_layer(piggyback).route_layer(guard))
        .merge(http::ops_routes())
        .route("/openapi.json", get(openapi::serve))
        .route("/v1/ws", get(ws::upgrade))
        .merge(mcp::routes(&gateway, MAX_BODY_BYTES))
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

/// Errors of starting a gateway.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("event stream: {0}")]
    Stream(#[from] bus::Error),
    #[error("timed out catching up with the event stream at sequence {0}")]
    CatchUp(u64),
}

pub type Result<T, E = StartError> = std::result::Result<T, E>;
