//! `sends.recorded`: several plain sends recorded as one stream message, and the send window
//! that names its subject (`<prefix>.<tenant>.sends.<window>`), so the send of a signal is found
//! from its id alone.
//!
//! A stream message costs the broker about as much for one send as for fifty (its write, its
//! per-subject index entry, its ack). Sends that need no compare-and-set of their own — a fresh
//! random v7 id, no dedupe key, not scheduled, not part of a fan-out — are gathered by a
//! gateway's send batcher into one event per (tenant, window). Their signal's subject stays
//! empty until the signal's next event, which is appended expecting exactly that ("subject
//! empty"), so every later compare-and-set is the same as for a send stored on the subject.
//!
//! Deliberately decides nothing: which sends may be gathered is the gateway's call, and finding
//! a send in its window is `store`'s.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{EventBody, SignalSent};

/// The width of a send window: a signal's send is recorded under the window of its v7 id's
/// millisecond. Narrow enough that a window holds a few dozen stream messages at the rate two
/// cores reach (reading it back is a handful of point reads), wide enough that a batch gathered
/// over one append's round trip seldom straddles two windows (a batch splits where it does).
pub const SEND_WINDOW_MS: u64 = 10;

/// The sends of one tenant whose ids fall in one send window, recorded together. Each entry is
/// exactly what its own `signal.sent` would hold, and folds the same way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SendsRecorded {
    /// The send window every entry's id falls in (`send_window`).
    pub window: u64,
    pub sends: Vec<SignalSent>,
}

/// The send window of `id`: its v7 time in milliseconds over `SEND_WINDOW_MS`. `None` for an id
/// that says no time (not v7), whose send is never gathered.
pub fn send_window(id: Uuid) -> Option<u64> {
    if id.get_version_num() != 7 {
        return None;
    }
    let b = id.as_bytes();
    let ms = u64::from_be_bytes([0, 0, b[0], b[1], b[2], b[3], b[4], b[5]]);
    Some(ms / SEND_WINDOW_MS)
}

impl EventBody {
    /// The sends an event records: a `signal.sent`'s one, every entry of a `sends.recorded`,
    /// none for any other event.
    pub fn sent_signals(&self) -> impl Iterator<Item = &SignalSent> {
        let sends: &[SignalSent] = match self {
            EventBody::SignalSent(s) => std::slice::from_ref(s.as_ref()),
            EventBody::SendsRecorded(r) => &r.sends,
            _ => &[],
        };
        sends.iter()
    }

    /// `sent_signals` of this event stored at `seq`, each with the newest sequence on its
    /// signal's subject after it — the first compare-and-set's expectation: `seq` for a
    /// `signal.sent` (stored there), 0 for a gathered send (its subject is still empty).
    pub fn sends_at(&self, seq: u64) -> impl Iterator<Item = (&SignalSent, u64)> {
        let on_subject = if matches!(self, EventBody::SendsRecorded(_)) { 0 } else { seq };
        self.sent_signals().map(move |sent| (sent, on_subject))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_made_in_one_window_share_it_and_the_next_window_follows() {
        let at = |ms: u64| {
            Uuid::new_v7(uuid::Timestamp::from_unix(uuid::NoContext, ms / 1000, (ms % 1000) as u32 * 1_000_000))
        };
        let base = 1_764_000_000_000u64;
        assert_eq!(send_window(at(base)), Some(base / SEND_WINDOW_MS));
        assert_eq!(send_window(at(base + SEND_WINDOW_MS - 1)), send_window(at(base)));
        assert_eq!(send_window(at(base + SEND_WINDOW_MS)), Some(base / SEND_WINDOW_MS + 1));
        assert_eq!(send_window(Uuid::new_v4()), None);
    }
}
