//! When a stored event counts: the deadline a writer stamps on an event before its first
//! publish (`deadline`), the event's own deadline when it has one (`store_by`: a delivery must be
//! stored before its signal's `expires_at`), and how a reader sees a copy stored after it
//! (`as_stored_at`: voided). One rule for every writer and reader, so "nothing was accepted"
//! stays true once answered, and no delivery of an expired signal ever counts.
//!
//! Deliberately pure: the JetStream log stamps and reads with it, the embedded log refuses at
//! commit with it; neither decides anything else here.

use chrono::{DateTime, Utc};

use crate::event::{Event, EventBody, Voided};

/// The instant before which `body` must be stored to count, if it has one: a delivery of any
/// kind (a `signal.delivered`, or a `signal.sent` that records its push) stored at or after its
/// signal's `expires_at` would hand out an expired signal (CONTRACT §5: TTL fires before
/// delivery). One rule for every delivery path, enforced by both logs when they store (JetStream
/// voids a later copy for every reader, the embedded log refuses it), so a decision taken in time
/// but stored late never counts.
pub fn store_by(body: &EventBody) -> Option<DateTime<Utc>> {
    match body {
        EventBody::SignalSent(s) if s.pushed_to.is_some() => Some(s.expires_at),
        EventBody::SignalDelivered(d) => d.expires_at,
        // Gathered sends count together: the earliest push among them binds the whole event.
        EventBody::SendsRecorded(r) => r.sends.iter().filter(|s| s.pushed_to.is_some()).map(|s| s.expires_at).min(),
        _ => None,
    }
}

/// The `accept_by` a writer stamps on `event` at `now`: `window` from now, but never at or after
/// the event's own `store_by`. The second value says which one bound it (`true`: the event's
/// deadline), so a writer can tell a void copy's cause.
pub fn deadline(event: &Event, now: DateTime<Utc>, window: chrono::Duration) -> (DateTime<Utc>, bool) {
    let by = now + window;
    match store_by(&event.body) {
        // "At or after" is void: the last instant that counts is just before the deadline.
        Some(limit) if limit - chrono::Duration::nanoseconds(1) < by => {
            (limit - chrono::Duration::nanoseconds(1), true)
        }
        _ => (by, false),
    }
}

/// `event` as a reader must see it, given when the stream stored it: `Voided` if that was after
/// the writer's `accept_by`. The stamp is consumed: readers see the event as its writer built it.
pub fn as_stored_at(mut event: Event, stored_at: DateTime<Utc>) -> Event {
    if event.accept_by.take().is_some_and(|deadline| stored_at > deadline) {
        let original_type = event.body.type_name().to_string();
        let signal_id = event.body.signal_id();
        event.body = EventBody::Voided(Voided { original_type, signal_id });
    }
    event
}
