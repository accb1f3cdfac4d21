//! The event-log conformance suite: the semantics documented on `bus::log::EventLog`, checked
//! case by case against every backend (JetStream on a private nats-server, embedded SQLite), so
//! the two cannot drift apart. Backend-specific behaviour (server restarts under a live tail,
//! stream configuration) is tested at the end.
//!
//! Deliberately mocks nothing: each test runs a real server or a real file.

mod support;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use bus::log::{EventLog, Expect, SharedLog, Stored};
use bus::Error;
use support::{append_n, append_retrying, event_on, next_of, seqs, subject_of, Backend, Embedded, JetStream};
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
    let other = event_on(Uuid::new_v4());
    assert_eq!(log.append(&other, Expect::Any).await.unwrap().seq, 2);
    let again = log.append(&first, Expect::Any).await.unwrap();
    assert_eq!((again.seq, again.duplicate), (1, true));
    assert_eq!(log.last_seq().await.unwrap(), 2, "a retried append stores nothing");
    assert_eq!(log.read_subject(&subject_of(&log, signal)).await.unwrap().len(), 1);
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
            async fn conflict_when_expecting_empty_subject() {
                super::conflict_when_expecting_empty_subject::<$ty>().await
            }
        }
    };
}

conformance!(jetstream, JetStream);
conformance!(embedded, Embedded);

mod jetstream_only {
    use super::*;
    use bus::log::jetstream::{JetStreamConfig, JetStreamLog};
    use support::unique_stream;
    use testkit::NatsServer;

    /// A live tail and a live client ride through a server restart: the tail yields everything
    /// appended before and after it, in order, without gaps or repeats.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tail_survives_server_restart() {
        tail_survives(false).await
    }

    /// The same through a crash (SIGKILL): acknowledged events were on disk before their ack.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tail_survives_server_crash() {
        tail_survives(true).await
    }

    async fn tail_survives(crash: bool) {
        let mut b = JetStream::open().await;
        let log = b.log();
        let signal = Uuid::new_v4();
        append_n(&log, &[signal], 5).await;
        let mut tail = log.tail(1).await.unwrap();
        for seq in 1..=5 {
            assert_eq!(next_of(&mut tail).await.seq, seq);
        }
        // Leaves `read`'s cursor consumer standing at 6; the restart loses it.
        assert_eq!(seqs(&log.read(1, 100).await.unwrap()), vec![1, 2, 3, 4, 5]);
        if crash {
            b.server.kill().await;
        }
        b.server.restart().await;
        for _ in 0..5 {
            append_retrying(&log, &event_on(signal), Expect::Any).await;
        }
        for seq in 6..=10 {
            assert_eq!(next_of(&mut tail).await.seq, seq);
        }
        assert_eq!(seqs(&log.read(6, 100).await.unwrap()), vec![6, 7, 8, 9, 10]);
        assert_eq!(log.last_seq().await.unwrap(), 10);
    }

    /// Streams with different names share a server without seeing each other's events.
    #[tokio::test]
    async fn streams_with_different_names_are_isolated() {
        let server = NatsServer::start().await;
        let a = JetStream::connect(&server.url(), &unique_stream()).await;
        let b = JetStream::connect(&server.url(), &unique_stream()).await;
        assert_ne!(a.subjects().prefix(), b.subjects().prefix());
        let (a, b): (SharedLog, SharedLog) = (a, b);
        append_n(&a, &[Uuid::new_v4()], 3).await;
        assert_eq!(a.last_seq().await.unwrap(), 3);
        assert_eq!(b.last_seq().await.unwrap(), 0);
        assert!(b.read(1, 10).await.unwrap().is_empty());
    }

    /// Reconnecting with another `max_age` updates the existing stream and keeps its events.
    #[tokio::test]
    async fn reconnect_updates_max_age() {
        let server = NatsServer::start().await;
        let stream = unique_stream();
        let first = JetStream::connect(&server.url(), &stream).await;
        let shared: SharedLog = first.clone();
        append_n(&shared, &[Uuid::new_v4()], 2).await;
        let config = JetStreamConfig { stream: stream.clone(), max_age: Duration::from_secs(3600) };
        let second = JetStreamLog::connect(&server.url(), config).await.unwrap();
        assert_eq!(second.last_seq().await.unwrap(), 2);
        let nats = async_nats::connect(server.url()).await.unwrap();
        let info = async_nats::jetstream::new(nats).get_stream(&stream).await.unwrap().get_info().await.unwrap();
        assert_eq!(info.config.max_age, Duration::from_secs(3600));
        assert!(info.config.allow_direct);
        assert_eq!(info.config.subjects, vec![format!("{}.>", stream.to_lowercase())]);
        // Shorter than the duplicate window: the window shrinks with it instead of failing.
        let config = JetStreamConfig { stream: stream.clone(), max_age: Duration::from_secs(30) };
        let third = JetStreamLog::connect(&server.url(), config).await.unwrap();
        assert_eq!(third.last_seq().await.unwrap(), 2);
    }

    /// How fast a projector-style reader pages through the stream (`cargo test -- --ignored`).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "throughput measurement, not a check"]
    async fn read_throughput() {
        const N: usize = 100_000;
        let b = JetStream::open().await;
        let log = b.log();
        let started = Instant::now();
        let writers: Vec<_> = (0..32)
            .map(|_| {
                let log = log.clone();
                tokio::spawn(async move { append_n(&log, &[Uuid::new_v4()], N / 32).await })
            })
            .collect();
        for w in writers {
            w.await.unwrap();
        }
        let total = log.last_seq().await.unwrap();
        eprintln!("appended {total} events in {:?}", started.elapsed());
        let started = Instant::now();
        let (mut from, mut read) = (1, 0);
        loop {
            let page = log.read(from, 1000).await.unwrap();
            let Some(last) = page.last() else { break };
            from = last.seq + 1;
            read += page.len();
        }
        assert_eq!(read as u64, total);
        let secs = started.elapsed().as_secs_f64();
        eprintln!("read {read} events in {secs:.2}s ({:.0}/s)", read as f64 / secs);
    }

    #[tokio::test]
    async fn unreachable_server_is_unavailable() {
        let mut server = NatsServer::start().await;
        let url = server.url();
        server.stop().await;
        let r = JetStreamLog::connect(&url, JetStreamConfig::default()).await;
        assert!(matches!(r, Err(Error::Unavailable(_))), "{r:?}");
    }
}
