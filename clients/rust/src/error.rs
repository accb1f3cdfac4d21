//! The one error type of the client: every bus error code of CONTRACT §8 plus the client-side
//! failures (transport, timeout, spool, ask), each saying what the caller should do about it.
//!
//! Deliberately holds no live handles (no reqwest or tungstenite errors, only their messages),
//! so an error is `Clone` and can be handed to every waiter of a failed session.

use std::time::Duration;

use serde_json::{Map, Value};

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What the bus said when it refused a call: its error object (`{"code","message",...}`).
#[derive(Debug, Clone, PartialEq)]
pub struct BusError {
    /// The wire code (`invalid_request`, `forbidden`, ...).
    pub code: String,
    /// The bus's message (lowercase, specific).
    pub message: String,
    /// The HTTP status: the one HTTP answered with, or (over the WebSocket session) the §8 status
    /// of the code, so it never depends on the transport. `None` for a code §8 does not list.
    pub status: Option<u16>,
    /// Every other field of the error object.
    pub details: Map<String, Value>,
}

impl std::fmt::Display for BusError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

/// Every failure of this client. Each variant's message ends with what to do.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    #[error("{0} (fix the request: the message names the field; retrying it unchanged fails again)")]
    InvalidRequest(Box<BusError>),
    #[error("{0} (the token is missing, wrong, rotated or removed: get a valid token and build a new client)")]
    Unauthorized(Box<BusError>),
    #[error("{0} (this token may not do that: agent vs admin, another tenant, a plugin you do not own)")]
    Forbidden(Box<BusError>),
    #[error("{0} (no such resource visible to you; check the id or name)")]
    NotFound(Box<BusError>),
    #[error("{0} (the recipient is not registered in your tenant: register it (admin) or fix the name)")]
    UnknownRecipient(Box<BusError>),
    /// A sync send bounced: nothing was queued and nothing will ever be delivered.
    #[error("{error} (nothing was queued: send async to queue it, or retry later with a new dedupe_key)")]
    RecipientUnavailable {
        /// `not_available_stale` or `not_available_offline`.
        recipient_state: String,
        /// The bounce's signal id (recorded for audit, never queued).
        signal_id: Option<String>,
        error: Box<BusError>,
    },
    #[error("{0} (the identity exists: rotate its token instead of registering it again)")]
    AlreadyRegistered(Box<BusError>),
    #[error("{0} (payloads are at most 64 KiB encoded, plugin states 1 MiB: send less, or a reference to it)")]
    PayloadTooLarge(Box<BusError>),
    #[error("{error} (over the quota: nothing was recorded; retry after retry_after)")]
    RateLimited { retry_after: Option<Duration>, error: Box<BusError> },
    #[error("{error} ({})", if dedupe_key.is_some() { "the bus took nothing: retry later with the same dedupe_key, or give the client a spool" } else { "the bus took nothing: retry later" })]
    Unavailable { dedupe_key: Option<String>, error: Box<BusError> },
    #[error("{err} ({hint})", err = .0, hint = internal_hint(.0))]
    Internal(Box<BusError>),
    /// A code or status this client does not know (e.g. 405 from an older bus).
    #[error("{0} (an answer this client does not know: check the bus and client versions)")]
    Other(Box<BusError>),
    /// No connection to the bus could be made: nothing was sent.
    #[error("unreachable: {message} (nothing was sent: retry once the bus is reachable)")]
    Unreachable {
        message: String,
        /// The innermost cause (e.g. `Connection refused (os error 111)`).
        cause: String,
        dedupe_key: Option<String>,
    },
    /// The connection dropped before an answer came: the outcome of a send is unknown (a send's
    /// error carries its dedupe_key, and says to retry with it).
    #[error("transport: {message} ({})", if dedupe_key.is_some() { "the outcome is unknown: retry with the same dedupe_key once the bus is reachable" } else { "the connection failed before an answer came: repeat the call once the bus is reachable" })]
    Transport {
        message: String,
        /// The innermost cause, when an I/O error had one.
        cause: Option<String>,
        dedupe_key: Option<String>,
    },
    /// Nothing came in time: no answer to a call (a send's carries its dedupe_key), no signal for
    /// `receive`, no session for `connect`.
    #[error("timeout: {message} ({})", if dedupe_key.is_some() { "no answer in time, the outcome is unknown: retry with the same dedupe_key" } else { "nothing came in time: wait longer or repeat the call" })]
    Timeout { message: String, dedupe_key: Option<String> },
    /// No reply with the ask's correlation_id came in time; the question itself was sent.
    #[error("ask_timeout: no reply within {timeout:?} (the question was sent: wait longer, or recall signal_id)")]
    AskTimeout { signal_id: Option<String>, correlation_id: String, timeout: Duration },
    #[error("spool_full: {message} (the send is larger than the whole spool: raise max_bytes or send less)")]
    SpoolFull { message: String, dedupe_key: Option<String> },
    /// A spooled send's TTL ran out before the bus was back: dropped, never sent.
    #[error("expired_in_spool: spooled send {dedupe_key} expired before the bus was back (send it again if it still matters)")]
    SpoolExpired { dedupe_key: String },
    #[error("spool: {0} (check the spool directory's permissions and free space)")]
    Spool(String),
    #[error("closed: the client was closed (build a new one)")]
    Closed,
    #[error("protocol: {0} (the bus answered something this client does not understand: check the versions)")]
    Protocol(String),
    /// A mistake in the calling code (`receive` on a client with a handler, a zero timeout, ...):
    /// nothing was sent, and retrying cannot help.
    #[error("usage: {0} (a mistake in the calling code: fix the call; nothing was sent)")]
    Usage(String),
}

