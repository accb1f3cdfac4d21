//! Creating a directive: the validation of a create and of every action's body, the candidates,
//! the directive's id, and the idempotency rule (CONTRACT §14).
//!
//! Deliberately does not resolve `to` (whether the identity is registered or the group exists is
//! the caller's read: `UnknownRecipient`, `UnknownGroup`) nor apply the issuers policy.

use chrono::{DateTime, Duration, Utc};
use serde_json::Value;
use uuid::Uuid;

use super::{DirectiveCommand, DirectiveState};
use crate::error::{DomainError, DomainResult};
use crate::event::{DirectiveRequested, DirectiveStatus, EventBody};
use crate::names::{is_group, validate_group, validate_identity, validate_signal_type};
use crate::nul::{refuse_in_json, refuse_in_str};
use crate::redact::redact;
use crate::send::MAX_CORRELATION_ID_CHARS;

pub const DEFAULT_DEADLINE_SECONDS: u64 = 86_400;
pub const MAX_DEADLINE_SECONDS: u64 = 2_592_000;
pub const MAX_IDEMPOTENCY_KEY_CHARS: usize = 200;
/// `params` and `result`: JSON objects of at most 64 KiB encoded.
pub const MAX_OBJECT_BYTES: usize = 64 * 1024;
/// A progress message, a failure's message, a reason.
pub const MAX_TEXT_CHARS: usize = 1_000;
const MAX_FAILURE_CODE_CHARS: usize = 64;

/// Namespace of directive ids derived from idempotency keys (UUID v5).
const DIRECTIVE_NAMESPACE: Uuid = Uuid::from_u128(0xd1ec_7a1e_5e0b_4c2d_9f3a_6b8e_21c4_7d05);

/// A create, as the issuer asked for it plus what the caller read.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateDirective {
    /// `directive_id_for(tenant, issuer, idempotency_key)`.
    pub directive_id: Uuid,
    pub issuer: String,
    /// An identity, or `@group`.
    pub to: String,
    /// For a group, its members now (the caller's read); ignored for an identity.
    pub members: Vec<String>,
    pub directive_type: String,
    pub params: Value,
    pub idempotency_key: String,
    /// As asked, or the deployment's default (`DEFAULT_DEADLINE_SECONDS` unless configured).
    pub deadline_seconds: u64,
    pub correlation_id: Option<String>,
}

/// The id of the directive an issuer's idempotency key names: every repeat of a create contends
/// for the same subject, so the first one wins and the others find it.
pub fn directive_id_for(tenant: &str, issuer: &str, idempotency_key: &str) -> Uuid {
    Uuid::new_v5(&DIRECTIVE_NAMESPACE, format!("{tenant}\0{issuer}\0{idempotency_key}").as_bytes())
}

/// Who is handed a directive to `to`: an identity alone; a group's `members` less the issuer,
/// sorted, each once.
pub fn candidates(to: &str, members: &[String], issuer: &str) -> Vec<String> {
    if !is_group(to) {
        return vec![to.to_string()];
    }
    let mut out: Vec<String> = members.iter().filter(|m| *m != issuer).cloned().collect();
    out.sort();
    out.dedup();
    out
}

/// Whether a create repeating `existing`'s idempotency key asks for the same directive: the
/// same `to`, `type` and `params` (compared as stored, after redaction: a secret's value is
/// never kept, so it cannot tell two creates apart) answers with the existing directive.
pub fn idempotent_repeat(
    existing: &DirectiveRequested,
    to: &str,
    directive_type: &str,
    params: &Value,
) -> DomainResult<()> {
    let mut params = params.clone();
    redact(&mut params);
    let stored: Option<Value> = serde_json::from_str(&existing.params).ok();
    if existing.assignee == to && existing.directive_type == directive_type && stored.as_ref() == Some(&params) {
        Ok(())
    } else {
        Err(DomainError::IdempotencyConflict { directive_id: existing.directive_id })
    }
}

pub(super) fn decide_create(
    state: &DirectiveState,
    c: &CreateDirective,
    now: DateTime<Utc>,
) -> DomainResult<Vec<EventBody>> {
    validate_create(c)?;
    if let Some(existing) = state.requested.as_deref() {
        if existing.issuer != c.issuer || existing.idempotency_key != c.idempotency_key {
            return Err(DomainError::IdempotencyConflict { directive_id: existing.directive_id });
        }
        return idempotent_repeat(existing, &c.to, &c.directive_type, &c.params).map(|()| vec![]);
    }
    debug_assert_eq!(state.status, DirectiveStatus::Absent);
    let candidates = candidates(&c.to, &c.members, &c.issuer);
    if candidates.is_empty() {
        return Err(DomainError::invalid(format!(
            "{} has no member other than the issuer to hand the directive to",
            c.to
        )));
    }
    let (params, redacted) = validated_object("params", &c.params)?;
    Ok(vec![EventBody::DirectiveRequested(Box::new(DirectiveRequested {
        directive_id: c.directive_id,
        issuer: c.issuer.clone(),
        assignee: c.to.clone(),
        candidates,
        directive_type: c.directive_type.clone(),
        params,
        idempotency_key: c.idempotency_key.clone(),
        correlation_id: c.correlation_id.clone(),
        created_at: now,
        deadline: now + Duration::seconds(c.deadline_seconds as i64),
        redacted,
    }))])
}

