//! The signalbus domain: what can happen to a signal, how it is written down, and where.
//!
//! Knows nothing of HTTP, WebSocket or read models; every other crate depends on this one and
//! this one on none of them.
//!
//! # Layout
//! - `event`: the event catalog, the envelope, and the subject each event lives under.
//! - `codec`: MessagePack encoding of events (named fields, forward compatible).
//! - `files`: the private data dir and files of the embedded mode (0700, 0600).
//! - `names`: validation of tenant, identity, type and plugin names; subject tokens.
//! - `catalog`: the per-type defaults table, priorities, TTL bounds.
//! - `redact`: the redaction guard for payload secrets.
//! - `nul`: the NUL guard: strings with U+0000 are refused before anything is stored.
//! - `json`: a payload's compact JSON text and its length, written without the formatter.
//! - `send`: the pure send decision (defaults, redaction, bounce or queue).
//! - `scope`: what a token may do (`send`, `receive`, …) as a set that parses and checks.
//! - `schedule`: scheduled delivery's rules — a send's `deliver_at`, visibility, release.
//! - `signal`: the pure rules of a signal's life (`apply`, `decide`).
//! - `force_expire`: the operator's force-expire: the filters a request may combine, and what
//!   they match (each match then expired by `SignalCommand::ForceExpire`).
//! - `directive`: the pure rules of a directive's life, its lifecycle signals and recalls.
//! - `admin_token`: the pure rules of a tenant admin token (issued once, revoked once).
//! - `group`: the pure rules of a group's settings and members, fan-out and roster signals.
//! - `fanout`: a send to a group planned per member (ids a repeat finds again), pure.
//! - `fold`: the `Fold` trait: a state's `apply` folded over a subject's events (`from_events`).
//! - `log`: the `EventLog` trait and its JetStream and embedded backends.
//! - `store`: load → decide → compare-and-set append, with retries (`store/directives`: the same
//!   for directives, and their lifecycle signals carried out as ordinary sends).
//! - `group_store`: the same for groups; recording a planned fan-out and recalling many.
//! - `metrics`: the series this crate records.

pub mod acceptance;
pub mod admin_token;
pub mod agent;
pub mod catalog;
pub mod codec;
pub mod directive;
pub mod directive_status;
pub mod error;
pub mod event;
pub mod fact;
pub mod fanout;
pub mod files;
pub mod fold;
pub mod force_expire;
pub mod group;
pub mod group_store;
pub mod json;
pub mod log;
pub mod metrics;
pub mod names;
pub mod nul;
pub mod presence;
pub mod redact;
pub mod schedule;
pub mod scope;
pub mod send;
pub mod session;
pub mod signal;
pub mod sqlite_wal;
pub mod store;

pub use error::{DomainError, Error, Refusal, Result};
