//! The event catalog: every fact signalbus records, in the past tense, wrapped in one envelope
//! (seeds/000 "Signal envelope"); `subjects` names the subject each event is stored under.
//!
//! Deliberately does not decide whether an event may happen (`signal.rs`, `send.rs`,
//! `directive.rs`, `group.rs` do) nor how it is stored (`log/`). Adding an optional field is
//! compatible (named-field MessagePack, `#[serde(default)]`); renaming or removing one is a new
//! `schema_version`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

mod directive;
mod group;
mod sends;
mod signal;
mod subjects;
mod token;
pub mod ts;

pub use directive::{
    DirectiveCanceled, DirectiveCompleted, DirectiveDeclined, DirectiveExpired, DirectiveFailed, DirectiveProgressed,
    DirectiveRequested, DirectiveStarted, DirectiveStatus,
};
pub use group::{GroupCreated, GroupDeleted, GroupMemberAdded, GroupMemberRemoved, GroupUpdated};
pub use sends::{send_window, SendsRecorded, SEND_WINDOW_MS};
pub use signal::{
    AcksRecorded, ExpiryReason, SignalAcked, SignalBounced, SignalDelivered, SignalExpired, SignalRecalled,
    SignalReleased, SignalSent, SignalsAcked,
};
pub use subjects::{Entity, Subjects};
pub use token::{AdminTokenIssued, AdminTokenRevoked, TokenIssued, TokenRevoked};

/// The schema version this binary writes.
pub const SCHEMA_VERSION: u16 = 1;

/// Send-time resolution of the recipient (CONTRACT §2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecipientState {
    Available,
    NotAvailableStale,
    NotAvailableOffline,
}

/// What the bus did at send time (SPEC-071 §4.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PublishPath {
    PushedToWs,
    BufferedForPiggyback,
    QueuedOffline,
    /// Scheduled for later (CONTRACT §16): neither pushed nor resolved to a session at send.
    Scheduled,
}

/// How a signal reached its recipient (CONTRACT §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveredVia {
    WsPush,
    StartupDrain,
    Piggyback,
    Inbox,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionKind {
    Daemon,
    Shim,
    Interactive,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Surface {
    Ws,
    Piggyback,
}

macro_rules! wire_names {
    ($($ty:ident { $($variant:ident => $name:literal),* $(,)? })*) => {$(
        impl $ty {
            /// Every variant, in declaration order.
            pub const ALL: &'static [$ty] = &[$($ty::$variant),*];
            pub fn as_str(self) -> &'static str {
                match self { $($ty::$variant => $name),* }
            }
            pub fn parse(s: &str) -> Option<Self> {
                match s { $($name => Some($ty::$variant),)* _ => None }
            }
        }
        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    )*};
}

wire_names! {
    RecipientState { Available => "available", NotAvailableStale => "not_available_stale", NotAvailableOffline => "not_available_offline" }
    PublishPath { PushedToWs => "pushed_to_ws", BufferedForPiggyback => "buffered_for_piggyback", QueuedOffline => "queued_offline", Scheduled => "scheduled" }
    DeliveredVia { WsPush => "ws_push", StartupDrain => "startup_drain", Piggyback => "piggyback", Inbox => "inbox" }
    SessionKind { Daemon => "daemon", Shim => "shim", Interactive => "interactive" }
    Surface { Ws => "ws", Piggyback => "piggyback" }
}

/// Who caused an event: an agent identity, the admin, or the bus itself (e.g. `signalbus/sweeper`).
pub type Actor = String;

/// One recorded fact with its envelope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Time-ordered (v7): the embedded log's unique index on it then grows at its right edge
    /// instead of dirtying a random page per append.
    pub event_id: Uuid,
    pub schema_version: u16,
    pub tenant: String,
    #[serde(with = "ts")]
    pub occurred_at: DateTime<Utc>,
    #[serde(default)]
    pub actor: Option<Actor>,
    #[serde(default)]
    pub correlation_id: Option<String>,
    #[serde(default)]
    pub causation_id: Option<Uuid>,
    /// The writer's promise: if the stream stores this event later than this instant (by the
    /// stream's clock), the event is void — every reader sees `EventBody::Voided` instead, so a
    /// writer that could not learn an append's outcome in time may answer "nothing was
    /// accepted" truthfully. Set by the JetStream log when it first publishes; `None` (the
    /// embedded log, whose appends always have a known outcome) never voids.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "ts::option")]
    pub accept_by: Option<DateTime<Utc>>,
    #[serde(flatten)]
    pub body: EventBody,
}

