//! Where in the stream a moment lies: a sparse map from wall-clock time to a stream sequence
//! stored no later than it, so reading a subject whose first event is known to be younger than
//! some instant (a signal's v7 id carries the millisecond it was made) starts near that event
//! instead of at sequence 1.
//!
//! Why: nats-server 2.9 answers "the next message on this subject from sequence N" by visiting
//! every message block from N on, so a read from 1 costs the server the whole stream — 30 days
//! of it by default — and every recall by id, HTTP ack or expiry without a hint paid it
//! (docs/performance.md, "Reading a subject from a mark"). 2.10 and later jump to the subject's
//! first block from sequence 1 by themselves, so the log asks for marks only on 2.9.
//!
//! Marks come from this process's own appends (the answer's sequence, stamped with the clock
//! after the answer: the stream stored it no later, clocks agreeing) and from probes of the
//! stream's history when the log opens (the stored message's own timestamp). A mark is only
//! ever a lower bound, and callers still check what they read (`SignalStore::load` reads the
//! whole subject when the first event it finds is not the signal's first), so a clock that is
//! off by more than the margin costs a second read, never a wrong answer.
//!
//! Deliberately no I/O and no JetStream types: the log feeds it and asks it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Mutex;

use chrono::{DateTime, Utc};

/// A bound is taken this long before the instant asked about: the writer's and the stream's
/// clocks may disagree (appends already count on them agreeing within a second:
/// `append::SKEW_MARGIN`), and a mark from an append is stamped after the answer.
pub(super) const MARGIN_MS: i64 = 10 * 1000;
/// By default a subject read starts at a mark only if that skips at least this many events (about 20 of
/// nats-server 2.9's 16 MiB blocks of bus events): a start inside a block may cost the server
/// a linear scan of the rest of that block, which only a long skip pays for (measured:
/// docs/performance.md, "Reading a subject from a mark").
pub(super) const WORTH_SKIPPING: u64 = 1_000_000;
/// Appends leave at most one mark per this many milliseconds: a start close before a signal
/// keeps short the linear scan 2.9 may make of the rest of the start's block.
const SPACING_MS: i64 = 100;
/// The most marks kept (~5 MB). When full, every other mark of the older half goes: recent
/// marks stay dense, old ones thin out, so coverage reaches back however long the log runs.
const MAX_MARKS: usize = 200_000;

/// Time (unix milliseconds) → the highest sequence known to be stored at or before it.
#[derive(Debug, Default)]
pub(super) struct Marks {
    by_time: Mutex<BTreeMap<i64, u64>>,
    /// When the newest append mark was taken, so most appends skip the lock.
    last_noted: AtomicI64,
}

impl Marks {
    /// Records that `seq` was stored no later than `at`, at most once per `SPACING_MS`.
    pub(super) fn note_append(&self, at: DateTime<Utc>, seq: u64) {
        let ms = at.timestamp_millis();
        let last = self.last_noted.load(Ordering::Relaxed);
        if ms - last < SPACING_MS
            || self.last_noted.compare_exchange(last, ms, Ordering::Relaxed, Ordering::Relaxed).is_err()
        {
            return;
        }
        self.insert(ms, seq);
    }

    /// Records that `seq` was stored at `at` (a probe of the stream's history).
    pub(super) fn note_stored(&self, at: DateTime<Utc>, seq: u64) {
        self.insert(at.timestamp_millis(), seq);
    }

    fn insert(&self, ms: i64, seq: u64) {
        let mut by_time = self.by_time.lock().expect("marks lock");
        let kept = by_time.entry(ms).or_insert(seq);
        *kept = (*kept).max(seq);
        if by_time.len() > MAX_MARKS {
            let older: Vec<i64> = by_time.keys().take(by_time.len() / 2).skip(1).step_by(2).copied().collect();
            for ms in older {
                by_time.remove(&ms);
            }
        }
    }

    /// The sequence to start reading a subject whose first event was stored at or after `born`
    /// (by the writer's clock): 1 when nothing is known that far back.
    pub(super) fn start_for(&self, born: DateTime<Utc>) -> u64 {
        let before = born.timestamp_millis().saturating_sub(MARGIN_MS);
        let by_time = self.by_time.lock().expect("marks lock");
        by_time.range(..=before).next_back().map_or(1, |(_, seq)| (*seq).max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: i64) -> DateTime<Utc> {
        DateTime::from_timestamp_millis(ms).expect("a valid instant")
    }

    const T: i64 = 1_800_000_000_000;

    #[test]
    fn with_no_marks_a_subject_is_read_from_the_start() {
        assert_eq!(Marks::default().start_for(at(T)), 1);
    }

    #[test]
    fn the_start_is_the_newest_mark_at_least_the_margin_before_the_birth() {
        let marks = Marks::default();
        marks.note_stored(at(T - MARGIN_MS - 10_000), 100);
        marks.note_stored(at(T - MARGIN_MS - 1), 200);
        marks.note_stored(at(T - MARGIN_MS + 1), 300);
        assert_eq!(marks.start_for(at(T)), 200);
        assert_eq!(marks.start_for(at(T - 5_000)), 100);
        assert_eq!(marks.start_for(at(T - 20_000)), 1);
    }

    #[test]
    fn appends_leave_one_mark_per_spacing() {
        let marks = Marks::default();
        marks.note_append(at(T), 10);
        marks.note_append(at(T + SPACING_MS - 1), 11);
        marks.note_append(at(T + SPACING_MS), 12);
        assert_eq!(
            marks.by_time.lock().unwrap().clone().into_iter().collect::<Vec<_>>(),
            vec![(T, 10), (T + SPACING_MS, 12)]
        );
    }

    #[test]
    fn when_full_the_older_half_thins_out_and_the_newest_stay() {
        let marks = Marks::default();
        for i in 0..=(MAX_MARKS as i64) {
            marks.note_stored(at(T + i), i as u64 + 1);
        }
        let by_time = marks.by_time.lock().unwrap();
        assert_eq!(by_time.len(), MAX_MARKS / 2 + MAX_MARKS / 4 + 1);
        assert_eq!(by_time.first_key_value(), Some((&T, &1)), "the oldest mark stays");
        assert!(!by_time.contains_key(&(T + 1)) && by_time.contains_key(&(T + 2)));
        let newest: Vec<i64> = by_time.keys().rev().take(MAX_MARKS / 2).copied().collect();
        assert_eq!(newest, (0..MAX_MARKS as i64 / 2).map(|i| T + MAX_MARKS as i64 - i).collect::<Vec<_>>());
    }
}
