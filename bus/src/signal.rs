//! The rules of one signal's life, as pure functions: `apply` folds events into a
//! `SignalState`, `decide` turns a command into the events it causes or a refusal.
//!
//! `decide_hinted` (`signal/hinted.rs`) is the same rules on what a writer already knows (a `Hint`), so the hot
//! paths need no read.
//!
//! Deliberately no I/O and no clock: `now` is an argument. The compare-and-set that makes a
//! decision stick under concurrency lives in `store.rs`; these rules only say what is allowed.
//!
//! Life: `sent → delivered (→ acked)` (a send may record its push too: born delivered), `sent → expired`, `sent → recalled`. Terminal outcomes
//! (delivered, expired, recalled) are final and mutually exclusive; a bounce never lives at all.
//! A scheduled send (CONTRACT §16) is pending but invisible until due: `sent → released →
//! delivered`, with recall and expiry open all along (the rules of time are `schedule.rs`).

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::error::{DomainError, DomainResult, Refusal};
use crate::event::{
    DeliveredVia, EventBody, ExpiryReason, SignalAcked, SignalDelivered, SignalExpired, SignalRecalled, SignalSent,
};
pub use crate::schedule::is_due;
use crate::schedule::{is_visible, release_sent};

mod hinted;
pub use hinted::{decide_hinted, Hint};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Nothing recorded, or a bounce: for every command the signal does not exist.
    Absent,
    Pending,
    Delivered {
        acked: bool,
    },
    Expired,
    Recalled,
}

/// Everything the rules need to know about one signal.
#[derive(Debug, Clone, PartialEq)]
pub struct SignalState {
    pub sent: Option<Box<SignalSent>>,
    pub status: Status,
    /// Whether the id belongs to a bounced send (kept for dedupe answers).
    pub bounced: bool,
    pub deliveries: u32,
    pub last_delivery: Option<SignalDelivered>,
    /// Expired as undeliverable: a sync push that could not complete (`SignalCommand::Abandon`;
    /// its sender was answered `recipient_unavailable`), or a removed recipient
    /// (`RecipientRemoved`). A force-expire is not a give-up.
    pub given_up: bool,
    /// A scheduled signal whose `signal.released` is on the stream: visible from then on,
    /// whatever the reader's clock says.
    pub released: bool,
}

impl Default for SignalState {
    fn default() -> Self {
        Self {
            sent: None,
            status: Status::Absent,
            bounced: false,
            deliveries: 0,
            last_delivery: None,
            given_up: false,
            released: false,
        }
    }
}

/// A command on an existing signal.
#[derive(Debug, Clone, PartialEq)]
pub enum SignalCommand {
    /// Hand the signal to a session of its recipient. `redeliver` allows handing out again a
    /// signal delivered to a session that closed without acking it.
    Deliver {
        /// Who is being handed the signal: only its recipient may be.
        to: String,
        via: DeliveredVia,
        session_id: Option<Uuid>,
        redeliver: bool,
    },
    Recall {
        by: String,
    },
    Expire,
    /// Make a scheduled signal visible at its `deliver_at` (the sweeper's, CONTRACT §16).
    Release,
    /// Expire a pending signal now, as undeliverable, before any late delivery: a sync push
    /// that could not complete promptly (its sender is answered `recipient_unavailable`).
    Abandon,
    /// Expire a pending signal now because its recipient was removed (given up, like `Abandon`).
    RecipientRemoved,
    /// An operator's force-expire (CONTRACT §16): expire a pending signal now, whatever its
    /// `expires_at`. Like every expiry it loses to a delivery or a recall already on the stream.
    ForceExpire,
    /// Whether `by` may ack the signal (it was delivered to `by`). Acks decide no outcome, so
    /// writers record the ones decided here together, one `signals.acked` per batch on the
    /// recipient's acks subject, rather than each `signal.acked` on the signal's; the signal's
    /// own subject therefore says `acked: false` unless an older release wrote `signal.acked`.
    Ack {
        by: String,
        session_id: Option<Uuid>,
    },
}

impl SignalCommand {
    /// The delivery of a signal in `state` to `to`'s session `session_id` (`None`: an inbox
    /// drain). A signal already delivered and not acked goes out again (`redelivered: true`)
    /// only when the caller allows redelivery (a startup drain, an inbox drain) and the session
    /// it went to is neither the asking one nor open (`is_open`, the caller's presence): a
    /// delivery to a session still open is that session's to ack.
    pub fn deliver(
        state: &SignalState,
        to: &str,
        via: DeliveredVia,
        session_id: Option<Uuid>,
        allow_redeliver: bool,
        is_open: impl Fn(Uuid) -> bool,
    ) -> SignalCommand {
        let redeliver = allow_redeliver
            && state.status == (Status::Delivered { acked: false })
            && state
                .last_delivery
                .as_ref()
                .and_then(|d| d.session_id)
                .is_some_and(|sid| Some(sid) != session_id && !is_open(sid));
        SignalCommand::Deliver { to: to.to_string(), via, session_id, redeliver }
    }
}

