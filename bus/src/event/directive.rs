//! The facts of a directive's life (CONTRACT §14), all stored on the directive's own subject so
//! one compare-and-set per directive settles every race (two members starting, complete vs
//! cancel vs expire).
//!
//! Deliberately only the facts: which may follow which is `directive.rs`'s to decide. Every
//! transition carries its own `at`, so a fold needs no envelope to fill the directive object's
//! timestamps.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::EventBody;

pub use crate::directive_status::DirectiveStatus;

impl std::fmt::Display for DirectiveStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A directive was created: `issuer` asks `assignee` (an identity, or `@group`) to do work.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectiveRequested {
    pub directive_id: Uuid,
    pub issuer: String,
    /// An identity, or a group name with its `@`.
    pub assignee: String,
    /// Who is handed the request and may act on it: for an identity just it, for a group its
    /// members at creation less the issuer (sorted). Fixed for the directive's whole life.
    pub candidates: Vec<String>,
    pub directive_type: String,
    /// The (redacted) params object as JSON text.
    pub params: String,
    pub idempotency_key: String,
    #[serde(default)]
    pub correlation_id: Option<String>,
    pub created_at: DateTime<Utc>,
    pub deadline: DateTime<Utc>,
    /// Dotted paths from the directive object's root (`params.db.password`).
    #[serde(default)]
    pub redacted: Vec<String>,
}

/// A candidate claimed the directive and started on it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectiveStarted {
    pub directive_id: Uuid,
    pub by: String,
    pub at: DateTime<Utc>,
}

/// The claimer reported progress; it replaces the previous report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectiveProgressed {
    pub directive_id: Uuid,
    pub by: String,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub percent: Option<u8>,
    pub at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectiveCompleted {
    pub directive_id: Uuid,
    pub by: String,
    /// The (redacted) result object as JSON text.
    pub result: String,
    /// Completed straight from `requested`: this event also claims the directive for `by`.
    #[serde(default)]
    pub claimed: bool,
    pub at: DateTime<Utc>,
    /// Dotted paths from the directive object's root (`result.token`).
    #[serde(default)]
    pub redacted: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectiveFailed {
    pub directive_id: Uuid,
    pub by: String,
    pub code: String,
    pub message: String,
    /// Failed straight from `requested`: this event also claims the directive for `by`.
    #[serde(default)]
    pub claimed: bool,
    pub at: DateTime<Utc>,
}

/// A candidate declined the directive for itself. When it was the last candidate who had not
/// declined, this same event rejects the directive (`rejects`): one append, so no race can
/// leave a directive every candidate declined still open.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectiveDeclined {
    pub directive_id: Uuid,
    pub by: String,
    #[serde(default)]
    pub reason: Option<String>,
    /// Every candidate has now declined: the directive is `rejected`.
    #[serde(default)]
    pub rejects: bool,
    pub at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectiveCanceled {
    pub directive_id: Uuid,
    pub by: String,
    #[serde(default)]
    pub reason: Option<String>,
    pub at: DateTime<Utc>,
}

/// The bus ended an open directive at its deadline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectiveExpired {
    pub directive_id: Uuid,
    pub deadline: DateTime<Utc>,
    pub at: DateTime<Utc>,
}

impl EventBody {
    /// The directive this fact is about, if any.
    pub fn directive_id(&self) -> Option<Uuid> {
        match self {
            EventBody::DirectiveRequested(e) => Some(e.directive_id),
            EventBody::DirectiveStarted(e) => Some(e.directive_id),
            EventBody::DirectiveProgressed(e) => Some(e.directive_id),
            EventBody::DirectiveCompleted(e) => Some(e.directive_id),
            EventBody::DirectiveFailed(e) => Some(e.directive_id),
            EventBody::DirectiveDeclined(e) => Some(e.directive_id),
            EventBody::DirectiveCanceled(e) => Some(e.directive_id),
            EventBody::DirectiveExpired(e) => Some(e.directive_id),
            _ => None,
        }
    }
}
