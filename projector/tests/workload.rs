//! The projector against a real embedded event log under load: a randomized workload of
//! 10,000+ events projected live equals a rebuild row for row; a projector killed mid-batch
//! (task aborted, connection terminated) and restarted still ends equal to a rebuild; a rebuild
//! racing live appends loses nothing; recipient state follows the clock. Both backends.

mod support;

use std::time::{Duration, Instant};

use projector::queries::Queries;
use projector::{Projector, ProjectorConfig};
use rand::{Rng, SeedableRng};
use support::*;
use tokio_util::sync::CancellationToken;

both_backends!(
    live_equals_rebuild,
    throughput_flow_live_equals_rebuild,
    killed_mid_batch_then_restarted,
    rebuild_during_appends_loses_nothing,
    recipient_state_follows_the_clock
);

fn spawn(env: &Env, config: ProjectorConfig) -> (CancellationToken, tokio::task::JoinHandle<projector::Result<()>>) {
    let token = CancellationToken::new();
    let p = Projector::new(env.log.clone(), env.models.clone(), config);
    let handle = tokio::spawn(p.run(token.clone()));
    (token, handle)
}

/// As `signalbus serve` runs it: on a thread and a runtime of its own.
fn spawn_own_thread(
    env: &Env,
    config: ProjectorConfig,
) -> (CancellationToken, tokio::task::JoinHandle<projector::Result<()>>) {
    let token = CancellationToken::new();
    let p = Projector::new(env.log.clone(), env.models.clone(), config);
    let handle = tokio::spawn(p.run_on_own_thread(token.clone()));
    (token, handle)
}

async fn caught_up(env: &Env) {
    let last = env.log.last_seq().await.unwrap();
    env.models.wait_for(last, Duration::from_secs(60)).await.expect("projector caught up");
}

/// Live tables, then a rebuild from the stream, must match row for row.
async fn assert_equals_rebuild(env: &Env) {
    assert_inflight_listed(env).await;
    let live = env.models.snapshot().await.unwrap();
    let indexes = env.pg_indexes().await;
    assert!(env.backend != "postgres" || indexes.iter().any(|d| d.contains("ix_signal_queue_expires_at")));
    let started = Instant::now();
    let report = projector::rebuild(&env.log, &env.models).await.unwrap();
    let rebuilt = env.models.snapshot().await.unwrap();
    eprintln!(
        "[{}] rebuild of {} events in {:?} ({:.0} events/s), {} rows",
        env.backend,
        report.events,
        started.elapsed(),
        report.events_per_second(),
        rebuilt.rows()
    );
    assert_eq!(live, rebuilt, "{}", live.diff(&rebuilt));
    assert_eq!(indexes, env.pg_indexes().await, "the rebuilt tables carry the same indexes");
    assert_inflight_listed(env).await;
}

/// The redelivery candidates (PostgreSQL's `signal_inflight`) are exactly the delivered, unacked
/// rows, as the doctor checks them.
async fn assert_inflight_listed(env: &Env) {
    let report = projector::doctor(&env.log, &env.models).await.unwrap();
    let check = report.checks.iter().find(|c| c.name == "inflight_list").expect("the doctor checks the list");
    assert!(check.ok, "{check:#?}");
}

/// The throughput scenario's shape (pushed sends, acks batched a few hundred events later, so
/// most stamp a row of an earlier batch) live, then rebuilt: the same rows, every ack landed.
/// The projector runs on a thread of its own, as in `signalbus serve`: its stop leaves the
/// read models' pool of this runtime working.
async fn throughput_flow_live_equals_rebuild(env: Env) {
    let (token, handle) = spawn_own_thread(&env, ProjectorConfig { max_batch: 250, ..ProjectorConfig::default() });
    let mut flow = flow::Flow::new(3, 4, 4);
    for _ in 0..4 {
        env.append_all(&flow.events(2_000)).await;
    }
    caught_up(&env).await;
    let snap = env.models.snapshot().await.unwrap();
    let signals = &snap.tables["signals"];
    assert!(signals.len() > 6_000, "the flow sent signals: {}", signals.len());
    // Rows are JSON arrays in `SNAPSHOT_TABLES` order: `acked_at` is the 20th column.
    let acked = signals
        .iter()
        .filter(|row| !serde_json::from_str::<Vec<serde_json::Value>>(row).unwrap()[19].is_null())
        .count();
    assert!(acked * 10 > signals.len() * 9, "most signals acked live: {acked} of {}", signals.len());
    token.cancel();
    handle.await.unwrap().unwrap();
    assert_equals_rebuild(&env).await;
}

