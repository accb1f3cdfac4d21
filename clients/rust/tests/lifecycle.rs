//! The client's lifecycle beyond the scenarios of clients/SCENARIOS.md, against a real
//! `signalbus serve`: dropping the last handle ends the session for good (no reconnect), and
//! auto-acks go out batched (fewer ack calls than signals).
//!
//! Deliberately no timing assertions: waits poll with `eventually`, sleeps only make time pass.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use signalbus_client::{Agent, Client, SendOutcome, SendRequest, Signal};
use support::{acked, eventually, Bus};
use tokio::sync::Notify;

async fn roster_entry(alice: &Client, identity: &str) -> signalbus_client::Result<Option<Agent>> {
    Ok(alice.agents().await?.into_iter().find(|a| a.identity == identity))
}

fn signal_id(out: SendOutcome) -> String {
    out.sent().expect("a send the bus accepted").signal_id.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_last_handle_closes_the_session_for_good() {
    let bus = Bus::start_new().await;
    let (at, bt) = (bus.token("alice").await, bus.token("bob").await);
    let alice = bus.connected(&at).await;
    let spool = tempfile::tempdir().unwrap();
    let bob = Client::builder(&bus.url, &bt)
        .reconnect(Duration::from_millis(200), Duration::from_secs(1))
        .spool_dir(spool.path()) // the replay task must not keep the client alive either
        .on_signal(|_sig: Signal, _me: Client| async { Ok(()) })
        .build()
        .unwrap();
    bob.connect().await.unwrap();
    // The handler was lent a handle: it must not keep the client alive once it returned.
    let id = signal_id(alice.send(SendRequest::new("bob", "StatusUpdate").payload(json!({"n": 1}))).await.unwrap());
    acked(&alice, &id).await;

    let last = bob.clone();
    drop(bob); // another handle is left: the client keeps serving
    let id = signal_id(alice.send(SendRequest::new("bob", "StatusUpdate").payload(json!({"n": 2}))).await.unwrap());
    acked(&alice, &id).await;
    assert!(last.connected());
    drop(last);

    eventually("bob's session closed by the bus", 15, || async {
        Ok(roster_entry(&alice, "bob").await?.filter(|b| b.live_sessions == 0 && b.state != "available"))
    })
    .await;
    // A reconnect (backoff at most 1 s) would show up as a live session again.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let bob_now = roster_entry(&alice, "bob").await.unwrap().expect("bob in the roster");
    assert_eq!((bob_now.live_sessions, bob_now.state == "available"), (0, false), "{bob_now:?}");
    alice.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_acks_are_batched() {
    const N: usize = 10;
    let bus = Bus::start_new().await;
    let (at, bt) = (bus.token("alice").await, bus.token("bob").await);
    let alice = bus.connected(&at).await;
    let gate = Arc::new(Notify::new());
    let handled: Arc<Mutex<Vec<String>>> = Arc::default();
    let (g, h) = (gate.clone(), handled.clone());
    let bob = Client::builder(&bus.url, &bt)
        // A wide window, so the batch does not depend on how fast this machine is.
        .ack_batching(100, Duration::from_millis(500))
        .on_signal(move |sig: Signal, _me: Client| {
            let (g, h) = (g.clone(), h.clone());
            async move {
                let first = h.lock().unwrap().is_empty();
                if first {
                    g.notified().await; // hold the queue until every signal is pushed
                }
                h.lock().unwrap().push(sig.id);
                Ok(())
            }
        })
        .build()
        .unwrap();
    bob.connect().await.unwrap();
    let mut ids = Vec::new();
    for n in 0..N {
        let req = SendRequest::new("bob", "StatusUpdate").payload(json!({"n": n})).delivery_class("async");
        ids.push(signal_id(alice.send(req).await.unwrap()));
    }
    for id in &ids {
        eventually(&format!("{id} pushed to bob"), 10, || async {
            Ok(alice.get(id).await?.delivered_at.is_some().then_some(()))
        })
        .await;
    }
    gate.notify_one();
    for id in &ids {
        acked(&alice, id).await;
    }
    assert_eq!(handled.lock().unwrap().len(), N);
    let calls = bob.ack_calls();
    assert!(calls >= 1 && (calls as usize) < N, "{N} signals acked in {calls} ack calls");
    bob.close().await;
    alice.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_flushes_the_buffered_acks() {
    let bus = Bus::start_new().await;
    let (at, bt) = (bus.token("alice").await, bus.token("bob").await);
    let alice = bus.connected(&at).await;
    let bob = Client::builder(&bus.url, &bt)
        .ack_batching(100, Duration::from_secs(3600)) // longer than the test: only close() sends it
        .build()
        .unwrap();
    bob.connect().await.unwrap();
    let responder = alice.clone();
    let answering = tokio::spawn(async move {
        let question = responder.receive(Duration::from_secs(10)).await.unwrap();
        responder.ack([&question.id]).await.unwrap();
        responder.reply(&question, "Answer", json!({"a": 42})).await.unwrap();
    });
    // An ask's reply is queued for the ack before the ask returns it.
    let answer = bob.ask("alice", "Question", json!({"q": "?"}), Duration::from_secs(10)).await.unwrap();
    answering.await.unwrap();
    assert_eq!(alice.get(&answer.id).await.unwrap().acked_at, None, "held in the batch");
    bob.close().await;
    acked(&alice, &answer.id).await;
    alice.close().await;
}

/// S25: connection events in order across a `kill -9` and restart of the bus, then close; and
/// a refused token (rotate: 1008) is `Disconnected` then `Closed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s25_connection_events_in_order() {
    use signalbus_client::ConnectionEvent::{self, *};
    use tokio::sync::broadcast::Receiver;

    async fn next(rx: &mut Receiver<ConnectionEvent>, secs: u64) -> ConnectionEvent {
        tokio::time::timeout(Duration::from_secs(secs), rx.recv()).await.expect("an event in time").unwrap()
    }

    let mut bus = Bus::start_new().await;
    let at = bus.token("alice").await;
    let alice = Client::builder(&bus.url, &at)
        .reconnect(Duration::from_millis(100), Duration::from_millis(500))
        .build()
        .unwrap();
    let mut events = alice.connection_events();
    alice.connect().await.unwrap();
    assert_eq!(next(&mut events, 5).await, Connected);
    bus.kill();
    assert_eq!(next(&mut events, 10).await, Disconnected);
    bus.start().await; // same port, same data dir
    assert_eq!(next(&mut events, 20).await, Reconnected);
    alice.close().await;
    alice.close().await; // Closed is told once
    assert_eq!(next(&mut events, 5).await, Closed);
    assert!(events.try_recv().is_err());

    let et = bus.token("erin").await;
    let erin = Client::new(&bus.url, &et).unwrap();
    let mut told = erin.connection_events();
    erin.connect().await.unwrap();
    assert_eq!(next(&mut told, 5).await, Connected);
    bus.admin().rotate("erin", None).await.unwrap();
    assert_eq!(next(&mut told, 10).await, Disconnected);
    assert_eq!(next(&mut told, 10).await, Closed);
    erin.close().await;
    assert!(told.try_recv().is_err());
}
