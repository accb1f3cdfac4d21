//! Unit tests of the embedded log against real SQLite files in temp dirs: order, dedupe,
//! compare-and-set (also inside one group-commit batch), tails, reopen, batching, throughput.
//!
//! Deliberately does not repeat the backend-neutral cases of `tests/log_conformance.rs`
//! beyond what the embedded design itself makes risky (batching, the writer, reopening).

use std::time::{Duration, Instant};

use chrono::Utc;
use futures::{future::join_all, StreamExt};
use sqlx::{ConnectOptions, Connection};
use tempfile::TempDir;
use uuid::Uuid;

use super::writer::{AppendRequest, Command};
use super::{Durability, EmbeddedLog};
use crate::error::Error;
use crate::event::{Entity, Event, EventBody, SessionHeartbeat};
use crate::log::{Appended, EventLog, Expect};

fn heartbeat(session: Uuid) -> Event {
    let body = EventBody::SessionHeartbeat(SessionHeartbeat { session_id: session, identity: "alice".into() });
    Event::new("default", Some("alice".into()), Utc::now(), body)
}

fn subject(log: &EmbeddedLog, session: Uuid) -> String {
    log.subjects().of("default", Entity::Session(session))
}

async fn open() -> (TempDir, EmbeddedLog) {
    let dir = tempfile::tempdir().unwrap();
    let log = EmbeddedLog::open(&dir.path().join("data")).await.unwrap();
    (dir, log)
}

fn fresh(seq: u64) -> Appended {
    Appended { seq, duplicate: false }
}

#[tokio::test]
async fn appends_are_read_back_in_order() {
    let (_dir, log) = open().await;
    let sessions = [Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4()];
    let mut events = Vec::new();
    for i in 0..10 {
        let e = heartbeat(sessions[i % 3]);
        assert_eq!(log.append(&e, Expect::Any).await.unwrap(), fresh(i as u64 + 1));
        events.push(e);
    }
    let all = log.read(0, 100).await.unwrap();
    assert_eq!(all.iter().map(|s| s.seq).collect::<Vec<_>>(), (1..=10).collect::<Vec<_>>());
    assert_eq!(all.iter().map(|s| s.event.clone()).collect::<Vec<_>>(), events);
    assert_eq!(all[0].subject, subject(&log, sessions[0]));

    let page = log.read(5, 3).await.unwrap();
    assert_eq!(page.iter().map(|s| s.seq).collect::<Vec<_>>(), vec![5, 6, 7]);
    assert!(log.read(11, 10).await.unwrap().is_empty());
    assert!(log.read(1, 0).await.unwrap().is_empty());

    let first = log.read_subject(&subject(&log, sessions[0])).await.unwrap();
    assert_eq!(first.iter().map(|s| s.seq).collect::<Vec<_>>(), vec![1, 4, 7, 10]);
    let last = log.last_on_subject(&subject(&log, sessions[1])).await.unwrap().unwrap();
    assert_eq!((last.seq, &last.event), (8, &events[7]));
    assert!(log.last_on_subject("signalbus.default.sess.none").await.unwrap().is_none());
    assert!(log.read_subject("signalbus.default.sess.none").await.unwrap().is_empty());
    assert_eq!(log.last_seq().await.unwrap(), 10);
    log.ping().await.unwrap();
    log.close().await;
}

