//! From JetStream to readers: the ephemeral pull consumers the stream is read with
//! (`consumer_from`), a stored message as the event readers see (`stored`), and the pull sizes
//! and deadlines reads and tails share.
//!
//! Deliberately below the log handle and its tails: it holds no consumer and no position, so
//! `jetstream.rs`, `tail.rs` and `subject_reads.rs` can all use it.

use std::time::Duration;

use async_nats::jetstream::consumer::{pull, AckPolicy, DeliverPolicy, PullConsumer};
use async_nats::jetstream::{self, Context};

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
pub(super) fn stored(seq: u64, subject: &str, payload: &[u8], stored_at: time::OffsetDateTime) -> Result<Stored> {
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
    stored_at: time::OffsetDateTime,
) -> Stored {
    let event = match chrono::DateTime::from_timestamp(stored_at.unix_timestamp(), stored_at.nanosecond()) {
        Some(at) => crate::acceptance::as_stored_at(event, at),
        None => event,
    };
    Stored { seq, subject: subject.to_string(), event }
}

pub(super) fn stored_from_consumer(msg: jetstream::Message) -> Result<Stored> {
    let info = msg.info().map_err(|e| Error::Decode(format!("consumer message metadata: {e}")))?;
    let (seq, published) = (info.stream_sequence, info.published);
    stored(seq, msg.subject.as_str(), &msg.payload, published)
}