fn internal_hint(e: &BusError) -> &'static str {
    if e.details.contains_key("dedupe_key") {
        "the bus failed: retry later with the same dedupe_key and report it if it persists"
    } else {
        "the bus failed: retry later and report it if it persists"
    }
}

/// CONTRACT §8 (docs/http.md): the HTTP status of each bus error code, for an answer that came
/// over the WebSocket session (so `status()` never depends on the transport).
pub fn http_status_of(code: &str) -> Option<u16> {
    Some(match code {
        "invalid_request" => 400,
        "unauthorized" => 401,
        "forbidden" => 403,
        "not_found" | "unknown_recipient" => 404,
        "recipient_unavailable" | "already_registered" => 409,
        "payload_too_large" => 413,
        "rate_limited" => 429,
        "internal" => 500,
        "unavailable" => 503,
        _ => return None,
    })
}

impl Error {
    /// The wire code (CONTRACT §8) or the client-side one (`transport`, `timeout`, ...).
    pub fn code(&self) -> &str {
        match self {
            Error::InvalidRequest(e)
            | Error::Unauthorized(e)
            | Error::Forbidden(e)
            | Error::NotFound(e)
            | Error::UnknownRecipient(e)
            | Error::AlreadyRegistered(e)
            | Error::PayloadTooLarge(e)
            | Error::Internal(e)
            | Error::Other(e) => &e.code,
            Error::RecipientUnavailable { error, .. }
            | Error::RateLimited { error, .. }
            | Error::Unavailable { error, .. } => &error.code,
            Error::Unreachable { .. } => "unreachable",
            Error::Transport { .. } => "transport",
            Error::Timeout { .. } => "timeout",
            Error::AskTimeout { .. } => "ask_timeout",
            Error::SpoolFull { .. } => "spool_full",
            Error::SpoolExpired { .. } => "expired_in_spool",
            Error::Spool(_) => "spool",
            Error::Closed => "closed",
            Error::Protocol(_) => "protocol",
            Error::Usage(_) => "usage",
        }
    }

