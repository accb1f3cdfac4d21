//! Errors of the projector crate.
//!
//! Deliberately does not map to HTTP statuses: that is the gateway's job.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    #[error("migration: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error(transparent)]
    Bus(#[from] bus::Error),
    #[error("timed out waiting for the projector to reach stream sequence {0}")]
    Lagging(u64),
    #[error("{0}")]
    Invariant(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
