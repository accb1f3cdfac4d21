//! A tail over the JetStream log: a disposable ephemeral pull consumer plus the one number
//! that matters, the next stream sequence to yield. The consumer is recreated from that number
//! after any error, silence, delivery gap or reconnect, so the tail never skips or reorders.
//!
//! Deliberately does not retry forever with errors: unavailability is waited out (with logs),
//! only an undecodable event is yielded as an error, once, and then passed.

use std::sync::atomic::Ordering;
use std::time::Duration;

use async_nats::jetstream::consumer::{pull, PullConsumer};
use async_nats::jetstream::Context;
use futures::StreamExt;
use tracing::{debug, warn};

use super::{consumer_from, stored, FETCH_BATCH, TAIL_EXPIRES, TAIL_SILENCE};
use crate::error::{Error, Result};
use crate::log::Stored;

/// A tail's position and its current consumer. The consumer is disposable: `next` is the truth.
pub(super) struct Tail {
    js: Context,
    client: async_nats::Client,
    stream: String,
    /// The sequence the next yielded event must have at least.
    next: u64,
    consumer: Option<PullConsumer>,
    batch: Option<pull::Batch>,
    /// Deliveries seen from the current consumer; its next delivery must be number `+ 1`.
    delivered: u64,
    /// The connection's connect count when the consumer was made: a reconnect may have lost
    /// deliveries in flight, so it forces a new consumer.
    connects: u64,
    backoff: Duration,
}

impl Tail {
    pub(super) fn new(js: Context, client: async_nats::Client, stream: String, from_seq: u64) -> Tail {
        let next = from_seq.max(1);
        Tail {
            js,
            client,
            stream,
            next,
            consumer: None,
            batch: None,
            delivered: 0,
            connects: 0,
            backoff: Duration::ZERO,
        }
    }

    fn reset(&mut self, why: &str) {
        if self.consumer.is_some() {
            debug!(stream = %self.stream, next = self.next, why, "tail recreates its consumer");
        }
        self.consumer = None;
        self.batch = None;
    }

    async fn pause(&mut self) {
        self.backoff = (self.backoff * 2).clamp(Duration::from_millis(50), Duration::from_secs(1));
        tokio::time::sleep(self.backoff).await;
    }

    pub(super) async fn next_event(&mut self) -> Result<Stored> {
        loop {
            let connects = self.client.statistics().connects.load(Ordering::Relaxed);
            if self.consumer.is_some() && connects != self.connects {
                self.reset("reconnected");
            }
            if self.consumer.is_none() {
                match consumer_from(&self.js, &self.stream, self.next).await {
                    Ok(c) => {
                        self.consumer = Some(c);
                        self.delivered = 0;
                        self.connects = connects;
                    }
                    Err(e) => {
                        warn!(stream = %self.stream, next = self.next, error = %e, "tail cannot create its consumer");
                        self.pause().await;
                        continue;
                    }
                }
            }
            if self.batch.is_none() {
                let Some(consumer) = self.consumer.as_ref() else { continue };
                match consumer.batch().max_messages(FETCH_BATCH).expires(TAIL_EXPIRES).messages().await {
                    Ok(b) => self.batch = Some(b),
                    Err(e) => {
                        warn!(stream = %self.stream, error = %e, "tail cannot pull");
                        self.reset("pull failed");
                        self.pause().await;
                        continue;
                    }
                }
            }
            let Some(batch) = self.batch.as_mut() else { continue };
            match tokio::time::timeout(TAIL_SILENCE, batch.next()).await {
                Ok(Some(Ok(msg))) => {
                    let (seq, delivery) = match msg.info() {
                        Ok(i) => (i.stream_sequence, i.consumer_sequence),
                        Err(e) => {
                            self.reset("unreadable metadata");
                            return Err(Error::Decode(format!("consumer message metadata: {e}")));
                        }
                    };
                    if delivery != self.delivered + 1 {
                        // A delivery went missing (e.g. into a dropped subscription): go back.
                        self.reset("delivery gap");
                        continue;
                    }
                    self.delivered = delivery;
                    if seq < self.next {
                        continue;
                    }
                    // Advance before decoding: an undecodable event is reported once, then passed.
                    self.next = seq + 1;
                    self.backoff = Duration::ZERO;
                    return stored(seq, msg.subject.as_str(), &msg.payload);
                }
                // The pull request ended (filled or expired): ask again on the same consumer.
                Ok(None) => self.batch = None,
                Ok(Some(Err(e))) => {
                    debug!(stream = %self.stream, error = %e, "tail pull failed");
                    self.reset("pull error");
                    self.pause().await;
                }
                Err(_) => self.reset("silence"),
            }
        }
    }
}
