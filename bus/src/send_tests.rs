//! given / when / then tests of the send rules: every cell of the CONTRACT §4 table.

use chrono::{TimeZone, Utc};
use serde_json::json;

use super::*;

fn req(ty: &str) -> SendRequest {
    SendRequest {
        to: "bob".into(),
        signal_type: ty.into(),
        payload: json!({"x": 1}),
        delivery_class: None,
        ttl_seconds: None,
        correlation_id: None,
        dedupe_key: None,
        deliver_after_seconds: None,
        deliver_at: None,
    }
}

fn view(state: RecipientState, has_live_ws: bool) -> RecipientView {
    RecipientView { registered: true, state, has_live_ws, freshest_session: None }
}

fn when_sent(r: SendRequest, v: RecipientView) -> DomainResult<SendDecision> {
    let now = Utc.with_ymd_and_hms(2026, 11, 21, 0, 0, 0).unwrap();
    decide_send(&TypeTable::default(), "default", "alice", r, v, now, SendLimits::default())
}

fn accepted(d: DomainResult<SendDecision>) -> Box<SignalSent> {
    match d {
        Ok(SendDecision::Accepted(s)) => s,
        other => panic!("expected accepted, got {other:?}"),
    }
}

#[test]
fn given_each_recipient_state_when_sending_each_class_then_the_contract_table_holds() {
    use RecipientState::*;
    for (class, ty) in [(DeliveryClass::Sync, "Blocker"), (DeliveryClass::Async, "StatusUpdate")] {
        let s = accepted(when_sent(req(ty), view(Available, true)));
        assert_eq!((s.delivery_class, s.publish_path), (class, PublishPath::PushedToWs));
        let s = accepted(when_sent(req(ty), view(Available, false)));
        assert_eq!(s.publish_path, PublishPath::BufferedForPiggyback);
        for state in [NotAvailableStale, NotAvailableOffline] {
            match (class, when_sent(req(ty), view(state, true))) {
                (DeliveryClass::Sync, Ok(SendDecision::Bounced(b))) => assert_eq!(b.recipient_state, state),
                (DeliveryClass::Async, Ok(SendDecision::Accepted(s))) => {
                    assert_eq!(s.publish_path, PublishPath::QueuedOffline);
                    assert_eq!(s.recipient_state, state);
                }
                other => panic!("unexpected {other:?}"),
            }
        }
    }
}

#[test]
fn given_a_live_session_when_sending_then_the_send_resolves_to_it_unless_queued_offline() {
    let session = Some(uuid::Uuid::from_u128(9));
    let live = RecipientView { freshest_session: session, ..view(RecipientState::Available, true) };
    assert_eq!(accepted(when_sent(req("StatusUpdate"), live)).resolved_to_session, session);
    let stale = RecipientView { freshest_session: session, ..view(RecipientState::NotAvailableStale, true) };
    let queued = accepted(when_sent(req("StatusUpdate"), stale));
    assert_eq!(queued.publish_path, PublishPath::QueuedOffline);
    assert_eq!(queued.resolved_to_session, None);
}

#[test]
fn given_overrides_when_sending_then_they_win_over_type_defaults() {
    let mut r = req("Blocker");
    r.delivery_class = Some(DeliveryClass::Async);
    r.ttl_seconds = Some(30);
    let s = accepted(when_sent(r, view(RecipientState::NotAvailableOffline, false)));
    assert_eq!(s.delivery_class, DeliveryClass::Async);
    assert_eq!((s.expires_at - s.created_at).num_seconds(), 30);
    assert_eq!(s.priority, 3);
}

#[test]
fn given_an_unregistered_recipient_when_sending_then_unknown_recipient() {
    let v = RecipientView {
        registered: false,
        state: RecipientState::NotAvailableOffline,
        has_live_ws: false,
        freshest_session: None,
    };
    assert_eq!(when_sent(req("X"), v), Err(DomainError::UnknownRecipient));
}

#[test]
fn given_bad_fields_when_sending_then_invalid_with_specific_messages() {
    let v = view(RecipientState::Available, true);
    let mut r = req("9bad");
    assert!(matches!(when_sent(r.clone(), v), Err(DomainError::Invalid(m)) if m.contains("type")));
    r = req("Ok");
    r.ttl_seconds = Some(0);
    assert!(matches!(when_sent(r.clone(), v), Err(DomainError::Invalid(m)) if m.contains("ttl_seconds")));
    r = req("Ok");
    r.correlation_id = Some("c".repeat(65));
    assert!(matches!(when_sent(r.clone(), v), Err(DomainError::Invalid(m)) if m.contains("correlation_id")));
    r = req("Ok");
    r.to = "bad name".into();
    assert!(matches!(when_sent(r, v), Err(DomainError::Invalid(m)) if m.contains("to")));
}

