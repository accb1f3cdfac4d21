//! The send batcher's rules: how a batch becomes events, how long the next batch waits, and
//! which sends its callers append themselves.

use bus::catalog::{Category, DeliveryClass};
use bus::event::{Entity, PublishPath, RecipientState};
use bus::log::embedded::EmbeddedLog;
use bus::log::SharedLog;
use uuid::Uuid;

use super::*;

async fn embedded_store() -> (SignalStore, SharedLog, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let log: SharedLog = Arc::new(EmbeddedLog::open(dir.path()).await.unwrap());
    (SignalStore::new(log.clone()), log, dir)
}

/// The sends `log` holds in `window`'s subject, with the sequence of the event holding each.
async fn recorded_in(log: &SharedLog, window: u64) -> Vec<(u64, Uuid)> {
    let subject = log.subjects().of("t1", Entity::Sends(window));
    let stored = log.read_subject(&subject).await.unwrap();
    stored.iter().flat_map(|s| s.event.body.sent_signals().map(move |sent| (s.seq, sent.signal_id))).collect()
}

fn entry(tenant: &str, window: u64, payload_bytes: usize) -> (Entry, oneshot::Receiver<Answer>) {
    let (done, rx) = oneshot::channel();
    let now = Utc::now();
    let sent = SignalSent {
        signal_id: Uuid::now_v7(),
        from: "alice".into(),
        to: "bob".into(),
        signal_type: "StatusUpdate".into(),
        category: Category::Task,
        priority: 1,
        payload: "x".repeat(payload_bytes),
        delivery_class: DeliveryClass::Async,
        created_at: now,
        expires_at: now + chrono::Duration::hours(1),
        recipient_state: RecipientState::NotAvailableOffline,
        publish_path: PublishPath::QueuedOffline,
        correlation_id: None,
        dedupe_key: None,
        redacted: vec![],
        resolved_to_session: None,
        pushed_to: None,
        fanout_id: None,
        deliver_at: None,
    };
    (Entry { tenant: tenant.into(), window, sent: Box::new(sent), handed_in: Instant::now(), done }, rx)
}

fn shape(groups: &[Group]) -> Vec<(String, u64, usize)> {
    groups
        .iter()
        .map(|(t, r, w)| {
            assert_eq!(r.sends.len(), w.len(), "one waiter per send");
            (t.clone(), r.window, r.sends.len())
        })
        .collect()
}

#[tokio::test]
async fn a_lone_send_is_appended_at_once_by_its_caller_as_a_batch_of_one() {
    let (store, log, _dir) = embedded_store().await;
    // No `run`: only the caller's own append can answer.
    let (batcher, _inbox) = SendBatcher::new(store);
    let (e, _) = entry("t1", 0, 10);
    let (id, window) = (e.sent.signal_id, send_window(e.sent.signal_id).unwrap());
    let answer = tokio::time::timeout(Duration::from_secs(5), batcher.record("t1", e.sent)).await;
    let (seq, sent) = answer.expect("answered without the batcher").expect("handed in").expect("recorded");
    assert_eq!(sent.signal_id, id);
    assert_eq!(recorded_in(&log, window).await, [(seq, id)], "one event of one send, at the answered seq");
    assert_eq!(batcher.recording.load(Ordering::Acquire), 0, "counted out");
}

#[tokio::test]
async fn a_send_handed_in_while_another_is_recorded_goes_to_the_batcher() {
    let (store, _log, _dir) = embedded_store().await;
    let (batcher, mut inbox) = SendBatcher::new(store);
    let (other, alone) = Recording::enter(&batcher.recording);
    assert!(alone);
    let (e, _) = entry("t1", 0, 10);
    let recording = tokio::spawn({
        let batcher = batcher.clone();
        async move { batcher.record("t1", e.sent).await }
    });
    let taken = tokio::time::timeout(Duration::from_secs(5), inbox.0.recv()).await.unwrap().unwrap();
    let _ = taken.done.send(Err(bus::Error::Unavailable("refused by the test".into())));
    let answer = recording.await.unwrap().expect("handed in");
    assert!(matches!(answer, Err(bus::Error::Unavailable(_))), "the batcher's answer, not its own append");
    drop(other);
    assert_eq!(batcher.recording.load(Ordering::Acquire), 0);
}

#[tokio::test]
async fn concurrent_sends_are_each_recorded_once_and_answered_with_the_seq_that_holds_them() {
    let (store, log, _dir) = embedded_store().await;
    let (batcher, inbox) = SendBatcher::new(store.clone());
    let stop = CancellationToken::new();
    let running = tokio::spawn(run(store, inbox, stop.clone()));
    let sends: Vec<_> = (0..200).map(|_| entry("t1", 0, 10).0.sent).collect();
    let windows: std::collections::BTreeSet<u64> = sends.iter().map(|s| send_window(s.signal_id).unwrap()).collect();
    let answers = join_all(sends.into_iter().map(|sent| {
        let batcher = batcher.clone();
        async move { batcher.record("t1", sent).await.expect("handed in").expect("recorded") }
    }))
    .await;
    let mut stored = Vec::new();
    for w in windows {
        stored.extend(recorded_in(&log, w).await);
    }
    let mut answered: Vec<(u64, Uuid)> = answers.iter().map(|(seq, sent)| (*seq, sent.signal_id)).collect();
    answered.sort();
    stored.sort();
    assert_eq!(answered, stored, "every send stored once, where its answer says");
    stop.cancel();
    running.await.unwrap();
}

#[test]
fn the_wait_for_appends_in_flight_doubles_with_each_up_to_its_bound() {
    let waits: Vec<u64> = (0..6).map(|n| stall_for(n).as_millis() as u64).collect();
    assert_eq!(waits, [2, 2, 4, 8, 10, 10]);
    assert_eq!(stall_for(usize::MAX), STALL_MAX);
}

#[test]
fn a_batch_is_one_event_per_tenant_and_window_in_the_order_each_first_appears() {
    let (a, _) = entry("t1", 7, 10);
    let (b, _) = entry("t2", 7, 10);
    let (c, _) = entry("t1", 8, 10);
    let (d, _) = entry("t1", 7, 10);
    let ids: Vec<Uuid> = [&a, &b, &c, &d].iter().map(|e| e.sent.signal_id).collect();
    let groups = events_of(vec![a, b, c, d]);
    assert_eq!(shape(&groups), [("t1".into(), 7, 2), ("t2".into(), 7, 1), ("t1".into(), 8, 1)]);
    let first: Vec<Uuid> = groups[0].1.sends.iter().map(|s| s.signal_id).collect();
    assert_eq!(first, [ids[0], ids[3]]);
}

#[test]
fn an_event_past_its_limits_is_followed_by_another_and_no_send_is_split() {
    let mut batch = Vec::new();
    for _ in 0..MAX_SENDS + 1 {
        batch.push(entry("t1", 1, 1).0);
    }
    batch.push(entry("t1", 2, MAX_BYTES).0); // alone over the byte limit: an event of its own
    batch.push(entry("t1", 2, 10).0);
    let groups = events_of(batch);
    assert_eq!(
        shape(&groups),
        [("t1".into(), 1, MAX_SENDS), ("t1".into(), 1, 1), ("t1".into(), 2, 1), ("t1".into(), 2, 1)]
    );
}
