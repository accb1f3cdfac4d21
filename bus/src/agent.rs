//! The rules of an agent's registration, as pure functions: `apply` folds the events of one
//! agent's subject into an `AgentState`, `decide` turns a command into the event it causes or a
//! refusal. Registration is one compare-and-set on the agent's subject (`store::AgentStore`), so
//! of concurrent registrations of one identity across every gateway exactly one wins.
//!
//! Deliberately no I/O, no clock and no secrets: a command carries the token's hash, never the
//! token, and who may ask (the admin) is the gateway's check.

use crate::error::{DomainError, DomainResult};
use crate::event::{AgentRegistered, AgentRemoved, EventBody, SessionKind, TokenRotated};
use crate::fold::Fold;

/// Where an identity stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AgentStatus {
    /// Never registered.
    #[default]
    Absent,
    Registered,
    /// Removed; the identity may be registered again.
    Removed,
}

/// Everything the rules need to know about one identity.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AgentState {
    pub status: AgentStatus,
    pub kind: Option<SessionKind>,
    /// The hash of the registration token in force.
    pub token_hash: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum AgentCommand {
    Register { identity: String, kind: SessionKind, token_hash: String },
    RotateToken { identity: String, token_hash: String },
    Remove { identity: String },
}

impl Fold for AgentState {
    /// Folds one event in; events that cannot follow the current state are ignored.
    fn apply(&mut self, event: &EventBody) {
        match event {
            EventBody::AgentRegistered(r) if self.status != AgentStatus::Registered => {
                *self = AgentState {
                    status: AgentStatus::Registered,
                    kind: Some(r.kind),
                    token_hash: Some(r.token_hash.clone()),
                };
            }
            EventBody::TokenRotated(t) if self.status == AgentStatus::Registered => {
                self.token_hash = Some(t.token_hash.clone());
            }
            EventBody::AgentRemoved(_) if self.status == AgentStatus::Registered => {
                *self = AgentState { status: AgentStatus::Removed, ..AgentState::default() };
            }
            _ => {}
        }
    }
}

/// Decides what `command` causes on an agent in `state`.
pub fn decide(state: &AgentState, command: &AgentCommand) -> DomainResult<EventBody> {
    let registered = state.status == AgentStatus::Registered;
    match command {
        AgentCommand::Register { identity, .. } if registered => Err(DomainError::AlreadyRegistered(identity.clone())),
        AgentCommand::Register { identity, kind, token_hash } => Ok(EventBody::AgentRegistered(AgentRegistered {
            identity: identity.clone(),
            kind: *kind,
            token_hash: token_hash.clone(),
        })),
        AgentCommand::RotateToken { identity, token_hash } if registered => {
            Ok(EventBody::TokenRotated(TokenRotated { identity: identity.clone(), token_hash: token_hash.clone() }))
        }
        AgentCommand::Remove { identity } if registered => {
            Ok(EventBody::AgentRemoved(AgentRemoved { identity: identity.clone() }))
        }
        AgentCommand::RotateToken { identity, .. } | AgentCommand::Remove { identity } => {
            Err(DomainError::UnknownAgent(identity.clone()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn register(hash: &str) -> AgentCommand {
        AgentCommand::Register { identity: "bob".into(), kind: SessionKind::Daemon, token_hash: hash.into() }
    }

    fn then(state: &AgentState, command: AgentCommand) -> (DomainResult<EventBody>, AgentState) {
        let result = decide(state, &command);
        let mut after = state.clone();
        if let Ok(e) = &result {
            after.apply(e);
        }
        (result, after)
    }

    #[test]
    fn given_nothing_when_registered_then_registered_with_its_token_hash() {
        let (result, after) = then(&AgentState::default(), register("h1"));
        assert!(matches!(result, Ok(EventBody::AgentRegistered(_))));
        assert_eq!((after.status, after.token_hash.as_deref()), (AgentStatus::Registered, Some("h1")));
    }

    #[test]
    fn given_registered_when_registered_again_then_refused() {
        let (_, registered) = then(&AgentState::default(), register("h1"));
        assert_eq!(then(&registered, register("h2")).0, Err(DomainError::AlreadyRegistered("bob".into())));
    }

    #[test]
    fn given_registered_when_rotated_then_only_the_new_hash_counts() {
        let (_, registered) = then(&AgentState::default(), register("h1"));
        let (result, after) =
            then(&registered, AgentCommand::RotateToken { identity: "bob".into(), token_hash: "h2".into() });
        assert!(matches!(result, Ok(EventBody::TokenRotated(_))));
        assert_eq!(after.token_hash.as_deref(), Some("h2"));
    }

    #[test]
    fn given_removed_then_rotate_and_remove_are_refused_and_registration_is_allowed_again() {
        let (_, registered) = then(&AgentState::default(), register("h1"));
        let (result, removed) = then(&registered, AgentCommand::Remove { identity: "bob".into() });
        assert!(matches!(result, Ok(EventBody::AgentRemoved(_))));
        assert_eq!((removed.status, removed.token_hash.as_deref()), (AgentStatus::Removed, None));
        let rotate = AgentCommand::RotateToken { identity: "bob".into(), token_hash: "h2".into() };
        assert_eq!(then(&removed, rotate).0, Err(DomainError::UnknownAgent("bob".into())));
        assert_eq!(
            then(&removed, AgentCommand::Remove { identity: "bob".into() }).0.map(|_| ()),
            Err(DomainError::UnknownAgent("bob".into()))
        );
        let (_, again) = then(&removed, register("h3"));
        assert_eq!((again.status, again.token_hash.as_deref()), (AgentStatus::Registered, Some("h3")));
    }
}
