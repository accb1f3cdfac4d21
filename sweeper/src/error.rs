//! Errors of the sweeper crate.
//!
//! Deliberately does not cover a lost expiry race: a delivery or recall that wins the per-signal
//! compare-and-set is an ordinary outcome (`expire::Outcome`), not an error.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The event log failed (append, read or tail).
    #[error(transparent)]
    Bus(#[from] bus::Error),
    /// The read models failed (overdue scan, archival).
    #[error(transparent)]
    Projector(#[from] projector::Error),
    /// The lease database failed.
    #[error("lease database: {0}")]
    Lease(#[from] sqlx::Error),
    /// A background task of the sweeper panicked or was cancelled unexpectedly.
    #[error("sweeper task failed: {0}")]
    Task(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
