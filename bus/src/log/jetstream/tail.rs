//! A tail over the JetStream log: a disposable ephemeral pull consumer plus the one number
//! that matters, the next stream sequence to yield. The consumer is recreated from that number
//! after any error, silence, delivery gap or dropped connection (noticed when it drops, not at
//! the next pull), so the tail never skips or reorders.
//!
//! Pull requests overlap on one inbox: a new one is sent while the previous ones still have
//! room and time, never after they ended. nats-server 2.9 sometimes lets a request expire
//! without the 408 that says so; waiting for that answer stalled the tail until the silence
//! timeout (4 s of events held back, seen as multi-second push latency).
//!
//! A consumer is made in the background. While it is not there (a cluster makes consumers only
//! through its meta leader, which after a node's death is elected as late as its Raft timeout
//! allows, often seconds after the stream has a new leader), the tail reads the next events
//! straight from the stream's replicas by sequence (`direct.rs`): in order and without gaps,
//! like the consumer, so pushes and projections go on meanwhile.
//!
//! Deliberately does not retry forever with errors: unavailability is waited out (with logs),
//! only an undecodable event is yielded as an error, once, and then passed.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::consumer::{pull, PullConsumer};
use async_nats::jetstream::stream::Stream;
use async_nats::jetstream::Context;
use async_nats::StatusCode;
use futures::StreamExt;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{debug, warn};

use super::direct::DirectReader;
use super::messages::{consumer_from, delivery_of, stored, stored_event, FETCH_BATCH, TAIL_EXPIRES, TAIL_SILENCE};
use super::own::OwnEvents;
use crate::error::{Error, Result};
use crate::log::Stored;

/// The longest pause before a failed consumer is made again: short, so a tail resumes within
/// this of the stream (and the cluster's meta leader) being back after a node died.
const MAX_PAUSE: Duration = Duration::from_millis(500);
/// How long a tail waits for a consumer being made before reading directly meanwhile: a
/// healthy cluster makes one in milliseconds.
const DIRECT_AFTER: Duration = Duration::from_millis(200);
/// Pause between direct reads that found nothing newer.
const DIRECT_POLL: Duration = Duration::from_millis(50);

/// A new pull request goes out once the newest is this old, well before it expires.
const RENEW_AFTER: Duration = Duration::from_millis(TAIL_EXPIRES.as_millis() as u64 / 2);

/// What a consumer was made under: a change of either means the connection dropped since.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Counts {
    connects: u64,
    drops: u64,
}

/// A tail's position and its current consumer. The consumer is disposable: `next` is the truth.
pub(super) struct Tail {
    js: Context,
    client: async_nats::Client,
    stream: String,
    /// Where events come from while there is no consumer.
    direct: DirectReader,
    /// A consumer being made, and the connection's connect and drop counts when it was asked for.
    creating: Option<(JoinHandle<Result<PullConsumer>>, Counts)>,
    /// No new consumer is asked for before this (after one could not be made).
    create_after: Instant,
    /// The sequence the next yielded event must have at least.
    next: u64,
    consumer: Option<PullConsumer>,
    /// The inbox every pull request of the current consumer answers to.
    sub: Option<(async_nats::Subject, async_nats::Subscriber)>,
    /// Pull requests not yet expired (by our clock, which is never later than the server's):
    /// when each was sent and how many messages it may still bring, oldest first.
    requests: VecDeque<(Instant, usize)>,
    last_heard: Instant,
    /// Deliveries seen from the current consumer; its next delivery must be number `+ 1`.
    delivered: u64,
    /// The connection's connect and drop counts when the consumer was asked for: a drop may
    /// have lost deliveries in flight, so it forces a new consumer.
    counts: Counts,
    /// The connection's drops (`connect.rs`): one wakes the tail at once.
    drops: watch::Receiver<u64>,
    backoff: Duration,
    /// The events this process is appending, kept before each publish (`own.rs`), for the
    /// shared upstream only.
    own: Option<Arc<OwnEvents>>,
}

impl Drop for Tail {
    fn drop(&mut self) {
        if let Some((job, _)) = self.creating.take() {
            job.abort();
        }
    }
}

