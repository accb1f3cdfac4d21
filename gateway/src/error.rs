//! The one error type of the gateway: every failure a caller can see, with the stable code and
//! HTTP status of CONTRACT §8, rendered the same way over HTTP and inside WebSocket results.
//!
//! Deliberately never carries internals to the caller: storage and decode failures are logged
//! here with their detail and answered with a generic lowercase message.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bus::event::RecipientState;
use bus::DomainError;
use serde_json::{json, Value};
use uuid::Uuid;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    InvalidRequest(String),
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("recipient is not registered")]
    UnknownRecipient,
    #[error("recipient is {recipient_state}; the sync signal was bounced and not queued")]
    RecipientUnavailable { recipient_state: RecipientState, signal_id: Uuid },
    #[error("{0}")]
    AlreadyRegistered(String),
    #[error("{0}")]
    PayloadTooLarge(String),
    #[error("{0}")]
    RateLimited(String),
    #[error("{0}")]
    Unavailable(String),
    #[error("internal error")]
    Internal,
}

impl ApiError {
    pub fn invalid(msg: impl Into<String>) -> Self {
        Self::InvalidRequest(msg.into())
    }

    pub fn code(&self) -> &'static str {
        match self {
            ApiError::InvalidRequest(_) => "invalid_request",
            ApiError::Unauthorized(_) => "unauthorized",
            ApiError::Forbidden(_) => "forbidden",
            ApiError::NotFound(_) => "not_found",
            ApiError::UnknownRecipient => "unknown_recipient",
            ApiError::RecipientUnavailable { .. } => "recipient_unavailable",
            ApiError::AlreadyRegistered(_) => "already_registered",
            ApiError::PayloadTooLarge(_) => "payload_too_large",
            ApiError::RateLimited(_) => "rate_limited",
            ApiError::Unavailable(_) => "unavailable",
            ApiError::Internal => "internal",
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::InvalidRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) | ApiError::UnknownRecipient => StatusCode::NOT_FOUND,
            ApiError::RecipientUnavailable { .. } | ApiError::AlreadyRegistered(_) => StatusCode::CONFLICT,
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::RateLimited(_) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The error object: `{"code","message", ...}` (the value under `"error"`).
    pub fn to_json(&self) -> Value {
        let mut v = json!({ "code": self.code(), "message": self.to_string() });
        if let ApiError::RecipientUnavailable { recipient_state, signal_id } = self {
            v["recipient_state"] = json!(recipient_state.as_str());
            v["signal_id"] = json!(signal_id);
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
        (self.status(), axum::Json(self.body())).into_response()
    }
}

impl From<DomainError> for ApiError {
    fn from(e: DomainError) -> Self {
        match e {
            DomainError::Invalid(m) => ApiError::InvalidRequest(m),
            DomainError::PayloadTooLarge(m) => ApiError::PayloadTooLarge(m),
            DomainError::NotFound => ApiError::NotFound("signal not found".into()),
            DomainError::UnknownRecipient => ApiError::UnknownRecipient,
            DomainError::Refused(why) => ApiError::InvalidRequest(format!("refused: {why}")),
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
            (ApiError::PayloadTooLarge("x".into()), 413, "payload_too_large"),
            (ApiError::RateLimited("x".into()), 429, "rate_limited"),
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
    fn internals_never_reach_the_message() {
        let e: ApiError = bus::Error::Storage("sqlite: disk I/O at /secret/path".into()).into();
        assert_eq!(e.to_string(), "internal error");
    }
}
