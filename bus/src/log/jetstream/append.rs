//! Appending to JetStream with a known outcome. A publish whose ack does not come (the server
//! is paused, a leader is being elected, the connection dropped) may still be stored later, so
//! its outcome is resolved here, once, for every writer (sends, deliveries, acks, recalls,
//! expiries, session events):
//!
//! 1. The event is stamped `accept_by = now + ACCEPT_WINDOW` before its first publish, and
//!    every reader voids it if the stream stores it after that instant (`acceptance::as_stored_at`).
//! 2. The same bytes are published again whenever an attempt goes unanswered — no ack within
//!    `ATTEMPT_TIMEOUT`, no responders (the stream has no leader while its cluster elects one),
//!    or the connection dropped under it (counted by `connect.rs`; its ack can no longer come) —
//!    after a pause of at most `MAX_PAUSE`, so an append waiting out an election reaches the new
//!    leader within that of its election. An unconditional append carries its event id as
//!    `Nats-Msg-Id`, and the stream's duplicate window makes a repeat answer with the original
//!    sequence. A compare-and-set carries none: its own condition already lets at most one copy
//!    in (the first copy stored changes the subject's newest sequence, so every repeat fails), and
//!    the duplicate window would only cost the server a map entry per send for two minutes
//!    (`bench throughput` for 130 s: nats-server 907 MB resident instead of 1,609 MB, and ~8 %
//!    less of its CPU per signal). A compare-and-set that fails may have failed against our own
//!    earlier copy: after an unanswered attempt the subject is searched for our event id;
//!    otherwise its newest event is looked at (`newest_is_ours`).
//! 3. An answer that comes after `accept_by` is checked against the stored message's own
//!    timestamp: a copy stored in time counts (its first answer was lost), a later one is void,
//!    and then "nothing was accepted" is the truth. The same holds for a "duplicate" answer to a
//!    call's first attempt: it points at a copy an earlier call stored, which may be void. A
//!    caller that retries after "nothing was accepted" therefore appends a new event (a new id).
//!    An event with a deadline of its own (`EventBody::store_by`: a delivery, before its
//!    signal's `expires_at`) is stamped with that deadline when it comes first, and answered
//!    `TooLate` when its copy is void (or the deadline has passed before the first publish).
//! 4. If the stream answers nothing for `RESOLVE_WITHIN`, the outcome is `Indeterminate`: a copy
//!    may have been stored just before the stream went silent. Never `Unavailable`, which
//!    promises that nothing was accepted. The reads that settle an outcome (looking for an
//!    earlier copy, reading a late answer's copy back) are tried again within the same budget: a
//!    stream that has just elected a leader may refuse one read and answer the next.
//!
//! Correct as long as the writer's clock is at most `SKEW_MARGIN` ahead of the stream leader's
//! and at most `ACCEPT_WINDOW` behind it (NTP keeps both within milliseconds).
//!
//! Deliberately does not decide anything about the event: a definite refusal (a lost
//! compare-and-set, an event the server rejects) is returned as it is.

use std::time::Duration;

use async_nats::jetstream::context::{Publish, PublishErrorKind};
use async_nats::jetstream::Context;
use chrono::Utc;
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{debug, warn};

use super::errors::{api_error, error_code, found_seq, WRONG_LAST_SEQUENCE};
use super::JetStreamLog;
use crate::codec;
use crate::error::{Error, Result};
use crate::event::{Event, EventBody};
use crate::log::{Appended, EventLog, Expect};

/// How long after its first publish an event may still be stored and count.
pub const ACCEPT_WINDOW: Duration = Duration::from_secs(8);
/// How far ahead of the stream's clock a writer's clock may run without making a late event
/// count (see the module comment).
pub const SKEW_MARGIN: Duration = Duration::from_secs(1);
/// How long a writer keeps asking a silent stream before it answers `Indeterminate`.
pub const RESOLVE_WITHIN: Duration = Duration::from_secs(30);
/// How long one publish attempt waits for its ack before the same event is published again: a
/// healthy stream acks in milliseconds; an ack this late went to a leader that is gone or stuck.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(1);
/// The longest pause between two attempts (they start at 50 ms and double).
const MAX_PAUSE: Duration = Duration::from_millis(250);

/// What one publish attempt learned.
enum Attempt {
    Stored(Appended),
    /// The compare-and-set failed: the subject's newest sequence was another.
    Conflict(Option<u64>),
    /// The server refused the event itself (too big, stream sealed, ...).
    Refused(String),
    /// No answer: the event may or may not be stored.
    Unknown(String),
}

