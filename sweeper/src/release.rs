//! Releasing scheduled signals on time (CONTRACT §16), the same two halves as expiry: a timer
//! per scheduled signal due within the look-ahead window, set from its `signal.sent` on the tail
//! and cleared by its release, delivery, recall or expiry (`ReleaseTimers`, a second kind of
//! `TimerSet` keyed by signal); and the backstop that pages the read models' due-release index
//! and releases every row it lists (`release_due`), which after a restart of every role
//! releases the overdue ones at once. Each release is one `signal.released` through the
//! per-signal compare-and-set (`release_scheduled`), so a recall or an expiry racing it on the
//! stream leaves exactly one of them, and no signal is released twice.
//!
//! Deliberately decides nothing: `bus::signal::decide` (`SignalCommand::Release`) says whether
//! a signal may be released; a refusal is an ordinary outcome here. Pushing a released signal
//! is the gateways' (they follow the tail).

use std::sync::Arc;
use std::time::Duration;

use bus::event::{Event, EventBody, SignalDelivered, SignalExpired, SignalRecalled, SignalReleased};
use bus::signal::{Hint, SignalCommand};
use bus::store::{Hinted, Known, SignalStore};
use bus::{DomainError, Refusal};
use chrono::{DateTime, Utc};
use projector::queries::{DueRelease, Queries};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::expire::ACTOR;
use crate::metrics;
use crate::scan::ScanLimits;
use crate::timers::{SignalKey, TimerSet};

/// What the caller knows of a scheduled signal it believes pending and unreleased (from its
/// `signal.sent` on the tail, or a read-model row): enough to append its release unread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scheduled {
    pub to: String,
    pub deliver_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub correlation_id: Option<String>,
    /// The subject's last stream sequence as the caller saw it: the compare-and-set's expectation.
    pub last_seq: u64,
}

impl From<&DueRelease> for Scheduled {
    fn from(r: &DueRelease) -> Self {
        Scheduled {
            to: r.to_identity.clone(),
            deliver_at: r.deliver_at,
            expires_at: r.expires_at,
            correlation_id: r.correlation_id.clone(),
            last_seq: r.last_event_seq,
        }
    }
}

/// What one release attempt came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Released {
    /// We appended `signal.released` at `seq`, `lag` after `deliver_at`.
    Released { seq: u64, lag: Duration },
    /// Not due by our clock (a timer a hair early): retry shortly.
    NotYetDue,
    /// Released, delivered, recalled or expired already, or past its TTL (the expiry's turn).
    Ended,
    /// No such signal on the stream.
    NotFound,
}

/// Releases `tenant`/`id`, believed scheduled and unreleased as `known` says: one conditional
/// append while that is still the subject's newest event, a read and a new decision otherwise.
pub async fn release_scheduled(store: &SignalStore, tenant: &str, id: Uuid, known: &Scheduled) -> Result<Released> {
    let now = Utc::now();
    if now < known.deliver_at {
        return Ok(Released::NotYetDue);
    }
    let hint = Known {
        hint: Hint::Scheduled { to: &known.to, deliver_at: known.deliver_at, expires_at: known.expires_at },
        last_seq: known.last_seq,
        correlation_id: known.correlation_id.clone(),
    };
    match store.execute_hinted(tenant, id, |_| SignalCommand::Release, ACTOR, now, Some(hint)).await {
        Ok(Hinted { appended: Some((seq, EventBody::SignalReleased(r))), .. }) => {
            // Measured after the append: the lag a reader of the stream observes.
            let lag = (Utc::now() - r.deliver_at).to_std().unwrap_or(Duration::ZERO);
            metrics::record_released(lag);
            Ok(Released::Released { seq, lag })
        }
        Ok(_) => Ok(Released::Ended),
        Err(bus::Error::Domain(DomainError::Refused(Refusal::NotYetDue))) => Ok(Released::NotYetDue),
        Err(bus::Error::Domain(DomainError::Refused(_))) => Ok(Released::Ended),
        Err(bus::Error::Domain(DomainError::NotFound)) => Ok(Released::NotFound),
        Err(e) => Err(e.into()),
    }
}

/// Timers at scheduled signals' `deliver_at`, within the look-ahead window of now.
pub type ReleaseTimers = TimerSet<SignalKey, Scheduled>;

impl ReleaseTimers {
    /// Sets (or moves) the timer of `key` to `scheduled.deliver_at`; false, and nothing set,
    /// beyond the window.
    pub fn offer(&mut self, key: SignalKey, scheduled: Scheduled, now: DateTime<Utc>) -> bool {
        let at = scheduled.deliver_at;
        self.offer_at(key, scheduled, at, now)
    }

