//! Scheduled delivery (CONTRACT §16) as pure rules: which `deliver_at` a send may ask for
//! (`deliver_at_for`) and when a scheduled signal is visible to its recipient (`is_visible`).
//! The release event of a due signal (`release_sent`, `released`) and the one TTL rule (`is_due`)
//! are here too; whether a signal's state allows a release is `signal::decide`'s.
//!
//! Deliberately no I/O and no clock: `now` is an argument, and so is the stream's retention.
//! `send.rs` applies `deliver_at_for`, `signal.rs` applies `is_visible` inside `decide`; this
//! file is a leaf (it names neither a send request nor a signal's state); who
//! releases (the sweeper) and who pushes after a release (the gateway) is theirs to carry out.

use chrono::{DateTime, Duration, SecondsFormat, SubsecRound, Utc};

use crate::catalog::DeliveryClass;
use uuid::Uuid;

use crate::error::{DomainError, DomainResult, Refusal};
use crate::event::{EventBody, SignalReleased, SignalSent};

/// What a send asked for, as far as its schedule goes (from `send::SendRequest`).
#[derive(Debug, Clone, Copy)]
pub struct Asked<'a> {
    pub deliver_after_seconds: Option<u64>,
    pub deliver_at: Option<DateTime<Utc>>,
    /// For the message refusing a sync one: its type, and whether its class was asked for.
    pub signal_type: &'a str,
    pub explicit_class: Option<DeliveryClass>,
}

/// How far ahead a send may be scheduled, and the largest `deliver_after_seconds`: 30 days.
pub const MAX_DELAY_SECONDS: u64 = 2_592_000;

/// Whether a signal scheduled for `deliver_at` (`None`: not scheduled) may be seen by its
/// recipient at `now`: once due by the reader's clock, or once its release is on the stream
/// (the sweeper's clock said so; a reader whose clock trails by a hair must not hold it back).
pub fn is_visible(deliver_at: Option<DateTime<Utc>>, released: bool, now: DateTime<Utc>) -> bool {
    released || deliver_at.is_none_or(|at| now >= at)
}

/// The `deliver_at` a send asked for — `deliver_after_seconds` from `now`, or `deliver_at` —
/// at the read models' precision (whole microseconds); `None` when it asked for neither.
/// `class` and `ttl_seconds` are the send's after its type's defaults; `retention` is how long
/// the stream keeps events (`None`: no bound known). Refused, each with its own message: both
/// fields, a delay outside 1 … 30 days, a `deliver_at` not in the future or more than 30 days
/// ahead, a sync signal, and a signal whose `deliver_at + ttl` lies past the retention from now
/// (the stream must still hold it when it ends).
pub fn deliver_at_for(
    req: &Asked<'_>,
    class: DeliveryClass,
    ttl_seconds: u64,
    now: DateTime<Utc>,
    retention: Option<std::time::Duration>,
) -> DomainResult<Option<DateTime<Utc>>> {
    let at = match (req.deliver_after_seconds, req.deliver_at) {
        (None, None) => return Ok(None),
        (Some(_), Some(_)) => return Err(DomainError::invalid("give deliver_after_seconds or deliver_at, not both")),
        (Some(after), None) => {
            if !(1..=MAX_DELAY_SECONDS).contains(&after) {
                return Err(DomainError::invalid(format!(
                    "deliver_after_seconds must be between 1 and {MAX_DELAY_SECONDS} (30 days), got {after}"
                )));
            }
            now + Duration::seconds(after as i64)
        }
        (None, Some(at)) => {
            let at = at.trunc_subsecs(6);
            if at <= now {
                return Err(DomainError::invalid(format!("deliver_at {} is not in the future", ts(at))));
            }
            if at > now + Duration::seconds(MAX_DELAY_SECONDS as i64) {
                return Err(DomainError::invalid(format!(
                    "deliver_at {} is more than 30 days ({MAX_DELAY_SECONDS} seconds) ahead",
                    ts(at)
                )));
            }
            at
        }
    };
    if class == DeliveryClass::Sync {
        return Err(DomainError::invalid(match req.explicit_class {
            Some(_) => {
                "a sync signal cannot be scheduled: deliver_after_seconds and deliver_at need delivery_class async"
                    .to_string()
            }
            None => format!(
                "{} is sync by default and a sync signal cannot be scheduled: send it with delivery_class async",
                req.signal_type
            ),
        }));
    }
    let at = at.trunc_subsecs(6);
    let ends = at + Duration::seconds(ttl_seconds as i64);
    if let Some(kept) = retention.and_then(|r| Duration::from_std(r).ok()) {
        if ends > now + kept {
            return Err(DomainError::invalid(format!(
                "deliver_at + ttl_seconds ends at {}, past the stream's retention ({}) from now: schedule it sooner or \
                 give a shorter ttl_seconds",
                ts(ends),
                span(kept)
            )));
        }
    }
    Ok(Some(at))
}

/// Whether a signal that expires at `expires_at` is past its TTL at `now`: the one TTL rule
/// (`decide`, the sweeper's timers, the push after the tail).
pub fn is_due(expires_at: DateTime<Utc>, now: DateTime<Utc>) -> bool {
    now >= expires_at
}

/// A release of a pending signal whose newest event is its send.
pub(crate) fn release_sent(sent: &SignalSent, now: DateTime<Utc>) -> DomainResult<Vec<EventBody>> {
    let Some(deliver_at) = sent.deliver_at else { return Err(DomainError::Refused(Refusal::NotScheduled)) };
    released(sent.signal_id, &sent.to, deliver_at, sent.expires_at, now)
}

/// A release of a pending, unreleased signal `id` to `to`, scheduled for `deliver_at` and expiring
/// at `expires_at`: only once due, and never past its TTL (that is the expiry's turn).
pub(crate) fn released(
    id: Uuid,
    to: &str,
    deliver_at: DateTime<Utc>,
    expires_at: DateTime<Utc>,
    now: DateTime<Utc>,
) -> DomainResult<Vec<EventBody>> {
    if is_due(expires_at, now) {
        return Err(DomainError::Refused(Refusal::Expired));
    }
    if now < deliver_at {
        return Err(DomainError::Refused(Refusal::NotYetDue));
    }
    Ok(vec![EventBody::SignalReleased(SignalReleased { signal_id: id, to: to.to_string(), deliver_at, expires_at })])
}

fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

/// A span as an operator wrote it: whole days, hours or minutes when it is one, else seconds.
fn span(d: Duration) -> String {
    let s = d.num_seconds();
    let (n, unit) = [(86_400, "day"), (3_600, "hour"), (60, "minute")]
        .into_iter()
        .find(|(u, _)| s > 0 && s % u == 0)
        .map_or((s, "second"), |(u, name)| (s / u, name));
    format!("{n} {unit}{}", if n == 1 { "" } else { "s" })
}

#[cfg(test)]
#[path = "schedule_tests.rs"]
mod tests;
