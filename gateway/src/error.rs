//! The one error type of the gateway: every failure a caller can see, with the stable code and
//! HTTP status of CONTRACT §8, rendered the same way over HTTP and inside WebSocket results.
//!
//! Deliberately never carries internals to the caller: storage and decode failures are logged
//! here with their detail and answered with a generic lowercase message.

use std::time::Duration;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bus::event::RecipientState;
use bus::DomainError;
use serde_json::{json, Value};
use uuid::Uuid;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    InvalidRequest(String),
    /// The path exists, the method does not: `invalid_request` (CONTRACT §8 has no code of its
    /// own for it) with status 405 and the router's `Allow` header.
    #[error("{0}")]
    MethodNotAllowed(String),
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    Forbidden(String),
    /// The token lacks a scope the call needs (CONTRACT §17): `forbidden`, naming the scope.
    #[error("this token lacks the \"{0}\" scope")]
    MissingScope(&'static str),
    #[error("{0}")]
    NotFound(String),
    #[error("recipient is not registered")]
    UnknownRecipient,
    #[error("recipient is {recipient_state}; the sync signal was bounced and not queued (send it with delivery_class async to queue it)")]
    RecipientUnavailable { recipient_state: RecipientState, signal_id: Uuid },
    #[error("{0}")]
    AlreadyRegistered(String),
    /// A directive transition its state does not allow; carries the directive as it is now.
    #[error("{message}")]
    InvalidTransition { message: String, directive: Box<Value> },
    /// Another group member holds the claim on the directive.
    #[error("the directive is claimed by {claimed_by}")]
    AlreadyClaimed { claimed_by: String },
    /// An idempotency key repeated with another `to`, `type` or `params`.
    #[error("idempotency_key was used for directive {directive_id} with another to, type or params")]
    IdempotencyConflict { directive_id: Uuid },
    #[error("no group {0:?}")]
    UnknownGroup(String),
    #[error("{0}")]
    PayloadTooLarge(String),
    /// Over a quota; `retry_after` is when the caller's bucket has room again.
    #[error("{message}")]
    RateLimited { message: String, retry_after: Duration },
    #[error("{0}")]
    Unavailable(String),
    #[error("internal error")]
    Internal,
    /// An append whose outcome the stream never told (CONTRACT §13: never answered as 503).
    #[error("the event stream did not answer in time, so whether this request was accepted is unknown; retry it with the same dedupe_key (a repeat answers the original if it was)")]
    Indeterminate,
}

impl ApiError {
    pub fn invalid(msg: impl Into<String>) -> Self {
        Self::InvalidRequest(msg.into())
    }

    pub fn rate_limited(msg: impl Into<String>, retry_after: Duration) -> Self {
        Self::RateLimited { message: msg.into(), retry_after }
    }