/// The answer a recall gets (CONTRACT §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecallOutcome {
    Recalled,
    AlreadyDelivered,
    AlreadyExpired,
    NotFound,
}

impl RecallOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            RecallOutcome::Recalled => "recalled",
            RecallOutcome::AlreadyDelivered => "already_delivered",
            RecallOutcome::AlreadyExpired => "already_expired",
            RecallOutcome::NotFound => "not_found",
        }
    }

    /// The outcome a recall by `by` reports once the signal is in `state`.
    pub fn of(state: &SignalState, by: &str) -> Self {
        match (&state.sent, state.status) {
            (Some(sent), _) if sent.from != by => RecallOutcome::NotFound,
            (Some(_), Status::Recalled) => RecallOutcome::Recalled,
            (Some(_), Status::Delivered { .. }) => RecallOutcome::AlreadyDelivered,
            (Some(_), Status::Expired) => RecallOutcome::AlreadyExpired,
            _ => RecallOutcome::NotFound,
        }
    }
}

impl SignalState {
    pub fn from_events<'a>(events: impl IntoIterator<Item = &'a EventBody>) -> Self {
        let mut state = Self::default();
        for e in events {
            state.apply(e);
        }
        state
    }

    /// `from_events` of one event the caller owns and no longer needs: a send moves in whole
    /// instead of being copied (the state every recorded send answers from).
    pub fn from_event(event: EventBody) -> Self {
        let mut state = Self::default();
        match event {
            EventBody::SignalSent(sent) => state.apply_sent(sent),
            other => state.apply(&other),
        }
        state
    }

    fn apply_sent(&mut self, sent: Box<SignalSent>) {
        if self.status != Status::Absent || self.bounced {
            return;
        }
        self.status = Status::Pending;
        // A send that recorded its push is delivered by the same event.
        if let Some(d) = sent.delivery() {
            self.status = Status::Delivered { acked: false };
            self.deliveries = 1;
            self.last_delivery = Some(d);
        }
        self.sent = Some(sent);
    }

    /// Folds one event in. Never fails: an event on the stream is a fact. Events that cannot
    /// follow the current state (they lost no race, so they cannot exist) are ignored.
    pub fn apply(&mut self, event: &EventBody) {
        match event {
            EventBody::SignalSent(sent) => self.apply_sent(sent.clone()),
            EventBody::SignalBounced(_) if self.sent.is_none() => self.bounced = true,
            EventBody::SignalDelivered(d) if matches!(self.status, Status::Pending | Status::Delivered { .. }) => {
                self.status = Status::Delivered { acked: false };
                self.deliveries += 1;
                self.last_delivery = Some(d.clone());
            }
            EventBody::SignalAcked(_) if matches!(self.status, Status::Delivered { .. }) => {
                self.status = Status::Delivered { acked: true };
            }
            EventBody::SignalExpired(e) if self.status == Status::Pending => {
                self.status = Status::Expired;
                self.given_up = e.undeliverable;
            }
            EventBody::SignalRecalled(_) if self.status == Status::Pending => self.status = Status::Recalled,
            EventBody::SignalReleased(_) if self.status == Status::Pending => self.released = true,
            _ => {}
        }
    }

    pub fn is_terminal(&self) -> bool {
        matches!(self.status, Status::Delivered { .. } | Status::Expired | Status::Recalled)
    }

    pub(crate) fn overdue(&self, now: DateTime<Utc>) -> bool {
        self.sent.as_ref().is_some_and(|s| is_due(s.expires_at, now))
    }

    /// Whether its recipient may see the signal at `now`: not scheduled, or due, or released.
    pub fn visible(&self, now: DateTime<Utc>) -> bool {
        self.sent.as_ref().is_some_and(|s| is_visible(s.deliver_at, self.released, now))
    }

    /// Whether a repeat of this signal's send (same dedupe key) answers as the original did with
    /// a bounce: a sync send given up on the stream was answered `recipient_unavailable`.
    pub fn answered_as_bounce(&self) -> bool {
        self.given_up && self.sent.as_ref().is_some_and(|s| s.delivery_class == crate::catalog::DeliveryClass::Sync)
    }
}

