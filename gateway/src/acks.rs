//! The ack batcher: this process's WebSocket sessions hand it their ack batches, and it records
//! what gathered from every session of a tenant as one `acks.recorded` event — one stream message
//! where each session's flush tick made one of its own. At a few ids per session per tick, the
//! broker's cost of a message, not of an id, was what acks cost: one message in eleven of a
//! flat-out run was a session's ack batch.
//!
//! Gathering is a group commit: one batch is appended at a time, and everything handed in while
//! it was being appended is the next batch (up to `MAX_IDS`; the tenants of a batch are
//! appended together). `gather` (`GatewayConfig::ack_gather`, zero by default) can hold a batch
//! open that long after its first entry; under load the appends themselves gather enough.
//!
//! Deliberately checks nothing and decides nothing: which ids may be acked is `commands::ack`'s
//! call (only signals delivered to the acking identity reach here), and what an ack changes is
//! the projector's. HTTP and MCP acks do not come here: their answer waits for the append. When
//! the batcher is gone (the process is stopping) or an entry is lost with it, the caller records
//! its batch itself, so an ack is never dropped for the batcher's sake.

use std::time::Duration;

use bus::event::{AcksRecorded, Event, EventBody, SignalsAcked};
use bus::store::SignalStore;
use chrono::Utc;
use futures::future::join_all;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Ids per `acks.recorded`: 1,000 ids are ~40 KB encoded, far under a stream message's limit.
/// One session's batch is never split, so an event holds more only when a single entry does.
pub const MAX_IDS: usize = 1000;

/// One session's checked batch, and who waits for it to be recorded.
#[derive(Debug)]
struct Entry {
    tenant: String,
    acks: SignalsAcked,
    handed_in: Instant,
    done: oneshot::Sender<Result<(), String>>,
}

/// The handle sessions record their acks through (cheap to share; the gathering runs in `run`).
#[derive(Debug, Clone)]
pub struct AckBatcher {
    tx: mpsc::UnboundedSender<Entry>,
}

/// What `run` reads the handed-in batches from.
#[derive(Debug)]
pub struct Inbox(mpsc::UnboundedReceiver<Entry>);

/// Why a batch was not recorded through the batcher.
#[derive(Debug, PartialEq)]
pub enum NotRecorded {
    /// The batcher is gone (or went with the entry): the caller records the batch itself.
    Gone,
    /// The append failed; the text says why.
    Failed(String),
}

impl AckBatcher {
    pub fn new() -> (AckBatcher, Inbox) {
        let (tx, rx) = mpsc::unbounded_channel();
        (AckBatcher { tx }, Inbox(rx))
    }

    /// Records `acks` (of `tenant`) with the next batch, and waits until that batch is on the
    /// stream.
    pub async fn record(&self, tenant: &str, acks: SignalsAcked) -> Result<(), NotRecorded> {
        let (done, answer) = oneshot::channel();
        let entry = Entry { tenant: tenant.to_string(), acks, handed_in: Instant::now(), done };
        self.tx.send(entry).map_err(|_| NotRecorded::Gone)?;
        match answer.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(NotRecorded::Failed(e)),
            Err(_) => Err(NotRecorded::Gone),
        }
    }
}

/// Gathers and records batches until `shutdown`; then records what was already handed in and
/// stops taking more (later batches are recorded by their sessions).
pub async fn run(store: SignalStore, mut inbox: Inbox, gather: Duration, shutdown: CancellationToken) {
    loop {
        let first = tokio::select! {
            entry = inbox.0.recv() => match entry {
                Some(e) => e,
                None => return,
            },
            _ = shutdown.cancelled() => break,
        };
        let deadline = first.handed_in + gather;
        let mut ids = first.acks.signal_ids.len();
        let mut batch = vec![first];
        loop {
            // Whatever is queued already joins, however late the window: under load the entries
            // that arrived during the last append are the batch.
            while ids < MAX_IDS {
                let Ok(e) = inbox.0.try_recv() else { break };
                ids += e.acks.signal_ids.len();
                batch.push(e);
            }
            if ids >= MAX_IDS || Instant::now() >= deadline {
                break;
            }
            tokio::select! {
                biased;
                entry = inbox.0.recv() => match entry {
                    Some(e) => {
                        ids += e.acks.signal_ids.len();
                        batch.push(e);
                    }
                    None => break,
                },
                _ = tokio::time::sleep_until(deadline) => break,
            }
        }
        flush(&store, batch).await;
    }
    inbox.0.close();
    let mut rest = Vec::new();
    while let Ok(e) = inbox.0.try_recv() {
        rest.push(e);
    }
    if !rest.is_empty() {
        flush(&store, rest).await;
    }
}