    /// Follows one stream event stored at `seq`: a scheduled send sets its signal's timer (its
    /// sequence the release's compare-and-set), its release, delivery, recall or expiry clears it.
    pub fn observe(&mut self, seq: u64, event: &Event, now: DateTime<Utc>) {
        let key = |id: Uuid| SignalKey { tenant: event.tenant.clone(), id };
        match &event.body {
            EventBody::SignalSent(sent) => {
                if let (Some(deliver_at), None) = (sent.deliver_at, sent.pushed_to) {
                    let scheduled = Scheduled {
                        to: sent.to.clone(),
                        deliver_at,
                        expires_at: sent.expires_at,
                        correlation_id: sent.correlation_id.clone(),
                        last_seq: seq,
                    };
                    self.offer(key(sent.signal_id), scheduled, now);
                }
            }
            EventBody::SignalReleased(SignalReleased { signal_id, .. })
            | EventBody::SignalDelivered(SignalDelivered { signal_id, .. })
            | EventBody::SignalExpired(SignalExpired { signal_id, .. })
            | EventBody::SignalRecalled(SignalRecalled { signal_id, .. }) => {
                self.cancel(&key(*signal_id));
            }
            _ => {}
        }
    }

    /// Waits for the next timer to fire (forever while none is set).
    pub async fn next_due(&mut self) -> (SignalKey, Scheduled) {
        std::future::poll_fn(|cx| self.poll_fired(cx)).await
    }
}

/// What one backstop pass of releases did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReleaseCounts {
    pub released: u64,
    /// Released, delivered, recalled or expired by someone else first (or gone).
    pub ended: u64,
    pub failed: u64,
    /// `due_releases` queries asked.
    pub pages: u64,
}

/// Releases every scheduled signal the read models list as due, page by page in `(deliver_at,
/// id)` order with keyset paging (so it runs ahead of the projector, as the expiry scan does),
/// `limits.concurrency` at once. Rows already past their TTL are left to the expiry.
pub async fn release_due(
    store: &SignalStore,
    queries: &Arc<dyn Queries>,
    limits: &ScanLimits,
    cancel: &CancellationToken,
) -> Result<ReleaseCounts> {
    let mut counts = ReleaseCounts::default();
    let mut after: Option<(DateTime<Utc>, Uuid)> = None;
    let mut inflight: JoinSet<Result<Released>> = JoinSet::new();
    while !cancel.is_cancelled() {
        let now = Utc::now();
        let rows = queries.due_releases(now, after, limits.page).await?;
        counts.pages += 1;
        let Some(last) = rows.last() else { break };
        after = Some((last.deliver_at, last.id));
        for row in rows.into_iter().filter(|r| r.expires_at > now) {
            while inflight.len() >= limits.concurrency {
                count(&mut counts, inflight.join_next().await)?;
            }
            let store = store.clone();
            inflight.spawn(async move {
                let outcome = release_scheduled(&store, &row.tenant, row.id, &Scheduled::from(&row)).await;
                if let Err(e) = &outcome {
                    tracing::warn!(tenant = %row.tenant, signal_id = %row.id, error = %e, "release failed; next run retries");
                }
                outcome
            });
        }
    }
    while !inflight.is_empty() {
        count(&mut counts, inflight.join_next().await)?;
    }
    Ok(counts)
}

fn count(
    counts: &mut ReleaseCounts,
    joined: Option<std::result::Result<Result<Released>, tokio::task::JoinError>>,
) -> Result<()> {
    match joined {
        Some(Ok(Ok(Released::Released { .. }))) => counts.released += 1,
        Some(Ok(Ok(Released::NotYetDue))) | None => {}
        Some(Ok(Ok(Released::Ended | Released::NotFound))) => counts.ended += 1,
        Some(Ok(Err(_))) => counts.failed += 1,
        Some(Err(e)) if e.is_panic() => return Err(Error::Task(e.to_string())),
        Some(Err(_)) => {}
    }
    Ok(())
}

/// Scheduled signals due within `lookahead` of now but not yet due, soonest first, at most
/// `limit`: the run hands them to the timers.
pub async fn upcoming(
    queries: &Arc<dyn Queries>,
    now: DateTime<Utc>,
    lookahead: Duration,
    limit: u32,
) -> Result<Vec<DueRelease>> {
    let horizon = now + chrono::Duration::from_std(lookahead).unwrap_or(chrono::Duration::MAX);
    let rows = queries.due_releases(horizon, None, limit).await?;
    Ok(rows.into_iter().filter(|r| r.deliver_at > now).collect())
}

#[cfg(test)]
#[path = "release_tests.rs"]
mod tests;
