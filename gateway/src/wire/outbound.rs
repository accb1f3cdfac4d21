//! One text frame queued for a WebSocket session, with the instant after which it must not be
//! written: a signal's push may sit in the session's queue (a slow reader, a burst) and must
//! not reach the client once the signal has expired (CONTRACT §5, `bus::signal::is_due`).
//!
//! Deliberately only a carrier: what is written and when is the session writer's call.

use chrono::{DateTime, Utc};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outbound {
    pub text: String,
    /// A signal frame's `expires_at`; `None` for results, pongs and the welcome.
    pub expires_at: Option<DateTime<Utc>>,
}

impl Outbound {
    /// A push of a signal that expires at `expires_at`.
    pub fn signal(text: String, expires_at: DateTime<Utc>) -> Self {
        Outbound { text, expires_at: Some(expires_at) }
    }

    /// Whether the frame may still be written at `now`.
    pub fn writable_at(&self, now: DateTime<Utc>) -> bool {
        !self.expires_at.is_some_and(|at| bus::signal::is_due(at, now))
    }
}

impl From<String> for Outbound {
    fn from(text: String) -> Self {
        Outbound { text, expires_at: None }
    }
}
