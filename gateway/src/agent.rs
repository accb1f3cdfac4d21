//! `Agent`: who an authenticated agent is (tenant, identity, the hash of the token it used) and
//! what that token may do (its scopes and expiry).
//!
//! Deliberately a leaf and only data: authentication makes one (`auth`), sessions, reads and
//! the surfaces carry it, and none of them needs to know how it was made.

use bus::scope::{Scope, ScopeSet};
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// Which token an agent authenticated with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    /// The one `POST /v1/agents` answered (rotated, never revoked).
    Registration,
    /// A token issued by `POST /v1/agents/{identity}/tokens`.
    Issued(Uuid),
    /// A JWT of the configured identity provider: never in the registry, so only its expiry
    /// and the agent's removal end its sessions.
    Jwt,
}

/// An authenticated agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agent {
    pub tenant: String,
    pub identity: String,
    /// The hash of the token it authenticated with, so a rotation or a revocation can close
    /// exactly the sessions opened with that token.
    pub token_hash: String,
    /// What the token may do: every scope for the registration token.
    pub scopes: ScopeSet,
    /// Which kind of token it presented.
    pub token: TokenKind,
    /// When the token stops working; its sessions close then.
    pub expires_at: Option<DateTime<Utc>>,
}

impl Agent {
    /// An agent holding its registration token (every scope, no expiry).
    pub fn registered(tenant: &str, identity: &str, token_hash: &str) -> Self {
        Agent {
            tenant: tenant.to_string(),
            identity: identity.to_string(),
            token_hash: token_hash.to_string(),
            scopes: ScopeSet::all(),
            token: TokenKind::Registration,
            expires_at: None,
        }
    }

    /// Whether its sessions are pushed to and count toward its presence (CONTRACT §17).
    pub fn receives(&self) -> bool {
        self.scopes.contains(Scope::Receive)
    }
}
