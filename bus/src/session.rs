//! The rules of a session's life on the stream, as pure functions: the events that open, beat
//! and close a session (`opened`, `heartbeat`, `closed`), and whether a close is due
//! (`decide_close`) given the newest event on the session's subject.
//!
//! Deliberately no I/O and no clock: the gateway's lifecycle reads the subject's newest event,
//! asks `decide_close`, and appends the close conditional on that event still being the newest,
//! so of every node that tries, exactly one close sticks.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::event::{EventBody, SessionClosed, SessionHeartbeat, SessionKind, SessionOpened, Surface};
use crate::log::Stored;

/// `session.opened` for a session of `identity` on gateway `node`.
pub fn opened(session_id: Uuid, identity: &str, kind: SessionKind, surface: Surface, node: &str) -> EventBody {
    EventBody::SessionOpened(SessionOpened {
        session_id,
        identity: identity.to_string(),
        kind,
        surface,
        node: node.to_string(),
    })
}

/// `session.heartbeat`.
pub fn heartbeat(session_id: Uuid, identity: &str) -> EventBody {
    EventBody::SessionHeartbeat(SessionHeartbeat { session_id, identity: identity.to_string() })
}

/// `session.closed`, with `reason` from the bounded close vocabulary.
pub fn closed(session_id: Uuid, identity: &str, reason: &str) -> EventBody {
    EventBody::SessionClosed(SessionClosed { session_id, identity: identity.to_string(), reason: reason.to_string() })
}

/// What a close of a session decides.
#[derive(Debug, Clone, PartialEq)]
pub enum Closing {
    /// Nothing is recorded of the session: nothing to close.
    Unknown,
    /// Its newest event is its close already.
    AlreadyClosed,
    /// Heard after `silent_before` (a reaper's close of a silent session): still alive.
    StillHeard,
    /// Append this, expecting `newest_seq` to still be the subject's newest sequence.
    Close { event: EventBody, newest_seq: u64 },
}

/// Decides the close of session `session_id` of `identity` for `reason`, from the newest event
/// on its subject. With `silent_before`, only a session silent since then is closed.
pub fn decide_close(
    newest: Option<&Stored>,
    session_id: Uuid,
    identity: &str,
    reason: &str,
    silent_before: Option<DateTime<Utc>>,
) -> Closing {
    let Some(newest) = newest else { return Closing::Unknown };
    if matches!(newest.event.body, EventBody::SessionClosed(_)) {
        return Closing::AlreadyClosed;
    }
    if silent_before.is_some_and(|before| newest.event.occurred_at > before) {
        return Closing::StillHeard;
    }
    Closing::Close { event: closed(session_id, identity, reason), newest_seq: newest.seq }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Event;
    use chrono::TimeZone;

    fn t0() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 24, 12, 0, 0).unwrap()
    }

    fn stored(seq: u64, body: EventBody, at: DateTime<Utc>) -> Stored {
        let event = Event::new("t", Some("bob".into()), at, body);
        Stored { seq, subject: "s".into(), event }
    }

    #[test]
    fn given_nothing_recorded_when_closed_then_nothing_to_close() {
        assert_eq!(decide_close(None, Uuid::nil(), "bob", "silent", None), Closing::Unknown);
    }

    #[test]
    fn given_a_close_when_closed_again_then_already_closed() {
        let last = stored(3, closed(Uuid::nil(), "bob", "client_closed"), t0());
        assert_eq!(decide_close(Some(&last), Uuid::nil(), "bob", "silent", None), Closing::AlreadyClosed);
    }

    #[test]
    fn given_a_heartbeat_after_the_silence_bound_when_reaped_then_still_heard() {
        let last = stored(2, heartbeat(Uuid::nil(), "bob"), t0());
        let before = Some(t0() - chrono::Duration::seconds(1));
        assert_eq!(decide_close(Some(&last), Uuid::nil(), "bob", "silent", before), Closing::StillHeard);
    }

    #[test]
    fn given_an_open_session_when_closed_then_a_close_conditional_on_its_newest_event() {
        let last = stored(2, heartbeat(Uuid::nil(), "bob"), t0());
        let before = Some(t0() + chrono::Duration::seconds(1));
        assert_eq!(
            decide_close(Some(&last), Uuid::nil(), "bob", "silent", before),
            Closing::Close { event: closed(Uuid::nil(), "bob", "silent"), newest_seq: 2 }
        );
    }
}
