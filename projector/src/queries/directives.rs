//! The directive side of `Queries` (CONTRACT §14): one directive, a caller's directives, and
//! the open ones past their deadline (the sweeper's scan), as backend-independent types.
//!
//! Deliberately no access rule: who may see a directive (its issuer and candidates) is the
//! gateway's to decide, from the `issuer` and `candidates` every row carries.

use bus::event::DirectiveStatus;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

/// One `directives` row, with the candidates it was handed to.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DirectiveRow {
    pub directive_id: Uuid,
    pub tenant: String,
    pub issuer: String,
    pub assignee: String,
    /// Who may act on it: the assignee, or the group's members at creation less the issuer.
    pub candidates: Vec<String>,
    pub claimed_by: Option<String>,
    pub directive_type: String,
    pub params: Value,
    pub status: String,
    pub idempotency_key: String,
    pub correlation_id: Option<String>,
    pub created_at: DateTime<Utc>,
    pub deadline: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub progress: Option<Value>,
    pub result: Option<Value>,
    pub failure: Option<Value>,
    pub reason: Option<String>,
    pub declined_by: Vec<String>,
    pub last_event_seq: i64,
}

/// `role` of directive lists: what the caller issued, or what it was handed (as the assignee,
/// or as a candidate of a group directive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirectiveRole {
    Issued,
    Assigned,
}

/// `status` of directive lists: `open` (requested or started), or one status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirectiveFilter {
    Open,
    Is(DirectiveStatus),
}

impl DirectiveFilter {
    /// `open`, or a status name (`DirectiveStatus::parse`); anything else is `None`.
    pub fn parse(s: &str) -> Option<Self> {
        if s == "open" {
            return Some(DirectiveFilter::Open);
        }
        DirectiveStatus::parse(s).map(DirectiveFilter::Is)
    }
}

/// A page request of `list_directives`: newest first, strictly older than `before`.
#[derive(Debug, Clone, PartialEq)]
pub struct ListDirectives {
    pub tenant: String,
    pub caller: String,
    /// `None`: both, issued or assigned.
    pub role: Option<DirectiveRole>,
    pub status: Option<DirectiveFilter>,
    pub directive_type: Option<String>,
    pub limit: u32,
    /// `(created_at, directive_id)` of the last row of the previous page.
    pub before: Option<(DateTime<Utc>, Uuid)>,
}

/// An open directive whose deadline has passed: the sweeper expires it through the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverdueDirective {
    pub tenant: String,
    pub directive_id: Uuid,
    pub deadline: DateTime<Utc>,
}
