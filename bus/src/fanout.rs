//! A send to a group, planned as a pure function (CONTRACT §15): which members it goes to, the
//! send decision of each (`send::decide_send`), the `fanout_id` they share and each member's
//! own `signal_id`.
//!
//! Ids are derived from the sender's `dedupe_key` when there is one, so a repeat of the send
//! plans the same `fanout_id` and the same signal per member, and each member's compare-and-set
//! on "subject empty" (`SignalStore::record_send`) makes the first one win: a repeat answers the
//! members already accepted with their original signals and fills in only the others.
//!
//! Deliberately no I/O: members and presence are the caller's reads, and the appends are
//! `group_store.rs`'s.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::catalog::TypeTable;
use crate::error::{DomainError, DomainResult};
use crate::group::{fanout_targets, RosterSignal};
use crate::names::validate_group;
use crate::send::{decide_send, RecipientView, SendDecision, SendLimits, SendRequest};

/// Namespace of fan-out and member signal ids derived from dedupe keys (UUID v5).
const FANOUT_NAMESPACE: Uuid = Uuid::from_u128(0x9c41_d0a7_2e58_4b6f_8a13_57c2_e0f9_61d4);

/// The id every member's signal of one group send carries: derived from `(tenant, from,
/// dedupe_key)` when there is a key, so a repeat answers the same id.
pub fn fanout_id_for(tenant: &str, from: &str, dedupe_key: Option<&str>) -> Uuid {
    match dedupe_key {
        Some(key) => Uuid::new_v5(&FANOUT_NAMESPACE, format!("{tenant}\0{from}\0{key}").as_bytes()),
        None => crate::send::new_signal_id(),
    }
}

/// The signal id of `member`'s part of a group send: derived from the sender's dedupe key and
/// the member, so each member has its own subject (its own compare-and-set life) and a repeat
/// contends for it again. Never equal to a single send's id (`send::signal_id_for` hashes in
/// another namespace, and keys cannot hold the NUL that separates the member).
pub fn member_signal_id(tenant: &str, from: &str, dedupe_key: Option<&str>, member: &str) -> Uuid {
    match dedupe_key {
        Some(key) => Uuid::new_v5(&FANOUT_NAMESPACE, format!("{tenant}\0{from}\0{key}\0{member}").as_bytes()),
        None => crate::send::new_signal_id(),
    }
}

/// One member's part of a group send, decided.
#[derive(Debug, Clone, PartialEq)]
pub struct MemberDecision {
    pub to: String,
    pub signal_id: Uuid,
    /// The send to record, or why this member gets none (it is not a registered agent).
    pub decision: DomainResult<SendDecision>,
}

/// A group send, decided for every member and not yet recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct FanoutPlan {
    pub fanout_id: Uuid,
    /// The group with its `@`, as the sender addressed it.
    pub to: String,
    pub now: DateTime<Utc>,
    /// Sorted by member; empty when the sender is the group's only member.
    pub members: Vec<MemberDecision>,
}

/// The limits and clock a plan is decided with.
#[derive(Debug, Clone, Copy)]
pub struct FanoutLimits<'a> {
    pub types: &'a TypeTable,
    /// Each member's send is checked against these (payload limit, retention).
    pub send: SendLimits,
    pub max_fanout: usize,
    pub now: DateTime<Utc>,
}

/// Plans `req` (its `to` a group) from `from` to the group's `members`, each member's recipient
/// state from `view`. A request that is wrong for one member is wrong for all of them, so it is
/// refused whole; only "not a registered agent" is a member's own answer.
pub fn plan_fanout(
    limits: FanoutLimits<'_>,
    tenant: &str,
    from: &str,
    req: SendRequest,
    members: &[String],
    view: impl Fn(&str) -> RecipientView,
) -> DomainResult<FanoutPlan> {
    validate_group(&req.to)?;
    let targets = fanout_targets(members, from, limits.max_fanout)?;
    let key = req.dedupe_key.as_deref();
    let fanout_id = fanout_id_for(tenant, from, key);
    if targets.is_empty() {
        // No one to send to (`results: []`), but a request that is wrong is still refused.
        let probe = SendRequest { to: from.to_string(), ..req.clone() };
        let registered = RecipientView { registered: true, ..view(from) };
        decide_send(limits.types, tenant, from, probe, registered, limits.now, limits.send)?;
    }
    let mut planned = Vec::with_capacity(targets.len());
    for to in targets {
        let signal_id = member_signal_id(tenant, from, key, &to);
        let member_req = SendRequest { to: to.clone(), ..req.clone() };
        let decision = match decide_send(limits.types, tenant, from, member_req, view(&to), limits.now, limits.send) {
            Ok(SendDecision::Accepted(mut sent)) => {
                (sent.signal_id, sent.fanout_id) = (signal_id, Some(fanout_id));
                Ok(SendDecision::Accepted(sent))
            }
            Ok(SendDecision::Bounced(mut bounced)) => {
                bounced.signal_id = signal_id;
                Ok(SendDecision::Bounced(bounced))
            }
            Err(DomainError::UnknownRecipient) => Err(DomainError::UnknownRecipient),
            Err(e) => return Err(e),
        };
        planned.push(MemberDecision { to, signal_id, decision });
    }
    Ok(FanoutPlan { fanout_id, to: req.to, now: limits.now, members: planned })
}

/// The sends of the roster signals one group event caused (`group::roster_signals`, all of one
/// type and payload), from `signalbus`, keyed by the event's stream sequence: recording them
/// again after a crash repeats nothing.
pub fn plan_roster(
    limits: FanoutLimits<'_>,
    tenant: &str,
    group: &str,
    event_seq: u64,
    signals: &[RosterSignal],
    view: impl Fn(&str) -> RecipientView,
) -> DomainResult<Option<FanoutPlan>> {
    let Some(first) = signals.first() else { return Ok(None) };
    let req = SendRequest {
        to: group.to_string(),
        signal_type: first.signal_type.to_string(),
        payload: first.payload.clone(),
        delivery_class: None,
        ttl_seconds: None,
        correlation_id: None,
        dedupe_key: Some(format!("group-event-{event_seq}")),
        deliver_after_seconds: None,
        deliver_at: None,
    };
    let members: Vec<String> = signals.iter().map(|s| s.to.clone()).collect();
    plan_fanout(limits, tenant, ROSTER_SENDER, req, &members, view).map(Some)
}

/// The sender of roster signals.
pub const ROSTER_SENDER: &str = "signalbus";

#[cfg(test)]
#[path = "fanout_tests.rs"]
mod tests;
