//! given / when / then tests of the signal rules.

use chrono::{DateTime, Duration, TimeZone, Utc};
use uuid::Uuid;

use super::*;
use crate::catalog::{Category, DeliveryClass};
use crate::event::{PublishPath, RecipientState, SignalBounced};

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 21, 12, 0, 0).unwrap()
}

fn id() -> Uuid {
    Uuid::from_u128(7)
}

fn sent() -> EventBody {
    EventBody::SignalSent(Box::new(SignalSent {
        signal_id: id(),
        from: "alice".into(),
        to: "bob".into(),
        signal_type: "TaskAssigned".into(),
        category: Category::Task,
        priority: 1,
        payload: "{}".into(),
        delivery_class: DeliveryClass::Async,
        created_at: t0(),
        expires_at: t0() + Duration::seconds(60),
        recipient_state: RecipientState::NotAvailableOffline,
        publish_path: PublishPath::QueuedOffline,
        correlation_id: None,
        dedupe_key: None,
        redacted: vec![],
        resolved_to_session: None,
        pushed_to: None,
        fanout_id: None,
        deliver_at: None,
    }))
}

fn delivered(redelivered: bool) -> EventBody {
    EventBody::SignalDelivered(SignalDelivered {
        signal_id: id(),
        to: "bob".into(),
        via: DeliveredVia::WsPush,
        session_id: None,
        redelivered,
        expires_at: Some(t0() + Duration::seconds(60)),
    })
}

fn deliver(redeliver: bool) -> SignalCommand {
    SignalCommand::Deliver { to: "bob".into(), via: DeliveredVia::WsPush, session_id: None, redeliver }
}

fn recall(by: &str) -> SignalCommand {
    SignalCommand::Recall { by: by.into() }
}

fn ack(by: &str) -> SignalCommand {
    SignalCommand::Ack { by: by.into(), session_id: None }
}

struct Given(SignalState);

fn given(events: &[EventBody]) -> Given {
    Given(SignalState::from_events(events))
}

impl Given {
    fn when(self, command: SignalCommand, seconds_later: i64) -> Then {
        let result = decide(&self.0, &command, t0() + Duration::seconds(seconds_later));
        let mut after = self.0.clone();
        if let Ok(events) = &result {
            events.iter().for_each(|e| after.apply(e));
        }
        Then { result, after }
    }
}

struct Then {
    result: DomainResult<Vec<EventBody>>,
    after: SignalState,
}

impl Then {
    fn then_expect(self, expected: &[EventBody]) -> SignalState {
        assert_eq!(self.result.as_deref(), Ok(expected));
        self.after
    }
    fn then_refused(self, err: DomainError) {
        assert_eq!(self.result, Err(err));
    }
}

#[test]
fn given_pending_when_delivered_then_delivered_event() {
    let s = given(&[sent()]).when(deliver(false), 1).then_expect(&[delivered(false)]);
    assert_eq!(s.status, Status::Delivered { acked: false });
}

#[test]
fn given_pending_past_ttl_when_delivered_then_refused() {
    given(&[sent()]).when(deliver(false), 60).then_refused(DomainError::Refused(Refusal::Expired));
}

#[test]
fn given_recalled_or_expired_when_delivered_then_never_deliverable() {
    let recalled = EventBody::SignalRecalled(SignalRecalled { signal_id: id(), by: "alice".into() });
    given(&[sent(), recalled]).when(deliver(true), 1).then_refused(DomainError::Refused(Refusal::Recalled));
    let expired = expired_event();
    given(&[sent(), expired]).when(deliver(true), 1).then_refused(DomainError::Refused(Refusal::Expired));
}

fn expired_event() -> EventBody {
    EventBody::SignalExpired(SignalExpired {
        signal_id: id(),
        expires_at: t0() + Duration::seconds(60),
        undeliverable: false,
        reason: Some(ExpiryReason::Ttl),
    })
}

#[test]
fn given_delivered_when_delivered_again_then_refused_unless_redelivery_of_unacked() {
    given(&[sent(), delivered(false)])
        .when(deliver(false), 1)
        .then_refused(DomainError::Refused(Refusal::AlreadyDelivered));
    given(&[sent(), delivered(false)]).when(deliver(true), 1).then_expect(&[delivered(true)]);
    let acked = EventBody::SignalAcked(SignalAcked { signal_id: id(), by: "bob".into(), session_id: None });
    given(&[sent(), delivered(false), acked])
        .when(deliver(true), 1)
        .then_refused(DomainError::Refused(Refusal::AlreadyDelivered));
}