impl Tail {
    pub(super) fn new(
        js: Context,
        client: async_nats::Client,
        drops: watch::Receiver<u64>,
        direct: Stream,
        all: String,
        from_seq: u64,
    ) -> Tail {
        let next = from_seq.max(1);
        Tail {
            js,
            client,
            stream: direct.cached_info().config.name.clone(),
            direct: DirectReader::new(direct, all),
            creating: None,
            create_after: Instant::now(),
            next,
            consumer: None,
            sub: None,
            requests: VecDeque::new(),
            last_heard: Instant::now(),
            delivered: 0,
            counts: Counts::default(),
            drops,
            backoff: Duration::ZERO,
            own: None,
        }
    }

    /// Takes this process's own appends from `own` instead of decoding them (the shared
    /// upstream only: it reads every event once, in order, as they come).
    pub(super) fn with_own(mut self, own: Arc<OwnEvents>) -> Tail {
        own.activate();
        self.own = Some(own);
        self
    }

    /// The sequence the next yielded event will have at least.
    pub(super) fn position(&self) -> u64 {
        self.next
    }

    fn reset(&mut self, why: &str) {
        if self.consumer.is_some() {
            debug!(stream = %self.stream, next = self.next, why, "tail recreates its consumer");
        }
        self.consumer = None;
        self.sub = None;
        self.requests.clear();
        if let Some((job, _)) = self.creating.take() {
            job.abort();
        }
    }

    /// Whether the tail has a consumer now. Asks for one in the background if none is being
    /// made, and waits `DIRECT_AFTER` for it; otherwise only looks whether it is done.
    async fn has_consumer(&mut self, counts: Counts) -> bool {
        let done = match self.creating.take() {
            None if Instant::now() < self.create_after => return false,
            None => {
                let (js, stream, next) = (self.js.clone(), self.stream.clone(), self.next);
                let mut job = tokio::spawn(async move { consumer_from(&js, &stream, next).await });
                match tokio::time::timeout(DIRECT_AFTER, &mut job).await {
                    Ok(done) => (done, counts),
                    Err(_) => {
                        self.creating = Some((job, counts));
                        return false;
                    }
                }
            }
            Some((job, asked)) if job.is_finished() => (job.await, asked),
            Some(pending) => {
                self.creating = Some(pending);
                return false;
            }
        };
        match done {
            (Ok(Ok(consumer)), asked) => {
                self.consumer = Some(consumer);
                self.direct.clear();
                self.delivered = 0;
                // A drop while it was being made shows as a changed count: made again.
                self.counts = asked;
                true
            }
            (Ok(Err(e)), _) => {
                warn!(stream = %self.stream, next = self.next, error = %e, "tail cannot create its consumer");
                self.create_after = Instant::now() + self.next_pause();
                false
            }
            (Err(e), _) => {
                warn!(stream = %self.stream, next = self.next, error = %e, "tail's consumer task failed");
                self.create_after = Instant::now() + self.next_pause();
                false
            }
        }
    }

    /// The next event read straight from the stream's replicas (`direct.rs`).
    async fn read_directly(&mut self) -> Option<Result<Stored>> {
        let (seq, event) = self.direct.next(self.next).await?;
        // Advance before decoding: an undecodable event is reported once, then passed.
        self.next = seq + 1;
        Some(event)
    }

    /// Sends a pull request if the live ones may run out (of room or of time) soon. Counting
    /// each message against the oldest request understates what is left whatever order the
    /// server fills them in, so this errs towards asking early.
    async fn top_up(&mut self) -> std::result::Result<(), String> {
        let now = Instant::now();
        while self.requests.front().is_some_and(|(at, _)| now.duration_since(*at) >= TAIL_EXPIRES) {
            self.requests.pop_front();
        }
        let room: usize = self.requests.iter().map(|(_, n)| n).sum();
        let fresh = self.requests.back().is_some_and(|(at, _)| now.duration_since(*at) < RENEW_AFTER);
        if fresh && room >= FETCH_BATCH / 2 {
            return Ok(());
        }
        let (Some(consumer), Some((inbox, _))) = (self.consumer.as_ref(), self.sub.as_ref()) else {
            return Err("no consumer".into());
        };
        let request = pull::BatchConfig { batch: FETCH_BATCH, expires: Some(TAIL_EXPIRES), ..Default::default() };
        consumer.request_batch(request, inbox.clone()).await.map_err(|e| e.to_string())?;
        self.requests.push_back((now, FETCH_BATCH));
        Ok(())
    }

