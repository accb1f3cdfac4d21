//! The embedded event log: `EventLog` over one local SQLite file (`<data dir>/events.sqlite`),
//! with the same semantics as the JetStream backend, for running signalbus with no other service.
//!
//! Appends go to one writer task that group-commits them (`writer.rs`); reads go to a separate
//! pool of read-only connections, which WAL mode lets run alongside the writer; `tail` follows
//! commits (`tail.rs`), from the writer's ring of newest events while it holds them (`recent.rs`);
//! the WAL is folded back into the file beside the writer (`crate::sqlite_wal`), not in its
//! commits. Deliberately does not replicate, compact or expire events: the log is
//! the only truth the read models are rebuilt from, so it keeps everything. It is meant for one
//! process; a second handle or process may still write the same file safely (tails then see its
//! events on their next poll rather than at once).

mod durability;
mod reads;
mod recent;
mod tail;
mod writer;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};
use sqlx::{ConnectOptions, Executor, Row, SqliteConnection, SqlitePool};
use tokio::sync::{mpsc, oneshot, watch};
use tracing::info;

use crate::codec;
use crate::error::{Error, Result};
use crate::event::{Event, Subjects};
use crate::log::{Appended, EventLog, Expect, Stored};
use crate::sqlite_wal::{Checkpointer, WRITER_PAGES};

pub use durability::Durability;
use durability::WalSync;
use reads::{decode_row, read_error, read_from};
use recent::Recent;
use writer::{closed, AppendRequest, Command, Stats, Writer};

/// The file inside the data dir.
pub const FILE_NAME: &str = "events.sqlite";

/// The subject prefix of the embedded stream (the same one the JetStream stream uses).
const PREFIX: &str = "signalbus";

/// Appends that may wait for the writer before `append` itself waits (backpressure).
const QUEUE: usize = 8 * writer::MAX_BATCH;

/// Read connections. Reads are short index lookups; a few connections keep tails, the
/// projector and request handlers from queueing behind each other on a 2-core box.
const READERS: u32 = 4;

/// How long a connection waits on SQLite's file lock before failing (another process's
/// checkpoint, or a second writer on the same file).
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Schema version kept in `PRAGMA user_version`, so a later binary knows what it opened.
const SCHEMA_VERSION: i64 = 1;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS events (
    seq       INTEGER PRIMARY KEY,      -- stream sequence, contiguous from 1, set by the writer
    subject   TEXT    NOT NULL,
    event_id  BLOB    NOT NULL UNIQUE,  -- dedupe key of retried appends, kept forever
    body      BLOB    NOT NULL,         -- codec::encode(event)
    stored_at INTEGER NOT NULL          -- unix ms of the commit, for operators
);
CREATE INDEX IF NOT EXISTS events_subject_seq ON events (subject, seq);
";

/// The embedded event log. Cheap to clone: clones share one writer and one read pool.
#[derive(Debug, Clone)]
pub struct EmbeddedLog {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    subjects: Subjects,
    path: PathBuf,
    commands: mpsc::Sender<Command>,
    readers: SqlitePool,
    committed: watch::Receiver<u64>,
    recent: Arc<Recent>,
    stats: Arc<Stats>,
    /// One process owns the data dir: every node not heard in this process is dead.
    nodes: crate::log::nodes::NodeBook,
}

impl EmbeddedLog {
    /// Opens (creating if needed) `<data_dir>/events.sqlite` and starts the writer task, with
    /// the default `Durability`.
    pub async fn open(data_dir: &Path) -> Result<EmbeddedLog> {
        EmbeddedLog::open_with(data_dir, Durability::default()).await
    }

    /// `open`, with answered appends on the disk as `durability` says.
    pub async fn open_with(data_dir: &Path, durability: Durability) -> Result<EmbeddedLog> {
        crate::files::private_dir(data_dir)
            .map_err(|e| Error::Unavailable(format!("cannot create data dir {}: {e}", data_dir.display())))?;
        let path = data_dir.join(FILE_NAME);
        crate::files::private_file(&path)
            .map_err(|e| Error::Unavailable(format!("cannot create {} as a private file: {e}", path.display())))?;
        let base = SqliteConnectOptions::new().filename(&path).busy_timeout(BUSY_TIMEOUT);

        // The writer connection comes first: it creates the file and switches it to WAL, which
        // read-only connections cannot do.
        let writer = base
            .clone()
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // FULL: in WAL mode one fsync per commit, i.e. per batch; NORMAL: none, and
            // `WalSync` bounds how long a commit waits for one (`durability.rs`).
            .synchronous(durability.synchronous())
            // A batch's multi-row INSERT keeps its statement journal in memory, not a temp file.
            .pragma("temp_store", "memory")
            // Checkpoints are the checkpointer's (`crate::sqlite_wal`); the writer's own only
            // bound the WAL's size.
            .pragma("wal_autocheckpoint", WRITER_PAGES.to_string());
        let (conn, last_seq) = prepare_writer(writer).await?;

        let readers = SqlitePoolOptions::new()
            .max_connections(READERS)
            .min_connections(1)
            .connect_with(base.clone().read_only(true))
            .await
            .map_err(unavailable)?;

        let (commands, rx) = mpsc::channel(QUEUE);
        let (committed_tx, committed) = watch::channel(last_seq as u64);
        let stats = Arc::new(Stats::default());
        let recent = Arc::new(Recent::default());
        let wal_sync = WalSync::new(&path, durability);
        let checkpointer = Checkpointer::start(base.clone().synchronous(durability.synchronous()), committed.clone())
            .await
            .map_err(unavailable)?;
        let writer = Writer {
            conn,
            rx,
            committed: committed_tx,
            recent: recent.clone(),
            stats: stats.clone(),
            wal_sync,
            checkpointer: Some(checkpointer),
        };
        tokio::spawn(writer.run());

        info!(path = %path.display(), last_seq, ?durability, "embedded event log opened");
        Ok(EmbeddedLog {
            inner: Arc::new(Inner {
                subjects: Subjects::new(PREFIX),
                path,
                commands,
                readers,
                committed,
                recent,
                stats,
                nodes: crate::log::nodes::NodeBook::new(true),
            }),
        })
    }

