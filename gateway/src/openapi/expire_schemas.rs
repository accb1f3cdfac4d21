//! The JSON shapes of `POST /v1/admin/signals/expire` (CONTRACT §16) as OpenAPI schemas.
//!
//! Deliberately types for the document only, like `schemas.rs`: the handler builds these bodies
//! with `serde_json` (`wire::expire`), and the tests validate real answers against the schemas.
//! The request's rules (patterns, bounds, "at least one filter") are `rules::force_expire_body`.

#![allow(dead_code)]

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

/// The filters, combined with AND: `tenant` and at least one other (a tenant alone would
/// expire everything). Age counts from `created_at`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ForceExpireBody {
    pub tenant: String,
    pub to: String,
    pub from: String,
    pub signal_type: String,
    pub older_than_seconds: u64,
    pub signal_ids: Vec<Uuid>,
    /// Expire nothing; list what would expire.
    pub dry_run: bool,
}

/// What a force-expire did.
#[derive(Debug, Serialize, ToSchema)]
pub struct ForceExpired {
    /// Pending signals this request expired (`expired_reason: forced`).
    pub expired: u64,
    /// Matches delivered, recalled or expired by something else before this request could.
    pub skipped: u64,
}

/// One signal a dry run would expire.
#[derive(Debug, Serialize, ToSchema)]
pub struct WouldExpire {
    pub signal_id: Uuid,
    pub to: String,
    pub from: String,
    #[serde(rename = "type")]
    pub signal_type: String,
    pub created_at: DateTime<Utc>,
}

/// What a force-expire would expire now: the first 1,000 in the order the sweeper would expire
/// them (soonest `expires_at` first), and how many in all.
#[derive(Debug, Serialize, ToSchema)]
pub struct ForceExpireDryRun {
    pub would_expire: Vec<WouldExpire>,
    pub count: u64,
}

/// `ForceExpired`, or with `dry_run: true`, `ForceExpireDryRun`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum ForceExpireAnswer {
    Expired(ForceExpired),
    DryRun(ForceExpireDryRun),
}
