//! The facts of a group's life (CONTRACT §15), all stored on the group's own subject so one
//! compare-and-set per group orders every change to it.
//!
//! Deliberately only the facts: who may change a group, and what a change causes, is
//! `group.rs`'s to decide. Timestamps (`created_at`, `added_at`) are the envelope's.

use serde::{Deserialize, Serialize};

use super::EventBody;

/// A group was created (or created again after a delete, with no members).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupCreated {
    /// The name with its `@`.
    pub group: String,
    pub self_join: bool,
    pub announce: bool,
}

/// An existing group's settings changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupUpdated {
    pub group: String,
    pub self_join: bool,
    pub announce: bool,
}

/// A group was deleted with all its memberships.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupDeleted {
    pub group: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupMemberAdded {
    pub group: String,
    pub identity: String,
    /// The admin, or the identity itself when it joined.
    pub added_by: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupMemberRemoved {
    pub group: String,
    pub identity: String,
    /// The admin, the identity itself when it left, or `signalbus` when the agent was removed.
    pub by: String,
}

impl EventBody {
    /// The group this fact is about, if any (with its `@`).
    pub fn group(&self) -> Option<&str> {
        match self {
            EventBody::GroupCreated(e) => Some(&e.group),
            EventBody::GroupUpdated(e) => Some(&e.group),
            EventBody::GroupDeleted(e) => Some(&e.group),
            EventBody::GroupMemberAdded(e) => Some(&e.group),
            EventBody::GroupMemberRemoved(e) => Some(&e.group),
            _ => None,
        }
    }
}
