//! From JetStream to readers: the ephemeral pull consumers the stream is read with
//! (`consumer_from`), a stored message as the event readers see (`stored`), and the pull sizes
//! and deadlines reads and tails share.
//!
//! Deliberately below the log handle and its tails: it holds no consumer and no position, so
//! `jetstream.rs`, `tail.rs` and `subject_reads.rs` can all use it.

use std::time::Duration;

use async_nats::jetstream::consumer::{pull, AckPolicy, DeliverPolicy, PullConsumer};
use async_nats::jetstream::{self, Context};
use chrono::{DateTime, Utc};

use super::errors::unavailable;
use crate::codec;
use crate::error::{Error, Result};
use crate::log::Stored;

/// Messages asked for per pull request; bounded so one request never overflows a subscription.
pub(super) const FETCH_BATCH: usize = 4096;
/// A tail's long poll: how long one pull request waits for new events.
pub(super) const TAIL_EXPIRES: Duration = Duration::from_secs(2);
/// A tail that hears nothing (not even the end of its pull request) for this long assumes its
/// consumer is gone and recreates it.
pub(super) const TAIL_SILENCE: Duration = Duration::from_secs(4);
/// Ephemeral consumers the server deletes once nobody has pulled from them for this long.
pub(super) const CONSUMER_IDLE: Duration = Duration::from_secs(60);
/// How long creating a consumer may take before it is given up (and, by a tail, asked again).
/// A healthy cluster answers in milliseconds; a request sent while the meta or the stream
/// leader is dead is never answered, and the client's own 10 s timeout would hold a tail (and
/// so every push and the projector) that long after the new leaders are there. A consumer
/// created after its caller gave up is deleted by the server after `CONSUMER_IDLE`.
const CREATE_WITHIN: Duration = Duration::from_secs(2);

pub(super) async fn consumer_from(js: &Context, stream: &str, from_seq: u64) -> Result<PullConsumer> {
    let config = pull::Config {
        deliver_policy: DeliverPolicy::ByStartSequence { start_sequence: from_seq.max(1) },
        ack_policy: AckPolicy::None,
        inactive_threshold: CONSUMER_IDLE,
        memory_storage: true,
        num_replicas: 1,
        ..Default::default()
    };
    match tokio::time::timeout(CREATE_WITHIN, js.create_consumer_on_stream(config, stream)).await {
        Ok(created) => created.map_err(|e| unavailable("cannot create a consumer", e)),
        Err(_) => Err(unavailable("cannot create a consumer", format!("no answer within {CREATE_WITHIN:?}"))),
    }
}

/// An event as readers must see it: decoded (or reported undecodable), and voided if the stream
/// stored it after its writer's `accept_by` (`stored_at` is the stream's own timestamp).
pub(super) fn stored(seq: u64, subject: &str, payload: &[u8], stored_at: Option<DateTime<Utc>>) -> Result<Stored> {
    let event = match codec::decode(payload) {
        Ok(event) => event,
        Err(e) => return Err(Error::Undecodable { seq, subject: subject.to_string(), reason: codec::reason(e) }),
    };
    Ok(stored_event(seq, subject, event, stored_at))
}

/// `event`, as its writer built it (decoded, or kept by this process's append: `own.rs`), as
/// readers must see it given when the stream stored it.
pub(super) fn stored_event(
    seq: u64,
    subject: &str,
    event: crate::event::Event,
    stored_at: Option<DateTime<Utc>>,
) -> Stored {
    let event = match stored_at {
        Some(at) => crate::acceptance::as_stored_at(event, at),
        None => event,
    };
    Stored { seq, subject: subject.to_string(), event }
}

/// A direct get's or a message's stored time as chrono keeps it.
pub(super) fn chrono_at(t: time::OffsetDateTime) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp(t.unix_timestamp(), t.nanosecond())
}

