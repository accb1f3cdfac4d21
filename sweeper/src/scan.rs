//! The backstop: page through the read models' expiry index (`Queries::overdue`) and expire
//! everything due, many at once; and list what falls due within the look-ahead window so the
//! timers can take it.
//!
//! Deliberately trusts the stream, not the read model: a row is only a hint (its
//! `last_event_seq` the expected subject sequence), the compare-and-set decides. Runs at leadership start (restarts, fail-over, outage backlog) and
//! every `sweep_interval` for whatever the timers missed.

use std::sync::Arc;
use std::time::Duration;

use bus::catalog::TypeTable;
use bus::store::SignalStore;
use chrono::{DateTime, Utc};
use projector::queries::{Overdue, Queries};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::expire::{expire_pending, Pending};
use crate::tally::{Counts, Tally};

/// How the scan pages and fans out.
#[derive(Debug, Clone)]
pub struct ScanLimits {
    /// Rows asked of `overdue` per page.
    pub page: u32,
    /// Expiries in flight at once. Each is one conditional append when the read model is
    /// current (`expire_pending`), so the throughput is roughly `concurrency / round trip`.
    pub concurrency: usize,
}

/// What one scan did.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Scanned {
    pub counts: Counts,
    /// `overdue` queries asked.
    pub pages: u64,
}

/// Expires every pending signal the read models list as due, page by page in `(expires_at,
/// id)` order, each page continuing strictly after the last row of the previous one, until a
/// page comes back empty. Returns what this scan did (also added to `tally`).
///
/// Keyset paging is what lets the scan run ahead of the read models: a row we expired stays
/// listed until the projector stamps it, and is simply behind the cursor (re-reading from the
/// start would hand it out again and stall the scan until the projector caught up). A row that
/// turns up behind the cursor later (a send projected late) is the tail's or the next run's.
pub async fn expire_overdue(
    store: &SignalStore,
    queries: &Arc<dyn Queries>,
    types: &Arc<TypeTable>,
    limits: &ScanLimits,
    tally: &Arc<Tally>,
    cancel: &CancellationToken,
) -> Result<Scanned> {
    let mut stats = Scanned::default();
    let mine = Arc::new(Tally::default());
    let mut after: Option<(DateTime<Utc>, Uuid)> = None;
    let mut inflight: JoinSet<()> = JoinSet::new();
    while !cancel.is_cancelled() {
        let rows = queries.overdue(Utc::now(), after, limits.page).await?;
        stats.pages += 1;
        let Some(last) = rows.last() else { break };
        after = Some((last.expires_at, last.id));
        for row in rows {
            while inflight.len() >= limits.concurrency {
                join_one(&mut inflight).await?;
            }
            let (store, types, mine, tally) = (store.clone(), types.clone(), mine.clone(), tally.clone());
            inflight.spawn(async move {
                let known = Pending::from(&row);
                let outcome = expire_pending(&store, &types, &row.tenant, row.id, &known).await;
                if let Err(e) = &outcome {
                    tracing::warn!(tenant = %row.tenant, signal_id = %row.id, error = %e, "expiry failed; next run retries");
                }
                mine.record(&outcome);
                tally.record(&outcome);
            });
        }
    }
    drain(&mut inflight).await?;
    stats.counts = mine.read();
    Ok(stats)
}

/// Pending signals due within `lookahead` of now but not yet due, soonest first, at most `limit`.
pub async fn upcoming(
    queries: &Arc<dyn Queries>,
    now: DateTime<Utc>,
    lookahead: Duration,
    limit: u32,
) -> Result<Vec<Overdue>> {
    let horizon = now + chrono::Duration::from_std(lookahead).unwrap_or(chrono::Duration::MAX);
    let rows = queries.overdue(horizon, None, limit).await?;
    Ok(rows.into_iter().filter(|r| r.expires_at > now).collect())
}

async fn join_one(set: &mut JoinSet<()>) -> Result<()> {
    match set.join_next().await {
        Some(Err(e)) if e.is_panic() => Err(Error::Task(e.to_string())),
        _ => Ok(()),
    }
}

async fn drain(set: &mut JoinSet<()>) -> Result<()> {
    while !set.is_empty() {
        join_one(set).await?;
    }
    Ok(())
}
