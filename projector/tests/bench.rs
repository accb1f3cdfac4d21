//! Rebuild throughput on PostgreSQL: 100,000 workload events through `rebuild`, reported in
//! events/s beside the time just to read them from the log. `#[ignore]`d (it takes minutes);
//! run with `cargo test -p projector --test bench -- --ignored --nocapture`.
//!
//! Deliberately not a pass/fail performance gate: numbers depend on the machine and the build
//! profile; they are printed for the report.

mod support;

use std::time::Instant;

use bus::log::Expect;
use futures::future::join_all;
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn rebuild_100k_events_on_postgres() {
    let env = Env::postgres().await;
    let mut w = workload::Workload::new(1);
    let n = 100_000;
    let started = Instant::now();
    // Appended 256 at a time concurrently: order inside a group is the writer's, which the
    // projection tolerates (it only changes which rows end up stamped, not the work done).
    for _ in 0..n / 1_000 {
        let events = w.events(1_000);
        for group in events.chunks(256) {
            let appends = group.iter().map(|e| env.log.append(e, Expect::Any));
            for r in join_all(appends).await {
                r.unwrap();
            }
        }
    }
    eprintln!("appended {n} events in {:?}", started.elapsed());
    let started = Instant::now();
    let mut from = 1;
    loop {
        let page = env.log.read(from, 5_000).await.unwrap();
        let Some(last) = page.last() else { break };
        from = last.seq + 1;
    }
    let read = started.elapsed();
    let report = projector::rebuild(&env.log, &env.models).await.unwrap();
    let rows = env.models.snapshot().await.unwrap().rows();
    eprintln!(
        "rebuild: {} events in {:?} = {:.0} events/s ({rows} rows); reading the log alone took {read:?} ({:.0} events/s)",
        report.events,
        report.elapsed,
        report.events_per_second(),
        n as f64 / read.as_secs_f64()
    );
}

/// The apply path alone (fold + set-based statements + checkpoint), without reading the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn apply_100k_events_on_postgres() {
    apply_100k(Env::postgres().await).await
}

/// The same on the embedded SQLite file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn apply_100k_events_on_sqlite() {
    apply_100k(Env::sqlite().await).await
}

async fn apply_100k(env: Env) {
    let mut w = workload::Workload::new(1);
    let events = stored(1, w.events(100_000));
    let started = Instant::now();
    let mut applied = 0;
    for chunk in events.chunks(5_000) {
        assert!(env.models.apply_stored(chunk, applied).await.unwrap());
        applied = chunk.last().unwrap().seq;
    }
    let took = started.elapsed();
    eprintln!("apply ({}): 100000 events in {took:?} = {:.0} events/s", env.backend, 100_000.0 / took.as_secs_f64());
}
