//! Scenario S26 of clients/SCENARIOS.md: the received signals as a `Stream`, ending when the
//! client closes. Against a real `signalbus serve`.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use serde_json::json;
use signalbus_client::{Client, Error, SendRequest, Signal};
use support::{acked, eventually, Bus};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s26_a_stream_of_signals() {
    let bus = Bus::start_new().await;
    let (at, bt) = (bus.token("alice").await, bus.token("bob").await);
    let alice = bus.connected(&at).await;
    let bob = bus.connected(&bt).await;
    let got: Arc<Mutex<Vec<Signal>>> = Arc::default();
    let (sink, b) = (got.clone(), bob.clone());
    let mut signals = Box::pin(bob.signals().unwrap());
    let consumer = tokio::spawn(async move {
        while let Some(sig) = signals.next().await {
            b.ack([sig.id.as_str()]).await.unwrap();
            sink.lock().unwrap().push(sig);
        }
    });
    let mut sent = Vec::new();
    for n in 0..3 {
        let out = alice.send(SendRequest::new("bob", "StatusUpdate").payload(json!({"n": n}))).await.unwrap();
        sent.push(out.sent().unwrap().signal_id.clone());
    }
    let g = got.clone();
    eventually("three signals", 10, || {
        let g = g.clone();
        async move { Ok((g.lock().unwrap().len() == 3).then_some(())) }
    })
    .await;
    let ids: Vec<String> = got.lock().unwrap().iter().map(|s| s.id.clone()).collect();
    assert_eq!(ids, sent);
    acked(&alice, &sent[2]).await;
    bob.close().await; // ends the stream
    tokio::time::timeout(Duration::from_secs(5), consumer).await.expect("the stream ended").unwrap();
    alice.close().await;
    let handled = Client::builder(&bus.url, &bt).on_signal(|_, _| async { Ok(()) }).build().unwrap();
    assert!(matches!(handled.signals().map(|_| ()), Err(Error::Usage(_))));
}
