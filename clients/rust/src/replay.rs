//! The spool's traffic: a send the bus could not take goes in (`spool_send`), and the replay
//! takes it out — newest first, rate-limited, each entry with the TTL it has left and its
//! dedupe_key, deleted only once the bus answered it for good (accepted, or a definitive 4xx).
//!
//! Deliberately stops a pass at the first answer that may change later (503, 429, 500, a
//! timeout, the bus unreachable): older entries stay untouched until the next pass.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use tokio::time::Instant;

use crate::error::{Error, Result};
use crate::rpc::{send_result, transmit_send};
use crate::schedule;
use crate::shared::Inner;
use crate::spool::SpoolEntry;
use crate::types_send::{default_ttl, SendOutcome, SendRequest, SendResult, Spooled};

/// What one pass over the spool did.
#[derive(Debug, Default)]
pub struct ReplayReport {
    /// Entries the bus accepted (deleted).
    pub replayed: Vec<SendResult>,
    /// Entries the bus refused for good (deleted), e.g. `RecipientUnavailable`.
    pub rejected: Vec<Error>,
    /// dedupe_keys of entries whose TTL ran out while spooled (deleted, never sent).
    pub expired: Vec<String>,
    /// Entries left in the spool by this pass.
    pub kept: usize,
    /// The answer that stopped the pass, if one did.
    pub stopped_by: Option<Error>,
}

fn tell(inner: &Inner, entry: &SpoolEntry, outcome: &Result<SendResult>) {
    if let Some(cb) = &inner.on_replay {
        cb(entry, outcome);
    }
}

/// Spools a send the bus could not take and wakes the replay; answers what `send` returns.
pub(crate) fn spool_send(inner: &Inner, req: SendRequest, why: &Error) -> Result<SendOutcome> {
    let Some(spool) = &inner.spool else { return Err(why.clone()) };
    let ttl = req.ttl_seconds.unwrap_or_else(|| default_ttl(&req.signal_type));
    let identity = inner.identity.lock().unwrap().clone();
    let now = Utc::now();
    let entry = spool.put(&schedule::for_spool(&req, now), ttl, identity.as_deref(), &why.to_string(), now)?;
    tracing::debug!(code = why.code(), entry = %entry.name, "the bus could not take the send: spooled, replayed when it is back");
    inner.replay_wakeup.notify_one();
    Ok(SendOutcome::Spooled(Spooled {
        dedupe_key: entry.dedupe_key().to_string(),
        entry: entry.name,
        reason: entry.reason,
        spooled_at: entry.spooled_at,
        ttl_seconds: entry.ttl_seconds,
    }))
}

/// One pass; a function of the shared state, so the background loop holds no `Client`.
pub(crate) async fn replay_pass(inner: &Inner) -> ReplayReport {
    let mut report = ReplayReport::default();
    let Some(spool) = &inner.spool else { return report };
    let _one_pass = inner.replay_lock.lock().await;
    let entries = spool.entries();
    let me = inner.identity.lock().unwrap().clone();
    let mut last: Option<Instant> = None;
    for (i, entry) in entries.iter().enumerate() {
        if inner.shutdown.is_cancelled() {
            report.kept += entries.len() - i;
            break;
        }
        if let (Some(owner), Some(me)) = (&entry.identity, &me) {
            if owner != me {
                tracing::warn!(entry = %entry.name, %owner, "spool entry of another identity: left for it");
                report.kept += 1;
                continue;
            }
        }
        let now = Utc::now();
        let remaining = entry.remaining_ttl(now);
        if remaining < 1 {
            spool.delete(&entry.name);
            tracing::warn!(entry = %entry.name, dedupe_key = entry.dedupe_key(), "spooled send expired in the spool: dropped");
            report.expired.push(entry.dedupe_key().to_string());
            tell(inner, entry, &Err(Error::SpoolExpired { dedupe_key: entry.dedupe_key().to_string() }));
            continue;
        }
        if let Some(at) = last {
            tokio::time::sleep_until(at + inner.replay_gap).await;
        }
        last = Some(Instant::now());
        let req = schedule::for_replay(&entry.request, remaining as u64, now);
        let outcome = match transmit_send(inner, &req).await {
            Ok(v) => send_result(v, entry.dedupe_key()),
            Err(e) => Err(e),
        };
        match outcome {
            Ok(result) => {
                spool.delete(&entry.name);
                tracing::debug!(dedupe_key = entry.dedupe_key(), signal_id = %result.signal_id, publish_path = %result.publish_path, "replayed a spooled send");
                let outcome = Ok(result);
                tell(inner, entry, &outcome);
                report.replayed.extend(outcome.ok());
            }
            Err(e) if e.is_definitive() => {
                spool.delete(&entry.name);
                tracing::warn!(entry = %entry.name, dedupe_key = entry.dedupe_key(), error = %e, "the bus refused a spooled send for good");
                let outcome = Err(e);
                tell(inner, entry, &outcome);
                report.rejected.extend(outcome.err());
            }
            Err(e) => {
                report.kept += entries.len() - i;
                tracing::debug!(kept = report.kept, error = %e, "spool replay paused");
                report.stopped_by = Some(e);
                break;
            }
        }
    }
    report
}

/// Replays at each new session (the session wakes it) and every `replay_interval`.
pub(crate) async fn replay_loop(inner: Arc<Inner>) {
    loop {
        tokio::select! {
            _ = inner.shutdown.cancelled() => return,
            _ = inner.replay_wakeup.notified() => {}
            _ = tokio::time::sleep(inner.replay_interval) => {}
        }
        if inner.spool.as_ref().is_none_or(|s| s.is_empty()) {
            continue;
        }
        let report = replay_pass(&inner).await;
        if let Some(Error::RateLimited { retry_after: Some(wait), .. }) = &report.stopped_by {
            tokio::select! {
                _ = inner.shutdown.cancelled() => return,
                _ = tokio::time::sleep((*wait).min(Duration::from_secs(300))) => {}
            }
        }
    }
}
