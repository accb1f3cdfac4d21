//! The sweeper on the distributed backends (JetStream + PostgreSQL, private servers from
//! testkit): two sweepers at once share the work through the advisory-lock lease — every
//! signal expires exactly once and only the leader works — and a standby takes over when the
//! leader stops; plus the scenarios of `scenarios/` (on time, races, restart, archival).
//!
//! Deliberately real servers: no mock of the stream or the database.

mod scenarios;
mod support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use chrono::Utc;
use support::{config, eventually, eventually_some, Bed};
use sweeper::Lease;
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_two_sweepers_when_signals_fall_due_then_each_expires_exactly_once_by_one_leader() {
    let bed = Bed::distributed().await;
    let lease = Lease::Postgres { database_url: bed.db.as_ref().unwrap().url().to_string() };
    let overdue = bed.send_many(400, Utc::now() - chrono::Duration::hours(1), 60).await;
    bed.settle().await;

    let (stop_a, stop_b) = (CancellationToken::new(), CancellationToken::new());
    let a = bed.sweeper(config(Duration::from_millis(500), "a", lease.clone()), &stop_a);
    let b = bed.sweeper(config(Duration::from_millis(500), "b", lease.clone()), &stop_b);
    let started = Instant::now();
    // Signals falling due while both run: the leader's timers take them.
    let soon_at = Utc::now();
    let soon = bed.send_many(100, soon_at, 1).await;

    let all: Vec<_> = overdue.iter().chain(&soon).copied().collect();
    for &id in &all {
        eventually(Duration::from_secs(15), "expired", || async { bed.expired_at(id).await.is_some() }).await;
    }
    println!("500 signals expired {:?} after two sweepers started", started.elapsed());
    for &id in &all {
        let terminal = bed.terminal_events(id).await;
        assert_eq!(terminal, vec![("signal.expired", "signalbus/sweeper".to_string())], "signal {id}");
    }
    // How late they expired is bench/'s to measure; here: never early.
    let expires_at = soon_at + chrono::Duration::seconds(1);
    for &id in &soon {
        assert!(bed.expired_at(id).await.unwrap() >= expires_at, "due-soon {id} expired early");
    }
    // Only one of them ever ran: every status fact names the same leader, and it did all 500.
    // Waits for the facts that report all 500 to be stored (they follow the expiries).
    let facts = eventually_some(Duration::from_secs(15), "status facts reporting all 500 expiries", || async {
        let facts = bed.sweep_facts().await;
        let expired: u64 = facts.iter().map(|f| f["expired"].as_u64().unwrap()).sum();
        (expired >= 500).then_some(facts)
    })
    .await;
    let leaders: BTreeSet<String> = facts.iter().map(|f| f["leader"].as_str().unwrap().to_string()).collect();
    let expired: u64 = facts.iter().map(|f| f["expired"].as_u64().unwrap()).sum();
    println!("{} facts, leaders {leaders:?}, expired {expired}", facts.len());
    assert_eq!(leaders.len(), 1, "one leader: {leaders:?}");
    assert_eq!(expired, 500);

    // The leader stops; the standby takes over within a few lease retries and keeps expiring.
    let leader = leaders.into_iter().next().unwrap();
    let (stop_leader, standby) = if leader == "a" { (&stop_a, "b") } else { (&stop_b, "a") };
    stop_leader.cancel();
    let late_at = Utc::now();
    let late = bed.send_many(20, late_at, 2).await;
    eventually_some(Duration::from_secs(10), "the standby leads", || async {
        bed.sweep_facts().await.iter().any(|f| f["leader"] == standby).then_some(())
    })
    .await;
    for &id in &late {
        eventually(Duration::from_secs(10), "expired by the standby", || async { bed.expired_at(id).await.is_some() })
            .await;
        assert_eq!(bed.terminal_events(id).await.len(), 1);
    }

    stop_a.cancel();
    stop_b.cancel();
    a.await.unwrap().unwrap();
    b.await.unwrap().unwrap();
    bed.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_running_sweeper_when_a_1s_ttl_signal_is_sent_then_it_expires_within_a_second_of_expiry() {
    scenarios::on_time(Bed::distributed().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_deliveries_and_recalls_racing_the_sweeper_then_every_signal_has_exactly_one_terminal_event() {
    scenarios::races(Bed::distributed().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_overdue_and_soon_due_signals_when_a_sweeper_restarts_then_it_expires_them_at_start_and_on_time() {
    scenarios::restart(Bed::distributed().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_expired_signals_when_a_run_archives_them_then_they_leave_the_hot_table_and_stay_readable() {
    scenarios::archival(Bed::distributed().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_history_past_the_retention_when_a_run_purges_then_it_is_deleted() {
    scenarios::purge(Bed::distributed().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_stale_read_model_hint_when_expiring_without_a_read_then_the_stream_decides() {
    scenarios::stale_hints(Bed::distributed().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_open_directives_when_deadlines_pass_then_each_expires_once_on_time_or_at_the_first_run() {
    scenarios::directives::directives(Bed::distributed().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_scheduled_signals_when_they_fall_due_then_the_timers_release_each_once_within_a_second() {
    scenarios::scheduled::on_time(Bed::distributed().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_overdue_scheduled_signals_when_sweepers_restart_then_the_first_run_releases_each_exactly_once() {
    scenarios::scheduled::restart(Bed::distributed().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_recalls_racing_releases_then_each_signal_is_recalled_and_released_at_most_once() {
    scenarios::scheduled::races(Bed::distributed().await).await;
}
