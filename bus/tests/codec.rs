//! Codec tests: every event in the catalog round-trips through MessagePack, and schema_version-1
//! byte vectors checked into `tests/vectors/v1/` still decode to the same events — so a change
//! that would break events already on a stream fails here first.
//!
//! To add a vector for a new event type, run with `SIGNALBUS_WRITE_VECTORS=1` once and commit
//! the new file; existing files must never be rewritten.

use std::path::PathBuf;

use bus::acceptance::{as_stored_at, deadline, store_by};
use bus::catalog::{Category, DeliveryClass};
use bus::codec::{decode, encode};
use bus::event::*;
use chrono::{TimeZone, Utc};
use uuid::Uuid;

fn samples() -> Vec<Event> {
    let at = Utc.with_ymd_and_hms(2026, 11, 21, 9, 30, 0).unwrap();
    let sig = Uuid::from_u128(0x1111);
    let sess = Uuid::from_u128(0x2222);
    let dir = Uuid::from_u128(0x3333);
    let bodies = vec![
        EventBody::AgentRegistered(AgentRegistered {
            identity: "alice".into(),
            kind: SessionKind::Daemon,
            token_hash: "ab".repeat(32),
        }),
        EventBody::TokenRotated(TokenRotated { identity: "alice".into(), token_hash: "cd".repeat(32) }),
        EventBody::SessionOpened(SessionOpened {
            session_id: sess,
            identity: "bob".into(),
            kind: SessionKind::Interactive,
            surface: Surface::Ws,
            node: "node-1".into(),
        }),
        EventBody::SessionHeartbeat(SessionHeartbeat { session_id: sess, identity: "bob".into() }),
        EventBody::SessionClosed(SessionClosed { session_id: sess, identity: "bob".into(), reason: "client".into() }),
        EventBody::SignalSent(Box::new(SignalSent {
            signal_id: sig,
            from: "alice".into(),
            to: "bob".into(),
            signal_type: "Blocker".into(),
            category: Category::Blocker,
            priority: 3,
            payload: r#"{"msg":"hi","token":"[REDACTED]"}"#.into(),
            delivery_class: DeliveryClass::Sync,
            created_at: at,
            expires_at: at + chrono::Duration::hours(4),
            recipient_state: RecipientState::Available,
            publish_path: PublishPath::PushedToWs,
            correlation_id: Some("corr-1".into()),
            dedupe_key: Some("k1".into()),
            redacted: vec!["token".into()],
            resolved_to_session: None,
            pushed_to: None,
            fanout_id: None,
            deliver_at: None,
        })),
        EventBody::SignalBounced(SignalBounced {
            signal_id: sig,
            from: "alice".into(),
            to: "bob".into(),
            signal_type: "Question".into(),
            delivery_class: DeliveryClass::Sync,
            recipient_state: RecipientState::NotAvailableStale,
            dedupe_key: None,
        }),
        EventBody::SignalDelivered(SignalDelivered {
            signal_id: sig,
            to: "bob".into(),
            via: DeliveredVia::StartupDrain,
            session_id: Some(sess),
            redelivered: true,
            expires_at: None,
        }),
        EventBody::SignalAcked(SignalAcked { signal_id: sig, by: "bob".into(), session_id: Some(sess) }),
        // As written before expiries recorded a reason (`variants` holds one with it).
        EventBody::SignalExpired(SignalExpired { signal_id: sig, expires_at: at, undeliverable: false, reason: None }),
        EventBody::SignalRecalled(SignalRecalled { signal_id: sig, by: "alice".into() }),
        EventBody::PluginFactRecorded(PluginFactRecorded {
            plugin: "alice/watcher".into(),
            seq: 7,
            fact_type: "snapshot".into(),
            state: r#"{"ok":true}"#.into(),
            recorded_by: "alice".into(),
        }),
        // New types go last: a sample's event_id is its index, and existing vectors hold theirs.
        EventBody::AgentRemoved(AgentRemoved { identity: "alice".into() }),
        EventBody::SignalsAcked(SignalsAcked { by: "bob".into(), session_id: Some(sess), signal_ids: vec![sig, sess] }),
        EventBody::DirectiveRequested(Box::new(DirectiveRequested {
            directive_id: dir,
            issuer: "alice".into(),
            assignee: "@builders".into(),
            candidates: vec!["bob".into(), "carol".into()],
            directive_type: "package.install".into(),
            params: r#"{"name":"x","db":{"password":"[REDACTED]"}}"#.into(),
            idempotency_key: "k1".into(),
            correlation_id: Some("corr-1".into()),
            created_at: at,
            deadline: at + chrono::Duration::hours(24),
            redacted: vec!["params.db.password".into()],
        })),
        EventBody::DirectiveStarted(DirectiveStarted { directive_id: dir, by: "bob".into(), at }),
        EventBody::DirectiveProgressed(DirectiveProgressed {
            directive_id: dir,
            by: "bob".into(),
            message: Some("half way".into()),
            percent: Some(50),
            at,
        }),
        EventBody::DirectiveCompleted(DirectiveCompleted {
            directive_id: dir,
            by: "bob".into(),
            result: r#"{"ok":true,"token":"[REDACTED]"}"#.into(),
            claimed: false,
            at,
            redacted: vec!["result.token".into()],
        }),
        EventBody::DirectiveFailed(DirectiveFailed {
            directive_id: dir,
            by: "carol".into(),
            code: "E_DISK".into(),
            message: "disk full".into(),
            claimed: true,
            at,
        }),
        EventBody::DirectiveDeclined(DirectiveDeclined {
            directive_id: dir,
            by: "carol".into(),
            reason: Some("busy".into()),
            rejects: true,
            at,
        }),
        EventBody::DirectiveCanceled(DirectiveCanceled { directive_id: dir, by: "alice".into(), reason: None, at }),
        EventBody::DirectiveExpired(DirectiveExpired { directive_id: dir, deadline: at, at }),
        EventBody::GroupCreated(GroupCreated { group: "@builders".into(), self_join: true, announce: true }),
        EventBody::GroupUpdated(GroupUpdated { group: "@builders".into(), self_join: false, announce: true }),
        EventBody::GroupDeleted(GroupDeleted { group: "@builders".into() }),
        EventBody::GroupMemberAdded(GroupMemberAdded {
            group: "@builders".into(),
            identity: "bob".into(),
            added_by: "admin".into(),
        }),
        EventBody::GroupMemberRemoved(GroupMemberRemoved {
            group: "@builders".into(),
            identity: "bob".into(),
            by: "bob".into(),
        }),
        EventBody::SignalReleased(SignalReleased {
            signal_id: sig,
            to: "bob".into(),
            deliver_at: at + chrono::Duration::hours(1),
            expires_at: at + chrono::Duration::hours(25),
        }),
        EventBody::TokenIssued(TokenIssued {
            identity: "alice".into(),
            token_id: Uuid::from_u128(0x4444),
            token_hash: "ef".repeat(32),
            scopes: bus::scope::ScopeSet::parse(["send", "read"]).unwrap(),
            expires_at: Some(at + chrono::Duration::hours(1)),
            label: Some("ci".into()),
        }),
        EventBody::TokenRevoked(TokenRevoked { identity: "alice".into(), token_id: Uuid::from_u128(0x4444) }),
        EventBody::AdminTokenIssued(AdminTokenIssued {
            token_id: Uuid::from_u128(0x5555),
            token_hash: "12".repeat(32),
            label: Some("acme ops".into()),
        }),
        EventBody::AdminTokenRevoked(AdminTokenRevoked { token_id: Uuid::from_u128(0x5555) }),
        EventBody::AcksRecorded(AcksRecorded {
            acks: vec![
                SignalsAcked { by: "bob".into(), session_id: Some(sess), signal_ids: vec![sig, dir] },
                SignalsAcked { by: "carol".into(), session_id: Some(Uuid::from_u128(0x6666)), signal_ids: vec![sess] },
            ],
        }),
    ];
    // Last, so every earlier sample keeps its event id (and its vector).
    let mut bodies = bodies;
    let sent = bodies.iter().find_map(|b| match b {
        EventBody::SignalSent(s) => Some((**s).clone()),
        _ => None,
    });
    let sent = sent.expect("a signal.sent sample");
    let other =
        SignalSent { signal_id: Uuid::from_u128(0x7777), to: "carol".into(), pushed_to: Some(sess), ..sent.clone() };
    bodies.push(EventBody::SendsRecorded(SendsRecorded { window: 176_435_100_000, sends: vec![sent, other] }));
    bodies
        .into_iter()
        .enumerate()
        .map(|(i, body)| Event {
            event_id: Uuid::from_u128(0xE000 + i as u128),
            schema_version: 1,
            tenant: "default".into(),
            occurred_at: at,
            actor: Some("alice".into()),
            correlation_id: Some("corr-1".into()),
            causation_id: Some(Uuid::from_u128(0xC0)),
            accept_by: None,
            body,
        })
        .collect()
}

