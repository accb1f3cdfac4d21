//! The backstop: page through the read models' expiry index (`Queries::overdue`) and expire
//! everything due, many at once; and list what falls due within the look-ahead window so the
//! timers can take it.
//!
//! Deliberately trusts the stream, not the read model: a row is only a hint, `expire_one`'s
//! compare-and-set decides. Runs at leadership start (restarts, fail-over, outage backlog) and
//! every `sweep_interval` for whatever the timers missed.

use std::collections::HashSet;
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
    /// Expiries in flight at once. Each is a subject read plus a conditional append, so the
    /// throughput is roughly `concurrency / round trip`; 128 × 5 ms ≈ 25,000/s.
    pub concurrency: usize,
    /// How long to wait for the read models to show our own expiries before giving up a run.
    pub projector_wait: Duration,
}

/// What one scan did.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Scanned {
    pub counts: Counts,
    /// `overdue` queries asked.
    pub pages: u64,
    /// Times the scan ran ahead of the read models and waited for them to catch up.
    pub projector_waits: u64,
}

/// Expires every pending signal the read models list as due, page by page, until a page brings
/// nothing new. Returns what this scan did (also added to `tally`).
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
    // Ids handed out in this scan. The read models lag our own appends, so a page may list
    // rows we just expired; they are skipped here rather than expired (and refused) twice.
    let mut seen: HashSet<Uuid> = HashSet::new();
    let mut inflight: JoinSet<()> = JoinSet::new();
    let mut waited_for = 0u64;
    while !cancel.is_cancelled() {
        // Asking for more than a page leaves room for rows the projector has not caught up on,
        // so a page of fresh work still comes back while it trails us.
        let rows = queries.overdue(Utc::now(), limits.page.saturating_mul(2)).await?;
        stats.pages += 1;
        let fresh: Vec<Overdue> =
            rows.iter().filter(|r| seen.insert(r.id)).take(limits.page as usize).cloned().collect();
        if fresh.is_empty() {
            drain(&mut inflight).await?;
            let applied_upto = mine.read().max_seq;
            if rows.is_empty() || applied_upto <= waited_for {
                break; // nothing due, or only rows we already tried and the models are current
            }
            // Only rows we already handled: let the read models catch up with us, then look again.
            if queries.wait_for(applied_upto, limits.projector_wait).await.is_err() {
                tracing::warn!(seq = applied_upto, "read models lag the sweeper; ending this scan early");
                break;
            }
            waited_for = applied_upto;
            stats.projector_waits += 1;
            continue;
        }
        for row in fresh {
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
    let rows = queries.overdue(horizon, limit).await?;
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
