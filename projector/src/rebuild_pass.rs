//! What both backends' rebuilds share: the chunk sizes, applying one page of the stream into a
//! scratch model (`apply_page`), and the report of a finished rebuild (`RebuildReport`).
//!
//! Deliberately no backend and no swap: `pg/rebuild.rs` and `sqlite/rebuild.rs` own their
//! scratch copies and swaps, and `rebuild.rs` picks one; this sits below all three.

use std::time::Duration;

use serde::Serialize;

use crate::bisect::{self, Sink};
use crate::dead_letter::{AsEntry, Entry};
use crate::error::{Error, Result};

/// Events per chunk while rebuilding: bigger than a live batch, since nobody waits on it.
pub(crate) const CHUNK: usize = 5_000;

/// Events per batch of PostgreSQL's bulk load into the scratch tables. Large enough that most
/// signals' whole life (sent … acked, spread over thousands of events) falls in one batch, so
/// their row is inserted complete instead of inserted and updated again; about 50 MB of
/// decoded events in memory per batch.
pub(crate) const BULK_CHUNK: usize = 50_000;

/// Applies `page`, the stream read after `applied`, to a rebuild's `sink` (dead letters met as
/// the live projector meets them); returns the sequence now applied. A stream that aged out its
/// oldest events starts later than 1; any other jump is a gap.
pub(crate) async fn apply_page<S: Sink>(sink: &mut S, page: &[Entry], applied: u64) -> Result<u64> {
    if let Some(first) = page.first() {
        if first.seq() != applied + 1 && applied != 0 {
            let read = first.seq();
            return Err(Error::Invariant(format!("stream gap: expected sequence {} but read {read}", applied + 1)));
        }
    }
    let done = bisect::apply(sink, page, applied).await?;
    Ok(done.ok_or_else(|| Error::Invariant("the scratch checkpoint moved during a rebuild".into()))?.to_seq)
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RebuildReport {
    /// Events applied into the new model.
    pub events: u64,
    /// The stream sequence the new model is at.
    pub last_seq: u64,
    #[serde(with = "secs")]
    pub elapsed: Duration,
}

impl RebuildReport {
    pub fn events_per_second(&self) -> f64 {
        self.events as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

mod secs {
    pub fn serialize<S: serde::Serializer>(d: &std::time::Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }
}