fn vector_path(event: &Event) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/v1").join(format!("{}.msgpack", event.type_name()))
}

/// Events of a type already sampled, with a field added later set: each has its own vector,
/// `<type>+<variant>.msgpack`, so both what older releases wrote and what this one writes
/// keep decoding.
fn variants() -> Vec<(&'static str, Event)> {
    let expired = |reason: ExpiryReason| {
        let mut event = samples().into_iter().find(|e| e.type_name() == "signal.expired").unwrap();
        let EventBody::SignalExpired(e) = &mut event.body else { unreachable!() };
        e.undeliverable = reason.gives_up();
        e.reason = Some(reason);
        event
    };
    vec![
        ("forced", expired(ExpiryReason::Forced)),
        ("ttl", expired(ExpiryReason::Ttl)),
        ("undeliverable", expired(ExpiryReason::Undeliverable)),
        ("removed", expired(ExpiryReason::Removed)),
    ]
}

#[test]
fn variant_vectors_still_decode() {
    let write = std::env::var_os("SIGNALBUS_WRITE_VECTORS").is_some();
    for (variant, event) in variants() {
        let name = format!("{}+{variant}.msgpack", event.type_name());
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/v1").join(name);
        if write && !path.exists() {
            std::fs::write(&path, encode(&event).unwrap()).unwrap();
        }
        let bytes = std::fs::read(&path).unwrap_or_else(|_| panic!("missing vector {}", path.display()));
        assert_eq!(decode(&bytes).unwrap(), event, "vector {}", path.display());
        assert_eq!(decode(&encode(&event).unwrap()).unwrap(), event, "{variant} round-trips");
    }
}

