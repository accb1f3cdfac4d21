//! given / when / then tests of force-expire: the command on a signal (a pending one is expired
//! now, `forced`, whatever its `expires_at`; any other is refused as every expiry is), the
//! reasons every expiring command records, and the filters a request may combine.

use chrono::{DateTime, Duration, TimeZone, Utc};
use uuid::Uuid;

use super::*;
use crate::catalog::{Category, DeliveryClass};
use crate::error::Refusal;
use crate::event::{
    DeliveredVia, EventBody, ExpiryReason, PublishPath, RecipientState, SignalDelivered, SignalExpired, SignalRecalled,
};
use crate::signal::{decide, decide_hinted, Hint, SignalCommand, SignalState, Status};

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 21, 12, 0, 0).unwrap()
}

fn id() -> Uuid {
    Uuid::from_u128(0x51)
}

fn signal() -> SignalSent {
    SignalSent {
        signal_id: id(),
        from: "alice".into(),
        to: "bob".into(),
        signal_type: "TaskAssigned".into(),
        category: Category::Task,
        priority: 1,
        payload: "{}".into(),
        delivery_class: DeliveryClass::Async,
        created_at: t0(),
        expires_at: t0() + Duration::hours(24),
        recipient_state: RecipientState::NotAvailableOffline,
        publish_path: PublishPath::QueuedOffline,
        correlation_id: None,
        dedupe_key: None,
        redacted: vec![],
        resolved_to_session: None,
        pushed_to: None,
        fanout_id: None,
        deliver_at: None,
    }
}

fn sent() -> EventBody {
    EventBody::SignalSent(Box::new(signal()))
}

fn expired(reason: ExpiryReason) -> EventBody {
    EventBody::SignalExpired(SignalExpired {
        signal_id: id(),
        expires_at: t0() + Duration::hours(24),
        undeliverable: reason.gives_up(),
        reason: Some(reason),
    })
}

fn delivered() -> EventBody {
    EventBody::SignalDelivered(SignalDelivered {
        signal_id: id(),
        to: "bob".into(),
        via: DeliveredVia::WsPush,
        session_id: None,
        redelivered: false,
        expires_at: Some(t0() + Duration::hours(24)),
    })
}

struct Given(SignalState);

fn given(events: &[EventBody]) -> Given {
    Given(SignalState::from_events(events))
}

struct Then(crate::error::DomainResult<Vec<EventBody>>, SignalState);

impl Given {
    fn when(self, command: SignalCommand, seconds_later: i64) -> Then {
        let result = decide(&self.0, &command, t0() + Duration::seconds(seconds_later));
        let mut after = self.0;
        if let Ok(events) = &result {
            events.iter().for_each(|e| after.apply(e));
        }
        Then(result, after)
    }
}

impl Then {
    fn then_expect(self, expected: &[EventBody]) -> SignalState {
        assert_eq!(self.0.as_deref(), Ok(expected));
        self.1
    }
    fn then_refused(self, refusal: Refusal) {
        assert_eq!(self.0, Err(DomainError::Refused(refusal)));
    }
}

#[test]
fn given_pending_long_before_its_ttl_when_force_expired_then_expired_now_as_forced() {
    let s = given(&[sent()]).when(SignalCommand::ForceExpire, 5).then_expect(&[expired(ExpiryReason::Forced)]);
    assert_eq!(s.status, Status::Expired);
    assert!(!s.given_up, "a force-expire is not a give-up: a sync repeat does not answer as a bounce");
    given(&[sent(), expired(ExpiryReason::Forced)])
        .when(
            SignalCommand::Deliver { to: "bob".into(), via: DeliveredVia::Inbox, session_id: None, redeliver: true },
            6,
        )
        .then_refused(Refusal::Expired);
}

#[test]
fn given_pending_past_its_ttl_when_force_expired_then_still_forced() {
    given(&[sent()]).when(SignalCommand::ForceExpire, 90_000).then_expect(&[expired(ExpiryReason::Forced)]);
}

#[test]
fn given_delivered_recalled_or_expired_when_force_expired_then_refused_as_today() {
    given(&[sent(), delivered()]).when(SignalCommand::ForceExpire, 5).then_refused(Refusal::AlreadyDelivered);
    let recalled = EventBody::SignalRecalled(SignalRecalled { signal_id: id(), by: "alice".into() });
    given(&[sent(), recalled]).when(SignalCommand::ForceExpire, 5).then_refused(Refusal::AlreadyTerminal);
    for reason in ExpiryReason::ALL {
        given(&[sent(), expired(reason)]).when(SignalCommand::ForceExpire, 5).then_refused(Refusal::AlreadyTerminal);
    }
    let mut pushed = signal();
    pushed.pushed_to = Some(Uuid::from_u128(9));
    given(&[EventBody::SignalSent(Box::new(pushed))])
        .when(SignalCommand::ForceExpire, 5)
        .then_refused(Refusal::AlreadyDelivered);
}

#[test]
fn given_nothing_when_force_expired_then_not_found() {
    assert_eq!(decide(&SignalState::default(), &SignalCommand::ForceExpire, t0()), Err(DomainError::NotFound));
}

