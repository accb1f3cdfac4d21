//! The rules of one group (CONTRACT §15), as pure functions: `apply` folds the events of one
//! group's subject into a `GroupState`, `decide` turns a command into the event it causes (none
//! for an idempotent repeat) or a refusal. Also pure: a send's fan-out targets and the roster
//! signals (`PeerJoined`/`PeerLeft`) a membership change causes.
//!
//! Deliberately no I/O: who is the admin is the gateway's check (the `Admin*` commands are only
//! built for it), whether an identity is registered is the caller's read, and the signals are
//! sent by the caller after the append.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use crate::error::{DomainError, DomainResult};
use crate::event::{EventBody, GroupCreated, GroupDeleted, GroupMemberAdded, GroupMemberRemoved, GroupUpdated};
use crate::fold::Fold;
use crate::names::validate_group;

/// Default `[limits] max_fanout`.
pub const DEFAULT_MAX_FANOUT: usize = 1_000;

/// Everything the rules need to know about one group.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GroupState {
    /// Created and not deleted since.
    pub exists: bool,
    pub self_join: bool,
    pub announce: bool,
    pub members: BTreeSet<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum GroupCommand {
    /// Create, or change the settings of, `group` (admin).
    Upsert { group: String, self_join: bool, announce: bool },
    /// Delete `group` with its memberships (admin).
    Delete { group: String },
    /// Add `identity` (admin; `by` is recorded as `added_by`).
    AddMember { group: String, identity: String, by: String },
    /// Remove `identity` (admin, or `signalbus` when the agent is removed).
    RemoveMember { group: String, identity: String, by: String },
    /// `identity` joins a self-join group itself.
    Join { group: String, identity: String },
    /// `identity` leaves a self-join group itself.
    Leave { group: String, identity: String },
}

impl GroupCommand {
    /// The group the command is about (with its `@`).
    pub fn group(&self) -> &str {
        match self {
            GroupCommand::Upsert { group, .. }
            | GroupCommand::Delete { group }
            | GroupCommand::AddMember { group, .. }
            | GroupCommand::RemoveMember { group, .. }
            | GroupCommand::Join { group, .. }
            | GroupCommand::Leave { group, .. } => group,
        }
    }
}

impl Fold for GroupState {
    /// Folds one event in; events that cannot follow the current state are ignored.
    fn apply(&mut self, event: &EventBody) {
        match event {
            EventBody::GroupCreated(e) if !self.exists => {
                *self =
                    GroupState { exists: true, self_join: e.self_join, announce: e.announce, members: BTreeSet::new() };
            }
            EventBody::GroupUpdated(e) if self.exists => {
                (self.self_join, self.announce) = (e.self_join, e.announce);
            }
            EventBody::GroupDeleted(_) if self.exists => *self = GroupState::default(),
            EventBody::GroupMemberAdded(e) if self.exists => {
                self.members.insert(e.identity.clone());
            }
            EventBody::GroupMemberRemoved(e) if self.exists => {
                self.members.remove(&e.identity);
            }
            _ => {}
        }
    }
}

/// Decides what `command` causes on a group in `state`: nothing when it is already so.
pub fn decide(state: &GroupState, command: &GroupCommand) -> DomainResult<Vec<EventBody>> {
    let group = &command.group().to_string();
    validate_group(group)?;
    if let GroupCommand::Upsert { self_join, announce, .. } = command {
        let (group, self_join, announce) = (group.clone(), *self_join, *announce);
        return Ok(match state.exists {
            false => vec![EventBody::GroupCreated(GroupCreated { group, self_join, announce })],
            true if (state.self_join, state.announce) == (self_join, announce) => vec![],
            true => vec![EventBody::GroupUpdated(GroupUpdated { group, self_join, announce })],
        });
    }
    if !state.exists {
        return Err(DomainError::UnknownGroup(group.clone()));
    }
    let self_join_only = || match state.self_join {
        true => Ok(()),
        false => {
            Err(DomainError::Forbidden(format!("{group} is not a self-join group: only the admin sets its members")))
        }
    };
    let added = |identity: &String, added_by: &String| {
        let event = GroupMemberAdded { group: group.clone(), identity: identity.clone(), added_by: added_by.clone() };
        match state.members.contains(identity) {
            true => vec![],
            false => vec![EventBody::GroupMemberAdded(event)],
        }
    };
    let removed = |identity: &String, by: &String| {
        let event = GroupMemberRemoved { group: group.clone(), identity: identity.clone(), by: by.clone() };
        match state.members.contains(identity) {
            true => vec![EventBody::GroupMemberRemoved(event)],
            false => vec![],
        }
    };
    Ok(match command {
        GroupCommand::Upsert { .. } => unreachable!("decided above"),
        GroupCommand::Delete { .. } => vec![EventBody::GroupDeleted(GroupDeleted { group: group.clone() })],
        GroupCommand::AddMember { identity, by, .. } => added(identity, by),
        GroupCommand::RemoveMember { identity, by, .. } => removed(identity, by),
        GroupCommand::Join { identity, .. } => {
            self_join_only()?;
            added(identity, identity)
        }
        GroupCommand::Leave { identity, .. } => {
            self_join_only()?;
            removed(identity, identity)
        }
    })
}

/// Who a send from `sender` to a group with `members` goes to: every member but the sender,
/// sorted, each once (none: the answer is `results: []`). More than `max_fanout` is refused.
pub fn fanout_targets(members: &[String], sender: &str, max_fanout: usize) -> DomainResult<Vec<String>> {
    let targets: BTreeSet<&String> = members.iter().filter(|m| *m != sender).collect();
    if targets.len() > max_fanout {
        return Err(DomainError::invalid(format!(
            "the group has {} members other than the sender; a send fans out to at most {max_fanout} ([limits] max_fanout)",
            targets.len()
        )));
    }
    Ok(targets.into_iter().cloned().collect())
}

/// One roster signal: async, `from: signalbus`, the type's defaults (`PeerJoined`/`PeerLeft`).
#[derive(Debug, Clone, PartialEq)]
pub struct RosterSignal {
    pub to: String,
    pub signal_type: &'static str,
    /// `{"group":"@name","identity":…}`
    pub payload: Value,
}

/// The roster signals `event` causes on a group that was in `before`: with `announce` on, a
/// member joining or leaving is told to the group's other members (sorted). A group's deletion
/// announces nothing.
pub fn roster_signals(before: &GroupState, event: &EventBody) -> Vec<RosterSignal> {
    let (group, identity, signal_type) = match event {
        EventBody::GroupMemberAdded(e) if !before.members.contains(&e.identity) => {
            (&e.group, &e.identity, "PeerJoined")
        }
        EventBody::GroupMemberRemoved(e) if before.members.contains(&e.identity) => (&e.group, &e.identity, "PeerLeft"),
        _ => return vec![],
    };
    if !before.exists || !before.announce {
        return vec![];
    }
    let payload = json!({"group": group, "identity": identity});
    before
        .members
        .iter()
        .filter(|m| *m != identity)
        .map(|to| RosterSignal { to: to.clone(), signal_type, payload: payload.clone() })
        .collect()
}

#[cfg(test)]
#[path = "group_tests.rs"]
mod tests;
