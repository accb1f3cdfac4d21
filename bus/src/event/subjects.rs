//! Subjects: where each event is stored (`<prefix>.<tenant>.<entity kind>.<id>`), one subject
//! per entity, which is what makes a per-subject compare-and-set a per-entity one.
//!
//! Deliberately does not know how a log stores or reads a subject (`log/`).

use uuid::Uuid;

use super::{Event, EventBody};
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
        }
    }

    /// The subject `event` is stored under.
    pub fn for_event(&self, event: &Event) -> String {
        let t = &event.tenant;
        let entity = match &event.body {
            EventBody::AgentRegistered(e) => Entity::Agent(&e.identity),
            EventBody::TokenRotated(e) => Entity::Agent(&e.identity),
            EventBody::AgentRemoved(e) => Entity::Agent(&e.identity),
            EventBody::SessionOpened(e) => Entity::Session(e.session_id),
            EventBody::SessionHeartbeat(e) => Entity::Session(e.session_id),
            EventBody::SessionClosed(e) => Entity::Session(e.session_id),
            EventBody::PluginFactRecorded(e) => Entity::Plugin(&e.plugin),
            EventBody::SignalsAcked(e) => Entity::Acks(&e.by),
            EventBody::Voided(v) => Entity::Signal(v.signal_id.unwrap_or_default()),
            body => match (body.directive_id(), body.group()) {
                (Some(id), _) => Entity::Directive(id),
                (_, Some(group)) => Entity::Group(group),
                _ => Entity::Signal(body.signal_id().expect("every other event is about a signal")),
            },
        };
        self.of(t, entity)
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;

    use super::*;
    use crate::event::{DirectiveStarted, GroupMemberAdded, GroupUpdated};

    fn subject(body: EventBody) -> String {
        Subjects::new("sb").for_event(&Event::new("default", None, Utc::now(), body))
    }

    #[test]
    fn every_event_of_a_directive_or_a_group_shares_its_entitys_subject() {
        let id = Uuid::from_u128(0x3333);
        let started =
            EventBody::DirectiveStarted(DirectiveStarted { directive_id: id, by: "bob".into(), at: Utc::now() });
        assert_eq!(subject(started), format!("sb.default.dir.{}", id.simple()));
        let added = EventBody::GroupMemberAdded(GroupMemberAdded {
            group: "@build.ci".into(),
            identity: "bob".into(),
            added_by: "admin".into(),
        });
        let updated =
            EventBody::GroupUpdated(GroupUpdated { group: "@build.ci".into(), self_join: true, announce: false });
        assert_eq!(subject(added), "sb.default.group.build~2Eci");
        assert_eq!(subject(updated), "sb.default.group.build~2Eci");
    }
}
