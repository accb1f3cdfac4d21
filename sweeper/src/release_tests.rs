//! Paused-time tests of the release timers as the tail feeds them: a scheduled send sets a
//! timer at its `deliver_at` holding what its release needs, its end or release clears it, an
//! unscheduled send sets none, and the expiry timer of a released signal expects the release.
//!
//! Deliberately no stream and no database: `tests/scenarios` runs the releases for real.

use std::task::{Context, Poll};

use bus::catalog::{Category, DeliveryClass};
use bus::event::{PublishPath, RecipientState, SignalSent};
use chrono::TimeZone;
use tokio::time::{advance, Instant};

use super::*;
use crate::timers::Timers;

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 21, 12, 0, 0).unwrap()
}

fn key(n: u128) -> SignalKey {
    SignalKey { tenant: "default".into(), id: Uuid::from_u128(n) }
}

fn event(body: EventBody) -> Event {
    Event::new("default", None, t0(), body)
}

fn sent(n: u128, deliver_in: Option<i64>) -> Event {
    let deliver_at = deliver_in.map(|s| t0() + chrono::Duration::seconds(s));
    event(EventBody::SignalSent(Box::new(SignalSent {
        signal_id: Uuid::from_u128(n),
        from: "alice".into(),
        to: "bob".into(),
        signal_type: "StatusUpdate".into(),
        category: Category::Info,
        priority: 0,
        payload: "{}".into(),
        delivery_class: DeliveryClass::Async,
        created_at: t0(),
        expires_at: deliver_at.unwrap_or(t0()) + chrono::Duration::seconds(60),
        recipient_state: RecipientState::NotAvailableOffline,
        publish_path: if deliver_at.is_some() { PublishPath::Scheduled } else { PublishPath::QueuedOffline },
        correlation_id: Some("c".into()),
        dedupe_key: None,
        redacted: vec![],
        resolved_to_session: None,
        pushed_to: None,
        fanout_id: None,
        deliver_at,
    })))
}

fn released(n: u128, deliver_in: i64) -> Event {
    let deliver_at = t0() + chrono::Duration::seconds(deliver_in);
    event(EventBody::SignalReleased(SignalReleased {
        signal_id: Uuid::from_u128(n),
        to: "bob".into(),
        deliver_at,
        expires_at: deliver_at + chrono::Duration::seconds(60),
    }))
}

fn ready(timers: &mut ReleaseTimers) -> Vec<SignalKey> {
    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    let mut out = vec![];
    while let Poll::Ready((key, _)) = timers.poll_fired(&mut cx) {
        out.push(key);
    }
    out
}

#[tokio::test(start_paused = true)]
async fn given_a_scheduled_send_on_the_tail_then_its_release_timer_fires_at_deliver_at() {
    let mut timers = ReleaseTimers::new(Duration::from_secs(600));
    let start = Instant::now();
    timers.observe(41, &sent(1, Some(5)), t0());
    timers.observe(42, &sent(2, None), t0());
    assert_eq!(timers.len(), 1, "only a scheduled send is released");
    let (k, scheduled) = timers.next_due().await;
    assert_eq!(k, key(1));
    let want = Scheduled {
        to: "bob".into(),
        deliver_at: t0() + chrono::Duration::seconds(5),
        expires_at: t0() + chrono::Duration::seconds(65),
        correlation_id: Some("c".into()),
        last_seq: 41,
    };
    assert_eq!(scheduled, want);
    let late = Instant::now() - start;
    assert!(late >= Duration::from_secs(5) && late <= Duration::from_millis(5001), "fired after {late:?}");
}

#[tokio::test(start_paused = true)]
async fn given_a_scheduled_signal_released_or_ended_then_its_timer_is_cleared() {
    let mut timers = ReleaseTimers::new(Duration::from_secs(600));
    timers.observe(1, &sent(1, Some(5)), t0());
    timers.observe(2, &sent(2, Some(5)), t0());
    timers.observe(3, &sent(3, Some(5)), t0());
    timers.observe(4, &released(1, 5), t0());
    let recalled =
        event(EventBody::SignalRecalled(SignalRecalled { signal_id: Uuid::from_u128(2), by: "alice".into() }));
    timers.observe(5, &recalled, t0());
    advance(Duration::from_secs(6)).await;
    tokio::task::yield_now().await;
    assert_eq!(ready(&mut timers), vec![key(3)]);
    // Beyond the window: the backstop's preload takes it later.
    assert!(!timers.offer(
        key(4),
        Scheduled { deliver_at: t0() + chrono::Duration::seconds(601), ..scheduled_at_t0() },
        t0()
    ));
}

fn scheduled_at_t0() -> Scheduled {
    Scheduled { to: "bob".into(), deliver_at: t0(), expires_at: t0(), correlation_id: None, last_seq: 1 }
}

#[tokio::test(start_paused = true)]
async fn given_a_released_signal_then_its_expiry_timer_expects_the_release() {
    let mut expiries = Timers::new(Duration::from_secs(600));
    expiries.observe(7, &sent(1, Some(5)), t0());
    expiries.observe(9, &released(1, 5), t0());
    let due = expiries.next_due().await;
    assert_eq!((due.key, due.pending.last_seq), (key(1), 9));
    assert_eq!(due.pending.expires_at, t0() + chrono::Duration::seconds(65), "the TTL counts from deliver_at");
}