#[tokio::test]
async fn compare_and_set_has_one_winner_and_losers_store_nothing() {
    let (_dir, log) = open().await;
    let s = Uuid::new_v4();
    assert_eq!(log.append(&heartbeat(s), Expect::LastSubjectSeq(0)).await.unwrap(), fresh(1));
    match log.append(&heartbeat(s), Expect::LastSubjectSeq(0)).await {
        Err(Error::Conflict { subject: sub, expected: 0, found: Some(1) }) => assert_eq!(sub, subject(&log, s)),
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert_eq!(log.last_seq().await.unwrap(), 1);
    // Another subject's events do not move this subject's last sequence.
    log.append(&heartbeat(Uuid::new_v4()), Expect::Any).await.unwrap();
    assert_eq!(log.append(&heartbeat(s), Expect::LastSubjectSeq(1)).await.unwrap(), fresh(3));

    // Racing contenders on one fresh subject: exactly one is stored.
    for round in 0..20 {
        let s = Uuid::new_v4();
        let results = join_all((0..50).map(|_| {
            let log = log.clone();
            tokio::spawn(async move { log.append(&heartbeat(s), Expect::LastSubjectSeq(0)).await })
        }))
        .await;
        let won = results.iter().filter(|r| matches!(r, Ok(Ok(_)))).count();
        let lost = results.iter().filter(|r| matches!(r, Ok(Err(Error::Conflict { .. })))).count();
        assert_eq!((won, lost), (1, 49), "round {round}");
        assert_eq!(log.read_subject(&subject(&log, s)).await.unwrap().len(), 1);
    }
    log.close().await;
}

/// Commands sent to the writer that it has not taken off its queue yet.
fn queued(log: &EmbeddedLog) -> usize {
    let commands = &log.inner.commands;
    commands.max_capacity() - commands.capacity()
}

/// Waits (polling, bounded) until `cond` holds.
async fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Holds SQLite's write lock from a second connection so the writer stalls on its next batch
/// (the plug) while the test queues `requests` requests behind it: they then all land in one
/// following batch. Waits for the writer's queue itself, not for time to pass: first until the
/// writer has taken the plug, then until all `requests` wait behind it.
async fn with_writer_stalled<F, T>(log: &EmbeddedLog, requests: usize, queue: F) -> T
where
    F: std::future::Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let mut blocker = sqlx::sqlite::SqliteConnectOptions::new().filename(log.path()).connect().await.unwrap();
    sqlx::query("BEGIN IMMEDIATE").execute(&mut blocker).await.unwrap();
    // Sent straight to the writer's queue (as `append` does) so that once the queue is empty
    // again the writer has certainly taken it.
    let plug = {
        let event = heartbeat(Uuid::new_v4());
        let (reply, answer) = tokio::sync::oneshot::channel();
        let req = AppendRequest {
            event_id: event.event_id,
            subject: log.subjects().for_event(&event),
            body: crate::codec::encode(&event).unwrap(),
            event: None,
            expect: Expect::Any,
            store_by: crate::acceptance::store_by(&event.body),
            reply,
        };
        log.inner.commands.send(Command::Append(req)).await.unwrap();
        answer
    };
    until("the writer takes the plug and stalls", || queued(log) == 0).await;
    let queued_requests = tokio::spawn(queue);
    until(&format!("{requests} requests queue behind the plug"), || queued(log) == requests).await;
    sqlx::query("ROLLBACK").execute(&mut blocker).await.unwrap();
    blocker.close().await.unwrap();
    plug.await.unwrap().unwrap();
    queued_requests.await.unwrap()
}

#[tokio::test]
async fn appends_in_one_batch_behave_as_if_sequential() {
    let (_dir, log) = open().await;
    let s = Uuid::new_v4();
    let first = heartbeat(s);
    let l = log.clone();
    let results = with_writer_stalled(&log, 6, async move {
        // Polled in this order, so queued in this order; the plug will be seq 1.
        join_all([
            l.append(&first, Expect::LastSubjectSeq(0)), // 2: wins on the empty subject
            l.append(&heartbeat(s), Expect::LastSubjectSeq(0)), // loses: 2 is now the last
            l.append(&heartbeat(s), Expect::LastSubjectSeq(2)), // 3: sees 2 from the same batch
            l.append(&first, Expect::LastSubjectSeq(0)), // retry of the first: dedupe
            l.append(&heartbeat(s), Expect::Any),        // 4
            l.append(&heartbeat(s), Expect::LastSubjectSeq(3)), // loses: 4 is now the last
        ])
        .await
    })
    .await;
    assert_eq!(results[0].as_ref().unwrap(), &fresh(2));
    assert!(matches!(results[1], Err(Error::Conflict { expected: 0, found: Some(2), .. })), "{:?}", results[1]);
    assert_eq!(results[2].as_ref().unwrap(), &fresh(3));
    assert_eq!(results[3].as_ref().unwrap(), &Appended { seq: 2, duplicate: true });
    assert_eq!(results[4].as_ref().unwrap(), &fresh(4));
    assert!(matches!(results[5], Err(Error::Conflict { expected: 3, found: Some(4), .. })), "{:?}", results[5]);
    assert_eq!(log.commit_stats(), (2, 4), "the plug's transaction and one batch");
    let seqs: Vec<u64> = log.read(1, 100).await.unwrap().iter().map(|s| s.seq).collect();
    assert_eq!(seqs, vec![1, 2, 3, 4]);
    log.close().await;
}

