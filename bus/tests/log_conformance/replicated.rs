//! The event log on a 3-node JetStream cluster (current nats-server, stream of 3 replicas): what
//! only a cluster can show — a live tail riding through the death of the stream's leader, and a
//! stream of another replica count refused, not adopted.
//!
//! Deliberately only cluster behaviour: the shared semantics run through `conformance!` with the
//! `Replicated` backend.

use std::time::Duration;

use bus::event::EventBody;
use bus::log::jetstream::{JetStreamConfig, JetStreamLog};
use bus::log::{EventLog, Expect, SharedLog};
use testkit::{NatsCluster, NatsVersion};
use uuid::Uuid;

use tokio::time::Instant;

use crate::support::{append_n, connect, event_on, next_of, seqs, subject_of, unique_stream, Backend, Replicated};

/// kill -9 of the node leading the stream: appends resume once another node leads, a live tail
/// yields everything before and after in order with no gap or repeat, and the restarted node
/// catches up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_survives_the_stream_leaders_death() {
    let mut b = Replicated::open().await;
    let log = b.log();
    let signal = Uuid::new_v4();
    append_n(&log, &[signal], 5).await;
    let mut tail = log.tail(1).await.unwrap();
    for seq in 1..=5 {
        assert_eq!(next_of(&mut tail).await.seq, seq);
    }
    let leader = b.cluster.stream_leader(&b.stream, Duration::from_secs(10)).await;
    b.cluster.node(leader).kill().await;
    let mut accepted = Vec::new();
    for _ in 0..5 {
        accepted.push(append_through_election(&log, signal).await);
    }
    // Every sequence after 5 in order, the accepted events among them and nothing else alive
    // (an append answered "nothing was accepted" may have left a void copy).
    let last = accepted.last().unwrap().0;
    let mut alive = Vec::new();
    for seq in 6..=last {
        let s = next_of(&mut tail).await;
        assert_eq!(s.seq, seq);
        if !matches!(s.event.body, EventBody::Voided(_)) {
            alive.push((s.seq, s.event.event_id));
        }
    }
    assert_eq!(alive, accepted);
    assert_ne!(b.cluster.stream_leader(&b.stream, Duration::from_secs(10)).await, leader);
    b.cluster.node(leader).restart().await;
    b.cluster.wait_stream_current(&b.stream, Duration::from_secs(30)).await;
    assert_eq!(seqs(&log.read(1, 1000).await.unwrap()), (1..=last).collect::<Vec<_>>());
    assert_eq!(log.last_seq().await.unwrap(), last);
}

/// Appends a new event on `signal`'s subject against the subject's newest sequence, as a writer
/// does through an election: an append answered "nothing was accepted" is retried as a new event
/// (its id may sit on the stream as a void copy) against the subject as it is now. Returns the
/// sequence and id of the event that counts.
async fn append_through_election(log: &SharedLog, signal: Uuid) -> (u64, Uuid) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let subject = subject_of(log, signal);
    loop {
        let last = match log.last_on_subject(&subject).await {
            Ok(last) => last.map_or(0, |s| s.seq),
            Err(e) if Instant::now() < deadline => {
                eprintln!("read unavailable, retrying: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            Err(e) => panic!("read failed: {e}"),
        };
        let event = event_on(signal);
        match log.append(&event, Expect::LastSubjectSeq(last)).await {
            Ok(a) => return (a.seq, event.event_id),
            // Both answers say nothing was stored; a conflict comes from a read a lagging
            // replica answered.
            Err(e @ (bus::Error::Unavailable(_) | bus::Error::Conflict { .. })) if Instant::now() < deadline => {
                eprintln!("append not accepted, retrying as a new event: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("append failed: {e}"),
        }
    }
}

/// A stream created with one replica on a cluster is refused by `--replicas 3` with the fix,
/// and left as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_replica_stream_is_reported_not_adopted() {
    let cluster = NatsCluster::start(NatsVersion::Current, 3).await;
    let stream = unique_stream();
    let single = connect(&cluster.urls(), &stream, 1).await;
    single.append(&event_on(Uuid::new_v4()), Expect::Any).await.unwrap();
    let config = JetStreamConfig { stream: stream.clone(), replicas: 3, ..Default::default() };
    let err = JetStreamLog::connect(&cluster.urls(), config).await.unwrap_err().to_string();
    assert!(err.contains("replicas: the stream has 1, --replicas asks for 3"), "{err}");
    assert!(err.contains("nats stream edit"), "{err}");
    let nats = async_nats::connect(cluster.urls().split(',').next().unwrap()).await.unwrap();
    let info = async_nats::jetstream::new(nats).get_stream(&stream).await.unwrap().get_info().await.unwrap();
    assert_eq!(info.config.num_replicas, 1, "the stream was left as it was");
    assert_eq!(info.state.messages, 1);
}
