//! The events of recently read subjects, kept so that reading one again while nothing was
//! appended to it costs one request — the subject's newest event — instead of one direct get
//! per event and a last one that finds no more (on nats-server 2.9 that last one visits every
//! message block after the subject's newest event). A group's roster read at each directive
//! to the group, an agent's or a directive's subject read at each command on it: small subjects,
//! read far more often than written.
//!
//! Exact, never a guess: only a read known to be a subject's whole is kept (one that started at
//! the subject's known first event or at sequence 1, never one from a mark, which may start past
//! it), and a kept list is answered only when the stream's newest event on the subject is the one
//! the list ends with (the same sequence and the same event id); anything else reads the subject
//! whole, as without it. This process's own appends to a subject drop its list (another
//! process's show as a newer last event). Two consequences, both what a whole read of the same
//! instant could have said: a list may hold an event the stream's `max_age` removed since (only
//! while nothing newer was appended), and a list read while another append was landing is
//! simply superseded by the next check.
//!
//! Deliberately no I/O: the log asks it and feeds it. Bounded in subjects and in encoded bytes.

use std::sync::Mutex;

use hashlink::LruCache;

use crate::log::Stored;

/// Subjects kept at most (the least recently used go first).
const MAX_SUBJECTS: usize = 4_096;
/// Encoded bytes kept at most, over all subjects.
const MAX_BYTES: usize = 16 * 1024 * 1024;
/// A subject whose events encode larger than this is not kept: it is neither small nor cheap
/// to copy.
const MAX_SUBJECT_BYTES: usize = 256 * 1024;
/// A subject with more events than this is not kept (a long-lived group's churn).
const MAX_EVENTS: usize = 64;

#[derive(Debug)]
struct Kept {
    events: Vec<Stored>,
    bytes: usize,
}

#[derive(Debug)]
pub(super) struct Recent {
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    by_subject: LruCache<String, Kept>,
    bytes: usize,
}

impl Default for Recent {
    fn default() -> Self {
        Recent { inner: Mutex::new(Inner { by_subject: LruCache::new(MAX_SUBJECTS), bytes: 0 }) }
    }
}

impl Recent {
    /// The kept events of `subject`, if their last one is `last` (the stream's newest event on
    /// the subject now, just asked); a list that no longer ends there is dropped.
    pub(super) fn current(&self, subject: &str, last: &Stored) -> Option<Vec<Stored>> {
        let mut inner = self.inner.lock().expect("recent lock");
        let kept = inner.by_subject.get(subject)?;
        let end = kept.events.last()?;
        if end.seq == last.seq && end.event.event_id == last.event.event_id {
            return Some(kept.events.clone());
        }
        inner.remove(subject);
        None
    }

    /// Whether a list of `subject` is kept (so a read asks for its newest event first).
    pub(super) fn holds(&self, subject: &str) -> bool {
        self.inner.lock().expect("recent lock").by_subject.contains_key(subject)
    }

    /// Keeps `events`, the whole of `subject` as just read, `bytes` encoded.
    pub(super) fn keep(&self, subject: &str, events: &[Stored], bytes: usize) {
        if events.is_empty() || events.len() > MAX_EVENTS || bytes > MAX_SUBJECT_BYTES {
            return;
        }
        let mut inner = self.inner.lock().expect("recent lock");
        inner.remove(subject);
        // Room made here, not by the cache's own eviction, so the byte count stays true.
        while inner.by_subject.len() >= MAX_SUBJECTS || inner.bytes + bytes > MAX_BYTES {
            let Some((_, oldest)) = inner.by_subject.remove_lru() else { break };
            inner.bytes -= oldest.bytes;
        }
        inner.by_subject.insert(subject.to_string(), Kept { events: events.to_vec(), bytes });
        inner.bytes += bytes;
    }

    /// Drops `subject`'s list: this process is appending to it.
    pub(super) fn forget(&self, subject: &str) {
        let mut inner = self.inner.lock().expect("recent lock");
        if !inner.by_subject.is_empty() {
            inner.remove(subject);
        }
    }
}

impl Inner {
    fn remove(&mut self, subject: &str) {
        if let Some(kept) = self.by_subject.remove(subject) {
            self.bytes -= kept.bytes;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Event, EventBody, SignalRecalled};

    fn stored(seq: u64) -> Stored {
        let body = EventBody::SignalRecalled(SignalRecalled { signal_id: uuid::Uuid::nil(), by: "a".into() });
        Stored { seq, subject: "s".into(), event: Event::new("t", None, chrono::Utc::now(), body) }
    }

    #[test]
    fn a_list_is_answered_only_while_it_ends_at_the_subjects_newest_event() {
        let recent = Recent::default();
        let (one, two) = (stored(3), stored(9));
        recent.keep("s", &[one.clone(), two.clone()], 100);
        assert!(recent.holds("s"));
        assert_eq!(recent.current("s", &two), Some(vec![one.clone(), two.clone()]));
        // Another event at the same sequence (a stream made anew) is not the same end.
        assert_eq!(recent.current("s", &stored(9)), None);
        assert!(!recent.holds("s"), "a list that no longer ends there is dropped");
        recent.keep("s", &[one.clone(), two.clone()], 100);
        assert_eq!(recent.current("s", &stored(12)), None, "something was appended since");
    }

    #[test]
    fn own_appends_drop_a_list_and_the_bounds_hold() {
        let recent = Recent::default();
        recent.keep("s", &[stored(1)], 10);
        recent.forget("s");
        assert!(!recent.holds("s"));
        recent.keep("big", &[stored(1)], MAX_SUBJECT_BYTES + 1);
        recent.keep("long", &vec![stored(1); MAX_EVENTS + 1], 10);
        assert!(!recent.holds("big") && !recent.holds("long"));
        for i in 0..(MAX_BYTES / MAX_SUBJECT_BYTES + 2) {
            recent.keep(&format!("s{i}"), &[stored(1)], MAX_SUBJECT_BYTES);
        }
        let inner = recent.inner.lock().unwrap();
        assert!(inner.bytes <= MAX_BYTES, "{} bytes kept", inner.bytes);
        assert!(!inner.by_subject.contains_key("s0"), "the least recently used went first");
    }
}
