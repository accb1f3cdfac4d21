//! Directive expiry (CONTRACT §14: "expire — the bus (sweeper), at the deadline"), the same
//! two halves as signal expiry: a timer per open directive due within the look-ahead window,
//! set from `directive.requested` on the tail and cleared by its end (`DirectiveTimers`), and
//! the backstop that pages the read models' open-by-deadline index (`expire_overdue`). Every
//! expiry is `SignalStore::execute_directive(Expire)`: a compare-and-set on the directive's
//! subject, so a claimer completing at the deadline and the sweeper cannot both win; the loser
//! is an ordinary outcome here. The expiry's lifecycle signals (`DirectiveExpired` to the
//! issuer and the workers) and recalls are then carried out through `send_lifecycle`, with
//! presence read from the roster.
//!
//! Deliberately decides nothing about a directive: `bus::directive::decide` does.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bus::catalog::TypeTable;
use bus::directive::DirectiveCommand;
use bus::event::{Event, EventBody, RecipientState};
use bus::send::RecipientView;
use bus::store::SignalStore;
use bus::{DomainError, Refusal};
use chrono::{DateTime, Utc};
use futures::StreamExt;
use projector::queries::{OverdueDirective, Queries};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::error::Result;
use crate::expire::ACTOR;
use crate::timers::TimerSet;

/// Which directive a timer belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DirectiveKey {
    pub tenant: String,
    pub id: Uuid,
}

/// What one directive expiry came to.
#[derive(Debug, Clone, PartialEq)]
pub enum DirectiveOutcome {
    /// `directive.expired` appended at `seq`; `signals` lifecycle signals recorded.
    Expired { seq: u64, signals: usize },
    /// Not due yet by our clock (a timer a hair early): retry later.
    NotYetDue,
    /// Ended already (a completion, cancel or rejection won), or no such directive.
    AlreadyEnded,
}

/// Timers at open directives' deadlines, within `lookahead` of now.
pub type DirectiveTimers = TimerSet<DirectiveKey, DateTime<Utc>>;

impl DirectiveTimers {
    /// Sets (or moves) the timer of `key` to `deadline`; false, and nothing set, beyond the window.
    pub fn offer(&mut self, key: DirectiveKey, deadline: DateTime<Utc>, now: DateTime<Utc>) -> bool {
        self.offer_at(key, deadline, deadline, now)
    }

    /// Follows one stream event: a `directive.requested` sets a timer at its deadline, an event
    /// that ends a directive clears it. Other events are ignored.
    pub fn observe(&mut self, event: &Event, now: DateTime<Utc>) {
        let key = |id: Uuid| DirectiveKey { tenant: event.tenant.clone(), id };
        match &event.body {
            EventBody::DirectiveRequested(r) => {
                self.offer(key(r.directive_id), r.deadline, now);
            }
            EventBody::DirectiveDeclined(d) if !d.rejects => {}
            EventBody::DirectiveCompleted(_)
            | EventBody::DirectiveFailed(_)
            | EventBody::DirectiveDeclined(_)
            | EventBody::DirectiveCanceled(_)
            | EventBody::DirectiveExpired(_) => {
                if let Some(id) = event.body.directive_id() {
                    self.cancel(&key(id));
                }
            }
            _ => {}
        }
    }

    /// Waits for the next timer to fire (forever while none is set): the key and its deadline.
    pub async fn next_due(&mut self) -> (DirectiveKey, DateTime<Utc>) {
        std::future::poll_fn(|cx| self.poll_fired(cx)).await
    }
}

/// Expires `tenant`/`id` through the compare-and-set, then sends its lifecycle signals and
/// recalls (presence from the tenant's roster in the read models).
pub async fn expire_directive(
    store: &SignalStore,
    queries: &dyn Queries,
    types: &TypeTable,
    tenant: &str,
    id: Uuid,
) -> Result<DirectiveOutcome> {
    let now = Utc::now();
    let executed = match store.execute_directive(tenant, id, &DirectiveCommand::Expire, ACTOR, now).await {
        Ok(executed) => executed,
        Err(bus::Error::Domain(DomainError::Refused(Refusal::NotYetDue))) => return Ok(DirectiveOutcome::NotYetDue),
        Err(bus::Error::Domain(DomainError::InvalidTransition { .. } | DomainError::UnknownDirective)) => {
            return Ok(DirectiveOutcome::AlreadyEnded)
        }
        Err(e) => return Err(e.into()),
    };
    let Some((seq, _)) = executed.appended else { return Ok(DirectiveOutcome::AlreadyEnded) };
    if let Some(req) = executed.state.requested.as_deref() {
        let seconds = (now - req.created_at).num_milliseconds().max(0) as f64 / 1000.0;
        crate::metrics::record_directive_expired(&req.directive_type, seconds);
    }
    let effects = executed.effects(tenant);
    let roster = Roster::read(queries, tenant).await?;
    let view = |to: &str| roster.view(to);
    let sent = store.send_lifecycle(tenant, types, &effects, view, now).await?;
    tracing::info!(tenant, directive_id = %id, seq, signals = sent.sent.len(), recalled = sent.recalled.len(), "directive expired");
    Ok(DirectiveOutcome::Expired { seq, signals: sent.sent.len() })
}

/// The tenant's agents and their recipient state from the read models: how the sweeper sees
/// the recipients of the lifecycle signals it sends.
#[derive(Debug, Default)]
pub struct Roster(HashMap<String, RecipientState>);

