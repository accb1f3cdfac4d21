//! The send batcher: sends that may be gathered (`bus::send::may_gather`) are recorded together,
//! one `sends.recorded` per tenant and send window, instead of one stream message per send. The
//! broker's cost is per message (its write, its subject index entry, its ack), not per send, and
//! a flat-out run spent about a quarter of the machine on it.
//!
//! A group commit, like `acks.rs`: one batch is appended at a time, and everything handed in
//! while it was being appended is the next batch — so at a trickle a send is appended alone and
//! at once, and under load each append carries what gathered during the last one. An append
//! slower than `stall_for` does not hold the next batch back (see `run`). An entry is never split,
//! and an event holds at most `MAX_SENDS` sends or about `MAX_BYTES`.
//!
//! A send handed in while no other is in the batcher's hands — none waiting, none being appended
//! — is appended at once in its caller's task (`record`): the same event a batch of one would
//! be, without the two task hand-offs through the batcher (each a wake-up, at a paced rate most
//! often on the other core) that such a send would only wait for: at 5,000/s this took ~0.05–0.1
//! ms off the p50 of send→receive, not work off the machine (docs/performance.md). A send handed
//! in meanwhile goes to the batcher, which finds nothing in flight and appends it at once too;
//! under load there is always one, and sends gather.
//!
//! A send that waited past `MAX_QUEUED` to be taken (the stream stalled under the append ahead
//! of it) is refused unpublished, so a stall answers each sender within the time an append of
//! its own would have taken to give up.
//!
//! Each waiter gets its own send back with the sequence of the event that recorded it, or the
//! append's error (`Unavailable`: nothing was accepted; `Indeterminate`: it may have been), the
//! same answer a send appended alone would have had. Deliberately decides nothing: what a send
//! records is `bus::send`'s, and a send that cannot be handed in (the batcher is stopping) is
//! given back for the caller to record alone — never one that might already be stored.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bus::event::{send_window, Event, EventBody, SendsRecorded, SignalSent};
use bus::store::SignalStore;
use chrono::Utc;
use futures::future::join_all;
use futures::stream::{FuturesUnordered, StreamExt};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Sends per `sends.recorded`.
pub const MAX_SENDS: usize = 500;
/// About the most bytes of payload and names per `sends.recorded` (a stream message is at most
/// 1 MiB by default); one send larger than this is an event of its own.
pub const MAX_BYTES: usize = 256 * 1024;
/// How long a send may wait to be taken into an append. One that waited longer (the stream
/// stalled under the append before it) is refused unpublished — "nothing was accepted" is then
/// the truth — rather than stored long after its sender was left waiting: a stall answers the
/// senders it holds as it would have answered each alone, not all of them once it is over.
pub const MAX_QUEUED: Duration = Duration::from_secs(5);
/// How long the next batch waits for the one append in flight: several times a healthy append
/// (a fraction of a millisecond at a steady rate, a millisecond or two flat out), so only an
/// append the server answers late is not waited out: the batch behind it, held for the whole of
/// that append, was the p999 of a send at 5,000/s (median of runs 12.1 ms with a flat 10 ms here,
/// 10.0 ms with this; docs/performance.md).
pub const STALL: Duration = Duration::from_millis(2);
/// The longest wait for the appends in flight, reached once a few are (the stream is slow or
/// stalled, and a batch started every `STALL` would only pile appends onto it).
pub const STALL_MAX: Duration = Duration::from_millis(10);
/// Appends in flight at most (only a slow or stalled stream has more than one): a new one every
/// `STALL_MAX` once a few are, so ten seconds of a stalled stream — longer than an append's
/// acceptance window, after which the oldest give up and make room — before a send waits for
/// room at all.
pub const MAX_IN_FLIGHT: usize = 1000;

/// How long the next batch waits while `in_flight` appends are: `STALL`, doubled for each
/// further one, up to `STALL_MAX`.
pub fn stall_for(in_flight: usize) -> Duration {
    let doublings = in_flight.saturating_sub(1).min(8) as u32;
    (STALL * 2u32.pow(doublings)).min(STALL_MAX)
}

type Answer = Result<(u64, Box<SignalSent>), bus::Error>;

