//! The wire shapes of CONTRACT §16 besides a send's: an inbox read that may wait, the admin's
//! force-expire filter and its two answers (what was expired, or the dry run's list).
//!
//! Deliberately data only, like `types.rs` — with the one check that needs no bus: a filter
//! must name a tenant and something else (`ExpireFilter::body`). The calls are `timing.rs`.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::{Error, Result};

/// The longest an inbox read may wait (CONTRACT §16).
pub const MAX_INBOX_WAIT: Duration = Duration::from_secs(60);

/// An inbox read (`GET /v1/inbox`): `inbox_with`. `Default` is `inbox(None)`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InboxQuery {
    /// At most this many signals (the bus's default: 100).
    pub limit: Option<u32>,
    /// When nothing is pending, wait up to this long for a signal (rounded up to whole seconds;
    /// at most [`MAX_INBOX_WAIT`], else `Error::Usage`). `None` or zero: answer at once.
    pub wait: Option<Duration>,
    /// Deliver what it answers (`delivered_via: inbox`), as `drain`.
    pub drain: bool,
}

/// What `AdminClient::expire_signals` expires: the pending signals of `tenant` matching every
/// filter given (CONTRACT §16; scheduled ones included). Build it with [`ExpireFilter::new`] and
/// the setters; a tenant alone is `Error::Usage` (it would expire everything in it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExpireFilter {
    /// The tenant (required).
    pub tenant: String,
    /// Only signals to this identity.
    pub to: Option<String>,
    /// Only signals from this identity.
    pub from: Option<String>,
    /// Only signals of this type.
    pub signal_type: Option<String>,
    /// Only signals created at least this long ago (rounded up to whole seconds; 1 s to ten
    /// years, else the bus's `InvalidRequest`).
    pub older_than: Option<Duration>,
    /// Only these signals (1 to 1,000 ids; an empty list is the bus's `InvalidRequest`).
    pub signal_ids: Option<Vec<String>>,
    /// Expire nothing: answer what would be expired ([`ExpireOutcome::DryRun`]).
    pub dry_run: bool,
}

impl ExpireFilter {
    /// A filter on `tenant`; add at least one more with the setters.
    pub fn new(tenant: impl Into<String>) -> Self {
        ExpireFilter { tenant: tenant.into(), ..Default::default() }
    }
    /// Only signals to `identity`.
    pub fn to(mut self, identity: impl Into<String>) -> Self {
        self.to = Some(identity.into());
        self
    }
    /// Only signals from `identity`.
    pub fn from(mut self, identity: impl Into<String>) -> Self {
        self.from = Some(identity.into());
        self
    }
    /// Only signals of `signal_type`.
    pub fn signal_type(mut self, signal_type: impl Into<String>) -> Self {
        self.signal_type = Some(signal_type.into());
        self
    }
    /// Only signals created at least `age` ago.
    pub fn older_than(mut self, age: Duration) -> Self {
        self.older_than = Some(age);
        self
    }
    /// Only these signals.
    pub fn signal_ids<I, S>(mut self, ids: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.signal_ids = Some(ids.into_iter().map(Into::into).collect());
        self
    }
    /// `true`: expire nothing, list what would be expired.
    pub fn dry_run(mut self, dry_run: bool) -> Self {
        self.dry_run = dry_run;
        self
    }

    /// The request body; `Error::Usage` without a tenant or without another filter.
    pub(crate) fn body(&self) -> Result<Value> {
        if self.tenant.is_empty() {
            return Err(Error::Usage("expire_signals takes a tenant (ExpireFilter::new(tenant))".into()));
        }
        let mut body = json!({"tenant": self.tenant});
        let filters = [
            ("to", self.to.as_ref().map(|v| json!(v))),
            ("from", self.from.as_ref().map(|v| json!(v))),
            ("signal_type", self.signal_type.as_ref().map(|v| json!(v))),
            ("older_than_seconds", self.older_than.map(|d| json!(d.as_secs() + u64::from(d.subsec_nanos() > 0)))),
            ("signal_ids", self.signal_ids.as_ref().map(|v| json!(v))),
        ];
        let mut any = false;
        for (name, value) in filters {
            if let Some(v) = value {
                body[name] = v;
                any = true;
            }
        }
        if !any {
            return Err(Error::Usage(
                "expire_signals needs a filter besides the tenant (to, from, signal_type, older_than, signal_ids): \
                 a tenant alone would expire every pending signal in it"
                    .into(),
            ));
        }
        if self.dry_run {
            body["dry_run"] = json!(true);
        }
        Ok(body)
    }
}

/// What `expire_signals` did: expired (`Expired`), or, for a dry run, what it would expire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExpireOutcome {
    /// Signals were expired (`expired_reason: "forced"` on their rows).
    Expired(ExpireResult),
    /// A dry run: nothing was expired.
    DryRun(ExpirePreview),
}

impl ExpireOutcome {
    /// The counts, or `None` for a dry run.
    pub fn expired(&self) -> Option<&ExpireResult> {
        match self {
            ExpireOutcome::Expired(r) => Some(r),
            ExpireOutcome::DryRun(_) => None,
        }
    }
    /// The dry run's list, or `None` when signals were expired.
    pub fn dry_run(&self) -> Option<&ExpirePreview> {
        match self {
            ExpireOutcome::DryRun(p) => Some(p),
            ExpireOutcome::Expired(_) => None,
        }
    }
}

/// `expire_signals`' counts: each matched signal has one outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct ExpireResult {
    /// Pending signals it expired.
    pub expired: u64,
    /// Matched signals that were delivered, recalled or expired before the force-expire reached
    /// them (it lost that race).
    #[serde(default)]
    pub skipped: u64,
}

/// A dry run's answer: the pending signals the filter matches now.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ExpirePreview {
    /// The signals it would expire.
    #[serde(default)]
    pub would_expire: Vec<ExpireCandidate>,
    /// How many (`would_expire.len()` unless the bus cut the list short).
    #[serde(default)]
    pub count: u64,
}

impl ExpirePreview {
    /// The matched signals' ids.
    pub fn signal_ids(&self) -> Vec<&str> {
        self.would_expire.iter().map(|c| c.signal_id.as_str()).collect()
    }
}

/// One pending signal a dry run matched.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ExpireCandidate {
    /// Its id.
    pub signal_id: String,
    /// Its recipient.
    pub to: String,
    /// Its sender.
    pub from: String,
    /// Its type.
    #[serde(rename = "type")]
    pub signal_type: String,
    /// When the bus took it.
    pub created_at: DateTime<Utc>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filter_names_a_tenant_and_something_else() {
        assert!(matches!(ExpireFilter::new("default").body(), Err(Error::Usage(m)) if m.contains("tenant alone")));
        assert!(matches!(ExpireFilter::new("").to("dave").body(), Err(Error::Usage(_))));
        let body = ExpireFilter::new("default").to("dave").older_than(Duration::from_millis(1500)).body().unwrap();
        assert_eq!(body, json!({"tenant": "default", "to": "dave", "older_than_seconds": 2}));
        let dry = ExpireFilter::new("t").signal_ids(["a", "b"]).from("x").signal_type("S").dry_run(true).body();
        let dry = dry.unwrap();
        assert_eq!(
            dry,
            json!({"tenant": "t", "from": "x", "signal_type": "S", "signal_ids": ["a", "b"], "dry_run": true})
        );
    }
}
