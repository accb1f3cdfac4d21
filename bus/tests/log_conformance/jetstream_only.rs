//! JetStream-only behaviour of the event log on one server: a live tail through a restart and a
//! crash (on both releases), streams sharing a server, retention updates, the stream's block
//! size, server lists, and stream configurations the bus refuses to adopt.
//!
//! Deliberately not the shared semantics: those run through `conformance!`.

use std::time::{Duration, Instant};

use bus::log::{EventLog, Expect, SharedLog};
use bus::Error;
use uuid::Uuid;

use bus::log::jetstream::{JetStreamConfig, JetStreamLog};
use testkit::NatsServer;

use crate::support::{
    append_n, append_retrying, connect, event_on, next_of, seqs, unique_stream, Backend, Current, Debian, JetStream,
    Release,
};

/// A live tail and a live client ride through a server restart: the tail yields everything
/// appended before and after it, in order, without gaps or repeats.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_survives_server_restart() {
    tail_survives::<Debian>(false).await
}

/// The same through a crash (SIGKILL): acknowledged events were on disk before their ack.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_survives_server_crash() {
    tail_survives::<Debian>(true).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_survives_server_restart_current() {
    tail_survives::<Current>(false).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_survives_server_crash_current() {
    tail_survives::<Current>(true).await
}

async fn tail_survives<R: Release>(crash: bool) {
    let mut b = JetStream::<R>::open().await;
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
    let a = connect(&server.url(), &unique_stream(), 1).await;
    let b = connect(&server.url(), &unique_stream(), 1).await;
    assert_ne!(a.subjects().prefix(), b.subjects().prefix());
    let (a, b): (SharedLog, SharedLog) = (a, b);
    append_n(&a, &[Uuid::new_v4()], 3).await;
    assert_eq!(a.last_seq().await.unwrap(), 3);
    assert_eq!(b.last_seq().await.unwrap(), 0);
    assert!(b.read(1, 10).await.unwrap().is_empty());
}

/// Processes started together against a fresh server race to create the stream; every one of
/// them opens it (the loser of a create finds the winner's stream instead of failing to start).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_opened_at_once_on_a_fresh_server_all_open_the_one_stream() {
    for _ in 0..3 {
        let server = NatsServer::start().await;
        let stream = unique_stream();
        let opens = (0..6).map(|_| {
            let (url, stream) = (server.url(), stream.clone());
            tokio::spawn(
                async move { JetStreamLog::connect(&url, JetStreamConfig { stream, ..Default::default() }).await },
            )
        });
        for open in futures::future::join_all(opens).await {
            let log = open.unwrap().expect("every process opens the stream");
            assert_eq!(log.subjects().prefix(), stream.to_lowercase());
        }
    }
}

/// Reconnecting with another `max_age` updates the existing stream and keeps its events.
#[tokio::test]
async fn reconnect_updates_max_age() {
    let server = NatsServer::start().await;
    let stream = unique_stream();
    let first = connect(&server.url(), &stream, 1).await;
    let shared: SharedLog = first.clone();
    append_n(&shared, &[Uuid::new_v4()], 2).await;
    let config = JetStreamConfig {
        stream: stream.clone(),
        max_age: Duration::from_secs(3600),
        replicas: 1,
        ..Default::default()
    };
    let second = JetStreamLog::connect(&server.url(), config).await.unwrap();
    assert_eq!(second.last_seq().await.unwrap(), 2);
    let nats = async_nats::connect(server.url()).await.unwrap();
    let info = async_nats::jetstream::new(nats).get_stream(&stream).await.unwrap().get_info().await.unwrap();
    assert_eq!(info.config.max_age, Duration::from_secs(3600));
    assert!(info.config.allow_direct);
    assert_eq!(info.config.subjects, vec![format!("{}.>", stream.to_lowercase())]);
    // Shorter than the duplicate window: the window shrinks with it instead of failing.
    let config =
        JetStreamConfig { stream: stream.clone(), max_age: Duration::from_secs(30), replicas: 1, ..Default::default() };
    let third = JetStreamLog::connect(&server.url(), config).await.unwrap();
    assert_eq!(third.last_seq().await.unwrap(), 2);
}

/// The stream is stored in 4 MB message blocks, not the 8 MB a stream without limits gets: the
/// bus sets a per-subject limit no subject reaches (`PER_SUBJECT_LIMIT`), on a stream it creates
/// and on one it finds without a limit, whose events it keeps. 6 MB of messages fill two block
/// files where 8 MB blocks would hold them in one. On both releases.
#[tokio::test]
async fn the_stream_is_stored_in_4_mb_blocks_under_a_per_subject_limit_nothing_reaches() {
    stored_in_4_mb_blocks::<Debian>().await
}

