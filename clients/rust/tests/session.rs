//! Scenarios S1–S3 and S7–S10 of clients/SCENARIOS.md: the session (connect, heartbeat,
//! reconnect), sending to an available recipient, receiving, acking, redelivery and dedupe —
//! each against its own real `signalbus serve`.
//!
//! Deliberately no timing assertions: waits poll with `eventually`, sleeps only make time pass.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use signalbus_client::{Client, Error, SendOutcome, SendRequest, SendResult, Signal};
use support::{acked, eventually, Bus};
use tokio::sync::Notify;

const WAIT: Duration = Duration::from_secs(5);

fn sent(out: SendOutcome) -> SendResult {
    match out {
        SendOutcome::Sent(r) => r,
        SendOutcome::Spooled(s) => panic!("expected a send the bus accepted, got {s:?}"),
    }
}

type Got = Arc<Mutex<Vec<Signal>>>;

/// A client whose handler records each signal (and is acked after it returns).
fn recording(bus: &Bus, token: &str) -> (Client, Got) {
    let got: Got = Arc::default();
    let sink = got.clone();
    let client = Client::builder(&bus.url, token)
        .reconnect(Duration::from_millis(200), Duration::from_secs(1))
        .on_signal(move |s, _| {
            let sink = sink.clone();
            async move {
                sink.lock().unwrap().push(s);
                Ok(())
            }
        })
        .build()
        .unwrap();
    (client, got)
}

