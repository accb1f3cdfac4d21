//! `Projector`: waits for the projector lease, then follows the stream from the checkpoint,
//! closes a batch at `max_batch` events (a gathered event counts as its entries) or `max_wait`
//! after its first event occurred (at least
//! `MIN_WAIT` after this loop read it: `batch_deadline`), and applies it with
//! its checkpoint in one transaction; refreshes `recipient_state` against the clock, reports lag
//! and checks the lease every `refresh_every`.
//!
//! Several projectors on one database: one leads (`lease`), the others stand by and take over
//! within `lease_retry` of its death. Without the lease they would still be correct — every
//! batch commits only on top of the checkpoint it was folded after — but each would fold every
//! event and all but one would throw the work away and reopen the stream on every lost
//! compare-and-set, so the leader's lag would grow with the number of projectors.
//!
//! `run_on_own_thread` runs it beside a gateway without sharing the gateway's runtime.
//!
//! Deliberately keeps no state that is not in the database: after a crash, a failed batch, a
//! rebuild or a takeover it simply reopens the stream after whatever checkpoint the database
//! holds.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bus::log::{SharedLog, Stored};
use chrono::Utc;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::batch::PROJECTION;
use crate::bisect;
use crate::dead_letter::{entry_of, AsEntry, Entry};
use crate::error::{Error, Result};
use crate::lease::{Held, Lease};
use crate::metrics;
use crate::models::{ReadModels, DEFAULT_STALE_AFTER};

#[derive(Debug, Clone)]
pub struct ProjectorConfig {
    /// Heartbeat age past which a session stops counting as live (CONTRACT §2).
    pub stale_after: Duration,
    /// A batch closes at this many events, a gathered `sends.recorded` or `acks.recorded`
    /// counting as its entries (so a catch-up transaction holds as many signals either way)...
    pub max_batch: usize,
    /// ...or this long after its first event, whichever comes first.
    pub max_wait: Duration,
    /// How often recipient state is recomputed against the clock, lag is reported and the
    /// lease is checked. Must stay well under 5 s: that is how late a stale-threshold crossing
    /// may show.
    pub refresh_every: Duration,
    /// Who may project (`Lease::Local` when embedded; the projector advisory lock otherwise).
    pub lease: Lease,
    /// How often a standby tries the lease: the most a takeover waits after the leader died.
    pub lease_retry: Duration,
}

