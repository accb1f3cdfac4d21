//! The one error type of the client: every bus error code of CONTRACT §8 and §14–§15 plus the
//! client-side failures (transport, timeout, spool, ask, a directive's outcome), each saying what
//! the caller should do about it.
//!
//! Deliberately holds no live handles (no reqwest or tungstenite errors, only their messages),
//! so an error is `Clone` and can be handed to every waiter of a failed session. Reading the
//! bus's error object into a variant is `error_wire.rs`.

use std::time::Duration;

use serde_json::{Map, Value};

use crate::types_directive::Directive;

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
    /// The bus did not take the token: missing, wrong, rotated, revoked (`token revoked`),
    /// expired (`token expired`) or its agent removed.
    #[error("{0} (the token is missing, wrong, rotated, revoked, expired or removed: get a valid token and build a new client)")]
    Unauthorized(Box<BusError>),
    /// The token may not make this call. `scope` names the scope it lacks (CONTRACT §17) when that
    /// is why; `None` for the other reasons (agent vs admin, another tenant, a plugin you do not
    /// own, a directive action that is not yours).
    #[error("{error} ({})", match scope { Some(_) => "the token lacks that scope: use a token issued with it", None => "this token may not do that: agent vs admin, another tenant, a plugin you do not own" })]
    Forbidden { scope: Option<String>, error: Box<BusError> },
    #[error("{0} (no such resource visible to you; check the id or name)")]
    NotFound(Box<BusError>),
    #[error("{0} (the recipient is not registered in your tenant: register it (admin) or fix the name)")]
    UnknownRecipient(Box<BusError>),
    #[error("{0} (no such group in your tenant: create it (admin) or fix the name)")]
    UnknownGroup(Box<BusError>),
    /// A directive transition its state does not allow (completing what ended, starting what
    /// started); carries the directive as it is now (`None` only if the bus's answer lacked it).
    #[error("{error} (the directive is {}: get_directive shows it; repeating the call fails again)", directive.as_ref().map_or("in another state", |d| d.status.as_str()))]
    InvalidTransition { directive: Option<Box<Directive>>, error: Box<BusError> },
    /// Another member of the group claimed (started) the directive first.
    #[error("{error} (another member has it: leave it to {claimed_by})")]
    AlreadyClaimed { claimed_by: String, error: Box<BusError> },
    /// The idempotency_key names a directive you created with another `to`, `type` or `params`.
    #[error("{error} (the key is taken by directive {directive_id}: use a new idempotency_key, or the same request)")]
    IdempotencyConflict { directive_id: String, error: Box<BusError> },
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
    /// `run_directive`: the worker failed the directive (`directive.failure` says why).
    #[error("directive_failed: {} (the worker failed it: see directive.failure; create a new one to try again)", .directive.describe())]
    DirectiveFailed { directive: Box<Directive> },
    /// `run_directive`: the assignee (every member of a group) declined it.
    #[error("directive_rejected: {} (declined: see directive.reason)", .directive.describe())]
    DirectiveRejected { directive: Box<Directive> },
    /// `run_directive`: its deadline passed before it ended; the bus expired it.
    #[error("directive_expired: {} (nobody finished it by its deadline: is a worker running? a longer deadline_seconds?)", .directive.describe())]
    DirectiveExpired { directive: Box<Directive> },
    /// `run_directive`: the issuer canceled it.
    #[error("directive_canceled: {} (it was canceled: see directive.reason)", .directive.describe())]
    DirectiveCanceled { directive: Box<Directive> },
    /// `run_directive`: the directive had not ended within the timeout. It goes on as it is:
    /// `get_directive` it later, or `cancel_directive` it.
    #[error("directive_timeout: {} not ended within {timeout:?} (it goes on: get_directive it later, or cancel_directive it)", .directive.describe())]
    DirectiveTimeout { directive: Box<Directive>, timeout: Duration },
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

impl Error {
    /// The wire code (CONTRACT §8) or the client-side one (`transport`, `timeout`, ...).
    pub fn code(&self) -> &str {
        match self {
            Error::InvalidRequest(e)
            | Error::Unauthorized(e)
            | Error::NotFound(e)
            | Error::UnknownRecipient(e)
            | Error::UnknownGroup(e)
            | Error::AlreadyRegistered(e)
            | Error::PayloadTooLarge(e)
            | Error::Internal(e)
            | Error::Other(e) => &e.code,
            Error::RecipientUnavailable { error, .. }
            | Error::Forbidden { error, .. }
            | Error::InvalidTransition { error, .. }
            | Error::AlreadyClaimed { error, .. }
            | Error::IdempotencyConflict { error, .. }
            | Error::RateLimited { error, .. }
            | Error::Unavailable { error, .. } => &error.code,
            Error::DirectiveFailed { .. } => "directive_failed",
            Error::DirectiveRejected { .. } => "directive_rejected",
            Error::DirectiveExpired { .. } => "directive_expired",
            Error::DirectiveCanceled { .. } => "directive_canceled",
            Error::DirectiveTimeout { .. } => "directive_timeout",
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
            | Error::NotFound(e)
            | Error::UnknownRecipient(e)
            | Error::UnknownGroup(e)
            | Error::AlreadyRegistered(e)
            | Error::PayloadTooLarge(e)
            | Error::Internal(e)
            | Error::Other(e) => Some(e.as_ref()),
            Error::RecipientUnavailable { error, .. }
            | Error::Forbidden { error, .. }
            | Error::InvalidTransition { error, .. }
            | Error::AlreadyClaimed { error, .. }
            | Error::IdempotencyConflict { error, .. }
            | Error::RateLimited { error, .. }
            | Error::Unavailable { error, .. } => Some(error.as_ref()),
            _ => None,
        }
    }

    /// The directive an error carries: `InvalidTransition`'s (as it is now) and `run_directive`'s
    /// outcomes (`DirectiveFailed`, ..., `DirectiveTimeout`).
    pub fn directive(&self) -> Option<&Directive> {
        match self {
            Error::InvalidTransition { directive, .. } => directive.as_deref(),
            Error::DirectiveFailed { directive }
            | Error::DirectiveRejected { directive }
            | Error::DirectiveExpired { directive }
            | Error::DirectiveCanceled { directive }
            | Error::DirectiveTimeout { directive, .. } => Some(directive),
            _ => None,
        }
    }

    /// The scope a `Forbidden` names: the one the token lacks (CONTRACT §17). Python `.scope`,
    /// TypeScript `scope`.
    pub fn scope(&self) -> Option<&str> {
        match self {
            Error::Forbidden { scope, .. } => scope.as_deref(),
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
                | Error::Forbidden { .. }
                | Error::NotFound(_)
                | Error::UnknownRecipient(_)
                | Error::UnknownGroup(_)
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
        matches!(self, Error::Unauthorized(_) | Error::InvalidRequest(_) | Error::Forbidden { .. })
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
}
