//! Where each recently used subject begins: the sequence of its first event, so reading the
//! subject again starts there instead of at sequence 1 (nats-server 2.9 visits every message
//! block from where a subject read starts; `marks.rs` has the why).
//!
//! Exact, not a bound: a subject's first event keeps its sequence for as long as it is stored,
//! and nothing can be stored on the subject before it later. A first event removed by the
//! stream's `max_age` only means the read finds the next one, as a read from 1 would. Learned
//! from appends that found the subject empty and from whole reads. A read from a known start
//! that finds nothing (every event aged out, or a stream made anew under the same name) is done
//! again from 1 by the caller.
//!
//! Deliberately no I/O: the log feeds it and asks it.

use std::sync::Mutex;

use hashlink::LruCache;

/// Subjects remembered (the least recently used go first): ~100 bytes each.
const CAPACITY: usize = 100_000;

#[derive(Debug)]
pub(super) struct Firsts {
    by_subject: Mutex<LruCache<String, u64>>,
}

impl Default for Firsts {
    fn default() -> Self {
        Firsts { by_subject: Mutex::new(LruCache::new(CAPACITY)) }
    }
}

impl Firsts {
    /// The sequence of `subject`'s first event, if known.
    pub(super) fn get(&self, subject: &str) -> Option<u64> {
        self.by_subject.lock().expect("firsts lock").get(subject).copied()
    }

    /// Records that `subject`'s first event has sequence `seq`.
    pub(super) fn note(&self, subject: &str, seq: u64) {
        self.by_subject.lock().expect("firsts lock").insert(subject.to_string(), seq);
    }

    /// Forgets `subject` (its known start found nothing).
    pub(super) fn forget(&self, subject: &str) {
        self.by_subject.lock().expect("firsts lock").remove(subject);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subject_is_known_after_it_is_noted_until_forgotten() {
        let firsts = Firsts::default();
        assert_eq!(firsts.get("a"), None);
        firsts.note("a", 7);
        assert_eq!(firsts.get("a"), Some(7));
        firsts.forget("a");
        assert_eq!(firsts.get("a"), None);
    }

    #[test]
    fn the_least_recently_used_subject_goes_first_when_full() {
        let firsts = Firsts::default();
        for i in 0..CAPACITY as u64 {
            firsts.note(&format!("s{i}"), i + 1);
        }
        assert_eq!(firsts.get("s0"), Some(1));
        firsts.note("new", 1);
        assert_eq!(firsts.get("s1"), None, "the least recently used went");
        assert_eq!(firsts.get("s0"), Some(1));
        assert_eq!(firsts.get("new"), Some(1));
    }
}
