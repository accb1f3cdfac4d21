//! Which gateway processes are alive, so the sessions of one that died without a goodbye
//! (kill -9, host loss) are closed within seconds instead of after 2 × stale_after.
//!
//! Each gateway announces its node name every `NODE_BEAT`; a node unheard for `NODE_SILENCE`
//! is dead. On JetStream the announcements are core NATS messages on a subject outside the
//! stream (nothing is stored); embedded, one process owns the data dir, so every node it did
//! not hear from in this process is dead at once.
//!
//! Deliberately decides nothing about sessions: the gateway's reaper closes them, one winner
//! per session by compare-and-set on the stream.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often a live gateway announces itself.
pub const NODE_BEAT: Duration = Duration::from_secs(2);
/// A node unheard for this long is dead (several missed beats; a paused NATS delays beats of
/// every node alike, so the reaper also waits until it has heard itself again).
pub const NODE_SILENCE: Duration = Duration::from_secs(6);

/// Last time each node was heard, and how long this process's own view has been whole.
#[derive(Debug)]
pub struct NodeBook {
    // A std mutex: held for a map lookup, never across an await.
    inner: Mutex<Book>,
    /// Whether every live node is in this process (the embedded log).
    local_only: bool,
}

#[derive(Debug, Default)]
struct Book {
    heard: HashMap<String, Instant>,
    /// This process's own node, whose announcements coming back prove the listener works.
    me: Option<String>,
    /// Since when our own announcements have come back without a gap: a listener that was cut
    /// off (NATS paused or unreachable) heard nobody, which proves nobody dead.
    whole_since: Option<Instant>,
}

impl NodeBook {
    pub fn new(local_only: bool) -> Self {
        Self { inner: Mutex::default(), local_only }
    }

    /// This process announces itself as `node`.
    pub fn set_me(&self, node: &str) {
        let mut book = self.inner.lock().unwrap();
        book.me = Some(node.to_string());
        if self.local_only {
            book.heard.insert(node.to_string(), Instant::now());
        }
    }

    /// An announcement of `node` arrived.
    pub fn heard(&self, node: &str) {
        let now = Instant::now();
        let mut book = self.inner.lock().unwrap();
        if book.me.as_deref() == Some(node) {
            let gap = book.heard.get(node).is_none_or(|t| now.duration_since(*t) > NODE_BEAT * 2);
            if gap {
                book.whole_since = Some(now);
            }
        }
        book.heard.insert(node.to_string(), now);
    }

    /// Whether `node` is known to be dead: unheard for `NODE_SILENCE` by a listener whose view
    /// has been whole at least that long. `false` whenever this process cannot tell.
    pub fn is_dead(&self, node: &str) -> bool {
        let book = self.inner.lock().unwrap();
        let silent = book.heard.get(node).is_none_or(|t| t.elapsed() > NODE_SILENCE);
        if self.local_only {
            return silent;
        }
        let me_recent = book.me.as_ref().and_then(|m| book.heard.get(m)).is_some_and(|t| t.elapsed() <= NODE_BEAT * 2);
        let whole = book.whole_since.is_some_and(|t| t.elapsed() > NODE_SILENCE);
        me_recent && whole && silent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_every_node_but_this_process_is_dead_at_once() {
        let book = NodeBook::new(true);
        book.set_me("a");
        assert!(!book.is_dead("a"));
        assert!(book.is_dead("b"));
    }

    #[test]
    fn distributed_nobody_is_dead_until_the_view_is_whole() {
        let book = NodeBook::new(false);
        book.set_me("a");
        book.heard("a");
        assert!(!book.is_dead("b"), "a listener that just started cannot tell");
    }
}