async fn live_equals_rebuild(env: Env) {
    let (token, handle) = spawn(&env, ProjectorConfig::default());
    let mut w = workload::Workload::new(42);
    let started = Instant::now();
    for round in 0..6 {
        env.append_all(&w.events(2_000)).await;
        if round == 3 {
            // Archive mid-run, so later events (acks, redeliveries) land on archived rows.
            caught_up(&env).await;
            env.models.archive(chrono::Utc::now(), 100).await.unwrap();
        }
    }
    caught_up(&env).await;
    eprintln!("[{}] 12,000 events appended and projected live in {:?}", env.backend, started.elapsed());
    env.models.refresh_recipient_state(chrono::Utc::now()).await.unwrap();
    let snap = env.models.snapshot().await.unwrap();
    assert!(snap.tables["signals"].len() > 2_000, "the workload sent signals");
    assert!(snap.tables["plugin_facts"].len() > 500, "and recorded facts");
    assert_equals_rebuild(&env).await;
    // The live projector resumes after the swap moved its checkpoint.
    env.append_all(&w.events(500)).await;
    caught_up(&env).await;
    assert_equals_rebuild(&env).await;
    let report = projector::doctor(&env.log, &env.models).await.unwrap();
    assert!(report.ok(), "{report:#?}");
    token.cancel();
    handle.await.unwrap().unwrap();
}

async fn killed_mid_batch_then_restarted(env: Env) {
    let mut w = workload::Workload::new(9);
    env.append_all(&w.events(12_000)).await;
    let last = env.log.last_seq().await.unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    let mut kills = 0;
    while env.models.checkpoint().await.unwrap() < last && kills < 40 {
        let (_token, handle) = spawn(&env, ProjectorConfig::default());
        tokio::time::sleep(Duration::from_millis(rng.gen_range(5..60))).await;
        if kills % 3 == 2 && env.models.is_postgres() {
            terminate_projector_connections(&env).await;
            tokio::time::sleep(Duration::from_millis(rng.gen_range(0..20))).await;
        }
        // Dropped wherever it is: possibly mid-transaction, mid-statement.
        handle.abort();
        let _ = handle.await;
        kills += 1;
    }
    let reached = env.models.checkpoint().await.unwrap();
    eprintln!("[{}] {kills} kills; checkpoint {reached} of {last} before the final run", env.backend);
    assert!(kills >= 3, "the projector was killed several times before finishing");
    let (token, handle) = spawn(&env, ProjectorConfig::default());
    caught_up(&env).await;
    token.cancel();
    handle.await.unwrap().unwrap();
    env.models.refresh_recipient_state(chrono::Utc::now()).await.unwrap();
    assert_equals_rebuild(&env).await;
}

/// Kills the projector's PostgreSQL backends from the outside (as a failover or an operator
/// would), whatever they are doing — only this test's database: tests run in parallel.
async fn terminate_projector_connections(env: &Env) {
    let url = std::env::var("DATABASE_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let Ok(pool) = sqlx::PgPool::connect(&url).await else { return };
    let _ = sqlx::query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE application_name = 'signalbus-projector' AND state IN ('active', 'idle in transaction') \
           AND pid <> pg_backend_pid() AND datname = $1",
    )
    .bind(env.pg_name())
    .execute(&pool)
    .await;
    pool.close().await;
}

async fn rebuild_during_appends_loses_nothing(env: Env) {
    let (token, handle) = spawn(&env, ProjectorConfig::default());
    let mut w = workload::Workload::new(11);
    env.append_all(&w.events(5_000)).await;
    let more = w.events(3_000);
    let log = env.log.clone();
    let appender = tokio::spawn(async move {
        for e in &more {
            log.append(e, bus::log::Expect::Any).await.unwrap();
        }
    });
    // Two rebuilds while events keep coming: each swaps in a model at some stream position, and
    // the live projector continues from there.
    for _ in 0..2 {
        projector::rebuild(&env.log, &env.models).await.unwrap();
    }
    appender.await.unwrap();
    caught_up(&env).await;
    assert_eq!(env.models.checkpoint().await.unwrap(), 8_000);
    token.cancel();
    handle.await.unwrap().unwrap();
    env.models.refresh_recipient_state(chrono::Utc::now()).await.unwrap();
    assert_equals_rebuild(&env).await;
}

async fn recipient_state_follows_the_clock(env: Env) {
    let config = ProjectorConfig { stale_after: Duration::from_secs(1), ..ProjectorConfig::default() };
    let (token, handle) = spawn(&env, config);
    let session = uuid::Uuid::new_v4();
    let now = chrono::Utc::now();
    env.append_all(&[registered("bob", now), opened(session, "bob", now)]).await;
    caught_up(&env).await;
    assert_eq!(env.models.agents(TENANT).await.unwrap()[0].state, "available");
    // Past the threshold with no heartbeat: stale after a refresh (how soon is bench/'s to
    // measure, not a test's).
    let started = Instant::now();
    loop {
        if env.models.agents(TENANT).await.unwrap()[0].state == "not_available_stale" {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "still not stale after {:?}", started.elapsed());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    env.append_all(&[heartbeat(session, "bob", chrono::Utc::now())]).await;
    caught_up(&env).await;
    assert_eq!(env.models.agents(TENANT).await.unwrap()[0].state, "available");
    token.cancel();
    handle.await.unwrap().unwrap();
}
