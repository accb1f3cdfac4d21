//! The command side of groups and of sends to many (CONTRACT §15): a group's command decided and
//! appended with a compare-and-set on the group's subject; a planned fan-out recorded one member
//! at a time, each signal with its own compare-and-set life; many signals recalled, each
//! decided on its own.
//!
//! Deliberately no answers beyond what the stream says: each member's entry is its own append's
//! outcome (an `Unavailable` one was not accepted), and nothing here reads the read models —
//! members and ids to recall are the caller's reads.

use chrono::{DateTime, Utc};
use futures::stream::{self, StreamExt};
use uuid::Uuid;

use crate::error::{DomainError, Error, Result};
use crate::event::{Entity, Event};
use crate::fanout::{FanoutPlan, ROSTER_SENDER};
use crate::fold::Fold;
use crate::group::{decide, roster_signals, GroupCommand, GroupState, RosterSignal};
use crate::log::Expect;
use crate::signal::{RecallOutcome, SignalCommand};
use crate::store::{SendRecorded, SignalStore};

/// How many appends of one fan-out or bulk recall are in flight at once: enough to hide the
/// stream's round trip, few enough that one send to a large group does not starve the others.
pub const FANOUT_CONCURRENCY: usize = 16;

/// Re-decisions after a lost compare-and-set on a group before giving up (see `store.rs`).
const MAX_ATTEMPTS: usize = 16;

/// What a group command did.
#[derive(Debug, Clone)]
pub struct GroupExecuted {
    pub before: GroupState,
    pub after: GroupState,
    /// The events appended, with their sequences (none for an idempotent repeat).
    pub appended: Vec<(u64, Event)>,
    /// The roster signals the appended events cause, per event sequence (`fanout::plan_roster`).
    pub roster: Vec<(u64, Vec<RosterSignal>)>,
}

/// One member's entry of a group send: what the stream says about its signal.
#[derive(Debug)]
pub struct MemberSent {
    pub to: String,
    pub signal_id: Uuid,
    /// The signal's state (accepted, or bounced) and whether this call recorded it, or why
    /// nothing was: `Unavailable` means not accepted; a domain error is the member's refusal.
    pub outcome: Result<SendRecorded>,
}

/// A group send, recorded.
#[derive(Debug)]
pub struct FanoutSent {
    pub fanout_id: Uuid,
    pub to: String,
    pub results: Vec<MemberSent>,
}

/// One signal's entry of a bulk recall.
#[derive(Debug)]
pub struct RecallEntry {
    pub signal_id: Uuid,
    pub outcome: Result<RecallOutcome>,
}

impl SignalStore {
    /// A group's state folded from its subject, and the newest sequence on it.
    pub async fn load_group(&self, tenant: &str, group: &str) -> Result<(GroupState, u64)> {
        let subject = self.log().subjects().of(tenant, Entity::Group(group));
        let stored = self.log().read_subject(&subject).await?;
        let last = stored.last().map_or(0, |s| s.seq);
        Ok((GroupState::from_events(stored.iter().map(|s| &s.event.body)), last))
    }

    /// Decides `command` on `group` against its subject and appends the outcome with a
    /// compare-and-set, deciding again whenever another writer got there first. Returns the
    /// state before and after, what was appended, and the roster signals to send.
    pub async fn execute_group(
        &self,
        tenant: &str,
        group: &str,
        command: &GroupCommand,
        actor: &str,
        now: DateTime<Utc>,
    ) -> Result<GroupExecuted> {
        if command.group() != group {
            return Err(DomainError::invalid(format!("the command is about {}, not {group}", command.group())).into());
        }
        'attempt: for _ in 0..MAX_ATTEMPTS {
            let (before, mut last_seq) = self.load_group(tenant, group).await?;
            let mut after = before.clone();
            let (mut appended, mut roster) = (Vec::new(), Vec::new());
            for body in decide(&before, command)? {
                let event = Event::new(tenant, Some(actor.to_string()), now, body);
                match self.append(&event, Expect::LastSubjectSeq(last_seq)).await {
                    Ok(a) => {
                        let signals = roster_signals(&after, &event.body);
                        if !signals.is_empty() {
                            roster.push((a.seq, signals));
                        }
                        after.apply(&event.body);
                        last_seq = a.seq;
                        appended.push((a.seq, event));
                    }
                    Err(Error::Conflict { .. }) if appended.is_empty() => continue 'attempt,
                    Err(e) => return Err(e),
                }
            }
            return Ok(GroupExecuted { before, after, appended, roster });
        }
        Err(Error::Unavailable(format!("group {group} is too contended")))
    }

    /// Removes `identity` from each of `groups` (its agent was removed: CONTRACT §8, §15), as
    /// `signalbus`; the groups are the caller's read (`groups_of`). One entry per group, in
    /// order, each with the roster signals its removal causes; a group deleted meanwhile
    /// answers `UnknownGroup`, one the identity already left appends nothing.
    pub async fn remove_from_groups(
        &self,
        tenant: &str,
        identity: &str,
        groups: &[String],
        now: DateTime<Utc>,
    ) -> Vec<(String, Result<GroupExecuted>)> {
        let mut results = Vec::with_capacity(groups.len());
        for group in groups {
            let command = GroupCommand::RemoveMember {
                group: group.clone(),
                identity: identity.to_string(),
                by: ROSTER_SENDER.into(),
            };
            results.push((group.clone(), self.execute_group(tenant, group, &command, ROSTER_SENDER, now).await));
        }
        results
    }

    /// Records a planned group send: each member's decision appended as an ordinary signal with
    /// its own compare-and-set ("subject empty"), up to `FANOUT_CONCURRENCY` at once. A member
    /// whose signal a previous attempt (same dedupe key) recorded is answered with it, so a
    /// repeat sends only to the members still missing. Results are in the plan's order.
    pub async fn record_fanout(&self, tenant: &str, from: &str, plan: FanoutPlan) -> FanoutSent {
        let now = plan.now;
        let results = stream::iter(plan.members)
            .map(|m| async move {
                let outcome = match m.decision {
                    Ok(decision) => self.record_send(tenant, from, decision, now).await,
                    Err(refused) => Err(refused.into()),
                };
                MemberSent { to: m.to, signal_id: m.signal_id, outcome }
            })
            .buffered(FANOUT_CONCURRENCY)
            .collect()
            .await;
        FanoutSent { fanout_id: plan.fanout_id, to: plan.to, results }
    }

    /// Records the roster signals of one group event (planned by `fanout::plan_roster`).
    pub async fn record_roster(&self, tenant: &str, plan: FanoutPlan) -> FanoutSent {
        self.record_fanout(tenant, ROSTER_SENDER, plan).await
    }

    /// Recalls each of `ids` on behalf of its sender `by` (CONTRACT §6, per signal): another's
    /// signal or an unknown id is `NotFound`. Results are in the order of `ids`.
    pub async fn recall_many(&self, tenant: &str, by: &str, ids: &[Uuid], now: DateTime<Utc>) -> Vec<RecallEntry> {
        let command = SignalCommand::Recall { by: by.to_string() };
        stream::iter(ids.to_vec())
            .map(|signal_id| {
                let command = &command;
                async move {
                    let outcome = self
                        .execute(tenant, signal_id, command, by, now)
                        .await
                        .map(|executed| RecallOutcome::of(&executed.state, by));
                    RecallEntry { signal_id, outcome }
                }
            })
            .buffered(FANOUT_CONCURRENCY)
            .collect()
            .await
    }
}