fn validate_create(c: &CreateDirective) -> DomainResult<()> {
    refuse_in_str("to", &c.to)?;
    refuse_in_str("type", &c.directive_type)?;
    refuse_in_str("idempotency_key", &c.idempotency_key)?;
    if let Some(corr) = &c.correlation_id {
        refuse_in_str("correlation_id", corr)?;
    }
    refuse_in_json("params", &c.params)?;
    if is_group(&c.to) {
        validate_group(&c.to)?;
    } else {
        validate_identity(&c.to)
            .map_err(|_| DomainError::invalid(format!("to {:?} is neither an identity nor a @group", c.to)))?;
    }
    validate_signal_type(&c.directive_type)?;
    let key_chars = c.idempotency_key.chars().count();
    if key_chars == 0 || key_chars > MAX_IDEMPOTENCY_KEY_CHARS {
        return Err(DomainError::invalid(format!(
            "idempotency_key is required, at most {MAX_IDEMPOTENCY_KEY_CHARS} characters"
        )));
    }
    if c.correlation_id.as_ref().is_some_and(|s| s.chars().count() > MAX_CORRELATION_ID_CHARS) {
        return Err(DomainError::invalid(format!("correlation_id is at most {MAX_CORRELATION_ID_CHARS} characters")));
    }
    if !(1..=MAX_DEADLINE_SECONDS).contains(&c.deadline_seconds) {
        return Err(DomainError::invalid(format!(
            "deadline_seconds must be 1 … {MAX_DEADLINE_SECONDS}, got {}",
            c.deadline_seconds
        )));
    }
    Ok(())
}

/// The body of an action on an existing directive: NUL refused anywhere, texts bounded, percent
/// 0–100, a failure code required. `result` is checked where it is redacted (`validated_object`).
pub(super) fn validate_body(command: &DirectiveCommand) -> DomainResult<()> {
    let text = |field: &str, value: &str| {
        refuse_in_str(field, value)?;
        match value.chars().count() {
            n if n > MAX_TEXT_CHARS => {
                Err(DomainError::invalid(format!("{field} is at most {MAX_TEXT_CHARS} characters, got {n}")))
            }
            _ => Ok(()),
        }
    };
    match command {
        DirectiveCommand::Progress { message, percent, .. } => {
            message.as_deref().map_or(Ok(()), |m| text("message", m))?;
            match percent {
                Some(p) if !(0..=100).contains(p) => {
                    Err(DomainError::invalid(format!("percent must be 0 … 100, got {p}")))
                }
                _ => Ok(()),
            }
        }
        DirectiveCommand::Complete { result, .. } => refuse_in_json("result", result),
        DirectiveCommand::Fail { code, message, .. } => {
            refuse_in_str("failure.code", code)?;
            if code.is_empty() || code.chars().count() > MAX_FAILURE_CODE_CHARS {
                return Err(DomainError::invalid(format!(
                    "failure.code is required, at most {MAX_FAILURE_CODE_CHARS} characters"
                )));
            }
            text("failure.message", message)
        }
        DirectiveCommand::Reject { reason, .. } | DirectiveCommand::Cancel { reason, .. } => {
            reason.as_deref().map_or(Ok(()), |r| text("reason", r))
        }
        DirectiveCommand::Create(_) | DirectiveCommand::Start { .. } | DirectiveCommand::Expire => Ok(()),
    }
}

/// `value` (the directive object's `field`) as stored: a JSON object of at most 64 KiB encoded,
/// redacted, with the redacted paths from the directive object's root (`params.db.password`).
pub(super) fn validated_object(field: &str, value: &Value) -> DomainResult<(String, Vec<String>)> {
    if !value.is_object() {
        return Err(DomainError::invalid(format!("{field} must be a JSON object")));
    }
    let size = serde_json::to_vec(value).map(|v| v.len()).unwrap_or(usize::MAX);
    if size > MAX_OBJECT_BYTES {
        return Err(DomainError::PayloadTooLarge(format!(
            "{field} is {size} bytes encoded; the limit is {MAX_OBJECT_BYTES}"
        )));
    }
    let mut value = value.clone();
    let redacted = redact(&mut value).into_iter().map(|p| format!("{field}.{p}")).collect();
    Ok((value.to_string(), redacted))
}
