//! The on-time half of expiry: a timer per pending signal due within the look-ahead window,
//! keyed by `(tenant, signal id)`, firing at `expires_at`; and `TimerSet`, the keyed timers it
//! is built on (the directive timers are too).
//!
//! Deliberately pure apart from tokio's clock (so tests run on paused time): it appends nothing,
//! reads no stream and decides nothing about a signal. Signals due beyond the window are
//! refused here and picked up later by the backstop scan, which keeps memory bounded by the
//! window rather than by the number of pending signals.

use std::collections::HashMap;
use std::hash::Hash;
use std::task::{Context, Poll};
use std::time::Duration;

use bus::event::{Event, EventBody, SignalDelivered, SignalExpired, SignalRecalled};
use chrono::{DateTime, Utc};
use tokio::time::Instant;
use tokio_util::time::{delay_queue, DelayQueue};
use uuid::Uuid;

use crate::expire::Pending;

/// Which signal a timer belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SignalKey {
    pub tenant: String,
    pub id: Uuid,
}

/// A timer that fired: the signal is due, and what was known of it when the timer was set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Due {
    pub key: SignalKey,
    pub pending: Pending,
}

/// Timers keyed by `K`, each holding a `V` that is handed back when it fires. `lookahead` is
/// how far ahead of now a timer may be set. Shared by the signal and the directive timers.
#[derive(Debug)]
pub struct TimerSet<K, V> {
    queue: DelayQueue<K>,
    entries: HashMap<K, (delay_queue::Key, V)>,
    lookahead: Duration,
}

impl<K: Clone + Eq + Hash, V> TimerSet<K, V> {
    pub fn new(lookahead: Duration) -> Self {
        Self { queue: DelayQueue::new(), entries: HashMap::new(), lookahead }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn contains(&self, key: &K) -> bool {
        self.entries.contains_key(key)
    }

    pub fn lookahead(&self) -> Duration {
        self.lookahead
    }

    /// Sets (or moves) the timer of `key` to fire at `fire_at`, read against `now_utc`, holding
    /// `value`. Returns false, and sets nothing, when that lies beyond the look-ahead window.
    pub fn offer_at(&mut self, key: K, value: V, fire_at: DateTime<Utc>, now_utc: DateTime<Utc>) -> bool {
        let until = (fire_at - now_utc).to_std().unwrap_or(Duration::ZERO);
        if until > self.lookahead {
            return false;
        }
        let deadline = Instant::now() + until;
        match self.entries.get_mut(&key) {
            // The same key offered twice (tail and scan overlap): keep one timer, holding the
            // newest value.
            Some((handle, held)) => {
                self.queue.reset_at(handle, deadline);
                *held = value;
            }
            None => {
                let handle = self.queue.insert_at(key.clone(), deadline);
                self.entries.insert(key, (handle, value));
            }
        }
        true
    }

    /// The value the timer of `key` holds, to update in place (the timer keeps its instant).
    pub fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        self.entries.get_mut(key).map(|(_, value)| value)
    }

    /// Removes the timer of `key` (its signal or directive ended). Returns whether one was set.
    pub fn cancel(&mut self, key: &K) -> bool {
        match self.entries.remove(key) {
            Some((handle, _)) => {
                self.queue.remove(&handle);
                true
            }
            None => false,
        }
    }

    /// The next timer that fired, with its value. Pending (never ready-empty) while no timer is
    /// set, so it can sit in a `select!` next to the branches that add timers.
    pub fn poll_fired(&mut self, cx: &mut Context<'_>) -> Poll<(K, V)> {
        match self.queue.poll_expired(cx) {
            Poll::Ready(Some(expired)) => {
                let key = expired.into_inner();
                let (_, value) = self.entries.remove(&key).expect("every queued key has an entry");
                Poll::Ready((key, value))
            }
            Poll::Ready(None) | Poll::Pending => Poll::Pending,
        }
    }
}

/// The signal timers. `lookahead` is how far ahead of now a timer may be set; `offer_at`
/// fires at another instant than the expiry (a retry shortly after a timer fired a hair early),
/// keeping `pending` — the expiry the event will record — as it is.
pub type Timers = TimerSet<SignalKey, Pending>;

impl Timers {
    /// Sets (or moves) the timer of `key` to fire at `pending.expires_at`, read against
    /// `now_utc`. Returns false, and sets nothing, when that lies beyond the look-ahead window.
    pub fn offer(&mut self, key: SignalKey, pending: Pending, now_utc: DateTime<Utc>) -> bool {
        let at = pending.expires_at;
        self.offer_at(key, pending, at, now_utc)
    }

    /// Follows one stream event stored at `seq`: a send sets its signal's timer (when due within
    /// the window; `seq` is then its subject's last sequence, the expiry's compare-and-set — 0
    /// for the sends of a `sends.recorded`, stored on no signal's subject), a
    /// delivery, recall or expiry clears it, a release moves that sequence. Other events are
    /// ignored.
    pub fn observe(&mut self, seq: u64, event: &Event, now_utc: DateTime<Utc>) {
        let key = |id: Uuid| SignalKey { tenant: event.tenant.clone(), id };
        match &event.body {
            // A send that recorded its push is delivered already: no timer. A gathered send's
            // subject is empty until its next event: its expiry expects exactly that.
            EventBody::SignalSent(_) | EventBody::SendsRecorded(_) => {
                for (sent, last_seq) in event.body.sends_at(seq).filter(|(s, _)| s.pushed_to.is_none()) {
                    let pending = Pending {
                        signal_type: sent.signal_type.clone(),
                        expires_at: sent.expires_at,
                        correlation_id: sent.correlation_id.clone(),
                        last_seq,
                    };
                    self.offer(key(sent.signal_id), pending, now_utc);
                }
            }
            EventBody::SignalDelivered(SignalDelivered { signal_id, .. })
            | EventBody::SignalExpired(SignalExpired { signal_id, .. })
            | EventBody::SignalRecalled(SignalRecalled { signal_id, .. }) => {
                self.cancel(&key(*signal_id));
            }
            // A scheduled signal released: still pending, its expiry now expects the release.
            EventBody::SignalReleased(r) => {
                if let Some(pending) = self.get_mut(&key(r.signal_id)) {
                    pending.last_seq = seq;
                }
            }
            _ => {}
        }
    }

    /// The next timer that fired. Pending (never ready-empty) while no timer is set, so it can
    /// sit in a `select!` next to the branches that add timers.
    pub fn poll_due(&mut self, cx: &mut Context<'_>) -> Poll<Due> {
        self.poll_fired(cx).map(|(key, pending)| Due { key, pending })
    }

    /// Waits for the next timer to fire (forever while none is set).
    pub async fn next_due(&mut self) -> Due {
        std::future::poll_fn(|cx| self.poll_due(cx)).await
    }
}

#[cfg(test)]
#[path = "timers_tests.rs"]
mod tests;
