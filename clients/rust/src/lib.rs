#![doc = include_str!("../README.md")]
//!
//! # Inside
//!
//! The Rust client library of signalbus: an agent keeps one WebSocket session open to the bus
//! (reconnecting with jittered backoff, heartbeating, resuming delivery with redeliveries
//! deduped by id), calls the HTTP API, and spools sends the bus cannot take to a directory that
//! is replayed newest first when the bus is back. The behaviour and the spool's file format are
//! those of the Python and TypeScript clients (clients/SCENARIOS.md).
//!
//! Deliberately a wire client: it depends on no crate of the bus, only on CONTRACT.md's JSON.
//!
//! # Layout
//! The facade on top, the engine below it; each module imports only modules listed after it
//! (no circle of imports):
//! - `builder`: `ClientBuilder`, the options and their defaults. (facade)
//! - `calls`: send, recall, ack, receive, inbox, drain, get, list, facts — shaping only. (facade)
//! - `ask`: ask / reply. (facade)
//! - `directive_worker`: `on_directive`, the worker side of directives, and its task. (facade)
//! - `directives`: the directive calls and `run_directive`. (facade)
//! - `groups`: send to a group, groups, join/leave, recall many; the admin's group calls. (facade)
//! - `timing`: inbox reads that wait, conversations; the admin's force-expire (§16). (facade)
//! - `tokens`: the admin's token calls: an agent's scoped tokens, tenant admin tokens (§17). (facade)
//! - `client`: `Client`, its handles and lifecycle: starts the engine's tasks, closes. (facade)
//! - `session`: the WebSocket session loop: connect, welcome, heartbeat, reconnect. (engine)
//! - `delivery`: pushed signals deduped, routed to an ask or the inbox; handler dispatch. (engine)
//! - `replay`: spooling a send the bus could not take, and replaying the spool. (engine)
//! - `acks`: the auto-acks, batched into one frame per `ack_batching(max, interval)`. (engine)
//! - `rpc`: one call over the session, or over HTTP when there is none. (engine)
//! - `shared`: `Inner`, the state the facade and the engine tasks share. (engine)
//! - `http`: one HTTP call with its answer typed; the `AdminClient`.
//! - `spool`: the offline spool directory.
//! - `schedule`: a scheduled send's checks, its spooled form and its replay (§16).
//! - `error_wire`: the bus's error object typed into an `Error`.
//! - `types_group`: the wire shapes of groups, fan-out answers and recalling many.
//! - `types_time`: the wire shapes of inbox waits and force-expire (§16).
//! - `types_token`: scopes and the wire shapes of the token calls (§17).
//! - `error`: the one error enum; every variant says what to do.
//! - `types`: the wire shapes (signals, rows, facts, roster).
//! - `types_send`: the wire shapes of a send (request, result, spooled) and the §3 defaults.
//! - `types_directive`: the wire shapes of directives.

mod acks;
mod ask;
mod builder;
mod calls;
mod client;
mod delivery;
mod directive_worker;
mod directives;
mod error;
mod error_wire;
mod groups;
mod http;
mod replay;
mod rpc;
mod schedule;
mod session;
mod shared;
mod spool;
mod timing;
mod tokens;
mod types;
mod types_directive;
mod types_group;
mod types_send;
mod types_time;
mod types_token;

pub use builder::ClientBuilder;
pub use client::Client;
pub use directive_worker::{Progress, HANDLER_ERROR_CODE};
pub use error::{BusError, Error, Result};
pub use error_wire::http_status_of;
pub use http::{AdminClient, HttpApi};
pub use replay::ReplayReport;
pub use shared::{ConnectionEvent, HandlerError, ReplayCallback};
pub use spool::{Spool, SpoolEntry, DEFAULT_MAX_AGE_SECONDS, DEFAULT_MAX_BYTES};
pub use types::{
    Agent, Fact, FactPage, ListQuery, PluginState, RecallOutcome, Registration, Removal, Signal, SignalPage, SignalRow,
    Welcome,
};
pub use types_directive::{
    Directive, DirectivePage, DirectiveProgress, DirectiveQuery, DirectiveRequest, DirectiveStatus, Failure,
};
pub use types_group::{FanoutResult, Group, GroupMember, GroupOptions, MemberResult, RecallEntry, RecallMany};
pub use types_send::{default_ttl, SendOutcome, SendRequest, SendResult, Spooled};
pub use types_time::{
    ExpireCandidate, ExpireFilter, ExpireOutcome, ExpirePreview, ExpireResult, InboxQuery, MAX_INBOX_WAIT,
};
pub use types_token::{AdminToken, AdminTokenInfo, IssuedToken, Scope, TokenInfo, TokenRequest, REGISTRATION_TOKEN_ID};
