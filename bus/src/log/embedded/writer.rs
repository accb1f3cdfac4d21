//! The single writer of the embedded log: drains queued appends into one SQLite transaction
//! (group commit), decides each one's dedupe and compare-and-set in arrival order, assigns
//! sequences, commits once, then answers every request and wakes the tails.
//!
//! Deliberately does not read for callers (the read pool in `mod.rs` does) and does not encode
//! events (callers encode before queueing, so that CPU work is spread over their tasks).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use sqlx::{Connection, QueryBuilder, Row, Sqlite, SqliteConnection};
use tokio::sync::{mpsc, oneshot, watch};
use tracing::{debug, info, warn};
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::event::Event;
use crate::log::{Appended, Expect, Stored};
use crate::sqlite_wal::Checkpointer;

use super::durability::WalSync;
use super::recent::Recent;

/// Most appends committed in one transaction. Bounds the time a batch holds the write lock and
/// the memory of one batch; under load batches fill up to this and throughput is fsync-bound.
pub(super) const MAX_BATCH: usize = 1_000;

/// Rows per multi-row INSERT. 5 binds per row keeps a full chunk at 1,000 bind variables, far
/// below SQLite's limit, and a constant chunk size lets the statement cache reuse one plan.
const INSERT_CHUNK: usize = 200;

/// Binds per `IN (...)` lookup.
const LOOKUP_CHUNK: usize = 500;

/// One append waiting for the writer. The event is already encoded.
#[derive(Debug)]
pub(super) struct AppendRequest {
    pub event_id: Uuid,
    pub subject: String,
    pub body: Vec<u8>,
    /// The event `body` was encoded from, moved to the tails once stored (`recent.rs`).
    pub event: Option<Box<Event>>,
    pub expect: Expect,
    /// The event's own deadline (`acceptance::store_by`): committed at or after it, it would not
    /// count, so it is refused instead (`Error::TooLate`).
    pub store_by: Option<chrono::DateTime<chrono::Utc>>,
    pub reply: oneshot::Sender<Result<Appended>>,
}

#[derive(Debug)]
pub(super) enum Command {
    Append(AppendRequest),
    /// Finish what was queued before this, checkpoint the WAL, close the connection, answer.
    Close(oneshot::Sender<()>),
}

/// Counters the writer keeps, readable without a round trip to it.
#[derive(Debug, Default)]
pub(super) struct Stats {
    pub transactions: AtomicU64,
    pub appends: AtomicU64,
}

/// The answer every request gets once the writer is gone.
pub(super) fn closed() -> Error {
    Error::Unavailable("event log is closed".into())
}

#[derive(Debug)]
pub(super) struct Writer {
    pub conn: SqliteConnection,
    pub rx: mpsc::Receiver<Command>,
    /// The newest committed sequence, published after each commit for the tails.
    pub committed: watch::Sender<u64>,
    /// The newest committed events, for this process's tails.
    pub recent: Arc<Recent>,
    pub stats: Arc<Stats>,
    /// Syncs what was committed without a flush of its own (`Durability::Within`).
    pub wal_sync: WalSync,
    /// Folds the WAL back into the main file beside the writer; stopped before its last fold.
    pub checkpointer: Option<Checkpointer>,
}

impl Writer {
    pub async fn run(mut self) {
        let mut queued = Vec::with_capacity(MAX_BATCH);
        let closers = loop {
            // `recv_many` waits for one command and then takes whatever else is already queued:
            // requests that arrived while the previous batch was committing form the next batch.
            let received = match self.wal_sync.deadline() {
                None => self.rx.recv_many(&mut queued, MAX_BATCH).await,
                Some(due) => match tokio::time::timeout_at(due, self.rx.recv_many(&mut queued, MAX_BATCH)).await {
                    Ok(received) => received,
                    Err(_) => {
                        self.wal_sync.sync(); // idle with commits not yet on the disk
                        continue;
                    }
                },
            };
            if received == 0 {
                break Vec::new(); // every handle dropped without `close`
            }
            let mut batch = Vec::with_capacity(queued.len());
            let mut closers = Vec::new();
            for command in queued.drain(..) {
                match command {
                    Command::Append(req) if closers.is_empty() => batch.push(req),
                    Command::Append(req) => {
                        let _ = req.reply.send(Err(closed()));
                    }
                    Command::Close(done) => closers.push(done),
                }
            }
            if !batch.is_empty() {
                self.commit_batch(batch).await;
            }
            if !closers.is_empty() {
                break closers;
            }
        };
        self.shutdown().await;
        for done in closers {
            let _ = done.send(());
        }
    }

