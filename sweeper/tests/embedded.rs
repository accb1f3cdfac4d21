//! The sweeper scenarios on the embedded backends: EmbeddedLog + SQLite read models, with a
//! projector running.
//!
//! Deliberately only wiring: the scenarios live in `scenarios/` and run on both backends.

mod scenarios;
mod support;

use support::Bed;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_running_sweeper_when_a_1s_ttl_signal_is_sent_then_it_expires_within_a_second_of_expiry() {
    scenarios::on_time(Bed::embedded().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_deliveries_and_recalls_racing_the_sweeper_then_every_signal_has_exactly_one_terminal_event() {
    scenarios::races(Bed::embedded().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_overdue_and_soon_due_signals_when_a_sweeper_restarts_then_it_expires_them_at_start_and_on_time() {
    scenarios::restart(Bed::embedded().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_expired_signals_when_a_run_archives_them_then_they_leave_the_hot_table_and_stay_readable() {
    scenarios::archival(Bed::embedded().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_history_past_the_retention_when_a_run_purges_then_it_is_deleted() {
    scenarios::purge(Bed::embedded().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_stale_read_model_hint_when_expiring_without_a_read_then_the_stream_decides() {
    scenarios::stale_hints(Bed::embedded().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_open_directives_when_deadlines_pass_then_each_expires_once_on_time_or_at_the_first_run() {
    scenarios::directives::directives(Bed::embedded().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_scheduled_signals_when_they_fall_due_then_the_timers_release_each_once_within_a_second() {
    scenarios::scheduled::on_time(Bed::embedded().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_overdue_scheduled_signals_when_sweepers_restart_then_the_first_run_releases_each_exactly_once() {
    scenarios::scheduled::restart(Bed::embedded().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_recalls_racing_releases_then_each_signal_is_recalled_and_released_at_most_once() {
    scenarios::scheduled::races(Bed::embedded().await).await;
}