impl Default for ProjectorConfig {
    fn default() -> Self {
        Self {
            stale_after: DEFAULT_STALE_AFTER,
            max_batch: 4_000,
            max_wait: Duration::from_millis(20),
            refresh_every: Duration::from_secs(1),
            lease: Lease::Local,
            lease_retry: Duration::from_secs(1),
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
    /// The lease's connection is gone: another projector may lead by now.
    LeaseLost,
}

impl Projector {
    pub fn new(log: SharedLog, models: ReadModels, config: ProjectorConfig) -> Self {
        let models = models.with_stale_after(config.stale_after);
        Self { log, models, config }
    }

    /// Runs until `shutdown` is cancelled: stands by while another projector holds the lease,
    /// projects while this one does. An event that cannot be applied is not a failure: it is
    /// dead-lettered and skipped (`bisect.rs`).
    pub async fn run(self, shutdown: CancellationToken) -> Result<()> {
        let lease = self.config.lease.clone();
        while let Some(mut held) = lease.acquire(self.config.lease_retry, &shutdown, "projector").await {
            tracing::info!(projection = PROJECTION, "projector leads");
            metrics::set_leader(true);
            let stop = self.lead(&mut held, &shutdown).await;
            metrics::set_leader(false);
            held.release().await;
            if matches!(stop, Stop::Shutdown) {
                break;
            }
            tracing::warn!(projection = PROJECTION, "projector lost its lease; standing by");
        }
        Ok(())
    }

    /// `run` on an OS thread and a single-threaded runtime of its own; the returned future ends
    /// with it. How a process that also serves the gateway runs its projector: every batch is
    /// folded and encoded between its database round trips, and on the runtime the WebSocket
    /// sessions share, each of the projector's wake-ups queued behind theirs and theirs behind its
    /// work; on a thread of its own the kernel shares the cores between the two (flat out: +5.6 %
    /// signals/s, send→receive p99 −18 %, projector lag p99 −14 %; docs/performance.md).
    pub fn run_on_own_thread(
        self,
        shutdown: CancellationToken,
    ) -> impl std::future::Future<Output = Result<()>> + Send {
        let (done, finished) = tokio::sync::oneshot::channel();
        let started = std::thread::Builder::new().name("projector".into()).spawn(move || {
            let result =
                tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(Error::Io).and_then(|rt| {
                    rt.block_on(async move {
                        // Its pool opened here, so its sockets belong to this runtime.
                        let models = self.models.on_own_pool();
                        Projector { models, ..self }.run(shutdown).await
                    })
                });
            let _ = done.send(result);
        });
        async move {
            started?;
            finished.await.unwrap_or_else(|_| Err(Error::Invariant("the projector's thread panicked".into())))
        }
    }

    /// Projects while leading. Failures (database or stream unavailable) are logged and retried
    /// from the checkpoint with backoff, so this returns only on shutdown or a lost lease.
    async fn lead(&self, held: &mut Held, shutdown: &CancellationToken) -> Stop {
        let mut backoff = Duration::from_millis(100);
        loop {
            match self.follow(held, shutdown).await {
                Ok(Stop::Resync) => {
                    tracing::info!(
                        projection = PROJECTION,
                        "checkpoint moved; resuming from the database's checkpoint"
                    );
                    backoff = Duration::from_millis(100);
                }
                Ok(stop) => return stop,
                Err(e) => {
                    tracing::warn!(projection = PROJECTION, error = %e, backoff_ms = backoff.as_millis() as u64,
                        "projector failed; retrying from the checkpoint");
                    tokio::select! {
                        _ = shutdown.cancelled() => return Stop::Shutdown,
                        _ = tokio::time::sleep(backoff) => {}
                    }
                    if !held.check().await {
                        return Stop::LeaseLost;
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
            }
        }
    }

    async fn follow(&self, held: &mut Held, shutdown: &CancellationToken) -> Result<Stop> {
        let mut applied = self.models.checkpoint().await?;
        self.models.notify_applied(applied);
        tracing::info!(projection = PROJECTION, from_seq = applied + 1, "following the stream");
        let mut stream = self.log.tail(applied + 1).await?;
        let mut next_refresh = Instant::now();
        let mut pending: Vec<Entry> = Vec::with_capacity(self.config.max_batch);
        loop {
            if Instant::now() >= next_refresh {
                if !held.check().await {
                    return Ok(Stop::LeaseLost);
                }
                self.refresh(applied).await?;
                next_refresh = Instant::now() + self.config.refresh_every;
            }
            let first = tokio::select! {
                _ = shutdown.cancelled() => return Ok(Stop::Shutdown),
                _ = tokio::time::sleep_until(next_refresh.into()) => continue,
                item = stream.next() => item,
            };
            pending.push(next_entry(first)?);
            let deadline = batch_deadline(&pending[0], self.config.max_wait);
            let mut weight = pending[0].weight();
            while weight < self.config.max_batch {
                match tokio::time::timeout_at(deadline, stream.next()).await {
                    Ok(item) => {
                        let entry = next_entry(item)?;
                        weight += entry.weight();
                        pending.push(entry);
                    }
                    Err(_) => break,
                }
            }
            let from_seq = pending[0].seq();
            if from_seq != applied + 1 && applied != 0 {
                return Err(Error::Invariant(format!(
                    "stream gap: expected sequence {} but the stream yielded {from_seq}",
                    applied + 1,
                )));
            }
            let started = Instant::now();
            let Some(done) = bisect::apply(&mut &self.models, &pending, applied).await? else {
                return Ok(Stop::Resync);
            };
            applied = done.to_seq;
            metrics::record_applied(PROJECTION, done.events as u64);
            tracing::debug!(
                projection = PROJECTION,
                events = done.events,
                dead_letters = done.dead,
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

/// The least a batch waits for more events after its first was read: enough for the tail to
/// hand over what it has fetched already, so a projector catching up still fills its batches.
const MIN_WAIT: Duration = Duration::from_millis(2);

/// When the batch that starts with `first` closes: `max_wait` after `first` occurred rather than
/// after this loop read it, so an event that already waited in the tail while the previous batch
/// was applied (a projector behind, or flat out) does not wait a second time and the next apply
/// starts at once; but never sooner than `MIN_WAIT` from now. A writer's clock off from this
/// one's only moves the deadline within [now + `MIN_WAIT`, now + `max_wait`].
fn batch_deadline(first: &Entry, max_wait: Duration) -> tokio::time::Instant {
    let waited = match first {
        Entry::Event(stored) => (Utc::now() - stored.event.occurred_at).to_std().unwrap_or(Duration::ZERO),
        Entry::Dead(_) => Duration::ZERO,
    };
    tokio::time::Instant::now() + max_wait.saturating_sub(waited).max(MIN_WAIT.min(max_wait))
}

/// The tail's next item as an entry: an undecodable event is a dead letter to record, not a
/// failure (the tail has already moved past it).
fn next_entry(item: Option<bus::Result<Arc<Stored>>>) -> Result<Entry> {
    match item {
        Some(item) => Ok(entry_of(item)?),
        None => Err(Error::Invariant("the stream's tail ended".into())),
    }
}

#[cfg(test)]
mod tests {
    use bus::event::{Event, EventBody, Voided};

    use super::*;

    fn occurred(ago: chrono::Duration) -> Entry {
        let body = EventBody::Voided(Voided { original_type: "signal.sent".into(), signal_id: None });
        let event = Event::new("default", None, Utc::now() - ago, body);
        Entry::Event(Arc::new(Stored { seq: 1, subject: "signalbus.default.signal.x".into(), event }))
    }

    fn wait_of(first: &Entry) -> Duration {
        batch_deadline(first, Duration::from_millis(20)) - tokio::time::Instant::now()
    }

    #[tokio::test]
    async fn an_event_that_just_occurred_waits_the_whole_max_wait() {
        // Lower bounds leave room for a slow machine between the lines.
        let wait = wait_of(&occurred(chrono::Duration::zero()));
        assert!(wait > Duration::from_millis(10) && wait <= Duration::from_millis(20), "{wait:?}");
    }

    #[tokio::test]
    async fn an_event_that_waited_in_the_tail_waits_only_the_rest() {
        let wait = wait_of(&occurred(chrono::Duration::milliseconds(12)));
        assert!(wait <= Duration::from_millis(8), "{wait:?}");
    }

    #[tokio::test]
    async fn an_old_event_waits_min_wait_and_a_future_one_max_wait() {
        let old = wait_of(&occurred(chrono::Duration::hours(1)));
        assert!(old <= MIN_WAIT, "{old:?}");
        // A writer whose clock runs ahead of ours: never more than max_wait.
        let ahead = wait_of(&occurred(chrono::Duration::seconds(-30)));
        assert!(ahead > Duration::from_millis(10) && ahead <= Duration::from_millis(20), "{ahead:?}");
    }
}
