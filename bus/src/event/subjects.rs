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
    /// A tenant's ack batches that gateways record for several sessions at once
    /// (`acks.recorded`): one subject, since nothing reads them back but the projector.
    AckBatches,
    /// A tenant's sends gathered in one send window (`sends.recorded`, `sends.rs`).
    Sends(u64),
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

    /// `<prefix>.<tenant>.<entity kind>.<id>`, written into one buffer sized for it up front
    /// (`format!` starts small and grows it several times; this runs for every append).
    pub fn of(&self, tenant: &str, entity: Entity<'_>) -> String {
        use std::fmt::Write;
        let mut s = String::with_capacity(self.prefix.len() + tenant.len() + 48);
        let _ = write!(s, "{}.{tenant}.", self.prefix);
        let _ = match entity {
            Entity::Signal(id) => write!(s, "sig.{}", id.simple()),
            Entity::Agent(identity) => write!(s, "agent.{}", subject_token(identity)),
            Entity::Session(id) => write!(s, "sess.{}", id.simple()),
            Entity::Plugin(name) => write!(s, "plugin.{}", subject_token(name)),
            Entity::Acks(identity) => write!(s, "acks.{}", subject_token(identity)),
            // One token fewer than `acks.<identity>`, so no identity's subject can be it.
            Entity::AckBatches => write!(s, "acks"),
            Entity::Sends(window) => write!(s, "sends.{window}"),
            Entity::Directive(id) => write!(s, "dir.{}", id.simple()),
            // The `@` is dropped: every group name has one, and `~40` in each subject says nothing.
            Entity::Group(name) => write!(s, "group.{}", subject_token(name.trim_start_matches('@'))),
            Entity::AdminToken(id) => write!(s, "admintok.{}", id.simple()),
        };
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entity_has_its_own_subject_under_the_prefix() {
        let s = Subjects::new("sb");
        let id = Uuid::parse_str("0190a4f5-6a8e-7c3b-9d2e-5f4a3b2c1d0e").unwrap();
        let cases = [
            (Entity::Signal(id), "sb.t1.sig.0190a4f56a8e7c3b9d2e5f4a3b2c1d0e".to_string()),
            (Entity::Agent("bob"), format!("sb.t1.agent.{}", subject_token("bob"))),
            (Entity::Session(id), "sb.t1.sess.0190a4f56a8e7c3b9d2e5f4a3b2c1d0e".to_string()),
            (Entity::Plugin("p.x"), format!("sb.t1.plugin.{}", subject_token("p.x"))),
            (Entity::Acks("bob"), format!("sb.t1.acks.{}", subject_token("bob"))),
            (Entity::AckBatches, "sb.t1.acks".to_string()),
            (Entity::Sends(176_400_000_000), "sb.t1.sends.176400000000".to_string()),
            (Entity::Directive(id), "sb.t1.dir.0190a4f56a8e7c3b9d2e5f4a3b2c1d0e".to_string()),
            (Entity::Group("@ops"), format!("sb.t1.group.{}", subject_token("ops"))),
            (Entity::AdminToken(id), "sb.t1.admintok.0190a4f56a8e7c3b9d2e5f4a3b2c1d0e".to_string()),
        ];
        for (entity, expected) in cases {
            assert_eq!(s.of("t1", entity), expected);
        }
        let long = "a".repeat(300);
        assert_eq!(s.of("t1", Entity::Agent(&long)), format!("sb.t1.agent.{}", subject_token(&long)));
    }
}