#[tokio::test]
async fn a_retried_event_id_answers_its_original_seq_forever() {
    let dir = tempfile::tempdir().unwrap();
    let log = EmbeddedLog::open(dir.path()).await.unwrap();
    let e = heartbeat(Uuid::new_v4());
    assert_eq!(log.append(&e, Expect::Any).await.unwrap(), fresh(1));
    log.append(&heartbeat(Uuid::new_v4()), Expect::Any).await.unwrap();
    let dup = Appended { seq: 1, duplicate: true };
    assert_eq!(log.append(&e, Expect::Any).await.unwrap(), dup);
    // Dedupe comes before compare-and-set: the retry of a stored append never conflicts.
    assert_eq!(log.append(&e, Expect::LastSubjectSeq(0)).await.unwrap(), dup);
    assert_eq!(log.append(&e, Expect::LastSubjectSeq(7)).await.unwrap(), dup);
    assert_eq!(log.last_seq().await.unwrap(), 2);
    log.close().await;

    let log = EmbeddedLog::open(dir.path()).await.unwrap();
    assert_eq!(log.append(&e, Expect::Any).await.unwrap(), dup);
    assert_eq!(log.last_seq().await.unwrap(), 2);
    log.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_yields_stored_then_new_events_without_gaps() {
    let (_dir, log) = open().await;
    let mut from_start = log.tail(0).await.unwrap(); // opened on an empty log
    for _ in 0..5 {
        log.append(&heartbeat(Uuid::new_v4()), Expect::Any).await.unwrap();
    }
    let mut from_three = log.tail(3).await.unwrap();
    let writers: Vec<_> = (0..4)
        .map(|_| {
            let log = log.clone();
            tokio::spawn(async move {
                for _ in 0..250 {
                    log.append(&heartbeat(Uuid::new_v4()), Expect::Any).await.unwrap();
                }
            })
        })
        .collect();
    for (tail, first) in [(&mut from_start, 1u64), (&mut from_three, 3)] {
        let mut expected = first;
        while expected <= 1_005 {
            let next = tokio::time::timeout(Duration::from_secs(10), tail.next()).await.expect("tail stalled");
            assert_eq!(next.unwrap().unwrap().seq, expected);
            expected += 1;
        }
    }
    join_all(writers).await;
    // Nothing more is stored, so the tail waits rather than ending.
    assert!(tokio::time::timeout(Duration::from_millis(100), from_start.next()).await.is_err());
    log.append(&heartbeat(Uuid::new_v4()), Expect::Any).await.unwrap();
    assert_eq!(from_start.next().await.unwrap().unwrap().seq, 1_006);

    log.close().await;
    assert!(matches!(from_start.next().await, Some(Err(Error::Unavailable(_)))));
    assert!(from_start.next().await.is_none());
}

#[tokio::test]
async fn both_durabilities_store_and_keep_what_they_answered() {
    for durability in [Durability::EveryCommit, Durability::Within(Duration::from_millis(20))] {
        let dir = tempfile::tempdir().unwrap();
        let log = EmbeddedLog::open_with(dir.path(), durability).await.unwrap();
        for seq in 1..=3 {
            assert_eq!(log.append(&heartbeat(Uuid::new_v4()), Expect::Any).await.unwrap(), fresh(seq));
        }
        // Idle past the bound: the writer syncs on its own, and keeps taking appends after.
        tokio::time::sleep(Duration::from_millis(60)).await;
        assert_eq!(log.append(&heartbeat(Uuid::new_v4()), Expect::Any).await.unwrap(), fresh(4));
        log.close().await;
        let reopened = EmbeddedLog::open(dir.path()).await.unwrap();
        assert_eq!(reopened.last_seq().await.unwrap(), 4, "{durability:?}");
        reopened.close().await;
    }
}

#[tokio::test]
async fn a_live_tail_reads_from_the_ring_exactly_what_the_table_holds() {
    let (_dir, log) = open().await;
    let mut tail = log.tail(1).await.unwrap();
    for _ in 0..20 {
        log.append(&heartbeat(Uuid::new_v4()), Expect::Any).await.unwrap();
    }
    let mut live = Vec::new();
    for _ in 0..20 {
        let next = tokio::time::timeout(Duration::from_secs(5), tail.next()).await.expect("tail stalled");
        live.push(next.unwrap().unwrap());
    }
    // The ring held all of them; what it gave is what a read of the table decodes.
    assert!(matches!(log.inner.recent.since(1, 1), super::recent::Lookup::Events(_)));
    let table = log.read(1, 100).await.unwrap();
    assert_eq!(table.len(), 20);
    for (from_ring, from_table) in live.iter().zip(&table) {
        assert_eq!((from_ring.seq, &from_ring.subject), (from_table.seq, &from_table.subject));
        assert_eq!(from_ring.event, from_table.event);
    }
    log.close().await;
}

#[tokio::test]
async fn a_tail_sees_what_another_handle_on_the_file_appends() {
    let dir = tempfile::tempdir().unwrap();
    let ours = EmbeddedLog::open(dir.path()).await.unwrap();
    let theirs = EmbeddedLog::open(dir.path()).await.unwrap();
    let mut tail = ours.tail(1).await.unwrap();
    assert_eq!(theirs.append(&heartbeat(Uuid::new_v4()), Expect::Any).await.unwrap(), fresh(1));
    // Both writers take the write lock per batch and re-read the newest seq: no seq is reused.
    assert_eq!(ours.append(&heartbeat(Uuid::new_v4()), Expect::Any).await.unwrap(), fresh(2));
    assert_eq!(theirs.append(&heartbeat(Uuid::new_v4()), Expect::Any).await.unwrap(), fresh(3));
    for seq in 1..=3 {
        let next = tokio::time::timeout(Duration::from_secs(5), tail.next()).await.expect("tail stalled");
        assert_eq!(next.unwrap().unwrap().seq, seq);
    }
    theirs.close().await;
    ours.close().await;
}

#[tokio::test]
async fn a_batch_that_cannot_commit_is_unavailable_and_stores_nothing() {
    let (_dir, log) = open().await;
    let mut blocker = sqlx::sqlite::SqliteConnectOptions::new().filename(log.path()).connect().await.unwrap();
    sqlx::query("BEGIN IMMEDIATE").execute(&mut blocker).await.unwrap();
    // The writer waits out its busy timeout on the lock, then gives the batch up.
    let refused = log.append(&heartbeat(Uuid::new_v4()), Expect::Any).await;
    assert!(matches!(refused, Err(Error::Unavailable(_))), "{refused:?}");
    sqlx::query("ROLLBACK").execute(&mut blocker).await.unwrap();
    assert_eq!(log.last_seq().await.unwrap(), 0);
    // The writer carries on, and the refused batch left no hole in the sequence.
    assert_eq!(log.append(&heartbeat(Uuid::new_v4()), Expect::Any).await.unwrap(), fresh(1));
    log.close().await;
}

#[tokio::test]
async fn reopening_keeps_everything_and_sequences_continue() {
    let dir = tempfile::tempdir().unwrap();
    let s = Uuid::new_v4();
    let log = EmbeddedLog::open(dir.path()).await.unwrap();
    for _ in 0..10 {
        log.append(&heartbeat(s), Expect::Any).await.unwrap();
    }
    let before = log.read(1, 100).await.unwrap();
    log.close().await;
    // Closed: appends and reads are refused, closing again is harmless.
    assert!(matches!(log.append(&heartbeat(s), Expect::Any).await, Err(Error::Unavailable(_))));
    assert!(matches!(log.read(1, 1).await, Err(Error::Unavailable(_))));
    assert!(log.ping().await.is_err());
    log.close().await;

    let log = EmbeddedLog::open(dir.path()).await.unwrap();
    assert_eq!(log.read(1, 100).await.unwrap(), before);
    assert_eq!(log.last_seq().await.unwrap(), 10);
    assert!(matches!(log.append(&heartbeat(s), Expect::LastSubjectSeq(9)).await, Err(Error::Conflict { .. })));
    assert_eq!(log.append(&heartbeat(s), Expect::LastSubjectSeq(10)).await.unwrap(), fresh(11));
    log.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_appends_are_group_committed() {
    let (_dir, log) = open().await;
    let handles: Vec<_> = (0..1_000)
        .map(|_| {
            let log = log.clone();
            tokio::spawn(async move { log.append(&heartbeat(Uuid::new_v4()), Expect::Any).await.unwrap().seq })
        })
        .collect();
    let mut seqs: Vec<u64> = join_all(handles).await.into_iter().map(Result::unwrap).collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=1_000).collect::<Vec<_>>());
    let (transactions, appends) = log.commit_stats();
    println!("1000 concurrent appends committed in {transactions} transactions");
    assert_eq!(appends, 1_000);
    assert!(transactions < 100, "{transactions} transactions: appends were not batched");
    log.close().await;
}

