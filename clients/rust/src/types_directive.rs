//! The wire shapes of directives (CONTRACT §14): the directive object every answer and every
//! lifecycle signal carries, the create request, the list filters and page, and the failure a
//! worker reports (also the error an `on_directive` handler returns to pick the failure code).
//!
//! Deliberately data only, like `types.rs`: the calls are `directives.rs`, the worker and the
//! waiting `run_directive` are `directive_worker.rs` and `directives.rs`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A directive's state (CONTRACT §14): `Requested` → `Started` → `Completed` | `Failed`; a
/// requested one may end `Rejected`; an open one `Canceled` or `Expired`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DirectiveStatus {
    Requested,
    Started,
    Completed,
    Failed,
    Rejected,
    Canceled,
    Expired,
    /// A status this client does not know (a newer bus).
    #[serde(other)]
    Unknown,
}

impl DirectiveStatus {
    /// The wire name (`requested`, `started`, ...).
    pub fn as_str(&self) -> &'static str {
        match self {
            DirectiveStatus::Requested => "requested",
            DirectiveStatus::Started => "started",
            DirectiveStatus::Completed => "completed",
            DirectiveStatus::Failed => "failed",
            DirectiveStatus::Rejected => "rejected",
            DirectiveStatus::Canceled => "canceled",
            DirectiveStatus::Expired => "expired",
            DirectiveStatus::Unknown => "unknown",
        }
    }

    /// `true` for the final states: completed, failed, rejected, canceled, expired.
    pub fn is_terminal(&self) -> bool {
        !matches!(self, DirectiveStatus::Requested | DirectiveStatus::Started | DirectiveStatus::Unknown)
    }
}

impl std::fmt::Display for DirectiveStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The claimer's latest progress report.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct DirectiveProgress {
    #[serde(default)]
    pub message: Option<String>,
    /// 0–100.
    #[serde(default)]
    pub percent: Option<u8>,
    pub at: DateTime<Utc>,
}

/// Why a directive failed: `{"code","message"}` on the wire. Also what an `on_directive`
/// handler returns (boxed, as its `Err`) to fail the directive with a code of its choosing:
/// `Err(Failure::new("NoSuchPackage", "jq is not in any repository").into())`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct Failure {
    pub code: String,
    pub message: String,
}

impl Failure {
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        Failure { code: code.into(), message: message.into() }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for Failure {}

/// The directive object (CONTRACT §14): every answer of a directive call, and the payload of
/// every lifecycle signal (`DirectiveRequested`, `DirectiveStarted`, ...).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct Directive {
    pub directive_id: String,
    #[serde(rename = "type")]
    pub directive_type: String,
    pub issuer: String,
    /// An identity, or a group (`@builders`).
    pub assignee: String,
    /// Who started it (for a group, the member who claimed it).
    #[serde(default)]
    pub claimed_by: Option<String>,
    #[serde(default)]
    pub params: Value,
    pub status: DirectiveStatus,
    pub created_at: DateTime<Utc>,
    pub deadline: DateTime<Utc>,
    #[serde(default)]
    pub started_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub finished_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub progress: Option<DirectiveProgress>,
    /// The result object of a completed directive.
    #[serde(default)]
    pub result: Option<Value>,
    #[serde(default)]
    pub failure: Option<Failure>,
    /// The reason given with a reject or a cancel.
    #[serde(default)]
    pub reason: Option<String>,
    /// Group members who declined it.
    #[serde(default)]
    pub declined_by: Vec<String>,
    #[serde(default)]
    pub correlation_id: Option<String>,
    #[serde(default)]
    pub idempotency_key: String,
    /// Paths (from the object's root, `params.db.password`) the redaction guard replaced.
    #[serde(default)]
    pub redacted: Vec<String>,
    /// `create_directive` only: `true` when this call created it (201), `false` when its
    /// idempotency_key named an existing one (200). Not a wire field; `false` elsewhere.
    #[serde(skip)]
    pub created: bool,
}

impl Directive {
    /// `true` once it ended: completed, failed, rejected, canceled or expired.
    pub fn is_terminal(&self) -> bool {
        self.status.is_terminal()
    }