    /// Whole seconds to wait before retrying, for `Retry-After` (RFC 9110 §10.2.3): rounded up,
    /// and at least 1, since `0` would invite an immediate retry that fails again.
    pub fn retry_after_secs(&self) -> Option<u64> {
        match self {
            ApiError::RateLimited { retry_after, .. } => {
                let secs = retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0);
                Some(secs.max(1))
            }
            _ => None,
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            ApiError::InvalidRequest(_) | ApiError::MethodNotAllowed(_) => "invalid_request",
            ApiError::Unauthorized(_) => "unauthorized",
            ApiError::Forbidden(_) | ApiError::MissingScope(_) => "forbidden",
            ApiError::NotFound(_) => "not_found",
            ApiError::UnknownRecipient => "unknown_recipient",
            ApiError::RecipientUnavailable { .. } => "recipient_unavailable",
            ApiError::AlreadyRegistered(_) => "already_registered",
            ApiError::InvalidTransition { .. } => "invalid_transition",
            ApiError::AlreadyClaimed { .. } => "already_claimed",
            ApiError::IdempotencyConflict { .. } => "idempotency_conflict",
            ApiError::UnknownGroup(_) => "unknown_group",
            ApiError::PayloadTooLarge(_) => "payload_too_large",
            ApiError::RateLimited { .. } => "rate_limited",
            ApiError::Unavailable(_) => "unavailable",
            ApiError::Internal | ApiError::Indeterminate => "internal",
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::InvalidRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) | ApiError::MissingScope(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) | ApiError::UnknownRecipient | ApiError::UnknownGroup(_) => StatusCode::NOT_FOUND,
            ApiError::RecipientUnavailable { .. }
            | ApiError::AlreadyRegistered(_)
            | ApiError::InvalidTransition { .. }
            | ApiError::AlreadyClaimed { .. }
            | ApiError::IdempotencyConflict { .. } => StatusCode::CONFLICT,
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal | ApiError::Indeterminate => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The error object: `{"code","message", ...}` (the value under `"error"`).
    pub fn to_json(&self) -> Value {
        let mut v = json!({ "code": self.code(), "message": self.to_string() });
        match self {
            ApiError::RecipientUnavailable { recipient_state, signal_id } => {
                v["recipient_state"] = json!(recipient_state.as_str());
                v["signal_id"] = json!(signal_id);
            }
            // The precise wait, for WebSocket clients, which get no `Retry-After` header.
            ApiError::InvalidTransition { directive, .. } => v["directive"] = (**directive).clone(),
            ApiError::AlreadyClaimed { claimed_by } => v["claimed_by"] = json!(claimed_by),
            ApiError::MissingScope(scope) => v["scope"] = json!(scope),
            ApiError::IdempotencyConflict { directive_id } => v["directive_id"] = json!(directive_id),
            ApiError::RateLimited { retry_after, .. } => {
                v["retry_after_ms"] = json!((retry_after.as_millis() as u64).max(1));
            }
            _ => {}
        }
        v
    }