#[test]
fn an_expiry_without_a_reason_reads_as_its_release_meant_it() {
    let old = samples().into_iter().find(|e| e.type_name() == "signal.expired").unwrap();
    let EventBody::SignalExpired(e) = decode(&std::fs::read(vector_path(&old)).unwrap()).unwrap().body else {
        unreachable!()
    };
    assert_eq!((e.reason, e.reason()), (None, ExpiryReason::Ttl));
    let bytes = encode(&variants()[0].1).unwrap();
    assert!(bytes.windows(b"forced".len()).any(|w| w == b"forced"), "the reason is written by name");
}

#[test]
fn every_event_round_trips() {
    for event in samples() {
        let bytes = encode(&event).unwrap();
        assert_eq!(decode(&bytes).unwrap(), event, "{}", event.type_name());
    }
}

#[test]
fn schema_version_1_vectors_still_decode() {
    let write = std::env::var_os("SIGNALBUS_WRITE_VECTORS").is_some();
    let events = samples();
    // Every event type has a vector: a new type without one fails until it is recorded.
    let names: std::collections::BTreeSet<_> = events.iter().map(|e| e.type_name()).collect();
    assert_eq!(names.len(), events.len());
    for event in events {
        let path = vector_path(&event);
        if write && !path.exists() {
            std::fs::write(&path, encode(&event).unwrap()).unwrap();
        }
        let bytes = std::fs::read(&path).unwrap_or_else(|_| panic!("missing vector {}", path.display()));
        assert_eq!(decode(&bytes).unwrap(), event, "vector {}", path.display());
    }
}

#[test]
fn a_scheduled_send_round_trips_and_an_unscheduled_one_writes_no_deliver_at() {
    let sent = samples().into_iter().find(|e| e.type_name() == "signal.sent").unwrap();
    let plain = encode(&sent).unwrap();
    assert!(!plain.windows(10).any(|w| w == b"deliver_at"), "an optional field left out when empty");
    let mut scheduled = sent.clone();
    if let EventBody::SignalSent(s) = &mut scheduled.body {
        s.deliver_at = Some(s.created_at + chrono::Duration::hours(1));
        s.publish_path = PublishPath::Scheduled;
    }
    assert_eq!(decode(&encode(&scheduled).unwrap()).unwrap(), scheduled);
}

