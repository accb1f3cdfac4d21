//! given / when / then tests of planning a group send: who it goes to, the ids a repeat must
//! find again, and which refusals are the whole send's and which one member's.

use chrono::{TimeZone, Utc};
use serde_json::json;

use super::*;
use crate::event::RecipientState;
use crate::group::roster_signals;
use crate::group::GroupState;
use crate::send::{signal_id_for, SendLimits, DEFAULT_MAX_PAYLOAD_BYTES};

fn req(key: Option<&str>) -> SendRequest {
    SendRequest {
        to: "@reviewers".into(),
        signal_type: "StatusUpdate".into(),
        payload: json!({"x": 1}),
        delivery_class: None,
        ttl_seconds: None,
        correlation_id: Some("c-1".into()),
        dedupe_key: key.map(str::to_string),
        deliver_after_seconds: None,
        deliver_at: None,
    }
}

fn view(registered: bool) -> RecipientView {
    RecipientView { registered, state: RecipientState::NotAvailableOffline, has_live_ws: false, freshest_session: None }
}

fn plan(r: SendRequest, members: &[&str], max_fanout: usize) -> DomainResult<FanoutPlan> {
    let types = TypeTable::default();
    let now = Utc.with_ymd_and_hms(2026, 11, 24, 0, 0, 0).unwrap();
    let limits = FanoutLimits { types: &types, send: SendLimits::default(), max_fanout, now };
    let members: Vec<String> = members.iter().map(|m| m.to_string()).collect();
    plan_fanout(limits, "default", "alice", r, &members, |m| view(m != "ghost"))
}

#[test]
fn given_a_group_with_the_sender_when_planned_then_every_other_member_gets_its_own_signal() {
    let p = plan(req(Some("k")), &["carol", "alice", "bob"], 10).unwrap();
    let to: Vec<&str> = p.members.iter().map(|m| m.to.as_str()).collect();
    assert_eq!(to, ["bob", "carol"], "sorted, the sender left out");
    assert_eq!(p.to, "@reviewers");
    assert_ne!(p.members[0].signal_id, p.members[1].signal_id);
    for m in &p.members {
        match &m.decision {
            Ok(SendDecision::Accepted(s)) => {
                assert_eq!((s.signal_id, s.fanout_id, s.to.as_str()), (m.signal_id, Some(p.fanout_id), m.to.as_str()));
                assert_eq!(s.dedupe_key.as_deref(), Some("k"), "the sender's key, as a repeat answers it");
                assert_eq!(s.correlation_id.as_deref(), Some("c-1"));
            }
            other => panic!("expected accepted, got {other:?}"),
        }
    }
}

#[test]
fn given_a_dedupe_key_when_planned_again_then_the_same_ids_come_back() {
    let first = plan(req(Some("k")), &["bob", "carol"], 10).unwrap();
    let again = plan(req(Some("k")), &["bob", "carol", "dave"], 10).unwrap();
    assert_eq!(first.fanout_id, again.fanout_id);
    assert_eq!(first.members[..], again.members[..2], "bob's and carol's sends are the same");
    assert_ne!(first.members[0].signal_id, signal_id_for("default", "alice", Some("k")), "not a single send's id");
    let other = plan(req(Some("k2")), &["bob"], 10).unwrap();
    assert_ne!(other.fanout_id, first.fanout_id);
    assert_ne!(other.members[0].signal_id, first.members[0].signal_id);
    let no_key = (plan(req(None), &["bob"], 10).unwrap(), plan(req(None), &["bob"], 10).unwrap());
    assert_ne!(no_key.0.fanout_id, no_key.1.fanout_id, "without a key every send is new");
}

#[test]
fn given_a_member_that_is_no_agent_when_planned_then_only_its_entry_is_refused() {
    let p = plan(req(None), &["bob", "ghost"], 10).unwrap();
    assert!(p.members[0].decision.is_ok());
    assert_eq!(p.members[1].decision, Err(DomainError::UnknownRecipient));
}

#[test]
fn given_a_bad_request_or_too_many_members_when_planned_then_the_whole_send_is_refused() {
    let mut bad = req(None);
    bad.payload = json!({"x": "a".repeat(DEFAULT_MAX_PAYLOAD_BYTES)});
    assert!(matches!(plan(bad, &["bob", "carol"], 10), Err(DomainError::PayloadTooLarge(_))));
    let mut unnamed = req(None);
    unnamed.to = "reviewers".into();
    assert!(plan(unnamed, &["bob"], 10).is_err(), "a group name starts with @");
    assert!(matches!(plan(req(None), &["bob", "carol", "alice"], 1), Err(DomainError::Invalid(_))));
    assert!(plan(req(None), &["alice"], 1).unwrap().members.is_empty(), "only the sender: results []");
    let mut bad_alone = req(None);
    bad_alone.ttl_seconds = Some(0);
    assert!(
        matches!(plan(bad_alone, &["alice"], 1), Err(DomainError::Invalid(_))),
        "refused even with no one to send to"
    );
}

#[test]
fn given_a_join_when_its_roster_is_planned_then_it_comes_from_signalbus_keyed_by_the_event() {
    let before = GroupState {
        exists: true,
        self_join: true,
        announce: true,
        members: ["bob".to_string(), "carol".to_string()].into(),
    };
    let joined = crate::event::EventBody::GroupMemberAdded(crate::event::GroupMemberAdded {
        group: "@reviewers".into(),
        identity: "dave".into(),
        added_by: "dave".into(),
    });
    let types = TypeTable::default();
    let now = Utc.with_ymd_and_hms(2026, 11, 24, 0, 0, 0).unwrap();
    let limits = FanoutLimits { types: &types, send: SendLimits::default(), max_fanout: 10, now };
    let signals = roster_signals(&before, &joined);
    let p = plan_roster(limits, "default", "@reviewers", 42, &signals, |_| view(true)).unwrap().unwrap();
    let again = plan_roster(limits, "default", "@reviewers", 42, &signals, |_| view(true)).unwrap().unwrap();
    assert_eq!(p, again, "the same event plans the same sends");
    let to: Vec<&str> = p.members.iter().map(|m| m.to.as_str()).collect();
    assert_eq!(to, ["bob", "carol"]);
    let Ok(SendDecision::Accepted(s)) = &p.members[0].decision else { panic!("{p:?}") };
    assert_eq!((s.from.as_str(), s.signal_type.as_str()), (ROSTER_SENDER, "PeerJoined"));
    assert_eq!(s.payload, r#"{"group":"@reviewers","identity":"dave"}"#);
    assert_eq!(plan_roster(limits, "default", "@reviewers", 43, &[], |_| view(true)).unwrap(), None);
}
