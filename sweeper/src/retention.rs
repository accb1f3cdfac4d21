//! Retention as the sweeper drives it: each run, settled `signal_queue` rows older than
//! `archive_after` move to `signal_history`, and history older than `retention` is deleted.
//!
//! Deliberately only the driving: the SQL lives with the read models (`projector::ReadModels`),
//! reached through the `Archiver` trait so this crate never touches their tables. The stream's
//! own retention (max age) is the log's configuration, not ours.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

/// The read-model operations retention needs. Implementations work in small batches, each its
/// own short transaction, so no call holds locks for long.
#[async_trait]
pub trait Archiver: Send + Sync + std::fmt::Debug + 'static {
    /// Moves settled rows older than `older_than` from `signal_queue` to `signal_history`,
    /// `batch` rows per transaction, until none is left. Returns how many moved.
    async fn archive(&self, older_than: DateTime<Utc>, batch: u32) -> projector::Result<u64>;

    /// Deletes `signal_history` rows archived before `older_than`, `batch` per transaction.
    /// Returns how many. The default deletes nothing, for read models without the operation.
    async fn purge_history(&self, older_than: DateTime<Utc>, batch: u32) -> projector::Result<u64> {
        let _ = (older_than, batch);
        Ok(0)
    }
}

/// What one retention pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Retained {
    pub archived: u64,
    pub purged: u64,
}

/// Runs one retention pass at `now`.
pub async fn pass(
    archiver: &dyn Archiver,
    now: DateTime<Utc>,
    archive_after: Duration,
    retention: Duration,
    batch: u32,
) -> projector::Result<Retained> {
    let archived = archiver.archive(cutoff(now, archive_after), batch).await?;
    let purged = archiver.purge_history(cutoff(now, retention), batch).await?;
    Ok(Retained { archived, purged })
}

/// `now - age`, saturating at the earliest representable time for absurd ages.
fn cutoff(now: DateTime<Utc>, age: Duration) -> DateTime<Utc> {
    chrono::Duration::from_std(age).ok().and_then(|d| now.checked_sub_signed(d)).unwrap_or(DateTime::<Utc>::MIN_UTC)
}