#[test]
fn given_delivered_unacked_past_ttl_when_redelivered_then_refused() {
    given(&[sent(), delivered(false)]).when(deliver(true), 61).then_refused(DomainError::Refused(Refusal::Expired));
}

#[test]
fn given_pending_when_recalled_by_sender_then_recalled() {
    let recalled = EventBody::SignalRecalled(SignalRecalled { signal_id: id(), by: "alice".into() });
    let s = given(&[sent()]).when(recall("alice"), 1).then_expect(std::slice::from_ref(&recalled));
    assert_eq!(RecallOutcome::of(&s, "alice"), RecallOutcome::Recalled);
    // A repeat answers recalled again and appends nothing.
    let s = given(&[sent(), recalled]).when(recall("alice"), 2).then_expect(&[]);
    assert_eq!(RecallOutcome::of(&s, "alice"), RecallOutcome::Recalled);
}

#[test]
fn given_someone_elses_signal_when_recalled_then_not_found_and_nothing_appended() {
    let s = given(&[sent()]).when(recall("mallory"), 1).then_expect(&[]);
    assert_eq!(RecallOutcome::of(&s, "mallory"), RecallOutcome::NotFound);
    // Even the recipient cannot tell it exists.
    assert_eq!(RecallOutcome::of(&s, "bob"), RecallOutcome::NotFound);
}

#[test]
fn given_delivered_or_expired_when_recalled_then_already_outcomes() {
    let s = given(&[sent(), delivered(false)]).when(recall("alice"), 1).then_expect(&[]);
    assert_eq!(RecallOutcome::of(&s, "alice"), RecallOutcome::AlreadyDelivered);
    let s = given(&[sent(), expired_event()]).when(recall("alice"), 61).then_expect(&[]);
    assert_eq!(RecallOutcome::of(&s, "alice"), RecallOutcome::AlreadyExpired);
}

#[test]
fn given_pending_past_ttl_when_recalled_then_expiry_is_recorded_and_answered() {
    let s = given(&[sent()]).when(recall("alice"), 60).then_expect(&[expired_event()]);
    assert_eq!(RecallOutcome::of(&s, "alice"), RecallOutcome::AlreadyExpired);
}

#[test]
fn given_nothing_or_a_bounce_when_anything_then_not_found() {
    given(&[]).when(deliver(false), 0).then_refused(DomainError::NotFound);
    let s = given(&[]).when(recall("alice"), 0).then_expect(&[]);
    assert_eq!(RecallOutcome::of(&s, "alice"), RecallOutcome::NotFound);
    let bounce = EventBody::SignalBounced(SignalBounced {
        signal_id: id(),
        from: "alice".into(),
        to: "bob".into(),
        signal_type: "Blocker".into(),
        delivery_class: DeliveryClass::Sync,
        recipient_state: RecipientState::NotAvailableOffline,
        dedupe_key: None,
    });
    let s = given(std::slice::from_ref(&bounce)).when(recall("alice"), 0).then_expect(&[]);
    assert_eq!(RecallOutcome::of(&s, "alice"), RecallOutcome::NotFound);
    given(&[bounce]).when(SignalCommand::Expire, 100).then_refused(DomainError::NotFound);
}

#[test]
fn given_pending_when_expired_then_only_once_due() {
    given(&[sent()]).when(SignalCommand::Expire, 59).then_refused(DomainError::Refused(Refusal::NotYetDue));
    let s = given(&[sent()]).when(SignalCommand::Expire, 60).then_expect(&[expired_event()]);
    assert_eq!(s.status, Status::Expired);
    given(&[sent(), delivered(false)])
        .when(SignalCommand::Expire, 100)
        .then_refused(DomainError::Refused(Refusal::AlreadyTerminal));
}

