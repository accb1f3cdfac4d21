//! The rules of a tenant admin token (CONTRACT §17), as pure functions over its own subject:
//! issued once under a fresh id, revoked once.
//!
//! Deliberately no I/O and no secrets (the command carries the hash), and not who may ask: only
//! the global admin may, which is the gateway's check.

use uuid::Uuid;

use crate::error::{DomainError, DomainResult};
use crate::event::{AdminTokenIssued, AdminTokenRevoked, EventBody};
use crate::fold::Fold;

/// Where one tenant admin token stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AdminTokenState {
    #[default]
    Absent,
    Issued,
    Revoked,
}

#[derive(Debug, Clone, PartialEq)]
pub enum AdminTokenCommand {
    Issue(AdminTokenIssued),
    Revoke { token_id: Uuid },
}

impl Fold for AdminTokenState {
    fn apply(&mut self, event: &EventBody) {
        match event {
            EventBody::AdminTokenIssued(_) if *self == AdminTokenState::Absent => *self = AdminTokenState::Issued,
            EventBody::AdminTokenRevoked(_) if *self == AdminTokenState::Issued => *self = AdminTokenState::Revoked,
            _ => {}
        }
    }
}

pub fn decide(state: AdminTokenState, command: &AdminTokenCommand) -> DomainResult<EventBody> {
    match (state, command) {
        (AdminTokenState::Absent, AdminTokenCommand::Issue(t)) => Ok(EventBody::AdminTokenIssued(t.clone())),
        (_, AdminTokenCommand::Issue(t)) => {
            Err(DomainError::Invalid(format!("token {} was issued already", t.token_id)))
        }
        (AdminTokenState::Issued, AdminTokenCommand::Revoke { token_id }) => {
            Ok(EventBody::AdminTokenRevoked(AdminTokenRevoked { token_id: *token_id }))
        }
        (AdminTokenState::Revoked, AdminTokenCommand::Revoke { token_id }) => Err(DomainError::TokenRevoked(*token_id)),
        (AdminTokenState::Absent, AdminTokenCommand::Revoke { token_id }) => Err(DomainError::UnknownToken(*token_id)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_a_tenant_admin_token_when_issued_and_revoked_then_each_happens_once() {
        let id = Uuid::from_u128(9);
        let issue = AdminTokenCommand::Issue(AdminTokenIssued { token_id: id, token_hash: "h".into(), label: None });
        let revoke = AdminTokenCommand::Revoke { token_id: id };
        assert_eq!(decide(AdminTokenState::Absent, &revoke), Err(DomainError::UnknownToken(id)));
        let issued = decide(AdminTokenState::Absent, &issue).unwrap();
        let state = AdminTokenState::from_events([&issued]);
        assert_eq!(state, AdminTokenState::Issued);
        assert!(matches!(decide(state, &issue), Err(DomainError::Invalid(_))));
        let revoked = decide(state, &revoke).unwrap();
        let state = AdminTokenState::from_events([&issued, &revoked]);
        assert_eq!(decide(state, &revoke), Err(DomainError::TokenRevoked(id)));
    }
}
