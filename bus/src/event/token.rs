//! The token events (CONTRACT §17): extra tokens of an agent, issued and revoked on the
//! agent's own subject, and tenant admin tokens on a subject of their own.
//!
//! Deliberately carries no secret: only a token's SHA-256 is ever written, as for the
//! registration token (`agent.registered`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::scope::ScopeSet;

/// An extra token of an agent, with the scopes it holds and when it stops working.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenIssued {
    pub identity: String,
    pub token_id: Uuid,
    /// SHA-256 of the token, hex.
    pub token_hash: String,
    pub scopes: ScopeSet,
    #[serde(default)]
    pub expires_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub label: Option<String>,
}

/// An issued token stops working (the registration token is rotated, never revoked).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenRevoked {
    pub identity: String,
    pub token_id: Uuid,
}

/// A token that is admin inside its event's tenant only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdminTokenIssued {
    pub token_id: Uuid,
    /// SHA-256 of the token, hex.
    pub token_hash: String,
    #[serde(default)]
    pub label: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdminTokenRevoked {
    pub token_id: Uuid,
}