/// Appends `event` under `subject` and returns only what the stream decided.
pub(super) async fn append(log: &JetStreamLog, subject: String, event: &Event, expect: Expect) -> Result<Appended> {
    let js = &log.js;
    let started = Instant::now();
    let now = Utc::now();
    let window = chrono::Duration::from_std(ACCEPT_WINDOW).expect("a small duration");
    // A delivery's deadline is its signal's `expires_at` when that comes first: stored later,
    // it would hand out an expired signal, so such a copy is void like any late one.
    let (accept_by, capped) = crate::acceptance::deadline(event, now, window);
    if accept_by <= now {
        return Err(Error::TooLate);
    }
    // Answers received before this instant (by our clock) prove a store in time.
    let surely_in_time = accept_by - chrono::Duration::from_std(SKEW_MARGIN).expect("a small duration");
    let void =
        |unanswered| if capped { too_late(&subject, event) } else { nothing_accepted(&subject, event, unanswered) };
    let mut stamped = event.clone();
    stamped.accept_by = Some(accept_by);
    let payload: bytes::Bytes = codec::encode(&stamped)?.into();
    // Before the first publish: the tail may read the message before this call hears its ack.
    log.own.keep(&subject, payload.len(), stamped);
    let expected = match expect {
        Expect::LastSubjectSeq(n) => n,
        Expect::Any => 0,
    };
    let mut unanswered = 0u32;
    let mut backoff = Duration::from_millis(50);
    while started.elapsed() < RESOLVE_WITHIN {
        let budget = ATTEMPT_TIMEOUT.min(RESOLVE_WITHIN.saturating_sub(started.elapsed()));
        let outcome = attempt(js, log.drops.clone(), &subject, &payload, event, expect, budget).await;
        let late = Utc::now() >= surely_in_time;
        match outcome {
            Attempt::Stored(a) => {
                // Answered late, or answered "duplicate" on this call's first attempt (a copy
                // from an earlier call with this event id, which may have been stored too late
                // and be void): whether it counts is what the stored copy says.
                if late || (a.duplicate && unanswered == 0) {
                    return counts(log, &subject, a, started).await.map_err(|e| e.unwrap_or_else(|| void(1)));
                }
                if unanswered > 0 {
                    debug!(subject = %subject, unanswered, seq = a.seq, "append resolved: stored");
                }
                return Ok(a);
            }
            Attempt::Conflict(found) if unanswered > 0 => {
                // Our own earlier copy may be what the condition failed against; one we cannot
                // look for may be stored, so "nothing was accepted" would not be the truth.
                let on_subject = read_until(started, || log.read_subject(&subject)).await.map_err(|e| {
                    Error::Indeterminate(format!("cannot look for an earlier copy after a failed condition: {e}"))
                })?;
                return match on_subject.iter().find(|s| s.event.event_id == event.event_id) {
                    Some(s) if !matches!(s.event.body, EventBody::Voided(_)) => {
                        debug!(subject = %subject, seq = s.seq, "append resolved: an earlier attempt was stored");
                        Ok(Appended { seq: s.seq, duplicate: true })
                    }
                    Some(_) => Err(void(unanswered)),
                    None => Err(Error::Conflict { subject, expected, found }),
                };
            }
            Attempt::Conflict(found) => {
                if let Some(seq) = newest_is_ours(log, &subject, event).await {
                    debug!(subject = %subject, seq, "append resolved: this event was stored before");
                    return Ok(Appended { seq, duplicate: true });
                }
                return Err(Error::Conflict { subject, expected, found });
            }
            Attempt::Refused(why) => return Err(Error::Rejected(why)),
            Attempt::Unknown(why) => {
                unanswered += 1;
                debug!(subject = %subject, unanswered, error = %why, "append unanswered; publishing it again");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_PAUSE);
            }
        }
    }
    warn!(subject = %subject, event_type = event.type_name(), unanswered,
        "the stream stayed silent; the append's outcome is unknown");
    Err(Error::Indeterminate(format!("the event stream did not answer for {}s", RESOLVE_WITHIN.as_secs())))
}