#[test]
fn given_delivered_when_acked_by_recipient_then_acked_once() {
    let acked = EventBody::SignalAcked(SignalAcked { signal_id: id(), by: "bob".into(), session_id: None });
    let s = given(&[sent(), delivered(false)]).when(ack("bob"), 1).then_expect(std::slice::from_ref(&acked));
    assert_eq!(s.status, Status::Delivered { acked: true });
    given(&[sent(), delivered(false), acked]).when(ack("bob"), 2).then_expect(&[]);
    given(&[sent(), delivered(false)]).when(ack("alice"), 1).then_refused(DomainError::NotFound);
    given(&[sent()]).when(ack("bob"), 1).then_refused(DomainError::Refused(Refusal::NotDelivered));
}

#[test]
fn terminal_outcomes_are_mutually_exclusive_whatever_the_order_of_facts() {
    let recalled = EventBody::SignalRecalled(SignalRecalled { signal_id: id(), by: "alice".into() });
    let s = SignalState::from_events(&[sent(), recalled.clone(), delivered(false), expired_event()]);
    assert_eq!(s.status, Status::Recalled);
    let s = SignalState::from_events(&[sent(), delivered(false), recalled, expired_event()]);
    assert_eq!(s.status, Status::Delivered { acked: false });
}

#[test]
fn given_pending_when_abandoned_then_expired_as_undeliverable_and_never_delivered() {
    let abandoned = EventBody::SignalExpired(SignalExpired {
        signal_id: id(),
        expires_at: t0() + Duration::seconds(60),
        undeliverable: true,
        reason: Some(ExpiryReason::Undeliverable),
    });
    let s = given(&[sent()]).when(SignalCommand::Abandon, 2).then_expect(std::slice::from_ref(&abandoned));
    assert_eq!(s.status, Status::Expired);
    given(&[sent(), abandoned]).when(deliver(true), 3).then_refused(DomainError::Refused(Refusal::Expired));
}

#[test]
fn given_delivered_when_abandoned_then_refused_so_the_delivery_stands() {
    given(&[sent(), delivered(false)])
        .when(SignalCommand::Abandon, 2)
        .then_refused(DomainError::Refused(Refusal::AlreadyDelivered));
}

#[test]
fn a_hint_decides_exactly_what_decide_decides_on_the_state_it_describes() {
    let EventBody::SignalSent(s) = sent() else { unreachable!() };
    let hint = Hint::Sent(&s);
    for (command, seconds) in
        [(deliver(false), 1), (deliver(false), 60), (SignalCommand::Expire, 1), (SignalCommand::Expire, 60)]
    {
        let now = t0() + Duration::seconds(seconds);
        let hinted = decide_hinted(id(), &hint, &command, now).expect("a sent hint settles deliveries and expiries");
        assert_eq!(hinted, decide(&SignalState::from_events([&sent()]), &command, now), "{command:?} at +{seconds}s");
    }
    assert_eq!(decide_hinted(id(), &hint, &ack("bob"), t0()), None, "acks are checked on the stream");
    let due = Hint::Pending { expires_at: t0() + Duration::seconds(60) };
    assert_eq!(decide_hinted(id(), &due, &SignalCommand::Expire, t0()), None, "not due: read the stream");
    assert_eq!(
        decide_hinted(id(), &due, &SignalCommand::Expire, t0() + Duration::seconds(60)),
        Some(Ok(vec![expired_event()]))
    );
    assert_eq!(decide_hinted(id(), &hint, &recall("alice"), t0()), None, "recalls always read the stream");
}

#[test]
fn given_pending_when_someone_else_asks_for_it_then_not_found() {
    let other =
        SignalCommand::Deliver { to: "mallory".into(), via: DeliveredVia::WsPush, session_id: None, redeliver: false };
    given(&[sent()]).when(other.clone(), 1).then_refused(DomainError::NotFound);
    let EventBody::SignalSent(s) = sent() else { unreachable!() };
    assert_eq!(decide_hinted(id(), &Hint::Sent(&s), &other, t0()), Some(Err(DomainError::NotFound)));
}

fn sent_and_pushed() -> EventBody {
    let EventBody::SignalSent(mut s) = sent() else { unreachable!() };
    s.pushed_to = Some(Uuid::from_u128(9));
    s.publish_path = PublishPath::PushedToWs;
    EventBody::SignalSent(s)
}

