//! `projector`: the live projector against a rebuild of the same events, in one run. `--count`
//! events (default 200,000) of the projector's benchmark workload are appended to JetStream
//! first; then the live projector (`projector::Projector`, the code and default batching
//! `signalbus projector` runs) folds them from sequence 0 into a fresh database until caught up,
//! and `projector::rebuild` folds the same events into another fresh database. Reports both
//! rates, `live_ratio` (live ÷ rebuild, target ≥ 0.5) and the live batches' size and apply time.
//!
//! With `--embedded` the same runs on the embedded backends: the events in the SQLite log, the
//! live fold and the rebuild each into a fresh SQLite read-model file.
//!
//! Deliberately no gateway, sweeper or concurrent senders: this isolates the apply path that
//! back-pressure waits on. The per-batch times come from the runner's own `batch applied`
//! event (`batches.rs`), not from instrumentation added for the bench.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use projector::{Projector, ProjectorConfig, Queries, ReadModels};
use serde_json::json;
use testkit::TestDb;

use crate::args::{Args, Mix};
use crate::batches::{self, BatchStats};
use crate::bed::Backends;
use crate::report::{per_sec, round, Outcome};
use crate::scenario::rebuild::prefill;

pub async fn run(args: &Args) -> anyhow::Result<Outcome> {
    if args.url.is_some() {
        bail!("projector measures its own backends (JetStream → PostgreSQL, or embedded); no --url");
    }
    let b = Backends::start(args.embedded, args.nats).await?;
    let t = Instant::now();
    let mix = args.mix.unwrap_or(Mix::Throughput);
    let n = prefill(&b.log, args.count, mix, args.append_concurrency).await?;
    let append = t.elapsed();
    let last = b.log.last_seq().await?;
    eprintln!("bench: appended {n} events in {append:?}; projecting them live");

    // Live: the production projector and configuration, from an empty database.
    batches::take();
    let defaults = ProjectorConfig::default();
    let config = ProjectorConfig { max_batch: args.max_batch.unwrap_or(defaults.max_batch), ..defaults };
    let max_batch = config.max_batch;
    let projector = Projector::new(b.log.clone(), b.models.clone(), config);
    let stop = b.stop.child_token();
    let started = Instant::now();
    let task = tokio::spawn({
        let stop = stop.clone();
        async move { projector.run(stop).await }
    });
    b.models.wait_for(last, Duration::from_secs(3_600)).await.context("live projector catch-up")?;
    let live = started.elapsed();
    stop.cancel();
    task.await?.context("live projector")?;
    let samples = batches::take();
    let live_eps = n as f64 / live.as_secs_f64().max(1e-9);
    eprintln!("bench: live projector caught up in {live:?}; rebuilding the same events");

    // Rebuild: the same stream into a second fresh database.
    let (_db, _dir, models) = match args.embedded {
        false => {
            let db = TestDb::create().await;
            let models = ReadModels::postgres(db.url()).await.context("rebuild read models")?;
            (Some(db), None, models)
        }
        true => {
            let dir = tempfile::tempdir().context("rebuild dir")?;
            let models = ReadModels::sqlite(dir.path()).await.context("rebuild read models")?;
            (None, Some(dir), models)
        }
    };
    let report = projector::rebuild(&b.log, &models).await.context("rebuild")?;
    let rebuild_eps = n as f64 / report.elapsed.as_secs_f64().max(1e-9);
    let live_ratio = round(live_eps / rebuild_eps.max(1e-9), 3);

    let stats = BatchStats::of(&samples);
    let results = json!({
        "events": n,
        "stream_messages": last,
        "mode": if args.embedded { "embedded" } else { "distributed" },
        "mix": format!("{mix:?}").to_lowercase(),
        "max_batch": max_batch,
        "append_events_per_s": per_sec(n as u64, append),
        "live_seconds": round(live.as_secs_f64(), 2),
        "live_events_per_s": round(live_eps, 1),
        "rebuild_seconds": round(report.elapsed.as_secs_f64(), 2),
        "rebuild_events_per_s": round(rebuild_eps, 1),
        "live_ratio": live_ratio,
        "batches": stats.count,
        "events_per_batch": round(stats.mean_events, 1),
        "batch_apply_ms": {"p50": stats.p50_ms, "p99": stats.p99_ms, "max": stats.max_ms},
        "apply_us_per_event": round(stats.us_per_event, 1),
    });
    let summary = vec![
        format!(
            "live projector: {n} events in {:.1} s = {live_eps:.0} events/s; rebuild {:.1} s = {rebuild_eps:.0} events/s \
             → live_ratio {live_ratio} (target ≥ 0.5)",
            live.as_secs_f64(),
            report.elapsed.as_secs_f64(),
        ),
        format!(
            "live batches: {} of {:.0} events on average, apply p50 {} ms, p99 {} ms ({:.1} µs per event)",
            stats.count, stats.mean_events, stats.p50_ms, stats.p99_ms, stats.us_per_event
        ),
    ];
    Ok(Outcome { results, summary })
}