    async fn commit_batch(&mut self, mut batch: Vec<AppendRequest>) {
        match self.try_commit(&batch).await {
            Ok((outcomes, last_seq)) => {
                let stored = outcomes.iter().filter(|o| matches!(o, Ok(a) if !a.duplicate)).count();
                self.stats.transactions.fetch_add(1, Ordering::Relaxed);
                self.stats.appends.fetch_add(stored as u64, Ordering::Relaxed);
                debug!(batch = batch.len(), stored, last_seq, "group commit");
                // Kept for the tails before the new sequence is published, so a tail woken by
                // it finds the events in the ring.
                self.recent.push(batch.iter_mut().zip(&outcomes).filter_map(|(req, outcome)| match outcome {
                    Ok(a) if !a.duplicate => for_tails(a.seq, req),
                    _ => None,
                }));
                // Published before anyone is answered, so a caller that appends and then tails
                // or reads always finds its own event.
                self.committed.send_if_modified(|seen| {
                    let moved = *seen != last_seq;
                    *seen = last_seq;
                    moved
                });
                for (req, outcome) in batch.into_iter().zip(outcomes) {
                    let _ = req.reply.send(outcome);
                }
                self.wal_sync.committed();
            }
            Err(e) => {
                // The transaction rolled back: nothing of this batch is stored, so every caller
                // may safely retry (the event id dedupes it if a retry races a later success).
                warn!(error = %e, batch = batch.len(), "group commit failed, batch rejected");
                for req in batch {
                    let _ =
                        req.reply.send(Err(Error::Unavailable(format!("event log could not store the event: {e}"))));
                }
            }
        }
    }

    /// Decides and stores one batch in one transaction. Returns each request's outcome, in
    /// order, and the newest sequence after the batch.
    async fn try_commit(&mut self, batch: &[AppendRequest]) -> Result<(Vec<Result<Appended>>, u64)> {
        // IMMEDIATE takes the write lock up front: the sequence read below then stays the
        // newest until commit, even if some other process opened the same file.
        let mut tx = self.conn.begin_with("BEGIN IMMEDIATE").await?;
        let mut last: u64 =
            sqlx::query_scalar::<_, i64>("SELECT COALESCE(MAX(seq), 0) FROM events").fetch_one(&mut *tx).await? as u64;

        let mut known_ids = lookup_event_ids(&mut tx, batch).await?;
        let mut subject_last = lookup_subjects(&mut tx, batch).await?;

        // The commit happens after this instant, so a deadline not after it is surely missed.
        let now = chrono::Utc::now();
        let mut outcomes = Vec::with_capacity(batch.len());
        let mut rows: Vec<(u64, &AppendRequest)> = Vec::with_capacity(batch.len());
        for req in batch {
            // Dedupe before compare-and-set, as JetStream does: a retried append whose first
            // attempt was stored must get that sequence back, not a conflict with itself.
            if let Some(&seq) = known_ids.get(&req.event_id) {
                outcomes.push(Ok(Appended { seq, duplicate: true }));
                continue;
            }
            if req.store_by.is_some_and(|by| by <= now) {
                outcomes.push(Err(Error::TooLate));
                continue;
            }
            if let Expect::LastSubjectSeq(expected) = req.expect {
                let found = subject_last.get(req.subject.as_str()).copied().unwrap_or(0);
                if found != expected {
                    outcomes.push(Err(Error::Conflict { subject: req.subject.clone(), expected, found: Some(found) }));
                    continue;
                }
            }
            last += 1;
            known_ids.insert(req.event_id, last);
            subject_last.insert(req.subject.as_str(), last);
            rows.push((last, req));
            outcomes.push(Ok(Appended { seq: last, duplicate: false }));
        }

        let stored_at = now.timestamp_millis();
        for chunk in rows.chunks(INSERT_CHUNK) {
            let mut qb = QueryBuilder::<Sqlite>::new("INSERT INTO events (seq, subject, event_id, body, stored_at) ");
            qb.push_values(chunk, |mut row, (seq, req)| {
                row.push_bind(*seq as i64)
                    .push_bind(req.subject.as_str())
                    .push_bind(req.event_id)
                    .push_bind(req.body.as_slice())
                    .push_bind(stored_at);
            });
            // Only full chunks have a recurring shape worth a cached statement.
            qb.build().persistent(chunk.len() == INSERT_CHUNK).execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok((outcomes, last))
    }

    async fn shutdown(mut self) {
        // Refuse what is still queued (their callers get `closed()` when the replies drop).
        self.rx.close();
        if let Some(checkpointer) = self.checkpointer.take() {
            checkpointer.stop().await; // a checkpoint of its own would make this one busy
        }
        // Folding the WAL back into the main file leaves one self-contained file behind.
        if let Err(e) = sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)").execute(&mut self.conn).await {
            warn!(error = %e, "wal checkpoint on close failed");
        }
        if let Err(e) = self.conn.close().await {
            warn!(error = %e, "closing the event log writer failed");
        }
        info!(
            transactions = self.stats.transactions.load(Ordering::Relaxed),
            appends = self.stats.appends.load(Ordering::Relaxed),
            "embedded event log writer stopped"
        );
    }
}