/// The fact itself. Serialized adjacently tagged: `type` names the fact, `data` holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "data")]
pub enum EventBody {
    #[serde(rename = "agent.registered")]
    AgentRegistered(AgentRegistered),
    #[serde(rename = "agent.token_rotated")]
    TokenRotated(TokenRotated),
    #[serde(rename = "agent.removed")]
    AgentRemoved(AgentRemoved),
    #[serde(rename = "agent.token_issued")]
    TokenIssued(TokenIssued),
    #[serde(rename = "agent.token_revoked")]
    TokenRevoked(TokenRevoked),
    #[serde(rename = "admin.token_issued")]
    AdminTokenIssued(AdminTokenIssued),
    #[serde(rename = "admin.token_revoked")]
    AdminTokenRevoked(AdminTokenRevoked),
    #[serde(rename = "session.opened")]
    SessionOpened(SessionOpened),
    #[serde(rename = "session.heartbeat")]
    SessionHeartbeat(SessionHeartbeat),
    #[serde(rename = "session.closed")]
    SessionClosed(SessionClosed),
    #[serde(rename = "signal.sent")]
    SignalSent(Box<SignalSent>),
    #[serde(rename = "signal.bounced")]
    SignalBounced(SignalBounced),
    #[serde(rename = "signal.delivered")]
    SignalDelivered(SignalDelivered),
    /// Written by releases before `signals.acked`; still read.
    #[serde(rename = "signal.acked")]
    SignalAcked(SignalAcked),
    #[serde(rename = "signals.acked")]
    SignalsAcked(SignalsAcked),
    #[serde(rename = "acks.recorded")]
    AcksRecorded(AcksRecorded),
    #[serde(rename = "sends.recorded")]
    SendsRecorded(SendsRecorded),
    #[serde(rename = "signal.expired")]
    SignalExpired(SignalExpired),
    #[serde(rename = "signal.recalled")]
    SignalRecalled(SignalRecalled),
    #[serde(rename = "signal.released")]
    SignalReleased(SignalReleased),
    #[serde(rename = "plugin.fact_recorded")]
    PluginFactRecorded(PluginFactRecorded),
    #[serde(rename = "directive.requested")]
    DirectiveRequested(Box<DirectiveRequested>),
    #[serde(rename = "directive.started")]
    DirectiveStarted(DirectiveStarted),
    #[serde(rename = "directive.progressed")]
    DirectiveProgressed(DirectiveProgressed),
    #[serde(rename = "directive.completed")]
    DirectiveCompleted(DirectiveCompleted),
    #[serde(rename = "directive.failed")]
    DirectiveFailed(DirectiveFailed),
    #[serde(rename = "directive.declined")]
    DirectiveDeclined(DirectiveDeclined),
    #[serde(rename = "directive.canceled")]
    DirectiveCanceled(DirectiveCanceled),
    #[serde(rename = "directive.expired")]
    DirectiveExpired(DirectiveExpired),
    #[serde(rename = "group.created")]
    GroupCreated(GroupCreated),
    #[serde(rename = "group.updated")]
    GroupUpdated(GroupUpdated),
    #[serde(rename = "group.deleted")]
    GroupDeleted(GroupDeleted),
    #[serde(rename = "group.member_added")]
    GroupMemberAdded(GroupMemberAdded),
    #[serde(rename = "group.member_removed")]
    GroupMemberRemoved(GroupMemberRemoved),
    /// Never written: what a reader sees in place of an event the stream stored after its
    /// `accept_by` (see `Event::accept_by`). Every fold ignores it; it keeps the sequence
    /// gapless.
    #[serde(rename = "event.voided")]
    Voided(Voided),
}