/// One send handed in, and who waits for it.
#[derive(Debug)]
struct Entry {
    tenant: String,
    window: u64,
    sent: Box<SignalSent>,
    handed_in: Instant,
    done: oneshot::Sender<Answer>,
}

/// The handle the send flow records gathered sends through (cheap to share).
#[derive(Debug, Clone)]
pub struct SendBatcher {
    tx: mpsc::UnboundedSender<Entry>,
    store: SignalStore,
    /// Callers inside `record`: while it is only the one, nothing else is gathering or in flight.
    recording: Arc<AtomicUsize>,
}

/// One caller inside `SendBatcher::record`, counted out however it leaves (answered, or dropped).
struct Recording<'a>(&'a AtomicUsize);

impl<'a> Recording<'a> {
    /// Counts a caller in; whether it is the only one.
    fn enter(count: &'a AtomicUsize) -> (Recording<'a>, bool) {
        let alone = count.fetch_add(1, Ordering::AcqRel) == 0;
        (Recording(count), alone)
    }
}

impl Drop for Recording<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What `run` reads the handed-in sends from.
#[derive(Debug)]
pub struct Inbox(mpsc::UnboundedReceiver<Entry>);

impl SendBatcher {
    /// A batcher recording to `store`; `run` gathers what its callers hand in.
    pub fn new(store: SignalStore) -> (SendBatcher, Inbox) {
        let (tx, rx) = mpsc::unbounded_channel();
        (SendBatcher { tx, store, recording: Arc::default() }, Inbox(rx))
    }

    /// Records `sent` (of `tenant`) with the next batch, or alone here when no other send is in
    /// the batcher's hands, and waits until it is on the stream: the sequence of the event
    /// holding it, and the send. `Err(sent)`: the batcher is gone before taking it, so nothing
    /// was appended and the caller records it alone.
    pub async fn record(&self, tenant: &str, sent: Box<SignalSent>) -> Result<Answer, Box<SignalSent>> {
        let Some(window) = send_window(sent.signal_id) else { return Err(sent) };
        let (done, answer) = oneshot::channel();
        let entry = Entry { tenant: tenant.to_string(), window, sent, handed_in: Instant::now(), done };
        let (_recording, alone) = Recording::enter(&self.recording);
        if alone {
            // Nothing to gather it with and nothing in flight to wait for: a batch of one, here.
            flush(&self.store, vec![entry]).await;
        } else if let Err(back) = self.tx.send(entry) {
            return Err(back.0.sent);
        }
        // Taken and then dropped unanswered only if the runtime is going away mid-append: it
        // may be stored, so "nothing was accepted" would be a guess.
        Ok(answer.await.unwrap_or_else(|_| Err(bus::Error::Indeterminate("the send batcher stopped".into()))))
    }
}

/// Gathers and records batches until `shutdown`; then records what was already handed in and
/// stops taking more (later sends are recorded alone by their callers).
///
/// A group commit that does not stall: the next batch waits for the appends in flight, but never
/// longer than `stall_for` them. An append that slow is late or stuck (a busy, paused or electing
/// stream), and the sends behind it are published at once in batches of their own, as each alone
/// would have been — so when the stream answers again, each is stored within its own acceptance
/// window, or refused.
pub async fn run(store: SignalStore, mut inbox: Inbox, shutdown: CancellationToken) {
    let mut in_flight = FuturesUnordered::new();
    loop {
        let first = tokio::select! {
            biased;
            _ = shutdown.cancelled() => break,
            Some(()) = in_flight.next(), if !in_flight.is_empty() => continue,
            entry = inbox.0.recv() => match entry {
                Some(e) => e,
                None => break,
            },
        };
        let stalled = tokio::time::sleep(stall_for(in_flight.len()));
        tokio::pin!(stalled);
        while !in_flight.is_empty() {
            let full = in_flight.len() >= MAX_IN_FLIGHT;
            tokio::select! {
                biased;
                _ = in_flight.next() => {}
                _ = &mut stalled, if !full => break,
            }
        }
        let mut batch = vec![first];
        while let Ok(e) = inbox.0.try_recv() {
            batch.push(e);
        }
        in_flight.push(flush(&store, batch));
    }
    inbox.0.close();
    let mut rest = Vec::new();
    while let Ok(e) = inbox.0.try_recv() {
        rest.push(e);
    }
    if !rest.is_empty() {
        in_flight.push(flush(&store, rest));
    }
    while in_flight.next().await.is_some() {}
}