#[test]
fn every_expiring_command_records_its_reason() {
    given(&[sent()]).when(SignalCommand::Expire, 86_400).then_expect(&[expired(ExpiryReason::Ttl)]);
    given(&[sent()])
        .when(SignalCommand::Recall { by: "alice".into() }, 86_400)
        .then_expect(&[expired(ExpiryReason::Ttl)]);
    given(&[sent()]).when(SignalCommand::Abandon, 1).then_expect(&[expired(ExpiryReason::Undeliverable)]);
    let s = given(&[sent()]).when(SignalCommand::RecipientRemoved, 1).then_expect(&[expired(ExpiryReason::Removed)]);
    assert!(s.given_up);
}

#[test]
fn an_expiry_of_an_older_release_reads_its_reason_from_undeliverable() {
    let old = |undeliverable| SignalExpired { signal_id: id(), expires_at: t0(), undeliverable, reason: None };
    assert_eq!(old(false).reason(), ExpiryReason::Ttl);
    assert_eq!(old(true).reason(), ExpiryReason::Undeliverable);
    let forced = SignalExpired { reason: Some(ExpiryReason::Forced), ..old(false) };
    assert_eq!(forced.reason(), ExpiryReason::Forced);
}

#[test]
fn a_pending_hint_force_expires_exactly_as_decide_does() {
    let hint = Hint::Pending { expires_at: t0() + Duration::hours(24) };
    for seconds in [1, 90_000] {
        let now = t0() + Duration::seconds(seconds);
        let state = SignalState::from_events([&sent()]);
        assert_eq!(
            decide_hinted(id(), &hint, &SignalCommand::ForceExpire, now),
            Some(decide(&state, &SignalCommand::ForceExpire, now)),
            "+{seconds}s"
        );
    }
}

fn filter() -> ExpireFilter {
    ExpireFilter { tenant: "default".into(), to: Some("bob".into()), ..ExpireFilter::default() }
}

#[test]
fn given_only_a_tenant_then_refused_because_it_would_expire_everything() {
    let only = ExpireFilter { tenant: "default".into(), ..ExpireFilter::default() };
    let Err(DomainError::Invalid(msg)) = only.check() else { panic!("a tenant alone must be refused") };
    assert!(msg.contains("would expire everything"), "{msg}");
    assert_eq!(filter().check(), Ok(()));
    for f in [
        ExpireFilter { to: None, from: Some("alice".into()), ..filter() },
        ExpireFilter { to: None, signal_type: Some("TaskAssigned".into()), ..filter() },
        ExpireFilter { to: None, older_than_seconds: Some(3600), ..filter() },
        ExpireFilter { to: None, signal_ids: vec![id()], ..filter() },
    ] {
        assert_eq!(f.check(), Ok(()), "{f:?}");
    }
}

#[test]
fn given_a_filter_out_of_bounds_then_refused_naming_it() {
    let refused = |f: ExpireFilter, word: &str| match f.check() {
        Err(DomainError::Invalid(msg)) => assert!(msg.contains(word), "{msg} should name {word}"),
        other => panic!("{f:?}: {other:?}"),
    };
    refused(ExpireFilter { tenant: "No Such".into(), ..filter() }, "tenant");
    refused(ExpireFilter { to: Some("@group".into()), ..filter() }, "to");
    refused(ExpireFilter { from: Some(String::new()), ..filter() }, "from");
    refused(ExpireFilter { signal_type: Some("9lives".into()), ..filter() }, "signal_type");
    refused(ExpireFilter { older_than_seconds: Some(0), ..filter() }, "older_than_seconds");
    refused(ExpireFilter { older_than_seconds: Some(MAX_OLDER_THAN_SECONDS + 1), ..filter() }, "older_than_seconds");
    refused(ExpireFilter { signal_ids: vec![id(); MAX_SIGNAL_IDS + 1], ..filter() }, "signal_ids");
}

#[test]
fn filters_combine_with_and_and_age_counts_from_created_at() {
    let now = t0() + Duration::hours(2);
    let s = signal();
    assert!(filter().matches("default", &s, now));
    assert!(!filter().matches("other", &s, now), "never another tenant");
    assert!(!ExpireFilter { to: Some("carol".into()), ..filter() }.matches("default", &s, now));
    let all = ExpireFilter {
        from: Some("alice".into()),
        signal_type: Some("TaskAssigned".into()),
        older_than_seconds: Some(7200),
        signal_ids: vec![Uuid::from_u128(1), id()],
        ..filter()
    };
    assert!(all.matches("default", &s, now), "two hours old is older than 7200 s (inclusive)");
    assert!(!ExpireFilter { older_than_seconds: Some(7201), ..all.clone() }.matches("default", &s, now));
    assert!(!ExpireFilter { from: Some("mallory".into()), ..all.clone() }.matches("default", &s, now));
    assert!(!ExpireFilter { signal_type: Some("Question".into()), ..all.clone() }.matches("default", &s, now));
    assert!(!ExpireFilter { signal_ids: vec![Uuid::from_u128(1)], ..all }.matches("default", &s, now));
    assert!(!filter().matches("default", &s, t0() - Duration::seconds(1)), "sent after the request began");
}
