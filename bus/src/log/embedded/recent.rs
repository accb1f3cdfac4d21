//! The embedded log's newest committed events, kept as the events they were encoded from, so
//! this process's tails (gateway follower, projector, sweeper) read what the writer just
//! committed without a query each and without decoding each event once per tail.
//!
//! Why: every tail used to wake on each commit, read its page back from SQLite through the
//! read pool (a query is a round trip to a connection's worker thread) and decode every event;
//! three tails tripled that, and flat out it was a larger share of the embedded process than
//! the appends themselves.
//!
//! Deliberately a cache, never a source: the writer pushes a commit's stored events here after
//! the commit and before it publishes the new committed sequence, only as a contiguous run of
//! sequences; a tail that asks for a sequence the ring no longer (or never) held reads the table
//! as before. Bounded by count and by encoded bytes. Knows nothing of commits or tails.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use crate::log::Stored;

/// Most events kept: a live tail reads a commit within milliseconds; a busy projector applying
/// a batch for tens of milliseconds still finds what arrived meanwhile.
const CAPACITY: usize = 4096;
/// Most encoded bytes kept, so large facts cannot pin much memory.
const MAX_BYTES: usize = 16 * 1024 * 1024;

/// What the ring says about a sequence.
#[derive(Debug)]
pub(super) enum Lookup {
    /// The events from the sequence on (at most the page asked for), contiguous.
    Events(Vec<Arc<Stored>>),
    /// The sequence is the one after the newest event this process committed: nothing to read
    /// until the next commit (another process's commits are found by polling the table).
    CaughtUp,
    /// Not held: read the table.
    Miss,
}

#[derive(Debug, Default)]
pub(super) struct Recent {
    ring: Mutex<Ring>,
}

#[derive(Debug, Default)]
struct Ring {
    /// Each event with its encoded size, oldest first, sequences contiguous.
    events: VecDeque<(Arc<Stored>, usize)>,
    bytes: usize,
}

impl Recent {
    /// Adds a commit's stored events (ascending, contiguous). A run that does not continue the
    /// ring (another process committed in between) replaces it, so the ring never has a gap.
    pub fn push(&self, committed: impl IntoIterator<Item = (Arc<Stored>, usize)>) {
        let mut ring = self.ring.lock().expect("recent events lock");
        for (stored, bytes) in committed {
            let follows = ring.events.back().is_none_or(|(last, _)| last.seq + 1 == stored.seq);
            if !follows {
                ring.events.clear();
                ring.bytes = 0;
            }
            ring.bytes += bytes;
            ring.events.push_back((stored, bytes));
            while ring.events.len() > CAPACITY || (ring.bytes > MAX_BYTES && ring.events.len() > 1) {
                let (_, gone) = ring.events.pop_front().expect("non-empty ring");
                ring.bytes -= gone;
            }
        }
    }

    /// Up to `max` events from sequence `from` on, if the ring holds `from`.
    pub fn since(&self, from: u64, max: usize) -> Lookup {
        let ring = self.ring.lock().expect("recent events lock");
        let (Some((first, _)), Some((last, _))) = (ring.events.front(), ring.events.back()) else {
            return Lookup::Miss;
        };
        if from == last.seq + 1 {
            return Lookup::CaughtUp;
        }
        if from < first.seq || from > last.seq || max == 0 {
            return Lookup::Miss;
        }
        let skip = (from - first.seq) as usize;
        Lookup::Events(ring.events.iter().skip(skip).take(max).map(|(s, _)| s.clone()).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Event, EventBody, SessionHeartbeat};
    use uuid::Uuid;

    fn stored(seq: u64) -> (Arc<Stored>, usize) {
        let body = EventBody::SessionHeartbeat(SessionHeartbeat { session_id: Uuid::nil(), identity: "a".into() });
        let event = Event::new("default", Some("a".into()), chrono::Utc::now(), body);
        (Arc::new(Stored { seq, subject: "s".into(), event }), 100)
    }

    fn seqs(l: Lookup) -> Vec<u64> {
        match l {
            Lookup::Events(e) => e.iter().map(|s| s.seq).collect(),
            other => panic!("expected events, got {other:?}"),
        }
    }

    #[test]
    fn a_held_sequence_reads_from_the_ring_and_the_next_one_is_caught_up() {
        let r = Recent::default();
        r.push((1..=5).map(stored));
        assert_eq!(seqs(r.since(2, 2)), vec![2, 3]);
        assert_eq!(seqs(r.since(4, 10)), vec![4, 5]);
        assert!(matches!(r.since(6, 10), Lookup::CaughtUp));
        assert!(matches!(r.since(7, 10), Lookup::Miss));
    }

    #[test]
    fn a_run_that_does_not_continue_the_ring_replaces_it() {
        let r = Recent::default();
        r.push((1..=3).map(stored));
        r.push((7..=8).map(stored));
        assert!(matches!(r.since(3, 10), Lookup::Miss));
        assert_eq!(seqs(r.since(7, 10)), vec![7, 8]);
    }

    #[test]
    fn the_oldest_events_leave_past_the_capacity() {
        let r = Recent::default();
        r.push((1..=(CAPACITY as u64 + 10)).map(stored));
        assert!(matches!(r.since(10, 1), Lookup::Miss));
        assert_eq!(seqs(r.since(11, 1)), vec![11]);
    }

    #[test]
    fn an_empty_ring_misses() {
        assert!(matches!(Recent::default().since(1, 10), Lookup::Miss));
    }
}