    /// The HTTP body: `{"error": {...}}`.
    pub fn body(&self) -> Value {
        json!({ "error": self.to_json() })
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status(), axum::Json(self.body())).into_response();
        if let Some(secs) = self.retry_after_secs() {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

impl From<DomainError> for ApiError {
    fn from(e: DomainError) -> Self {
        match e {
            DomainError::Invalid(m) => ApiError::InvalidRequest(m),
            DomainError::PayloadTooLarge(m) => ApiError::PayloadTooLarge(m),
            DomainError::NotFound => ApiError::NotFound("signal not found".into()),
            DomainError::UnknownRecipient => ApiError::UnknownRecipient,
            DomainError::AlreadyRegistered(who) => ApiError::AlreadyRegistered(format!("{who} is already registered")),
            DomainError::UnknownAgent(who) => ApiError::NotFound(format!("no agent {who:?}")),
            DomainError::Forbidden(m) => ApiError::Forbidden(m),
            DomainError::Refused(why) => ApiError::InvalidRequest(format!("refused: {why}")),
            DomainError::UnknownDirective => ApiError::NotFound("directive not found".into()),
            DomainError::UnknownGroup(g) => ApiError::UnknownGroup(g),
            // The directive itself is attached by `directives.rs`, which holds it.
            e @ DomainError::InvalidTransition { .. } => {
                ApiError::InvalidTransition { message: e.to_string(), directive: Box::new(Value::Null) }
            }
            DomainError::AlreadyClaimed { claimed_by } => ApiError::AlreadyClaimed { claimed_by },
            DomainError::IdempotencyConflict { directive_id } => ApiError::IdempotencyConflict { directive_id },
            DomainError::UnknownToken(id) => ApiError::NotFound(format!("no token {id}")),
            // A repeat of a revocation: `tokens.rs` answers it as done; elsewhere it is a refusal.
            DomainError::TokenRevoked(id) => ApiError::InvalidRequest(format!("token {id} is revoked already")),
        }
    }
}

impl From<bus::Error> for ApiError {
    fn from(e: bus::Error) -> Self {
        match e {
            bus::Error::Domain(d) => d.into(),
            bus::Error::Conflict { .. } => {
                tracing::warn!(error = %e, "compare-and-set kept losing");
                ApiError::Unavailable("the entity is too contended; nothing was accepted, retry".into())
            }
            bus::Error::Indeterminate(ref detail) => {
                tracing::warn!(error = %detail, "append outcome unknown");
                ApiError::Indeterminate
            }
            bus::Error::TooLate => ApiError::Unavailable(
                "the event stream could not store the signal before it expired; nothing was accepted".into(),
            ),
            bus::Error::Unavailable(ref detail) => {
                tracing::warn!(error = %detail, "event stream unavailable");
                ApiError::Unavailable("the event stream could not take the event; nothing was accepted".into())
            }
            other => {
                tracing::error!(error = %other, "event stream failure");
                ApiError::Internal
            }
        }
    }
}

impl From<projector::Error> for ApiError {
    fn from(e: projector::Error) -> Self {
        match e {
            projector::Error::Lagging(_) => {
                ApiError::Unavailable("the read models are catching up with the stream; retry shortly".into())
            }
            projector::Error::Bus(b) => b.into(),
            other => {
                tracing::error!(error = %other, "read model failure");
                ApiError::Unavailable("the read models are unavailable".into())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_its_contract_status() {
        let cases = [
            (ApiError::invalid("x"), 400, "invalid_request"),
            (ApiError::MethodNotAllowed("x".into()), 405, "invalid_request"),
            (ApiError::Unauthorized("x".into()), 401, "unauthorized"),
            (ApiError::Forbidden("x".into()), 403, "forbidden"),
            (ApiError::NotFound("x".into()), 404, "not_found"),
            (ApiError::UnknownRecipient, 404, "unknown_recipient"),
            (
                ApiError::RecipientUnavailable {
                    recipient_state: RecipientState::NotAvailableOffline,
                    signal_id: Uuid::nil(),
                },
                409,
                "recipient_unavailable",
            ),
            (ApiError::AlreadyRegistered("x".into()), 409, "already_registered"),
            (
                ApiError::InvalidTransition { message: "x".into(), directive: Box::new(json!({})) },
                409,
                "invalid_transition",
            ),
            (ApiError::AlreadyClaimed { claimed_by: "m1".into() }, 409, "already_claimed"),
            (ApiError::IdempotencyConflict { directive_id: Uuid::nil() }, 409, "idempotency_conflict"),
            (ApiError::UnknownGroup("@g".into()), 404, "unknown_group"),
            (ApiError::PayloadTooLarge("x".into()), 413, "payload_too_large"),
            (ApiError::rate_limited("x", Duration::from_millis(1)), 429, "rate_limited"),
            (ApiError::Unavailable("x".into()), 503, "unavailable"),
            (ApiError::Internal, 500, "internal"),
        ];
        for (e, status, code) in cases {
            assert_eq!(e.status().as_u16(), status);
            assert_eq!(e.code(), code);
            assert_eq!(e.body()["error"]["code"], code);
        }
    }

    #[test]
    fn rate_limited_answers_carry_retry_after_in_whole_seconds_at_least_one() {
        for (wait, secs) in [(1, 1), (999, 1), (1000, 1), (1001, 2), (2500, 3)] {
            let e = ApiError::rate_limited("slow down", Duration::from_millis(wait));
            assert_eq!(e.retry_after_secs(), Some(secs), "{wait} ms");
            let response = e.clone().into_response();
            assert_eq!(response.headers()[header::RETRY_AFTER], secs.to_string().as_str());
            assert_eq!(e.to_json()["retry_after_ms"], wait);
        }
        assert_eq!(ApiError::rate_limited("x", Duration::ZERO).retry_after_secs(), Some(1));
        assert!(ApiError::Internal.into_response().headers().get(header::RETRY_AFTER).is_none());
    }

    #[test]
    fn internals_never_reach_the_message() {
        let e: ApiError = bus::Error::Config("sqlite: disk I/O at /secret/path".into()).into();
        assert_eq!(e.to_string(), "internal error");
    }
}
