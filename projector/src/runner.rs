//! `Projector`: follows the stream from the checkpoint, closes a batch at `max_batch` events or
//! `max_wait` after its first event, and applies it with its checkpoint in one transaction;
//! refreshes `recipient_state` against the clock and reports lag every `refresh_every`.
//!
//! Deliberately keeps no state that is not in the database: after a crash, a failed batch or a
//! rebuild it simply reopens the stream after whatever checkpoint the database holds.

use std::time::{Duration, Instant};

use bus::log::{SharedLog, Stored};
use chrono::Utc;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::batch::{Batch, PROJECTION};
use crate::error::{Error, Result};
use crate::metrics;
use crate::models::{ReadModels, DEFAULT_STALE_AFTER};

#[derive(Debug, Clone)]
pub struct ProjectorConfig {
    /// Heartbeat age past which a session stops counting as live (CONTRACT §2).
    pub stale_after: Duration,
    /// A batch closes at this many events...
    pub max_batch: usize,
    /// ...or this long after its first event, whichever comes first.
    pub max_wait: Duration,
    /// How often recipient state is recomputed against the clock and lag is reported. Must stay
    /// well under 5 s: that is how late a stale-threshold crossing may show.
    pub refresh_every: Duration,
}

impl Default for ProjectorConfig {
    fn default() -> Self {
        Self {
            stale_after: DEFAULT_STALE_AFTER,
            max_batch: 1_000,
            max_wait: Duration::from_millis(20),
            refresh_every: Duration::from_secs(1),
        }
    }
}

#[derive(Debug)]
pub struct Projector {
    log: SharedLog,
    models: ReadModels,
    config: ProjectorConfig,
}

/// Why the inner loop stopped.
enum Stop {
    Shutdown,
    /// The checkpoint is not where this loop thought (a rebuild, or another projector).
    Resync,
}

impl Projector {
    pub fn new(log: SharedLog, models: ReadModels, config: ProjectorConfig) -> Self {
        let models = models.with_stale_after(config.stale_after);
        Self { log, models, config }
    }

    /// Runs until `shutdown` is cancelled. Failures (database or stream unavailable) are logged
    /// and retried from the checkpoint with backoff, so this only returns on shutdown.
    pub async fn run(self, shutdown: CancellationToken) -> Result<()> {
        let mut backoff = Duration::from_millis(100);
        loop {
            match self.follow(&shutdown).await {
                Ok(Stop::Shutdown) => return Ok(()),
                Ok(Stop::Resync) => {
                    tracing::info!(
                        projection = PROJECTION,
                        "checkpoint moved; resuming from the database's checkpoint"
                    );
                    backoff = Duration::from_millis(100);
                }
                Err(e) => {
                    tracing::warn!(projection = PROJECTION, error = %e, backoff_ms = backoff.as_millis() as u64,
                        "projector failed; retrying from the checkpoint");
                    tokio::select! {
                        _ = shutdown.cancelled() => return Ok(()),
                        _ = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
            }
        }
    }

    async fn follow(&self, shutdown: &CancellationToken) -> Result<Stop> {
        let mut applied = self.models.checkpoint().await?;
        self.models.notify_applied(applied);
        tracing::info!(projection = PROJECTION, from_seq = applied + 1, "following the stream");
        let mut stream = self.log.tail(applied + 1).await?;
        let mut next_refresh = Instant::now();
        let mut pending: Vec<Stored> = Vec::with_capacity(self.config.max_batch);
        loop {
            if Instant::now() >= next_refresh {
                self.refresh(applied).await?;
                next_refresh = Instant::now() + self.config.refresh_every;
            }
            let first = tokio::select! {
                _ = shutdown.cancelled() => return Ok(Stop::Shutdown),
                _ = tokio::time::sleep_until(next_refresh.into()) => continue,
                item = stream.next() => item,
            };
            pending.push(next_item(first)?);
            let deadline = tokio::time::Instant::now() + self.config.max_wait;
            while pending.len() < self.config.max_batch {
                match tokio::time::timeout_at(deadline, stream.next()).await {
                    Ok(item) => pending.push(next_item(item)?),
                    Err(_) => break,
                }
            }
            let batch = Batch::fold(&pending);
            if batch.from_seq != applied + 1 && applied != 0 {
                return Err(Error::Invariant(format!(
                    "stream gap: expected sequence {} but the stream yielded {}",
                    applied + 1,
                    batch.from_seq
                )));
            }
            let started = Instant::now();
            if !self.models.apply(&batch, applied).await? {
                return Ok(Stop::Resync);
            }
            applied = batch.to_seq;
            metrics::record_applied(PROJECTION, batch.events as u64);
            tracing::debug!(
                projection = PROJECTION,
                events = batch.events,
                last_seq = applied,
                elapsed_us = started.elapsed().as_micros() as u64,
                "batch applied"
            );
            pending.clear();
        }
    }

    async fn refresh(&self, applied: u64) -> Result<()> {
        let changed = self.models.refresh_recipient_state(Utc::now()).await?;
        let last = self.log.last_seq().await?;
        metrics::record_lag(PROJECTION, last.saturating_sub(applied));
        if changed > 0 {
            tracing::debug!(projection = PROJECTION, changed, "recipient state refreshed");
        }
        Ok(())
    }
}

fn next_item(item: Option<bus::Result<Stored>>) -> Result<Stored> {
    match item {
        Some(Ok(stored)) => Ok(stored),
        Some(Err(e)) => Err(e.into()),
        None => Err(Error::Invariant("the stream's tail ended".into())),
    }
}
