//! The edge of signalbus: HTTP, WebSocket and MCP. Authenticates agents, keeps presence, turns
//! requests into commands on the event stream, and pushes signals to live sessions.
//!
//! Deliberately decides nothing about a signal's life itself (`bus::send` and `bus::signal`
//! do, `bus::store` makes it stick) and never writes a read model: it appends events and reads
//! the projector's `Queries`. It is the only crate that knows HTTP and JSON wire shapes.
//!
//! # Layout
//! - `config`: `GatewayConfig`.
//! - `state`: `Gateway` (the shared handle), `start`, shutdown.
//! - `app`: `app(gateway) -> Router` and `run(listener, gateway, shutdown)`.
//! - `listener`: accepting and serving connections under a cap, with header and idle deadlines.
//! - `auth`: bearer tokens, token hashing, the admin/agent extractors.
//! - `registry`: token hash → (tenant, identity), and the roster, followed from the stream.
//! - `presence`: who is connected where, and the recipient state of CONTRACT §2.
//! - `hub`: the sessions this process holds, and how to reach or close them.
//! - `follower`: the stream tail that feeds registry and presence and triggers pushes.
//! - `delivery`: compare-and-set delivery to one session, live push, startup drain.
//! - `piggyback`: HTTP-only sessions, the HTTP drain, the `X-Signalbus-Session` middleware.
//! - `splice`: adds `"signals"` to a JSON-object answer as it streams (no buffering).
//! - `reaper`: closes silent piggyback sessions and the ws sessions of dead nodes (any node,
//!   one winner per session by compare-and-set).
//! - `admin`: the optional rebuild/doctor hook (`AdminOps`, `ProjectorAdmin`).
//! - `openapi`: the OpenAPI 3.1 document served at `/openapi.json`.
//! - `ratelimit`: the per-identity send and plugin fact quotas (`SendRate`, `FactRate`),
//!   answered with `rate_limited`.
//! - `removal`: removing an agent — its token, its sessions, its pending signals.
//! - `confirm`: sends waiting for their push to be recorded on the stream.
//! - `send`, `commands`: the send flow, recall, ack and plugin facts, shared by HTTP, WS and MCP.
//! - `reads`: one signal's row, the roster, a plugin's state, shared by HTTP and MCP.
//! - `wire`: JSON shapes in and out (requests, responses, push frames, rows).
//! - `ws/`: the WebSocket protocol (frames, session loop, writer, dispatcher).
//! - `http/`: the HTTP handlers, one file per area.
//! - `mcp/`: MCP at `/mcp` (CONTRACT §12): tools over the same commands, one bus session per
//!   MCP session; its tool catalog and call parsing are shared with the binary's stdio shim.
//! - `error`: the one error type, with CONTRACT §8 codes and statuses.
//! - `metrics`: the CONTRACT §11 series this crate records.

pub mod admin;
mod app;
pub mod auth;
mod commands;
mod config;
mod confirm;
mod delivery;
pub mod error;
mod follower;
mod http;
mod hub;
mod listener;
pub mod mcp;
pub mod metrics;
pub mod openapi;
mod piggyback;
mod presence;
mod ratelimit;
mod reads;
mod reaper;
mod registry;
mod removal;
mod send;
mod splice;
mod state;
pub mod wire;
pub mod ws;

pub use admin::{AdminOps, ProjectorAdmin};
pub use app::{app, run, serve_router};
pub use config::{ConnLimits, GatewayConfig};
pub use error::ApiError;
pub use http::method_not_allowed;
pub use listener::Tls;
pub use ratelimit::{FactRate, SendRate};
pub use state::Gateway;

/// Errors of starting a gateway.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("event stream: {0}")]
    Stream(#[from] bus::Error),
    #[error("timed out catching up with the event stream at sequence {0}")]
    CatchUp(u64),
}

pub type Result<T, E = StartError> = std::result::Result<T, E>;