/// What a consumer's delivery says of a message in its reply subject (`$JS.ACK.…`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Delivery {
    pub stream_seq: u64,
    pub consumer_seq: u64,
    pub stored_at: DateTime<Utc>,
}

/// Reads `reply` as async-nats's `Message::info` does — both layouts: the old one of 7 tokens
/// (`stream.consumer.delivered.sseq.cseq.nanos.pending`) and the newer one of 9 or more, which
/// starts with a domain and an account hash — without building its time value, which the tail
/// then turned into chrono's (~2,000 instructions a message under callgrind, every message).
pub(super) fn delivery_of(reply: Option<&str>) -> Option<Delivery> {
    let rest = reply?.strip_prefix("$JS.ACK.")?.as_bytes();
    // Token boundaries by hand: `str::split` and `parse` cost as much as the time value did.
    let mut tokens: [&[u8]; 10] = [&[]; 10];
    let mut n = 0;
    for token in rest.split(|b| *b == b'.') {
        if n == tokens.len() {
            break;
        }
        tokens[n] = token;
        n += 1;
    }
    let first = match n {
        9.. => 2,
        7 => 0,
        _ => return None,
    };
    let [_stream, _consumer, delivered, sseq, cseq, nanos, pending] = tokens[first..first + 7] else {
        return None;
    };
    number(delivered)?;
    number(pending)?;
    Some(Delivery {
        stream_seq: number(sseq)?,
        consumer_seq: number(cseq)?,
        stored_at: DateTime::from_timestamp_nanos(i64::try_from(number(nanos)?).ok()?),
    })
}

/// An unsigned decimal token: at least one digit, nothing else, no overflow.
fn number(token: &[u8]) -> Option<u64> {
    if token.is_empty() {
        return None;
    }
    token.iter().try_fold(0u64, |n, b| match b {
        b'0'..=b'9' => n.checked_mul(10)?.checked_add(u64::from(b - b'0')),
        _ => None,
    })
}

pub(super) fn stored_from_consumer(msg: jetstream::Message) -> Result<Stored> {
    let d = delivery_of(msg.reply.as_deref())
        .ok_or_else(|| Error::Decode(format!("consumer message metadata: {:?}", msg.reply.as_deref())))?;
    stored(d.stream_seq, msg.subject.as_str(), &msg.payload, Some(d.stored_at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_either_reply_layout_when_read_then_sequences_and_time_are_found() {
        let at = DateTime::from_timestamp_nanos(1_764_331_205_123_456_789);
        let want = Some(Delivery { stream_seq: 42, consumer_seq: 7, stored_at: at });
        let old = "$JS.ACK.sb.c1.1.42.7.1764331205123456789.0";
        let new = "$JS.ACK._.ABCHASH.sb.c1.1.42.7.1764331205123456789.0.tok";
        let new_bare = "$JS.ACK.hub.ABCHASH.sb.c1.2.42.7.1764331205123456789.3";
        for reply in [old, new, new_bare] {
            assert_eq!(delivery_of(Some(reply)), want, "{reply}");
        }
    }

    #[test]
    fn given_a_foreign_or_broken_reply_when_read_then_nothing() {
        for reply in [
            None,
            Some("_INBOX.x.y"),
            Some("$JS.ACK.sb.c1.1.42.7"),
            Some("$JS.ACK.sb.c1.1.x.7.1764331205123456789.0"),
            Some("$JS.ACK.sb.c1.1.42.7.1764331205123456789.-1"),
            Some("$JS.ACK.sb.c1.1.42.7.99999999999999999999999.0"),
            Some("$JS.ACK.sb.c1.1.42.7.9223372036854775808.0"),
            Some("$JS.ACK.sb.c1.1..7.1764331205123456789.0"),
            Some("$JS.ACK.sb.c1.1.+42.7.1764331205123456789.0"),
        ] {
            assert_eq!(delivery_of(reply), None, "{reply:?}");
        }
    }
}
