//! given / when / then tests of the group rules, fan-out and roster signals.

use super::*;

fn upsert(self_join: bool, announce: bool) -> GroupCommand {
    GroupCommand::Upsert { group: "@builders".into(), self_join, announce }
}
fn add(identity: &str) -> GroupCommand {
    GroupCommand::AddMember { group: "@builders".into(), identity: identity.into(), by: "admin".into() }
}
fn remove(identity: &str) -> GroupCommand {
    GroupCommand::RemoveMember { group: "@builders".into(), identity: identity.into(), by: "admin".into() }
}
fn join(identity: &str) -> GroupCommand {
    GroupCommand::Join { group: "@builders".into(), identity: identity.into() }
}
fn leave(identity: &str) -> GroupCommand {
    GroupCommand::Leave { group: "@builders".into(), identity: identity.into() }
}

/// The state after `commands`, each accepted.
fn given(commands: &[GroupCommand]) -> GroupState {
    let mut state = GroupState::default();
    for c in commands {
        decide(&state, c).unwrap_or_else(|e| panic!("{c:?}: {e}")).iter().for_each(|e| state.apply(e));
    }
    state
}

fn when(state: &GroupState, command: GroupCommand) -> DomainResult<Vec<&'static str>> {
    decide(state, &command).map(|events| events.iter().map(|e| e.type_name()).collect())
}

#[test]
fn upsert_creates_then_updates_and_a_repeat_records_nothing() {
    assert_eq!(when(&given(&[]), upsert(true, true)), Ok(vec!["group.created"]));
    assert_eq!(when(&given(&[upsert(true, true)]), upsert(false, true)), Ok(vec!["group.updated"]));
    assert_eq!(when(&given(&[upsert(true, true)]), upsert(true, true)), Ok(vec![]));
    let updated = given(&[upsert(true, true), add("bob"), upsert(false, false)]);
    assert_eq!((updated.self_join, updated.announce, updated.members.len()), (false, false, 1));
}

#[test]
fn delete_drops_every_member_and_a_new_group_of_that_name_starts_empty() {
    let deleted = given(&[upsert(false, true), add("bob"), GroupCommand::Delete { group: "@builders".into() }]);
    assert_eq!(deleted, GroupState::default());
    assert_eq!(when(&deleted, add("bob")), Err(DomainError::UnknownGroup("@builders".into())));
    assert_eq!(
        when(&deleted, GroupCommand::Delete { group: "@builders".into() }).map(|_| ()),
        Err(DomainError::UnknownGroup("@builders".into()))
    );
    assert!(given(&[
        upsert(false, true),
        add("bob"),
        GroupCommand::Delete { group: "@builders".into() },
        upsert(false, true)
    ])
    .members
    .is_empty());
}

#[test]
fn admin_membership_changes_are_idempotent() {
    let state = given(&[upsert(false, true), add("bob")]);
    assert_eq!(when(&state, add("bob")), Ok(vec![]));
    assert_eq!(when(&state, remove("carol")), Ok(vec![]));
    assert_eq!(when(&state, remove("bob")), Ok(vec!["group.member_removed"]));
    assert_eq!(state.members.iter().collect::<Vec<_>>(), vec!["bob"]);
}

#[test]
fn agents_join_and_leave_self_join_groups_only() {
    let open = given(&[upsert(true, true)]);
    assert_eq!(when(&open, join("bob")), Ok(vec!["group.member_added"]));
    let joined = given(&[upsert(true, true), join("bob")]);
    assert_eq!(when(&joined, join("bob")), Ok(vec![]));
    assert_eq!(when(&joined, leave("bob")), Ok(vec!["group.member_removed"]));
    assert_eq!(when(&open, leave("bob")), Ok(vec![]));
    let closed = given(&[upsert(false, true), add("bob")]);
    for cmd in [join("carol"), leave("bob")] {
        assert!(matches!(when(&closed, cmd), Err(DomainError::Forbidden(m)) if m.contains("not a self-join group")));
    }
    assert!(
        when(&given(&[]), GroupCommand::Upsert { group: "builders".into(), self_join: true, announce: true }).is_err()
    );
}

#[test]
fn a_join_records_who_added_the_member() {
    let state = given(&[upsert(true, true)]);
    let events = decide(&state, &join("bob")).unwrap();
    assert!(matches!(&events[0], EventBody::GroupMemberAdded(e) if e.added_by == "bob"));
}

#[test]
fn fanout_goes_to_every_member_but_the_sender_sorted_and_bounded() {
    let members: Vec<String> = ["carol", "alice", "bob", "bob"].iter().map(|s| s.to_string()).collect();
    assert_eq!(fanout_targets(&members, "alice", 10), Ok(vec!["bob".to_string(), "carol".to_string()]));
    assert_eq!(fanout_targets(&members[1..2], "alice", 10), Ok(vec![]));
    let over = fanout_targets(&members, "alice", 1).unwrap_err().to_string();
    assert!(over.contains("2 members other than the sender") && over.contains("max_fanout"), "{over}");
}

#[test]
fn with_announce_a_membership_change_is_told_to_the_other_members() {
    let before = given(&[upsert(true, true), add("bob"), add("carol")]);
    let added = &decide(&before, &add("dave")).unwrap()[0];
    let signals = roster_signals(&before, added);
    assert_eq!(
        signals.iter().map(|s| (s.to.as_str(), s.signal_type)).collect::<Vec<_>>(),
        vec![("bob", "PeerJoined"), ("carol", "PeerJoined")]
    );
    assert_eq!(signals[0].payload, json!({"group": "@builders", "identity": "dave"}));
    let left = &decide(&before, &leave("bob")).unwrap()[0];
    let signals = roster_signals(&before, left);
    assert_eq!(signals.iter().map(|s| (s.to.as_str(), s.signal_type)).collect::<Vec<_>>(), vec![("carol", "PeerLeft")]);
    let quiet = given(&[upsert(true, false), add("bob")]);
    assert!(roster_signals(&quiet, &decide(&quiet, &add("carol")).unwrap()[0]).is_empty());
}
