//! `rebuild`: every read model afresh from the stream, swapped in atomically. The backends do
//! the work (`pg::rebuild`, `sqlite::rebuild`); this is the entry point and its report.
//!
//! Deliberately does not stop the live projector: the swap takes the writer lock the
//! projector takes per batch, and the projector notices the moved checkpoint and resumes after
//! it (see `runner.rs`).

use bus::log::SharedLog;

use crate::backend::Backend;
use crate::error::Result;
use crate::models::ReadModels;
pub use crate::rebuild_pass::RebuildReport;

/// Rebuilds every read model from `log` and swaps the result in atomically.
pub async fn rebuild(log: &SharedLog, models: &ReadModels) -> Result<RebuildReport> {
    tracing::info!("rebuilding read models from the stream");
    let report = match &models.backend {
        Backend::Pg(m) => crate::pg::rebuild::rebuild(m, log, models.stale_after()).await?,
        Backend::Sqlite(m) => crate::sqlite::rebuild::rebuild(m, log, models.stale_after()).await?,
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
