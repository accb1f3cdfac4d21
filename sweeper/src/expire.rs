//! One expiry: expire a signal through the per-signal compare-and-set, classify the answer,
//! and count it.
//!
//! Deliberately decides nothing itself: `bus::signal::decide` says whether the signal may
//! expire, and the compare-and-set append makes a racing delivery or recall win cleanly; a lost
//! race is an ordinary outcome here, not an error. Which signals to expire, and when, is
//! `timers.rs`'s and `scan.rs`'s business.
//!
//! Fast path: a pending, never-touched signal has exactly one event on its subject, the send
//! (it is always the subject's first). So when the subject's *last* event is `signal.sent`, that
//! one event is the whole state: we decide on it and append conditional on it still being the
//! last — one O(1) read instead of reading the subject to its end (on JetStream: one direct get
//! instead of two). Anything else, or a lost compare-and-set, falls back to reading the
//! subject and deciding again — both inside `SignalStore::execute_hinted`.
//!
//! Faster still (`expire_pending`): when the caller already knows the subject's last sequence
//! — the scan from the read model's `last_event_seq`, the timers from the `signal.sent` they
//! saw on the tail — no read at all: one conditional append. It is sound because the only
//! way that sequence is still the subject's last is that nothing happened to the signal since
//! a state in which it was pending, and a pending signal past `expires_at` may expire
//! (`bus::signal::decide`). A stale hint (a delivery, recall or expiry since) fails the
//! compare-and-set, and only then do we pay for the reads above.

use std::time::Duration;

use bus::catalog::TypeTable;
use bus::event::{Entity, EventBody};
use bus::signal::{Hint, SignalCommand};
use bus::store::{Hinted, Known, SignalStore};
use bus::{DomainError, Refusal};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::error::Result;
use crate::metrics;

/// The actor recorded on every event the sweeper appends.
pub const ACTOR: &str = "signalbus/sweeper";

/// What one expiry attempt came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// We appended `signal.expired` at stream sequence `seq`, `lag` after `expires_at`.
    Expired { seq: u64, signal_type: String, lag: Duration },
    /// Still pending and not due by our clock (timer fired early against wall time): retry later.
    NotYetDue,
    /// Delivered, recalled or expired already: someone else's terminal event stands.
    AlreadyTerminal,
    /// No such signal on the stream (a bounce, or a read-model row for another stream).
    NotFound,
}

/// What a caller already knows of a signal it believes pending (from a read-model row or the
/// `signal.sent` on the tail): enough to write its `signal.expired` without reading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    pub signal_type: String,
    pub expires_at: DateTime<Utc>,
    pub correlation_id: Option<String>,
    /// The subject's last stream sequence as the caller saw it: the compare-and-set's expectation.
    pub last_seq: u64,
}

impl From<&projector::queries::Overdue> for Pending {
    fn from(o: &projector::queries::Overdue) -> Self {
        Pending {
            signal_type: o.signal_type.clone(),
            expires_at: o.expires_at,
            correlation_id: o.correlation_id.clone(),
            last_seq: o.last_event_seq,
        }
    }
}

/// Expires `tenant`/`id`, believed pending as `known` says: one conditional append when the
/// hint is current (see the module docs), reads when it is not.
pub async fn expire_pending(
    store: &SignalStore,
    types: &TypeTable,
    tenant: &str,
    id: Uuid,
    known: &Pending,
) -> Result<Outcome> {
    let now = Utc::now();
    // `decide`'s own rule for a pending signal (`now >= expires_at`), checked before anything
    // else so a timer that fired a hair early is retried rather than read for nothing.
    if !bus::signal::is_due(known.expires_at, now) {
        return Ok(Outcome::NotYetDue);
    }
    let hint = Known {
        hint: Hint::Pending { expires_at: known.expires_at },
        last_seq: known.last_seq,
        correlation_id: known.correlation_id.clone(),
    };
    let fallback = (&known.signal_type, known.expires_at);
    expire(store, types, tenant, id, now, Some(hint), Some(fallback)).await
}

/// Expires `tenant`/`id` if it is pending and due now.
pub async fn expire_one(store: &SignalStore, types: &TypeTable, tenant: &str, id: Uuid) -> Result<Outcome> {
    let now = Utc::now();
    // The fast path (see the module docs): the subject's newest event, if it is the send, is
    // the whole state.
    let subject = store.log().subjects().of(tenant, Entity::Signal(id));
    let last = store.log().last_on_subject(&subject).await?;
    let known = last.as_ref().and_then(|l| match &l.event.body {
        EventBody::SignalSent(sent) => {
            Some(Known { hint: Hint::Sent(sent), last_seq: l.seq, correlation_id: sent.correlation_id.clone() })
        }
        _ => None,
    });
    let fallback = last.as_ref().and_then(|l| match &l.event.body {
        EventBody::SignalSent(sent) => Some((&sent.signal_type, sent.expires_at)),
        _ => None,
    });
    expire(store, types, tenant, id, now, known, fallback).await
}

/// The one expiry path: `execute_hinted`, its answer classified. `known_type` names the signal
/// when the hint sufficed (no state was read).
async fn expire(
    store: &SignalStore,
    types: &TypeTable,
    tenant: &str,
    id: Uuid,
    now: DateTime<Utc>,
    known: Option<Known<'_>>,
    known_type: Option<(&String, DateTime<Utc>)>,
) -> Result<Outcome> {
    match store.execute_hinted(tenant, id, |_| SignalCommand::Expire, ACTOR, now, known).await {
        Ok(Hinted { appended: Some((seq, _)), state }) => {
            let from_state = state.as_ref().and_then(|s| s.sent.as_deref()).map(|s| (&s.signal_type, s.expires_at));
            match from_state.or(known_type) {
                Some((signal_type, expires_at)) => Ok(expired(types, seq, signal_type.clone(), expires_at)),
                None => Ok(Outcome::AlreadyTerminal),
            }
        }
        Ok(Hinted { appended: None, .. }) => Ok(Outcome::AlreadyTerminal),
        // The one refusal that means "pending, ask again later" (`bus::signal::decide`).
        Err(bus::Error::Domain(DomainError::Refused(Refusal::NotYetDue))) => Ok(Outcome::NotYetDue),
        Err(bus::Error::Domain(DomainError::Refused(_))) => Ok(Outcome::AlreadyTerminal),
        Err(bus::Error::Domain(DomainError::NotFound)) => Ok(Outcome::NotFound),
        Err(e) => Err(e.into()),
    }
}

fn expired(types: &TypeTable, seq: u64, signal_type: String, expires_at: DateTime<Utc>) -> Outcome {
    // Measured after the append succeeded: the lag a reader of the stream observes.
    let lag = (Utc::now() - expires_at).to_std().unwrap_or(Duration::ZERO);
    metrics::record_expired(types, &signal_type, lag);
    Outcome::Expired { seq, signal_type, lag }
}
