//! Whether projection is healthy, as `GET /readyz` and `signalbus doctor` judge it: no event was
//! dead-lettered (one would be missing from the read models), and the read models are not stuck
//! behind the stream. Each problem carries a summary safe for an unauthenticated `/readyz` (no
//! names, no reasons), the operator's detail, and the fix.
//!
//! Deliberately cheap while healthy, since every readiness probe runs it: two small reads of
//! the database; the stream is asked only once the checkpoint has not moved for `STALL_AFTER`.
//! It judges from the database and the stream alone, so any process (a gateway without a
//! projector of its own) can tell.

use std::time::Duration;

use bus::log::SharedLog;
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::error::Result;
pub use crate::queries::ProjectionStatus;
use crate::queries::Queries;

/// How long events may wait behind a checkpoint that does not move before projection counts as
/// stuck. A running projector applies an event within tens of milliseconds, and commits a batch
/// every few while it catches up; a rebuild's swap holds it for seconds at most.
pub const STALL_AFTER: Duration = Duration::from_secs(30);

/// One thing wrong with projection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// `dead_letters` or `projection_progress` (the doctor's check names).
    pub check: &'static str,
    /// For anyone: what is wrong, without tenant, identity or event contents.
    pub summary: String,
    /// For the operator: what exactly.
    pub detail: String,
    pub fix: String,
}

pub const DEAD_LETTERS_FIX: &str = "read projection_dead_letters (`SELECT * FROM projection_dead_letters \
     ORDER BY seq`); if a newer signalbus can apply those events, upgrade and run `signalbus admin rebuild`; \
     once investigated, acknowledge them by deleting the rows (`DELETE FROM projection_dead_letters`). \
     See docs/operations.md, \"Dead letters\"";

pub const PROGRESS_FIX: &str = "make sure a projector runs against this database (`signalbus serve` or \
     `signalbus projector`) and read its logs: \"projector failed; retrying from the checkpoint\" says why";

/// What is wrong with projection now (empty: nothing).
pub async fn problems(log: &SharedLog, queries: &dyn Queries) -> Result<Vec<Problem>> {
    let now = Utc::now();
    let status = queries.projection_status().await?;
    let mut out = Vec::new();
    if let Some(first) = status.first_dead_letter.as_ref().filter(|_| status.dead_letters > 0) {
        let n = events(status.dead_letters);
        out.push(Problem {
            check: "dead_letters",
            summary: format!(
                "{n} could not be projected and the read models miss them (dead letters, the first at stream \
                 sequence {}); run `signalbus doctor`",
                first.seq
            ),
            detail: format!(
                "{n} could not be projected and were skipped; the first, stream sequence {} ({} on {}): {}",
                first.seq, first.event_type, first.subject, first.reason
            ),
            fix: DEAD_LETTERS_FIX.into(),
        });
    }
    if let Some(p) = stall(log, &status, now).await? {
        out.push(p);
    }
    Ok(out)
}

/// Events waiting behind a checkpoint that has not moved for `STALL_AFTER`.
async fn stall(log: &SharedLog, status: &ProjectionStatus, now: DateTime<Utc>) -> Result<Option<Problem>> {
    let secs = |since: DateTime<Utc>| (now - since).num_seconds().max(0) as u64;
    let idle = secs(status.checkpoint_at);
    if idle < STALL_AFTER.as_secs() {
        return Ok(None);
    }
    let last = log.last_seq().await?;
    if last <= status.checkpoint {
        return Ok(None);
    }
    // After a quiet spell the checkpoint is old but the projector is not stuck: it applies a new
    // event within milliseconds. The age of the oldest waiting event tells the two apart (by the
    // writer's clock; an undecodable one has no age, and the checkpoint's stands in).
    let waiting = match log.read(status.checkpoint + 1, 1).await {
        Ok(page) => page.first().map_or(0, |s| secs(s.event.occurred_at)),
        Err(bus::Error::Undecodable { .. }) => idle,
        Err(e) => return Err(e.into()),
    };
    if waiting < STALL_AFTER.as_secs() {
        return Ok(None);
    }
    let (checkpoint, lag) = (status.checkpoint, events(last - status.checkpoint));
    Ok(Some(Problem {
        check: "projection_progress",
        summary: format!(
            "the read models are stuck at stream sequence {checkpoint}, {lag} behind; the oldest has waited \
             {waiting} s; run `signalbus doctor`"
        ),
        detail: format!(
            "the checkpoint has not moved past stream sequence {checkpoint} for {idle} s while {lag} wait, \
             the oldest for {waiting} s"
        ),
        fix: PROGRESS_FIX.into(),
    }))
}

fn events(n: u64) -> String {
    if n == 1 {
        "1 event".into()
    } else {
        format!("{n} events")
    }
}
