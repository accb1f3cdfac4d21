//! Typing what the bus answered when it refused a call: its error object (`{"code","message",
//! ...}`) into the [`Error`] variant of its code, with the fields that variant carries (a
//! bounce's `recipient_state`, an invalid transition's `directive`, ...), and the §8 HTTP status
//! of each code for answers that came over the WebSocket session.
//!
//! Deliberately separate from `error.rs`, which holds the enum and what it says to do: this file
//! only reads the wire.

use std::time::Duration;

use serde_json::Value;

use crate::error::{BusError, Error};

/// CONTRACT §8 (docs/http.md): the HTTP status of each bus error code, for an answer that came
/// over the WebSocket session (so `status()` never depends on the transport).
pub fn http_status_of(code: &str) -> Option<u16> {
    Some(match code {
        "invalid_request" => 400,
        "unauthorized" => 401,
        "forbidden" => 403,
        "not_found" | "unknown_recipient" | "unknown_group" => 404,
        "recipient_unavailable"
        | "already_registered"
        | "invalid_transition"
        | "already_claimed"
        | "idempotency_conflict" => 409,
        "payload_too_large" => 413,
        "rate_limited" => 429,
        "internal" => 500,
        "unavailable" => 503,
        _ => return None,
    })
}

impl Error {
    /// The typed error of a bus error body (`{"error":{...}}`) or error object, given the
    /// HTTP status when there is one.
    pub fn from_body(body: &Value, status: Option<u16>) -> Error {
        let obj = body.get("error").filter(|e| e.is_object()).unwrap_or(body);
        let mut details = obj.as_object().cloned().unwrap_or_default();
        let code = details.remove("code").and_then(|c| c.as_str().map(str::to_string));
        let message =
            details.remove("message").and_then(|m| m.as_str().map(str::to_string)).unwrap_or_else(|| match status {
                Some(s) => format!("the bus answered {s}"),
                None => "the bus answered an error".into(),
            });
        let by_status = |s: u16| match s {
            400 => "invalid_request",
            401 => "unauthorized",
            403 => "forbidden",
            404 => "not_found",
            409 => "already_registered",
            413 => "payload_too_large",
            429 => "rate_limited",
            503 => "unavailable",
            s if s >= 500 => "internal",
            _ => "",
        };
        let code = code.unwrap_or_else(|| by_status(status.unwrap_or(0)).to_string());
        let text = |k: &str| details.get(k).and_then(Value::as_str).map(str::to_string);
        let recipient_state = text("recipient_state");
        let signal_id = text("signal_id");
        let dedupe_key = text("dedupe_key");
        let retry_after = details
            .get("retry_after_ms")
            .and_then(Value::as_f64)
            .map(|ms| Duration::from_secs_f64(ms.max(0.0) / 1000.0));
        // Boxed: the bus's error object is the large part, and `Result<T, Error>` stays small.
        let code = if code.is_empty() { "error".to_string() } else { code };
        let status = status.or_else(|| http_status_of(&code));
        let error = Box::new(BusError { code, message, status, details });
        match error.code.as_str() {
            "invalid_request" => Error::InvalidRequest(error),
            "unauthorized" => Error::Unauthorized(error),
            "forbidden" => {
                let scope = error.details.get("scope").and_then(Value::as_str).map(str::to_string);
                Error::Forbidden { scope, error }
            }
            "not_found" => Error::NotFound(error),
            "unknown_recipient" => Error::UnknownRecipient(error),
            "unknown_group" => Error::UnknownGroup(error),
            "invalid_transition" => {
                let directive = error.details.get("directive").and_then(|d| serde_json::from_value(d.clone()).ok());
                Error::InvalidTransition { directive: directive.map(Box::new), error }
            }
            "already_claimed" => {
                let claimed_by = error.details.get("claimed_by").and_then(Value::as_str).unwrap_or_default().into();
                Error::AlreadyClaimed { claimed_by, error }
            }
            "idempotency_conflict" => {
                let directive_id = error.details.get("directive_id").and_then(Value::as_str).unwrap_or_default().into();
                Error::IdempotencyConflict { directive_id, error }
            }
            "recipient_unavailable" => {
                Error::RecipientUnavailable { recipient_state: recipient_state.unwrap_or_default(), signal_id, error }
            }
            "already_registered" => Error::AlreadyRegistered(error),
            "payload_too_large" => Error::PayloadTooLarge(error),
            "rate_limited" => Error::RateLimited { retry_after, error },
            "unavailable" => Error::Unavailable { dedupe_key, error },
            "internal" => Error::Internal(error),
            _ => Error::Other(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_bounce_carries_its_state_and_signal_id() {
        let body = json!({"error": {"code": "recipient_unavailable", "message": "bob is offline",
            "recipient_state": "not_available_offline", "signal_id": "s-1"}});
        match Error::from_body(&body, Some(409)) {
            Error::RecipientUnavailable { recipient_state, signal_id, error } => {
                assert_eq!(recipient_state, "not_available_offline");
                assert_eq!(signal_id.as_deref(), Some("s-1"));
                assert_eq!(error.status, Some(409));
            }
            other => panic!("expected a bounce, got {other:?}"),
        }
    }

    #[test]
    fn a_body_without_a_code_is_typed_by_its_status() {
        let e = Error::from_body(&Value::Null, Some(503));
        assert_eq!(e.code(), "unavailable");
        assert!(e.is_spoolable() && !e.is_definitive());
        assert_eq!(Error::from_body(&Value::Null, Some(405)).code(), "error");
    }

    #[test]
    fn directive_refusals_carry_what_they_name() {
        let d = json!({"directive_id": "d-1", "type": "package.install", "issuer": "alice", "assignee": "bob",
            "status": "completed", "created_at": "2026-01-01T00:00:00Z", "deadline": "2026-01-02T00:00:00Z",
            "idempotency_key": "k"});
        let body = json!({"error": {"code": "invalid_transition", "message": "completed", "directive": d}});
        let e = Error::from_body(&body, None);
        assert_eq!((e.code(), e.status()), ("invalid_transition", Some(409)));
        assert_eq!(e.directive().map(|d| (d.directive_id.as_str(), d.status.as_str())), Some(("d-1", "completed")));
        let body = json!({"error": {"code": "already_claimed", "message": "m1 has it", "claimed_by": "m1"}});
        assert!(
            matches!(Error::from_body(&body, Some(409)), Error::AlreadyClaimed { claimed_by, .. } if claimed_by == "m1")
        );
        let body = json!({"error": {"code": "idempotency_conflict", "message": "taken", "directive_id": "d-2"}});
        assert!(
            matches!(Error::from_body(&body, Some(409)), Error::IdempotencyConflict { directive_id, .. } if directive_id == "d-2")
        );
        let e = Error::from_body(&json!({"error": {"code": "unknown_group", "message": "@nope"}}), None);
        assert!(matches!(e, Error::UnknownGroup(_)) && e.status() == Some(404) && e.is_definitive());
    }

    #[test]
    fn a_forbidden_names_the_scope_the_token_lacks() {
        let body = json!({"error": {"code": "forbidden", "message": "this token lacks the \"send\" scope",
            "scope": "send"}});
        for status in [Some(403), None] {
            let e = Error::from_body(&body, status);
            assert!(matches!(&e, Error::Forbidden { scope: Some(s), .. } if s == "send"), "{e:?}");
            assert_eq!((e.scope(), e.status(), e.code()), (Some("send"), Some(403), "forbidden"));
            assert!(e.to_string().contains("lacks that scope"), "{e}");
        }
        let other = Error::from_body(&json!({"error": {"code": "forbidden", "message": "not your plugin"}}), Some(403));
        assert!(matches!(other, Error::Forbidden { scope: None, .. }) && other.scope().is_none());
    }
}
