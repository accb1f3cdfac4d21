//! One stream tail shared by every tail of this process (gateway follower, projector, sweeper):
//! a single upstream consumer decodes each event once and broadcasts it; each subscriber keeps
//! its own position and reads from the broadcast while it is live.
//!
//! Why: every private tail costs nats-server one delivery per event and this process one
//! MessagePack decode per event, so three in-process tails tripled both (the largest per-event
//! costs after the appends themselves, in the throughput profile).
//!
//! Deliberately lossy towards the slow: the broadcast is bounded, and a subscriber that falls
//! behind it (lag, a start before the live position, an event the upstream could not decode)
//! reads from a private `Tail` from its own position until it meets the broadcast again. So
//! the guarantees of a private tail (every sequence from `from`, in order, no gaps; an
//! undecodable event yielded as an error once, then passed) hold unchanged, and a slow reader
//! (the projector during a commit) never holds back a fast one (the gateway's pushes).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use async_nats::jetstream::Context;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::task::AbortHandle;

use super::own::OwnEvents;
use super::tail::Tail;
use crate::error::Result;
use crate::event::EventBody;
use crate::log::Stored;

/// Events the broadcast holds for a subscriber that is busy (the projector applying a batch
/// takes tens of milliseconds); past that it catches up on a private tail.
const CAPACITY: usize = 4096;

/// Most bytes of events the upstream keeps alive for subscribers that have not read them yet.
/// The ring itself holds only weak references, so what it keeps alive is bounded by bytes as
/// well as by count: 4,096 plugin facts of 1 MiB would otherwise pin 4 GiB in every process.
/// A subscriber that finds an event already let go catches up on a private tail, as if it had
/// lagged the ring.
const RETAINED_BYTES: usize = 32 * 1024 * 1024;

/// One broadcast event: its sequence, and the event while the upstream still retains it.
type Item = (u64, Weak<Stored>);

/// Where subscribers come from: the broadcast and the sequence its upstream started at.
pub(super) struct Fanout {
    tx: broadcast::Sender<Item>,
    /// The newest sequence the upstream has broadcast (or is about to): a subscriber starting
    /// at or before it would never receive those events from the broadcast.
    last_sent: Arc<AtomicU64>,
    upstream: AbortHandle,
}

impl Drop for Fanout {
    fn drop(&mut self) {
        self.upstream.abort();
    }
}

/// What a subscriber needs to open a private tail.
#[derive(Clone)]
pub(super) struct Source {
    pub js: Context,
    pub client: async_nats::Client,
    /// The connection's drops (`connect.rs`).
    pub drops: tokio::sync::watch::Receiver<u64>,
    pub stream: async_nats::jetstream::stream::Stream,
    /// Every subject of the stream (`Subjects::all`).
    pub all: String,
}

impl Source {
    fn tail(&self, from: u64) -> Tail {
        Tail::new(self.js.clone(), self.client.clone(), self.drops.clone(), self.stream.clone(), self.all.clone(), from)
    }
}

impl Fanout {
    /// Starts the shared upstream at `live_from` (the stream's next sequence).
    pub(super) fn start(source: &Source, live_from: u64, own: Arc<OwnEvents>) -> Fanout {
        let (tx, _) = broadcast::channel(CAPACITY);
        let sender = tx.clone();
        let last_sent = Arc::new(AtomicU64::new(live_from.saturating_sub(1)));
        let sent = last_sent.clone();
        let mut upstream = source.tail(live_from).with_own(own);
        let task = tokio::spawn(async move {
            let mut retained = Retained::default();
            loop {
                // An undecodable event is skipped here: subscribers see the gap and read it on
                // a private tail, which reports it to each of them once.
                if let Ok(stored) = upstream.next_event().await {
                    // Stored before the send, read after a subscribe: see `subscribe`.
                    sent.store(stored.seq, Ordering::SeqCst);
                    let seq = stored.seq;
                    let weak = retained.keep(Arc::new(stored));
                    // No receivers right now is fine: a later subscriber starts behind and
                    // catches up on its own tail.
                    let _ = sender.send((seq, weak));
                }
            }
        });
        Fanout { tx, last_sent, upstream: task.abort_handle() }
    }

    pub(super) fn is_running(&self) -> bool {
        !self.upstream.is_finished()
    }

    pub(super) fn subscribe(&self, source: Source, from: u64) -> Subscriber {
        let from = from.max(1);
        // Subscribed before the position is read: whatever was broadcast before the subscribe
        // is at most `last_sent`, and a start at or before that catches up privately (waiting
        // for the broadcast to reveal the gap would stall on a quiet stream).
        let rx = self.tx.subscribe();
        let behind = from <= self.last_sent.load(Ordering::SeqCst);
        let private = behind.then(|| source.tail(from));
        Subscriber { source, rx, next: from, ahead: None, private }
    }
}

/// The newest events the upstream keeps alive: at most `CAPACITY` and `RETAINED_BYTES`.
#[derive(Default)]
struct Retained {
    events: VecDeque<(Arc<Stored>, usize)>,
    bytes: usize,
}

