//! MCP (CONTRACT §12), the gateway's third API surface beside HTTP and WebSocket: `/mcp` speaks
//! MCP Streamable HTTP through rmcp's transport. One MCP session is one bus session
//! (`surface: piggyback`, `kind: shim`); its tools run the same commands and reads as the other
//! surfaces, and the caller's pending signals ride on every tool result.
//!
//! Deliberately a thin layer: it decides nothing of its own about signals or sessions.
//!
//! # Layout
//! - `catalog`: the tools (names, schemas, descriptions), the instructions, the announcement;
//!   shared with the stdio shim of the binary; `team_tools`: the directive and group tools.
//! - `call`: tool arguments → `Call`, outcome → tool result (pure; shared with the shim).
//! - `server`: the rmcp `ServerHandler` running calls against the gateway.
//! - `bindings`: MCP session ↔ bus session bindings (`McpSessions`, one table per router), the session manager, the sweep, and the
//!   announcement of new signals on the GET stream.
//! - `edge`: the axum middleware in front of rmcp (auth, ownership, heartbeats, limits).

mod bindings;
pub mod call;
pub mod catalog;
mod edge;
pub mod server;
mod team_tools;
mod tool_schema;

use std::sync::Arc;

use axum::Router;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use bindings::{Manager, McpSessions};
use edge::Mcp;
use server::Server;

use crate::state::Gateway;

/// `/mcp`, every method, behind the edge, over this router's own MCP sessions. Starts the sweep
/// that ends MCP sessions with their bus sessions, and announces each new signal for their
/// agents to them (`announce`, called by the stream tail through the gateway's announcers).
pub(crate) fn routes(gw: &Gateway, max_body: usize) -> Router<Gateway> {
    let sessions = Arc::new(McpSessions::default());
    let (announced, tasks) = (sessions.clone(), gw.tasks().clone());
    gw.announcers().add(Arc::new(move |tenant, sent| bindings::announce(&announced, &tasks, tenant, sent)));
    let manager = Arc::new(Manager::new(gw.clone(), sessions.clone()));
    let config = StreamableHttpServerConfig::default()
        // Every request carries the agent's bearer token, which a DNS-rebinding page cannot
        // add, and a gateway is reached by whatever host name its operator gives it.
        .disable_allowed_hosts()
        .with_cancellation_token(gw.shutdown_token().child_token())
        // A ping on an idle GET stream is how a vanished client is noticed (its heartbeats stop).
        .with_sse_keep_alive(Some(gw.config().heartbeat_interval()))
        .with_max_request_body_bytes(max_body);
    let server = Server { gw: gw.clone() };
    let service = StreamableHttpService::new(move || Ok(server.clone()), manager.clone(), config);
    bindings::spawn_sweep(gw.clone(), manager.clone());
    let state = Mcp { gw: gw.clone(), sessions, manager, max_body };
    Router::new().route_service("/mcp", service).layer(axum::middleware::from_fn_with_state(state, edge::middleware))
}
