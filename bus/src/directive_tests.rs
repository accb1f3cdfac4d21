//! given / when / then tests of the directive rules: every row of CONTRACT §14's table, the
//! claim race, declines, the deadline, idempotency and validation.

use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::json;
use uuid::Uuid;

use super::*;
use crate::error::Refusal;

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 24, 12, 0, 0).unwrap()
}

fn id() -> Uuid {
    directive_id_for("default", "alice", "k1")
}

fn create_to(to: &str, members: &[&str]) -> CreateDirective {
    CreateDirective {
        directive_id: id(),
        issuer: "alice".into(),
        to: to.into(),
        members: members.iter().map(|m| m.to_string()).collect(),
        directive_type: "package.install".into(),
        params: json!({"name": "x", "db": {"password": "p"}}),
        idempotency_key: "k1".into(),
        deadline_seconds: 3600,
        correlation_id: None,
    }
}

fn create(c: CreateDirective) -> DirectiveCommand {
    DirectiveCommand::Create(Box::new(c))
}

fn start(by: &str) -> DirectiveCommand {
    DirectiveCommand::Start { by: by.into() }
}
fn progress(by: &str, percent: i64) -> DirectiveCommand {
    DirectiveCommand::Progress { by: by.into(), message: Some("half".into()), percent: Some(percent) }
}
fn complete(by: &str) -> DirectiveCommand {
    DirectiveCommand::Complete { by: by.into(), result: json!({"ok": true}) }
}
fn fail(by: &str) -> DirectiveCommand {
    DirectiveCommand::Fail { by: by.into(), code: "E1".into(), message: "broke".into() }
}
fn reject(by: &str) -> DirectiveCommand {
    DirectiveCommand::Reject { by: by.into(), reason: Some("busy".into()) }
}
fn cancel(by: &str) -> DirectiveCommand {
    DirectiveCommand::Cancel { by: by.into(), reason: None }
}

struct Given(DirectiveState);

/// A directive from alice to bob, after `commands` (each must be accepted).
fn given_to(to: &str, members: &[&str], commands: &[DirectiveCommand]) -> Given {
    let mut g = Given(DirectiveState::default()).when(create(create_to(to, members)));
    for c in commands {
        g = g.then_ok().when(c.clone());
    }
    g.then_ok()
}

fn given(commands: &[DirectiveCommand]) -> Given {
    given_to("bob", &[], commands)
}

fn group(commands: &[DirectiveCommand]) -> Given {
    given_to("@builders", &["alice", "bob", "carol"], commands)
}