impl Retained {
    fn keep(&mut self, event: Arc<Stored>) -> Weak<Stored> {
        let weak = Arc::downgrade(&event);
        let size = approx_bytes(&event);
        self.bytes += size;
        self.events.push_back((event, size));
        while self.events.len() > CAPACITY || (self.bytes > RETAINED_BYTES && self.events.len() > 1) {
            if let Some((_, size)) = self.events.pop_front() {
                self.bytes -= size;
            }
        }
        weak
    }
}

/// An event's size in memory, near enough to bound what is retained: its large texts plus a
/// fixed allowance for the rest.
fn approx_bytes(s: &Stored) -> usize {
    let body = match &s.event.body {
        EventBody::SignalSent(sent) => sent.payload.len(),
        EventBody::SendsRecorded(r) => r.sends.iter().map(|s| s.payload.len() + 512).sum(),
        EventBody::PluginFactRecorded(fact) => fact.state.len(),
        EventBody::SignalsAcked(_) => s.event.body.acked_ids().count() * 16,
        EventBody::AcksRecorded(batch) => s.event.body.acked_ids().count() * 16 + batch.acks.len() * 64,
        _ => 0,
    };
    body + s.subject.len() + 512
}

/// What one wait of a subscriber produced.
#[allow(clippy::large_enum_variant)] // one lives on the stack per wait, never in a collection
enum Got {
    Private(Result<Stored>),
    Shared(std::result::Result<Arc<Stored>, RecvError>),
    /// A broadcast event the upstream no longer retains (past `RETAINED_BYTES`).
    Released(u64),
}

impl Got {
    fn shared(r: std::result::Result<Item, RecvError>) -> Got {
        match r {
            Ok((seq, weak)) => weak.upgrade().map_or(Got::Released(seq), |s| Got::Shared(Ok(s))),
            Err(e) => Got::Shared(Err(e)),
        }
    }
}

/// One tail's view of the shared stream.
pub(super) struct Subscriber {
    source: Source,
    rx: broadcast::Receiver<Item>,
    /// The sequence the next yielded event must have.
    next: u64,
    /// A broadcast event past `next`: until `next` reaches it, events come from `private`.
    ahead: Option<Arc<Stored>>,
    private: Option<Tail>,
}

impl Subscriber {
    /// The next event, or `None` if the shared upstream is gone (the caller tails again).
    pub(super) async fn next_event(&mut self) -> Option<Result<Arc<Stored>>> {
        loop {
            if let Some(a) = &self.ahead {
                if a.seq < self.next {
                    self.ahead = None;
                    continue;
                }
                if a.seq == self.next {
                    // Caught up with the broadcast: the private tail is no longer needed.
                    self.private = None;
                    let a = self.ahead.take()?;
                    return Some(Ok(self.yielded(a)));
                }
            }
            let got = match (self.private.as_mut(), self.ahead.is_some()) {
                // Behind a known broadcast event: only the private tail can close the gap.
                (Some(tail), true) => Got::Private(tail.next_event().await),
                // Behind, and the broadcast's position is not known yet: whichever answers
                // first (the broadcast's first event ends the catch-up once `next` meets it).
                (Some(tail), false) => tokio::select! {
                    item = tail.next_event() => Got::Private(item),
                    r = self.rx.recv() => Got::shared(r),
                },
                (None, _) => Got::shared(self.rx.recv().await),
            };
            match got {
                Got::Private(item) => {
                    if let Some(out) = self.took_private(item) {
                        return Some(out);
                    }
                }
                Got::Shared(Ok(s)) if s.seq < self.next => {}
                Got::Shared(Ok(s)) if s.seq == self.next && self.private.is_none() => {
                    return Some(Ok(self.yielded(s)));
                }
                Got::Shared(Ok(s)) => {
                    if self.private.is_none() {
                        tracing::debug!(next = self.next, at = s.seq, "shared tail fell behind; catching up privately");
                        self.private = Some(self.source.tail(self.next));
                    }
                    self.ahead = Some(s);
                }
                // Let go before this subscriber read it: that event and what follows come from
                // a private tail, until it meets the broadcast again.
                Got::Released(seq) => {
                    if seq >= self.next && self.private.is_none() {
                        tracing::debug!(
                            next = self.next,
                            at = seq,
                            "shared tail let go of an unread event; catching up privately"
                        );
                        self.private = Some(self.source.tail(self.next));
                    }
                }
                // The next event received is past `next`, which starts the catch-up.
                Got::Shared(Err(RecvError::Lagged(_))) => {}
                Got::Shared(Err(RecvError::Closed)) => return None,
            }
        }
    }

    fn yielded(&mut self, s: Arc<Stored>) -> Arc<Stored> {
        self.next = s.seq + 1;
        s
    }

    /// Handles what the private tail yielded: an event at or past `next`, or an error (the
    /// private tail has already moved past an undecodable event).
    fn took_private(&mut self, item: Result<Stored>) -> Option<Result<Arc<Stored>>> {
        match item {
            Ok(s) if s.seq < self.next => None,
            Ok(s) => {
                self.next = s.seq + 1;
                Some(Ok(Arc::new(s)))
            }
            Err(e) => {
                if let Some(tail) = &self.private {
                    self.next = self.next.max(tail.position());
                }
                Some(Err(e))
            }
        }
    }
}
