//! Scenarios S32 and S33 of clients/SCENARIOS.md: a scheduled send (held by the bus, invisible
//! to its recipient until `deliver_at`, recallable until then, and the refusals), and waiting for
//! a signal without polling (`inbox_wait`, `drain_wait`) — each against its own real
//! `signalbus serve`.
//!
//! Deliberately proves "before anything is sent" with a client whose bus cannot be reached: a
//! usage error there is the client's own, not a transport error.

mod support;

use std::time::{Duration, Instant};

use chrono::Utc;
use serde_json::json;
use signalbus_client::{default_ttl, Client, Error, InboxQuery, SendRequest, SignalRow};
use support::{eventually, Bus};

const WAIT: Duration = Duration::from_secs(15);

/// A client of a bus that is not there (nothing listens on the port).
fn nowhere() -> Client {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    Client::new(format!("http://127.0.0.1:{port}"), "sb_nobody").unwrap()
}

fn ms(t: chrono::DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

/// `signal_id`'s row once `ready` says so (the read models follow the stream).
async fn row_of(client: &Client, signal_id: &str, ready: fn(&SignalRow) -> bool) -> SignalRow {
    eventually(&format!("the row of {signal_id}"), 10, || async move {
        let r = client.get(signal_id).await?;
        Ok(ready(&r).then_some(r))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s32_scheduled_delivery() {
    let bus = Bus::start_new().await;
    let (at, bt) = (bus.token("alice").await, bus.token("bob").await);
    let alice = bus.connected(&at).await;
    let bob = bus.connected(&bt).await;

    let before = Utc::now();
    let req = SendRequest::new("bob", "StatusUpdate").payload(json!({"n": 1})).deliver_after(Duration::from_secs(2));
    let out = alice.send(req).await.unwrap();
    let sent = out.sent().expect("accepted, not spooled").clone();
    assert!(sent.queued && !sent.delivered, "{sent:?}");
    assert_eq!(sent.publish_path, "scheduled");
    assert!(sent.is_scheduled());
    let due = sent.deliver_at.expect("a scheduled send answers its deliver_at");
    let off = (due - (before + chrono::Duration::seconds(2))).num_milliseconds();
    assert!((-1000..=1000).contains(&off), "deliver_at {due} is {off} ms off now + 2 s");
    let ttl = chrono::Duration::seconds(default_ttl("StatusUpdate") as i64);
    assert_eq!(ms(sent.expires_at), ms(due + ttl), "a scheduled send's TTL counts from deliver_at");
    let row = row_of(&alice, &sent.signal_id, |_| true).await;
    assert_eq!(row.deliver_at.map(ms), Some(ms(due)));

    assert!(bob.inbox(None).await.unwrap().is_empty(), "invisible until deliver_at");
    match bob.receive(Duration::from_secs(1)).await {
        Err(Error::Timeout { .. }) => {}
        other => panic!("bob received something in the first second: {other:?}"),
    }
    let got = bob.receive(WAIT).await.unwrap();
    bob.ack([&got]).await.unwrap();
    assert_eq!((got.id.as_str(), &got.payload), (sent.signal_id.as_str(), &json!({"n": 1})));
    assert!(Utc::now() >= due - chrono::Duration::milliseconds(100), "received before deliver_at {due}");
    let pushed = row_of(&alice, &sent.signal_id, |r| r.delivered_at.is_some()).await;
    assert_eq!(pushed.delivered_via.as_deref(), Some("ws_push"));

    let later = alice.send(SendRequest::new("bob", "StatusUpdate").deliver_after(Duration::from_secs(30))).await;
    let later = later.unwrap().sent().unwrap().clone();
    assert!(later.is_scheduled(), "{later:?}");
    assert_eq!(alice.recall(&later.signal_id).await.unwrap(), signalbus_client::RecallOutcome::Recalled);
    assert!(matches!(bob.receive(Duration::from_secs(1)).await, Err(Error::Timeout { .. })));
    assert!(bob.inbox(None).await.unwrap().is_empty());

    // The bus judges the clock: a deliver_at in the past is its InvalidRequest (both ways).
    let past = || SendRequest::new("bob", "StatusUpdate").deliver_at(Utc::now() - chrono::Duration::seconds(5));
    let http_alice = Client::new(&bus.url, &at).unwrap();
    for sender in [&alice, &http_alice] {
        match sender.send(past()).await {
            Err(e @ Error::InvalidRequest(_)) => assert_eq!(e.status(), Some(400)),
            other => panic!("expected InvalidRequest, got {other:?}"),
        }
    }
    // The client judges the rest, before anything is sent (no bus needed to say so).
    let soon = Utc::now() + chrono::Duration::seconds(60);
    let refused = [
        SendRequest::new("bob", "StatusUpdate").deliver_after(Duration::from_secs(2)).deliver_at(soon),
        SendRequest::new("bob", "Blocker").deliver_after(Duration::from_secs(2)),
        SendRequest::new("bob", "StatusUpdate").delivery_class("sync").deliver_at(soon),
        SendRequest::new("bob", "StatusUpdate").deliver_after(Duration::ZERO),
    ];
    let offline = nowhere();
    for req in refused {
        for sender in [&alice, &offline] {
            match sender.send(req.clone()).await {
                Err(e @ Error::Usage(_)) => assert_eq!(e.code(), "usage"),
                other => panic!("expected Usage for {req:?}, got {other:?}"),
            }
        }
    }
    assert!(bob.inbox(None).await.unwrap().is_empty(), "nothing refused reached bob");
    alice.close().await;
    bob.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s33_waiting_without_polling() {
    let bus = Bus::start_new().await;
    let (at, bt) = (bus.token("alice").await, bus.token("bob").await);
    let alice = bus.connected(&at).await;
    let bob = Client::new(&bus.url, &bt).unwrap(); // never connects: HTTP only

    let later = |n: u64| {
        let alice = alice.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let out = alice.send(SendRequest::new("bob", "StatusUpdate").payload(json!({"n": n}))).await.unwrap();
            out.signal_id().unwrap().to_string()
        })
    };
    let started = Instant::now();
    let sender = later(1);
    let got = bob.inbox_wait(Duration::from_secs(10)).await.unwrap();
    let took = started.elapsed();
    let first = sender.await.unwrap();
    assert!(took < Duration::from_secs(5), "the wait ended after {took:?}, not when the signal came");
    assert_eq!(got.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(), vec![first.as_str()]);
    assert_eq!(bob.get(&first).await.unwrap().status(), "pending", "inbox_wait delivers nothing");
    let taken = bob.drain(None).await.unwrap();
    assert_eq!(taken.len(), 1);
    bob.ack(&taken).await.unwrap();

    let started = Instant::now();
    assert!(bob.inbox_wait(Duration::from_secs(1)).await.unwrap().is_empty());
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(900) && took < Duration::from_secs(5), "an empty wait of 1 s took {took:?}");

    let sender = later(2);
    let drained = bob.drain_wait(Duration::from_secs(10)).await.unwrap();
    let second = sender.await.unwrap();
    assert_eq!(drained.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(), vec![second.as_str()]);
    let row = row_of(&bob, &second, |r| r.delivered_at.is_some()).await;
    assert_eq!(row.delivered_via.as_deref(), Some("inbox"));
    bob.ack(&drained).await.unwrap();

    let sender = later(3);
    let q = InboxQuery { limit: Some(5), wait: Some(Duration::from_millis(9500)), drain: true };
    let third = bob.inbox_with(&q).await.unwrap();
    assert_eq!(third.iter().map(|s| s.id.clone()).collect::<Vec<_>>(), vec![sender.await.unwrap()]);

    let offline = nowhere();
    for client in [&bob, &offline] {
        assert!(matches!(client.inbox_wait(Duration::from_secs(61)).await, Err(Error::Usage(_))));
        assert!(matches!(client.drain_wait(Duration::from_millis(60_001)).await, Err(Error::Usage(_))));
    }
    alice.close().await;
}

/// Not a scenario of its own: a send to a group takes a schedule too, each member's entry with
/// its `deliver_at`, and the client's checks apply before anything is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduled_send_to_a_group() {
    let bus = Bus::start_new().await;
    let (at, bt) = (bus.token("alice").await, bus.token("bob").await);
    bus.admin().create_group("@ops", &Default::default(), None).await.unwrap();
    bus.admin().add_member("ops", "bob", None).await.unwrap();
    let alice = Client::new(&bus.url, &at).unwrap();
    let bob = Client::new(&bus.url, &bt).unwrap();
    let fan = alice.send_group(SendRequest::new("@ops", "StatusUpdate").deliver_after(Duration::from_secs(30))).await;
    let fan = fan.unwrap();
    let member = fan.member("bob").expect("bob's entry");
    assert!(member.accepted() && member.queued, "{member:?}");
    assert_eq!(member.publish_path.as_deref(), Some("scheduled"));
    assert!(member.deliver_at.is_some_and(|t| t > Utc::now() + chrono::Duration::seconds(20)), "{member:?}");
    assert!(bob.inbox(None).await.unwrap().is_empty(), "invisible until deliver_at");
    let both = SendRequest::new("@ops", "StatusUpdate").deliver_after(Duration::from_secs(1)).deliver_at(Utc::now());
    assert!(matches!(alice.send_group(both).await, Err(Error::Usage(_))));
}
