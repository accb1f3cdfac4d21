//! The rules of an agent's registration, as pure functions: `apply` folds the events of one
//! agent's subject into an `AgentState`, `decide` turns a command into the event it causes or a
//! refusal. Registration is one compare-and-set on the agent's subject (`store::AgentStore`), so
//! of concurrent registrations of one identity across every gateway exactly one wins.
//!
//! An agent's extra tokens (CONTRACT §17) live on the same subject: issuing one needs the agent
//! registered, revoking one needs it issued since the agent's newest registration; a removal or
//! a new registration ends them all.
//!
//! Deliberately no I/O, no clock and no secrets: a command carries the token's hash, never the
//! token, and who may ask (the admin) is the gateway's check.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::error::{DomainError, DomainResult};
use crate::event::{AgentRegistered, AgentRemoved, EventBody, SessionKind, TokenIssued, TokenRevoked, TokenRotated};
use crate::fold::Fold;
use crate::scope::ScopeSet;

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
    /// Tokens issued since the newest registration, by id: `true` once revoked.
    pub tokens: BTreeMap<Uuid, bool>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum AgentCommand {
    Register { identity: String, kind: SessionKind, token_hash: String },
    RotateToken { identity: String, token_hash: String },
    Remove { identity: String },
    IssueToken(TokenIssued),
    RevokeToken { identity: String, token_id: Uuid },
}

impl AgentCommand {
    /// An extra token for `identity`; `scopes` empty is refused by `decide`.
    pub fn issue(
        identity: &str,
        token_id: Uuid,
        token_hash: String,
        scopes: ScopeSet,
        expires_at: Option<DateTime<Utc>>,
        label: Option<String>,
    ) -> Self {
        AgentCommand::IssueToken(TokenIssued {
            identity: identity.to_string(),
            token_id,
            token_hash,
            scopes,
            expires_at,
            label,
        })
    }
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
                    tokens: BTreeMap::new(),
                };
            }
            EventBody::TokenRotated(t) if self.status == AgentStatus::Registered => {
                self.token_hash = Some(t.token_hash.clone());
            }
            EventBody::AgentRemoved(_) if self.status == AgentStatus::Registered => {
                *self = AgentState { status: AgentStatus::Removed, ..AgentState::default() };
            }
            EventBody::TokenIssued(t) if self.status == AgentStatus::Registered => {
                self.tokens.entry(t.token_id).or_insert(false);
            }
            EventBody::TokenRevoked(t) if self.status == AgentStatus::Registered => {
                if let Some(revoked) = self.tokens.get_mut(&t.token_id) {
                    *revoked = true;
                }
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
        AgentCommand::IssueToken(t) if registered => {
            if t.scopes.is_empty() {
                return Err(DomainError::Invalid("a token needs at least one scope".into()));
            }
            if state.tokens.contains_key(&t.token_id) {
                return Err(DomainError::Invalid(format!("token {} was issued already", t.token_id)));
            }
            Ok(EventBody::TokenIssued(t.clone()))
        }
        AgentCommand::RevokeToken { identity, token_id } if registered => match state.tokens.get(token_id) {
            None => Err(DomainError::UnknownToken(*token_id)),
            Some(true) => Err(DomainError::TokenRevoked(*token_id)),
            Some(false) => {
                Ok(EventBody::TokenRevoked(TokenRevoked { identity: identity.clone(), token_id: *token_id }))
            }
        },
        AgentCommand::RotateToken { identity, .. }
        | AgentCommand::Remove { identity }
        | AgentCommand::IssueToken(TokenIssued { identity, .. })
        | AgentCommand::RevokeToken { identity, .. } => Err(DomainError::UnknownAgent(identity.clone())),
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

    fn issue(id: u128) -> AgentCommand {
        AgentCommand::issue("bob", Uuid::from_u128(id), format!("t{id}"), ScopeSet::all(), None, None)
    }

    fn revoke(id: u128) -> AgentCommand {
        AgentCommand::RevokeToken { identity: "bob".into(), token_id: Uuid::from_u128(id) }
    }

    #[test]
    fn given_registered_when_a_token_is_issued_and_revoked_then_a_second_revoke_is_told_so() {
        let (_, registered) = then(&AgentState::default(), register("h1"));
        let (result, issued) = then(&registered, issue(7));
        assert!(matches!(result, Ok(EventBody::TokenIssued(_))));
        assert_eq!(
            then(&issued, issue(7)).0.map(|_| ()),
            Err(DomainError::Invalid("token 00000000-0000-0000-0000-000000000007 was issued already".into()))
        );
        let (result, revoked) = then(&issued, revoke(7));
        assert!(matches!(result, Ok(EventBody::TokenRevoked(_))));
        assert_eq!(then(&revoked, revoke(7)).0, Err(DomainError::TokenRevoked(Uuid::from_u128(7))));
        assert_eq!(then(&revoked, revoke(8)).0, Err(DomainError::UnknownToken(Uuid::from_u128(8))));
        // Rotation leaves issued tokens alone.
        let (_, rotated) = then(&issued, AgentCommand::RotateToken { identity: "bob".into(), token_hash: "h2".into() });
        assert_eq!(rotated.tokens.get(&Uuid::from_u128(7)), Some(&false));
    }

    #[test]
    fn given_no_scopes_or_no_agent_when_issued_then_refused() {
        let (_, registered) = then(&AgentState::default(), register("h1"));
        let empty = AgentCommand::issue("bob", Uuid::from_u128(1), "t".into(), ScopeSet::default(), None, None);
        assert!(matches!(then(&registered, empty).0, Err(DomainError::Invalid(_))));
        assert_eq!(then(&AgentState::default(), issue(1)).0.map(|_| ()), Err(DomainError::UnknownAgent("bob".into())));
    }

    #[test]
    fn given_a_token_when_the_agent_is_removed_and_registered_again_then_the_token_is_gone() {
        let (_, registered) = then(&AgentState::default(), register("h1"));
        let (_, issued) = then(&registered, issue(3));
        let (_, removed) = then(&issued, AgentCommand::Remove { identity: "bob".into() });
        assert_eq!(then(&removed, revoke(3)).0, Err(DomainError::UnknownAgent("bob".into())));
        let (_, again) = then(&removed, register("h4"));
        assert!(again.tokens.is_empty());
        assert_eq!(then(&again, revoke(3)).0, Err(DomainError::UnknownToken(Uuid::from_u128(3))));
    }
}