/// Appends `batch` as its events (`events_of`), all at once, and answers every entry; refuses,
/// unpublished, each that waited past `MAX_QUEUED`.
async fn flush(store: &SignalStore, batch: Vec<Entry>) {
    let (batch, stale): (Vec<Entry>, Vec<Entry>) = batch.into_iter().partition(|e| e.handed_in.elapsed() <= MAX_QUEUED);
    for e in stale {
        let refused = "the event log did not take the send in time; nothing was accepted";
        let _ = e.done.send(Err(bus::Error::Unavailable(refused.into())));
    }
    if batch.is_empty() {
        return;
    }
    let now = Utc::now();
    let groups = events_of(batch);
    let appended = join_all(groups.into_iter().map(|(tenant, recorded, waiters)| async move {
        let event = Event::new(tenant, None, now, EventBody::SendsRecorded(recorded));
        let outcome = store.record(&event).await;
        (event, outcome, waiters)
    }))
    .await;
    for (event, outcome, waiters) in appended {
        let EventBody::SendsRecorded(recorded) = event.body else { unreachable!("built above") };
        match outcome {
            Ok(a) => {
                for (sent, done) in recorded.sends.into_iter().zip(waiters) {
                    let _ = done.send(Ok((a.seq, Box::new(sent))));
                }
            }
            Err(e) => {
                for done in waiters {
                    let _ = done.send(Err(copy(&e)));
                }
            }
        }
    }
}

type Group = (String, SendsRecorded, Vec<oneshot::Sender<Answer>>);

/// The events `batch` is recorded as: one per (tenant, window) in the order each first
/// appears, another past `MAX_SENDS` or `MAX_BYTES`, every send whole; with each event's
/// waiters, in the order of its sends.
fn events_of(batch: Vec<Entry>) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    // (tenant, window) → the index of its open event and the bytes in it.
    let mut open: Vec<(usize, usize)> = Vec::new();
    for e in batch {
        let size = bytes_of(&e.sent);
        let slot = open.iter_mut().find(|(i, bytes)| {
            let (tenant, r, _) = &groups[*i];
            *tenant == e.tenant && r.window == e.window && r.sends.len() < MAX_SENDS && bytes + size <= MAX_BYTES
        });
        let index = match slot {
            Some((i, bytes)) => {
                *bytes += size;
                *i
            }
            None => {
                // A full event of this (tenant, window) is replaced by the next.
                open.retain(|(i, _)| !(groups[*i].0 == e.tenant && groups[*i].1.window == e.window));
                groups.push((e.tenant.clone(), SendsRecorded { window: e.window, sends: Vec::new() }, Vec::new()));
                open.push((groups.len() - 1, size));
                groups.len() - 1
            }
        };
        groups[index].1.sends.push(*e.sent);
        groups[index].2.push(e.done);
    }
    groups
}

/// About what a send adds to an event: its free-length texts and the fixed rest.
fn bytes_of(sent: &SignalSent) -> usize {
    sent.payload.len() + sent.from.len() + sent.to.len() + sent.signal_type.len() + 400
}

/// The same answer for each waiter of one append (`bus::Error` holds a non-cloneable SQLite
/// error only in the embedded log, where it means the append failed: nothing was accepted).
fn copy(e: &bus::Error) -> bus::Error {
    use bus::Error as E;
    match e {
        E::Domain(d) => E::Domain(d.clone()),
        E::Conflict { subject, expected, found } => {
            E::Conflict { subject: subject.clone(), expected: *expected, found: *found }
        }
        E::Indeterminate(s) => E::Indeterminate(s.clone()),
        E::Rejected(s) => E::Rejected(s.clone()),
        E::Config(s) => E::Config(s.clone()),
        E::TooLate => E::TooLate,
        other => E::Unavailable(other.to_string()),
    }
}

#[cfg(test)]
#[path = "sends_tests.rs"]
mod tests;