#[test]
fn unknown_fields_from_newer_writers_are_ignored() {
    // A newer binary may add optional fields; older readers must still decode the event.
    #[derive(serde::Serialize)]
    struct Newer<'a> {
        #[serde(flatten)]
        event: &'a Event,
        future_field: &'a str,
    }
    for event in samples() {
        let bytes = rmp_serde::to_vec_named(&Newer { event: &event, future_field: "x" }).unwrap();
        assert_eq!(decode(&bytes).unwrap(), event);
    }
}

#[test]
fn garbage_is_a_decode_error_not_a_panic() {
    assert!(decode(b"\xc1\x00garbage").is_err());
    assert!(decode(&[]).is_err());
}

#[test]
fn an_event_stored_after_its_acceptance_deadline_reads_as_voided() {
    let mut event = samples().into_iter().find(|e| e.type_name() == "signal.sent").unwrap();
    let at = event.occurred_at;
    event.accept_by = Some(at + chrono::Duration::seconds(8));
    let decoded = decode(&encode(&event).unwrap()).unwrap();
    assert_eq!(decoded, event, "accept_by survives the codec");

    let in_time = as_stored_at(decoded.clone(), at + chrono::Duration::seconds(8));
    assert_eq!(in_time.type_name(), "signal.sent");
    assert_eq!(in_time.accept_by, None, "readers see the event as its writer built it");
    let late = as_stored_at(decoded, at + chrono::Duration::milliseconds(8001));
    match late.body {
        EventBody::Voided(v) => {
            assert_eq!(v.original_type, "signal.sent");
            assert_eq!(v.signal_id, event.body.signal_id());
        }
        other => panic!("a late event must read as voided, got {other:?}"),
    }
    let mut unstamped = event.clone();
    unstamped.accept_by = None;
    assert_eq!(as_stored_at(unstamped.clone(), at + chrono::Duration::days(1)), unstamped, "no deadline, never void");
}

#[test]
fn a_delivery_is_stamped_to_count_only_before_its_signal_expires() {
    let at = Utc.with_ymd_and_hms(2026, 11, 21, 12, 0, 0).unwrap();
    let window = chrono::Duration::seconds(8);
    let mut delivery = samples().into_iter().find(|e| e.type_name() == "signal.delivered").unwrap();
    assert_eq!(deadline(&delivery, at, window), (at + window, false), "no expiry known: the window");
    if let EventBody::SignalDelivered(d) = &mut delivery.body {
        d.expires_at = Some(at + chrono::Duration::seconds(2));
    }
    let (accept_by, capped) = deadline(&delivery, at, window);
    assert!(capped && accept_by < at + chrono::Duration::seconds(2), "stored at its expiry, it must not count");
    let mut stamped = delivery.clone();
    stamped.accept_by = Some(accept_by);
    assert!(matches!(as_stored_at(stamped, at + chrono::Duration::seconds(2)).body, EventBody::Voided(_)));
    if let EventBody::SignalDelivered(d) = &mut delivery.body {
        d.expires_at = Some(at + chrono::Duration::hours(1));
    }
    assert_eq!(deadline(&delivery, at, window), (at + window, false), "a later expiry leaves the window");

    // A send that records its own push is a delivery too; a plain send is not.
    let mut sent = samples().into_iter().find(|e| e.type_name() == "signal.sent").unwrap();
    assert_eq!(store_by(&sent.body), None);
    let EventBody::SignalSent(s) = &mut sent.body else { unreachable!() };
    s.pushed_to = Some(Uuid::from_u128(1));
    let expires_at = s.expires_at;
    assert_eq!(store_by(&sent.body), Some(expires_at));
}

#[test]
fn a_fanout_id_round_trips_and_is_absent_from_a_plain_send() {
    let plain = samples().into_iter().find(|e| e.type_name() == "signal.sent").unwrap();
    let mut member = plain.clone();
    if let EventBody::SignalSent(s) = &mut member.body {
        s.fanout_id = Some(Uuid::from_u128(0x4444));
    }
    let bytes = encode(&member).unwrap();
    assert_eq!(decode(&bytes).unwrap(), member, "the fanout_id survives the codec");
    assert!(encode(&member).unwrap().len() > encode(&plain).unwrap().len(), "a member's send carries its fanout_id");
    let plain_bytes = encode(&plain).unwrap();
    let needle = b"fanout_id";
    assert!(!plain_bytes.windows(needle.len()).any(|w| w == needle), "a plain send writes no fanout_id field");
}
