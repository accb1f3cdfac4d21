//! The operator's force-expire (CONTRACT §16) as pure rules: what a request may ask (a tenant
//! and at least one more filter, each within its bounds) and which signals it matches (every
//! filter given, combined with AND; age counted from `created_at`).
//!
//! Deliberately finds nothing and expires nothing: the read models page the matches (the
//! projector's `pending_signals`, whose SQL is tested against `ExpireFilter::matches`), and each
//! match is expired by `SignalCommand::ForceExpire` under the per-signal compare-and-set, so a
//! signal being delivered at that instant is either delivered or expired, never both.

use chrono::{DateTime, Duration, Utc};
use uuid::Uuid;

use crate::error::{DomainError, DomainResult};
use crate::event::SignalSent;
use crate::names::{validate_identity, validate_signal_type, validate_tenant};

/// At most this many `signal_ids` in one request.
pub const MAX_SIGNAL_IDS: usize = 1000;

/// `older_than_seconds` is 1 to this (ten years: older than any stream keeps a signal).
pub const MAX_OLDER_THAN_SECONDS: u64 = 315_360_000;

/// The filters of one force-expire. `None` (or no ids) leaves a filter out.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExpireFilter {
    pub tenant: String,
    pub to: Option<String>,
    pub from: Option<String>,
    pub signal_type: Option<String>,
    /// Only signals created at least this long ago.
    pub older_than_seconds: Option<u64>,
    /// Only these signals (empty: any).
    pub signal_ids: Vec<Uuid>,
}

impl ExpireFilter {
    /// Whether the request may run: a valid tenant, at least one other filter (a tenant alone
    /// would expire everything), each filter within its bounds.
    pub fn check(&self) -> DomainResult<()> {
        validate_tenant(&self.tenant)?;
        if let Some(to) = &self.to {
            validate_identity(to).map_err(|e| DomainError::invalid(format!("to: {e}")))?;
        }
        if let Some(from) = &self.from {
            validate_identity(from).map_err(|e| DomainError::invalid(format!("from: {e}")))?;
        }
        if let Some(t) = &self.signal_type {
            validate_signal_type(t).map_err(|e| DomainError::invalid(format!("signal_type: {e}")))?;
        }
        if let Some(s) = self.older_than_seconds {
            if !(1..=MAX_OLDER_THAN_SECONDS).contains(&s) {
                return Err(DomainError::invalid(format!(
                    "older_than_seconds must be a whole number between 1 and {MAX_OLDER_THAN_SECONDS}"
                )));
            }
        }
        if self.signal_ids.len() > MAX_SIGNAL_IDS {
            return Err(DomainError::invalid(format!("signal_ids may list at most {MAX_SIGNAL_IDS} ids")));
        }
        let narrowed = self.to.is_some()
            || self.from.is_some()
            || self.signal_type.is_some()
            || self.older_than_seconds.is_some()
            || !self.signal_ids.is_empty();
        if !narrowed {
            return Err(DomainError::invalid(
                "give at least one filter besides tenant (to, from, signal_type, older_than_seconds, signal_ids): \
                 a tenant alone would expire everything",
            ));
        }
        Ok(())
    }

    /// The newest `created_at` a match may have at `now`: `older_than_seconds` before `now`, or
    /// `now` itself, so a signal sent after the request began is never matched (and a scan of
    /// the matches ends however fast signals arrive).
    pub fn created_until(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        let age = self.older_than_seconds.unwrap_or(0).min(MAX_OLDER_THAN_SECONDS);
        now - Duration::seconds(age as i64)
    }

    /// Whether the signal `sent` in `tenant` matches every filter at `now`. (Whether it is
    /// still pending is its state's to say, and the compare-and-set's to settle.)
    pub fn matches(&self, tenant: &str, sent: &SignalSent, now: DateTime<Utc>) -> bool {
        tenant == self.tenant
            && self.to.as_ref().is_none_or(|to| *to == sent.to)
            && self.from.as_ref().is_none_or(|from| *from == sent.from)
            && self.signal_type.as_ref().is_none_or(|t| *t == sent.signal_type)
            && sent.created_at <= self.created_until(now)
            && (self.signal_ids.is_empty() || self.signal_ids.contains(&sent.signal_id))
    }
}

#[cfg(test)]
#[path = "force_expire_tests.rs"]
mod tests;