    /// The bus's error object, when the bus answered.
    pub fn bus(&self) -> Option<&BusError> {
        match self {
            Error::InvalidRequest(e)
            | Error::Unauthorized(e)
            | Error::Forbidden(e)
            | Error::NotFound(e)
            | Error::UnknownRecipient(e)
            | Error::AlreadyRegistered(e)
            | Error::PayloadTooLarge(e)
            | Error::Internal(e)
            | Error::Other(e) => Some(e.as_ref()),
            Error::RecipientUnavailable { error, .. }
            | Error::RateLimited { error, .. }
            | Error::Unavailable { error, .. } => Some(error.as_ref()),
            _ => None,
        }
    }

    /// The HTTP status, when the answer came over HTTP.
    pub fn status(&self) -> Option<u16> {
        self.bus().and_then(|e| e.status)
    }

    /// How long the bus asked to wait (`RateLimited`): Python `.retry_after` (seconds),
    /// TypeScript `.retryAfterMs`.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Error::RateLimited { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// The dedupe_key of the send this error answers, when there is one to retry with.
    pub fn dedupe_key(&self) -> Option<&str> {
        match self {
            Error::Transport { dedupe_key, .. }
            | Error::Unreachable { dedupe_key, .. }
            | Error::Timeout { dedupe_key, .. }
            | Error::Unavailable { dedupe_key, .. }
            | Error::SpoolFull { dedupe_key, .. } => dedupe_key.as_deref(),
            Error::SpoolExpired { dedupe_key } => Some(dedupe_key),
            other => other.bus().and_then(|e| e.details.get("dedupe_key")).and_then(Value::as_str),
        }
    }

    /// True when the bus settled the request for good: a spooled send answered so is deleted,
    /// never retried. Everything else (503, 429, 500, 401, transport) may succeed later.
    pub fn is_definitive(&self) -> bool {
        matches!(
            self,
            Error::InvalidRequest(_)
                | Error::Forbidden(_)
                | Error::NotFound(_)
                | Error::UnknownRecipient(_)
                | Error::RecipientUnavailable { .. }
                | Error::PayloadTooLarge(_)
        )
    }

    /// Whether the send should go to the spool: the bus did not take it, or may not have.
    pub(crate) fn is_spoolable(&self) -> bool {
        matches!(
            self,
            Error::Transport { .. } | Error::Unreachable { .. } | Error::Timeout { .. } | Error::Unavailable { .. }
        )
    }

    /// The innermost cause of a failed connection or exchange, when there is one.
    pub fn transport_cause(&self) -> Option<&str> {
        match self {
            Error::Unreachable { cause, .. } => Some(cause),
            Error::Transport { cause, .. } => cause.as_deref(),
            _ => None,
        }
    }

    /// Fatal for a session: reconnecting with the same token cannot help.
    pub(crate) fn is_fatal_for_session(&self) -> bool {
        matches!(self, Error::Unauthorized(_) | Error::InvalidRequest(_) | Error::Forbidden(_))
    }

    /// Attaches the send's dedupe_key to errors that are retried with it.
    pub(crate) fn with_dedupe_key(mut self, key: Option<&str>) -> Error {
        if let Some(k) = key {
            match &mut self {
                Error::Transport { dedupe_key, .. }
                | Error::Unreachable { dedupe_key, .. }
                | Error::Timeout { dedupe_key, .. }
                | Error::Unavailable { dedupe_key, .. }
                | Error::SpoolFull { dedupe_key, .. } => {
                    dedupe_key.get_or_insert_with(|| k.to_string());
                }
                Error::Internal(e) => {
                    e.details.entry("dedupe_key").or_insert_with(|| Value::String(k.to_string()));
                }
                _ => {}
            }
        }
        self
    }

    pub(crate) fn transport(message: impl Into<String>) -> Error {
        Error::Transport { message: message.into(), cause: None, dedupe_key: None }
    }

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
            "forbidden" => Error::Forbidden(error),
            "not_found" => Error::NotFound(error),
            "unknown_recipient" => Error::UnknownRecipient(error),
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
}
