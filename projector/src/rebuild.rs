//! `rebuild`: every read model afresh from the stream, swapped in atomically. The backends do
//! the work (`pg::rebuild`, `sqlite::rebuild`); this is the entry point and its report.
//!
//! Deliberately does not stop the live projector: the swap takes the writer lock the
//! projector takes per batch, and the projector notices the moved checkpoint and resumes after
//! it (see `runner.rs`).

use std::time::Duration;

use bus::log::SharedLog;
use serde::Serialize;

use crate::backend::Backend;
use crate::error::Result;
use crate::models::ReadModels;

/// Events per chunk while rebuilding: bigger than a live batch, since nobody waits on it.
pub(crate) const CHUNK: usize = 5_000;

/// Events per batch of PostgreSQL's bulk load into the scratch tables. Large enough that most
/// signals' whole life (sent … acked, spread over thousands of events) falls in one batch, so
/// their row is inserted complete instead of inserted and updated again; about 50 MB of
/// decoded events in memory per batch.
pub(crate) const BULK_CHUNK: usize = 50_000;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RebuildReport {
    /// Events applied into the new model.
    pub events: u64,
    /// The stream sequence the new model is at.
    pub last_seq: u64,
    #[serde(with = "secs")]
    pub elapsed: Duration,
}

impl RebuildReport {
    pub fn events_per_second(&self) -> f64 {
        self.events as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

mod secs {
    pub fn serialize<S: serde::Serializer>(d: &std::time::Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }
}

/// Rebuilds every read model from `log` and swaps the result in atomically.
pub async fn rebuild(log: &SharedLog, models: &ReadModels) -> Result<RebuildReport> {
    tracing::info!("rebuilding read models from the stream");
    let report = match &models.backend {
        Backend::Pg(m) => crate::pg::rebuild(m, log, models.stale_after()).await?,
        Backend::Sqlite(m) => crate::sqlite::rebuild(m, log, models.stale_after()).await?,
    };
    models.notify_applied(report.last_seq);
    tracing::info!(
        events = report.events,
        last_seq = report.last_seq,
        elapsed_ms = report.elapsed.as_millis() as u64,
        "rebuild finished"
    );
    Ok(report)
}
