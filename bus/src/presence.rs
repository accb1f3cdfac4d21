//! The recipient-state rule (CONTRACT §2), once: which of `available`, `not_available_stale`
//! and `not_available_offline` an identity is in, from its open sessions' heartbeats.
//!
//! Deliberately pure and storage-free: the gateway applies it to its in-memory presence, and the
//! projector's SQL (`recipient_state`) is tested against it case by case.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::event::RecipientState;

/// The instant a heartbeat must be newer than to count as live at `now`. A `stale_after` too
/// large to subtract (configuration can say "never stale") saturates at the Unix epoch, which
/// every store can hold: every heartbeat counts.
pub fn stale_threshold(now: DateTime<Utc>, stale_after: Duration) -> DateTime<Utc> {
    chrono::Duration::from_std(stale_after)
        .ok()
        .and_then(|d| now.checked_sub_signed(d))
        .filter(|t| *t > DateTime::UNIX_EPOCH)
        .unwrap_or(DateTime::UNIX_EPOCH)
}

/// The state of an identity with `open_sessions` open sessions whose freshest heartbeat is
/// `freshest_heartbeat`: available when that heartbeat is newer than `threshold`, stale when
/// sessions are open but none is, offline with none open.
pub fn recipient_state(
    open_sessions: usize,
    freshest_heartbeat: Option<DateTime<Utc>>,
    threshold: DateTime<Utc>,
) -> RecipientState {
    match (open_sessions, freshest_heartbeat) {
        (0, _) => RecipientState::NotAvailableOffline,
        (_, Some(hb)) if hb > threshold => RecipientState::Available,
        _ => RecipientState::NotAvailableStale,
    }
}

/// Whether a session whose newest heartbeat is `last_heartbeat` is live.
pub fn is_live(last_heartbeat: DateTime<Utc>, threshold: DateTime<Utc>) -> bool {
    last_heartbeat > threshold
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 24, 12, 0, 0).unwrap()
    }

    #[test]
    fn given_no_open_session_then_offline_whatever_the_heartbeat() {
        let t = stale_threshold(now(), Duration::from_secs(60));
        assert_eq!(recipient_state(0, None, t), RecipientState::NotAvailableOffline);
        assert_eq!(recipient_state(0, Some(now()), t), RecipientState::NotAvailableOffline);
    }

    #[test]
    fn given_open_sessions_then_the_freshest_heartbeat_decides() {
        let t = stale_threshold(now(), Duration::from_secs(60));
        assert_eq!(recipient_state(2, Some(now() - chrono::Duration::seconds(59)), t), RecipientState::Available);
        assert_eq!(
            recipient_state(1, Some(now() - chrono::Duration::seconds(60)), t),
            RecipientState::NotAvailableStale
        );
        assert_eq!(recipient_state(1, None, t), RecipientState::NotAvailableStale);
    }

    #[test]
    fn given_a_stale_after_too_large_to_subtract_then_nothing_is_ever_stale() {
        let t = stale_threshold(now(), Duration::from_secs(u64::MAX));
        assert_eq!(t, DateTime::UNIX_EPOCH);
        let ancient = Utc.with_ymd_and_hms(1970, 1, 1, 0, 0, 1).unwrap();
        assert_eq!(recipient_state(1, Some(ancient), t), RecipientState::Available);
    }
}
