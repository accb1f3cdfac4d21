//! The production event log: one NATS JetStream stream (file storage) holding every event under
//! `<prefix>.<tenant>.<entity>.<id>`, where the prefix is the stream name lowercased, so streams
//! with different names can share one server.
//!
//! How the trait's semantics map onto JetStream:
//! - total order and gapless sequences: the stream sequence (only `max_age` removes events);
//! - per-subject compare-and-set: the `Nats-Expected-Last-Subject-Sequence` header (`0`: the
//!   subject is empty), checked by the stream leader under its lock;
//! - idempotent retries: `Nats-Msg-Id` = event id, within the stream's duplicate window
//!   (`DUPLICATE_WINDOW`); a retry later than that is stored again;
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

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use async_nats::jetstream::consumer::{pull, AckPolicy, DeliverPolicy, PullConsumer};
use async_nats::jetstream::stream;
use async_nats::jetstream::{self, Context};
use async_trait::async_trait;
use futures::stream::BoxStream;
use futures::StreamExt;
use tokio::sync::Mutex;
use tracing::debug;

use crate::codec;
use crate::error::{Error, Result};
use crate::event::{Event, Subjects};
use crate::log::{Appended, EventLog, Expect, Stored};

mod append;
mod connect;
mod errors;
mod fanout;
mod stream_check;
mod subject_reads;
mod tail;

use errors::{no_responders, unavailable};
use subject_reads::ReadPath;

/// How long JetStream remembers an event id to drop a retried append.
const DUPLICATE_WINDOW: Duration = Duration::from_secs(120);
/// Messages asked for per pull request; bounded so one request never overflows a subscription.
const FETCH_BATCH: usize = 4096;
/// Retries of a read whose fresh consumer failed (100 ms, doubling: 3 s in all).
const READ_RETRIES: u32 = 4;
/// A read whose fetch hears nothing for this long gives up as unavailable.
const FETCH_SILENCE: Duration = Duration::from_secs(10);
/// A tail's long poll: how long one pull request waits for new events.
const TAIL_EXPIRES: Duration = Duration::from_secs(2);
/// A tail that hears nothing (not even the end of its pull request) for this long assumes its
/// consumer is gone and recreates it.
const TAIL_SILENCE: Duration = Duration::from_secs(4);
/// Ephemeral consumers the server deletes once nobody has pulled from them for this long.
const CONSUMER_IDLE: Duration = Duration::from_secs(60);

/// Which stream to use and how long it keeps events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JetStreamConfig {
    /// Stream name; its lowercase is the subject prefix.
    pub stream: String,
    /// Events older than this are removed by the server.
    pub max_age: Duration,
    /// Replicas of the stream on a clustered JetStream (1: a single server).
    pub replicas: usize,
}

impl Default for JetStreamConfig {
    fn default() -> Self {
        Self { stream: "SIGNALBUS".to_string(), max_age: Duration::from_secs(30 * 24 * 3600), replicas: 1 }
    }
}

/// The JetStream event log. Cheap to share behind an `Arc`; one NATS connection.
pub struct JetStreamLog {
    client: async_nats::Client,
    js: Context,
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

async fn consumer_from(js: &Context, stream: &str, from_seq: u64) -> Result<PullConsumer> {
    let config = pull::Config {
        deliver_policy: DeliverPolicy::ByStartSequence { start_sequence: from_seq.max(1) },
        ack_policy: AckPolicy::None,
        inactive_threshold: CONSUMER_IDLE,
        memory_storage: true,
        num_replicas: 1,
        ..Default::default()
    };
    js.create_consumer_on_stream(config, stream).await.map_err(|e| unavailable("cannot create a consumer", e))
}

/// An event as readers must see it: decoded (or reported undecodable), and voided if the stream
/// stored it after its writer's `accept_by` (`stored_at` is the stream's own timestamp).
fn stored(seq: u64, subject: &str, payload: &[u8], stored_at: time::OffsetDateTime) -> Result<Stored> {
    let event = match codec::decode(payload) {
        Ok(event) => event,
        Err(e) => return Err(Error::Undecodable { seq, subject: subject.to_string(), reason: codec::reason(e) }),
    };
    let event = match chrono::DateTime::from_timestamp(stored_at.unix_timestamp(), stored_at.nanosecond()) {
        Some(at) => event.as_stored_at(at),
        None => event,
    };
    Ok(Stored { seq, subject: subject.to_string(), event })
}

fn stored_from_consumer(msg: jetstream::Message) -> Result<Stored> {
    let info = msg.info().map_err(|e| Error::Decode(format!("consumer message metadata: {e}")))?;
    let (seq, published) = (info.stream_sequence, info.published);
    stored(seq, msg.subject.as_str(), &msg.payload, published)
}

#[async_trait]
impl EventLog for JetStreamLog {
    fn subjects(&self) -> &Subjects {
        &self.subjects
    }