/// What a tail reads for a stored request: its sequence, subject and event, and its size.
fn for_tails(seq: u64, req: &mut AppendRequest) -> Option<(Arc<Stored>, usize)> {
    let stored = Stored { seq, subject: req.subject.clone(), event: *req.event.take()? };
    Some((Arc::new(stored), req.body.len()))
}

/// Which of the batch's event ids are already stored, and under which sequence.
async fn lookup_event_ids(conn: &mut SqliteConnection, batch: &[AppendRequest]) -> Result<HashMap<Uuid, u64>> {
    let ids: Vec<Uuid> = batch.iter().map(|r| r.event_id).collect();
    let mut known = HashMap::new();
    for chunk in ids.chunks(LOOKUP_CHUNK) {
        let mut qb = QueryBuilder::<Sqlite>::new("SELECT event_id, seq FROM events WHERE event_id IN (");
        let mut list = qb.separated(", ");
        for id in chunk {
            list.push_bind(*id);
        }
        qb.push(")");
        for row in qb.build().persistent(false).fetch_all(&mut *conn).await? {
            known.insert(row.try_get::<Uuid, _>(0)?, row.try_get::<i64, _>(1)? as u64);
        }
    }
    Ok(known)
}

/// The newest stored sequence of every subject a compare-and-set in the batch names. Subjects
/// with no events are absent (their last sequence is 0).
async fn lookup_subjects<'a>(conn: &mut SqliteConnection, batch: &'a [AppendRequest]) -> Result<HashMap<&'a str, u64>> {
    let mut subjects: Vec<&'a str> =
        batch.iter().filter(|r| matches!(r.expect, Expect::LastSubjectSeq(_))).map(|r| r.subject.as_str()).collect();
    subjects.sort_unstable();
    subjects.dedup();
    let mut last = HashMap::with_capacity(subjects.len());
    for chunk in subjects.chunks(LOOKUP_CHUNK) {
        // One descending probe of the (subject, seq) index per subject, however many events the
        // subject holds (a busy plugin's subject can hold millions).
        let mut qb = QueryBuilder::<Sqlite>::new(
            "SELECT s.column1, (SELECT seq FROM events WHERE subject = s.column1 ORDER BY seq DESC LIMIT 1) \
             FROM (VALUES ",
        );
        let mut list = qb.separated(", ");
        for subject in chunk {
            list.push("(").push_bind_unseparated(*subject).push_unseparated(")");
        }
        qb.push(") AS s");
        for row in qb.build().persistent(false).fetch_all(&mut *conn).await? {
            let subject: String = row.try_get(0)?;
            let Some(seq) = row.try_get::<Option<i64>, _>(1)? else { continue };
            if let Ok(i) = chunk.binary_search(&subject.as_str()) {
                last.insert(chunk[i], seq as u64);
            }
        }
    }
    Ok(last)
}