/// Appends `batch` as one event per tenant (more only past `MAX_IDS`) and answers every entry.
async fn flush(store: &SignalStore, batch: Vec<Entry>) {
    let now = Utc::now();
    let (events, answers) = events_of(batch);
    let appended = join_all(events.into_iter().map(|(tenant, acks)| {
        let event = Event::new(tenant, None, now, EventBody::AcksRecorded(acks));
        async move { store.record(&event).await.map(|_| ()).map_err(|e| e.to_string()) }
    }))
    .await;
    // Each waiter logs its own failure (`commands::ack`), naming its batch.
    for (i, done) in answers {
        let _ = done.send(appended[i].clone());
    }
}

type Answers = Vec<(usize, oneshot::Sender<Result<(), String>>)>;

/// The events `batch` is recorded as — by tenant in the order each first appears, split only
/// past `MAX_IDS`, entries kept whole — and, for each entry's waiter, the index of its event.
fn events_of(batch: Vec<Entry>) -> (Vec<(String, AcksRecorded)>, Answers) {
    let mut events: Vec<(String, AcksRecorded)> = Vec::new();
    let mut open: Vec<(String, usize, usize)> = Vec::new(); // tenant, event index, ids in it
    let mut answers = Vec::with_capacity(batch.len());
    for e in batch {
        let n = e.acks.signal_ids.len();
        let slot = open.iter_mut().find(|(t, _, ids)| *t == e.tenant && ids + n <= MAX_IDS);
        let index = match slot {
            Some((_, index, ids)) => {
                *ids += n;
                *index
            }
            None => {
                events.push((e.tenant.clone(), AcksRecorded { acks: Vec::new() }));
                // A tenant keeps one event open: a full one is replaced by the next.
                open.retain(|(t, _, _)| *t != e.tenant);
                open.push((e.tenant.clone(), events.len() - 1, n));
                events.len() - 1
            }
        };
        events[index].1.acks.push(e.acks);
        answers.push((index, e.done));
    }
    (events, answers)
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use super::*;

    fn entry(tenant: &str, by: &str, n: usize) -> (Entry, oneshot::Receiver<Result<(), String>>) {
        let (done, rx) = oneshot::channel();
        let acks = SignalsAcked {
            by: by.into(),
            session_id: Some(Uuid::now_v7()),
            signal_ids: (0..n).map(|_| Uuid::now_v7()).collect(),
        };
        (Entry { tenant: tenant.into(), acks, handed_in: Instant::now(), done }, rx)
    }

    #[test]
    fn a_batch_is_one_event_per_tenant_with_every_session_whole() {
        let (a, _ra) = entry("t1", "bob", 3);
        let (b, _rb) = entry("t2", "eve", 2);
        let (c, _rc) = entry("t1", "carol", 4);
        let (events, answers) = events_of(vec![a, b, c]);
        let shown: Vec<(String, Vec<(String, usize)>)> = events
            .iter()
            .map(|(t, r)| (t.clone(), r.acks.iter().map(|a| (a.by.clone(), a.signal_ids.len())).collect()))
            .collect();
        assert_eq!(
            shown,
            [
                ("t1".to_string(), vec![("bob".to_string(), 3), ("carol".to_string(), 4)]),
                ("t2".to_string(), vec![("eve".to_string(), 2)]),
            ]
        );
        assert_eq!(answers.iter().map(|(i, _)| *i).collect::<Vec<_>>(), [0, 1, 0]);
    }

    #[test]
    fn a_tenant_past_the_id_limit_gets_another_event_and_no_entry_is_split() {
        let (a, _ra) = entry("t1", "bob", 600);
        let (b, _rb) = entry("t1", "carol", 600);
        let (c, _rc) = entry("t1", "dave", 300);
        let (d, _rd) = entry("t1", "erin", 1500);
        let (events, answers) = events_of(vec![a, b, c, d]);
        let sizes: Vec<Vec<usize>> =
            events.iter().map(|(_, r)| r.acks.iter().map(|a| a.signal_ids.len()).collect()).collect();
        assert_eq!(sizes, [vec![600], vec![600, 300], vec![1500]]);
        assert_eq!(answers.iter().map(|(i, _)| *i).collect::<Vec<_>>(), [0, 1, 1, 2]);
    }
}
