//! Scheduled sends (CONTRACT §16) as far as the client judges them itself: a send names at most
//! one of `deliver_after_seconds` / `deliver_at`, only on an async send, and a delay of at least
//! a second (`check`, before anything is sent); what the spool keeps of one (`for_spool`: a
//! delay becomes the instant it names); when its TTL starts (`ttl_start`); and what a replay sends
//! (`for_replay`: a `deliver_at` that is due goes out as a plain send).
//!
//! Deliberately leaves the clock's questions to the bus: whether `deliver_at` lies in the future,
//! within 30 days, within the stream's retention — its `InvalidRequest` says so. The spool's
//! rules are the Python and TypeScript clients' (they read the same files).

use chrono::{DateTime, Utc};

use crate::error::{Error, Result};
use crate::types_send::SendRequest;

/// A scheduled send due sooner than this is replayed at once, without its `deliver_at` (which
/// the bus would refuse once it has passed).
const SCHEDULE_MARGIN_MS: i64 = 1000;

/// `Error::Usage` for a scheduled send the bus would refuse whatever the clock says: both
/// fields, a sync send, a zero delay. A send that is not scheduled passes.
pub(crate) fn check(req: &SendRequest) -> Result<()> {
    if req.deliver_after_seconds.is_none() && req.deliver_at.is_none() {
        return Ok(());
    }
    if req.deliver_after_seconds.is_some() && req.deliver_at.is_some() {
        return Err(Error::Usage("a send takes deliver_after or deliver_at, not both".into()));
    }
    if req.effective_class() == "sync" {
        return Err(Error::Usage(format!(
            "only an async send can be scheduled: {} is sent sync (set delivery_class(\"async\"), or send it \
             without deliver_after/deliver_at)",
            req.signal_type
        )));
    }
    if req.deliver_after_seconds == Some(0) {
        return Err(Error::Usage("deliver_after must be a positive delay".into()));
    }
    Ok(())
}

/// The request as the spool keeps it: a delay becomes the instant it names from `now` (the
/// replay comes later, and must not push the delivery back by the time spent spooled).
pub(crate) fn for_spool(req: &SendRequest, now: DateTime<Utc>) -> SendRequest {
    let mut req = req.clone();
    if let Some(secs) = req.deliver_after_seconds.take() {
        // Capped far past the bus's 30 days (it refuses the send), so the sum cannot overflow.
        req.deliver_at = Some(now + chrono::Duration::seconds(secs.min(u64::from(u32::MAX)) as i64));
    }
    req
}

/// When a spooled send's TTL starts: when it was spooled, or a scheduled one's `deliver_at` if
/// later (CONTRACT §16: `expires_at = deliver_at + ttl`).
pub(crate) fn ttl_start(spooled_at: DateTime<Utc>, req: &SendRequest) -> DateTime<Utc> {
    req.deliver_at.map_or(spooled_at, |at| at.max(spooled_at))
}

/// What a replay sends at `now`: the spooled request with `ttl_seconds` left, and its
/// `deliver_at` only while that is still ahead by a margin — a due one is sent at once.
pub(crate) fn for_replay(spooled: &SendRequest, ttl_left: u64, now: DateTime<Utc>) -> SendRequest {
    let mut req = spooled.clone();
    req.ttl_seconds = Some(ttl_left);
    if req.deliver_at.is_some_and(|at| (at - now).num_milliseconds() < SCHEDULE_MARGIN_MS) {
        req.deliver_at = None;
    }
    req
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn at(secs_from_now: i64) -> DateTime<Utc> {
        Utc::now() + chrono::Duration::seconds(secs_from_now)
    }

    #[test]
    fn a_scheduled_send_is_async_with_one_of_its_two_fields() {
        let plain = SendRequest::new("bob", "StatusUpdate");
        assert!(check(&plain).is_ok());
        assert!(check(&plain.clone().deliver_after(Duration::from_millis(200))).is_ok(), "rounded up to 1 s");
        assert!(check(&plain.clone().deliver_at(at(-5))).is_ok(), "the past is the bus's to refuse");
        let usage = |r: SendRequest| match check(&r) {
            Err(Error::Usage(m)) => m,
            other => panic!("expected Usage for {r:?}, got {other:?}"),
        };
        assert!(usage(plain.clone().deliver_after(Duration::from_secs(2)).deliver_at(at(5))).contains("not both"));
        assert!(usage(SendRequest::new("bob", "Question").deliver_after(Duration::from_secs(2))).contains("sync"));
        let sync = plain.clone().delivery_class("sync").deliver_at(at(5));
        assert!(usage(sync).contains("async"));
        assert!(usage(plain.clone().deliver_after(Duration::ZERO)).contains("positive"));
        let async_question = SendRequest::new("bob", "Question").delivery_class("async");
        assert!(check(&async_question.deliver_after(Duration::from_secs(1))).is_ok());
    }

    #[test]
    fn the_spool_keeps_the_instant_and_a_replay_drops_it_once_due() {
        let now = Utc::now();
        let req = SendRequest::new("bob", "StatusUpdate").deliver_after(Duration::from_millis(1500));
        assert_eq!(req.deliver_after_seconds, Some(2));
        let kept = for_spool(&req, now);
        assert_eq!((kept.deliver_after_seconds, kept.deliver_at), (None, Some(now + chrono::Duration::seconds(2))));
        assert_eq!(ttl_start(now, &kept), now + chrono::Duration::seconds(2));
        assert_eq!(ttl_start(now, &SendRequest::new("bob", "StatusUpdate")), now);
        let ahead = for_replay(&kept, 60, now);
        assert_eq!((ahead.ttl_seconds, ahead.deliver_at), (Some(60), kept.deliver_at));
        let due = for_replay(&kept, 60, now + chrono::Duration::milliseconds(1200));
        assert_eq!(due.deliver_at, None, "less than a second ahead: sent at once");
        let body = serde_json::to_value(&kept).unwrap();
        let text = body["deliver_at"].as_str().unwrap();
        assert!(text.ends_with('Z') && text.len() == "2026-01-01T00:00:00.000Z".len(), "{text}");
        assert!(body.get("deliver_after_seconds").is_none(), "{body}");
    }
}
