//! Dead letters: events the projector cannot apply. Each is recorded in
//! `projection_dead_letters` with the reason, counted, logged, and skipped — the checkpoint moves
//! past it — so one bad event never halts the read models of every tenant. Skipping is
//! deterministic (the same event fails the same way wherever it is applied), so a rebuild meets
//! and records the same dead letters as the live projector.
//!
//! This file holds the dead letter itself, the entries the projector folds (an event, or one
//! already known to be dead: undecodable on the stream), and the line between a failure that is
//! the data's fault (dead-letter it) and one that is the database's (retry). Deliberately not
//! where dead letters are found: `batch.rs` refuses what it can see is unstorable, `bisect.rs`
//! isolates what the database refuses.

use std::sync::Arc;

use bus::log::{SharedLog, Stored};
use serde::Serialize;

use crate::encode;
use crate::error::{Error, Result};

/// `event_type` of an event that could not be decoded.
pub const UNKNOWN_TYPE: &str = "unknown";

/// Longest `reason` kept (a database message can quote a lot).
const MAX_REASON_CHARS: usize = 1_000;

/// An event the projector skipped, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeadLetter {
    pub seq: u64,
    pub subject: String,
    pub event_type: String,
    pub reason: String,
}

impl DeadLetter {
    /// Every field through the projector's text encoding: a dead letter must always be storable.
    pub(crate) fn new(seq: u64, subject: &str, event_type: &str, reason: &str) -> DeadLetter {
        let reason: String = reason.chars().take(MAX_REASON_CHARS).collect();
        DeadLetter {
            seq,
            subject: encode::text(subject),
            event_type: encode::text(event_type),
            reason: encode::text(&reason),
        }
    }

    pub(crate) fn of(stored: &Stored, reason: &str) -> DeadLetter {
        DeadLetter::new(stored.seq, &stored.subject, stored.event.type_name(), reason)
    }
}

/// One stream position as the projector folds it: an event as the tail shares it.
#[derive(Debug, Clone)]
pub(crate) enum Entry {
    Event(Arc<Stored>),
    /// Known dead before folding: the stream could not decode it.
    Dead(DeadLetter),
}

impl Entry {
    /// The events this entry stands for in a batch's size: a gathered event's entries (sends or
    /// ack batches), one otherwise.
    pub(crate) fn weight(&self) -> usize {
        match self {
            Entry::Event(stored) => stored.event.body.entries(),
            Entry::Dead(_) => 1,
        }
    }
}

/// What `Batch::fold` reads: plain events (`ReadModels::apply_stored`) or entries.
pub(crate) trait AsEntry: Sync {
    fn entry(&self) -> std::result::Result<&Stored, &DeadLetter>;

    fn seq(&self) -> u64 {
        match self.entry() {
            Ok(s) => s.seq,
            Err(d) => d.seq,
        }
    }
}

impl AsEntry for Stored {
    fn entry(&self) -> std::result::Result<&Stored, &DeadLetter> {
        Ok(self)
    }
}

impl AsEntry for Entry {
    fn entry(&self) -> std::result::Result<&Stored, &DeadLetter> {
        match self {
            Entry::Event(s) => Ok(s),
            Entry::Dead(d) => Err(d),
        }
    }
}

/// An item of a tail as an entry: an undecodable event is a dead letter, any other error stays one.
pub(crate) fn entry_of(item: bus::Result<Arc<Stored>>) -> bus::Result<Entry> {
    match item {
        Ok(stored) => Ok(Entry::Event(stored)),
        Err(bus::Error::Undecodable { seq, subject, reason }) => Ok(Entry::Dead(undecodable(seq, &subject, &reason))),
        Err(e) => Err(e),
    }
}

fn undecodable(seq: u64, subject: &str, reason: &str) -> DeadLetter {
    DeadLetter::new(seq, subject, UNKNOWN_TYPE, &format!("the event cannot be decoded: {reason}"))
}

/// Up to `max` entries from `from` (`EventLog::read`, with an undecodable event as a dead letter).
pub(crate) async fn read_entries(log: &SharedLog, from: u64, max: usize) -> Result<Vec<Entry>> {
    match log.read(from, max).await {
        Ok(page) => Ok(page.into_iter().map(|s| Entry::Event(Arc::new(s))).collect()),
        Err(bus::Error::Undecodable { seq, subject, reason }) => {
            Ok(vec![Entry::Dead(undecodable(seq, &subject, &reason))])
        }
        Err(e) => Err(e.into()),
    }
}

/// Whether a batch failed on a unique key that already held a row: the plain insert of a send
/// the read models already had, which `bisect` retries once with the conflict arm.
pub(crate) fn is_unique_violation(e: &Error) -> bool {
    matches!(e, Error::Database(sqlx::Error::Database(db)) if db.is_unique_violation())
}

/// Whether a failed batch failed on its data (so retrying the same batch fails again) rather than
/// on the database being unavailable. PostgreSQL: SQLSTATE class 22 (data exception: bad JSON,
/// a timestamp out of range, a value too long), 23 (integrity constraint), 21 (cardinality:
/// one upsert meeting the same row twice, which only a foreign writer's duplicate ids cause)
/// and 54 (a limit a value exceeds: an index row too large for a huge name, JSON nested past
/// the stack). SQLite: a constraint, a value too big, a type mismatch or an out-of-range
/// parameter. And any value the driver itself refuses to encode.
///
/// A bug that failed every batch this way would dead-letter every event; that is still better
/// than halting, since a fixed binary's `signalbus admin rebuild` applies them all again.
pub(crate) fn is_data_error(e: &Error) -> bool {
    match e {
        Error::Database(sqlx::Error::Database(db)) => {
            let code = db.code().unwrap_or_default();
            if db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>().is_some() {
                ["21", "22", "23", "54"].iter().any(|class| code.starts_with(class))
            } else {
                code.parse::<i32>().is_ok_and(|c| matches!(c & 0xff, 18 | 19 | 20 | 25))
            }
        }
        Error::Database(sqlx::Error::Encode(_)) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dead_letter_is_always_storable() {
        let d = DeadLetter::new(7, "s\0", "t\0", &"r\0".repeat(2 * MAX_REASON_CHARS));
        assert!(!format!("{}{}{}", d.subject, d.event_type, d.reason).contains('\0'));
        assert_eq!(d.reason.chars().count(), MAX_REASON_CHARS);
    }

    #[test]
    fn unavailability_is_not_the_data_s_fault() {
        assert!(!is_data_error(&Error::Database(sqlx::Error::PoolTimedOut)));
        assert!(!is_data_error(&Error::Invariant("x".into())));
        assert!(is_data_error(&Error::Database(sqlx::Error::Encode("out of range".into()))));
    }
}
