//! Applies a run of entries so that no event can halt projection: the whole run as one batch
//! first; if the database refuses it on its data (`dead_letter::is_data_error`), each half on
//! its own, down to the single event that fails, which is recorded as a dead letter and skipped.
//! Every other failure (the database unavailable) is returned, for the caller to retry.
//!
//! Why halves: a batch is all or nothing, and a rebuild's batches hold 50,000 events, so one
//! bad event costs about 2·log₂(n) attempts instead of n. Why this is deterministic: a batch
//! yields the same rows however the stream is split into batches, so whether an event fails
//! depends on the event and the rows before it, never on which batch it came in — the live
//! projector and a rebuild dead-letter the same events.
//!
//! A batch first inserts its sends without a conflict arm (an upsert costs PostgreSQL ~20 % more
//! per row: a speculative insertion and its confirmation); the rows cannot exist past the
//! checkpoint's compare-and-set, and if one ever does, the batch is applied again with the arm,
//! so a stamp on it is never dropped.
//!
//! Deliberately knows nothing of transactions: the `Sink` applies one batch all or nothing.

use async_trait::async_trait;

use crate::batch::Batch;
use crate::dead_letter::{is_data_error, is_unique_violation, AsEntry, DeadLetter};
use crate::error::Result;
use crate::metrics;

/// Where batches go: the live read models, or a rebuild's scratch copy.
#[async_trait]
pub(crate) trait Sink: Send {
    /// Applies `batch` on top of checkpoint `expected`, all or nothing; `Ok(false)` (nothing
    /// written) when the checkpoint was not `expected`.
    async fn apply(&mut self, batch: &Batch, expected: u64) -> Result<bool>;
}

/// What a run of entries did.
#[derive(Debug, Default)]
pub(crate) struct Applied {
    /// The checkpoint after the run.
    pub to_seq: u64,
    /// Events applied to the read models.
    pub events: usize,
    /// Events skipped as dead letters.
    pub dead: usize,
}

/// Applies `entries` (consecutive, oldest first) on top of checkpoint `expected`. `Ok(None)`
/// when the checkpoint was not where expected (what was applied before that stays applied).
pub(crate) async fn apply<S: Sink, T: AsEntry>(sink: &mut S, entries: &[T], expected: u64) -> Result<Option<Applied>> {
    let mut done = Applied { to_seq: expected, ..Applied::default() };
    // The parts still to apply, the next one last.
    let mut todo: Vec<&[T]> = vec![entries];
    while let Some(part) = todo.pop() {
        if part.is_empty() {
            continue;
        }
        let mut batch = Batch::fold(part);
        let failed = loop {
            match sink.apply(&batch, done.to_seq).await {
                Ok(true) => break None,
                Ok(false) => return Ok(None),
                Err(e) if is_unique_violation(&e) && !batch.sent_may_exist => {
                    tracing::warn!(from_seq = batch.from_seq, to_seq = batch.to_seq, error = %e,
                        "a sent signal's row already existed; applying the batch again with the conflict arm");
                    batch.sent_may_exist = true;
                }
                Err(e) if is_data_error(&e) => break Some(e),
                Err(e) => return Err(e),
            }
        };
        let Some(failed) = failed else {
            record(&mut done, &batch);
            continue;
        };
        if part.len() > 1 {
            tracing::warn!(from_seq = batch.from_seq, to_seq = batch.to_seq, error = %failed,
                "a batch failed on its data; applying it in halves to find the event");
            let (first, second) = part.split_at(part.len() / 2);
            todo.push(second);
            todo.push(first);
            continue;
        }
        let dead = match part[0].entry() {
            Ok(stored) => DeadLetter::of(stored, &failed.to_string()),
            Err(dead) => {
                DeadLetter { reason: format!("{}; recording it failed: {failed}", dead.reason), ..dead.clone() }
            }
        };
        let only = Batch::dead_letter(dead);
        if !sink.apply(&only, done.to_seq).await? {
            return Ok(None);
        }
        record(&mut done, &only);
    }
    Ok(Some(done))
}

fn record(done: &mut Applied, batch: &Batch) {
    done.to_seq = batch.to_seq;
    done.events += batch.applied_events();
    done.dead += batch.dead_letters.len();
    for dead in &batch.dead_letters {
        metrics::dead_lettered(dead);
    }
}