#[tokio::test]
async fn the_stream_is_stored_in_4_mb_blocks_under_a_per_subject_limit_nothing_reaches_current() {
    stored_in_4_mb_blocks::<Current>().await
}

async fn stored_in_4_mb_blocks<R: Release>() {
    let server = NatsServer::start_version(R::VERSION).await;
    let js = async_nats::jetstream::new(async_nats::connect(server.url()).await.unwrap());
    let found = unique_stream();
    let unlimited = async_nats::jetstream::stream::Config {
        name: found.clone(),
        subjects: vec![format!("{}.>", found.to_lowercase())],
        duplicate_window: Duration::from_secs(120),
        ..Default::default()
    };
    js.create_stream(unlimited).await.unwrap();
    js.publish(format!("{}.before", found.to_lowercase()), "kept".into()).await.unwrap().await.unwrap();
    connect(&server.url(), &found, 1).await;
    let created = unique_stream();
    connect(&server.url(), &created, 1).await;
    for stream in [&found, &created] {
        let info = js.get_stream(stream).await.unwrap().get_info().await.unwrap();
        assert_eq!(info.config.max_messages_per_subject, i64::MAX, "{stream}");
    }
    assert_eq!(js.get_stream(&found).await.unwrap().get_info().await.unwrap().state.messages, 1);

    let payload = bytes::Bytes::from(vec![b'x'; 64 * 1024]);
    for n in 0..96 {
        let subject = format!("{}.filler.{}", created.to_lowercase(), n % 3);
        js.publish(subject, payload.clone()).await.unwrap().await.unwrap();
    }
    let msgs = server.store_dir().join("jetstream").join("$G").join("streams").join(&created).join("msgs");
    let blocks = std::fs::read_dir(&msgs)
        .unwrap_or_else(|e| panic!("{}: {e}", msgs.display()))
        .filter(|f| f.as_ref().unwrap().file_name().to_string_lossy().ends_with(".blk"))
        .count();
    assert_eq!(blocks, 2, "6 MB in 4 MB blocks");
}

/// `--nats-url` takes a cluster's servers as a comma-separated list; an unreachable one in
/// the list does not stop the connection.
#[tokio::test]
async fn a_comma_separated_server_list_connects() {
    let server = NatsServer::start().await;
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let urls = format!("nats://127.0.0.1:{dead}, {}", server.url());
    let config = JetStreamConfig { stream: unique_stream(), ..Default::default() };
    let log = JetStreamLog::connect(&urls, config).await.expect("connects through the live server");
    assert_eq!(log.last_seq().await.unwrap(), 0);
}

/// A stream that exists with another replica count is refused with a fix, never rewritten;
/// replicas > 1 against a server older than 2.10.19 are refused before anything is created.
#[tokio::test]
async fn another_replica_count_is_reported_not_adopted() {
    let server = NatsServer::start().await;
    let stream = unique_stream();
    let nats = async_nats::connect(server.url()).await.unwrap();
    let version = nats.server_info().version.clone();
    let config = JetStreamConfig { stream: stream.clone(), replicas: 3, ..Default::default() };
    let err = JetStreamLog::connect(&server.url(), config).await.unwrap_err().to_string();
    if version.starts_with("2.9.") {
        assert!(err.contains("2.10.19"), "{err}");
    } else {
        // A single server cannot hold 3 replicas: the server refuses the stream.
        assert!(!err.is_empty());
    }
    // Created by hand with a short duplicate window: reported, not silently changed.
    let js = async_nats::jetstream::new(nats);
    let subjects = vec![format!("{}.>", stream.to_lowercase())];
    let short = async_nats::jetstream::stream::Config {
        name: stream.clone(),
        subjects,
        duplicate_window: Duration::from_secs(2),
        ..Default::default()
    };
    js.create_stream(short).await.unwrap();
    let config = JetStreamConfig { stream: stream.clone(), ..Default::default() };
    let err = JetStreamLog::connect(&server.url(), config).await.unwrap_err().to_string();
    assert!(err.contains("duplicate window") && err.contains("nats stream edit"), "{err}");
    let info = js.get_stream(&stream).await.unwrap().get_info().await.unwrap();
    assert_eq!(info.config.duplicate_window, Duration::from_secs(2), "the stream was left as it was");
}

