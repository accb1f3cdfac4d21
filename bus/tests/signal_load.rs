//! Loading a signal from a long JetStream stream: the read starts at a mark shortly before the
//! time in the signal's v7 id (`log/jetstream/marks.rs`) instead of at sequence 1, and a signal
//! whose id's clock was far off is still loaded whole, never answered `not_found` or half.
//!
//! Marks are used on nats-server 2.9.10 only, whose subject walks visit every block from where
//! they start (2.10 and later find a subject's first block themselves); the embedded log finds
//! a subject's events by an index and ignores the bound. These streams are short, so the logs
//! here start at a mark whatever it skips (`min_mark_skip: 1`).

mod support;

use std::time::Duration;

use bus::catalog::{Category, DeliveryClass};
use bus::event::{Entity, Event, EventBody, PublishPath, RecipientState, SignalSent};
use bus::log::jetstream::{JetStreamConfig, JetStreamLog};
use bus::log::{Expect, SharedLog};
use bus::signal::{SignalState, Status};
use bus::store::SignalStore;
use chrono::{DateTime, Utc};
use std::sync::Arc;
use support::{event_on, unique_stream, TENANT};
use testkit::{NatsServer, NatsVersion};
use uuid::{Timestamp, Uuid};

/// A v7 id that says it was made at `at`.
fn id_made_at(at: DateTime<Utc>) -> Uuid {
    let ms = at.timestamp_millis() as u64;
    Uuid::new_v7(Timestamp::from_unix(uuid::NoContext, ms / 1000, (ms % 1000) as u32 * 1_000_000))
}

fn sent(signal_id: Uuid) -> Event {
    let now = Utc::now();
    let body = SignalSent {
        signal_id,
        from: "alice".into(),
        to: "bob".into(),
        signal_type: "StatusUpdate".into(),
        category: Category::Task,
        priority: 1,
        payload: "{}".into(),
        delivery_class: DeliveryClass::Async,
        created_at: now,
        expires_at: now + chrono::Duration::hours(24),
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
    Event::new(TENANT, Some("alice".into()), now, EventBody::SignalSent(Box::new(body)))
}

/// A log on `stream` that starts a subject read at any mark.
async fn connect(url: &str, stream: &str) -> SharedLog {
    let config = JetStreamConfig { stream: stream.to_string(), min_mark_skip: 1, ..Default::default() };
    Arc::new(JetStreamLog::connect(url, config).await.expect("connect jetstream log"))
}

/// Appends `n` events, each on a subject of its own; their signal ids.
async fn fill(log: &SharedLog, n: usize) -> Vec<Uuid> {
    let mut ids = Vec::with_capacity(n);
    for _ in 0..n {
        let id = Uuid::new_v4();
        log.append(&event_on(id), Expect::Any).await.expect("append filler");
        ids.push(id);
    }
    ids
}

/// A signal in the first half of a stream, read through a log opened afterwards (so its marks
/// come from probing the stream's history): with a bound from a clock an hour ahead the read
/// starts past the signal's birth — the bound is used — yet `load` answers the whole signal,
/// because a read that misses the signal's birth is done again from the start (and what the
/// bounded read found is never taken for the whole subject).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_is_loaded_whole_whatever_its_ids_clock_says() {
    let nats = NatsServer::start().await;
    let stream = unique_stream();
    let writer = connect(&nats.url(), &stream).await;
    let early = Uuid::now_v7();
    let ahead = id_made_at(Utc::now() + chrono::Duration::hours(1));
    let old = fill(&writer, 50).await;
    for id in [early, ahead] {
        writer.append(&sent(id), Expect::LastSubjectSeq(0)).await.expect("append the send");
        writer.append(&event_on(id), Expect::Any).await.expect("append the ack");
    }
    // More than the 4,096 events before the stream's end where the history's newest probe is.
    fill(&writer, 4200).await;
    // And one event on each subject past that probe: a read from the bound finds only it.
    for id in [early, ahead] {
        writer.append(&event_on(id), Expect::Any).await.expect("append a late event");
    }

    let reader = connect(&nats.url(), &stream).await;
    let an_hour_on = Utc::now() + chrono::Duration::hours(1);
    // Each look at another old subject: one read from 1 teaches the log where it begins.
    let mut looks = old.iter().map(|id| reader.subjects().of(TENANT, Entity::Signal(*id)));
    loop {
        let subject = looks.next().expect("the history probes marked the stream within 50 looks");
        if reader.read_subject_born(&subject, an_hour_on).await.expect("read from a bound").is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let store = SignalStore::new(reader.clone());
    for id in [early, ahead] {
        let (state, last) = store.load(TENANT, id).await.expect("load");
        assert_eq!(state.sent.as_ref().map(|s| s.signal_id), Some(id), "the send of {id}");
        assert_eq!(state.status, Status::Pending, "{id}");
        let whole = reader.read_subject(&reader.subjects().of(TENANT, Entity::Signal(id))).await.unwrap();
        assert_eq!(whole.len(), 3);
        assert_eq!(state, SignalState::from_events(whole.iter().map(|s| &s.event.body)));
        assert_eq!(last, whole[2].seq, "the newest sequence on {id}'s subject");
    }
    let (missing, last) = store.load(TENANT, Uuid::now_v7()).await.expect("load a signal never sent");
    assert!(missing.sent.is_none() && last == 0);
}

/// The marks a writer leaves with its own appends: a signal made now is read from near its
/// send, and everything on its subject is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_signal_is_read_from_near_its_send() {
    let nats = NatsServer::start().await;
    let log = connect(&nats.url(), &unique_stream()).await;
    fill(&log, 20).await;
    let id = Uuid::now_v7();
    let a = log.append(&sent(id), Expect::LastSubjectSeq(0)).await.expect("append the send");
    log.append(&event_on(id), Expect::Any).await.expect("append the ack");
    let subject = log.subjects().of(TENANT, Entity::Signal(id));
    let from_born = log.read_subject_born(&subject, Utc::now()).await.unwrap();
    assert_eq!(from_born, log.read_subject(&subject).await.unwrap());
    assert_eq!(from_born.first().map(|s| s.seq), Some(a.seq));
}