impl Roster {
    pub async fn read(queries: &dyn Queries, tenant: &str) -> Result<Roster> {
        let agents = queries.agents(tenant).await?;
        let parse = |s: &str| RecipientState::parse(s).unwrap_or(RecipientState::NotAvailableOffline);
        Ok(Roster(agents.into_iter().map(|a| (a.identity, parse(&a.state))).collect()))
    }

    /// The send view of `to`. The sweeper pushes nothing: a signal for a live recipient reaches
    /// it through a gateway's tail or its drain.
    pub fn view(&self, to: &str) -> RecipientView {
        RecipientView {
            registered: self.0.contains_key(to),
            state: self.0.get(to).copied().unwrap_or(RecipientState::NotAvailableOffline),
            has_live_ws: false,
            freshest_session: None,
        }
    }
}

/// What one backstop pass over directives did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DirectivesScanned {
    pub expired: u64,
    pub ended: u64,
    pub failed: u64,
}

/// Expires every open directive the read models list as past its deadline, page by page in
/// `(deadline, id)` order (keyset, so it runs ahead of the projector), `concurrency` at once.
pub async fn expire_overdue(
    store: &SignalStore,
    queries: &Arc<dyn Queries>,
    types: &TypeTable,
    page: u32,
    concurrency: usize,
    cancel: &CancellationToken,
) -> Result<DirectivesScanned> {
    let mut scanned = DirectivesScanned::default();
    let mut after: Option<(DateTime<Utc>, Uuid)> = None;
    while !cancel.is_cancelled() {
        let rows = queries.overdue_directives(Utc::now(), after, page).await?;
        let Some(last) = rows.last() else { break };
        after = Some((last.deadline, last.directive_id));
        let outcomes: Vec<(OverdueDirective, Result<DirectiveOutcome>)> = futures::stream::iter(rows)
            .map(|row| async move {
                let outcome = expire_directive(store, queries.as_ref(), types, &row.tenant, row.directive_id).await;
                (row, outcome)
            })
            .buffer_unordered(concurrency.max(1))
            .collect()
            .await;
        for (row, outcome) in outcomes {
            match outcome {
                Ok(DirectiveOutcome::Expired { .. }) => scanned.expired += 1,
                Ok(_) => scanned.ended += 1,
                Err(e) => {
                    scanned.failed += 1;
                    tracing::warn!(tenant = %row.tenant, directive_id = %row.directive_id, error = %e, "directive expiry failed; the next run retries");
                }
            }
        }
    }
    Ok(scanned)
}

/// Open directives due within `lookahead` of now but not yet due, for the timers.
pub async fn upcoming(
    queries: &Arc<dyn Queries>,
    now: DateTime<Utc>,
    lookahead: Duration,
    limit: u32,
) -> Result<Vec<OverdueDirective>> {
    let horizon = now + chrono::Duration::from_std(lookahead).unwrap_or(chrono::Duration::MAX);
    let rows = queries.overdue_directives(horizon, None, limit).await?;
    Ok(rows.into_iter().filter(|r| r.deadline > now).collect())
}

#[cfg(test)]
mod tests {
    //! Paused-time tests of the directive timers: what the tail sets and clears, the window.

    use bus::event::{DirectiveCompleted, DirectiveDeclined, DirectiveRequested};
    use chrono::TimeZone;
    use tokio::time::advance;

    use super::*;

    fn t0() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap()
    }

    fn requested(n: u128, deadline_secs: i64) -> Event {
        let body = EventBody::DirectiveRequested(Box::new(DirectiveRequested {
            directive_id: Uuid::from_u128(n),
            issuer: "alice".into(),
            assignee: "@crew".into(),
            candidates: vec!["bob".into(), "carol".into()],
            directive_type: "package.install".into(),
            params: "{}".into(),
            idempotency_key: format!("k{n}"),
            correlation_id: None,
            created_at: t0(),
            deadline: t0() + chrono::Duration::seconds(deadline_secs),
            redacted: vec![],
        }));
        Event::new("default", Some("alice".into()), t0(), body)
    }

    fn by_bob(body: EventBody) -> Event {
        Event::new("default", Some("bob".into()), t0(), body)
    }

    #[tokio::test(start_paused = true)]
    async fn the_tail_sets_a_timer_at_the_deadline_and_an_end_clears_it() {
        let mut timers = DirectiveTimers::new(Duration::from_secs(120));
        timers.observe(&requested(1, 5), t0());
        timers.observe(&requested(2, 10), t0());
        timers.observe(&requested(3, 600), t0());
        assert_eq!(timers.len(), 2, "beyond the window the backstop takes it");

        // A decline that does not reject leaves the timer; a completion clears it.
        let id = Uuid::from_u128(2);
        let decline = DirectiveDeclined { directive_id: id, by: "bob".into(), reason: None, rejects: false, at: t0() };
        timers.observe(&by_bob(EventBody::DirectiveDeclined(decline)), t0());
        assert_eq!(timers.len(), 2);
        let done = DirectiveCompleted {
            directive_id: id,
            by: "carol".into(),
            result: "{}".into(),
            claimed: true,
            at: t0(),
            redacted: vec![],
        };
        timers.observe(&by_bob(EventBody::DirectiveCompleted(done)), t0());
        assert_eq!(timers.len(), 1);

        let started = tokio::time::Instant::now();
        advance(Duration::from_secs(4)).await;
        let (key, deadline) = timers.next_due().await;
        assert_eq!((key.id, deadline), (Uuid::from_u128(1), t0() + chrono::Duration::seconds(5)));
        assert_eq!(started.elapsed(), Duration::from_secs(5), "fires at the deadline, not before");
        assert!(timers.is_empty());
    }
}
