//! Force-expire (CONTRACT §16, the operator's cleanup verb): page the pending signals a filter
//! matches out of the read models, and expire each on the stream with
//! `SignalCommand::ForceExpire` under its per-signal compare-and-set — racing delivery like the
//! sweeper, so a signal being delivered at that instant ends delivered or expired, never both.
//! A dry run expires nothing and counts (and lists the first of) what would expire.
//!
//! Deliberately decides nothing: which requests may run and what they match is
//! `bus::force_expire`, whether a signal may expire is `bus::signal`. A row the read models still
//! show pending after its signal settled costs one lost compare-and-set and counts as skipped.

use bus::event::ExpiryReason;
use bus::force_expire::ExpireFilter;
use bus::signal::{Hint, SignalCommand};
use bus::store::{Hinted, Known};
use bus::DomainError;
use chrono::Utc;
use futures::StreamExt;
use projector::queries::{PendingSignal, PendingSignals};

use crate::error::ApiError;
use crate::metrics;
use crate::state::Gateway;

/// The actor of a forced expiry on the stream.
const ACTOR: &str = "admin";

/// Pending signals read per page, and expired concurrently (each is its own compare-and-set).
const PAGE: u32 = 500;
const IN_FLIGHT: usize = 16;

/// A dry run lists at most this many of the signals it counts.
pub const DRY_RUN_LISTED: usize = 1000;

/// What a force-expire did: `expired` signals it expired, `skipped` matches that settled first
/// (delivered, recalled or expired on the stream before this expiry could be).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Expired {
    pub expired: u64,
    pub skipped: u64,
}

/// What a force-expire would expire now: the first `DRY_RUN_LISTED`, and how many in all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DryRun {
    pub listed: Vec<PendingSignal>,
    pub count: u64,
}

/// The pages of matches, each strictly after the last: a signal expired on one page is not
/// read again while the read models catch up, and a signal sent after the request began is
/// never matched, so the scan ends.
struct Pages {
    query: PendingSignals,
    done: bool,
}

impl Pages {
    /// The pages of what `filter` matches once the read models hold everything on the stream
    /// now, so every signal sent before the request is seen (as a drain sees it).
    async fn new(gw: &Gateway, filter: ExpireFilter) -> Result<Pages, ApiError> {
        let target = gw.store().log().last_seq().await?;
        if let Err(e) = gw.queries().wait_for(target, gw.config().drain_wait).await {
            tracing::warn!(error = %e, target, "read models lag; force-expiring the pending signals they hold");
        }
        let created_until = filter.created_until(Utc::now());
        Ok(Pages { query: PendingSignals { filter, created_until, after: None, limit: PAGE }, done: false })
    }

    async fn next(&mut self, gw: &Gateway) -> Result<Option<Vec<PendingSignal>>, ApiError> {
        if self.done {
            return Ok(None);
        }
        let rows = gw.queries().pending_signals(&self.query).await?;
        self.done = rows.len() < PAGE as usize;
        self.query.after = rows.last().map(PendingSignals::next_after);
        Ok((!rows.is_empty()).then_some(rows))
    }
}

/// Counts what `filter` matches now, listing the first `DRY_RUN_LISTED`.
pub async fn dry_run(gw: &Gateway, filter: ExpireFilter) -> Result<DryRun, ApiError> {
    let mut pages = Pages::new(gw, filter).await?;
    let mut out = DryRun::default();
    while let Some(rows) = pages.next(gw).await? {
        out.count += rows.len() as u64;
        let room = DRY_RUN_LISTED - out.listed.len();
        out.listed.extend(rows.into_iter().take(room));
    }
    Ok(out)
}

/// Expires every pending signal `filter` matches. A stream that fails part way ends the run
/// with `unavailable`, saying what was done: running the same request again finishes it (what
/// is expired no longer matches).
pub async fn expire(gw: &Gateway, filter: ExpireFilter) -> Result<Expired, ApiError> {
    let tenant = filter.tenant.clone();
    let mut pages = Pages::new(gw, filter).await?;
    let mut done = Expired::default();
    let partial = |done: Expired, e: ApiError| match done {
        Expired { expired: 0, skipped: 0 } => e,
        Expired { expired, skipped } => ApiError::Unavailable(format!(
            "the event stream failed after {expired} expiries ({skipped} skipped); the other matches may still be \
             pending: run the same request again (what is expired no longer matches)"
        )),
    };
    loop {
        let rows = match pages.next(gw).await {
            Ok(Some(rows)) => rows,
            Ok(None) => return Ok(done),
            Err(e) => return Err(partial(done, e)),
        };
        let outcomes: Vec<Result<bool, ApiError>> = futures::stream::iter(rows)
            .map(|row| expire_one(gw, &tenant, row))
            .buffer_unordered(IN_FLIGHT)
            .collect()
            .await;
        let mut failed = None;
        for outcome in outcomes {
            match outcome {
                Ok(true) => done.expired += 1,
                Ok(false) => done.skipped += 1,
                Err(e) => failed = failed.or(Some(e)),
            }
        }
        if let Some(e) = failed {
            tracing::warn!(tenant, expired = done.expired, skipped = done.skipped, "force-expire stopped: {e}");
            return Err(partial(done, e));
        }
    }
}

/// Expires one match, deciding on the read model's row first (`Hint::Pending`, appended only if
/// the row's newest event is still the signal's): `true` when this call expired it, `false`
/// when something else settled it first.
async fn expire_one(gw: &Gateway, tenant: &str, row: PendingSignal) -> Result<bool, ApiError> {
    let known = Known {
        hint: Hint::Pending { expires_at: row.expires_at },
        last_seq: row.last_event_seq,
        correlation_id: row.correlation_id.clone(),
    };
    let outcome =
        gw.store().execute_hinted(tenant, row.id, |_| SignalCommand::ForceExpire, ACTOR, Utc::now(), Some(known)).await;
    match outcome {
        Ok(Hinted { appended: Some(_), .. }) => {
            metrics::expired(&gw.config().types, &row.signal_type, ExpiryReason::Forced);
            Ok(true)
        }
        // Delivered, recalled or expired first; or gone from the stream (past its retention).
        Ok(Hinted { appended: None, .. })
        | Err(bus::Error::Domain(DomainError::Refused(_) | DomainError::NotFound)) => Ok(false),
        Err(e) => Err(ApiError::from(e)),
    }
}
