//! The event-log conformance suite: the semantics documented on `bus::log::EventLog`, checked
//! case by case against every backend — JetStream on Debian's nats-server 2.9.10, on the
//! current release, and on a 3-node cluster of the current release with a stream of 3 replicas;
//! embedded SQLite — so they cannot drift apart. Backend-specific behaviour (server restarts
//! and a leader's death under a live tail, stream configuration) lives in `log_conformance/`.
//!
//! Deliberately mocks nothing: each test runs a real server or a real file.

mod support;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use bus::log::{Expect, SharedLog, Stored};
use bus::Error;
use support::{
    append_n, event_on, next_of, seqs, subject_of, Backend, Current, Debian, Embedded, JetStream, Replicated,
};
use uuid::Uuid;

async fn append_and_read_order<B: Backend>() {
    let b = B::open().await;
    let log = b.log();
    assert_eq!(log.last_seq().await.unwrap(), 0);
    assert!(log.read(1, 10).await.unwrap().is_empty());
    let signals: Vec<Uuid> = (0..3).map(|_| Uuid::new_v4()).collect();
    let mut ids = Vec::new();
    for i in 0..10u64 {
        let e = event_on(signals[i as usize % 3]);
        let a = log.append(&e, Expect::Any).await.unwrap();
        assert_eq!((a.seq, a.duplicate), (i + 1, false), "sequences are contiguous from 1");
        ids.push(e.event_id);
    }
    assert_eq!(log.last_seq().await.unwrap(), 10);

    let all = log.read(1, 100).await.unwrap();
    assert_eq!(seqs(&all), (1..=10).collect::<Vec<_>>());
    assert_eq!(all.iter().map(|s| s.event.event_id).collect::<Vec<_>>(), ids);
    for s in &all {
        assert_eq!(s.subject, subject_of(&log, s.event.body.signal_id().unwrap()));
    }
    assert_eq!(seqs(&log.read(4, 3).await.unwrap()), vec![4, 5, 6]);
    assert_eq!(seqs(&log.read(9, 100).await.unwrap()), vec![9, 10]);
    assert!(log.read(11, 100).await.unwrap().is_empty());
    assert!(log.read(5, 0).await.unwrap().is_empty());

    // Paging the way the projector does: each page starts after the previous one.
    let mut paged = Vec::new();
    let mut from = 1;
    loop {
        let page = log.read(from, 3).await.unwrap();
        let Some(last) = page.last() else { break };
        from = last.seq + 1;
        paged.extend(page);
    }
    assert_eq!(paged, all);

    for (k, signal) in signals.iter().enumerate() {
        let on = log.read_subject(&subject_of(&log, *signal)).await.unwrap();
        let expected: Vec<u64> = (1..=10).filter(|s| (s - 1) as usize % 3 == k).collect();
        assert_eq!(seqs(&on), expected, "read_subject is the subject's events, oldest first");
        assert!(on.iter().all(|s| s.event.body.signal_id() == Some(*signal)));
    }
    assert!(log.read_subject(&subject_of(&log, Uuid::new_v4())).await.unwrap().is_empty());
    log.ping().await.unwrap();
}

