//! The query side of signalbus: read models in PostgreSQL (or SQLite when embedded) derived
//! from the event stream, each batch committed together with its checkpoint, and the queries
//! the gateway and the sweeper ask of them.
//!
//! Deliberately never publishes an event and never decides a terminal outcome: a read model
//! is a view of the stream, and the stream alone decides (see `bus::store`).
//!
//! # Layout
//! - `queries`: the `Queries` trait — what readers may ask — and the row types it returns
//!   (`ProjectionStatus` included).
//! - `models`: `ReadModels`, the public handle implementing `Queries`, plus archiving,
//!   snapshots and the applied-sequence watch.
//! - `backend`: `Backend`, PostgreSQL or SQLite — pooled connections, the writer transaction,
//!   one batch applied in it.
//! - `sql/`: the dialect layer — `Dialect` (`sql/dialect`: what the two spell differently), `Args`
//!   and `RowSet` (typed parameters, a batch's rows as `UNNEST` arrays or one `json_each`
//!   array), `Conn` and `Row` (run a statement, decode a column on either backend).
//! - `batch`: folds a run of events into the row sets one batch writes (no I/O);
//!   `batch/directives`, `apply/directives`, `read/directives`, `queries/directives`: the
//!   directive read model (`directives`, `directive_candidates`) in each of those layers.
//!   `batch_groups`: the net effect of a batch's group events.
//! - `apply`: one batch into the tables — checkpoint compare-and-set, one statement per row set,
//!   recipient state — written once for both dialects; `apply_groups`: groups and members;
//!   `apply/inflight`: PostgreSQL's list of delivered, unacked rows (`signal_inflight`), kept in
//!   the statements that stamp them, so an ack touches no index.
//! - `read`: the `Queries` answers, written once for both dialects; `read_groups`: groups,
//!   and the signals of one group send or correlation id (for recalling many).
//! - `maint`: archiving, purging history, snapshots and the doctor's probes.
//! - `encode`: the total encoding of text and JSON (U+0000 becomes U+FFFD).
//! - `dead_letter`: events that cannot be applied, and which failures are the data's fault.
//! - `bisect`: applies a run so that no event halts projection (halves down to a dead letter).
//! - `pg/`: PostgreSQL — connecting, migrations, the advisory writer lock, and the
//!   scratch-schema rebuild with its atomic swap (`rebuild`).
//! - `sqlite/`: the embedded SQLite file — the same, with `BEGIN IMMEDIATE` as the writer lock
//!   and a scratch file copied in under it.
//! - `runner`: `Projector` — takes the lease, follows the stream, closes batches, refreshes
//!   recipient state.
//! - `lease`: `Lease`, the PostgreSQL advisory lock one projector (and one sweeper) leads by.
//! - `rebuild`: `rebuild()`, which picks `pg::rebuild` or `sqlite::rebuild`; `rebuild_pass`:
//!   what both share (chunk sizes, one page into a scratch model, `RebuildReport`).
//! - `doctor`: `doctor()` — integrity checks against the stream, each with a fix.
//! - `health`: is projection progressing, and was anything dead-lettered (`/readyz`, doctor).
//! - `snapshot`: a canonical dump of every table, to compare a live model with a rebuild.
//! - `metrics`: `signalbus_projector_lag_events`, `signalbus_projector_applied_events_total`,
//!   `signalbus_projector_dead_letters_total` and `signalbus_projector_leader`.
//! - `error`: this crate's error type.
//!
//! Migrations live in `schema/postgres` and `schema/sqlite` and are embedded at build time.

mod apply;
mod apply_groups;
mod backend;
mod batch;
mod batch_groups;
mod bisect;
pub mod dead_letter;
pub mod doctor;
mod encode;
pub mod error;
pub mod health;
pub mod lease;
mod maint;
pub mod metrics;
pub mod models;
mod pg;
pub mod queries;
mod read;
mod read_groups;
pub mod rebuild;
mod rebuild_pass;
pub mod runner;
pub mod snapshot;
mod sql;
mod sqlite;

pub use dead_letter::DeadLetter;
pub use doctor::{doctor, Check, DoctorReport};
pub use error::{Error, Result};
pub use models::ReadModels;
pub use queries::Queries;
pub use rebuild::{rebuild, RebuildReport};
pub use runner::{Projector, ProjectorConfig};
pub use snapshot::Snapshot;
