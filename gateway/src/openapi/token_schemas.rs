//! The JSON shapes of the token endpoints (CONTRACT §17) as OpenAPI schemas.
//!
//! Deliberately types for the document only, like `schemas.rs`: the handlers build these
//! bodies with `serde_json`, and the tests validate real answers against the schemas.

#![allow(dead_code)]

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

/// One scope: what a token may do.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ScopeName {
    Send,
    Receive,
    Recall,
    Facts,
    Directives,
    Read,
}

/// Every field is optional: no `scopes` = every scope, no `expires_in_seconds` = no expiry.
#[derive(Debug, Serialize, ToSchema)]
pub struct IssueTokenBody {
    #[schema(min_items = 1)]
    pub scopes: Option<Vec<ScopeName>>,
    #[schema(minimum = 1, maximum = 315_360_000)]
    pub expires_in_seconds: Option<u64>,
    #[schema(max_length = 128)]
    pub label: Option<String>,
}

/// An issued token: the secret is shown here, once.
#[derive(Debug, Serialize, ToSchema)]
pub struct IssuedTokenBody {
    pub token_id: Uuid,
    pub token: String,
    pub scopes: Vec<ScopeName>,
    pub expires_at: Option<DateTime<Utc>>,
    pub label: Option<String>,
}

/// One token of an agent, without its secret. The registration token is listed first, with
/// `token_id` `registration`.
#[derive(Debug, Serialize, ToSchema)]
pub struct TokenEntry {
    pub token_id: String,
    pub label: Option<String>,
    pub scopes: Vec<ScopeName>,
    pub expires_at: Option<DateTime<Utc>>,
    pub issued_at: DateTime<Utc>,
    pub expired: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TokenList {
    pub tenant: String,
    pub identity: String,
    pub tokens: Vec<TokenEntry>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TokenRevoked {
    pub token_id: Uuid,
    pub revoked: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct NewAdminTokenBody {
    pub tenant: String,
    #[schema(max_length = 128)]
    pub label: Option<String>,
}

/// A tenant admin token: the secret is shown here, once.
#[derive(Debug, Serialize, ToSchema)]
pub struct AdminTokenIssued {
    pub token_id: Uuid,
    pub token: String,
    pub tenant: String,
    pub label: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AdminTokenEntry {
    pub token_id: Uuid,
    pub tenant: String,
    pub label: Option<String>,
    pub issued_at: DateTime<Utc>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AdminTokenList {
    pub tokens: Vec<AdminTokenEntry>,
}
