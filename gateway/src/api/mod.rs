//! The surfaces clients talk to: HTTP (`http/`), WebSocket (`ws/`) and MCP (`mcp/`), and the
//! piggyback middleware that carries pending signals on HTTP answers.
//!
//! Deliberately thin: every surface turns a request into the same commands (`send`,
//! `commands`, `reads`) and hands delivery to `delivery/`; none decides a signal's life.

pub mod http;
pub mod mcp;
pub mod piggyback;
pub mod splice;
pub mod ws;
