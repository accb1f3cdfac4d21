//! The sweeper's own status as plugin facts under `signalbus/sweeper` (tenant `default`,
//! fact type `sweep_run`), so `GET /v1/plugins/signalbus%2Fsweeper/state` and dashboards show
//! the last run, what it expired and how late.
//!
//! Deliberately one fact per run, not per expiry: the stream carries status, not telemetry
//! (the per-expiry detail is in the metrics).

use bus::event::PluginFactRecorded;
use bus::store::SignalStore;
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::json;

use crate::error::Result;
use crate::expire::ACTOR;
use crate::retention::Retained;
use crate::tally::Counts;

pub const PLUGIN: &str = "signalbus/sweeper";
pub const TENANT: &str = "default";
pub const FACT_TYPE: &str = "sweep_run";

/// What one run reports.
#[derive(Debug, Clone, PartialEq)]
pub struct RunReport {
    pub finished_at: DateTime<Utc>,
    pub duration: std::time::Duration,
    /// Expiries since the previous report, by timers and scan together.
    pub counts: Counts,
    pub retained: Retained,
    /// Which process holds the lease.
    pub leader: String,
}

impl RunReport {
    pub fn state(&self) -> serde_json::Value {
        json!({
            "last_run_at": self.finished_at.to_rfc3339_opts(SecondsFormat::Millis, true),
            "expired": self.counts.expired,
            "lag_seconds_max": self.counts.lag_max.as_secs_f64(),
            "leader": self.leader,
            "lost_races": self.counts.lost,
            "failed": self.counts.failed,
            "archived": self.retained.archived,
            "purged": self.retained.purged,
            "run_seconds": self.duration.as_secs_f64(),
        })
    }
}

/// Appends the run's fact; returns the bus-assigned per-plugin seq.
pub async fn record(store: &SignalStore, report: &RunReport) -> Result<u64> {
    let fact = PluginFactRecorded {
        plugin: PLUGIN.to_string(),
        seq: 0, // assigned by `record_fact`
        fact_type: FACT_TYPE.to_string(),
        state: report.state().to_string(),
        recorded_by: ACTOR.to_string(),
    };
    Ok(store.record_fact(TENANT, ACTOR, fact, report.finished_at).await?)
}
