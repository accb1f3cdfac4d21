//! The rules of one directive's life (CONTRACT §14), as pure functions: `apply` folds the
//! events of one directive's subject into a `DirectiveState`, `decide` turns a command into
//! the event it causes or a refusal.
//!
//! Deliberately no I/O and no clock: `now` is an argument, a group's members are read by the
//! caller and handed to `Create`, and who the caller is comes authenticated. The compare-and-set
//! that makes one of racing transitions win lives in the store; these rules only say what is
//! allowed. Every decision is at most **one** event, so one append settles it (a decline by the
//! last candidate is one `directive.declined` with `rejects: true`, never a decline then a
//! rejection that a race could split).
//!
//! Life: `requested → started → completed | failed`; `requested → completed | failed` (claims
//! at once); `requested → rejected` (every candidate declined); open → `canceled | expired`.
//!
//! Refusals, checked in this order: no such directive or not a party (issuer or candidate) →
//! `UnknownDirective` (ids cannot be probed); a malformed body → `Invalid`/`PayloadTooLarge`; a
//! party outside its column (the issuer completing, a candidate canceling, a candidate who
//! declined starting) → `Forbidden`; the state does not allow the action → `InvalidTransition`;
//! another candidate holds the claim → `AlreadyClaimed`.
//!
//! Declines: a candidate declines for itself (`Reject`); declining again records nothing (an
//! idempotent repeat, answered with the directive as it is), and having declined it may no
//! longer start, complete or fail the directive (`Forbidden`) while the others still may.
//!
//! The deadline counts once the bus records it: until `directive.expired` is appended the parties
//! may still act, and the compare-and-set decides between a late completion and the expiry.

mod create;
mod effects;
mod lifecycle;
mod policy;

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::error::{DomainError, DomainResult, Refusal};
use crate::event::{
    DirectiveCanceled, DirectiveCompleted, DirectiveDeclined, DirectiveExpired, DirectiveFailed, DirectiveProgressed,
    DirectiveRequested, DirectiveStarted, DirectiveStatus, EventBody,
};
use crate::fold::Fold;

pub use create::{
    candidates, directive_id_for, idempotent_repeat, CreateDirective, DEFAULT_DEADLINE_SECONDS, MAX_DEADLINE_SECONDS,
    MAX_IDEMPOTENCY_KEY_CHARS, MAX_OBJECT_BYTES, MAX_TEXT_CHARS,
};
pub use effects::{lifecycle_decision, lifecycle_request, DirectiveEffects};
pub use lifecycle::{lifecycle_signals, requested_signal_id, requests_to_recall, LifecycleSignal, BUS_IDENTITY};
pub use policy::IssuerPolicy;

/// The claimer's latest progress report.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    pub message: Option<String>,
    pub percent: Option<u8>,
    pub at: DateTime<Utc>,
}

/// Why a directive failed, as its claimer said.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub code: String,
    pub message: String,
}

/// Everything the rules (and the directive object) need to know about one directive.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DirectiveState {
    /// The creation, as recorded: issuer, assignee, candidates, params, deadline…
    pub requested: Option<Box<DirectiveRequested>>,
    pub status: DirectiveStatus,
    pub claimed_by: Option<String>,
    /// Candidates who declined, in the order they did.
    pub declined_by: Vec<String>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub progress: Option<Progress>,
    /// The (redacted) result object as JSON text.
    pub result: Option<String>,
    pub failure: Option<Failure>,
    /// The reason given by a cancel, or by the decline that rejected it.
    pub reason: Option<String>,
    /// Every redacted path, from the directive object's root (`params.…`, `result.…`).
    pub redacted: Vec<String>,
}

/// A command on a directive. `by` is the authenticated caller.
#[derive(Debug, Clone, PartialEq)]
pub enum DirectiveCommand {
    Create(Box<CreateDirective>),
    Start {
        by: String,
    },
    /// `percent` as the caller sent it (checked to be 0–100 here).
    Progress {
        by: String,
        message: Option<String>,
        percent: Option<i64>,
    },
    Complete {
        by: String,
        result: Value,
    },
    Fail {
        by: String,
        code: String,
        message: String,
    },
    /// A candidate declines for itself.
    Reject {
        by: String,
        reason: Option<String>,
    },
    Cancel {
        by: String,
        reason: Option<String>,
    },
    /// The bus, at the deadline.
    Expire,
}