    /// One line for messages: `package.install 1b2c… (failed: E: no)`.
    pub(crate) fn describe(&self) -> String {
        let mut s = format!("{} {} ({}", self.directive_type, self.directive_id, self.status);
        if let Some(f) = &self.failure {
            s.push_str(&format!(": {f}"));
        } else if let Some(r) = &self.reason {
            s.push_str(&format!(": {r}"));
        }
        s.push(')');
        s
    }
}

/// A directive to create (CONTRACT §14). Build it with [`DirectiveRequest::new`] and the
/// setters; `create_directive` gives one without a key a fresh `sbd-<uuid>`, so resending it can
/// never create a second directive.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectiveRequest {
    /// An identity, or a group (`@builders`).
    pub to: String,
    #[serde(rename = "type")]
    pub directive_type: String,
    pub params: Value,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub idempotency_key: Option<String>,
    /// 1 … 2,592,000 (the bus's default: 86,400).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub deadline_seconds: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub correlation_id: Option<String>,
}

impl DirectiveRequest {
    /// A directive of `directive_type` (`package.install`) for `to`, with empty params.
    pub fn new(to: impl Into<String>, directive_type: impl Into<String>) -> Self {
        DirectiveRequest {
            to: to.into(),
            directive_type: directive_type.into(),
            params: Value::Object(Default::default()),
            idempotency_key: None,
            deadline_seconds: None,
            correlation_id: None,
        }
    }
    /// The params object.
    pub fn params(mut self, params: Value) -> Self {
        self.params = params;
        self
    }
    /// The issuer's key (≤ 200 chars): repeating it answers the existing directive.
    pub fn idempotency_key(mut self, key: impl Into<String>) -> Self {
        self.idempotency_key = Some(key.into());
        self
    }
    /// Seconds until the bus expires it if it has not ended.
    pub fn deadline_seconds(mut self, seconds: u64) -> Self {
        self.deadline_seconds = Some(seconds);
        self
    }
    pub fn correlation_id(mut self, id: impl Into<String>) -> Self {
        self.correlation_id = Some(id.into());
        self
    }
}

/// Filters of `list_directives` (`GET /v1/directives`).
#[derive(Debug, Clone, Default)]
pub struct DirectiveQuery {
    /// `issued` or `assigned` (which includes group directives of your groups).
    pub role: Option<String>,
    /// `open`, or one status (`requested`, `started`, `completed`, ...).
    pub status: Option<String>,
    pub directive_type: Option<String>,
    pub limit: Option<u32>,
    /// A page's `next_before`, to continue.
    pub before: Option<String>,
}

/// One page of `list_directives`, newest first; `next_before` continues.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct DirectivePage {
    #[serde(default)]
    pub directives: Vec<Directive>,
    #[serde(default)]
    pub next_before: Option<String>,
}

/// A directive type pattern (as `on_directive` and the issuers policy take them): exact, or
/// ending in `*` (a prefix). How specific it is when it matches (longer wins, exact beats any
/// prefix); `None` when it does not match.
pub(crate) fn pattern_match(pattern: &str, directive_type: &str) -> Option<usize> {
    match pattern.strip_suffix('*') {
        Some(prefix) => directive_type.starts_with(prefix).then_some(prefix.len()),
        None => (pattern == directive_type).then_some(usize::MAX),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_exact_or_prefix() {
        assert_eq!(pattern_match("package.install", "package.install"), Some(usize::MAX));
        assert_eq!(pattern_match("package.*", "package.install"), Some(8));
        assert_eq!(pattern_match("*", "anything"), Some(0));
        assert_eq!(pattern_match("package.*", "pkg.install"), None);
        assert_eq!(pattern_match("package.install", "package.installx"), None);
    }

    #[test]
    fn terminal_states() {
        let terminal: Vec<bool> = [
            DirectiveStatus::Requested,
            DirectiveStatus::Started,
            DirectiveStatus::Completed,
            DirectiveStatus::Failed,
            DirectiveStatus::Rejected,
            DirectiveStatus::Canceled,
            DirectiveStatus::Expired,
        ]
        .iter()
        .map(DirectiveStatus::is_terminal)
        .collect();
        assert_eq!(terminal, vec![false, false, true, true, true, true, true]);
        let unknown: DirectiveStatus = serde_json::from_str("\"paused\"").unwrap();
        assert_eq!(unknown, DirectiveStatus::Unknown);
    }
}
