//! Paused-time tests of the timer set: firing order and punctuality, cancellation, moves,
//! the look-ahead window.
//!
//! Deliberately no stream and no database: `tests/` covers the timers wired to real backends.

use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use tokio::time::{advance, Instant};

use super::*;

fn key(n: u128) -> SignalKey {
    SignalKey { tenant: "default".into(), id: Uuid::from_u128(n) }
}

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2025, 1, 1, 0, 0, 0).unwrap()
}

/// What the tail would know of a signal of `signal_type` due at `expires_at`.
fn p(signal_type: &str, expires_at: DateTime<Utc>) -> Pending {
    Pending { signal_type: signal_type.into(), expires_at, correlation_id: None, last_seq: 1 }
}

fn secs(s: i64) -> chrono::Duration {
    chrono::Duration::seconds(s)
}

/// Whatever is due right now, without waiting.
fn ready(timers: &mut Timers) -> Vec<SignalKey> {
    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    let mut out = vec![];
    while let Poll::Ready(due) = timers.poll_due(&mut cx) {
        out.push(due.key);
    }
    out
}

/// Lets the runtime's timer driver observe the advanced clock.
async fn settle() {
    tokio::task::yield_now().await;
}

#[tokio::test(start_paused = true)]
async fn given_timers_when_time_passes_then_each_fires_at_its_expiry_in_order() {
    let mut timers = Timers::new(Duration::from_secs(600));
    assert!(timers.offer(key(2), p("Question", t0() + secs(2)), t0()));
    assert!(timers.offer(key(1), p("Question", t0() + secs(1)), t0()));
    assert!(timers.offer(key(3), p("Blocker", t0() + secs(3)), t0()));
    assert_eq!(timers.len(), 3);

    advance(Duration::from_millis(999)).await;
    settle().await;
    assert!(ready(&mut timers).is_empty(), "nothing is due before its expiry");

    advance(Duration::from_millis(1)).await;
    settle().await;
    assert_eq!(ready(&mut timers), vec![key(1)]);

    advance(Duration::from_secs(2)).await;
    settle().await;
    assert_eq!(ready(&mut timers), vec![key(2), key(3)]);
    assert!(timers.is_empty());
}

#[tokio::test(start_paused = true)]
async fn given_a_timer_when_awaited_then_it_fires_within_a_millisecond_of_expiry() {
    let mut timers = Timers::new(Duration::from_secs(600));
    let start = Instant::now();
    timers.offer(key(7), p("StatusUpdate", t0() + secs(5)), t0());
    let due = timers.next_due().await;
    assert_eq!(due.key, key(7));
    assert_eq!(due.pending.signal_type, "StatusUpdate");
    assert_eq!(due.pending.expires_at, t0() + secs(5));
    let late = Instant::now() - start;
    assert!(late >= Duration::from_secs(5) && late <= Duration::from_millis(5001), "fired after {late:?}");
}

#[tokio::test(start_paused = true)]
async fn given_a_terminal_signal_when_its_timer_is_cancelled_then_it_never_fires() {
    let mut timers = Timers::new(Duration::from_secs(600));
    timers.offer(key(1), p("Question", t0() + secs(1)), t0());
    timers.offer(key(2), p("Question", t0() + secs(1)), t0());
    assert!(timers.cancel(&key(1)));
    assert!(!timers.cancel(&key(1)), "a second cancel finds nothing");
    assert!(!timers.cancel(&key(9)), "cancelling an unknown signal is harmless");
    advance(Duration::from_secs(2)).await;
    settle().await;
    assert_eq!(ready(&mut timers), vec![key(2)]);
}

#[tokio::test(start_paused = true)]
async fn given_the_same_signal_offered_twice_when_time_passes_then_it_fires_once_at_the_newest_expiry() {
    let mut timers = Timers::new(Duration::from_secs(600));
    timers.offer(key(1), p("Question", t0() + secs(1)), t0());
    timers.offer(key(1), p("Question", t0() + secs(3)), t0());
    assert_eq!(timers.len(), 1);
    advance(Duration::from_secs(2)).await;
    settle().await;
    assert!(ready(&mut timers).is_empty());
    advance(Duration::from_secs(1)).await;
    settle().await;
    assert_eq!(ready(&mut timers), vec![key(1)]);
    advance(Duration::from_secs(10)).await;
    settle().await;
    assert!(ready(&mut timers).is_empty(), "fired exactly once");
}

#[tokio::test(start_paused = true)]
async fn given_an_expiry_beyond_the_window_when_offered_then_no_timer_is_set() {
    let mut timers = Timers::new(Duration::from_secs(120));
    assert!(!timers.offer(key(1), p("TaskAssigned", t0() + secs(121)), t0()));
    assert!(timers.offer(key(2), p("TaskAssigned", t0() + secs(120)), t0()));
    assert!(!timers.contains(&key(1)));
    assert!(timers.contains(&key(2)));
}

#[tokio::test(start_paused = true)]
async fn given_an_already_past_expiry_when_offered_then_it_fires_at_once() {
    let mut timers = Timers::new(Duration::from_secs(120));
    assert!(timers.offer(key(1), p("Question", t0() - secs(3600)), t0()));
    settle().await;
    let due = tokio::time::timeout(Duration::from_millis(2), timers.next_due()).await;
    assert_eq!(due.map(|d| d.key).ok(), Some(key(1)));
}

#[tokio::test(start_paused = true)]
async fn given_no_timers_when_awaited_then_it_stays_pending() {
    let mut timers = Timers::new(Duration::from_secs(120));
    let waited = tokio::time::timeout(Duration::from_secs(3600), timers.next_due()).await;
    assert!(waited.is_err());
}
