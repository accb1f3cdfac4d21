//! The sweeper process: wait for the lease, then lead — follow the stream tail into the timers,
//! expire (and release, for scheduled signals) what the timers fire, and run the backstop (scan,
//! releases, retention, status fact) every `sweep_interval`, starting at once — until shutdown
//! or the lease is lost.
//!
//! Deliberately owns no rule about signals (`bus::store` decides every expiry) and no SQL (the
//! read models answer through `Queries` and `Archiver`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bus::catalog::TypeTable;
use bus::log::{SharedLog, Stored};
use bus::store::SignalStore;
use chrono::Utc;
use futures::stream::BoxStream;
use futures::StreamExt;
use projector::queries::Queries;
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::config::SweeperConfig;
use crate::directive_effects;
use crate::directives::{self, DirectiveKey, DirectiveOutcome, DirectiveTimers};
use crate::error::{Error, Result};
use crate::expire::{expire_pending, Outcome};
use crate::lease::Held;
use crate::metrics;
use crate::release::{self, ReleaseTimers, Released, Scheduled};
use crate::retention::{self, Archiver};
use crate::scan::{self, ScanLimits};
use crate::status::{self, RunReport};
use crate::tally::Tally;
use crate::timers::{Due, SignalKey, Timers};

/// A sweeper. Cheap to construct; `run` does the work.
#[derive(Debug)]
pub struct Sweeper {
    ctx: Arc<Ctx>,
}

#[derive(Debug)]
struct Ctx {
    log: SharedLog,
    store: SignalStore,
    queries: Arc<dyn Queries>,
    archiver: Arc<dyn Archiver>,
    types: Arc<TypeTable>,
    config: SweeperConfig,
    /// Expiries since the last status fact, by timers and scans.
    tally: Arc<Tally>,
}

/// What a backstop run hands the timers: signals, releases and directives due within the window.
#[derive(Debug, Default)]
struct Upcoming {
    signals: Vec<projector::queries::Overdue>,
    releases: Vec<projector::queries::DueRelease>,
    directives: Vec<projector::queries::OverdueDirective>,
}

/// A backstop run in the background; it hands back what the timers should take over.
type RunTask = JoinHandle<Result<Upcoming>>;

impl Sweeper {
    pub fn new(log: SharedLog, queries: Arc<dyn Queries>, archiver: impl Archiver, config: SweeperConfig) -> Self {
        let archiver: Arc<dyn Archiver> = Arc::new(archiver);
        let store = SignalStore::new(log.clone());
        let types = Arc::new(config.types.clone());
        Self { ctx: Arc::new(Ctx { log, store, queries, archiver, types, config, tally: Arc::default() }) }
    }

    /// Runs until `shutdown`: stands by while another sweeper holds the lease, leads otherwise.
    /// Errors while leading (stream or database outages) are logged and the sweeper starts over
    /// after `lease_retry`; only shutdown ends it.
    pub async fn run(self, shutdown: CancellationToken) -> Result<()> {
        let ctx = self.ctx;
        let retry = ctx.config.lease_retry;
        while let Some(mut held) = ctx.config.lease.acquire(retry, &shutdown).await {
            tracing::info!(node = %ctx.config.node, "sweeper leads");
            metrics::set_leader(true);
            let result = lead(&ctx, &mut held, &shutdown).await;
            metrics::set_leader(false);
            held.release().await;
            match result {
                Ok(()) if shutdown.is_cancelled() => break,
                Ok(()) => tracing::warn!(node = %ctx.config.node, "sweeper lost its lease; standing by"),
                Err(e) => {
                    tracing::warn!(node = %ctx.config.node, error = %e, "sweeper failed while leading; starting over");
                    tokio::select! {
                        _ = shutdown.cancelled() => break,
                        _ = tokio::time::sleep(retry) => {}
                    }
                }
            }
        }
        tracing::info!(node = %ctx.config.node, "sweeper stopped");
        Ok(())
    }
}