    async fn append(&self, event: &Event, expect: Expect) -> Result<Appended> {
        let subject = self.subjects.for_event(event);
        let result = append::append(self, subject.clone(), event, expect).await;
        if let Err(Error::Conflict { expected, found, .. }) = &result {
            debug!(subject = %subject, expected, ?found, "append lost a compare-and-set");
        }
        result
    }

    async fn read_subject(&self, subject: &str) -> Result<Vec<Stored>> {
        subject_reads::read_subject(&self.stream, self.reads, subject).await
    }

    async fn last_on_subject(&self, subject: &str) -> Result<Option<Stored>> {
        subject_reads::last_on_subject(&self.stream, self.reads, subject).await
    }

    async fn read(&self, from_seq: u64, max: usize) -> Result<Vec<Stored>> {
        let from_seq = from_seq.max(1);
        let mut out = Vec::new();
        if max == 0 {
            return Ok(out);
        }
        let mut cursor = self.cursor.lock().await;
        // Reuse the cursor if it stands where this read starts; a failed fetch may have left it
        // anywhere, so it is then replaced, once.
        let mut fresh = false;
        // A new consumer on a replicated stream may answer "no responders" (503) until its own
        // leader is elected: a few short retries, not an outage.
        let mut retries = 0u32;
        loop {
            let connects = self.client.statistics().connects.load(Ordering::Relaxed);
            let consumer = match cursor.take() {
                Some(c) if c.reusable_at(from_seq, connects) => c.consumer,
                _ => {
                    fresh = true;
                    self.consumer_from(from_seq).await?
                }
            };
            let fetched = match Self::fetch(&consumer, max, &mut out).await {
                Ok(true) if out.len() < max && self.reads == ReadPath::Leader => {
                    self.fetch_to_leader(&consumer, from_seq, max, &mut out).await
                }
                other => other,
            };
            match fetched {
                Ok(in_step) => {
                    let next = out.last().map_or(from_seq, |s| s.seq + 1);
                    if in_step {
                        *cursor = Some(Cursor { next, consumer, connects, used: Instant::now() });
                    }
                    return Ok(out);
                }
                // Another consumer would only find it again.
                Err(e @ Error::Undecodable { .. }) => return Err(e),
                Err(e) if !fresh => {
                    debug!(error = %e, from_seq, "read cursor failed, recreating it");
                    out.clear();
                }
                Err(Error::Unavailable(ref m)) if retries < READ_RETRIES && no_responders(m) => {
                    retries += 1;
                    debug!(error = %m, from_seq, retries, "read failed on a new consumer; retrying");
                    out.clear();
                    tokio::time::sleep(Duration::from_millis(100 << retries)).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn tail(&self, from_seq: u64) -> Result<BoxStream<'static, Result<Stored>>> {
        let source =
            fanout::Source { js: self.js.clone(), client: self.client.clone(), stream: self.stream_name().to_string() };
        // Asked before the lock (it is a round trip); a stale answer only makes the upstream
        // start earlier than needed.
        let live_from = if self.fanout.lock().unwrap().as_ref().is_some_and(fanout::Fanout::is_running) {
            0
        } else {
            self.last_seq().await? + 1
        };
        let sub = {
            let mut shared = self.fanout.lock().unwrap();
            if !shared.as_ref().is_some_and(fanout::Fanout::is_running) {
                *shared = Some(fanout::Fanout::start(&source, live_from.max(1)));
            }
            shared.as_ref().map(|f| f.subscribe(source, from_seq))
        };
        let Some(sub) = sub else { return Err(Error::Unavailable("the shared tail did not start".into())) };
        Ok(futures::stream::unfold(sub, |mut s| async move { s.next_event().await.map(|item| (item, s)) }).boxed())
    }

    async fn last_seq(&self) -> Result<u64> {
        let info = self.stream.get_info().await.map_err(|e| unavailable("cannot read stream info", e))?;
        Ok(info.state.last_sequence)
    }

    async fn announce_node(&self, node: &str) -> Result<()> {
        let subject = format!("_signalbus_nodes.{}", self.stream_name());
        self.node_listener.call_once(|| {
            let (client, book, subject) = (self.client.clone(), self.nodes.clone(), subject.clone());
            tokio::spawn(async move {
                // async-nats resubscribes after a reconnect; the book notices the gap in our own beats.
                let Ok(mut sub) = client.subscribe(subject).await else { return };
                while let Some(msg) = sub.next().await {
                    if let Ok(node) = std::str::from_utf8(&msg.payload) {
                        book.heard(node);
                    }
                }
            });
        });
        self.nodes.set_me(node);
        self.client
            .publish(subject, node.to_string().into())
            .await
            .map_err(|e| unavailable("cannot announce the node", e))
    }

    fn node_is_dead(&self, node: &str) -> bool {
        self.nodes.is_dead(node)
    }

    async fn ping(&self) -> Result<()> {
        self.stream.get_info().await.map(|_| ()).map_err(|e| unavailable("stream does not answer", e))
    }
}