/// `cargo test -p bus --lib embedded::tests::throughput -- --ignored --nocapture`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, not a check"]
async fn throughput() {
    const TOTAL: usize = 20_000;
    const TASKS: usize = 64;
    let (_dir, log) = open().await;
    let started = Instant::now();
    let handles: Vec<_> = (0..TASKS)
        .map(|task| {
            let log = log.clone();
            let share = TOTAL / TASKS + usize::from(task < TOTAL % TASKS);
            tokio::spawn(async move {
                for _ in 0..share {
                    log.append(&heartbeat(Uuid::new_v4()), Expect::Any).await.unwrap();
                }
            })
        })
        .collect();
    join_all(handles).await;
    let elapsed = started.elapsed();
    let (transactions, appends) = log.commit_stats();
    println!(
        "{appends} appends from {TASKS} tasks in {elapsed:.2?}: {:.0}/s, {transactions} transactions, {:.1} per batch",
        appends as f64 / elapsed.as_secs_f64(),
        appends as f64 / transactions as f64
    );
    log.close().await;
}

/// `open` and `close` are called from spawned tasks (`serve` starts roles concurrently).
#[test]
fn open_and_close_futures_are_send() {
    fn send<T: Send>(_: T) {}
    send(EmbeddedLog::open(std::path::Path::new("unused")));
    let log: Option<EmbeddedLog> = None;
    if let Some(log) = &log {
        send(log.close());
    }
}
