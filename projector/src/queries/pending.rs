//! The pending signals an operator's force-expire matches (CONTRACT §16): the page request and
//! its rows, backend-independent.
//!
//! Deliberately only finds: each row is then expired on the stream by the gateway, under the
//! per-signal compare-and-set, so a row the read models still show pending after its delivery
//! costs a lost compare-and-set, never a wrong outcome.

use bus::force_expire::ExpireFilter;
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// A page of the pending signals `filter` matches (its rule: `ExpireFilter::matches`), created
/// at or before `created_until`, in `(expires_at, id)` order (the sweeper's index), strictly
/// after `after` (the last row of the previous page) when given.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingSignals {
    pub filter: ExpireFilter,
    /// `ExpireFilter::created_until` at the request's start, the same for every page.
    pub created_until: DateTime<Utc>,
    pub after: Option<(DateTime<Utc>, Uuid)>,
    pub limit: u32,
}

/// One pending signal a force-expire matched: what its answer lists, and what its expiry's
/// compare-and-set needs (`bus::signal::Hint::Pending` and the expected sequence).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingSignal {
    pub id: Uuid,
    pub from_identity: String,
    pub to_identity: String,
    pub signal_type: String,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    /// Carried by every event of the signal, the expiry's too.
    pub correlation_id: Option<String>,
    /// The stream sequence of the newest event folded into the row.
    pub last_event_seq: u64,
}

impl PendingSignals {
    /// The keyset to continue after `row`.
    pub fn next_after(row: &PendingSignal) -> (DateTime<Utc>, Uuid) {
        (row.expires_at, row.id)
    }
}