#[test]
fn given_a_send_that_recorded_its_push_then_it_is_delivered_and_never_recalled_or_expired() {
    let state = SignalState::from_events([&sent_and_pushed()]);
    assert_eq!(state.status, Status::Delivered { acked: false });
    assert_eq!(state.deliveries, 1);
    assert_eq!(state.last_delivery.as_ref().and_then(|d| d.session_id), Some(Uuid::from_u128(9)));
    given(&[sent_and_pushed()]).when(recall("alice"), 1).then_expect(&[]);
    assert_eq!(RecallOutcome::of(&state, "alice"), RecallOutcome::AlreadyDelivered);
    given(&[sent_and_pushed()])
        .when(SignalCommand::Expire, 120)
        .then_refused(DomainError::Refused(Refusal::AlreadyTerminal));
    given(&[sent_and_pushed()]).when(deliver(false), 1).then_refused(DomainError::Refused(Refusal::AlreadyDelivered));
    given(&[sent_and_pushed()]).when(ack("bob"), 1).then_expect(&[EventBody::SignalAcked(SignalAcked {
        signal_id: id(),
        by: "bob".into(),
        session_id: None,
    })]);
    let EventBody::SignalSent(s) = sent_and_pushed() else { unreachable!() };
    for command in [deliver(false), SignalCommand::Expire] {
        let late = t0() + Duration::seconds(120);
        assert_eq!(decide_hinted(id(), &Hint::Sent(&s), &command, late), None, "{command:?}: read the stream");
    }
}

fn sync_sent() -> EventBody {
    let EventBody::SignalSent(mut s) = sent() else { unreachable!() };
    s.delivery_class = DeliveryClass::Sync;
    EventBody::SignalSent(s)
}

#[test]
fn given_a_sync_signal_given_up_then_its_repeat_answers_as_a_bounce() {
    let s =
        given(&[sync_sent()]).when(SignalCommand::Abandon, 2).then_expect(&[EventBody::SignalExpired(SignalExpired {
            signal_id: id(),
            expires_at: t0() + Duration::seconds(60),
            undeliverable: true,
            reason: Some(ExpiryReason::Undeliverable),
        })]);
    assert!(s.given_up && s.answered_as_bounce());
    // Expired by its TTL, a sync signal was not given up: its send was answered, not bounced.
    let s = given(&[sync_sent()]).when(SignalCommand::Expire, 60).then_expect(&[expired_event()]);
    assert!(!s.given_up && !s.answered_as_bounce());
    // An async signal given up (its recipient removed) was answered queued: no bounce.
    let removed = given(&[sent()]).when(SignalCommand::RecipientRemoved, 2);
    let s = removed.then_expect(&[EventBody::SignalExpired(SignalExpired {
        signal_id: id(),
        expires_at: t0() + Duration::seconds(60),
        undeliverable: true,
        reason: Some(ExpiryReason::Removed),
    })]);
    assert!(s.given_up && !s.answered_as_bounce());
}

#[test]
fn given_delivered_unacked_then_redelivery_only_to_another_session_when_the_first_is_closed() {
    let first = Uuid::from_u128(1);
    let second = Some(Uuid::from_u128(2));
    let EventBody::SignalDelivered(mut d) = delivered(false) else { unreachable!() };
    d.session_id = Some(first);
    let state = SignalState::from_events(&[sent(), EventBody::SignalDelivered(d)]);
    let redeliver = |session, allow, open: bool| match SignalCommand::deliver(
        &state,
        "bob",
        DeliveredVia::StartupDrain,
        session,
        allow,
        |_| open,
    ) {
        SignalCommand::Deliver { redeliver, .. } => redeliver,
        other => panic!("{other:?}"),
    };
    assert!(redeliver(second, true, false), "the first session closed: hand it out again");
    assert!(!redeliver(second, true, true), "the first session is open: it is that session's to ack");
    assert!(!redeliver(Some(first), true, false), "never again to the session that has it");
    assert!(!redeliver(second, false, false), "a live push never redelivers");
    let pending = SignalState::from_events(&[sent()]);
    let cmd = SignalCommand::deliver(&pending, "bob", DeliveredVia::WsPush, second, true, |_| false);
    assert!(matches!(cmd, SignalCommand::Deliver { redeliver: false, .. }), "a pending signal is a first delivery");
}

#[test]
fn the_ttl_rule_is_due_at_expires_at_not_before() {
    assert!(!is_due(t0(), t0() - Duration::milliseconds(1)));
    assert!(is_due(t0(), t0()));
}
