//! The client verbs of CONTRACT §9 (`agent`, `signal`, `inbox`, `plugin`, `admin`, `doctor`),
//! §14 (`directive`), §15 (`group`, sends to `@group`, recalling many) and §17 (`token`,
//! `admin token`), and the receiving
//! side (`listen`, `ack`): each is one or two HTTP calls to a running bus (or, for `listen`, one
//! WebSocket session; for `--wait`, a call repeated until the directive ends), printed as a table
//! or, with `--json`, as the bus's own JSON.
//!
//! Deliberately no logic the server has: the CLI never decides, it asks. The one table it holds
//! is the built-in per-type defaults (`signal types`), read from `bus::catalog`. Exit codes:
//! 0 ok, 1 the bus answered an error, 2 usage (clap, a bad flag value), 3 the bus is unreachable;
//! a directive waited for (`--wait`) that did not complete exits 4 to 8 (`wait::EXIT_*`).
//!
//! # Layout
//! - `args`: the verbs' clap types and `DEFAULT_URL`.
//! - `verbs`: `run`, one HTTP call (or two) per verb.
//! - `http`: the request, its token and URL, and a `Failure`; `render`: tables and errors.
//! - `listen`: the WebSocket session of `listen`.
//! - `expire`: `admin expire`, the operator's force-expire, and its printing (its flags are
//!   `args::ExpireArgs`).
//! - `directives`, `groups`: the `directive` and `group` verbs, flags and printing each;
//!   `directive_view`: a directive's path and how it is printed; `wait`: `--wait` until a
//!   directive ends, and its exit codes; `fanout`: the answers of a
//!   send to `@group` and of recalling many.
//! - `tokens`: `token issue|list|revoke` and `admin token create|list|revoke` (CONTRACT §17),
//!   flags and printing.

pub(crate) mod args;
mod directive_view;
pub(crate) mod directives;
pub(crate) mod expire;
mod fanout;
pub(crate) mod groups;
pub(crate) mod http;
pub(crate) mod listen;
mod render;
pub(crate) mod tokens;
mod verbs;
mod wait;

pub(crate) use listen::ws_config;
pub use verbs::run;
