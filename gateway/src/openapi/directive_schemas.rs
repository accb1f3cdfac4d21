//! The JSON shapes of directives, groups, fan-out answers and bulk recalls (CONTRACT §14, §15)
//! as OpenAPI schemas.
//!
//! Deliberately types for the document only, like `schemas.rs`: the handlers build these
//! bodies with `serde_json`, and the tests validate real answers against the schemas.

#![allow(dead_code)]

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

use super::schemas::ErrorObject;

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DirectiveStatus {
    Requested,
    Started,
    Completed,
    Failed,
    Rejected,
    Canceled,
    Expired,
}

/// `POST /v1/directives`: the issuer is the caller; unknown fields are refused.
#[derive(Debug, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DirectiveCreateBody {
    /// An identity, or `@group`.
    pub to: String,
    #[serde(rename = "type")]
    #[schema(pattern = "^[A-Za-z][A-Za-z0-9_.]{0,63}$")]
    pub directive_type: String,
    /// A JSON object, at most 64 KiB encoded; default `{}`.
    pub params: Option<Value>,
    /// Repeating it answers the same directive (200) and creates nothing.
    #[schema(min_length = 1, max_length = 200)]
    pub idempotency_key: String,
    /// 1 … 2,592,000; default the deployment's (`[directives] default_deadline`, 24h).
    #[schema(minimum = 1, maximum = 2592000)]
    pub deadline_seconds: Option<u64>,
    #[schema(max_length = 64)]
    pub correlation_id: Option<String>,
}

/// The claimer's latest progress report.
#[derive(Debug, Serialize, ToSchema)]
pub struct DirectiveProgress {
    pub message: Option<String>,
    #[schema(minimum = 0, maximum = 100)]
    pub percent: Option<u8>,
    pub at: DateTime<Utc>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DirectiveFailure {
    pub code: String,
    pub message: String,
}

/// The directive object (CONTRACT §14): every answer, `GET`, and lifecycle signal payload.
#[derive(Debug, Serialize, ToSchema)]
pub struct DirectiveBody {
    pub directive_id: Uuid,
    #[serde(rename = "type")]
    pub directive_type: String,
    pub issuer: String,
    /// An identity, or `@group`.
    pub assignee: String,
    pub claimed_by: Option<String>,
    pub params: Value,
    pub status: DirectiveStatus,
    pub created_at: DateTime<Utc>,
    pub deadline: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub progress: Option<DirectiveProgress>,
    pub result: Option<Value>,
    pub failure: Option<DirectiveFailure>,
    pub reason: Option<String>,
    pub declined_by: Vec<String>,
    pub correlation_id: Option<String>,
    pub idempotency_key: String,
    /// Dotted paths from the directive's root (`params.db.password`) replaced by `[REDACTED]`.
    pub redacted: Vec<String>,
}

/// A page of the caller's directives.
#[derive(Debug, Serialize, ToSchema)]
pub struct DirectivePage {
    pub directives: Vec<DirectiveBody>,
    /// Pass as `before` for the next page; `null` on the last one.
    pub next_before: Option<String>,
}

/// `start`: no body, or `{}`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StartBody {}

/// `progress`: both fields optional.
#[derive(Debug, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProgressBody {
    #[schema(max_length = 1000)]
    pub message: Option<String>,
    #[schema(minimum = 0, maximum = 100)]
    pub percent: Option<u8>,
}

/// `complete`: the result, a JSON object of at most 64 KiB (default `{}`).
#[derive(Debug, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompleteBody {
    pub result: Option<Value>,
}

/// `fail`: why.
#[derive(Debug, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FailBody {
    pub failure: DirectiveFailure,
}

/// `reject` and `cancel`: an optional reason.
#[derive(Debug, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReasonBody {
    #[schema(max_length = 1000)]
    pub reason: Option<String>,
}

/// `PUT /v1/groups/{name}`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GroupUpsertBody {
    /// Default `default`.
    pub tenant: Option<String>,
    /// Agents may join and leave it themselves (default false).
    pub self_join: Option<bool>,
    /// Members hear `PeerJoined`/`PeerLeft` (default true).
    pub announce: Option<bool>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct GroupMemberBody {
    pub identity: String,
    pub recipient_state: super::schemas::RecipientState,
    pub added_at: DateTime<Utc>,
    pub added_by: String,
}

/// One group with its members' recipient state; after a `DELETE`, `{"group","deleted":true}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct GroupBody {
    /// The name with its `@`.
    pub group: String,
    pub self_join: Option<bool>,
    pub announce: Option<bool>,
    pub created_at: Option<DateTime<Utc>>,
    pub members: Option<Vec<GroupMemberBody>>,
    pub deleted: Option<bool>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct GroupListEntry {
    pub group: String,
    pub members: Vec<String>,
    pub self_join: bool,
    pub announce: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct GroupList {
    pub groups: Vec<GroupListEntry>,
}

/// A send to `@group`: one entry per member other than the sender.
#[derive(Debug, Serialize, ToSchema)]
pub struct FanoutAccepted {
    pub fanout_id: Uuid,
    pub to: String,
    pub results: Vec<Value>,
}

/// `POST /v1/signals/recall`: exactly one of the two.
#[derive(Debug, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RecallManyBody {
    pub fanout_id: Option<Uuid>,
    pub correlation_id: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RecallManyEntry {
    pub signal_id: Uuid,
    pub to: Option<String>,
    pub outcome: Option<super::schemas::RecallOutcome>,
    pub error: Option<ErrorObject>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RecallManyAnswer {
    pub results: Vec<RecallManyEntry>,
}
