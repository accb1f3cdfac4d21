//! The client verbs of CONTRACT §9 (`agent`, `signal`, `inbox`, `plugin`, `admin`, `doctor`),
//! §14 (`directive`) and §15 (`group`, sends to `@group`, recalling many), and the receiving
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
//! - `expire`: `admin expire`, the operator's force-expire, its flags and printing.
//! - `directives`, `groups`: the `directive` and `group` verbs, flags and printing each;
//!   `wait`: `--wait` until a directive ends, and its exit codes; `fanout`: the answers of a
//!   send to `@group` and of recalling many.

pub(crate) mod args;
pub(crate) mod directives;
pub(crate) mod expire;
mod fanout;
pub(crate) mod groups;
pub(crate) mod http;
mod listen;
mod render;
mod verbs;
mod wait;

pub use verbs::run;