    fn next_pause(&mut self) -> Duration {
        self.backoff = (self.backoff * 2).clamp(Duration::from_millis(50), MAX_PAUSE);
        self.backoff
    }

    async fn pause(&mut self) {
        let pause = self.next_pause();
        tokio::time::sleep(pause).await;
    }

    pub(super) async fn next_event(&mut self) -> Result<Stored> {
        loop {
            let counts = Counts {
                connects: self.client.statistics().connects.load(Ordering::Relaxed),
                drops: *self.drops.borrow_and_update(),
            };
            if self.consumer.is_some() && counts != self.counts {
                self.reset("reconnected");
            }
            if self.consumer.is_none() && !self.has_consumer(counts).await {
                if let Some(event) = self.read_directly().await {
                    return event;
                }
                tokio::time::sleep(DIRECT_POLL).await;
                continue;
            }
            if self.sub.is_none() {
                let inbox = async_nats::Subject::from(self.client.new_inbox());
                match self.client.subscribe(inbox.clone()).await {
                    Ok(sub) => {
                        self.sub = Some((inbox, sub));
                        self.last_heard = Instant::now();
                    }
                    Err(e) => {
                        warn!(stream = %self.stream, error = %e, "tail cannot subscribe");
                        self.reset("subscribe failed");
                        self.pause().await;
                        continue;
                    }
                }
            }
            if let Err(e) = self.top_up().await {
                warn!(stream = %self.stream, error = %e, "tail cannot pull");
                self.reset("pull failed");
                self.pause().await;
                continue;
            }
            // Wake to renew the request in time, or to give up on a consumer that went silent.
            let renew = self.requests.back().map_or(Instant::now(), |(at, _)| *at + RENEW_AFTER);
            let wake = renew.min(self.last_heard + TAIL_SILENCE);
            let Some((_, sub)) = self.sub.as_mut() else { continue };
            let dropped = async {
                if self.drops.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            };
            let heard = tokio::select! {
                heard = tokio::time::timeout_at(wake, sub.next()) => heard,
                // Start over at once: what was in flight may be lost.
                () = dropped => continue,
            };
            let msg = match heard {
                Ok(Some(msg)) => msg,
                Ok(None) => {
                    self.reset("subscription closed");
                    continue;
                }
                Err(_) if self.last_heard.elapsed() >= TAIL_SILENCE => {
                    self.reset("silence");
                    continue;
                }
                Err(_) => continue,
            };
            self.last_heard = Instant::now();
            match msg.status {
                None | Some(StatusCode::OK) => {}
                // A request that expired or idles: its successors are already waiting.
                Some(StatusCode::TIMEOUT | StatusCode::NOT_FOUND | StatusCode::IDLE_HEARTBEAT) => continue,
                Some(status) => {
                    debug!(stream = %self.stream, %status, "tail pull failed");
                    self.reset("pull error");
                    self.pause().await;
                    continue;
                }
            }
            if let Some((_, room)) = self.requests.iter_mut().find(|(_, n)| *n > 0) {
                *room -= 1;
            }
            let (seq, delivery, published) = match delivery_of(msg.reply.as_deref()) {
                Some(d) => (d.stream_seq, d.consumer_seq, d.stored_at),
                None => {
                    self.reset("unreadable metadata");
                    return Err(Error::Decode(format!("consumer message metadata: {:?}", msg.reply.as_deref())));
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
            let subject = msg.subject.as_str();
            let own = self.own.as_ref().zip(event_id_of(&msg));
            if let Some(event) = own.and_then(|(own, id)| own.take(id, subject, msg.payload.len())) {
                return Ok(stored_event(seq, subject, event, Some(published)));
            }
            return stored(seq, subject, &msg.payload, Some(published));
        }
    }
}

/// The event id a message was published under (`Nats-Msg-Id`, or `EVENT_ID_HEADER` for a
/// compare-and-set), if it has one.
fn event_id_of(msg: &async_nats::Message) -> Option<uuid::Uuid> {
    let headers = msg.headers.as_ref()?;
    // The compare-and-set appends' header first: sends, deliveries and expiries carry it.
    let id = headers.get(super::EVENT_ID_HEADER).or_else(|| headers.get(async_nats::header::NATS_MESSAGE_ID))?;
    uuid::Uuid::parse_str(id.as_str()).ok()
}
