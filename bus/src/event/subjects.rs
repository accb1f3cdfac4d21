//! Subjects: where each event is stored (`<prefix>.<tenant>.<entity kind>.<id>`), one subject
//! per entity, which is what makes a per-subject compare-and-set a per-entity one.
//!
//! Deliberately does not know how a log stores or reads a subject (`log/`).

use uuid::Uuid;

use crate::names::subject_token;

/// Which entity a subject belongs to. All events of one entity share one subject, which is what
/// makes a per-subject compare-and-set a per-entity compare-and-set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entity<'a> {
    Signal(Uuid),
    Agent(&'a str),
    Session(Uuid),
    Plugin(&'a str),
    /// The ack batches of one recipient identity (`signals.acked`).
    Acks(&'a str),
    Directive(Uuid),
    /// A group, by its name with the `@`.
    Group(&'a str),
    /// A tenant admin token, by its id.
    AdminToken(Uuid),
}

/// Builds subjects under a prefix (one prefix per stream, so several streams can share a server).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subjects {
    prefix: String,
}

impl Subjects {
    pub fn new(prefix: impl Into<String>) -> Self {
        Self { prefix: prefix.into() }
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The wildcard a stream binds to: `<prefix>.>`.
    pub fn all(&self) -> String {
        format!("{}.>", self.prefix)
    }

    /// `<prefix>.<tenant>.<entity kind>.<id>`
    pub fn of(&self, tenant: &str, entity: Entity<'_>) -> String {
        let p = &self.prefix;
        match entity {
            Entity::Signal(id) => format!("{p}.{tenant}.sig.{}", id.simple()),
            Entity::Agent(identity) => format!("{p}.{tenant}.agent.{}", subject_token(identity)),
            Entity::Session(id) => format!("{p}.{tenant}.sess.{}", id.simple()),
            Entity::Plugin(name) => format!("{p}.{tenant}.plugin.{}", subject_token(name)),
            Entity::Acks(identity) => format!("{p}.{tenant}.acks.{}", subject_token(identity)),
            Entity::Directive(id) => format!("{p}.{tenant}.dir.{}", id.simple()),
            // The `@` is dropped: every group name has one, and `~40` in each subject says nothing.
            Entity::Group(name) => format!("{p}.{tenant}.group.{}", subject_token(name.trim_start_matches('@'))),
            Entity::AdminToken(id) => format!("{p}.{tenant}.admintok.{}", id.simple()),
        }
    }
}
