//! The scheduled sends this gateway's tail has read and whose release has not come yet, kept so
//! that a release is pushed without reading the signal's subject back. Why: on nats-server 2.9
//! a subject read walks the stream's blocks from its first sequence, and a minute of 100,000
//! due signals made those walks take the server's whole core, releasing ~1,000 signals/s where
//! 1,667/s were due (docs/performance.md, "Scheduled releases on nats-server 2.9").
//!
//! Deliberately only a shortcut, never a source of truth: bounded (`MAX_BYTES`, the sends due
//! last dropped first), and a push of a kept send is recorded with the same compare-and-set on
//! the release's sequence as one read from the stream, so anything that happened since the
//! release makes the push fail and re-decide from the stream. A send not kept is read, as before.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use bus::event::SignalSent;
use chrono::{DateTime, Duration, Utc};
use uuid::Uuid;

/// Most bytes of sends kept (payload text plus `OVERHEAD` each): about 100,000 sends of a
/// 256-byte payload.
const MAX_BYTES: usize = 64 * 1024 * 1024;
/// What one kept send costs besides its payload (ids, names, times, the maps' entries).
const OVERHEAD: usize = 384;
/// A kept send still not released this long after it was due never will be here: it was
/// recalled or expired, or this process missed its release. Dropped at the next `keep`.
const STALE_AFTER: Duration = Duration::hours(1);

/// Scheduled sends by id, with their due times in order.
#[derive(Debug, Default)]
pub struct ScheduledSends {
    inner: Mutex<Kept>,
}

#[derive(Debug, Default)]
struct Kept {
    by_id: HashMap<Uuid, (Box<SignalSent>, usize)>,
    by_due: BTreeSet<(DateTime<Utc>, Uuid)>,
    bytes: usize,
}

impl Kept {
    fn remove(&mut self, id: Uuid) -> Option<Box<SignalSent>> {
        let (sent, size) = self.by_id.remove(&id)?;
        if let Some(due) = sent.deliver_at {
            self.by_due.remove(&(due, id));
        }
        self.bytes -= size;
        Some(sent)
    }
}

impl ScheduledSends {
    /// Keeps `sent` (a scheduled send just read from the stream) until its release.
    pub fn keep(&self, sent: &SignalSent, now: DateTime<Utc>) {
        let Some(due) = sent.deliver_at else { return };
        let size = OVERHEAD + sent.payload.len();
        let mut kept = self.inner.lock().expect("scheduled sends lock");
        while let Some(&(oldest, id)) = kept.by_due.first() {
            if oldest + STALE_AFTER >= now {
                break;
            }
            kept.remove(id);
        }
        kept.remove(sent.signal_id);
        kept.by_id.insert(sent.signal_id, (Box::new(sent.clone()), size));
        kept.by_due.insert((due, sent.signal_id));
        kept.bytes += size;
        while kept.bytes > MAX_BYTES {
            let Some(&(_, id)) = kept.by_due.last() else { break };
            kept.remove(id);
        }
    }

    /// The kept send of `signal_id`, no longer kept.
    pub fn take(&self, signal_id: Uuid) -> Option<Box<SignalSent>> {
        self.inner.lock().expect("scheduled sends lock").remove(signal_id)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.inner.lock().expect("scheduled sends lock").by_id.len()
    }
}

#[cfg(test)]
mod tests {
    use bus::catalog::{Category, DeliveryClass};
    use bus::event::{PublishPath, RecipientState};

    use super::*;

    fn scheduled(due: DateTime<Utc>, payload_bytes: usize) -> SignalSent {
        SignalSent {
            signal_id: Uuid::now_v7(),
            from: "alice".into(),
            to: "bob".into(),
            signal_type: "StatusUpdate".into(),
            category: Category::Task,
            priority: 0,
            payload: "x".repeat(payload_bytes),
            delivery_class: DeliveryClass::Async,
            recipient_state: RecipientState::Available,
            publish_path: PublishPath::Scheduled,
            correlation_id: None,
            dedupe_key: None,
            redacted: Vec::new(),
            created_at: due,
            expires_at: due + Duration::days(1),
            resolved_to_session: None,
            pushed_to: None,
            fanout_id: None,
            deliver_at: Some(due),
        }
    }

    #[test]
    fn a_kept_send_is_taken_once_and_an_unscheduled_one_is_not_kept() {
        let now = Utc::now();
        let kept = ScheduledSends::default();
        let sent = scheduled(now + Duration::minutes(5), 10);
        kept.keep(&sent, now);
        let mut plain = scheduled(now, 10);
        plain.deliver_at = None;
        kept.keep(&plain, now);
        assert_eq!(kept.take(sent.signal_id).as_deref(), Some(&sent));
        assert_eq!(kept.take(sent.signal_id), None, "taken once");
        assert_eq!(kept.take(plain.signal_id), None, "only scheduled sends are kept");
    }

    #[test]
    fn the_sends_due_last_go_first_when_over_the_bound_and_stale_ones_go() {
        let now = Utc::now();
        let kept = ScheduledSends::default();
        // Given sends of 1 MiB due one minute apart, the first due last
        let big = 1024 * 1024;
        let sends: Vec<SignalSent> = (0..80).map(|i| scheduled(now + Duration::minutes(80 - i), big)).collect();
        for s in &sends {
            kept.keep(s, now);
        }
        // Then the bound holds, and what is kept is what comes due first
        assert!(kept.len() < 64, "{} kept", kept.len());
        assert!(kept.take(sends[79].signal_id).is_some(), "the first due is kept");
        assert!(kept.take(sends[0].signal_id).is_none(), "the last due was dropped");
        // And a send long past its due time is dropped at the next keep
        let stale = scheduled(now - Duration::hours(2), 10);
        kept.keep(&stale, now - Duration::hours(2));
        kept.keep(&scheduled(now + Duration::minutes(1), 10), now);
        assert!(kept.take(stale.signal_id).is_none(), "stale sends are dropped");
    }
}
