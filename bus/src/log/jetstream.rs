//! The production event log: one NATS JetStream stream (file storage) holding every event under
//! `<prefix>.<tenant>.<entity>.<id>`, where the prefix is the stream name lowercased, so streams
//! with different names can share one server.
//!
//! How the trait's semantics map onto JetStream:
//! - total order and gapless sequences: the stream sequence (only `max_age` removes events);
//! - per-subject compare-and-set: the `Nats-Expected-Last-Subject-Sequence` header (`0`: the
//!   subject is empty), checked by the stream leader under its lock;
//! - idempotent retries: a conditional append's own condition (a repeat of a stored copy fails
//!   it; the event id rides in `EVENT_ID_HEADER`), an unconditional one's `Nats-Msg-Id` = event
//!   id within the stream's duplicate window (`DUPLICATE_WINDOW`; a retry later than that is
//!   stored again);
//! - reads: direct gets for one subject (the leader's message API on a replicated stream, so a
//!   writer sees its own writes: `subject_reads`), ephemeral pull consumers for batches and
//!   tails (a short page on a replicated stream is checked against the leader). The tail
//!   tracks the next stream sequence itself and recreates its consumer from there after any error,
//!   timeout, delivery gap or reconnect, so it never skips or reorders, also across a restart.
//!
//! An append's outcome is never guessed: `append.rs` resolves an unanswered publish before it
//! returns, and an `Unavailable` append is one that can never count (see there).
//!
//! Server versions: tested on Debian's nats-server 2.9.10 and on the current release (2.15.x,
//! alone and as a 3-node cluster). 2.9.10 has no per-message TTL, no atomic batch publish and
//! no `Nats-Expected-Last-Subject-Sequence-Subject`, so none are used. A clustered JetStream with
//! replicas > 1 needs nats-server >= 2.10.19 for a correct per-subject compare-and-set (older
//! leaders could accept two racing writers).
//!
//! Deliberately does not decide anything about events (the store does).

use std::time::{Duration, Instant};

use async_nats::jetstream::consumer::PullConsumer;
use async_nats::jetstream::stream;
use async_nats::jetstream::Context;
use futures::StreamExt;
use tokio::sync::Mutex;

use crate::error::{Error, Result};
use crate::event::Subjects;
use crate::log::{EventLog, Stored};

mod append;
mod connect;
mod direct;
mod errors;
mod event_log;
mod fanout;
mod firsts;
mod marks;
mod messages;
mod own;
mod recent;
mod stream_check;
mod subject_reads;
mod tail;

use errors::unavailable;
use messages::{consumer_from, stored_from_consumer, CONSUMER_IDLE, FETCH_BATCH};
use subject_reads::ReadPath;

/// How long JetStream remembers an event id to drop a retried append.
const DUPLICATE_WINDOW: Duration = Duration::from_secs(120);

/// The stream's per-subject limit: one no subject can reach, so nothing is ever dropped by it —
/// set (instead of none) for the block size it brings. A stream with any per-subject limit is
/// stored in 4 MB message blocks instead of 8 MB (nats-server's `autoTuneFileStorageBlockSize`,
/// 2.9 to 2.14 alike), and on 2.9 the newest block's write cache, which a reader of the stream
/// keeps from being dropped after each flush, grows by reallocation to the block's size: every
/// reallocation copies what the block holds while appends wait, so the late appends at 5,000/s
/// halve with the block (docs/performance.md, "2.9.10's late appends are its write cache").
/// Takes effect for a stream created with it, and for an existing one when its server restarts.
const PER_SUBJECT_LIMIT: i64 = i64::MAX;
/// The header carrying a conditional append's event id: not `Nats-Msg-Id`, which would cost
/// the server a duplicate-window entry per send that the condition makes useless (`append.rs`).
const EVENT_ID_HEADER: &str = "Signalbus-Event-Id";
/// Retries of a read whose fresh consumer failed (100 ms, doubling: 3 s in all).
const READ_RETRIES: u32 = 4;
/// A read whose fetch hears nothing for this long gives up as unavailable.
const FETCH_SILENCE: Duration = Duration::from_secs(10);

/// Which stream to use and how long it keeps events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JetStreamConfig {
    /// Stream name; its lowercase is the subject prefix.
    pub stream: String,
    /// Events older than this are removed by the server.
    pub max_age: Duration,
    /// Replicas of the stream on a clustered JetStream (1: a single server).
    pub replicas: usize,
    /// On nats-server 2.9, a subject read starts at a time mark only if that skips at least
    /// this many events (`marks.rs`; tests lower it to see marks used on a short stream).
    pub min_mark_skip: u64,
}

impl Default for JetStreamConfig {
    fn default() -> Self {
        Self {
            stream: "SIGNALBUS".to_string(),
            max_age: Duration::from_secs(30 * 24 * 3600),
            replicas: 1,
            min_mark_skip: marks::WORTH_SKIPPING,
        }
    }
}

