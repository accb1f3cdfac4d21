//! Reading the stream in order without a consumer: direct gets of "the first message at or
//! after sequence n", answered by any replica, for a tail whose consumer cannot be made (after a
//! node's death a cluster makes consumers only once its meta leader is elected again, often
//! seconds after the stream has a new leader, with a backlog of appends waiting out the
//! election stored at once).
//!
//! One get at a time would drain such a backlog slowly, so gets for `n, n+1, …` go out together,
//! as many as the last round proved useful (doubling while every answer followed its
//! predecessor, back to one once the stream had nothing newer). An answer is taken only if it is
//! exactly its predecessor's sequence + 1 (the first: at or after `n`), so a replica that lags,
//! a deleted sequence or a lost answer ends the round early, never makes the reader skip.
//!
//! Deliberately holds no position of its own: the tail says where to read from and advances
//! its own `next` by what it yields.

use std::collections::VecDeque;
use std::time::Duration;

use async_nats::jetstream::message::StreamMessage;
use async_nats::jetstream::stream::{DirectGetErrorKind, Stream};
use tracing::debug;

use super::messages::{chrono_at, stored};
use crate::error::Result;
use crate::log::Stored;

/// Most gets in flight at once.
const MAX_BATCH: usize = 32;
/// How long one get may take (a replica that does not answer ends the round).
const GET_WITHIN: Duration = Duration::from_secs(1);

/// Events read ahead, with the sequence each was stored at.
pub(super) struct DirectReader {
    stream: Stream,
    /// Every subject of the stream (`Subjects::all`).
    all: String,
    ahead: VecDeque<(u64, Result<Stored>)>,
    batch: usize,
}

impl DirectReader {
    pub(super) fn new(stream: Stream, all: String) -> DirectReader {
        DirectReader { stream, all, ahead: VecDeque::new(), batch: 1 }
    }

    /// Forgets what was read ahead (the tail has a consumer again).
    pub(super) fn clear(&mut self) {
        self.ahead.clear();
        self.batch = 1;
    }

    /// The first event at or after `from`, with its sequence; `None` if the stream has nothing
    /// there yet or no replica answered. An undecodable event is returned as its error.
    pub(super) async fn next(&mut self, from: u64) -> Option<(u64, Result<Stored>)> {
        while self.ahead.front().is_some_and(|(seq, _)| *seq < from) {
            self.ahead.pop_front();
        }
        if self.ahead.front().is_none_or(|(seq, _)| *seq != from) {
            self.ahead.clear();
            self.read_ahead(from).await;
        }
        self.ahead.pop_front()
    }

    async fn read_ahead(&mut self, from: u64) {
        let gets = (0..self.batch as u64).map(|k| {
            let get = self.stream.direct_get_next_for_subject(&self.all, Some(from + k));
            async move {
                match tokio::time::timeout(GET_WITHIN, get).await {
                    Ok(Ok(msg)) => StreamMessage::try_from(msg.message).map_err(|e| e.to_string()),
                    Ok(Err(e)) if e.kind() == DirectGetErrorKind::NotFound => Err(String::new()),
                    Ok(Err(e)) => Err(e.to_string()),
                    Err(_) => Err(format!("no answer within {GET_WITHIN:?}")),
                }
            }
        });
        let answers = futures::future::join_all(gets).await;
        let mut expected = None;
        let mut whole = true;
        for answer in answers {
            let msg = match answer {
                Ok(msg) if expected.map_or(msg.sequence >= from, |e| msg.sequence == e) => msg,
                Ok(_) => {
                    whole = false;
                    break;
                }
                Err(e) => {
                    if !e.is_empty() {
                        debug!(from, error = %e, "a direct read of the stream failed");
                    }
                    whole = false;
                    break;
                }
            };
            expected = Some(msg.sequence + 1);
            let event = stored(msg.sequence, msg.subject.as_str(), &msg.payload, chrono_at(msg.time));
            self.ahead.push_back((msg.sequence, event));
        }
        self.batch = if whole { (self.batch * 2).min(MAX_BATCH) } else { 1 };
    }
}