#[test]
fn given_a_large_payload_when_sending_then_payload_too_large() {
    let mut r = req("Ok");
    r.payload = json!({"blob": "x".repeat(64 * 1024)});
    assert!(matches!(when_sent(r, view(RecipientState::Available, true)), Err(DomainError::PayloadTooLarge(_))));
}

#[test]
fn given_secrets_when_sending_then_stored_payload_is_redacted() {
    let mut r = req("Ok");
    r.payload = json!({"auth": {"Token": "abc"}});
    let s = accepted(when_sent(r, view(RecipientState::Available, true)));
    assert_eq!(s.redacted, vec!["auth.Token"]);
    assert!(!s.payload.contains("abc"));
}

#[test]
fn given_a_dedupe_key_when_sending_twice_then_the_id_is_the_same_per_sender_and_tenant() {
    let a = signal_id_for("default", "alice", Some("k"));
    assert_eq!(a, signal_id_for("default", "alice", Some("k")));
    assert_ne!(a, signal_id_for("default", "carol", Some("k")));
    assert_ne!(a, signal_id_for("other", "alice", Some("k")));
    assert_ne!(signal_id_for("default", "alice", None), signal_id_for("default", "alice", None));
}

/// Changes one field of a request.
type Plant = fn(&mut SendRequest);

#[test]
fn given_a_nul_in_any_stored_text_when_sent_then_it_is_refused_naming_the_field() {
    let cases: [(&str, Plant); 6] = [
        ("to", |r| r.to = "b\u{0}ob".into()),
        ("type", |r| r.signal_type = "Blo\u{0}cker".into()),
        ("correlation_id", |r| r.correlation_id = Some("c\u{0}".into())),
        ("dedupe_key", |r| r.dedupe_key = Some("\u{0}".into())),
        ("payload.a.b", |r| r.payload = json!({"a": {"b": "x\u{0}y"}})),
        ("the key \"k\\0\" under payload.a", |r| r.payload = json!({"a": {"k\u{0}": 1}})),
    ];
    for (field, plant) in cases {
        let mut r = req("StatusUpdate");
        plant(&mut r);
        match when_sent(r, view(RecipientState::Available, true)) {
            Err(DomainError::Invalid(m)) => {
                assert!(m.starts_with(&format!("{field} contains a NUL character (U+0000)")), "{field}: {m}")
            }
            other => panic!("{field}: expected invalid_request, got {other:?}"),
        }
    }
}

#[test]
fn fresh_signal_ids_are_time_ordered_and_keyed_ones_stay_derived() {
    // Given ids made one after another without a dedupe key
    let ids: Vec<Uuid> = (0..1000).map(|_| signal_id_for("default", "alice", None)).collect();
    // Then each is a v7 and later ones sort after earlier ones (the read models' key order)
    assert!(ids.iter().all(|id| id.get_version_num() == 7));
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids made later sort later");
    // And a dedupe key still names one id, whenever it is sent
    assert_eq!(signal_id_for("default", "alice", Some("k")), signal_id_for("default", "alice", Some("k")));
    assert_eq!(signal_id_for("default", "alice", Some("k")).get_version_num(), 5);
}

#[test]
fn given_plain_sends_when_asking_whether_they_may_be_gathered_then_only_fresh_unkeyed_unscheduled_long_lived_ones_may()
{
    let now = Utc.with_ymd_and_hms(2026, 11, 21, 0, 0, 0).unwrap();
    let plain = accepted(when_sent(req("StatusUpdate"), view(RecipientState::Available, true)));
    assert!(may_gather(&plain, now));
    let keyed = accepted(when_sent(
        SendRequest { dedupe_key: Some("k".into()), ..req("StatusUpdate") },
        view(RecipientState::Available, true),
    ));
    assert!(!may_gather(&keyed, now), "a dedupe key's send contends for its subject");
    let scheduled = accepted(when_sent(
        SendRequest { deliver_after_seconds: Some(30), ..req("StatusUpdate") },
        view(RecipientState::Available, true),
    ));
    assert!(!may_gather(&scheduled, now), "a release is decided on the send's own subject");
    let member = SignalSent { fanout_id: Some(Uuid::now_v7()), ..(*plain).clone() };
    assert!(!may_gather(&member, now));
    let short = SignalSent { expires_at: now + Duration::seconds(59), ..(*plain).clone() };
    assert!(!may_gather(&short, now), "too close to its expiry");
}