/// The JetStream event log. Cheap to share behind an `Arc`; one NATS connection.
pub struct JetStreamLog {
    client: async_nats::Client,
    js: Context,
    /// How many times the connection has dropped so far (`connect.rs`).
    drops: tokio::sync::watch::Receiver<u64>,
    stream: stream::Stream,
    subjects: Subjects,
    /// Who answers subject reads and vouches for a short page: the leader on a replicated
    /// stream, where a follower may lag (see `subject_reads`).
    reads: ReadPath,
    /// The consumer the last `read` left positioned at the next sequence, so a reader paging
    /// through the stream (the projector) pays for one consumer, not one per page.
    cursor: Mutex<Option<Cursor>>,
    /// Gateways heard on the node subject (see `log::nodes`); listened to from the first
    /// announcement on.
    nodes: std::sync::Arc<crate::log::nodes::NodeBook>,
    node_listener: std::sync::Once,
    /// The upstream every `tail` of this log shares, started by the first one.
    fanout: std::sync::Mutex<Option<fanout::Fanout>>,
    /// The events this log is publishing, handed to the shared upstream instead of a decode.
    own: std::sync::Arc<own::OwnEvents>,
    /// Where recently used subjects begin, so reading one again starts there (`firsts.rs`).
    firsts: firsts::Firsts,
    /// Recently read subjects' events, answered while the subject's newest event is unchanged
    /// (`recent.rs`).
    recent: recent::Recent,
    /// Time → sequence bounds, so a subject read starts near its first event (`marks.rs`).
    marks: std::sync::Arc<marks::Marks>,
    /// Whether the server walks message blocks one by one from where a subject read starts
    /// (nats-server before 2.10), which makes starting at a mark worth it.
    walks_blocks: bool,
    /// `JetStreamConfig::min_mark_skip`.
    min_mark_skip: u64,
}

/// A `read` consumer standing at `next`. A fetch from a consumer the server no longer has
/// (lost in a restart, or deleted after `CONSUMER_IDLE`) is not refused but goes unanswered,
/// so a cursor that may be gone is not reused at all.
struct Cursor {
    next: u64,
    consumer: PullConsumer,
    connects: u64,
    used: Instant,
}

impl Cursor {
    fn reusable_at(&self, from_seq: u64, connects: u64) -> bool {
        self.next == from_seq && self.connects == connects && self.used.elapsed() < CONSUMER_IDLE / 2
    }
}

impl std::fmt::Debug for JetStreamLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JetStreamLog").field("stream", &self.stream.cached_info().config.name).finish()
    }
}

impl JetStreamLog {
    /// Flushes and drops the connection.
    pub async fn close(self) {
        let _ = self.client.flush().await;
        let _ = self.client.drain().await;
    }

    /// How many events the shared tail took from this log's own appends instead of decoding
    /// them (`own.rs`).
    pub fn own_events_reused(&self) -> u64 {
        self.own.taken()
    }

    fn stream_name(&self) -> &str {
        &self.stream.cached_info().config.name
    }

    /// An ephemeral pull consumer over the whole stream starting at `from_seq`. No acks: the
    /// reader tracks its own position.
    async fn consumer_from(&self, from_seq: u64) -> Result<PullConsumer> {
        consumer_from(&self.js, self.stream_name(), from_seq).await
    }

    /// Up to `max` events from an existing consumer; fewer only when the stream has no more, or
    /// when an undecodable event comes next. `Ok(false)` when it stopped short of one: the
    /// consumer is past it then, so it no longer stands after `out`. An undecodable first event
    /// is the error.
    async fn fetch(consumer: &PullConsumer, max: usize, out: &mut Vec<Stored>) -> Result<bool> {
        while out.len() < max {
            let want = (max - out.len()).min(FETCH_BATCH);
            // No `expires`: on nats-server 2.9 a no-wait fetch with one waits the whole expiry
            // when nothing is pending. Without it the server ends the fetch at once ("no
            // messages"); the timeout below only guards against a connection lost mid-fetch.
            let mut batch = consumer
                .fetch()
                .max_messages(want)
                .messages()
                .await
                .map_err(|e| unavailable("cannot read the stream", e))?;
            let mut got = 0;
            loop {
                let msg = match tokio::time::timeout(FETCH_SILENCE, batch.next()).await {
                    Ok(Some(msg)) => msg.map_err(|e| unavailable("cannot read the stream", e))?,
                    Ok(None) => break,
                    Err(_) => return Err(Error::Unavailable("the stream stopped answering a read".into())),
                };
                match stored_from_consumer(msg) {
                    Ok(stored) => out.push(stored),
                    Err(e @ Error::Undecodable { .. }) if out.is_empty() => return Err(e),
                    Err(Error::Undecodable { .. }) => return Ok(false),
                    Err(e) => return Err(e),
                }
                got += 1;
            }
            if got < want {
                break;
            }
        }
        Ok(true)
    }
}

impl JetStreamLog {
    /// A short page is "the stream has no more" only if the leader agrees: an ephemeral
    /// consumer of a replicated stream may sit on a follower that has not yet applied what the
    /// leader acknowledged. Keeps fetching until the page reaches the leader's last sequence
    /// (or `max`); a follower that stays behind for `FETCH_SILENCE` is an outage.
    async fn fetch_to_leader(
        &self,
        consumer: &PullConsumer,
        from: u64,
        max: usize,
        out: &mut Vec<Stored>,
    ) -> Result<bool> {
        let deadline = Instant::now() + FETCH_SILENCE;
        let last = self.last_seq().await?;
        let end = last.min(from + max as u64 - 1);
        while out.last().map_or(from - 1, |s| s.seq) < end {
            if Instant::now() > deadline {
                return Err(Error::Unavailable("a stream replica stayed behind its leader".into()));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
            if !Self::fetch(consumer, max, out).await? {
                // Stopped short of an undecodable event: the page ends there, as on one server.
                return Ok(false);
            }
        }
        Ok(true)
    }
}