/// Leads until shutdown (`Ok`), a lost lease (`Ok`), or a failure (`Err`).
async fn lead(ctx: &Arc<Ctx>, held: &mut Held, shutdown: &CancellationToken) -> Result<()> {
    let cfg = &ctx.config;
    let mut timers = Timers::new(cfg.lookahead());
    let mut release_timers = ReleaseTimers::new(cfg.lookahead());
    let mut release_inflight: JoinSet<(SignalKey, Scheduled, Result<Released>)> = JoinSet::new();
    let mut directive_timers = DirectiveTimers::new(cfg.lookahead());
    let mut directive_inflight: JoinSet<(DirectiveKey, chrono::DateTime<Utc>, Result<DirectiveOutcome>)> =
        JoinSet::new();
    // Start following where the read models stand: anything older is in them and reaches the
    // timers through the first run's preload; anything newer reaches them through the tail.
    let mut next_seq = ctx.queries.applied_seq().await? + 1;
    let mut tail = ctx.log.tail(next_seq).await?;
    let mut ticker = tokio::time::interval(cfg.sweep_interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut lease_check = tokio::time::interval(cfg.lease_retry);
    lease_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut run: Option<RunTask> = None;
    let run_cancel = shutdown.child_token();
    let mut inflight: JoinSet<(Due, Result<Outcome>)> = JoinSet::new();
    // Directive effects looked at again a grace period after their event (`directive_effects`).
    let mut effects_backstop: JoinSet<()> = JoinSet::new();

    let result = loop {
        tokio::select! {
            _ = shutdown.cancelled() => break Ok(()),
            _ = lease_check.tick() => {
                if !held.check().await {
                    break Ok(());
                }
            }
            _ = ticker.tick(), if run.is_none() => run = Some(tokio::spawn(backstop(ctx.clone(), run_cancel.clone()))),
            joined = join_run(&mut run) => {
                run = None;
                match joined {
                    Ok(Ok(upcoming)) => {
                        let now = Utc::now();
                        for o in upcoming.signals {
                            let pending = (&o).into();
                            timers.offer(SignalKey { tenant: o.tenant, id: o.id }, pending, now);
                        }
                        for r in upcoming.releases {
                            let scheduled = Scheduled::from(&r);
                            release_timers.offer(SignalKey { tenant: r.tenant, id: r.id }, scheduled, now);
                        }
                        for d in upcoming.directives {
                            directive_timers.offer(DirectiveKey { tenant: d.tenant, id: d.directive_id }, d.deadline, now);
                        }
                    }
                    Ok(Err(e)) => tracing::warn!(error = %e, "sweep run failed; the next one retries"),
                    Err(e) => break Err(Error::Task(e.to_string())),
                }
            }
            item = tail.next() => match item {
                Some(Ok(stored)) => {
                    let Stored { seq, ref event, .. } = *stored;
                    next_seq = seq + 1;
                    timers.observe(seq, event, Utc::now());
                    release_timers.observe(seq, event, Utc::now());
                    directive_timers.observe(event, Utc::now());
                    if let Some(id) = directive_effects::followed(event) {
                        if effects_backstop.len() < directive_effects::MAX_PENDING {
                            let (ctx, tenant) = (ctx.clone(), event.tenant.clone());
                            effects_backstop.spawn(async move {
                                tokio::time::sleep(directive_effects::GRACE).await;
                                let done = directive_effects::carry_out(&ctx.store, ctx.queries.as_ref(), &ctx.types, &tenant, id, seq).await;
                                if let Err(e) = done {
                                    tracing::warn!(%tenant, directive_id = %id, seq, error = %e, "directive effects backstop failed");
                                }
                            });
                        } else {
                            tracing::warn!(directive_id = %id, seq, "directive effects backstop full; event not followed");
                        }
                    }
                }
                // No timer can come of it, and the tail has moved past it.
                Some(Err(bus::Error::Undecodable { seq, subject, reason })) => {
                    tracing::warn!(seq, subject, reason, "undecodable event on the stream; skipped");
                    next_seq = next_seq.max(seq + 1);
                }
                Some(Err(e)) => break Err(e.into()),
                None => {
                    tracing::warn!(from_seq = next_seq, "stream tail ended; following again");
                    tail = resubscribe(ctx, next_seq).await?;
                }
            },
            due = timers.next_due(), if inflight.len() < cfg.concurrency => {
                let ctx = ctx.clone();
                inflight.spawn(async move {
                    let outcome = expire_pending(&ctx.store, &ctx.types, &due.key.tenant, due.key.id, &due.pending).await;
                    (due, outcome)
                });
            }
            (key, scheduled) = release_timers.next_due(), if release_inflight.len() < cfg.concurrency => {
                let ctx = ctx.clone();
                release_inflight.spawn(async move {
                    let outcome = release::release_scheduled(&ctx.store, &key.tenant, key.id, &scheduled).await;
                    (key, scheduled, outcome)
                });
            }
            Some(joined) = release_inflight.join_next() => {
                let (key, scheduled, outcome) = joined.map_err(|e| Error::Task(e.to_string()))?;
                match outcome {
                    // As for expiries: our wall clock and the timer's disagree by a hair.
                    Ok(Released::NotYetDue) => {
                        let soon = scheduled.deliver_at + chrono::Duration::milliseconds(10);
                        release_timers.offer_at(key, scheduled, soon, Utc::now());
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!(tenant = %key.tenant, signal_id = %key.id, error = %e, "release failed; the next run retries"),
                }
            }
            (key, deadline) = directive_timers.next_due(), if directive_inflight.len() < cfg.concurrency => {
                let ctx = ctx.clone();
                directive_inflight.spawn(async move {
                    let outcome = directives::expire_directive(&ctx.store, ctx.queries.as_ref(), &ctx.types, &key.tenant, key.id).await;
                    (key, deadline, outcome)
                });
            }
            Some(joined) = directive_inflight.join_next() => {
                let (key, deadline, outcome) = joined.map_err(|e| Error::Task(e.to_string()))?;
                match outcome {
                    // As for signals: our wall clock and the timer's disagree by a hair.
                    Ok(DirectiveOutcome::NotYetDue) => {
                        directive_timers.offer(key, deadline + chrono::Duration::milliseconds(10), Utc::now());
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!(tenant = %key.tenant, directive_id = %key.id, error = %e, "directive expiry failed; the next run retries"),
                }
            }
            Some(_) = effects_backstop.join_next() => {}
            Some(joined) = inflight.join_next() => {
                let (due, outcome) = joined.map_err(|e| Error::Task(e.to_string()))?;
                ctx.tally.record(&outcome);
                match outcome {
                    // Our wall clock and the timer's disagree by a hair: look again shortly.
                    Ok(Outcome::NotYetDue) => {
                        let soon = due.pending.expires_at + chrono::Duration::milliseconds(10);
                        timers.offer_at(due.key, due.pending, soon, Utc::now());
                    }
                    Ok(_) => {}
                    // Not retried here: a stream outage would spin; the next run's scan retries.
                    Err(e) => tracing::warn!(tenant = %due.key.tenant, signal_id = %due.key.id, error = %e, "expiry failed; the next run retries"),
                }
            }
        }
    };
    run_cancel.cancel();
    if let Some(task) = run.take() {
        let _ = task.await;
    }
    while inflight.join_next().await.is_some() {}
    while release_inflight.join_next().await.is_some() {}
    while directive_inflight.join_next().await.is_some() {}
    // Pending checks are dropped: the gateways did their part, and a next leader follows the
    // tail from the read models' position.
    effects_backstop.abort_all();
    result
}

async fn join_run(run: &mut Option<RunTask>) -> std::result::Result<Result<Upcoming>, tokio::task::JoinError> {
    match run.as_mut() {
        Some(task) => task.await,
        None => std::future::pending().await,
    }
}

async fn resubscribe(ctx: &Ctx, from: u64) -> Result<BoxStream<'static, bus::Result<Arc<Stored>>>> {
    tokio::time::sleep(Duration::from_millis(200)).await;
    Ok(ctx.log.tail(from).await?)
}

/// One backstop run: expire what is due, archive and purge, report, and list the next window
/// for the timers.
async fn backstop(ctx: Arc<Ctx>, cancel: CancellationToken) -> Result<Upcoming> {
    let cfg = &ctx.config;
    let started = Instant::now();
    let limits = ScanLimits { page: cfg.page, concurrency: cfg.concurrency };
    let scanned = scan::expire_overdue(&ctx.store, &ctx.queries, &ctx.types, &limits, &ctx.tally, &cancel).await?;
    // After the expiries: what ran out while everyone was down expires, the rest is released.
    let released = release::release_due(&ctx.store, &ctx.queries, &limits, &cancel).await?;
    let directives_scanned =
        directives::expire_overdue(&ctx.store, &ctx.queries, &ctx.types, cfg.page, cfg.concurrency, &cancel).await?;
    let retained =
        retention::pass(ctx.archiver.as_ref(), Utc::now(), cfg.archive_after, cfg.retention, cfg.archive_batch).await?;
    let upcoming = Upcoming {
        signals: scan::upcoming(&ctx.queries, Utc::now(), cfg.lookahead(), cfg.preload_limit).await?,
        releases: release::upcoming(&ctx.queries, Utc::now(), cfg.lookahead(), cfg.preload_limit).await?,
        directives: directives::upcoming(&ctx.queries, Utc::now(), cfg.lookahead(), cfg.preload_limit).await?,
    };
    let report = RunReport {
        finished_at: Utc::now(),
        duration: started.elapsed(),
        counts: ctx.tally.take(),
        retained,
        leader: cfg.node.clone(),
    };
    tracing::info!(
        scan_expired = scanned.counts.expired,
        scan_pages = scanned.pages,
        released = released.released,
        releases_ended = released.ended,
        releases_failed = released.failed,
        directives_expired = directives_scanned.expired,
        directives_ended = directives_scanned.ended,
        directives_failed = directives_scanned.failed,
        expired = report.counts.expired,
        lag_seconds_max = report.counts.lag_max.as_secs_f64(),
        lost_races = report.counts.lost,
        failed = report.counts.failed,
        archived = retained.archived,
        purged = retained.purged,
        preloaded = upcoming.signals.len(),
        preloaded_releases = upcoming.releases.len(),
        preloaded_directives = upcoming.directives.len(),
        run_seconds = report.duration.as_secs_f64(),
        "sweep run finished"
    );
    status::record(&ctx.store, &report).await?;
    metrics::record_run(report.finished_at.timestamp_millis() as f64 / 1000.0);
    Ok(upcoming)
}
