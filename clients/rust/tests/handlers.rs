//! Scenario S23 of clients/SCENARIOS.md: `max_concurrent_handlers` — a slow handler does not
//! hold back the next signal, and never more than the limit run at once; the default is one at
//! a time, in arrival order. Against a real `signalbus serve`.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use signalbus_client::{Client, Error, SendOutcome, SendRequest};
use support::{acked, eventually, Bus};
use tokio::sync::Notify;

#[derive(Default)]
struct Probe {
    running: AtomicUsize,
    peak: AtomicUsize,
    started: Mutex<Vec<i64>>,
    done: Mutex<Vec<i64>>,
}

impl Probe {
    fn enter(&self, n: i64) {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        self.started.lock().unwrap().push(n);
    }
    fn leave(&self, n: i64) {
        self.running.fetch_sub(1, Ordering::SeqCst);
        self.done.lock().unwrap().push(n);
    }
}

fn id_of(out: &SendOutcome) -> String {
    out.sent().expect("sent").signal_id.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s23_max_concurrent_handlers() {
    let bus = Bus::start_new().await;
    let (at, bt) = (bus.token("alice").await, bus.token("bob").await);
    let probe = Arc::new(Probe::default());
    let release = Arc::new(Notify::new());
    let (p, r) = (probe.clone(), release.clone());
    let bob = Client::builder(&bus.url, &bt)
        .max_concurrent_handlers(2)
        .on_signal(move |sig, _| {
            let (p, r) = (p.clone(), r.clone());
            async move {
                let n = sig.payload["n"].as_i64().unwrap();
                p.enter(n);
                if n == 0 {
                    r.notified().await; // the slow one
                } else {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                p.leave(n);
                Ok(())
            }
        })
        .build()
        .unwrap();
    bob.connect().await.unwrap();
    let alice = bus.connected(&at).await;
    let mut sent = Vec::new();
    for n in 0..5 {
        sent.push(id_of(&alice.send(SendRequest::new("bob", "StatusUpdate").payload(json!({"n": n}))).await.unwrap()));
    }
    let pr = probe.clone();
    eventually("the others handled", 10, || {
        let pr = pr.clone();
        async move {
            let mut d = pr.done.lock().unwrap().clone();
            d.sort();
            Ok((d == vec![1, 2, 3, 4]).then_some(()))
        }
    })
    .await;
    assert_eq!(probe.peak.load(Ordering::SeqCst), 2);
    assert_eq!(*probe.started.lock().unwrap(), vec![0, 1, 2, 3, 4]); // started in arrival order
    for id in &sent[1..] {
        acked(&alice, id).await;
    }
    assert!(alice.get(&sent[0]).await.unwrap().acked_at.is_none());
    release.notify_one();
    acked(&alice, &sent[0]).await;
    assert_eq!(probe.peak.load(Ordering::SeqCst), 2);
    bob.close().await;

    // the default: one at a time, in arrival order
    let probe = Arc::new(Probe::default());
    let p = probe.clone();
    let bob = Client::builder(&bus.url, &bt)
        .on_signal(move |sig, _| {
            let p = p.clone();
            async move {
                let n = sig.payload["n"].as_i64().unwrap();
                p.enter(n);
                tokio::time::sleep(Duration::from_millis(50)).await;
                p.leave(n);
                Ok(())
            }
        })
        .build()
        .unwrap();
    bob.connect().await.unwrap();
    for n in 0..4 {
        alice.send(SendRequest::new("bob", "StatusUpdate").payload(json!({"n": n}))).await.unwrap();
    }
    let pr = probe.clone();
    eventually("four handled", 10, || {
        let pr = pr.clone();
        async move { Ok((pr.done.lock().unwrap().len() == 4).then_some(())) }
    })
    .await;
    assert_eq!((probe.done.lock().unwrap().clone(), probe.peak.load(Ordering::SeqCst)), (vec![0, 1, 2, 3], 1));
    bob.close().await;
    alice.close().await;
    assert!(matches!(Client::builder(&bus.url, &bt).max_concurrent_handlers(0).build(), Err(Error::Usage(_))));
}