/// 50 writers race with the same expectation on one subject, 100 times: each round has exactly
/// one winner and 49 conflicts, and nothing the losers sent is stored.
async fn compare_and_set_race<B: Backend>() {
    let b = B::open().await;
    let log = b.log();
    let signal = Uuid::new_v4();
    let subject = subject_of(&log, signal);
    let started = Instant::now();
    let mut last = 0;
    for round in 0..100 {
        let tasks: Vec<_> = (0..50)
            .map(|_| {
                let log = log.clone();
                tokio::spawn(async move { log.append(&event_on(signal), Expect::LastSubjectSeq(last)).await })
            })
            .collect();
        let mut winners = Vec::new();
        for t in tasks {
            match t.await.unwrap() {
                Ok(a) => winners.push(a),
                Err(Error::Conflict { subject: s, expected, .. }) => {
                    assert_eq!((s.as_str(), expected), (subject.as_str(), last));
                }
                Err(e) => panic!("round {round}: unexpected error {e}"),
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: exactly one writer wins");
        assert!(!winners[0].duplicate);
        last = winners[0].seq;
    }
    assert_eq!(log.last_seq().await.unwrap(), 100, "losers stored nothing");
    assert_eq!(seqs(&log.read_subject(&subject).await.unwrap()), (1..=100).collect::<Vec<_>>());
    eprintln!("100 rounds of 50 contenders in {:?}", started.elapsed());
}

async fn retried_append_is_not_duplicated<B: Backend>() {
    let b = B::open().await;
    let log = b.log();
    let signal = Uuid::new_v4();
    let first = event_on(signal);
    let a = log.append(&first, Expect::LastSubjectSeq(0)).await.unwrap();
    assert_eq!((a.seq, a.duplicate), (1, false));
    // The retry carries the same expectation as the original, which no longer holds: the
    // retry must still be recognised as the same event, not as a lost race.
    let again = log.append(&first, Expect::LastSubjectSeq(0)).await.unwrap();
    assert_eq!((again.seq, again.duplicate), (1, true));
    // An unconditional append retried is recognised by its event id alone, after others.
    let free = event_on(Uuid::new_v4());
    assert_eq!(log.append(&free, Expect::Any).await.unwrap().seq, 2);
    let other = event_on(Uuid::new_v4());
    assert_eq!(log.append(&other, Expect::Any).await.unwrap().seq, 3);
    let again = log.append(&free, Expect::Any).await.unwrap();
    assert_eq!((again.seq, again.duplicate), (2, true));
    // A conditional repeat after later events on its subject fails its condition: stored once.
    let next = event_on(signal);
    assert_eq!(log.append(&next, Expect::LastSubjectSeq(1)).await.unwrap().seq, 4);
    // The answer may name the copy (the embedded log finds it by id) or the lost condition.
    match log.append(&first, Expect::LastSubjectSeq(0)).await {
        Ok(a) => assert_eq!((a.seq, a.duplicate), (1, true)),
        Err(Error::Conflict { .. }) => {}
        other => panic!("a repeat after later events: {other:?}"),
    }
    assert_eq!(log.last_seq().await.unwrap(), 4, "a retried append stores nothing");
    assert_eq!(log.read_subject(&subject_of(&log, signal)).await.unwrap().len(), 2);
}

/// A reader catches up with `read`, then tails from the next sequence while writers race:
/// the tail yields every later event exactly once, in sequence order, with no gap.
async fn tail_after_catch_up_has_no_gap<B: Backend>() {
    let b = B::open().await;
    let log = b.log();
    let signals: Vec<Uuid> = (0..5).map(|_| Uuid::new_v4()).collect();
    append_n(&log, &signals, 20).await;
    let caught_up = log.read(1, 1000).await.unwrap();
    let next = caught_up.last().unwrap().seq + 1;
    let mut tail = log.tail(next).await.unwrap();

    let writers: Vec<_> = (0..4)
        .map(|_| {
            let log = log.clone();
            let signals = signals.clone();
            tokio::spawn(async move { append_n(&log, &signals, 50).await })
        })
        .collect();
    let mut got = Vec::new();
    for _ in 0..200 {
        got.push(next_of(&mut tail).await);
    }
    let mut written = HashSet::new();
    for w in writers {
        written.extend(w.await.unwrap());
    }
    assert_eq!(seqs(&got), (21..=220).collect::<Vec<_>>(), "no gap, no reordering");
    assert_eq!(got.iter().map(|s| s.event.event_id).collect::<HashSet<_>>(), written);
    assert_eq!(got, log.read(21, 1000).await.unwrap(), "the tail yields what read returns");

    // A tail from the start replays what is stored, then keeps going.
    let mut from_start = log.tail(1).await.unwrap();
    for seq in 1..=220 {
        assert_eq!(next_of(&mut from_start).await.seq, seq);
    }
    let late = event_on(signals[0]);
    log.append(&late, Expect::Any).await.unwrap();
    assert_eq!(next_of(&mut from_start).await.event.event_id, late.event_id);
    assert_eq!(next_of(&mut tail).await.event.event_id, late.event_id);
    // A tail opened again behind what was already followed live (a reader resuming after an
    // error) gets the stored events without waiting for another append.
    let mut resumed = log.tail(220).await.unwrap();
    assert_eq!(seqs(&[next_of(&mut resumed).await, next_of(&mut resumed).await]), vec![220, 221]);
}

async fn survives_reopen<B: Backend>() {
    let mut b = B::open().await;
    let log = b.log();
    let signals: Vec<Uuid> = (0..3).map(|_| Uuid::new_v4()).collect();
    append_n(&log, &signals, 12).await;
    let first = event_on(signals[0]);
    let landed = log.append(&first, Expect::Any).await.unwrap();
    let before = log.read(1, 100).await.unwrap();
    let subject = subject_of(&log, signals[0]);
    let last_before = log.last_on_subject(&subject).await.unwrap().unwrap();
    drop(log);

    b.reopen().await;
    let log = b.log();
    assert_eq!(log.last_seq().await.unwrap(), 13);
    assert_eq!(log.read(1, 100).await.unwrap(), before);
    assert_eq!(log.last_on_subject(&subject).await.unwrap().unwrap(), last_before);
    assert_eq!(log.read_subject(&subject).await.unwrap().last(), Some(&last_before));
    // Compare-and-set and dedupe carry on from what was persisted.
    let retry = log.append(&first, Expect::Any).await.unwrap();
    assert_eq!((retry.seq, retry.duplicate), (landed.seq, true));
    let next = log.append(&event_on(signals[0]), Expect::LastSubjectSeq(last_before.seq)).await.unwrap();
    assert_eq!((next.seq, next.duplicate), (14, false));
    let stale = log.append(&event_on(signals[0]), Expect::LastSubjectSeq(last_before.seq)).await;
    assert!(matches!(stale, Err(Error::Conflict { .. })), "{stale:?}");
    ping_eventually(&log).await;
}

async fn ping_eventually(log: &SharedLog) {
    for _ in 0..50 {
        if log.ping().await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    log.ping().await.unwrap();
}

async fn last_on_subject<B: Backend>() {
    let b = B::open().await;
    let log = b.log();
    let signal = Uuid::new_v4();
    let subject = subject_of(&log, signal);
    assert_eq!(log.last_on_subject(&subject).await.unwrap(), None);
    let mut last = None;
    for _ in 0..3 {
        let e = event_on(signal);
        log.append(&event_on(Uuid::new_v4()), Expect::Any).await.unwrap();
        let a = log.append(&e, Expect::Any).await.unwrap();
        last = Some(Stored { seq: a.seq, subject: subject.clone(), event: e });
    }
    assert_eq!(log.last_on_subject(&subject).await.unwrap(), last);
    assert_eq!(log.last_on_subject(&subject_of(&log, Uuid::new_v4())).await.unwrap(), None);
}

async fn conflict_when_expecting_empty_subject<B: Backend>() {
    let b = B::open().await;
    let log = b.log();
    let signal = Uuid::new_v4();
    let subject = subject_of(&log, signal);
    let a = log.append(&event_on(signal), Expect::LastSubjectSeq(0)).await.unwrap();
    log.append(&event_on(Uuid::new_v4()), Expect::Any).await.unwrap();
    match log.append(&event_on(signal), Expect::LastSubjectSeq(0)).await {
        Err(Error::Conflict { subject: s, expected: 0, .. }) => assert_eq!(s, subject),
        other => panic!("expected a conflict, got {other:?}"),
    }
    // A sequence that exists on the stream but is not this subject's newest is also a conflict.
    let r = log.append(&event_on(signal), Expect::LastSubjectSeq(2)).await;
    assert!(matches!(r, Err(Error::Conflict { expected: 2, .. })), "{r:?}");
    let ok = log.append(&event_on(signal), Expect::LastSubjectSeq(a.seq)).await.unwrap();
    assert_eq!(ok.seq, 3);
    assert_eq!(log.last_seq().await.unwrap(), 3);
}

/// A writer sees its own write at once — on its subject and in a page from the start — while
/// other writers keep the stream busy (a replicated stream's followers lag behind its leader).
async fn own_writes_are_visible_at_once<B: Backend>() {
    let b = B::open().await;
    let log = b.log();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for _ in 0..4 {
        let (log, stop) = (log.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = log.append(&event_on(Uuid::new_v4()), Expect::Any).await;
            }
        });
    }
    for i in 0..150 {
        let signal = Uuid::new_v4();
        let subject = subject_of(&log, signal);
        let a = log.append(&event_on(signal), Expect::LastSubjectSeq(0)).await.unwrap();
        assert_eq!(log.last_on_subject(&subject).await.unwrap().map(|s| s.seq), Some(a.seq), "write {i}");
        assert_eq!(seqs(&log.read_subject(&subject).await.unwrap()), vec![a.seq], "write {i}");
        if i % 15 == 0 {
            let page = log.read(a.seq.saturating_sub(50).max(1), 1000).await.unwrap();
            assert!(page.last().is_some_and(|s| s.seq >= a.seq), "write {i}: a page from before it ends before it");
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// A delivery carries its signal's `expires_at` as its deadline (`EventBody::store_by`): one
/// that can only be stored at or after it is refused `TooLate` and nothing is stored; one in
/// time counts.
async fn a_delivery_after_its_signals_expiry_is_refused<B: Backend>() {
    let b = B::open().await;
    let log = b.log();
    let delivery = |expires_at| {
        let body = bus::event::EventBody::SignalDelivered(bus::event::SignalDelivered {
            signal_id: Uuid::new_v4(),
            to: "bob".into(),
            via: bus::event::DeliveredVia::WsPush,
            session_id: None,
            redelivered: false,
            expires_at: Some(expires_at),
        });
        bus::event::Event::new(support::TENANT, Some("bob".into()), chrono::Utc::now(), body)
    };
    let late = delivery(chrono::Utc::now() - chrono::Duration::milliseconds(1));
    assert!(matches!(log.append(&late, Expect::Any).await, Err(Error::TooLate)), "a late delivery is refused");
    assert_eq!(log.last_seq().await.unwrap(), 0, "nothing of a refused delivery is stored");
    let in_time = delivery(chrono::Utc::now() + chrono::Duration::seconds(60));
    let a = log.append(&in_time, Expect::Any).await.unwrap();
    let stored = log.read(a.seq, 1).await.unwrap();
    assert_eq!(stored[0].event.event_id, in_time.event_id);
    assert!(matches!(stored[0].event.body, bus::event::EventBody::SignalDelivered(_)), "in time, it counts");
}

macro_rules! conformance {
    ($backend:ident, $ty:ty) => {
        mod $backend {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn append_and_read_order() {
                super::append_and_read_order::<$ty>().await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn compare_and_set_race() {
                super::compare_and_set_race::<$ty>().await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn retried_append_is_not_duplicated() {
                super::retried_append_is_not_duplicated::<$ty>().await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn tail_after_catch_up_has_no_gap() {
                super::tail_after_catch_up_has_no_gap::<$ty>().await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn survives_reopen() {
                super::survives_reopen::<$ty>().await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn last_on_subject() {
                super::last_on_subject::<$ty>().await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn own_writes_are_visible_at_once() {
                super::own_writes_are_visible_at_once::<$ty>().await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_delivery_after_its_signals_expiry_is_refused() {
                super::a_delivery_after_its_signals_expiry_is_refused::<$ty>().await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn conflict_when_expecting_empty_subject() {
                super::conflict_when_expecting_empty_subject::<$ty>().await
            }
        }
    };
}

conformance!(jetstream, JetStream<Debian>);
conformance!(jetstream_current, JetStream<Current>);
conformance!(jetstream_replicated, Replicated);
conformance!(embedded, Embedded);

#[path = "log_conformance/replicated.rs"]
mod replicated;

#[path = "log_conformance/jetstream_only.rs"]
mod jetstream_only;
