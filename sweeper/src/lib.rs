//! The sweeper: every pending signal gets its `signal.expired` event on time, and every
//! scheduled one its `signal.released` (CONTRACT §16), at scale, from exactly one active
//! sweeper; and the read models stay lean (archival, retention).
//!
//! Deliberately decides no expiry itself: the pure rules (`bus::signal::decide`) do, and every
//! expiry is appended with the per-signal compare-and-set (`bus::store`), so a racing delivery
//! or recall wins cleanly and a signal is never expired twice. Uses `bus` and `projector` only, never the gateway.
//!
//! # How expiry is on time
//! - **Timers** (`timers`): the leader follows the stream tail; every `signal.sent` due within
//!   the look-ahead window (`2 × sweep_interval + slack`) gets a timer at its `expires_at`,
//!   every delivery, recall or expiry clears it. A timer firing expires the signal at once, so
//!   expiry lags `expires_at` by one append (milliseconds), well inside the 1 s p99 target.
//! - **Backstop** (`scan`): at leadership start and every `sweep_interval`, the read models'
//!   expiry index (`Queries::overdue`) is paged through and every due signal expired with
//!   bounded concurrency (`concurrency` in flight, no per-signal sequential round trips) —
//!   this covers restarts, fail-over and outage backlogs. The scan pages by keyset, so it
//!   runs ahead of the projector without re-reading what it already handled, and a row whose
//!   read model is current costs one conditional append on its `last_event_seq` (`expire`;
//!   the timers likewise use the send's sequence from the tail), a read only if that fails. The same
//!   run loads the signals due within the window into the timers (signals further out were not
//!   kept: memory stays bounded by the window, not by the number of pending signals).
//!
//! # Several sweepers: the lease
//! Exactly one sweeper works at a time. Distributed mode (`Lease::Postgres`) uses a PostgreSQL
//! session advisory lock (`pg_try_advisory_lock`) on a dedicated connection held while
//! leading; standbys retry every `lease_retry` (5 s). We chose it over a JetStream KV lease
//! because the sweeper needs PostgreSQL anyway (the expiry index lives there), and a session
//! lock needs no TTL, heartbeat or clock: it dies with its connection, so a crashed leader is
//! replaced within one retry period. Embedded mode (`Lease::Local`) is one process by
//! construction and always leads. The lease only avoids wasted work: two leaders at once
//! (a partition) still cannot double-expire, thanks to the compare-and-set.
//!
//! # Retention and status
//! Each run moves settled rows older than `archive_after` to `signal_history` and deletes
//! history archived longer than `retention` ago, in small batches (`retention`, through
//! `Archiver`, which `projector::ReadModels` implements), then records a `sweep_run` fact under
//! plugin `signalbus/sweeper` (tenant `default`) with `{last_run_at, expired, lag_seconds_max,
//! leader, lost_races, failed, archived, purged, run_seconds}`. Metrics: `metrics`.
//!
//! # Layout
//! - `sweeper`: `Sweeper::run`, the lease loop and the leader's event loop.
//! - `config`: `SweeperConfig` and defaults. `lease`: `Lease`, the advisory lock.
//! - `timers`: the timer set (pure; tested on paused time). `scan`: the backstop scan.
//! - `expire`: one expiry and its outcome. `tally`: counts shared by timers and scan.
//! - `release`: scheduled signals released at `deliver_at` (CONTRACT §16) — timers from the
//!   scheduled `signal.sent` on the tail, the backstop over the due-release index, each release
//!   through the per-signal compare-and-set.
//! - `directives`: directive expiry at the deadline — timers from `directive.requested` on the
//!   tail, the backstop over the open-by-deadline index, each through `execute_directive(Expire)`.
//! - `directive_effects`: every other directive event's lifecycle signals and recalls carried
//!   out again a grace period later (idempotent), for a gateway that died after its append.
//! - `retention`: the `Archiver` trait and a retention pass. `status`: the status fact.
//! - `metrics`: the series this crate records. `error`: `Error`, `Result`.

pub mod config;
pub mod directive_effects;
pub mod directives;
pub mod error;
pub mod expire;
pub mod lease;
pub mod metrics;
mod readmodels;
pub mod release;
pub mod retention;
pub mod scan;
pub mod status;
pub mod sweeper;
pub mod tally;
pub mod timers;

pub use config::SweeperConfig;
pub use error::{Error, Result};
pub use lease::Lease;
pub use retention::Archiver;
pub use sweeper::Sweeper;
