//! This process's own appends, kept for the shared tail: an event this log publishes is handed
//! to the tail's upstream as it was built, so the upstream does not decode the bytes it
//! published a moment earlier (the decode was the largest per-event cost of reading the stream
//! flat out, and a lone `signalbus serve` appends every event it reads).
//!
//! Kept before the first publish, by event id (every copy carries it in a header, `Nats-Msg-Id`
//! or `EVENT_ID_HEADER`), because the tail often reads a message before its append's ack is
//! handled; checked against the message's subject and length; taken as the stamped event the
//! bytes were encoded from, so the reader's rule (`acceptance::as_stored_at` on the stream's own
//! timestamp) applies unchanged: a copy stored too late is voided exactly as a decoded one
//! would be.
//!
//! Deliberately a cache, never a source: an event missing here (appended by another process,
//! evicted) is decoded as before. Bounded by count and bytes, and filled only while a shared
//! tail runs.

use std::collections::VecDeque;

use foldhash::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use uuid::Uuid;

use crate::event::Event;

/// Most events kept: the tail reads an append within milliseconds; these cover a stalled tail.
const CAPACITY: usize = 4096;
/// Most encoded bytes kept, so large facts cannot pin much memory.
const MAX_BYTES: usize = 16 * 1024 * 1024;

/// An event about to be published and what its stored message must match.
struct Kept {
    subject: String,
    encoded_len: usize,
    event: Event,
}

#[derive(Default)]
struct Inner {
    events: HashMap<Uuid, Kept>,
    /// Ids in the order they were kept, oldest first (some already taken): what is let go first.
    order: VecDeque<Uuid>,
    bytes: usize,
}

impl Inner {
    fn remove(&mut self, id: &Uuid) -> Option<Kept> {
        let kept = self.events.remove(id)?;
        self.bytes -= kept.encoded_len;
        Some(kept)
    }
}

/// The cache between a log's appends and its shared tail's upstream.
#[derive(Default)]
pub(super) struct OwnEvents {
    /// Set while a shared tail runs; nothing is kept otherwise.
    active: AtomicBool,
    /// Events handed to the tail from here (each a decode saved).
    taken: AtomicU64,
    inner: Mutex<Inner>,
}

impl OwnEvents {
    pub(super) fn activate(&self) {
        self.active.store(true, Ordering::Relaxed);
    }

    /// Keeps `event` (the stamped event about to be published under `subject` as `encoded_len`
    /// bytes).
    pub(super) fn keep(&self, subject: &str, encoded_len: usize, event: Event) {
        if !self.active.load(Ordering::Relaxed) {
            return;
        }
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let id = event.event_id;
        inner.bytes += encoded_len;
        if let Some(old) = inner.events.insert(id, Kept { subject: subject.to_string(), encoded_len, event }) {
            inner.bytes -= old.encoded_len;
        }
        inner.order.push_back(id);
        while inner.events.len() > CAPACITY || inner.bytes > MAX_BYTES || inner.order.len() > 2 * CAPACITY {
            let Some(oldest) = inner.order.pop_front() else { break };
            inner.remove(&oldest);
        }
    }

    /// The event with id `event_id` if this log published it and it matches the message (a
    /// repeat of the same id, stored again, is the same bytes and is decoded).
    pub(super) fn take(&self, event_id: Uuid, subject: &str, encoded_len: usize) -> Option<Event> {
        let kept = self.inner.lock().unwrap_or_else(|p| p.into_inner()).remove(&event_id)?;
        let matches = kept.subject == subject && kept.encoded_len == encoded_len;
        if matches {
            self.taken.fetch_add(1, Ordering::Relaxed);
        }
        matches.then_some(kept.event)
    }

    /// How many events the tail took from here so far.
    pub(super) fn taken(&self) -> u64 {
        self.taken.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{EventBody, SessionHeartbeat};

    fn event() -> Event {
        let body = EventBody::SessionHeartbeat(SessionHeartbeat { session_id: Uuid::nil(), identity: "a".into() });
        Event::new("t", None, chrono::Utc::now(), body)
    }

    fn kept(own: &OwnEvents) -> Uuid {
        let e = event();
        let id = e.event_id;
        own.keep("s", 10, e);
        id
    }

    #[test]
    fn nothing_is_kept_before_a_tail_runs() {
        let own = OwnEvents::default();
        let id = kept(&own);
        assert!(own.take(id, "s", 10).is_none());
    }

    #[test]
    fn a_kept_event_is_taken_once_and_only_if_it_matches() {
        let own = OwnEvents::default();
        own.activate();
        let (a, b, c) = (kept(&own), kept(&own), kept(&own));
        assert_eq!(own.take(a, "s", 10).map(|e| e.event_id), Some(a));
        assert!(own.take(a, "s", 10).is_none(), "taken once");
        assert!(own.take(b, "other", 10).is_none(), "another subject under that id");
        assert!(own.take(c, "s", 11).is_none(), "another length under that id");
        assert_eq!(own.taken(), 1);
        let inner = own.inner.lock().unwrap();
        assert!(inner.events.is_empty());
        assert_eq!(inner.bytes, 0);
    }

    #[test]
    fn it_stays_within_its_count_letting_go_of_the_oldest() {
        let own = OwnEvents::default();
        own.activate();
        let ids: Vec<Uuid> = (0..CAPACITY + 10).map(|_| kept(&own)).collect();
        assert!(own.take(ids[5], "s", 10).is_none(), "the oldest were let go");
        assert!(own.take(ids[CAPACITY + 9], "s", 10).is_some());
        assert!(own.inner.lock().unwrap().events.len() <= CAPACITY);
    }

    #[test]
    fn taken_events_do_not_grow_the_order_without_bound() {
        let own = OwnEvents::default();
        own.activate();
        for _ in 0..5 * CAPACITY {
            let id = kept(&own);
            own.take(id, "s", 10);
        }
        assert!(own.inner.lock().unwrap().order.len() <= 2 * CAPACITY);
    }
}
