//! `decide_hinted`: the rules of `decide` on what a writer already knows of a signal's newest
//! event (a `Hint`), so the hot paths (a push right after its send, the sweeper's expiries and
//! releases) need no read of the stream.
//!
//! Deliberately never a second set of rules: where the hint cannot settle a command it answers
//! `None` (read the stream and `decide`); otherwise exactly what `decide` answers on the state
//! the hint describes.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{expired, expired_now, SignalCommand, SignalState, Status};
use crate::error::{DomainError, DomainResult, Refusal};
use crate::event::{EventBody, SignalDelivered, SignalSent};
use crate::schedule::{is_due, is_visible, release_sent, released};

/// What a writer already knows about a signal's newest event, so a command can be decided
/// without reading the stream. The append that follows is conditional on that event still
/// being the newest (`store::SignalStore::execute_hinted`), so a stale hint costs a read, never
/// a wrong outcome.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Hint<'a> {
    /// The newest event is the signal's `signal.sent` (a push right after the send).
    Sent(&'a SignalSent),
    /// The newest event is the `signal.released` of this scheduled send (a push on release).
    Released(&'a SignalSent),
    /// The signal is pending and due at `expires_at` (the read model's view: the sweeper, a
    /// force-expire).
    Pending { expires_at: DateTime<Utc> },
    /// The newest event is the `signal.sent` of a send to `to` scheduled for `deliver_at` and
    /// expiring at `expires_at` (the read model's or the tail's view: the sweeper's release).
    Scheduled { to: &'a str, deliver_at: DateTime<Utc>, expires_at: DateTime<Utc> },
}

impl Hint<'_> {
    /// The state the hint describes, as far as a command's choice may depend on it (the status;
    /// not the signal's body).
    pub fn status(&self) -> SignalState {
        SignalState { status: Status::Pending, released: matches!(self, Hint::Released(_)), ..SignalState::default() }
    }
}

/// Decides `command` on signal `id` from `hint` alone: `None` when the hint cannot settle it
/// (read the stream and `decide`); otherwise exactly what `decide` answers on the state the
/// hint describes.
pub fn decide_hinted(
    id: Uuid,
    hint: &Hint<'_>,
    command: &SignalCommand,
    now: DateTime<Utc>,
) -> Option<DomainResult<Vec<EventBody>>> {
    // A send that recorded its push is not pending: the hint cannot settle anything on it.
    if matches!(hint, Hint::Sent(sent) if sent.pushed_to.is_some()) {
        return None;
    }
    match (hint, command) {
        (Hint::Sent(sent) | Hint::Released(sent), SignalCommand::Deliver { to, via, session_id, .. }) => {
            Some(if sent.to != *to {
                Err(DomainError::NotFound)
            } else if is_due(sent.expires_at, now) {
                Err(DomainError::Refused(Refusal::Expired))
            } else if !is_visible(sent.deliver_at, matches!(hint, Hint::Released(_)), now) {
                Err(DomainError::Refused(Refusal::NotYetDue))
            } else {
                Ok(vec![EventBody::SignalDelivered(SignalDelivered {
                    signal_id: id,
                    to: sent.to.clone(),
                    via: *via,
                    session_id: *session_id,
                    redelivered: false,
                    expires_at: Some(sent.expires_at),
                })])
            })
        }
        (Hint::Sent(sent) | Hint::Released(sent), SignalCommand::Expire) => Some(if is_due(sent.expires_at, now) {
            Ok(vec![expired(sent)])
        } else {
            Err(DomainError::Refused(Refusal::NotYetDue))
        }),
        (Hint::Sent(sent), SignalCommand::Release) => Some(release_sent(sent, now)),
        (Hint::Released(_), SignalCommand::Release) => Some(Err(DomainError::Refused(Refusal::AlreadyReleased))),
        (Hint::Scheduled { to, deliver_at, expires_at }, SignalCommand::Release) => {
            Some(released(id, to, *deliver_at, *expires_at, now))
        }

        (Hint::Pending { expires_at } | Hint::Scheduled { expires_at, .. }, SignalCommand::Expire)
            if is_due(*expires_at, now) =>
        {
            Some(Ok(vec![expired_now(id, *expires_at, command)]))
        }
        (Hint::Pending { expires_at } | Hint::Scheduled { expires_at, .. }, SignalCommand::ForceExpire) => {
            Some(Ok(vec![expired_now(id, *expires_at, command)]))
        }
        _ => None,
    }
}
