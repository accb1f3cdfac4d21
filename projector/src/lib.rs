//! The query side of signalbus: read models in PostgreSQL (or SQLite when embedded) derived
//! from the event stream, each batch committed together with its checkpoint, and the queries
//! the gateway and the sweeper ask of them.
//!
//! Deliberately never publishes an event and never decides a terminal outcome: a read model
//! is a view of the stream, and the stream alone decides (see `bus::store`).
//!
//! # Layout
//! - `queries`: the `Queries` trait — what readers may ask — and the row types it returns.
//! - `error`: this crate's error type.

pub mod error;
pub mod queries;

pub use error::{Error, Result};
