//! given / when / then tests of scheduled delivery: what a send may ask for, and a scheduled
//! signal's life — invisible until due, released once and only while pending, recalled or
//! expired instead of released when either gets there first.

use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::json;
use uuid::Uuid;

use super::*;
use crate::catalog::{Category, TypeTable};
use crate::error::DomainError;
use crate::event::{DeliveredVia, PublishPath, RecipientState, SignalDelivered, SignalExpired, SignalRecalled};
use crate::send::{decide_send, RecipientView, SendDecision, SendLimits};
use crate::signal::{decide, decide_hinted, Hint, RecallOutcome, SignalCommand};

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 21, 12, 0, 0).unwrap()
}

fn at(seconds: i64) -> DateTime<Utc> {
    t0() + Duration::seconds(seconds)
}

const DAY: u64 = 86_400;
const THIRTY_DAYS: std::time::Duration = std::time::Duration::from_secs(30 * DAY);

fn req(ty: &str) -> SendRequest {
    SendRequest {
        to: "bob".into(),
        signal_type: ty.into(),
        payload: json!({}),
        delivery_class: None,
        ttl_seconds: None,
        correlation_id: None,
        dedupe_key: None,
        deliver_after_seconds: None,
        deliver_at: None,
    }
}

fn when_sent(r: SendRequest, state: RecipientState) -> DomainResult<SendDecision> {
    let view = RecipientView { registered: true, state, has_live_ws: true, freshest_session: Some(Uuid::from_u128(9)) };
    let limits = SendLimits { retention: Some(THIRTY_DAYS), ..SendLimits::default() };
    decide_send(&TypeTable::default(), "default", "alice", r, view, t0(), limits)
}

fn refused_with(r: SendRequest) -> String {
    match when_sent(r, RecipientState::Available) {
        Err(DomainError::Invalid(m)) => m,
        other => panic!("expected invalid_request, got {other:?}"),
    }
}

#[test]
fn given_a_delay_or_an_instant_when_sent_then_it_is_scheduled_and_expires_a_ttl_after_it() {
    for state in [RecipientState::Available, RecipientState::NotAvailableOffline] {
        let mut r = req("StatusUpdate");
        r.deliver_after_seconds = Some(3600);
        let Ok(SendDecision::Accepted(s)) = when_sent(r, state) else { panic!("accepted") };
        assert_eq!(s.deliver_at, Some(at(3600)));
        assert_eq!(s.expires_at, at(3600 + DAY as i64), "expires_at = deliver_at + ttl");
        assert_eq!(s.created_at, t0());
        assert_eq!(s.publish_path, PublishPath::Scheduled, "whatever the recipient's state");
        assert_eq!(s.resolved_to_session, None, "never resolved to a session at send");
        assert_eq!(s.recipient_state, state, "the state at send is still recorded");
    }
    let mut r = req("TaskAssigned");
    r.deliver_at = Some(at(90) + Duration::nanoseconds(1_234_567));
    r.ttl_seconds = Some(60);
    let Ok(SendDecision::Accepted(s)) = when_sent(r, RecipientState::Available) else { panic!("accepted") };
    assert_eq!(s.deliver_at, Some(at(90) + Duration::microseconds(1_234)), "whole microseconds, as stored");
    assert_eq!(s.expires_at, s.deliver_at.unwrap() + Duration::seconds(60));
    let Ok(SendDecision::Accepted(plain)) = when_sent(req("StatusUpdate"), RecipientState::Available) else {
        panic!("accepted")
    };
    assert_eq!((plain.deliver_at, plain.publish_path), (None, PublishPath::PushedToWs), "no schedule asked");
}

#[test]
fn given_bad_schedules_when_sent_then_each_is_invalid_with_its_own_message() {
    let mut both = req("StatusUpdate");
    both.deliver_after_seconds = Some(60);
    both.deliver_at = Some(at(60));
    assert_eq!(refused_with(both), "give deliver_after_seconds or deliver_at, not both");
    for after in [0, 2_592_001] {
        let mut r = req("StatusUpdate");
        r.deliver_after_seconds = Some(after);
        assert!(refused_with(r).starts_with("deliver_after_seconds must be between 1 and 2592000"), "{after}");
    }
    for past in [at(0), at(-1)] {
        let mut r = req("StatusUpdate");
        r.deliver_at = Some(past);
        assert!(refused_with(r).ends_with("is not in the future"));
    }
    let mut far = req("StatusUpdate");
    far.deliver_at = Some(at(30 * DAY as i64 + 1));
    assert!(refused_with(far).ends_with("is more than 30 days (2592000 seconds) ahead"));
}