impl DirectiveCommand {
    /// The action's name, as in the contract's table and in `InvalidTransition`.
    pub fn action(&self) -> &'static str {
        match self {
            DirectiveCommand::Create(_) => "create",
            DirectiveCommand::Start { .. } => "start",
            DirectiveCommand::Progress { .. } => "progress",
            DirectiveCommand::Complete { .. } => "complete",
            DirectiveCommand::Fail { .. } => "fail",
            DirectiveCommand::Reject { .. } => "reject",
            DirectiveCommand::Cancel { .. } => "cancel",
            DirectiveCommand::Expire => "expire",
        }
    }

    fn by(&self) -> Option<&str> {
        match self {
            DirectiveCommand::Create(c) => Some(&c.issuer),
            DirectiveCommand::Start { by }
            | DirectiveCommand::Progress { by, .. }
            | DirectiveCommand::Complete { by, .. }
            | DirectiveCommand::Fail { by, .. }
            | DirectiveCommand::Reject { by, .. }
            | DirectiveCommand::Cancel { by, .. } => Some(by),
            DirectiveCommand::Expire => None,
        }
    }
}

impl Fold for DirectiveState {
    /// Folds one event in. Never fails; events that cannot follow the current state (they lost
    /// no race, so they cannot exist) are ignored.
    fn apply(&mut self, event: &EventBody) {
        use DirectiveStatus::*;
        let open = self.status.is_open();
        match event {
            EventBody::DirectiveRequested(r) if self.status == Absent => {
                self.redacted = r.redacted.clone();
                self.requested = Some(r.clone());
                self.status = Requested;
            }
            EventBody::DirectiveStarted(e) if self.status == Requested => {
                self.status = Started;
                self.claimed_by = Some(e.by.clone());
                self.started_at = Some(e.at);
            }
            EventBody::DirectiveProgressed(e) if self.status == Started => {
                self.progress = Some(Progress { message: e.message.clone(), percent: e.percent, at: e.at });
            }
            EventBody::DirectiveCompleted(e) if open => {
                self.finish(Completed, &e.by, e.at);
                self.result = Some(e.result.clone());
                self.redacted.extend(e.redacted.iter().cloned());
            }
            EventBody::DirectiveFailed(e) if open => {
                self.finish(Failed, &e.by, e.at);
                self.failure = Some(Failure { code: e.code.clone(), message: e.message.clone() });
            }
            EventBody::DirectiveDeclined(e) if self.status == Requested => {
                if !self.declined_by.contains(&e.by) {
                    self.declined_by.push(e.by.clone());
                }
                if e.rejects {
                    self.status = Rejected;
                    self.finished_at = Some(e.at);
                    self.reason = e.reason.clone();
                }
            }
            EventBody::DirectiveCanceled(e) if open => {
                self.status = Canceled;
                self.finished_at = Some(e.at);
                self.reason = e.reason.clone();
            }
            EventBody::DirectiveExpired(e) if open => {
                self.status = Expired;
                self.finished_at = Some(e.at);
            }
            _ => {}
        }
    }
}

impl DirectiveState {
    /// Ends the directive as `status` by `by`, who holds the claim from now on if nobody did.
    fn finish(&mut self, status: DirectiveStatus, by: &str, at: DateTime<Utc>) {
        self.claimed_by.get_or_insert_with(|| by.to_string());
        self.status = status;
        self.finished_at = Some(at);
    }

    fn is_candidate(&self, who: &str) -> bool {
        self.requested.as_ref().is_some_and(|r| r.candidates.iter().any(|c| c == who))
    }

    fn is_issuer(&self, who: &str) -> bool {
        self.requested.as_ref().is_some_and(|r| r.issuer == who)
    }

    /// Whether `who` may see this directive at all: its issuer or one of its candidates.
    pub fn is_party(&self, who: &str) -> bool {
        self.is_issuer(who) || self.is_candidate(who)
    }
}

