//! Errors of the projector crate.
//!
//! Deliberately does not map to HTTP statuses: that is the gateway's job.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    #[error("migration: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// The database was migrated by a newer signalbus; running an older binary against it could
    /// silently write rows the newer schema does not expect.
    #[error(
        "the read-model database has schema migration {0}, which this binary does not know: \
         it was written by a newer signalbus; upgrade this binary (or point it at another database)"
    )]
    SchemaTooNew(i64),
    #[error(transparent)]
    Bus(#[from] bus::Error),
    #[error("timed out waiting for the projector to reach stream sequence {0}")]
    Lagging(u64),
    #[error("{0}")]
    Invariant(String),
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Maps a migration failure, singling out a schema newer than this binary.
pub(crate) fn migrate_error(e: sqlx::migrate::MigrateError) -> Error {
    match e {
        sqlx::migrate::MigrateError::VersionMissing(v) => Error::SchemaTooNew(v),
        other => Error::Migrate(other),
    }
}
