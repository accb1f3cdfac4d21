//! The query side of signalbus: read models in PostgreSQL (or SQLite when embedded) derived
//! from the event stream, each batch committed together with its checkpoint, and the queries
//! the gateway and the sweeper ask of them.
//!
//! Deliberately never publishes an event and never decides a terminal outcome: a read model
//! is a view of the stream, and the stream alone decides (see `bus::store`).
//!
//! # Layout
//! - `queries`: the `Queries` trait — what readers may ask — and the row types it returns.
//! - `models`: `ReadModels`, the PostgreSQL-or-SQLite handle implementing `Queries`, plus
//!   archiving and snapshots.
//! - `batch`: folds a run of events into the row sets one batch writes (no I/O).
//! - `pg/`: PostgreSQL — migrations, the batch transaction (`apply`), queries, archive and
//!   doctor probes (`maint`), and the scratch-schema rebuild with its atomic swap (`rebuild`).
//! - `sqlite/`: the same for the embedded SQLite file.
//! - `runner`: `Projector` — follows the stream, closes batches, refreshes recipient state.
//! - `rebuild`: `rebuild()` and its report.
//! - `doctor`: `doctor()` — integrity checks against the stream, each with a fix.
//! - `snapshot`: a canonical dump of every table, to compare a live model with a rebuild.
//! - `metrics`: `signalbus_projector_lag_events` and `signalbus_projector_applied_events_total`.
//! - `error`: this crate's error type.
//!
//! Migrations live in `schema/postgres` and `schema/sqlite` and are embedded at build time.

mod batch;
pub mod doctor;
pub mod error;
pub mod metrics;
pub mod models;
mod pg;
pub mod queries;
pub mod rebuild;
pub mod runner;
pub mod snapshot;
mod sqlite;

pub use doctor::{doctor, Check, DoctorReport};
pub use error::{Error, Result};
pub use models::ReadModels;
pub use queries::Queries;
pub use rebuild::{rebuild, RebuildReport};
pub use runner::{Projector, ProjectorConfig};
pub use snapshot::Snapshot;