async fn count(got: &Got, n: usize) {
    let got = got.clone();
    eventually(&format!("{n} signals handled"), 10, || {
        let got = got.clone();
        async move { Ok((got.lock().unwrap().len() == n).then_some(())) }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s01_connect() {
    let bus = Bus::start_new().await;
    let tok = bus.token("alice").await;
    let alice = Client::builder(&bus.url, &tok).kind("daemon").build().unwrap();
    let w = alice.connect().await.unwrap();
    assert_eq!((w.identity.as_str(), w.tenant.as_str(), w.heartbeat_interval_ms), ("alice", "default", 750));
    uuid::Uuid::parse_str(&w.session_id).expect("a uuid session_id");
    let roster = alice.agents().await.unwrap();
    assert_eq!(roster.iter().find(|a| a.identity == "alice").map(|a| a.state.as_str()), Some("available"));
    alice.close().await;

    let bad = Client::new(&bus.url, "sb_not_a_token").unwrap();
    match bad.connect().await {
        Err(Error::Unauthorized(e)) => assert_eq!(e.status, Some(401)),
        other => panic!("expected Unauthorized, got {other:?}"),
    }
    // It does not retry: the state stays failed.
    assert!(matches!(bad.wait_connected(Duration::from_millis(300)).await, Err(Error::Unauthorized(_))));
    assert_eq!(bad.sessions_opened(), 0);
    bad.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s02_heartbeat_keeps_the_session_available() {
    let bus = Bus::start_new().await;
    let (at, bt) = (bus.token("alice").await, bus.token("bob").await);
    let bob = bus.connected(&bt).await;
    let alice = bus.connected(&at).await;
    // A shim session opened after bob's and then silent: once the bus calls it stale, bob's
    // session is older than --stale-after too, and only its pings kept it available.
    let carol = Client::new(&bus.url, &bus.token("carol").await).unwrap();
    let (status, body) =
        carol.http().raw(reqwest::Method::POST, "/v1/sessions", &[], Some(&json!({"kind": "shim"}))).await.unwrap();
    assert!(status.is_success(), "{status} {body}");
    eventually("carol's silent session turns stale", 15, || async {
        let roster = alice.agents().await?;
        Ok(roster.into_iter().find(|a| a.identity == "carol" && a.state == "not_available_stale").map(|_| ()))
    })
    .await;
    let res =
        sent(alice.send(SendRequest::new("bob", "Question").payload(json!({"q": "still there?"}))).await.unwrap());
    assert!(res.delivered && res.recipient_state == "available");
    let sig = bob.receive(WAIT).await.unwrap();
    assert_eq!(sig.id, res.signal_id);
    assert_eq!(bob.ack([&sig]).await.unwrap(), 1);
    alice.close().await;
    bob.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s03_send_every_class_to_an_available_recipient() {
    let bus = Bus::start_new().await;
    let (at, bt) = (bus.token("alice").await, bus.token("bob").await);
    let bob = bus.connected(&bt).await;
    let alice = bus.connected(&at).await;
    for class in ["sync", "async"] {
        let req = SendRequest::new("bob", "StatusUpdate").payload(json!({"cls": class})).delivery_class(class);
        let res = sent(alice.send(req).await.unwrap());
        assert_eq!(
            (
                res.delivered,
                res.queued,
                res.recipient_state.as_str(),
                res.delivery_class.as_str(),
                res.publish_path.as_str()
            ),
            (true, false, "available", class, "pushed_to_ws")
        );
        assert_eq!(res.resolved_to_session, bob.welcome().map(|w| w.session_id));
        let sig = bob.receive(WAIT).await.unwrap();
        assert_eq!(
            (sig.id.as_str(), sig.from.as_str(), sig.to.as_str(), &sig.payload, sig.delivery_class.as_str()),
            (res.signal_id.as_str(), "alice", "bob", &json!({"cls": class}), class)
        );
        bob.ack([&sig.id]).await.unwrap();
    }
    alice.close().await;
    bob.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s07_receive_and_ack() {
    let bus = Bus::start_new().await;
    let (at, bt) = (bus.token("alice").await, bus.token("bob").await);
    let alice = bus.connected(&at).await;
    let queued = sent(alice.send(SendRequest::new("bob", "TaskAssigned").payload(json!({"n": 0}))).await.unwrap());
    assert!(queued.queued);
    let (bob, got) = recording(&bus, &bt);
    bob.connect().await.unwrap();
    let pushed = sent(alice.send(SendRequest::new("bob", "StatusUpdate").payload(json!({"n": 1}))).await.unwrap());
    assert!(pushed.delivered);
    count(&got, 2).await;
    let mut ids: Vec<String> = got.lock().unwrap().iter().map(|s| s.id.clone()).collect();
    ids.sort();
    let mut want = vec![queued.signal_id.clone(), pushed.signal_id.clone()];
    want.sort();
    assert_eq!(ids, want); // the startup drain and the push may interleave
    for (id, via) in [(&queued.signal_id, "startup_drain"), (&pushed.signal_id, "ws_push")] {
        assert_eq!(acked(&alice, id).await.delivered_via.as_deref(), Some(via));
    }
    bob.close().await;

    let bob = bus.connected(&bt).await; // manual ack
    let manual = sent(alice.send(SendRequest::new("bob", "StatusUpdate").payload(json!({"n": 2}))).await.unwrap());
    let sig = bob.receive(WAIT).await.unwrap();
    assert_eq!(sig.id, manual.signal_id);
    assert_eq!(alice.get(&sig.id).await.unwrap().acked_at, None);
    assert_eq!(bob.ack([&sig.id]).await.unwrap(), 1);
    acked(&alice, &sig.id).await;
    bob.close().await;
    alice.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s08_redelivery_after_an_unacked_disconnect() {
    let bus = Bus::start_new().await;
    let (at, bt) = (bus.token("alice").await, bus.token("bob").await);
    let alice = bus.connected(&at).await;
    let first = bus.connected(&bt).await;
    let res = sent(alice.send(SendRequest::new("bob", "Question").payload(json!({"q": "unacked"}))).await.unwrap());
    let sig = first.receive(WAIT).await.unwrap();
    assert!(sig.id == res.signal_id && !sig.redelivered);
    first.close().await; // closes the session without acking
    let second = bus.connected(&bt).await;
    let again = second.receive(WAIT).await.unwrap();
    assert!(again.id == sig.id && again.redelivered, "{again:?}");
    second.ack([&again.id]).await.unwrap();
    acked(&alice, &sig.id).await;
    second.close().await;

    // A failing handler does not ack; after a dropped connection it runs again, then acks.
    let calls: Got = Arc::default();
    let seen = calls.clone();
    let bob = Client::builder(&bus.url, &bt)
        .reconnect(Duration::from_millis(200), Duration::from_secs(1))
        .on_signal(move |s, _| {
            let seen = seen.clone();
            async move {
                let n = {
                    let mut v = seen.lock().unwrap();
                    v.push(s);
                    v.len()
                };
                if n == 1 {
                    return Err("handler bug".into());
                }
                Ok(())
            }
        })
        .build()
        .unwrap();
    bob.connect().await.unwrap();
    let res2 = sent(alice.send(SendRequest::new("bob", "StatusUpdate").payload(json!({"n": "flaky"}))).await.unwrap());
    count(&calls, 1).await;
    bob.drop_connection();
    count(&calls, 2).await;
    let second_call = calls.lock().unwrap()[1].clone();
    assert!(second_call.id == res2.signal_id && second_call.redelivered);
    acked(&alice, &res2.signal_id).await;
    bob.close().await;
    alice.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s09_dedupe_of_redelivered_signals() {
    let bus = Bus::start_new().await;
    let (at, bt) = (bus.token("alice").await, bus.token("bob").await);
    let release = Arc::new(Notify::new());
    let calls: Got = Arc::default();
    let (gate, seen) = (release.clone(), calls.clone());
    let bob = Client::builder(&bus.url, &bt)
        .reconnect(Duration::from_millis(200), Duration::from_secs(1))
        .on_signal(move |s, _| {
            let (gate, seen) = (gate.clone(), seen.clone());
            async move {
                seen.lock().unwrap().push(s);
                gate.notified().await;
                Ok(())
            }
        })
        .build()
        .unwrap();
    bob.connect().await.unwrap();
    let alice = bus.connected(&at).await;
    let res = sent(alice.send(SendRequest::new("bob", "StatusUpdate").payload(json!({"n": 1}))).await.unwrap());
    count(&calls, 1).await;
    bob.drop_connection(); // delivered, not acked: redelivered on the next session
    let b = bob.clone();
    eventually("the redelivery, dropped", 15, || {
        let b = b.clone();
        async move { Ok((b.duplicates_dropped() == 1).then_some(())) }
    })
    .await;
    release.notify_one();
    acked(&alice, &res.signal_id).await;
    assert_eq!(calls.lock().unwrap().len(), 1, "the handler ran once");
    assert_eq!(bob.sessions_opened(), 2);
    bob.close().await;
    alice.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s10_reconnect_after_a_server_restart() {
    let mut bus = Bus::start_new().await;
    let (at, bt) = (bus.token("alice").await, bus.token("bob").await);
    let alice =
        Client::builder(&bus.url, &at).reconnect(Duration::from_millis(200), Duration::from_secs(1)).build().unwrap();
    alice.connect().await.unwrap();
    let (bob, got) = recording(&bus, &bt);
    bob.connect().await.unwrap();
    bus.kill();
    alice.wait_disconnected(WAIT).await.unwrap();
    bob.wait_disconnected(WAIT).await.unwrap();
    bus.start().await; // same port, same data dir
    alice.wait_connected(Duration::from_secs(20)).await.unwrap();
    let welcome = bob.wait_connected(Duration::from_secs(20)).await.unwrap();
    assert_eq!((alice.sessions_opened(), bob.sessions_opened()), (2, 2));
    let a = alice.clone();
    eventually("bob available again", 15, || {
        let a = a.clone();
        async move { Ok(a.agents().await?.iter().any(|x| x.identity == "bob" && x.state == "available").then_some(())) }
    })
    .await;
    let res =
        sent(alice.send(SendRequest::new("bob", "Question").payload(json!({"q": "after restart"}))).await.unwrap());
    assert!(res.delivered);
    assert_eq!(res.resolved_to_session.as_deref(), Some(welcome.session_id.as_str()));
    count(&got, 1).await;
    assert_eq!(got.lock().unwrap()[0].id, res.signal_id);
    bob.close().await;
    alice.close().await;
}