/// How fast a projector-style reader pages through the stream (`cargo test -- --ignored`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "throughput measurement, not a check"]
async fn read_throughput() {
    const N: usize = 100_000;
    let b = JetStream::<Debian>::open().await;
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

/// A live tail that reads nothing while far more than the shared tail retains is appended (50
/// plugin facts of ~900 KB: the upstream keeps 32 MiB alive, so the oldest are let go unread)
/// still yields every event, in order and whole, from a private tail where the broadcast let go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tail_behind_more_than_the_retained_bytes_misses_nothing() {
    use bus::event::{Event, EventBody, PluginFactRecorded};

    let b = JetStream::<Debian>::open().await;
    let log = b.log();
    let mut tail = log.tail(1).await.unwrap();
    let state = |n: u64| format!("{{\"n\":{n},\"pad\":\"{}\"}}", "x".repeat(900_000));
    for n in 1..=50u64 {
        let fact = PluginFactRecorded {
            plugin: "alice".into(),
            seq: n,
            fact_type: "big".into(),
            state: state(n),
            recorded_by: "alice".into(),
        };
        let event =
            Event::new("default", Some("alice".into()), chrono::Utc::now(), EventBody::PluginFactRecorded(fact));
        log.append(&event, Expect::Any).await.unwrap();
    }
    for seq in 1..=50u64 {
        let stored = next_of(&mut tail).await;
        assert_eq!(stored.seq, seq);
        let EventBody::PluginFactRecorded(fact) = &stored.event.body else { panic!("not a fact: {stored:?}") };
        assert_eq!((fact.seq, fact.state.len()), (seq, state(seq).len()));
    }
}

/// A tail whose consumer cannot be made (here the stream's consumer limit is taken; in a cluster
/// it is the meta leader that is missing for seconds after a node died) reads the events
/// straight from the stream meanwhile: every one, in order, from where it was asked to start,
/// across a deleted sequence, whether they were there before it started or came after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tail_that_cannot_make_its_consumer_reads_the_stream_directly() {
    let server = NatsServer::start().await;
    let stream = unique_stream();
    let js = async_nats::jetstream::new(async_nats::connect(server.url()).await.unwrap());
    let config = async_nats::jetstream::stream::Config {
        name: stream.clone(),
        subjects: vec![format!("{}.>", stream.to_lowercase())],
        duplicate_window: Duration::from_secs(120),
        allow_direct: true,
        max_consumers: 1,
        ..Default::default()
    };
    let taken =
        async_nats::jetstream::consumer::pull::Config { durable_name: Some("taken".into()), ..Default::default() };
    let raw = js.create_stream(config).await.unwrap();
    raw.create_consumer(taken).await.unwrap();
    let log: SharedLog = connect(&server.url(), &stream, 1).await;
    let signal = Uuid::new_v4();
    append_n(&log, &[signal], 60).await;
    assert!(raw.delete_message(40).await.unwrap());
    let mut tail = log.tail(2).await.unwrap();
    append_n(&log, &[signal], 40).await;
    let expected: Vec<u64> = (2..=100).filter(|s| *s != 40).collect();
    let mut got = Vec::new();
    for _ in &expected {
        got.push(next_of(&mut tail).await.seq);
    }
    assert_eq!(got, expected);
}

/// A live tail hands this process's own appends on without decoding them (`own.rs`): what it
/// yields must equal, event for event, what a reader that decodes the stream gets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tail_yields_its_own_appends_as_a_decoding_reader_reads_them() {
    let server = NatsServer::start().await;
    let stream = unique_stream();
    let own = connect(&server.url(), &stream, 1).await;
    let ours: SharedLog = own.clone();
    let mut tail = ours.tail(1).await.unwrap();
    let (signal, session) = (Uuid::new_v4(), Uuid::new_v4());
    for n in 0..40 {
        let event = if n % 3 == 0 {
            let body = bus::event::EventBody::SessionHeartbeat(bus::event::SessionHeartbeat {
                session_id: session,
                identity: format!("agent-{n}"),
            });
            bus::event::Event::new("acme", Some("agent".into()), chrono::Utc::now(), body)
        } else {
            event_on(signal)
        };
        ours.append(&event, Expect::Any).await.unwrap();
    }
    let mut tailed = Vec::new();
    for _ in 0..40 {
        tailed.push(next_of(&mut tail).await);
    }
    let other: SharedLog = connect(&server.url(), &stream, 1).await;
    let decoded = other.read(1, 100).await.unwrap();
    assert_eq!(decoded.len(), 40);
    assert!(tailed.iter().all(|s| s.event.accept_by.is_none()), "the writer's stamp is consumed");
    assert_eq!(tailed, decoded);
    assert!(own.own_events_reused() > 0, "no append was handed on undecoded");
}
