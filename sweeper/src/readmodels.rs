//! `projector::ReadModels` as the sweeper's `Archiver`: the binary passes its read models
//! straight to `Sweeper::new`.
//!
//! Deliberately a thin adapter: the archival SQL belongs to the projector crate.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::retention::Archiver;

#[async_trait]
impl Archiver for projector::ReadModels {
    async fn archive(&self, older_than: DateTime<Utc>, batch: u32) -> projector::Result<u64> {
        projector::ReadModels::archive(self, older_than, batch).await
    }

    async fn purge_history(&self, older_than: DateTime<Utc>, batch: u32) -> projector::Result<u64> {
        projector::ReadModels::purge_history(self, older_than, batch).await
    }
}
