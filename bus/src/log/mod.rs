//! The event log: one trait, two backends with identical semantics — JetStream for production
//! (`jetstream.rs`) and a local SQLite file for the embedded mode (`embedded/`).
//!
//! Semantics every backend keeps (the conformance suite in `tests/log_conformance.rs` checks them):
//! - one total order: every stored event gets the next stream sequence, from 1, without gaps;
//! - `Expect::LastSubjectSeq(n)` stores the event only if the subject's newest event has
//!   sequence `n` (`0`: the subject is empty); otherwise `Error::Conflict` and nothing is stored;
//! - an event whose `event_id` was already stored, appended again with the same expectation (a
//!   retried append), is not stored again: the append answers with the original sequence and
//!   `duplicate: true` (a conditional repeat while its copy is the subject's newest, or after an
//!   unanswered attempt of the same call; later than that its condition simply fails);
//! - `tail(from)` yields every event with sequence ≥ `from`, in order, without gaps, including
//!   ones appended after the call;
//! - an event that cannot be decoded (corrupt, or written by another program) never stops a
//!   reader: `tail` yields it as `Error::Undecodable { seq, .. }` once and goes on after it;
//!   `read` stops short before it, and a `read` starting at it fails with that error, so the
//!   reader can record it and read on from `seq + 1`.
//!
//! Deliberately does not decide anything about signals (`store.rs` and `signal.rs` do).

use std::sync::Arc;

use async_trait::async_trait;
use futures::stream::BoxStream;

use crate::error::Result;
use crate::event::{Event, Subjects};

pub mod embedded;
pub mod jetstream;
pub mod nodes;

/// A compare-and-set condition on the event's subject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    Any,
    /// The subject's newest stored event has this sequence (0: the subject has none).
    LastSubjectSeq(u64),
}

/// Where an append landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    pub seq: u64,
    /// The event id had been stored before; nothing new was stored.
    pub duplicate: bool,
}

/// An event as read back from the log.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    pub seq: u64,
    pub subject: String,
    pub event: Event,
}

#[async_trait]
pub trait EventLog: Send + Sync + std::fmt::Debug + 'static {
    /// The subject scheme of this log.
    fn subjects(&self) -> &Subjects;

    /// Appends one event under its subject, if `expect` holds.
    async fn append(&self, event: &Event, expect: Expect) -> Result<Appended>;

    /// Every event stored under `subject`, oldest first.
    async fn read_subject(&self, subject: &str) -> Result<Vec<Stored>>;

    /// Every event stored under `subject` from about `born` on: a backend may start its search
    /// shortly before that instant (the subject's first event was made then by the writer's
    /// clock, e.g. a v7 id's time). When `born` is wrong (a clock far off) the answer may miss
    /// the subject's first events, so a caller checks the first event it gets and otherwise
    /// reads with `read_subject`. Backends that find a subject's events by an index ignore it.
    async fn read_subject_born(&self, subject: &str, born: chrono::DateTime<chrono::Utc>) -> Result<Vec<Stored>> {
        let _ = born;
        self.read_subject(subject).await
    }

    /// Every event stored under `subject` with a sequence above `after`, oldest first: the rest
    /// of a subject whose start is known (a signal's events after its gathered send).
    async fn read_subject_after(&self, subject: &str, after: u64) -> Result<Vec<Stored>> {
        let mut stored = self.read_subject(subject).await?;
        stored.retain(|s| s.seq > after);
        Ok(stored)
    }

    /// The newest event stored under `subject`, if any. O(1): used to assign per-plugin seqs.
    async fn last_on_subject(&self, subject: &str) -> Result<Option<Stored>>;

    /// Up to `max` events with sequence ≥ `from_seq`, in order.
    async fn read(&self, from_seq: u64, max: usize) -> Result<Vec<Stored>>;

    /// Every event with sequence ≥ `from_seq`, forever: first what is stored, then what comes.
    /// Shared, not owned: the tails of one process (gateway, projector, sweeper) are handed the
    /// same event rather than a copy each.
    async fn tail(&self, from_seq: u64) -> Result<BoxStream<'static, Result<Arc<Stored>>>>;

    /// The sequence of the newest stored event (0 when empty).
    async fn last_seq(&self) -> Result<u64>;

    /// Whether the backing store answers.
    async fn ping(&self) -> Result<()>;

    /// Announces that gateway `node` is alive (see `nodes.rs`); nothing is stored.
    async fn announce_node(&self, node: &str) -> Result<()>;

    /// Whether gateway `node` is known to be dead (unheard past `nodes::NODE_SILENCE`).
    fn node_is_dead(&self, node: &str) -> bool;
}

pub type SharedLog = Arc<dyn EventLog>;