    /// Lets every append queued so far commit, checkpoints the WAL into the main file and
    /// closes all connections. Later calls on any clone fail with `Unavailable`; calling it
    /// again is harmless.
    pub async fn close(&self) {
        let (done, finished) = oneshot::channel();
        if self.inner.commands.send(Command::Close(done)).await.is_ok() {
            let _ = finished.await;
        }
        self.inner.readers.close().await;
    }

    /// The SQLite file this log lives in.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// How many write transactions (group commits) this handle's writer has committed, and how
    /// many events they stored. appends / transactions is the average batch size.
    pub fn commit_stats(&self) -> (u64, u64) {
        let s = &self.inner.stats;
        (s.transactions.load(Ordering::Relaxed), s.appends.load(Ordering::Relaxed))
    }
}

#[async_trait]
impl EventLog for EmbeddedLog {
    fn subjects(&self) -> &Subjects {
        &self.inner.subjects
    }

    async fn append(&self, event: &Event, expect: Expect) -> Result<Appended> {
        let body = codec::encode(event)?;
        let subject = self.inner.subjects.for_event(event);
        let (reply, answer) = oneshot::channel();
        let store_by = crate::acceptance::store_by(&event.body);
        let event_id = event.event_id;
        let req =
            AppendRequest { event_id, subject, body, event: Some(Box::new(event.clone())), expect, store_by, reply };
        self.inner.commands.send(Command::Append(req)).await.map_err(|_| closed())?;
        answer.await.map_err(|_| closed())?
    }

    async fn read_subject(&self, subject: &str) -> Result<Vec<Stored>> {
        let rows = sqlx::query("SELECT seq, subject, body FROM events WHERE subject = ? ORDER BY seq")
            .bind(subject)
            .fetch_all(&self.inner.readers)
            .await
            .map_err(read_error)?;
        rows.iter().map(decode_row).collect()
    }

    async fn last_on_subject(&self, subject: &str) -> Result<Option<Stored>> {
        let row = sqlx::query("SELECT seq, subject, body FROM events WHERE subject = ? ORDER BY seq DESC LIMIT 1")
            .bind(subject)
            .fetch_optional(&self.inner.readers)
            .await
            .map_err(read_error)?;
        row.as_ref().map(decode_row).transpose()
    }

    async fn read(&self, from_seq: u64, max: usize) -> Result<Vec<Stored>> {
        read_from(&self.inner.readers, from_seq, max).await
    }

    async fn tail(&self, from_seq: u64) -> Result<BoxStream<'static, Result<Arc<Stored>>>> {
        let i = &self.inner;
        Ok(tail::follow(i.readers.clone(), i.committed.clone(), i.recent.clone(), from_seq))
    }

    async fn last_seq(&self) -> Result<u64> {
        let last: i64 = sqlx::query_scalar("SELECT COALESCE(MAX(seq), 0) FROM events")
            .fetch_one(&self.inner.readers)
            .await
            .map_err(read_error)?;
        Ok(last as u64)
    }

    async fn announce_node(&self, node: &str) -> Result<()> {
        self.inner.nodes.set_me(node);
        Ok(())
    }

    fn node_is_dead(&self, node: &str) -> bool {
        self.inner.nodes.is_dead(node)
    }

    async fn ping(&self) -> Result<()> {
        if self.inner.commands.is_closed() {
            return Err(closed());
        }
        sqlx::query("SELECT 1").execute(&self.inner.readers).await.map_err(read_error)?;
        Ok(())
    }
}

/// Connects the writer, brings the schema up to date and reads the newest sequence.
///
/// Boxed as `Send`, and calling `Executor` methods rather than sqlx's `async fn` wrappers
/// (`query(..).fetch_one(..)`), on purpose: through those wrappers rustc cannot prove sqlx's
/// higher-ranked `Executor` bounds, and `open` would not be `Send` for generic callers.
fn prepare_writer(options: SqliteConnectOptions) -> BoxFuture<'static, Result<(SqliteConnection, i64)>> {
    Box::pin(async move {
        let mut conn = options.connect().await.map_err(unavailable)?;
        let version: i64 = conn.fetch_one(sqlx::query("PRAGMA user_version")).await?.try_get(0)?;
        if version > SCHEMA_VERSION {
            return Err(Error::Config(format!(
                "{FILE_NAME} has schema version {version}, newer than this binary's {SCHEMA_VERSION}"
            )));
        }
        conn.execute(sqlx::raw_sql(SCHEMA)).await?;
        let set_version = format!("PRAGMA user_version = {SCHEMA_VERSION}");
        conn.execute(sqlx::raw_sql(&set_version)).await?;
        let last_seq: i64 =
            conn.fetch_one(sqlx::query("SELECT COALESCE(MAX(seq), 0) FROM events")).await?.try_get(0)?;
        Ok((conn, last_seq))
    })
}

/// Opening failures: the file or its directory is not usable, so the log cannot take events.
fn unavailable(e: sqlx::Error) -> Error {
    Error::Unavailable(format!("cannot open the event log: {e}"))
}
