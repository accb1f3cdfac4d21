//! `doctor`: integrity checks of the read models against the stream, each failing check with
//! what to do about it. The library behind `signalbus doctor`, and what tests plant faults for.
//!
//! Deliberately read-only: it reports, it never repairs (a repair is a rebuild).

use bus::event::EventBody;
use bus::log::SharedLog;
use serde::Serialize;
use uuid::Uuid;

use crate::dead_letter::{read_entries, AsEntry};
use crate::error::Result;
use crate::health;
use crate::models::ReadModels;

/// Lag (events) above which the lag check fails: far beyond a healthy projector's few batches.
pub const LAG_LIMIT: u64 = 10_000;

/// Events read per page while scanning the stream for bounces.
const SCAN_PAGE: usize = 10_000;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub ok: bool,
    pub detail: String,
    /// What an operator should do when the check fails.
    pub fix: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DoctorReport {
    pub stream_last_seq: u64,
    pub checkpoint: u64,
    pub lag_events: u64,
    pub checks: Vec<Check>,
}

impl DoctorReport {
    pub fn ok(&self) -> bool {
        self.checks.iter().all(|c| c.ok)
    }

    pub fn failed(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|c| !c.ok)
    }
}

fn check(name: &'static str, ok: bool, detail: String, fix: &str) -> Check {
    Check { name, ok, detail, fix: (!ok).then(|| fix.to_string()) }
}

fn ids(v: &[Uuid]) -> String {
    v.iter().map(Uuid::to_string).collect::<Vec<_>>().join(", ")
}

pub async fn doctor(log: &SharedLog, models: &ReadModels) -> Result<DoctorReport> {
    let mut checks = Vec::new();
    let stream = log.ping().await;
    checks.push(check(
        "stream",
        stream.is_ok(),
        stream.as_ref().map_or_else(|e| format!("the event stream does not answer: {e}"), |_| "answers".into()),
        "start the stream (nats-server with JetStream, or check --data-dir) and check --nats-url",
    ));
    let db = crate::queries::Queries::ping(models).await;
    checks.push(check(
        "database",
        db.is_ok(),
        db.as_ref().map_or_else(|e| format!("the read-model database does not answer: {e}"), |_| "answers".into()),
        "start PostgreSQL and check --database-url (embedded: check --data-dir)",
    ));
    if stream.is_err() || db.is_err() {
        return Ok(DoctorReport { stream_last_seq: 0, checkpoint: 0, lag_events: 0, checks });
    }
    let last = log.last_seq().await?;
    let checkpoint = models.checkpoint().await?;

    let (count, sample) = models.multi_terminal().await?;
    checks.push(check(
        "one_terminal_stamp",
        count == 0,
        if count == 0 {
            "every signal row has at most one of delivered_at, expired_at, recalled_at".into()
        } else {
            format!("{count} signal rows have more than one terminal stamp, e.g. {}", ids(&sample))
        },
        "run `signalbus admin rebuild`; if the rows come back, the stream holds conflicting events: report a bug",
    ));

    let (count, sample) = models.inflight_mismatches().await?;
    checks.push(check(
        "inflight_list",
        count == 0,
        if count == 0 {
            "the redelivery candidates list exactly the delivered, unacked signals".into()
        } else {
            format!("{count} signals are listed as in flight wrongly or missing from the list, e.g. {}", ids(&sample))
        },
        "run `signalbus admin rebuild`; if the mismatch comes back, report a bug",
    ));

    let bounced = bounced_ids(log, last).await?;
    let mut present = Vec::new();
    for chunk in bounced.chunks(5_000) {
        present.extend(models.existing(chunk).await?);
    }
    checks.push(check(
        "no_bounced_rows",
        present.is_empty(),
        if present.is_empty() {
            format!("none of the {} bounced signals has a row", bounced.len())
        } else {
            format!(
                "{} bounced signals have a signal row, e.g. {}",
                present.len(),
                ids(&present[..present.len().min(10)])
            )
        },
        "run `signalbus admin rebuild` (a bounce is never queued; the rows were not written by the projector)",
    ));

    checks.push(check(
        "checkpoint_within_stream",
        checkpoint <= last,
        format!("checkpoint {checkpoint}, stream ends at {last}"),
        "the read models were built from another stream, or the stream lost events: check --nats-url / \
         --data-dir, then run `signalbus admin rebuild`",
    ));

    let lag = last.saturating_sub(checkpoint);
    checks.push(check(
        "projector_lag",
        lag <= LAG_LIMIT,
        format!("{lag} events behind the stream"),
        "make sure a projector is running (`signalbus serve` or `signalbus projector`) and read its logs",
    ));

    let problems = health::problems(log, models).await?;
    let found = |name: &str| problems.iter().find(|p| p.check == name);
    checks.push(match found("dead_letters") {
        Some(p) => check("dead_letters", false, p.detail.clone(), &p.fix),
        None => check("dead_letters", true, "no event was skipped as a dead letter".into(), ""),
    });
    checks.push(match found("projection_progress") {
        Some(p) => check("projection_progress", false, p.detail.clone(), &p.fix),
        None => check("projection_progress", true, "the checkpoint keeps up with the stream".into(), ""),
    });
    Ok(DoctorReport { stream_last_seq: last, checkpoint, lag_events: lag, checks })
}

/// Every bounced signal id on the stream up to `last` (an undecodable event is passed: the
/// dead-letter check reports it).
async fn bounced_ids(log: &SharedLog, last: u64) -> Result<Vec<Uuid>> {
    let mut out = Vec::new();
    let mut from = 1;
    while from <= last {
        let page = read_entries(log, from, SCAN_PAGE).await?;
        let Some(tail) = page.last() else { break };
        from = tail.seq() + 1;
        out.extend(page.iter().filter_map(|e| match e.entry().map(|s| &s.event.body) {
            Ok(EventBody::SignalBounced(b)) => Some(b.signal_id),
            _ => None,
        }));
    }
    Ok(out)
}