/// Decides what `command` causes on a signal in `state` at `now`.
pub fn decide(state: &SignalState, command: &SignalCommand, now: DateTime<Utc>) -> DomainResult<Vec<EventBody>> {
    let Some(sent) = state.sent.as_deref() else {
        return match command {
            // A recall of an unknown id is an answer (not_found), not an error.
            SignalCommand::Recall { .. } => Ok(vec![]),
            _ => Err(DomainError::NotFound),
        };
    };
    let id = sent.signal_id;
    match command {
        SignalCommand::Deliver { to, via, session_id, redeliver } => {
            if sent.to != *to {
                return Err(DomainError::NotFound);
            }
            let redelivered = match state.status {
                Status::Pending => false,
                Status::Delivered { acked: false } if *redeliver => true,
                Status::Delivered { .. } => return Err(DomainError::Refused(Refusal::AlreadyDelivered)),
                Status::Expired => return Err(DomainError::Refused(Refusal::Expired)),
                Status::Recalled => return Err(DomainError::Refused(Refusal::Recalled)),
                Status::Absent => return Err(DomainError::NotFound),
            };
            if state.overdue(now) {
                return Err(DomainError::Refused(Refusal::Expired));
            }
            if !state.visible(now) {
                return Err(DomainError::Refused(Refusal::NotYetDue));
            }
            Ok(vec![EventBody::SignalDelivered(SignalDelivered {
                signal_id: id,
                to: sent.to.clone(),
                via: *via,
                session_id: *session_id,
                redelivered,
                expires_at: Some(sent.expires_at),
            })])
        }
        SignalCommand::Recall { by } => {
            if sent.from != *by || state.status != Status::Pending {
                return Ok(vec![]);
            }
            // Past its TTL the window has closed even if no sweeper has said so yet: record
            // the expiry the sweeper would have, so the answer and the stream agree.
            if state.overdue(now) {
                return Ok(vec![expired(sent)]);
            }
            Ok(vec![EventBody::SignalRecalled(SignalRecalled { signal_id: id, by: by.clone() })])
        }
        SignalCommand::Expire => match state.status {
            Status::Pending if state.overdue(now) => Ok(vec![expired(sent)]),
            Status::Pending => Err(DomainError::Refused(Refusal::NotYetDue)),
            _ => Err(DomainError::Refused(Refusal::AlreadyTerminal)),
        },
        SignalCommand::Release => release(state, sent, now),
        SignalCommand::Abandon | SignalCommand::RecipientRemoved | SignalCommand::ForceExpire => match state.status {
            Status::Pending => Ok(vec![expired_now(id, sent.expires_at, command)]),
            Status::Delivered { .. } => Err(DomainError::Refused(Refusal::AlreadyDelivered)),
            _ => Err(DomainError::Refused(Refusal::AlreadyTerminal)),
        },
        SignalCommand::Ack { by, session_id } => {
            if sent.to != *by {
                return Err(DomainError::NotFound);
            }
            match state.status {
                Status::Delivered { acked: false } => Ok(vec![EventBody::SignalAcked(SignalAcked {
                    signal_id: id,
                    by: by.clone(),
                    session_id: *session_id,
                })]),
                Status::Delivered { acked: true } => Ok(vec![]),
                _ => Err(DomainError::Refused(Refusal::NotDelivered)),
            }
        }
    }
}

fn expired(sent: &SignalSent) -> EventBody {
    expired_now(sent.signal_id, sent.expires_at, &SignalCommand::Expire)
}

/// The `signal.expired` an expiring command appends, with its reason.
fn expired_now(signal_id: Uuid, expires_at: DateTime<Utc>, command: &SignalCommand) -> EventBody {
    let reason = match command {
        SignalCommand::Abandon => ExpiryReason::Undeliverable,
        SignalCommand::RecipientRemoved => ExpiryReason::Removed,
        SignalCommand::ForceExpire => ExpiryReason::Forced,
        _ => ExpiryReason::Ttl,
    };
    EventBody::SignalExpired(SignalExpired {
        signal_id,
        expires_at,
        undeliverable: reason.gives_up(),
        reason: Some(reason),
    })
}

/// Decides a release of the signal `sent` in `state` at `now` (`decide`'s `Release` arm).
fn release(state: &SignalState, sent: &SignalSent, now: DateTime<Utc>) -> DomainResult<Vec<EventBody>> {
    match state.status {
        Status::Pending if state.released => Err(DomainError::Refused(Refusal::AlreadyReleased)),
        Status::Pending => release_sent(sent, now),
        Status::Delivered { .. } => Err(DomainError::Refused(Refusal::AlreadyDelivered)),
        _ => Err(DomainError::Refused(Refusal::AlreadyTerminal)),
    }
}

#[cfg(test)]
#[path = "signal_tests.rs"]
mod tests;