/// An answer that came late (or a first "duplicate"): the stored copy counts unless the stream stored it after its
/// `accept_by`, in which case every reader sees it voided and nothing was accepted.
/// `Err(None)`: the copy is void.
async fn counts(
    log: &JetStreamLog,
    subject: &str,
    appended: Appended,
    started: Instant,
) -> Result<Appended, Option<Error>> {
    // Through the log's read path: on a replicated stream a follower may not hold it yet.
    let copy = read_until(started, || super::subject_reads::message_at(&log.stream, log.reads, appended.seq))
        .await
        .map_err(|e| Some(Error::Indeterminate(format!("cannot read back sequence {}: {e}", appended.seq))))?;
    if matches!(copy.event.body, EventBody::Voided(_)) {
        return Err(None);
    }
    debug!(subject = %subject, seq = appended.seq, "append resolved: the stored copy counts");
    Ok(appended)
}

/// Reads what decides an append's outcome, again after a failure (a stream that has just elected
/// a leader, or a connection being re-established, can refuse a read for a moment), until the
/// append's `RESOLVE_WITHIN` is spent: the outcome is knowable as soon as the stream answers, so
/// a single failed read is not yet a reason to answer "unknown".
async fn read_until<T, F, Fut>(started: Instant, mut read: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let mut backoff = Duration::from_millis(50);
    loop {
        match read().await {
            Ok(v) => return Ok(v),
            Err(e) if started.elapsed() + backoff < RESOLVE_WITHIN => {
                debug!(error = %e, "a read that resolves an append failed; reading again");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_PAUSE);
            }
            Err(e) => return Err(e),
        }
    }
}

fn nothing_accepted(subject: &str, event: &Event, unanswered: u32) -> Error {
    warn!(subject = %subject, event_type = event.type_name(), unanswered,
        "append stored only after its acceptance deadline; it is void and nothing was accepted");
    Error::Unavailable("the event stream did not answer in time; nothing was accepted".into())
}

fn too_late(subject: &str, event: &Event) -> Error {
    warn!(subject = %subject, event_type = event.type_name(), signal_id = ?event.body.signal_id(),
        "delivery stored only after its signal expired; it is void and nothing was accepted");
    Error::TooLate
}

/// The sequence of `event` if it is the newest on `subject`: a compare-and-set that failed
/// against the event itself (a compare-and-set carries no `Nats-Msg-Id`, so the server answers a
/// repeat with the failed condition, not as a duplicate). Every attempt was answered, so the
/// conflict is the truth otherwise: a failed look only loses the duplicate answer, never turns a
/// conflict into an outage.
async fn newest_is_ours(log: &JetStreamLog, subject: &str, event: &Event) -> Option<u64> {
    match log.last_on_subject(subject).await {
        Ok(Some(last)) if last.event.event_id == event.event_id && !matches!(last.event.body, EventBody::Voided(_)) => {
            Some(last.seq)
        }
        _ => None,
    }
}

async fn attempt(
    js: &Context,
    mut drops: watch::Receiver<u64>,
    subject: &str,
    payload: &bytes::Bytes,
    event: &Event,
    expect: Expect,
    timeout: Duration,
) -> Attempt {
    let publish = Publish::build().payload(payload.clone());
    let publish = match expect {
        Expect::LastSubjectSeq(n) => publish
            .expected_last_subject_sequence(n)
            .header(super::EVENT_ID_HEADER, event.event_id.to_string().as_str()),
        Expect::Any => publish.message_id(event.event_id.to_string()),
    };
    drops.borrow_and_update();
    let acked = tokio::time::timeout(timeout, async {
        match js.send_publish(subject.to_string(), publish).await {
            Ok(ack) => ack.await,
            Err(e) => Err(e),
        }
    });
    // A drop after this point may have taken the publish or its ack with it.
    let dropped = async {
        if drops.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    let result = tokio::select! {
        r = acked => match r {
            Ok(r) => r,
            Err(_) => return Attempt::Unknown("no ack in time".into()),
        },
        _ = dropped => return Attempt::Unknown("the connection dropped".into()),
    };
    match result {
        Ok(ack) => Attempt::Stored(Appended { seq: ack.sequence, duplicate: ack.duplicate }),
        Err(e) => {
            let api = api_error(&e);
            if e.kind() == PublishErrorKind::WrongLastSequence
                || api.and_then(error_code).is_some_and(|c| WRONG_LAST_SEQUENCE.contains(&c))
            {
                return Attempt::Conflict(api.and_then(|a| found_seq(&a.to_string())));
            }
            match api {
                Some(a) => Attempt::Refused(a.to_string()),
                None => Attempt::Unknown(e.to_string()),
            }
        }
    }
}
