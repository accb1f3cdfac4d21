//! The embedded backend of the read models: one SQLite file, `<data_dir>/readmodels.sqlite`,
//! with the same tables and columns as PostgreSQL — connecting, migrating, the writer
//! transaction, and the rebuild through a scratch file (`rebuild.rs`).
//!
//! Deliberately holds no statement of the projection, the queries or the maintenance: those
//! are written once for both backends, so one test suite holds both to the same behaviour.
//! SQLite's write lock (`BEGIN IMMEDIATE`) plays the part of PostgreSQL's advisory writer lock.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use bus::sqlite_wal::WRITER_PAGES;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Sqlite, SqlitePool, Transaction};

use crate::error::{migrate_error, Result};

pub(crate) mod rebuild;

pub(crate) static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../schema/sqlite");

/// The file name of the read models inside the data dir.
pub const FILE_NAME: &str = "readmodels.sqlite";

/// How long a writer waits for SQLite's write lock (a rebuild's swap may hold it a while).
const BUSY_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone)]
pub(crate) struct SqliteModels {
    pub pool: SqlitePool,
    pub path: PathBuf,
}

impl SqliteModels {
    pub async fn open(data_dir: &Path) -> Result<SqliteModels> {
        bus::files::private_dir(data_dir)?;
        Self::open_file(&data_dir.join(FILE_NAME)).await
    }

    /// Opens (creating, 0600) one read-model file: the live one or a rebuild's scratch file.
    pub async fn open_file(path: &Path) -> Result<SqliteModels> {
        bus::files::private_file(path)?;
        let pool = SqlitePoolOptions::new().max_connections(4).connect_with(Self::options(path)?).await?;
        MIGRATOR.run(&pool).await.map_err(migrate_error)?;
        Ok(SqliteModels { pool, path: path.to_path_buf() })
    }

    /// How every connection to a read-model file is opened.
    pub fn options(path: &Path) -> Result<SqliteConnectOptions> {
        Ok(SqliteConnectOptions::from_str("sqlite:")?
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            // Statement journals (a multi-row upsert's undo) in memory, not in a temp file.
            .pragma("temp_store", "memory")
            // The live file's WAL is folded back beside the writer (`ReadModels::sqlite`), not in
            // its batches; a rebuild's scratch file only at this bound.
            .pragma("wal_autocheckpoint", WRITER_PAGES.to_string())
            .busy_timeout(BUSY_TIMEOUT))
    }

    /// A transaction holding SQLite's write lock from its first statement on.
    pub async fn begin_writer(&self) -> Result<Transaction<'static, Sqlite>> {
        Ok(self.pool.begin_with("BEGIN IMMEDIATE").await?)
    }
}