impl Given {
    fn when(self, command: DirectiveCommand) -> Then {
        self.when_at(command, 0)
    }
    fn when_at(self, command: DirectiveCommand, seconds_later: i64) -> Then {
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
    after: DirectiveState,
}

impl Then {
    fn then_ok(self) -> Given {
        let events = self.result.unwrap_or_else(|e| panic!("refused: {e}"));
        assert!(events.len() <= 1, "a decision is at most one event");
        Given(self.after)
    }
    fn status(self, status: DirectiveStatus) -> DirectiveState {
        assert!(self.result.is_ok(), "{:?}", self.result);
        assert_eq!(self.after.status, status);
        self.after
    }
    fn err(self) -> DomainError {
        self.result.expect_err("expected a refusal")
    }
}

fn invalid(status: DirectiveStatus, action: &'static str) -> DomainError {
    DomainError::InvalidTransition { status, action }
}

#[test]
fn create_records_a_requested_directive_with_redacted_params_and_its_deadline() {
    let after = Given(DirectiveState::default()).when(create(create_to("bob", &[]))).status(DirectiveStatus::Requested);
    let req = after.requested.as_deref().unwrap();
    assert_eq!((req.issuer.as_str(), req.candidates.clone()), ("alice", vec!["bob".to_string()]));
    assert_eq!(req.deadline, t0() + Duration::hours(1));
    assert_eq!(after.redacted, vec!["params.db.password"]);
    assert_eq!(after.object()["params"]["db"]["password"], crate::redact::REDACTED);
    assert_eq!(after.object()["status"], "requested");
}

#[test]
fn a_group_directive_is_handed_to_its_members_at_creation_less_the_issuer() {
    let req = group(&[]).0.requested.unwrap();
    assert_eq!(req.candidates, vec!["bob", "carol"]);
    let lonely = Given(DirectiveState::default()).when(create(create_to("@solo", &["alice"]))).err();
    assert!(matches!(lonely, DomainError::Invalid(m) if m.contains("no member other than the issuer")));
}

#[test]
fn start_by_the_assignee_claims_it_and_the_issuer_is_forbidden() {
    let after = given(&[]).when(start("bob")).status(DirectiveStatus::Started);
    assert_eq!((after.claimed_by.as_deref(), after.started_at), (Some("bob"), Some(t0())));
    assert!(matches!(given(&[]).when(start("alice")).err(), DomainError::Forbidden(_)));
    assert_eq!(given(&[start("bob")]).when(start("bob")).err(), invalid(DirectiveStatus::Started, "start"));
}

#[test]
fn of_two_members_starting_the_first_wins_and_the_other_is_told_who_claimed_it() {
    let after = group(&[start("carol")]).0;
    assert_eq!(after.claimed_by.as_deref(), Some("carol"));
    let lost = Given(after).when(start("bob")).err();
    assert_eq!(lost, DomainError::AlreadyClaimed { claimed_by: "carol".into() });
    assert_eq!(lost.to_string(), "the directive is claimed by carol");
    for cmd in [progress("bob", 1), complete("bob"), fail("bob")] {
        assert_eq!(
            group(&[start("carol")]).when(cmd).err(),
            DomainError::AlreadyClaimed { claimed_by: "carol".into() }
        );
    }
}

#[test]
fn progress_by_the_claimer_replaces_the_previous_report_and_needs_a_start() {
    let after =
        given(&[start("bob"), progress("bob", 10)]).when_at(progress("bob", 40), 5).status(DirectiveStatus::Started);
    let p = after.progress.unwrap();
    assert_eq!((p.percent, p.message.as_deref(), p.at), (Some(40), Some("half"), t0() + Duration::seconds(5)));
    assert_eq!(given(&[]).when(progress("bob", 1)).err(), invalid(DirectiveStatus::Requested, "progress"));
    assert!(matches!(given(&[start("bob")]).when(progress("alice", 1)).err(), DomainError::Forbidden(_)));
    let empty = DirectiveCommand::Progress { by: "bob".into(), message: None, percent: None };
    given(&[start("bob")]).when(empty).status(DirectiveStatus::Started);
}

#[test]
fn complete_by_the_claimer_or_straight_from_requested_which_claims_it() {
    let after = given(&[start("bob")]).when(complete("bob")).status(DirectiveStatus::Completed);
    assert_eq!((after.result.as_deref(), after.finished_at), (Some(r#"{"ok":true}"#), Some(t0())));
    let at_once = group(&[]).when(complete("carol"));
    assert!(matches!(&at_once.result, Ok(e) if matches!(&e[0], EventBody::DirectiveCompleted(c) if c.claimed)));
    let after = at_once.status(DirectiveStatus::Completed);
    assert_eq!((after.claimed_by.as_deref(), after.started_at), (Some("carol"), None));
    assert!(
        matches!(given(&[start("bob")]).when(complete("alice")).err(), DomainError::Forbidden(m) if m.contains("cancel"))
    );
}

#[test]
fn fail_as_complete_records_the_failure() {
    let after = given(&[start("bob")]).when(fail("bob")).status(DirectiveStatus::Failed);
    assert_eq!(after.failure, Some(Failure { code: "E1".into(), message: "broke".into() }));
    assert_eq!(group(&[]).when(fail("bob")).status(DirectiveStatus::Failed).claimed_by.as_deref(), Some("bob"));
    assert!(matches!(given(&[]).when(fail("alice")).err(), DomainError::Forbidden(_)));
}

#[test]
fn reject_by_the_assignee_rejects_and_is_refused_once_started() {
    let after = given(&[]).when(reject("bob")).status(DirectiveStatus::Rejected);
    assert_eq!((after.declined_by.clone(), after.reason.as_deref()), (vec!["bob".to_string()], Some("busy")));
    assert_eq!(given(&[start("bob")]).when(reject("bob")).err(), invalid(DirectiveStatus::Started, "reject"));
    assert!(matches!(given(&[]).when(reject("alice")).err(), DomainError::Forbidden(_)));
}

#[test]
fn a_member_declines_for_itself_and_the_last_decline_rejects() {
    let after = group(&[]).when(reject("bob")).status(DirectiveStatus::Requested);
    assert_eq!(after.declined_by, vec!["bob"]);
    // Declining twice records nothing the second time.
    assert_eq!(Given(after.clone()).when(reject("bob")).result, Ok(vec![]));
    // Having declined, it may no longer take the directive; the others may.
    assert!(
        matches!(Given(after.clone()).when(start("bob")).err(), DomainError::Forbidden(m) if m.contains("declined"))
    );
    let last = Given(after).when(reject("carol"));
    assert!(matches!(&last.result, Ok(e) if matches!(&e[0], EventBody::DirectiveDeclined(d) if d.rejects)));
    assert_eq!(last.status(DirectiveStatus::Rejected).declined_by, vec!["bob", "carol"]);
    assert_eq!(group(&[]).when(reject("mallory")).err(), DomainError::UnknownDirective);
}

#[test]
fn cancel_by_the_issuer_from_either_open_state_only() {
    given(&[]).when(cancel("alice")).status(DirectiveStatus::Canceled);
    given(&[start("bob")]).when(cancel("alice")).status(DirectiveStatus::Canceled);
    assert!(matches!(given(&[]).when(cancel("bob")).err(), DomainError::Forbidden(m) if m.contains("only the issuer")));
    assert_eq!(given(&[complete("bob")]).when(cancel("alice")).err(), invalid(DirectiveStatus::Completed, "cancel"));
}

#[test]
fn expire_at_the_deadline_from_either_open_state_only() {
    assert_eq!(given(&[]).when_at(DirectiveCommand::Expire, 3599).err(), DomainError::Refused(Refusal::NotYetDue));
    given(&[]).when_at(DirectiveCommand::Expire, 3600).status(DirectiveStatus::Expired);
    let after = given(&[start("bob")]).when_at(DirectiveCommand::Expire, 4000).status(DirectiveStatus::Expired);
    assert_eq!(after.finished_at, Some(t0() + Duration::seconds(4000)));
    assert_eq!(
        given(&[cancel("alice")]).when_at(DirectiveCommand::Expire, 4000).err(),
        invalid(DirectiveStatus::Canceled, "expire")
    );
}

#[test]
fn statuses_read_as_written() {
    for st in ["requested", "started", "completed", "failed", "rejected", "canceled", "expired"] {
        assert_eq!(DirectiveStatus::parse(st).map(|s| s.as_str()), Some(st));
    }
    assert_eq!(DirectiveStatus::parse("absent"), None);
    assert_eq!(DirectiveStatus::parse("open"), None, "open is a filter over two statuses");
    assert!(DirectiveStatus::Started.is_open() && DirectiveStatus::Expired.is_terminal());
    assert!(!DirectiveStatus::Absent.is_open() && !DirectiveStatus::Absent.is_terminal());
}

#[test]
fn terminal_states_are_final() {
    let ends = [complete("bob"), fail("bob"), reject("bob"), cancel("alice")];
    for end in ends.iter() {
        let ended = given(std::slice::from_ref(end)).0;
        assert!(ended.status.is_terminal());
        for next in [start("bob"), progress("bob", 1), complete("bob"), fail("bob"), reject("bob"), cancel("alice")] {
            let action = next.action();
            assert_eq!(Given(ended.clone()).when(next).err(), invalid(ended.status, action), "{action} after {end:?}");
        }
    }
}

#[test]
fn strangers_and_unknown_ids_are_not_found_for_every_call() {
    for cmd in [start("eve"), progress("eve", 1), complete("eve"), fail("eve"), reject("eve"), cancel("eve")] {
        assert_eq!(given(&[]).when(cmd.clone()).err(), DomainError::UnknownDirective);
        assert_eq!(Given(DirectiveState::default()).when(cmd).err(), DomainError::UnknownDirective);
    }
    assert_eq!(Given(DirectiveState::default()).when(DirectiveCommand::Expire).err(), DomainError::UnknownDirective);
}

#[test]
fn a_repeated_key_answers_the_same_directive_or_conflicts() {
    let requested = given(&[start("bob")]).0;
    assert_eq!(Given(requested.clone()).when(create(create_to("bob", &[]))).result, Ok(vec![]));
    let mut other = create_to("bob", &[]);
    other.params = json!({"name": "y"});
    let conflict = Given(requested.clone()).when(create(other)).err();
    assert_eq!(conflict, DomainError::IdempotencyConflict { directive_id: id() });
    let req = requested.requested.as_deref().unwrap();
    assert!(idempotent_repeat(req, "carol", "package.install", &json!({"name": "x", "db": {"password": "p"}})).is_err());
    assert!(idempotent_repeat(req, "bob", "package.remove", &json!({"name": "x", "db": {"password": "p"}})).is_err());
    // A secret is never kept, so its value cannot tell two creates apart.
    assert!(idempotent_repeat(req, "bob", "package.install", &json!({"db": {"password": "q"}, "name": "x"})).is_ok());
    assert_eq!(directive_id_for("default", "alice", "k1"), id());
    assert_ne!(directive_id_for("default", "bob", "k1"), id());
}

fn create_message(edit: impl FnOnce(&mut CreateDirective)) -> String {
    let mut c = create_to("bob", &[]);
    edit(&mut c);
    Given(DirectiveState::default()).when(create(c)).err().to_string()
}

#[test]
fn creates_are_validated_with_specific_messages() {
    assert!(create_message(|c| c.directive_type = "9x".into()).contains("must match"));
    assert!(create_message(|c| c.to = "@Bad".into()).contains("group"));
    assert!(create_message(|c| c.params = json!([1])).contains("params must be a JSON object"));
    assert!(create_message(|c| c.params = json!({"a": "x".repeat(65_536)})).contains("the limit is 65536"));
    assert!(create_message(|c| c.deadline_seconds = 0).contains("deadline_seconds must be 1"));
    assert!(create_message(|c| c.deadline_seconds = MAX_DEADLINE_SECONDS + 1).contains("deadline_seconds"));
    assert!(create_message(|c| c.idempotency_key = String::new()).contains("idempotency_key is required"));
    assert!(create_message(|c| c.idempotency_key = "k".repeat(201)).contains("idempotency_key"));
    assert!(create_message(|c| c.correlation_id = Some("c".repeat(65))).contains("correlation_id"));
    assert!(create_message(|c| c.params = json!({"a": "\u{0}"})).contains("params.a contains a NUL"));
    let too_large = Given(DirectiveState::default())
        .when(create(CreateDirective { params: json!({"a": "x".repeat(65_536)}), ..create_to("bob", &[]) }));
    assert!(matches!(too_large.err(), DomainError::PayloadTooLarge(_)));
}

#[test]
fn action_bodies_are_validated() {
    let msg = |cmd| given(&[start("bob")]).when(cmd).err().to_string();
    assert!(msg(progress("bob", 101)).contains("percent must be 0 … 100"));
    assert!(msg(progress("bob", -1)).contains("percent"));
    let long = DirectiveCommand::Progress { by: "bob".into(), message: Some("m".repeat(1001)), percent: None };
    assert!(msg(long).contains("message is at most 1000"));
    assert!(msg(DirectiveCommand::Complete { by: "bob".into(), result: json!("x") })
        .contains("result must be a JSON object"));
    let secret =
        given(&[start("bob")]).when(DirectiveCommand::Complete { by: "bob".into(), result: json!({"token": "t"}) });
    assert_eq!(secret.status(DirectiveStatus::Completed).redacted, vec!["params.db.password", "result.token"]);
    let no_code = DirectiveCommand::Fail { by: "bob".into(), code: String::new(), message: "m".into() };
    assert!(msg(no_code).contains("failure.code is required"));
    assert!(msg(DirectiveCommand::Cancel { by: "alice".into(), reason: Some("\u{0}".into()) }).contains("NUL"));
}

#[path = "directive_lifecycle_tests.rs"]
mod lifecycle;
