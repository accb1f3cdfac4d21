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
//! instead of two). Anything else, or a lost compare-and-set, falls back to
//! `SignalStore::execute`, which re-reads and re-decides.
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
use bus::event::{Entity, Event, EventBody, SignalExpired};
use bus::log::Expect;
use bus::signal::{decide, SignalCommand, SignalState};
use bus::store::SignalStore;
use bus::DomainError;
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
/// hint is current (see the module docs), `expire_one` when it is not.
pub async fn expire_pending(
    store: &SignalStore,
    types: &TypeTable,
    tenant: &str,
    id: Uuid,
    known: &Pending,
) -> Result<Outcome> {
    let now = Utc::now();
    // `decide`'s own rule for a pending signal (`now >= expires_at`), checked before appending
    // so a timer that fired a hair early is retried rather than expiring ahead of time.
    if now < known.expires_at {
        return Ok(Outcome::NotYetDue);
    }
    // Sequence 0 would mean "the subject is empty": never a hint about a sent signal.
    if known.last_seq == 0 {
        return expire_one(store, types, tenant, id).await;
    }
    let body = EventBody::SignalExpired(SignalExpired { signal_id: id, expires_at: known.expires_at });
    let mut event = Event::new(tenant, Some(ACTOR.to_string()), now, body);
    event.correlation_id = known.correlation_id.clone();
    match store.append(&event, Expect::LastSubjectSeq(known.last_seq)).await {
        Ok(appended) => Ok(expired(types, appended.seq, known.signal_type.clone(), known.expires_at)),
        // Something happened to the signal since the hint (or the hint is from elsewhere): read
        // the subject and decide on what is really there.
        Err(bus::Error::Conflict { .. }) => expire_one(store, types, tenant, id).await,
        Err(e) => Err(e.into()),
    }
}

/// Expires `tenant`/`id` if it is pending and due now.
pub async fn expire_one(store: &SignalStore, types: &TypeTable, tenant: &str, id: Uuid) -> Result<Outcome> {
    let now = Utc::now();
    if let Some((seq, signal_type, expires_at)) = fast_path(store, tenant, id, now).await? {
        return Ok(expired(types, seq, signal_type, expires_at));
    }
    match store.execute(tenant, id, &SignalCommand::Expire, ACTOR, now).await {
        Ok(executed) => {
            let (Some(&seq), Some(sent)) = (executed.appended.last(), executed.state.sent.as_deref()) else {
                return Ok(Outcome::AlreadyTerminal);
            };
            Ok(expired(types, seq, sent.signal_type.clone(), sent.expires_at))
        }
        // The one refusal that means "pending, ask again later" (`bus::signal::decide`).
        Err(bus::Error::Domain(DomainError::Refused("not yet due"))) => Ok(Outcome::NotYetDue),
        Err(bus::Error::Domain(DomainError::Refused(_))) => Ok(Outcome::AlreadyTerminal),
        Err(bus::Error::Domain(DomainError::NotFound)) => Ok(Outcome::NotFound),
        Err(e) => Err(e.into()),
    }
}

/// The fast path (see the module docs). `None`: not applicable or lost, use the full path.
async fn fast_path(
    store: &SignalStore,
    tenant: &str,
    id: Uuid,
    now: DateTime<Utc>,
) -> Result<Option<(u64, String, DateTime<Utc>)>> {
    let subject = store.log().subjects().of(tenant, Entity::Signal(id));
    let Some(last) = store.log().last_on_subject(&subject).await? else { return Ok(None) };
    let EventBody::SignalSent(sent) = &last.event.body else { return Ok(None) };
    let state = SignalState::from_events([&last.event.body]);
    let Ok(bodies) = decide(&state, &SignalCommand::Expire, now) else { return Ok(None) };
    let Ok([body]) = <[EventBody; 1]>::try_from(bodies) else { return Ok(None) };
    let mut event = Event::new(tenant, Some(ACTOR.to_string()), now, body);
    event.correlation_id = sent.correlation_id.clone();
    match store.append(&event, Expect::LastSubjectSeq(last.seq)).await {
        Ok(appended) => Ok(Some((appended.seq, sent.signal_type.clone(), sent.expires_at))),
        Err(bus::Error::Conflict { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

fn expired(types: &TypeTable, seq: u64, signal_type: String, expires_at: DateTime<Utc>) -> Outcome {
    // Measured after the append succeeded: the lag a reader of the stream observes.
    let lag = (Utc::now() - expires_at).to_std().unwrap_or(Duration::ZERO);
    metrics::record_expired(types, &signal_type, lag);
    Outcome::Expired { seq, signal_type, lag }
}