/// Decides what `command` causes on a directive in `state` at `now`: no event (an idempotent
/// repeat), one event, or a refusal.
pub fn decide(state: &DirectiveState, command: &DirectiveCommand, now: DateTime<Utc>) -> DomainResult<Vec<EventBody>> {
    use DirectiveCommand as C;
    use DirectiveStatus::*;
    if let C::Create(create) = command {
        return create::decide_create(state, create, now);
    }
    let Some(req) = state.requested.as_deref() else { return Err(DomainError::UnknownDirective) };
    let directive_id = req.directive_id;
    let Some(by) = command.by() else { return expire(state, req, now) };
    if !state.is_party(by) {
        return Err(DomainError::UnknownDirective);
    }
    create::validate_body(command)?;
    let invalid = || DomainError::InvalidTransition { status: state.status, action: command.action() };
    if let C::Cancel { reason, .. } = command {
        if !state.is_issuer(by) {
            return Err(DomainError::Forbidden("only the issuer may cancel a directive".into()));
        }
        if !state.status.is_open() {
            return Err(invalid());
        }
        let reason = reason.clone();
        return Ok(vec![EventBody::DirectiveCanceled(DirectiveCanceled {
            directive_id,
            by: by.into(),
            reason,
            at: now,
        })]);
    }
    if !state.is_candidate(by) {
        let who = if req.assignee.starts_with('@') {
            format!("a member of {} (other than its issuer)", req.assignee)
        } else {
            req.assignee.clone()
        };
        return Err(DomainError::Forbidden(format!(
            "only {who} may {} this directive; its issuer may cancel it",
            command.action()
        )));
    }
    let declined = state.declined_by.iter().any(|d| d == by);
    if declined && !matches!(command, C::Reject { .. }) && state.status == Requested {
        return Err(DomainError::Forbidden(format!("{by} declined this directive")));
    }
    // From `started`, only the claimer acts; another candidate is told who holds it.
    let claim = || match &state.claimed_by {
        Some(claimer) if claimer != by && state.status == Started => {
            Err(DomainError::AlreadyClaimed { claimed_by: claimer.clone() })
        }
        _ => Err(invalid()),
    };
    let by = by.to_string();
    let event = match (command, state.status) {
        (C::Start { .. }, Requested) => EventBody::DirectiveStarted(DirectiveStarted { directive_id, by, at: now }),
        (C::Progress { message, percent, .. }, Started) if state.claimed_by.as_deref() == Some(&by) => {
            let percent = percent.map(|p| p as u8);
            EventBody::DirectiveProgressed(DirectiveProgressed {
                directive_id,
                by,
                message: message.clone(),
                percent,
                at: now,
            })
        }
        (C::Complete { result, .. }, Requested | Started) if state.status == Requested || holds(state, &by) => {
            let (result, redacted) = create::validated_object("result", result)?;
            let claimed = state.status == Requested;
            EventBody::DirectiveCompleted(DirectiveCompleted { directive_id, by, result, claimed, at: now, redacted })
        }
        (C::Fail { code, message, .. }, Requested | Started) if state.status == Requested || holds(state, &by) => {
            let (code, message, claimed) = (code.clone(), message.clone(), state.status == Requested);
            EventBody::DirectiveFailed(DirectiveFailed { directive_id, by, code, message, claimed, at: now })
        }
        (C::Reject { .. }, Requested) if declined => return Ok(vec![]),
        (C::Reject { reason, .. }, Requested) => {
            let rejects = req.candidates.iter().all(|c| *c == by || state.declined_by.contains(c));
            let reason = reason.clone();
            EventBody::DirectiveDeclined(DirectiveDeclined { directive_id, by, reason, rejects, at: now })
        }
        (C::Reject { .. }, _) => return Err(invalid()),
        _ => return claim(),
    };
    Ok(vec![event])
}

/// Whether `by` holds the claim on a started directive.
fn holds(state: &DirectiveState, by: &str) -> bool {
    state.claimed_by.as_deref() == Some(by)
}

fn expire(state: &DirectiveState, req: &DirectiveRequested, now: DateTime<Utc>) -> DomainResult<Vec<EventBody>> {
    if !state.status.is_open() {
        return Err(DomainError::InvalidTransition { status: state.status, action: "expire" });
    }
    if now < req.deadline {
        return Err(DomainError::Refused(Refusal::NotYetDue));
    }
    Ok(vec![EventBody::DirectiveExpired(DirectiveExpired {
        directive_id: req.directive_id,
        deadline: req.deadline,
        at: now,
    })])
}

#[cfg(test)]
#[path = "directive_tests.rs"]
mod tests;
