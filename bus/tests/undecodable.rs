//! An event the codec cannot decode (written to the stream by another program, or corrupt) never
//! stops a reader — the `EventLog` semantics in `bus::log`, on both backends: every tail yields
//! it once as `Error::Undecodable` (with its sequence and subject) and goes on after it; `read`
//! stops short of it and fails only when it starts at it.
//!
//! Deliberately its own suite next to `log_conformance.rs`, with the same backends.

mod support;

use bus::log::Expect;
use bus::Error;
use support::{
    append_n, event_on, next_item, seqs, subject_of, Backend, Current, Debian, Embedded, JetStream, Replicated,
};
use uuid::Uuid;

/// Not MessagePack at all (0xc1 is never used), then a map that is not an event.
const GARBAGE: [&[u8]; 2] = [b"\xc1 not msgpack", b"\x81\xa4type\xa9bogus.one"];

async fn undecodable_events_are_reported_once_and_passed<B: Backend>() {
    let b = B::open().await;
    let log = b.log();
    let signal = Uuid::new_v4();
    let subject = subject_of(&log, signal);
    append_n(&log, &[signal], 3).await;
    // A tail following live before the bad events arrive, and one resting exactly at the first.
    let mut live = log.tail(1).await.unwrap();
    for _ in 0..3 {
        next_item(&mut live).await.unwrap();
    }
    let mut at_bad = log.tail(4).await.unwrap();
    let bad: Vec<u64> = [b.append_raw(&subject, GARBAGE[0]).await, b.append_raw(&subject, GARBAGE[1]).await].into();
    assert_eq!(bad, [4, 5]);
    let after = event_on(signal);
    log.append(&after, Expect::Any).await.unwrap();

    assert_eq!(seqs(&log.read(1, 100).await.unwrap()), [1, 2, 3], "read stops short of it");
    for seq in bad.clone() {
        match log.read(seq, 100).await {
            Err(Error::Undecodable { seq: s, subject: on, reason }) => {
                assert_eq!((s, on.as_str()), (seq, subject.as_str()));
                assert!(!reason.is_empty());
            }
            other => panic!("read from an undecodable event: {other:?}"),
        }
    }
    assert_eq!(seqs(&log.read(6, 100).await.unwrap()), [6]);

    let mut from_start = log.tail(1).await.unwrap();
    for _ in 0..3 {
        next_item(&mut from_start).await.unwrap();
    }
    for (name, tail) in [("live", &mut live), ("at the bad event", &mut at_bad), ("catching up", &mut from_start)] {
        for seq in bad.clone() {
            match next_item(tail).await {
                Err(Error::Undecodable { seq: s, .. }) => assert_eq!(s, seq, "{name}"),
                other => panic!("{name}: expected undecodable event {seq}, got {other:?}"),
            }
        }
        let next = next_item(tail).await.unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!((next.seq, next.event.event_id), (6, after.event_id), "{name}: and goes on after it");
    }
    // Appends after it keep coming to a tail that passed it.
    let later = event_on(signal);
    log.append(&later, Expect::Any).await.unwrap();
    assert_eq!(next_item(&mut live).await.unwrap().event.event_id, later.event_id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jetstream() {
    undecodable_events_are_reported_once_and_passed::<JetStream<Debian>>().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jetstream_current() {
    undecodable_events_are_reported_once_and_passed::<JetStream<Current>>().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jetstream_replicated() {
    undecodable_events_are_reported_once_and_passed::<Replicated>().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded() {
    undecodable_events_are_reported_once_and_passed::<Embedded>().await
}
