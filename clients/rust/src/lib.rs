//! The Rust client library of signalbus: an agent keeps one WebSocket session open to the bus
//! (reconnecting with jittered backoff, heartbeating, resuming delivery with redeliveries
//! deduped by id), calls the HTTP API, and spools sends the bus cannot take to a directory that
//! is replayed newest first when the bus is back. The behaviour and the spool's file format are
//! those of the Python and TypeScript clients (clients/SCENARIOS.md).
//!
//! Deliberately a wire client: it depends on no crate of the bus, only on CONTRACT.md's JSON.
//!
//! # Layout
//! - `error`: the one error enum; every variant says what to do.
//! - `types`: the wire shapes (send request and result, signals, rows, facts, roster).
//! - `http`: one HTTP call with its answer typed; the `AdminClient`.
//! - `builder`: `ClientBuilder`, the options and their defaults.
//! - `client`: `Client`, its shared state and lifecycle.
//! - `session`: the WebSocket session loop, push routing, dedupe, handler dispatch.
//! - `acks`: the auto-acks, batched into one frame per `ack_batching(max, interval)`.
//! - `calls`: send (and spooling), recall, ack, receive, inbox, drain, get, list, facts.
//! - `spool` / `replay`: the offline spool and its replay.
//! - `ask`: ask / reply.

mod acks;
mod ask;
mod builder;
mod calls;
mod client;
mod error;
mod http;
mod replay;
mod session;
mod spool;
mod types;

pub use builder::ClientBuilder;
pub use client::{Client, HandlerError, ReplayCallback};
pub use error::{BusError, Error, Result};
pub use http::{AdminClient, HttpApi};
pub use replay::ReplayReport;
pub use spool::{Spool, SpoolEntry, DEFAULT_MAX_AGE_SECONDS, DEFAULT_MAX_BYTES};
pub use types::{
    default_ttl, Agent, Fact, FactPage, ListQuery, PluginState, RecallOutcome, Registration, SendOutcome, SendRequest,
    SendResult, Signal, SignalPage, SignalRow, Spooled, Welcome,
};

/// Compiles the README's example, so it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
