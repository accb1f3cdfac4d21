//! Outage-backlog throughput: N signals already overdue when a sweeper starts; how fast does its
//! startup run expire them? Ignored by default (it is a measurement, not a check of behaviour):
//!
//! `SWEEPER_BENCH_SIGNALS=50000 SWEEPER_BENCH_BACKEND=embedded|jetstream \
//!  cargo test -p sweeper --test throughput -- --ignored --nocapture`
//!
//! Deliberately measures the sweeper alone: the backlog is created and projected before the
//! clock starts.

mod support;

use std::time::{Duration, Instant};

use chrono::Utc;
use support::{config, Bed};
use sweeper::Lease;
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement; run with --ignored --nocapture"]
async fn overdue_backlog_expiry_rate() {
    let _ = tracing_subscriber::fmt().with_env_filter("sweeper=info").with_test_writer().try_init();
    let n: usize = std::env::var("SWEEPER_BENCH_SIGNALS").ok().and_then(|s| s.parse().ok()).unwrap_or(50_000);
    let backend = std::env::var("SWEEPER_BENCH_BACKEND").unwrap_or_else(|_| "embedded".into());
    let bed = if backend == "jetstream" { Bed::distributed().await } else { Bed::embedded().await };
    let lease = match &bed.db {
        Some(db) => Lease::Postgres { database_url: db.url().to_string() },
        None => Lease::Local,
    };

    let t = Instant::now();
    bed.send_many(n, Utc::now() - chrono::Duration::hours(1), 60).await;
    let sent = t.elapsed();
    bed.settle().await;
    println!(
        "{backend}: {n} sends in {sent:?} ({:.0}/s), projected after {:?}",
        n as f64 / sent.as_secs_f64(),
        t.elapsed()
    );

    let stop = CancellationToken::new();
    let started = Instant::now();
    let mut cfg = config(Duration::from_secs(3600), "bench", lease);
    if let Some(c) = std::env::var("SWEEPER_BENCH_CONCURRENCY").ok().and_then(|s| s.parse().ok()) {
        cfg.concurrency = c;
    }
    let handle = bed.sweeper(cfg, &stop);
    let facts = bed.wait_for_facts(1, Duration::from_secs(600)).await;
    let took = started.elapsed();
    let fact = &facts[0];
    let expired = fact["expired"].as_u64().unwrap();
    println!(
        "{backend}: startup run expired {expired} of {n} in {took:?} → {:.0} expiries/s (run_seconds {})",
        expired as f64 / took.as_secs_f64(),
        fact["run_seconds"]
    );
    assert_eq!(expired, n as u64);
    stop.cancel();
    handle.await.unwrap().unwrap();
    bed.shutdown().await;
}