/// An event stored too late to count: its writer had already answered that nothing was accepted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Voided {
    /// The `type` the stored event had.
    pub original_type: String,
    /// The signal it was about, if any (for logs and audits).
    #[serde(default)]
    pub signal_id: Option<Uuid>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentRegistered {
    pub identity: String,
    pub kind: SessionKind,
    /// SHA-256 of the token, hex. The token itself is never stored.
    pub token_hash: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenRotated {
    pub identity: String,
    pub token_hash: String,
}

/// An agent was removed: its token stops working and sends to it are `unknown_recipient`.
/// Its history stays; the identity may be registered again later (a new `agent.registered`
/// on the same subject, with a new token).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentRemoved {
    pub identity: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionOpened {
    pub session_id: Uuid,
    pub identity: String,
    pub kind: SessionKind,
    pub surface: Surface,
    /// The gateway process that holds the session.
    pub node: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionHeartbeat {
    pub session_id: Uuid,
    pub identity: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionClosed {
    pub session_id: Uuid,
    pub identity: String,
    /// Bounded vocabulary, also the `reason` label of `signalbus_disconnects_total`.
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PluginFactRecorded {
    pub plugin: String,
    /// Bus-assigned, monotonic per (tenant, plugin), from 1.
    pub seq: u64,
    pub fact_type: String,
    /// The state object as JSON text.
    pub state: String,
    pub recorded_by: String,
}

impl EventBody {
    /// The `type` name of this fact, as written on the stream.
    pub fn type_name(&self) -> &'static str {
        match self {
            EventBody::AgentRegistered(_) => "agent.registered",
            EventBody::TokenRotated(_) => "agent.token_rotated",
            EventBody::AgentRemoved(_) => "agent.removed",
            EventBody::TokenIssued(_) => "agent.token_issued",
            EventBody::TokenRevoked(_) => "agent.token_revoked",
            EventBody::AdminTokenIssued(_) => "admin.token_issued",
            EventBody::AdminTokenRevoked(_) => "admin.token_revoked",
            EventBody::SessionOpened(_) => "session.opened",
            EventBody::SessionHeartbeat(_) => "session.heartbeat",
            EventBody::SessionClosed(_) => "session.closed",
            EventBody::SignalSent(_) => "signal.sent",
            EventBody::SignalBounced(_) => "signal.bounced",
            EventBody::SignalDelivered(_) => "signal.delivered",
            EventBody::SignalAcked(_) => "signal.acked",
            EventBody::SignalsAcked(_) => "signals.acked",
            EventBody::AcksRecorded(_) => "acks.recorded",
            EventBody::SendsRecorded(_) => "sends.recorded",
            EventBody::SignalExpired(_) => "signal.expired",
            EventBody::SignalRecalled(_) => "signal.recalled",
            EventBody::SignalReleased(_) => "signal.released",
            EventBody::PluginFactRecorded(_) => "plugin.fact_recorded",
            EventBody::DirectiveRequested(_) => "directive.requested",
            EventBody::DirectiveStarted(_) => "directive.started",
            EventBody::DirectiveProgressed(_) => "directive.progressed",
            EventBody::DirectiveCompleted(_) => "directive.completed",
            EventBody::DirectiveFailed(_) => "directive.failed",
            EventBody::DirectiveDeclined(_) => "directive.declined",
            EventBody::DirectiveCanceled(_) => "directive.canceled",
            EventBody::DirectiveExpired(_) => "directive.expired",
            EventBody::GroupCreated(_) => "group.created",
            EventBody::GroupUpdated(_) => "group.updated",
            EventBody::GroupDeleted(_) => "group.deleted",
            EventBody::GroupMemberAdded(_) => "group.member_added",
            EventBody::GroupMemberRemoved(_) => "group.member_removed",
            EventBody::Voided(_) => "event.voided",
        }
    }

    /// The signal this fact is about, if any.
    pub fn signal_id(&self) -> Option<Uuid> {
        match self {
            EventBody::SignalSent(e) => Some(e.signal_id),
            EventBody::SignalBounced(e) => Some(e.signal_id),
            EventBody::SignalDelivered(e) => Some(e.signal_id),
            EventBody::SignalAcked(e) => Some(e.signal_id),
            EventBody::SignalExpired(e) => Some(e.signal_id),
            EventBody::SignalRecalled(e) => Some(e.signal_id),
            EventBody::SignalReleased(e) => Some(e.signal_id),
            _ => None,
        }
    }
}

impl Event {
    /// A new event with a fresh id, the current schema version, and no causation.
    pub fn new(tenant: impl Into<String>, actor: Option<Actor>, occurred_at: DateTime<Utc>, body: EventBody) -> Self {
        Event {
            event_id: Uuid::now_v7(),
            schema_version: SCHEMA_VERSION,
            tenant: tenant.into(),
            occurred_at,
            actor,
            correlation_id: None,
            causation_id: None,
            accept_by: None,
            body,
        }
    }

    pub fn type_name(&self) -> &'static str {
        self.body.type_name()
    }
}

/// The event → entity mapping lives with the events, so `subjects.rs` needs none of them.
impl Subjects {
    /// The subject `event` is stored under.
    pub fn for_event(&self, event: &Event) -> String {
        let t = &event.tenant;
        let entity = match &event.body {
            EventBody::AgentRegistered(e) => Entity::Agent(&e.identity),
            EventBody::TokenRotated(e) => Entity::Agent(&e.identity),
            EventBody::AgentRemoved(e) => Entity::Agent(&e.identity),
            EventBody::TokenIssued(e) => Entity::Agent(&e.identity),
            EventBody::TokenRevoked(e) => Entity::Agent(&e.identity),
            EventBody::AdminTokenIssued(e) => Entity::AdminToken(e.token_id),
            EventBody::AdminTokenRevoked(e) => Entity::AdminToken(e.token_id),
            EventBody::SessionOpened(e) => Entity::Session(e.session_id),
            EventBody::SessionHeartbeat(e) => Entity::Session(e.session_id),
            EventBody::SessionClosed(e) => Entity::Session(e.session_id),
            EventBody::PluginFactRecorded(e) => Entity::Plugin(&e.plugin),
            EventBody::SignalsAcked(e) => Entity::Acks(&e.by),
            EventBody::AcksRecorded(_) => Entity::AckBatches,
            EventBody::SendsRecorded(r) => Entity::Sends(r.window),
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
mod tests;
