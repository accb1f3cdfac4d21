//! The edge of signalbus: HTTP, WebSocket and MCP. Authenticates agents, keeps presence, turns
//! requests into commands on the event stream, and pushes signals to live sessions.
//!
//! Deliberately decides nothing about a signal's life itself (`bus::send` and `bus::signal`
//! do, `bus::store` makes it stick) and never writes a read model: it appends events and reads
//! the projector's `Queries`. It is the only crate that knows HTTP and JSON wire shapes.
//!
//! # Layout
//! Top to bottom; a module uses only modules below it (`docs/ARCHITECTURE.md` lists exactly
//! which), so there is no circle of files.
//! - `app`: `Gateway::start` (starts the stream tail, reaper and node watch), `app(gateway) ->
//!   Router` (mounts `/openapi.json` too), `run(listener, gateway, shutdown)`, shutdown and
//!   drain, `StartError`.
//! - `openapi`: the OpenAPI 3.1 document served at `/openapi.json`.
//! - `api/`: the surfaces over everything below.
//!   - `api/http/`: the HTTP handlers, one file per area (`piggyback_sessions`: opening and
//!     closing HTTP-only sessions); `extract`: path, query and JSON-body helpers.
//!   - `api/ws/`: the WebSocket protocol: upgrade, session open/close, the read loop (generic
//!     over the frame stream, tested with paused time), writer, dispatcher, frames.
//!   - `api/mcp/`: MCP at `/mcp` (CONTRACT §12): tools over the same commands, one bus session
//!     per MCP session (`bindings`, `McpSessions`); its catalog and call parsing are shared
//!     with the binary's stdio shim.
//!   - `api/piggyback`: the `X-Signalbus-Session` middleware; `api/splice` adds `"signals"` to
//!     a JSON-object answer as it streams (no buffering).
//! - `send`, `commands`: the send flow, recall, ack and plugin facts, shared by every surface.
//! - `reads`: one signal's row, signal lists and conversations, the roster, a plugin's state,
//!   shared by HTTP and MCP. `inbox`: the inbox read with its wait (no polling), shared too.
//! - `registration`: registering an agent, rotating its token.
//! - `removal`: removing an agent — its token, its sessions, its pending signals.
//! - `force_expire`: the operator's force-expire — pending signals by filter, each expired by
//!   compare-and-set against its delivery.
//! - `state`: `Gateway`, the shared handle — data only, and the narrow handles built over it.
//! - `delivery/`: `Deliverer` and its compare-and-set `record`; `push` (the live push),
//!   `drain` (startup and HTTP drains), `tail` (this process's stream tail), `confirm` (sends
//!   waiting for their push to be recorded). `backpressure`: sends wait while projection lags.
//! - `sessions/`: `hub` (this process's WebSocket sessions), `presence`, `lifecycle` (the one
//!   place that builds `session.*` events), `heartbeats` (the piggyback throttle), `reaper`
//!   (silent and orphaned sessions, one winner by compare-and-set).
//! - Leaves: `auth` (bearer tokens, `Authenticator`, the extractors), `agent` (`Agent`),
//!   `agent_registry` (`AgentRegistry`: token hashes, rosters), `jwt` (`JwtVerifier`: JWT bearer
//!   signatures and claims, no registry), `wire` (JSON shapes in and out;
//!   `wire::requests` is the one send and ack-id parser), `listener` (accepting and serving
//!   connections under a cap, with header and idle deadlines, TLS, `ConnLimits`), `config`
//!   (`GatewayConfig`), `metrics` (the CONTRACT §11 series), `close` (`CloseReason`), `applied`
//!   (the stream position applied), `announcers` (who hears of each `signal.sent`), `ratelimit`
//!   (`SendRate`, `FactRate`), `admin` (`AdminOps`, `ProjectorAdmin`), `error` (the one error
//!   type, with CONTRACT §8 codes and statuses).

mod acks;
pub mod admin;
mod agent;
mod agent_registry;
mod announcers;
mod api;
mod app;
mod applied;
pub mod auth;
mod backpressure;
mod close;
mod commands;
mod config;
mod delivery;
mod directives;
pub mod error;
mod fanout;
mod force_expire;
mod groups;
mod inbox;
pub mod jwt;
mod listener;
pub mod metrics;
pub mod openapi;
mod ratelimit;
mod reads;
mod registration;
mod removal;
pub mod scopes;
mod send;
mod sends;
mod sessions;
mod state;
mod tokens;
mod waits;
pub mod wire;

// The public paths the binary uses, kept where they were before `api/` existed.
pub use api::{mcp, ws};

pub use admin::{AdminOps, ProjectorAdmin};
pub use api::http::method_not_allowed;
pub use app::{app, run, serve_router, Result, StartError};
pub use config::GatewayConfig;
pub use error::ApiError;
// The same limits for every HTTP port of the process: the binary serves the projector's and the
// sweeper's ops routes (and a separate `/metrics` listener) through it too.
pub use listener::{serve as serve_with_limits, ConnLimits, Tls};
pub use ratelimit::{FactRate, SendRate};
pub use state::Gateway;
