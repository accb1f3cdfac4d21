//! MCP (CONTRACT §12), the gateway's third API surface beside HTTP and WebSocket: `/mcp` speaks
//! MCP Streamable HTTP through rmcp's transport. One MCP session is one bus session
//! (`surface: piggyback`, `kind: shim`); its tools run the same commands and reads as the other
//! surfaces, and the caller's pending signals ride on every tool result.
//!
//! Deliberately a thin layer: it decides nothing of its own about signals or sessions.
//!
//! # Layout
//! - `catalog`: the tools (names, schemas, descriptions), the instructions, the announcement;
//!   shared with the stdio shim of the binary.
//! - `call`: tool arguments → `Call`, outcome → tool result (pure; shared with the shim).
//! - `server`: the rmcp `ServerHandler` running calls against the gateway.
//! - `sessions`: MCP session ↔ bus session bindings, the session manager, the sweep, and the
//!   announcement of new signals on the GET stream.
//! - `edge`: the axum middleware in front of rmcp (auth, ownership, heartbeats, limits).

pub mod call;
pub mod catalog;
mod edge;
pub mod server;
mod sessions;

use std::sync::Arc;

use axum::Router;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

pub(crate) use sessions::{announce, Registry};

use crate::state::Gateway;

/// The MCP session a request belongs to, put on the request by the edge for the server.
#[derive(Debug, Clone)]
pub(crate) struct Caller(pub Arc<sessions::Binding>);

/// What the edge needs: the gateway, rmcp's sessions, and the body limit.
#[derive(Clone)]
pub(crate) struct Mcp {
    gw: Gateway,
    manager: Arc<sessions::Manager>,
    max_body: usize,
}

/// `/mcp`, every method, behind the edge. Starts the sweep that ends MCP sessions with their
/// bus sessions.
pub(crate) fn routes(gw: &Gateway, max_body: usize) -> Router<Gateway> {
    let manager = Arc::new(sessions::Manager::new(gw.clone()));
    let config = StreamableHttpServerConfig::default()
        // Every request carries the agent's bearer token, which a DNS-rebinding page cannot
        // add, and a gateway is reached by whatever host name its operator gives it.
        .disable_allowed_hosts()
        .with_cancellation_token(gw.shutdown_token().child_token())
        // A ping on an idle GET stream is how a vanished client is noticed (its heartbeats stop).
        .with_sse_keep_alive(Some(gw.config().heartbeat_interval()))
        .with_max_request_body_bytes(max_body);
    let server = server::Server { gw: gw.clone() };
    let service = StreamableHttpService::new(move || Ok(server.clone()), manager.clone(), config);
    sessions::spawn_sweep(gw.clone(), manager.clone());
    let state = Mcp { gw: gw.clone(), manager, max_body };
    Router::new().route_service("/mcp", service).layer(axum::middleware::from_fn_with_state(state, edge::middleware))
}