#[test]
fn given_a_sync_signal_when_scheduled_then_invalid_saying_whether_the_type_made_it_sync() {
    let mut explicit = req("StatusUpdate");
    explicit.delivery_class = Some(DeliveryClass::Sync);
    explicit.deliver_after_seconds = Some(60);
    assert!(refused_with(explicit).starts_with("a sync signal cannot be scheduled"));
    let mut by_type = req("Blocker");
    by_type.deliver_after_seconds = Some(60);
    assert_eq!(
        refused_with(by_type.clone()),
        "Blocker is sync by default and a sync signal cannot be scheduled: send it with delivery_class async"
    );
    by_type.delivery_class = Some(DeliveryClass::Async);
    assert!(matches!(when_sent(by_type, RecipientState::NotAvailableOffline), Ok(SendDecision::Accepted(_))));
}

#[test]
fn given_a_signal_that_would_end_past_the_retention_when_scheduled_then_invalid() {
    // 29 days ahead with the default 24 h TTL ends 30 days out: exactly the retention, kept.
    let mut fits = req("StatusUpdate");
    fits.deliver_after_seconds = Some(29 * DAY);
    assert!(matches!(when_sent(fits.clone(), RecipientState::Available), Ok(SendDecision::Accepted(_))));
    fits.ttl_seconds = Some(DAY + 1);
    let m = refused_with(fits);
    assert!(
        m.starts_with("deliver_at + ttl_seconds ends at 2026-12-21T12:00:01Z, past the stream's retention (30 days)"),
        "{m}"
    );
    // Without a known retention nothing is checked beyond the 30 days.
    let mut r = req("StatusUpdate");
    r.deliver_after_seconds = Some(30 * DAY);
    let view = RecipientView {
        registered: true,
        state: RecipientState::Available,
        has_live_ws: false,
        freshest_session: None,
    };
    let d = decide_send(&TypeTable::default(), "default", "alice", r, view, t0(), SendLimits::default());
    assert!(matches!(d, Ok(SendDecision::Accepted(_))));
}

fn scheduled() -> SignalSent {
    SignalSent {
        signal_id: Uuid::from_u128(7),
        from: "alice".into(),
        to: "bob".into(),
        signal_type: "StatusUpdate".into(),
        category: Category::Info,
        priority: 0,
        payload: "{}".into(),
        delivery_class: DeliveryClass::Async,
        created_at: t0(),
        expires_at: at(160),
        recipient_state: RecipientState::NotAvailableOffline,
        publish_path: PublishPath::Scheduled,
        correlation_id: None,
        dedupe_key: None,
        redacted: vec![],
        resolved_to_session: None,
        pushed_to: None,
        fanout_id: None,
        deliver_at: Some(at(100)),
    }
}

fn sent() -> EventBody {
    EventBody::SignalSent(Box::new(scheduled()))
}

fn released() -> EventBody {
    EventBody::SignalReleased(SignalReleased {
        signal_id: Uuid::from_u128(7),
        to: "bob".into(),
        deliver_at: at(100),
        expires_at: at(160),
    })
}

fn delivered() -> EventBody {
    EventBody::SignalDelivered(SignalDelivered {
        signal_id: Uuid::from_u128(7),
        to: "bob".into(),
        via: DeliveredVia::Inbox,
        session_id: None,
        redelivered: false,
        expires_at: Some(at(160)),
    })
}

fn bus_reason() -> crate::event::ExpiryReason {
    crate::event::ExpiryReason::Ttl
}

fn expired() -> EventBody {
    EventBody::SignalExpired(SignalExpired {
        signal_id: Uuid::from_u128(7),
        expires_at: at(160),
        undeliverable: false,
        reason: Some(bus_reason()),
    })
}

fn recalled() -> EventBody {
    EventBody::SignalRecalled(SignalRecalled { signal_id: Uuid::from_u128(7), by: "alice".into() })
}

fn deliver() -> SignalCommand {
    SignalCommand::Deliver { to: "bob".into(), via: DeliveredVia::Inbox, session_id: None, redeliver: false }
}

/// `decide` on the state the events fold into, at `seconds` after t0.
fn given(events: &[EventBody], command: SignalCommand, seconds: i64) -> DomainResult<Vec<EventBody>> {
    decide(&SignalState::from_events(events), &command, at(seconds))
}

fn refused(r: Refusal) -> DomainResult<Vec<EventBody>> {
    Err(DomainError::Refused(r))
}

#[test]
fn given_a_scheduled_signal_when_delivered_before_it_is_due_then_refused_as_not_yet_due() {
    assert_eq!(given(&[sent()], deliver(), 99), refused(Refusal::NotYetDue));
    assert!(
        matches!(given(&[sent()], deliver(), 100).as_deref(), Ok([EventBody::SignalDelivered(_)])),
        "due: by the clock"
    );
    // Released by the sweeper's clock: a reader whose clock trails still delivers it.
    assert!(matches!(given(&[sent(), released()], deliver(), 99).as_deref(), Ok([EventBody::SignalDelivered(_)])));
    let state = SignalState::from_events(&[sent()]);
    assert!(!state.visible(at(99)) && state.visible(at(100)));
    assert!(SignalState::from_events(&[sent(), released()]).visible(at(0)));
}