/// nats-server 2.10 and later find a subject's first block from sequence 1 themselves: no mark
/// is used there, so even a bound from a clock an hour ahead reads the whole subject.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn current_servers_read_every_subject_from_the_start() {
    let nats = NatsServer::start_version(NatsVersion::Current).await;
    let log = connect(&nats.url(), &unique_stream()).await;
    let id = Uuid::now_v7();
    log.append(&sent(id), Expect::LastSubjectSeq(0)).await.expect("append the send");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    fill(&log, 20).await;
    let subject = log.subjects().of(TENANT, Entity::Signal(id));
    let an_hour_on = Utc::now() + chrono::Duration::hours(1);
    assert_eq!(log.read_subject_born(&subject, an_hour_on).await.unwrap(), log.read_subject(&subject).await.unwrap());
}

/// A log remembers where a subject begins; when the stream is made anew under the same name
/// (an operator's purge), the remembered start finds nothing and the subject is read from 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subject_is_read_whole_after_its_stream_was_made_anew() {
    let nats = NatsServer::start().await;
    let stream = unique_stream();
    let log = connect(&nats.url(), &stream).await;
    fill(&log, 30).await;
    let id = Uuid::now_v7();
    let subject = log.subjects().of(TENANT, Entity::Signal(id));
    log.append(&sent(id), Expect::LastSubjectSeq(0)).await.expect("append the send");
    assert_eq!(log.read_subject(&subject).await.unwrap().len(), 1);

    let js = async_nats::jetstream::new(async_nats::connect(nats.url()).await.expect("connect"));
    js.delete_stream(&stream).await.expect("delete the stream");
    let anew = connect(&nats.url(), &stream).await;
    let again = anew.append(&event_on(id), Expect::Any).await.expect("append on the new stream");
    assert_eq!(again.seq, 1);
    let read = log.read_subject(&subject).await.expect("read through the old log");
    assert_eq!(read.iter().map(|s| s.seq).collect::<Vec<_>>(), vec![1]);
}

/// A subject read before is answered from that read only while the stream's newest event on it
/// is the one the read ended with (`log/jetstream/recent.rs`): what another process appended
/// since, and what this one did, are in the next read; an unchanged subject reads the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subject_read_again_has_every_event_appended_since() {
    for version in [NatsVersion::Debian, NatsVersion::Current] {
        let nats = NatsServer::start_version(version).await;
        let stream = unique_stream();
        let (one, other) = (connect(&nats.url(), &stream).await, connect(&nats.url(), &stream).await);
        let id = Uuid::now_v7();
        let subject = one.subjects().of(TENANT, Entity::Signal(id));
        one.append(&sent(id), Expect::LastSubjectSeq(0)).await.expect("append the send");
        let seqs = |read: Vec<bus::log::Stored>| read.iter().map(|s| s.seq).collect::<Vec<_>>();
        let first = one.read_subject(&subject).await.unwrap();
        assert_eq!(seqs(first.clone()), vec![1]);
        fill(&one, 3).await;
        assert_eq!(one.read_subject(&subject).await.unwrap(), first, "{version:?}: nothing new, the same read");

        other.append(&event_on(id), Expect::LastSubjectSeq(1)).await.expect("another process appends");
        assert_eq!(seqs(one.read_subject(&subject).await.unwrap()), vec![1, 5], "{version:?}: the other's append");
        assert_eq!(seqs(one.read_subject(&subject).await.unwrap()), vec![1, 5], "{version:?}: read again");
        one.append(&event_on(id), Expect::LastSubjectSeq(5)).await.expect("this process appends");
        assert_eq!(seqs(one.read_subject(&subject).await.unwrap()), vec![1, 5, 6], "{version:?}: its own append");
        // Its newest event gone (a purge of the subject): nothing is answered from before.
        let js = async_nats::jetstream::new(async_nats::connect(nats.url()).await.expect("connect"));
        let s = js.get_stream(&stream).await.expect("the stream");
        s.purge().filter(&subject).await.expect("purge the subject");
        assert_eq!(one.read_subject(&subject).await.unwrap(), vec![], "{version:?}: purged");
    }
}
