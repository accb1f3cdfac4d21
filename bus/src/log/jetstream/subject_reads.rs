//! Reading one subject (every event on it, or its newest) so a writer always sees its own
//! writes. On one server a direct get is answered by the server that stored the event. On a
//! replicated stream any replica answers a direct get, and a follower a few entries behind
//! hides an event its writer was just told is stored (seen on a 3-node 2.15.1 cluster: 2 in 300
//! reads under load). A stale read there is not just a retried compare-and-set: a recall right
//! after a send would answer `not_found`. So a replicated stream is read through the leader
//! (`STREAM.MSG.GET`), the only member that answers nothing older than what it acknowledged.
//!
//! Deliberately only these point reads (a subject's events, its newest, one sequence); `read`
//! and `tail` page through consumers.

use async_nats::jetstream::message::StreamMessage;
use async_nats::jetstream::stream::{DirectGetErrorKind, LastRawMessageErrorKind, Stream};
use async_nats::jetstream::{self};

use super::errors::unavailable;
use super::messages::{chrono_at, stored};
use crate::error::{Error, Result};
use crate::log::Stored;

/// Who answers a subject read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ReadPath {
    /// Direct gets, answered by any member holding the stream: one server.
    Direct,
    /// The stream leader's message API: a replicated stream.
    Leader,
}

impl ReadPath {
    /// The path for a stream with `replicas` replicas.
    pub(super) fn for_replicas(replicas: usize) -> ReadPath {
        if replicas > 1 {
            ReadPath::Leader
        } else {
            ReadPath::Direct
        }
    }
}

/// Every event on `subject` from sequence `from` on, oldest first: a signal has a handful,
/// walked with "next message on the subject from this sequence" (on nats-server 2.9 each walk
/// visits the message blocks from there on, so `from` is worth knowing: `marks.rs`).
pub(super) async fn read_subject(stream: &Stream, path: ReadPath, subject: &str, from: u64) -> Result<Vec<Stored>> {
    read_subject_sized(stream, path, subject, from).await.map(|(events, _)| events)
}

/// `read_subject`, with the encoded size of what it read.
///
/// The subject's newest event is read first, and the walk stops at it: a subject of n events
/// costs n round trips, not n + 1 (the last of which only learned that nothing followed), and
/// one that holds a single event — a directive being acted on, a signal being recalled — one.
/// The read is the subject as of that first answer, which comes after any append its caller
/// was told of: a writer still sees its own writes, and anything appended meanwhile is what a
/// compare-and-set on the newest sequence is for.
pub(super) async fn read_subject_sized(
    stream: &Stream,
    path: ReadPath,
    subject: &str,
    from: u64,
) -> Result<(Vec<Stored>, usize)> {
    let from = from.max(1);
    let Some(last) = last_message(stream, path, subject).await?.filter(|m| m.sequence >= from) else {
        return Ok((Vec::new(), 0));
    };
    let (mut out, mut bytes) = (Vec::new(), 0);
    let mut next = from;
    while next < last.sequence {
        let msg = match path {
            ReadPath::Direct => match stream.direct_get_next_for_subject(subject, Some(next)).await {
                Ok(msg) => jetstream::message::StreamMessage::try_from(msg.message)
                    .map_err(|e| Error::Decode(format!("direct get headers: {e}")))?,
                Err(e) if e.kind() == DirectGetErrorKind::NotFound => break, // removed meanwhile
                Err(e) => return Err(unavailable("cannot read subject", e)),
            },
            ReadPath::Leader => match stream.get_first_raw_message_by_subject(subject, next).await {
                Ok(msg) => msg,
                Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => break,
                Err(e) => return Err(unavailable("cannot read subject", e)),
            },
        };
        if msg.sequence >= last.sequence {
            break;
        }
        next = msg.sequence + 1;
        bytes += msg.payload.len();
        out.push(stored(msg.sequence, msg.subject.as_str(), &msg.payload, chrono_at(msg.time))?);
    }
    bytes += last.payload.len();
    out.push(stored(last.sequence, last.subject.as_str(), &last.payload, chrono_at(last.time))?);
    Ok((out, bytes))
}

/// The newest event on `subject`, if any.
pub(super) async fn last_on_subject(stream: &Stream, path: ReadPath, subject: &str) -> Result<Option<Stored>> {
    match last_message(stream, path, subject).await? {
        Some(msg) => Ok(Some(stored(msg.sequence, msg.subject.as_str(), &msg.payload, chrono_at(msg.time))?)),
        None => Ok(None),
    }
}

/// The newest message on `subject`, as the stream stores it.
async fn last_message(stream: &Stream, path: ReadPath, subject: &str) -> Result<Option<StreamMessage>> {
    let msg = match path {
        ReadPath::Direct => match stream.direct_get_last_for_subject(subject).await {
            Ok(msg) => msg,
            Err(e) if e.kind() == DirectGetErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(unavailable("cannot read subject", e)),
        },
        ReadPath::Leader => match stream.get_last_raw_message_by_subject(subject).await {
            Ok(msg) => msg,
            Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => return Ok(None),
            Err(e) => return Err(unavailable("cannot read subject", e)),
        },
    };
    Ok(Some(msg))
}

/// When the message at `seq` was stored (a probe for `marks.rs`).
pub(super) async fn stored_at(stream: &Stream, path: ReadPath, seq: u64) -> Result<chrono::DateTime<chrono::Utc>> {
    let time = match path {
        ReadPath::Direct => stream.direct_get(seq).await.map_err(|e| unavailable("cannot read a message", e))?.time,
        ReadPath::Leader => {
            stream.get_raw_message(seq).await.map_err(|e| unavailable("cannot read a message", e))?.time
        }
    };
    chrono::DateTime::from_timestamp(time.unix_timestamp(), time.nanosecond())
        .ok_or_else(|| Error::Decode(format!("message {seq} has an impossible timestamp")))
}

/// The message at `seq` (an append's answer read back to check when it was stored).
pub(super) async fn message_at(stream: &Stream, path: ReadPath, seq: u64) -> Result<Stored> {
    let msg = match path {
        ReadPath::Direct => stream.direct_get(seq).await.map_err(|e| unavailable("cannot read a message", e))?,
        ReadPath::Leader => stream.get_raw_message(seq).await.map_err(|e| unavailable("cannot read a message", e))?,
    };
    stored(msg.sequence, msg.subject.as_str(), &msg.payload, chrono_at(msg.time))
}
