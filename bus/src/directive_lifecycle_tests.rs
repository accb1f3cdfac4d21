//! given / when / then tests of the lifecycle signals each transition causes (CONTRACT §14's
//! second table) and of the pending requests recalled once a directive is claimed or ends.

use super::*;
use crate::catalog::Category;

/// The signals and recalls the accepted `command` causes on `given`.
fn when(given: Given, command: DirectiveCommand, seconds_later: i64) -> (Vec<LifecycleSignal>, Vec<String>) {
    let then = given.when_at(command, seconds_later);
    let events = then.result.clone().expect("accepted");
    let event = events.first().expect("one event");
    (lifecycle_signals(&then.after, event), requests_to_recall(&then.after, event))
}

fn row(signals: &[LifecycleSignal]) -> Vec<(&str, &str, &str, u64, Category, i16)> {
    signals
        .iter()
        .map(|s| (s.from.as_str(), s.to.as_str(), s.signal_type, s.ttl_seconds, s.category, s.priority))
        .collect()
}

#[test]
fn a_request_goes_to_each_candidate_as_a_task_until_the_deadline() {
    let (signals, recalls) =
        when(Given(DirectiveState::default()), create(create_to("@builders", &["alice", "bob", "carol"])), 0);
    assert_eq!(
        row(&signals),
        vec![
            ("alice", "bob", "DirectiveRequested", 3600, Category::Task, 1),
            ("alice", "carol", "DirectiveRequested", 3600, Category::Task, 1)
        ]
    );
    assert_eq!(signals[0].expires_at, t0() + Duration::hours(1));
    assert_eq!(signals[0].correlation_id, id().to_string());
    let req = Given(DirectiveState::default()).when(create(create_to("bob", &[]))).after.requested.unwrap();
    let key = signals[0].dedupe_key.clone();
    assert_eq!(key, format!("{}:DirectiveRequested:bob", id().simple()));
    let sent_as = crate::send::signal_id_for("default", "alice", Some(&key));
    assert_eq!(requested_signal_id("default", &req, "bob"), sent_as, "a recall names the signal the send made");
    assert_eq!(signals[0].payload["status"], "requested");
    assert_eq!(signals[0].delivery_class, crate::catalog::DeliveryClass::Async);
    assert!(recalls.is_empty());
}

#[test]
fn a_claim_tells_the_issuer_and_recalls_the_others_requests() {
    let (signals, recalls) = when(group(&[]), start("carol"), 10);
    assert_eq!(row(&signals), vec![("carol", "alice", "DirectiveStarted", 3600, Category::Info, 0)]);
    assert_eq!(signals[0].expires_at, t0() + Duration::seconds(3610));
    assert_eq!(signals[0].payload["claimed_by"], "carol");
    assert_eq!(recalls, vec!["bob"]);
    let (none, _) = when(group(&[start("carol")]), progress("carol", 5), 20);
    assert!(none.is_empty(), "progress sends no signal");
}

#[test]
fn outcomes_are_asked_of_the_issuer_for_a_day() {
    for (end, signal_type) in [(complete("bob"), "DirectiveCompleted"), (fail("bob"), "DirectiveFailed")] {
        let (signals, recalls) = when(group(&[]), end, 0);
        assert_eq!(row(&signals), vec![("bob", "alice", signal_type, 86_400, Category::Ask, 2)]);
        assert_eq!(recalls, vec!["carol"], "{signal_type} claims as it ends");
    }
    let (declined, recalls) = when(group(&[]), reject("bob"), 0);
    assert!(declined.is_empty() && recalls.is_empty(), "one decline of two neither signals nor recalls");
    let (rejected, recalls) = when(group(&[reject("bob")]), reject("carol"), 0);
    assert_eq!(row(&rejected), vec![("carol", "alice", "DirectiveRejected", 86_400, Category::Ask, 2)]);
    assert_eq!(rejected[0].payload["status"], "rejected");
    assert_eq!(recalls, vec!["bob", "carol"]);
}

#[test]
fn a_cancel_tells_the_claimer_or_everyone_handed_the_request() {
    let (signals, recalls) = when(group(&[start("bob")]), cancel("alice"), 0);
    assert_eq!(row(&signals), vec![("alice", "bob", "DirectiveCanceled", 3600, Category::Info, 0)]);
    assert_eq!(recalls, vec!["carol"]);
    let (signals, recalls) = when(group(&[]), cancel("alice"), 0);
    assert_eq!(signals.iter().map(|s| s.to.as_str()).collect::<Vec<_>>(), vec!["bob", "carol"]);
    assert_eq!(recalls, vec!["bob", "carol"]);
}

#[test]
fn an_expiry_comes_from_the_bus_to_the_issuer_and_the_workers() {
    let (signals, _) = when(group(&[]), DirectiveCommand::Expire, 3600);
    assert_eq!(
        row(&signals),
        vec![
            ("signalbus", "alice", "DirectiveExpired", 86_400, Category::Ask, 2),
            ("signalbus", "bob", "DirectiveExpired", 86_400, Category::Ask, 2),
            ("signalbus", "carol", "DirectiveExpired", 86_400, Category::Ask, 2)
        ]
    );
    let (signals, recalls) = when(group(&[start("carol")]), DirectiveCommand::Expire, 3600);
    assert_eq!(signals.iter().map(|s| s.to.as_str()).collect::<Vec<_>>(), vec!["alice", "carol"]);
    assert_eq!(recalls, vec!["bob"]);
}

#[test]
fn nobody_is_told_of_their_own_action() {
    let mut to_self = create_to("alice", &[]);
    to_self.to = "alice".into();
    let given = Given(DirectiveState::default()).when(create(to_self)).then_ok();
    let (signals, _) = when(given, start("alice"), 0);
    assert!(signals.is_empty());
}

#[test]
fn the_directive_object_has_every_field_of_the_contract() {
    let after = given(&[start("bob"), progress("bob", 40)]).0;
    let object = after.object();
    for field in [
        "directive_id",
        "type",
        "issuer",
        "assignee",
        "claimed_by",
        "params",
        "status",
        "created_at",
        "deadline",
        "started_at",
        "finished_at",
        "progress",
        "result",
        "failure",
        "reason",
        "declined_by",
        "correlation_id",
        "idempotency_key",
    ] {
        assert!(object.get(field).is_some(), "{field}");
    }
    assert_eq!(object["progress"]["percent"], 40);
    assert_eq!(object["created_at"], "2026-11-24T12:00:00.000Z");
    assert_eq!(DirectiveState::default().object(), serde_json::Value::Null);
}
