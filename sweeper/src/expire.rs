//! One expiry: ask the signal store to expire a signal, classify the answer, and count it.
//!
//! Deliberately decides nothing itself: the per-signal compare-and-set in `bus::store` makes
//! a racing delivery or recall win cleanly, and a lost race is an ordinary outcome here, not an
//! error. Which signals to expire, and when, is `timers.rs`'s and `scan.rs`'s business.

use std::time::Duration;

use bus::catalog::TypeTable;
use bus::signal::SignalCommand;
use bus::store::SignalStore;
use bus::DomainError;
use chrono::Utc;
use uuid::Uuid;

use crate::error::Result;
use crate::metrics;

/// The actor recorded on every event the sweeper appends.
pub const ACTOR: &str = "signalbus/sweeper";

/// What one expiry attempt came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// We appended `signal.expired` at stream sequence `seq`, `lag` after `expires_at`.
    Expired { seq: u64, signal_type: String, lag: Duration },
    /// Still pending and not due by our clock (timer fired early against wall time): retry later.
    NotYetDue,
    /// Delivered, recalled or expired already: someone else's terminal event stands.
    AlreadyTerminal,
    /// No such signal on the stream (a bounce, or a read-model row for another stream).
    NotFound,
}

/// Expires `tenant`/`id` if it is pending and due now.
pub async fn expire_one(store: &SignalStore, types: &TypeTable, tenant: &str, id: Uuid) -> Result<Outcome> {
    match store.execute(tenant, id, &SignalCommand::Expire, ACTOR, Utc::now()).await {
        Ok(executed) => {
            let (Some(&seq), Some(sent)) = (executed.appended.last(), executed.state.sent.as_deref()) else {
                return Ok(Outcome::AlreadyTerminal);
            };
            // Measured after the append succeeded: the lag a reader of the stream observes.
            let lag = (Utc::now() - sent.expires_at).to_std().unwrap_or(Duration::ZERO);
            metrics::record_expired(types, &sent.signal_type, lag);
            Ok(Outcome::Expired { seq, signal_type: sent.signal_type.clone(), lag })
        }
        // The one refusal that means "pending, ask again later" (`bus::signal::decide`).
        Err(bus::Error::Domain(DomainError::Refused("not yet due"))) => Ok(Outcome::NotYetDue),
        Err(bus::Error::Domain(DomainError::Refused(_))) => Ok(Outcome::AlreadyTerminal),
        Err(bus::Error::Domain(DomainError::NotFound)) => Ok(Outcome::NotFound),
        Err(e) => Err(e.into()),
    }
}
