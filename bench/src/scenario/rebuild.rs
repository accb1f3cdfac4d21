//! `rebuild`: the projector rebuilding every read model in PostgreSQL from `--count` events
//! (default 1,000,000) on JetStream, in events/s, beside two numbers from the same run: reading
//! the log alone, and the baseline — a plain multi-row INSERT of the very rows the rebuild
//! produced into the same (emptied) tables.
//!
//! The events come from the projector's own benchmark workloads (`projector/tests/support`,
//! compiled in here unchanged): `--mix mixed` (the default here) folds every kind of event —
//! sends, deliveries, acks, expiries, recalls, sessions and facts —, `--mix throughput` the
//! throughput scenario's pushed sends and batched acks. Deliberately does not reimplement them.

#[path = "../../../projector/tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bus::log::Expect;
use futures::StreamExt;
use serde_json::json;
use sqlx::Connection;

use crate::args::{Args, Mix};
use crate::bed::Backends;
use crate::report::{per_sec, round, Outcome};

/// The read-model tables a rebuild writes (CONTRACT §10), checkpoints aside.
const TABLES: [&str; 7] =
    ["signal_queue", "signal_history", "agents", "agent_sessions", "recipient_state", "plugin_facts", "plugin_state"];

/// Rows per INSERT in the baseline: the size of a projector batch.
const BASELINE_ROWS: usize = 1_000;

pub async fn run(args: &Args) -> anyhow::Result<Outcome> {
    if args.url.is_some() || args.embedded {
        bail!("rebuild measures JetStream → PostgreSQL on its own backends; no --url or --embedded");
    }
    let b = Backends::start(false, args.nats).await?;
    let db_url = b.database_url.clone().context("distributed backends have a database")?;

    let t = Instant::now();
    let n = prefill(&b.log, args.count, args.mix.unwrap_or(Mix::Mixed), args.append_concurrency).await?;
    let append = t.elapsed();
    eprintln!("bench: appended {n} events in {append:?}; reading them back");

    let t = Instant::now();
    let mut from = 1;
    loop {
        let page = b.log.read(from, 5_000).await?;
        let Some(last) = page.last() else { break };
        from = last.seq + 1;
    }
    let read = t.elapsed();

    let report = projector::rebuild(&b.log, &b.models).await.context("rebuild")?;
    let rebuild_eps = n as f64 / report.elapsed.as_secs_f64().max(1e-9);
    let (rows, baseline) = baseline(&db_url).await?;
    let baseline_eps = n as f64 / baseline.as_secs_f64().max(1e-9);
    let ratio = round(rebuild_eps / baseline_eps, 3);

    let results = json!({
        "events": n,
        "stream_messages": report.events,
        "rows": rows,
        "rebuild_seconds": round(report.elapsed.as_secs_f64(), 2),
        "rebuild_events_per_s": round(rebuild_eps, 1),
        "log_read_events_per_s": per_sec(n as u64, read),
        "append_events_per_s": per_sec(n as u64, append),
        "baseline_insert_seconds": round(baseline.as_secs_f64(), 2),
        "baseline_rows_per_s": per_sec(rows, baseline),
        "baseline_events_per_s": round(baseline_eps, 1),
        "ratio": ratio,
    });
    let summary = vec![
        format!(
            "rebuild: {} events in {:.1} s = {:.0} events/s (target ≥ 50,000); reading the log alone {:.0} events/s",
            n,
            report.elapsed.as_secs_f64(),
            rebuild_eps,
            n as f64 / read.as_secs_f64()
        ),
        format!(
            "baseline: {rows} final rows by multi-row INSERT in {:.1} s = {baseline_eps:.0} events/s equivalent → ratio {ratio} (target ≥ 0.5)",
            baseline.as_secs_f64()
        ),
    ];
    Ok(Outcome { results, summary })
}

/// Sends per `sends.recorded` in the throughput mix: about what a flat-out gateway gathers per
/// append (`bench throughput`: ~30 signals per stream message).
const GATHERED_SENDS: usize = 24;

/// Appends at least `n` logical events of the projector's benchmark workload `mix` (seed 1) to
/// `log`, `concurrency` appends in flight, and returns how many: a gathered `sends.recorded` or
/// `acks.recorded` counts as its entries, so rates stay per send and per ack batch whatever
/// the gathering. Shared with the `projector` scenario, so both fold the same events.
pub async fn prefill(log: &bus::log::SharedLog, n: usize, mix: Mix, concurrency: usize) -> anyhow::Result<usize> {
    let mut mixed = support::workload::Workload::new(1);
    let mut flow = support::flow::Flow::gathered(1, 16, 16, GATHERED_SENDS);
    let mut done = 0;
    while done < n {
        let events = match mix {
            Mix::Mixed => mixed.events((n - done).min(10_000)),
            Mix::Throughput => flow.events(((n - done) / GATHERED_SENDS).clamp(1, 1_000)),
        };
        done += events.iter().map(|e| e.body.entries()).sum::<usize>();
        let appended: Vec<bus::Result<_>> = futures::stream::iter(events.iter().map(|e| log.append(e, Expect::Any)))
            .buffered(concurrency)
            .collect()
            .await;
        for a in appended {
            a.context("append")?;
        }
    }
    Ok(done)
}

/// Reads every row the rebuild produced, empties the tables, and times inserting the rows back
/// `BASELINE_ROWS` at a time (`json_populate_recordset`, one statement and commit per chunk).
async fn baseline(db_url: &str) -> anyhow::Result<(u64, Duration)> {
    let mut conn = sqlx::PgConnection::connect(db_url).await?;
    let mut tables = Vec::new();
    for table in TABLES {
        let rows: Vec<String> = sqlx::query_scalar(&format!("SELECT row_to_json(t)::text FROM {table} t"))
            .fetch_all(&mut conn)
            .await
            .with_context(|| format!("read {table}"))?;
        tables.push((table, rows));
    }
    sqlx::raw_sql(&format!("TRUNCATE {}", TABLES.join(", "))).execute(&mut conn).await?;
    let mut rows = 0u64;
    let started = Instant::now();
    for (table, all) in &tables {
        let sql = format!("INSERT INTO {table} SELECT * FROM json_populate_recordset(NULL::{table}, $1::json)");
        for chunk in all.chunks(BASELINE_ROWS) {
            let array = format!("[{}]", chunk.join(","));
            rows += sqlx::query(&sql).bind(array).execute(&mut conn).await?.rows_affected();
        }
    }
    Ok((rows, started.elapsed()))
}