#[test]
fn given_a_scheduled_signal_when_released_then_only_once_due_and_only_once() {
    assert_eq!(given(&[sent()], SignalCommand::Release, 99), refused(Refusal::NotYetDue));
    assert_eq!(given(&[sent()], SignalCommand::Release, 100), Ok(vec![released()]));
    let after = SignalState::from_events(&[sent(), released()]);
    assert!(after.released && after.status == Status::Pending, "released is still pending");
    assert_eq!(given(&[sent(), released()], SignalCommand::Release, 101), refused(Refusal::AlreadyReleased));
    // Past its TTL it is the expiry's turn, released or not.
    assert_eq!(given(&[sent()], SignalCommand::Release, 160), refused(Refusal::Expired));
    let mut plain = scheduled();
    plain.deliver_at = None;
    let plain = EventBody::SignalSent(Box::new(plain));
    assert_eq!(given(&[plain], SignalCommand::Release, 100), refused(Refusal::NotScheduled));
    assert_eq!(given(&[], SignalCommand::Release, 100), Err(DomainError::NotFound));
}

#[test]
fn given_a_release_racing_a_recall_or_an_expiry_then_whichever_is_on_the_stream_first_wins() {
    // Recalled first: nothing is released, and the recall stands.
    assert_eq!(given(&[sent(), recalled()], SignalCommand::Release, 100), refused(Refusal::AlreadyTerminal));
    // Released first: a recall still works until delivery (CONTRACT §16).
    let recall = SignalCommand::Recall { by: "alice".into() };
    assert_eq!(given(&[sent(), released()], recall.clone(), 101), Ok(vec![recalled()]));
    assert_eq!(given(&[sent()], recall.clone(), 50), Ok(vec![recalled()]), "a scheduled one too, before it is due");
    let s = SignalState::from_events(&[sent(), released(), delivered()]);
    assert_eq!(RecallOutcome::of(&s, "alice"), RecallOutcome::AlreadyDelivered);
    // Expired first: no release, no delivery.
    assert_eq!(given(&[sent(), expired()], SignalCommand::Release, 160), refused(Refusal::AlreadyTerminal));
    assert_eq!(given(&[sent(), released(), expired()], deliver(), 161), refused(Refusal::Expired));
    // Released first: expiry still comes at expires_at if nobody took it.
    assert_eq!(given(&[sent(), released()], SignalCommand::Expire, 159), refused(Refusal::NotYetDue));
    assert_eq!(given(&[sent(), released()], SignalCommand::Expire, 160), Ok(vec![expired()]));
    // Delivered first (a drain once due, before the sweeper got there): no release follows.
    assert_eq!(given(&[sent(), delivered()], SignalCommand::Release, 101), refused(Refusal::AlreadyDelivered));
    // The fold keeps the first outcome whatever follows.
    let s = SignalState::from_events(&[sent(), recalled(), released(), delivered()]);
    assert_eq!((s.status, s.released), (Status::Recalled, false));
}

#[test]
fn hints_on_scheduled_signals_decide_exactly_what_decide_decides() {
    let s = scheduled();
    let id = s.signal_id;
    let on_sent = SignalState::from_events(&[sent()]);
    let on_released = SignalState::from_events(&[sent(), released()]);
    for seconds in [50, 99, 100, 159, 160] {
        let now = at(seconds);
        for command in [deliver(), SignalCommand::Expire, SignalCommand::Release] {
            let want = decide(&on_sent, &command, now);
            assert_eq!(decide_hinted(id, &Hint::Sent(&s), &command, now), Some(want.clone()), "{command:?} +{seconds}");
            let row = Hint::Scheduled { to: "bob", deliver_at: at(100), expires_at: at(160) };
            match (command.clone(), decide_hinted(id, &row, &command, now)) {
                (SignalCommand::Release, got) => assert_eq!(got, Some(want), "+{seconds}"),
                (SignalCommand::Expire, Some(got)) => assert_eq!(got, want, "+{seconds}"),
                (_, got) => assert_eq!(got, None, "{command:?}: read the stream"),
            }
            let want = decide(&on_released, &command, now);
            assert_eq!(decide_hinted(id, &Hint::Released(&s), &command, now), Some(want), "released {command:?}");
        }
    }
}

#[test]
fn visibility_is_due_by_the_clock_or_released_on_the_stream() {
    assert!(is_visible(None, false, at(0)));
    assert!(!is_visible(Some(at(1)), false, at(0)));
    assert!(is_visible(Some(at(1)), false, at(1)));
    assert!(is_visible(Some(at(1)), true, at(0)));
}
